//! What the admin commands read of a lock, or break, on one server: its state (one lock, or a
//! hundred in one round trip for `list`), the record of its runs, a forced release, a SCAN
//! step. The lock's own steps are in the module above.

use std::time::{Duration, Instant};

use crate::backend::redis::Keys;
use crate::backend::redis::record::Kept;
use crate::backend::redis::reply::FromReply;
use crate::backend::redis::scripts::{self, calls};
use crate::backend::redis::waiters::WAKE_LINGER;
use crate::lock::record::Runs;
use crate::lock::{Failure, Forced, Inspected};

use super::{Beside, SingleRedis};

impl SingleRedis {
    /// Look at another lock's keys from now on (`redlock list` reuses one connection).
    pub fn set_keys(&mut self, keys: Keys) {
        self.keys = keys;
    }

    /// The lock's state, read in one script.
    pub fn inspect(&mut self, timeout: Duration) -> Result<Inspected, Failure> {
        let preflight = Beside::Preflight(self.preflight);
        let inspect = calls::Inspect {
            record: Kept::DEFAULT,
            summary: true,
        };
        self.call(&inspect, timeout, preflight)
            .map(|(read, _)| read)
    }

    /// The state of each lock of `locks`, read in one round trip (`redlock list`; `summary`:
    /// with the record of runs' summary, which only `--json` shows); None for
    /// a lock whose reply was an error (a MOVED to another node's slot, say) or unreadable,
    /// which the caller reads alone (see [`SingleRedis::inspect`]) for what it means. A
    /// failure to reach the server at all is the error.
    pub fn inspect_each(
        &mut self,
        locks: &[Keys],
        summary: bool,
        timeout: Duration,
    ) -> Result<Vec<Option<Inspected>>, Failure> {
        let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
        let inspect = calls::Inspect {
            record: Kept::DEFAULT,
            summary,
        };
        let replies = self.conn.request(deadline, |node| {
            scripts::send_each(&mut node.conn, locks, &inspect)
        })?;
        Ok(replies
            .into_iter()
            .map(|reply| reply.ok().and_then(|value| Inspected::from_reply(&value)))
            .collect())
    }

    /// The record of the lock's runs, read in one script.
    pub fn runs(&mut self, timeout: Duration) -> Result<Runs, Failure> {
        let read = calls::ReadRuns {
            record: Kept::DEFAULT,
        };
        self.call(&read, timeout, Beside::Nothing)
            .map(|(runs, _)| runs)
    }

    /// Break-glass: delete the lock whoever holds it (or only while it holds `expected`) and
    /// advance the fencing counter; held by several, remove the one holder of `expected`
    /// (or the only one); a key redlock did not make, remove it (unless a token is expected).
    pub fn force_release(
        &mut self,
        expected: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        let force = calls::ForceRelease {
            linger: WAKE_LINGER,
            expected,
        };
        let forced = self.call(&force, timeout, Beside::Nothing);
        if let Err(Failure::Refused(_)) = &forced
            && let Some(unfenced) = self.forced_past_the_counter(expected, timeout)?
        {
            return Ok(unfenced);
        }
        forced.map(|(forced, _)| forced)
    }

    /// One SCAN step over keys matching `pattern`: the next cursor (0 when done) and the keys.
    pub fn scan(
        &mut self,
        cursor: u64,
        pattern: &str,
        timeout: Duration,
    ) -> Result<(u64, Vec<Vec<u8>>), Failure> {
        self.conn.request(Instant::now() + timeout, |node| {
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query::<(u64, Vec<Vec<u8>>)>(&mut node.conn)
        })
    }
}
