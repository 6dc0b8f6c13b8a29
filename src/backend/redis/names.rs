//! `redlock list` on Redis: the names of the lock keys under a prefix, walked with SCAN (never
//! KEYS, which blocks Redis), on every master of a Cluster, and bounded against a server that
//! would keep the walk going for ever.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::backend::redis::Keys;
use crate::backend::redis::single::SingleRedis;
use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::waiters::WAKE_LINGER;
use crate::lock::Failure;

/// The names of the lock keys under `prefix` on `endpoint` (every master of a Cluster).
pub(crate) fn lock_names(
    endpoint: &Endpoint,
    prefix: &str,
    timeout: Duration,
) -> Result<BTreeSet<String>, Failure> {
    let nodes = match &endpoint.target {
        Target::Cluster { .. } => {
            crate::backend::redis::transport::cluster::masters(endpoint, Instant::now() + timeout)?
                .into_iter()
                .map(|(host, port)| endpoint.pinned(&host, port))
                .collect()
        }
        _ => vec![endpoint.clone()],
    };
    let pattern = Keys::scan_pattern(prefix);
    let mut found = BTreeSet::new();
    for node in nodes {
        let mut scanner = SingleRedis::new(node, Keys::new(prefix, ""), false, WAKE_LINGER);
        let mut walk = ScanWalk::new(MAX_SCANS);
        let mut cursor = 0;
        loop {
            let (next, keys) = scanner.scan(cursor, &pattern, timeout)?;
            // SCAN may return a key more than once; the set keeps one of each.
            found.extend(keys.into_iter().filter_map(|k| Keys::name_of(prefix, &k)));
            match walk.next(next) {
                Ok(Some(next)) => cursor = next,
                Ok(None) => break,
                Err(why) => {
                    return Err(Failure::Refused(
                        format!(
                            "Redis at {} {why}: not a Redis redlock can list",
                            scanner.endpoint()
                        )
                        .into(),
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// The most SCAN calls `list` makes on one node: with `COUNT 1000`, a keyspace of about a
/// billion keys. A real Redis ends its SCAN long before; a server that does not is refused.
const MAX_SCANS: usize = 1_000_000;

/// A SCAN's cursors so far on one node, to end a walk that a server would keep going for
/// ever: a cursor it already returned, or too many calls. Redis never returns a cursor twice
/// in one walk: its cursor, read with the bits reversed, only grows (a table that grows or
/// shrinks between calls included; on a Cluster node each slot's walk follows the last's).
struct ScanWalk {
    seen: std::collections::HashSet<u64>,
    calls: usize,
    limit: usize,
}

impl ScanWalk {
    fn new(limit: usize) -> Self {
        Self {
            seen: std::collections::HashSet::new(),
            calls: 0,
            limit,
        }
    }

    /// After a call answered with cursor `next`: the cursor of the next call, None when the
    /// walk is done (0), or why it must end.
    fn next(&mut self, next: u64) -> Result<Option<u64>, String> {
        self.calls += 1;
        if next == 0 {
            return Ok(None);
        }
        if !self.seen.insert(next) {
            return Err(format!("returned SCAN cursor {next} again"));
        }
        if self.calls >= self.limit {
            return Err(format!("kept the SCAN going past {} calls", self.limit));
        }
        Ok(Some(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_ends_at_cursor_0_and_a_cursor_returned_again_or_too_many_calls_end_it() {
        // (the cursors the server returns, the walk's limit, the cursors asked for next and
        // how it ended)
        type Row = (
            &'static [u64],
            usize,
            &'static [u64],
            Result<(), &'static str>,
        );
        let rows: Vec<Row> = vec![
            (&[0], 10, &[], Ok(())),
            (&[4, 2, 6, 0], 10, &[4, 2, 6], Ok(())),
            (&[1, 1], 10, &[1], Err("returned SCAN cursor 1 again")),
            (&[4, 2, 4], 10, &[4, 2], Err("returned SCAN cursor 4 again")),
            (
                &[1, 2, 3],
                3,
                &[1, 2],
                Err("kept the SCAN going past 3 calls"),
            ),
            // The last call allowed may still end the walk.
            (&[1, 2, 0], 3, &[1, 2], Ok(())),
        ];
        for (answers, limit, asked_want, ended_want) in rows {
            let mut walk = ScanWalk::new(limit);
            let mut asked = Vec::new();
            let mut ended = Err(String::from("the server ran out of answers"));
            for &answer in answers {
                match walk.next(answer) {
                    Ok(Some(next)) => asked.push(next),
                    Ok(None) => {
                        ended = Ok(());
                        break;
                    }
                    Err(why) => {
                        ended = Err(why);
                        break;
                    }
                }
            }
            assert_eq!(
                (
                    asked.as_slice(),
                    ended.as_ref().copied().map_err(String::as_str)
                ),
                (asked_want, ended_want),
                "{answers:?} limit {limit}"
            );
        }
    }
}
