//! Nothing lives for ever on PostgreSQL: a lock unused for the record's lifetime (40 days) leaves
//! all its rows once another lock's release prunes (one release in 16: those whose token is a
//! multiple of 16); one still held stays; and a name taken again after its rows went gets a token
//! larger than every one it had, also after 0.3.0's take function. Rows are aged by hand.

use crate::common::*;

/// The fencing token of one run of `redlock run --key KEY ARGS` on `pg`.
fn token_of(pg: &PgServer, key: &str, args: &[&str]) -> i64 {
    let out = Redlock::run_at(&pg.url())
        .key(key)
        .args(args)
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout() // the token, parsed here
        .output();
    fencing_token(&out.stdout)
}

/// Runs of lock `key` until one whose token is a multiple of 16 has released it, the release
/// that prunes (at most 16 runs: their tokens are consecutive).
fn until_a_release_prunes(pg: &PgServer, key: &str) {
    for _ in 0..16 {
        if token_of(pg, key, &[]) % 16 == 0 {
            return;
        }
    }
    panic!("16 runs of '{key}' and no token a multiple of 16");
}

/// Lock `key`'s rows, moved 41 days into the past.
fn age(pg: &PgServer, key: &str) {
    let back = "interval '41 days'";
    pg.psql(&format!(
        "UPDATE redlock.locks SET used = used - {back}, last_success = last_success - {back} \
         WHERE name = 'redlock:{key}'; \
         UPDATE redlock.runs SET started = started - {back}, until = until - {back}, \
         ended = ended - {back} WHERE name = 'redlock:{key}'"
    ));
}

/// How many rows of each table name lock `key`, as "locks holders waiters runs".
fn rows(pg: &PgServer, key: &str) -> String {
    let count = |table: &str| {
        format!("(SELECT count(*) FROM redlock.{table} WHERE name = 'redlock:{key}')")
    };
    pg.psql(&format!(
        "SELECT {} || ' ' || {} || ' ' || {} || ' ' || {}",
        count("locks"),
        count("holders"),
        count("waiters"),
        count("runs")
    ))
}

#[test]
fn a_name_unused_for_40_days_leaves_nothing_and_its_next_token_is_larger() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    // The plain statements and the functions (--limit) each take and release it; a waiter that
    // gave up leaves a row too.
    let mut tokens = vec![
        token_of(&pg, "once", &[]),
        token_of(&pg, "once", &["--limit", "2"]),
    ];
    pg.psql(
        "INSERT INTO redlock.waiters (name, token, kind, queued, since, until) \
         VALUES ('redlock:once', 'w', 'lock', true, now() - interval '41 days', \
         now() - interval '41 days')",
    );
    assert_eq!(rows(&pg, "once"), "1 0 1 2");
    // Younger than 40 days: kept.
    until_a_release_prunes(&pg, "other");
    assert_eq!(rows(&pg, "once"), "1 0 1 2");
    // Past: the next release that prunes, of another lock, removes it; the others leave it.
    age(&pg, "once");
    if token_of(&pg, "other", &[]) % 16 != 0 {
        assert_eq!(
            rows(&pg, "once"),
            "1 0 1 2",
            "pruned by a release not sampled"
        );
    }
    until_a_release_prunes(&pg, "other");
    assert_eq!(rows(&pg, "once"), "0 0 0 0");
    for args in [&[][..], &["--limit", "2"][..]] {
        let token = token_of(&pg, "once", args);
        assert!(
            tokens.iter().all(|&t| token > t),
            "{token} after {tokens:?}"
        );
        tokens.push(token);
    }
    // After the take function, as this build and 0.3.0 call it (0.3.0 never prunes; this
    // build's next sampled release does).
    for call in [
        "SELECT result FROM redlock.take('redlock:f', 't', 1000, 'limit 2', 2, false, NULL, \
         1000, 'h', 1, 'c', 0, 20, 3456000000)",
        "SELECT result FROM redlock.take('redlock:g', 't', 1000, 'limit 2', 2, false, NULL, \
         1000, 'h', 1, 'c', 0)",
    ] {
        age(&pg, "once");
        assert_eq!(pg.psql(call), "acquired");
        until_a_release_prunes(&pg, "other");
        assert_eq!(rows(&pg, "once"), "0 0 0 0", "{call}");
        tokens.push(token_of(&pg, "once", &[]));
    }
    assert!(tokens.windows(2).all(|t| t[1] > t[0]), "{tokens:?}");
}

#[test]
fn a_lock_still_held_or_waited_for_stays_however_old_its_rows() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    token_of(&pg, "held", &[]);
    token_of(&pg, "waited", &[]);
    // A holder whose lease runs on, and a waiter still waiting, on rows otherwise 41 days old.
    pg.psql(
        "INSERT INTO redlock.holders (name, token, fence, kind, since, until, host, pid, \
         command, started) VALUES ('redlock:held', 't', 99, 'lock', now(), \
         now() + interval '1 hour', 'h', 1, 'c', 0); \
         UPDATE redlock.locks SET holders = 1 WHERE name = 'redlock:held'; \
         INSERT INTO redlock.waiters (name, token, kind, queued, since, until) \
         VALUES ('redlock:waited', 'w', 'lock', false, now(), now() + interval '1 hour')",
    );
    age(&pg, "held");
    age(&pg, "waited");
    until_a_release_prunes(&pg, "other");
    assert_eq!(rows(&pg, "held"), "1 1 0 1");
    assert_eq!(rows(&pg, "waited"), "1 0 1 1");
}

#[test]
fn a_row_made_by_0_3_0s_plain_take_starts_at_the_clock() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    let before = token_of(&pg, "new", &[]);
    // 0.3.0's statement makes a new lock's row with fence 1.
    let fence: i64 = pg
        .psql(
            "INSERT INTO redlock.locks AS l (name, fence, holders) VALUES ('redlock:old', 1, 1) \
             RETURNING fence",
        )
        .parse()
        .unwrap();
    assert!(fence > before, "{fence} <= {before}");
}
