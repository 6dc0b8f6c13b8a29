//! Worker scripts (run as `sh -c`); files are named `<tag>.<what>` inside the test's temp dir.

use super::TempDir;

/// Records REDLOCK_TOKEN, REDLOCK_FENCING_TOKEN and its pid, creates `<tag>.ready`, then runs
/// until the test creates `<tag>.go`, and exits 0.
pub fn hold_script(dir: &TempDir, tag: &str) -> String {
    format!(
        "echo \"$REDLOCK_TOKEN\" > {token}; echo \"$REDLOCK_FENCING_TOKEN\" > {fence}; \
         echo $$ > {pid}; touch {ready}; while [ ! -e {go} ]; do sleep 0.02; done",
        token = dir.sh(&format!("{tag}.token")),
        fence = dir.sh(&format!("{tag}.fence")),
        pid = dir.sh(&format!("{tag}.pid")),
        ready = dir.sh(&format!("{tag}.ready")),
        go = dir.sh(&format!("{tag}.go")),
    )
}

/// Records its pid, creates `<tag>.ready`, then appends a `date +%s%N` heartbeat to `<tag>.hb`
/// every ~50 ms forever.
pub fn heartbeat_script(dir: &TempDir, tag: &str) -> String {
    format!(
        "echo $$ > {pid}; date +%s%N >> {hb}; touch {ready}; \
         while :; do date +%s%N >> {hb}; sleep 0.05; done",
        pid = dir.sh(&format!("{tag}.pid")),
        hb = dir.sh(&format!("{tag}.hb")),
        ready = dir.sh(&format!("{tag}.ready")),
    )
}

/// A command that only creates `marker`: proves whether redlock ran the command at all.
pub fn marker_script(dir: &TempDir) -> String {
    format!("touch {}", dir.sh("marker"))
}
