//! One lock, the resource its holders write to, and redlock runs on the hosts of a [`Net`]:
//! what every partition case does around its cut. Every wait is on the resource file or a
//! process, bounded by a deadline.

use std::path::PathBuf;
use std::time::Duration;

use super::resource::{self, Holder, Stamp, stamp_script};
use crate::common::net::Net;
use crate::common::{Output, PATIENCE, Proc, Redlock, TempDir, now_ns, read, touch, wait_until};

/// The lock's name in every case.
pub const KEY: &str = "part";

/// A lock on some servers, and the resource.
pub struct Scene<'n> {
    pub net: &'n Net,
    pub dir: TempDir,
    urls: Vec<String>,
    pub ttl: Duration,
}

/// What a case measured, from the cut: when the cut-off holder's command last wrote, and when
/// the other side's holder first did.
#[derive(Debug)]
pub struct Timing {
    pub stop_after_cut: Option<Duration>,
    pub begin_after_cut: Option<Duration>,
}

impl<'n> Scene<'n> {
    pub fn new(net: &'n Net, urls: Vec<String>, ttl: Duration) -> Scene<'n> {
        Scene {
            net,
            dir: TempDir::new(),
            urls,
            ttl,
        }
    }

    pub fn resource(&self) -> PathBuf {
        self.dir.join("resource")
    }

    /// `redlock <sub> --url ... --key part`, run inside host `host`.
    pub fn redlock(&self, sub: &str, host: &str) -> Redlock {
        let r = Redlock::sub(sub).through(self.net.within(host));
        self.urls.iter().fold(r, |r, u| r.url(u)).key(KEY)
    }

    /// `redlock run --ttl <ttl> <extra> -- <stamps>` on `host`, its command stamping the
    /// resource until [`finish`](Self::finish) is called for `host`.
    pub fn run(&self, host: &str, extra: &[&str]) -> Proc {
        self.stamping(self.redlock("run", host), host, extra)
    }

    /// [`run`](Self::run) with `--url url` instead of the scene's: a client that names
    /// another server (a promoted standby).
    pub fn run_at(&self, host: &str, url: &str, extra: &[&str]) -> Proc {
        let r = Redlock::sub("run").through(self.net.within(host));
        self.stamping(r.url(url).key(KEY), host, extra)
    }

    fn stamping(&self, r: Redlock, host: &str, extra: &[&str]) -> Proc {
        let ttl = format!("{}ms", self.ttl.as_millis());
        let done = self.dir.join(&format!("{host}.done"));
        r.ttl(&ttl)
            .args(extra)
            .sh(&stamp_script(&self.resource(), &done))
            .spawn()
    }

    /// Lets `host`'s command write its `end` and exit 0.
    pub fn finish(&self, host: &str) {
        touch(&self.dir.join(&format!("{host}.done")));
    }

    pub fn stamps(&self) -> Vec<Stamp> {
        resource::parse(&read(&self.resource()))
    }

    /// `host`'s stamps.
    pub fn of(&self, host: &str) -> Vec<Stamp> {
        self.stamps()
            .into_iter()
            .filter(|s| s.host == host)
            .collect()
    }

    /// Waits (up to `timeout`) for `host`'s command to write `start`; returns its stamp.
    #[track_caller]
    pub fn started(&self, host: &str, timeout: Duration) -> Stamp {
        let what = format!("{host}'s command to start at the resource");
        let mut found = None;
        wait_until(timeout, &what, || {
            found = self.of(host).into_iter().find(|s| s.kind == "start");
            found.is_some()
        });
        found.unwrap()
    }

    /// Waits until `host` has written `n` stamps after `after_ns` (its command runs on).
    #[track_caller]
    pub fn ticked_after(&self, host: &str, after_ns: i128, n: usize) {
        let what = format!("{n} stamps of {host} after {after_ns}");
        wait_until(PATIENCE, &what, || {
            self.of(host).iter().filter(|s| s.ns > after_ns).count() >= n
        });
    }

    /// `redlock status --json` from `host`, or None when it could not answer (exit 69).
    pub fn status(&self, host: &str) -> Option<serde_json::Value> {
        let out = self
            .redlock("status", host)
            .arg("--json")
            .any_status()
            .any_stdout()
            .any_stderr()
            .output();
        (out.status.code() == Some(0)).then(|| serde_json::from_str(&out.stdout).unwrap())
    }

    /// The check at the resource; panics with the violation and the whole resource.
    #[track_caller]
    pub fn check(&self) -> Vec<Holder> {
        match resource::check(&self.stamps()) {
            Ok(holders) => holders,
            Err(v) => panic!("{v}\nthe resource:\n{}", read(&self.resource())),
        }
    }

    /// `host`'s last stamp, and the first of the holder after it, as times after `cut_ns`.
    pub fn timing(&self, cut_ns: i128, old: &str, new: &str) -> Timing {
        let after = |ns: i128| (ns >= cut_ns).then(|| Duration::from_nanos((ns - cut_ns) as u64));
        let stop = self.of(old).last().map(|s| s.ns).and_then(after);
        let begin = self.of(new).first().map(|s| s.ns).and_then(after);
        Timing {
            stop_after_cut: stop,
            begin_after_cut: begin,
        }
    }
}

/// Waits (up to `timeout`) for a spawned redlock to exit and returns what it left.
#[track_caller]
pub fn ended(proc: Proc, timeout: Duration) -> Output {
    proc.finish_within(timeout)
}

/// CLOCK_REALTIME in ns, the clock the stamps use (`date +%s%N`).
pub fn now() -> i128 {
    now_ns()
}

/// Prints one case's numbers, so a run shows them.
pub fn report(case: &str, ttl: Duration, t: &Timing) {
    let ms = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{} ms", d.as_millis()));
    eprintln!(
        "partition {case}: ttl {} ms; holder's last write {} after the cut; \
         the other side's holder began {} after the cut",
        ttl.as_millis(),
        ms(t.stop_after_cut),
        ms(t.begin_after_cut)
    );
}
