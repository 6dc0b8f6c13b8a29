//! Every fast path gives the general path's answer from the same state. PostgreSQL: the plain
//! statements (`PLAIN_TAKE`, `PLAIN_WAIT`, `PLAIN_RELEASE`) beside the `take()` and `release()`
//! functions.

use redlock::boundary::PLAIN_WAIT;

use crate::common::*;

/// `PLAIN_WAIT` for our token on lock `k` of `pg`'s `redlock` schema: its columns (remaining
/// ms, undecided, channel), as psql prints them.
fn plain_wait(pg: &PgServer) -> Vec<String> {
    let sql = PLAIN_WAIT
        .replace("@schema@", "redlock")
        .replace("$1", "'redlock:k'")
        .replace("$2", "'t'")
        .replace("$3", "20000");
    pg.psql(&sql).split('|').map(str::to_owned).collect()
}

/// A plain take made again by the token that holds the lock (its first answer lost): the
/// function answers it taken, with its token. `PLAIN_WAIT` once answered it busy for the rest
/// of its own lease, and left a waiter's row of the holder; now it leaves it to the function.
#[test]
fn a_plain_take_made_again_by_its_holder_is_left_to_the_function() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    let take = "SELECT result || ' ' || fence FROM redlock.take('redlock:k', 't', 30000, 'lock', \
                0, false, NULL, 20000, 'h', 1, 'c', 0, 20, 3456000000)";
    let first = pg.psql(take);
    assert_eq!(plain_wait(&pg)[1], "t", "undecided");
    assert_eq!(pg.psql("SELECT count(*) FROM redlock.waiters"), "0");
    assert_eq!(pg.psql(take), first);
}

/// Our registration as a waiter had ended, and a queued waiter came after it: the function
/// forgets the ended registration and puts us behind that waiter. `PLAIN_WAIT` once renewed
/// the ended row, keeping its old place, and the function then let us in ahead; now it leaves
/// the row as it is and the function decides.
#[test]
fn an_ended_registration_keeps_no_place_on_the_plain_path() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    pg.psql(
        "INSERT INTO redlock.locks (name, fence, queued) VALUES ('redlock:k', 5, 1); \
         INSERT INTO redlock.waiters (name, token, kind, queued, since, until) VALUES \
         ('redlock:k', 't', 'lock', false, now() - interval '1 minute', \
          now() - interval '5 seconds'), \
         ('redlock:k', 'w', 'lock', true, now(), now() + interval '1 minute')",
    );
    assert_eq!(plain_wait(&pg)[1], "t", "undecided");
    assert_eq!(
        pg.psql("SELECT until < now() FROM redlock.waiters WHERE token = 't'"),
        "t"
    );
    let take = "SELECT result || ' ' || queued FROM redlock.take('redlock:k', 't', 30000, \
                'lock', 0, false, NULL, 20000, 'h', 1, 'c', 0, 20, 3456000000)";
    assert_eq!(pg.psql(take), "busy true");
}
