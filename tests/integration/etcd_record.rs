//! The record of runs on etcd, on a real one-member cluster: every key a lock name leaves has a
//! lease, the record's for at most 40 days; with that lease gone (as when 40 days pass unused)
//! nothing of the name is left and the next token is still larger, and a run that held the lock
//! meanwhile records its end on the lease granted anew; counts are exact under 100 clients
//! counting at once (0.3.0 counted 75 of 100 here); 0.3.0 beside this build.

use std::time::Duration;

use crate::common::*;

/// The record's lifetime past a name's last use: 40 days, in seconds.
const RECORD_TTL_SECS: u64 = 40 * 24 * 3600;

fn one_member() -> EtcdCluster {
    EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    })
}

fn token(etcd: &EtcdCluster, key: &str) -> i64 {
    let out = Redlock::run_at(&etcd.url())
        .key(key)
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    out.stdout.trim().parse().unwrap()
}

#[test]
fn everything_a_name_leaves_goes_with_its_record_lease() {
    let etcd = one_member();
    // A success, a failure, a run turned away: runs, the summary and three counters.
    let mut tokens = vec![token(&etcd, "once-123")];
    Redlock::run_at(&etcd.url())
        .key("once-123")
        .sh("exit 3")
        .status(3)
        .any_stderr()
        .output();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&etcd.url()).key("once-123").hold(&dir, "h");
    Redlock::run_at(&etcd.url())
        .key("once-123")
        .sh("true")
        .status(75)
        .any_stderr()
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let keys = etcd.leased_keys("redlock:{once-123}/");
    let names: Vec<&str> = keys.iter().map(|(k, _, _)| k.as_str()).collect();
    for part in ["/last_ended", "/last_success", "/count/busy", "/run/"] {
        assert!(
            names.iter().any(|k| k.contains(part)),
            "{part} in {names:?}"
        );
    }
    let record = keys[0].1;
    for (key, lease, _) in &keys {
        assert_eq!(
            *lease, record,
            "{key} has lease {lease:x}, not the record's"
        );
    }
    let (left, granted) = etcd.lease_ttl(record).expect("the record's lease");
    assert_eq!(granted, RECORD_TTL_SECS);
    // The runs' leases are gone; the record's is the one lease left (what the chaos and
    // partition suites' leftover checks pass over).
    assert_eq!(etcd.leases(), [format!("{record:x}")]);
    assert!(etcd.run_leases().is_empty(), "{:?}", etcd.run_leases());
    assert!(
        left <= RECORD_TTL_SECS && left + 60 > RECORD_TTL_SECS,
        "{left} s left"
    );
    tokens.push(token(&etcd, "once-123"));
    // The name unused for 40 days, as the server sees it: its record's lease ends.
    etcd.revoke(&format!("{record:x}"));
    assert_eq!(etcd.leased_keys("redlock:{once-123}/"), []);
    let next = token(&etcd, "once-123");
    assert!(
        tokens.iter().all(|t| *t < next),
        "tokens {tokens:?} then {next}"
    );
    // A new record, on the name's lease granted anew.
    let keys = etcd.leased_keys("redlock:{once-123}/");
    assert!(
        !keys.is_empty() && keys.iter().all(|(_, lease, _)| *lease == record),
        "{keys:?}"
    );
    assert_eq!(etcd.lease_ttl(record).map(|t| t.1), Some(RECORD_TTL_SECS));
}

/// 100 runs turned away at once each count one `busy`, and the count is 100: a count is one
/// put (the counter is the key's version), not a compare-and-swap that concurrent writers
/// lose.
#[test]
fn a_hundred_runs_turned_away_at_once_count_a_hundred() {
    let etcd = one_member();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&etcd.url()).key("many").hold(&dir, "h");
    let runs: Vec<_> = (0..100)
        .map(|_| Redlock::run_at(&etcd.url()).key("many").sh("true").spawn())
        .collect();
    for run in runs {
        run.finish_within(Duration::from_secs(60)).assert_code(75);
    }
    let busy = etcd
        .leased_keys("redlock:{many}/count/busy")
        .first()
        .map(|(_, _, version)| *version);
    assert_eq!(busy, Some(100));
    Redlock::admin_at("status", &etcd.url())
        .key("many")
        .stdout_contains("100 busy")
        .any_stdout()
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// A host on 0.3.0 beside this build, on one lock: each turns the other away while it holds,
/// and the record keys 0.3.0 wrote with no lease are attached to the record's lease when this
/// build first keeps the name's record, their values and counts kept.
#[test]
fn a_0_3_0_host_beside_this_build_excludes_and_its_keys_are_adopted() {
    let etcd = one_member();
    let old = crate::integration::postgres_upgrade::old_bin();
    let run = |old_build: bool| {
        let run = Redlock::run_at(&etcd.url()).key("mixed");
        if old_build { run.binary(old) } else { run }
    };
    run(true).sh("true").output();
    run(true).sh("true").output();
    let keys = etcd.leased_keys("redlock:{mixed}/");
    assert!(keys.iter().all(|(_, lease, _)| *lease == 0), "{keys:?}");
    for (holder_old, other_old) in [(true, false), (false, true)] {
        let dir = TempDir::new();
        let (holder, _) = run(holder_old).hold(&dir, "h");
        run(other_old).sh("true").status(75).any_stderr().output();
        touch(&dir.join("h.go"));
        holder.finish().assert_code(0);
    }
    // This build's runs have kept the record since: every key on its lease, the counts whole.
    let keys = etcd.leased_keys("redlock:{mixed}/");
    let record = keys
        .iter()
        .find(|(k, _, _)| k.ends_with("/count/success"))
        .unwrap()
        .1;
    let leaseless: Vec<&str> = keys
        .iter()
        .filter(|(_, lease, _)| *lease != record)
        .map(|(k, _, _)| k.as_str())
        .collect();
    // Only keys 0.3.0 wrote since (here its busy count), until this build writes or prunes
    // them.
    assert!(
        leaseless
            .iter()
            .all(|k| k.contains("/run/") || k.contains("/last_") || k.contains("/count/")),
        "{leaseless:?}"
    );
    Redlock::admin_at("status", &etcd.url())
        .key("mixed")
        .stdout_contains("runs ended: 4 success")
        .any_stdout()
        .output();
}

/// The record's lease ends while a run holds the lock (a run longer than 40 days, or the
/// lease revoked by hand): the lock is not the record's, so the run goes on, and its release
/// writes its end on the lease granted anew.
#[test]
fn a_record_lease_that_ends_under_a_run_is_granted_again_by_its_release() {
    let etcd = one_member();
    token(&etcd, "long");
    let record = etcd.leased_keys("redlock:{long}/last_ended")[0].1;
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&etcd.url()).key("long").hold(&dir, "h");
    etcd.revoke(&format!("{record:x}"));
    assert_eq!(etcd.leased_keys("redlock:{long}/run/"), []);
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let keys = etcd.leased_keys("redlock:{long}/");
    assert!(
        keys.iter().any(|(k, _, _)| k.ends_with("/last_success"))
            && keys.iter().all(|(_, lease, _)| *lease == record),
        "{keys:?}"
    );
    assert_eq!(etcd.lease_ttl(record).map(|t| t.1), Some(RECORD_TTL_SECS));
}
