//! A PostgreSQL primary failed over to its streaming standby, on real servers, as
//! docs/postgres.md says: an asynchronous standby can lose a take the primary answered (its
//! fencing token is then given out twice), and a synchronous one with `synchronous_commit =
//! remote_apply` loses nothing answered (the tokens still rise after the promotion; a take it
//! could not confirm is never answered, and its command never runs). The synchronous standby is
//! set up from the page's own lines, in the page's order.

use crate::common::*;

/// The fencing token a run on `url` is given, run to its end.
fn token(url: &str) -> i64 {
    let out = Redlock::run_at(url)
        .key("job")
        .sh("echo \"$REDLOCK_FENCING_TOKEN\"")
        .any_stdout()
        .output();
    out.stdout.trim().parse().unwrap()
}

/// The standby stops streaming (no WAL reaches it from now on), as a network cut would.
fn cut_off(standby: &PgServer) {
    standby.psql("ALTER SYSTEM SET primary_conninfo = ''");
    standby.psql("SELECT pg_reload_conf()");
    wait_until(PATIENCE, "the standby's WAL receiver to stop", || {
        standby.psql("SELECT count(*) FROM pg_stat_wal_receiver") == "0"
    });
}

/// The counter of lock `job` as `pg` has it ("" before it has the row).
fn counter(pg: &PgServer) -> String {
    pg.psql("SELECT fence FROM redlock.locks WHERE name = 'redlock:job'")
}

#[test]
fn an_asynchronous_standby_promoted_can_give_a_token_out_twice() {
    let mut primary = PgServer::start();
    Redlock::admin_at("init", &primary.url())
        .any_stdout()
        .output();
    let standby = primary.standby();
    standby.walreceiver_pid();
    // A new lock's first token is the server's clock; one more per take after it.
    let first = token(&primary.url());
    wait_until(PATIENCE, "the standby to replay the first run", || {
        counter(&standby) == first.to_string()
            && standby.psql("SELECT count(*) FROM redlock.holders") == "0"
    });
    cut_off(&standby);
    // Answered by the primary, which does not wait for the standby.
    assert_eq!(token(&primary.url()), first + 1);
    primary.kill();
    standby.promote();
    // The second take was lost with the primary: its token comes again.
    assert_eq!(token(&standby.url()), first + 1);
}

/// The SQL block of docs/postgres.md that starts with `first`, one statement a line, as psql
/// is given it when pasted: each line on its own.
fn page_block(first: &str) -> Vec<String> {
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/postgres.md"));
    let block: Vec<String> = page
        .lines()
        .skip_while(|line| !line.starts_with(&format!("    {first}")))
        .map_while(|line| line.strip_prefix("    ").map(str::to_owned))
        .collect();
    assert!(
        !block.is_empty(),
        "docs/postgres.md has no block starting {first:?}"
    );
    block
}

/// Set up as docs/postgres.md's "A synchronous standby" says, from its own lines, in its
/// order: `redlock init` and the role's `remote_apply` first, the standby seen streaming, then
/// `synchronous_standby_names` (the role is `postgres` here, whose runs are the test's).
#[test]
fn a_synchronous_standby_promoted_loses_nothing_answered() {
    let mut primary = PgServer::start();
    Redlock::admin_at("init", &primary.url())
        .any_stdout()
        .output();
    for line in page_block("ALTER ROLE cron_jobs SET synchronous_commit") {
        primary.psql(&line.replace("cron_jobs", "postgres"));
    }
    let standby = primary.standby();
    standby.walreceiver_pid();
    let [query] = &page_block("SELECT application_name, state, sync_state")[..] else {
        panic!("the page's pg_stat_replication query is one line");
    };
    let seen = primary.psql(query);
    assert!(seen.ends_with("|streaming|async"), "{seen}");
    for line in page_block("ALTER SYSTEM SET synchronous_standby_names") {
        primary.psql(&line);
    }
    wait_until(PATIENCE, "the standby to be synchronous", || {
        primary.psql(query).ends_with("|streaming|sync")
    });
    // A commit the standby confirms once applied: it is streaming and replaying.
    primary.psql("CREATE TABLE applied (x int)");
    wait_until(PATIENCE, "the standby to apply a commit", || {
        standby.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'applied'") == "1"
    });
    let before: Vec<i64> = (0..3).map(|_| token(&primary.url())).collect();
    assert_eq!(before, [before[0], before[0] + 1, before[0] + 2]);
    // Applied on the standby before each take was answered: no wait.
    assert_eq!(counter(&standby), before[2].to_string());
    // Cut off, the standby confirms nothing: a take is not answered, and nothing runs.
    cut_off(&standby);
    let dir = TempDir::new();
    Redlock::run_at(&primary.url())
        .key("job")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    assert!(
        !dir.join("marker").exists(),
        "a take never confirmed ran its command"
    );
    primary.kill();
    standby.promote();
    // The standby took the primary's settings with its copy: alone now, it must not wait for
    // a standby of its own, or every commit would wait for ever.
    standby.psql("ALTER SYSTEM RESET synchronous_standby_names");
    standby.psql("SELECT pg_reload_conf()");
    // Every answered take is there; the next token is past them all.
    assert_eq!(token(&standby.url()), before[2] + 1);
    Redlock::admin_at("history", &standby.url())
        .key("job")
        .stdout_contains(&format!("fence {}", before[2]))
        .stdout_contains(&format!("fence {}", before[2] + 1))
        .output();
}
