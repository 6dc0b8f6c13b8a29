//! The keys of a lock on etcd, all under `PREFIX{NAME}` (the name escaped: `%`, `/`, `{` and `}`
//! as `%25`, `%2F`, `%7B` and `%7D`), so that one lock's range never holds another's keys, and
//! no two prefixes name one lock (`redlock:a` + `b` is `redlock:a{b}`, not the default's `ab`):
//!
//! | key | what | lease |
//! |---|---|---|
//! | `BASE/q/LEASE` | a client that holds or waits for the lock: its details as JSON | the client's |
//! | `BASE/run/LEASE` | a run that took the lock: its record as JSON, its fencing token the key's create revision | the record's |
//! | `BASE/last_success`, `BASE/last_ended` | the record's summary: a copy of a run's record | the record's |
//! | `BASE/count/LABEL` | a counter of the record (runs by outcome, busy, skipped): its version | the record's |
//! | `BASE/uncount/LABEL` | counts taken back (a vanished run found lost): its version | the record's |
//! | `BASE/kept` | when the record's lease was last kept alive (unix ms, the host's clock) | the record's |
//! | `BASE/fence` | the last forced release: its mod revision is the fence it gave (the value: the removed token) | the record's |
//!
//! LEASE is the client's lease ID in 16 hex digits: one lease a run, so no two clients ever
//! write the same entry. The record's lease is one per lock name, granted for `RECORD_TTL` and
//! kept alive by the name's runs, once an hour at most (`BASE/kept` says when): the name's
//! record goes `RECORD_TTL` after its last use, less up to an hour.
//! Its ID is derived from `BASE` ([`Keys::record_lease`]), so that a client knows it without
//! asking: it is part of the layout, as the keys are.

/// The keys of one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    /// `PREFIX{NAME}`, the name escaped.
    base: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, name: &str) -> Self {
        Self {
            base: format!("{prefix}{{{}}}", escape(name)),
        }
    }

    /// Every key of the lock: `BASE/`.
    pub(crate) fn all(&self) -> String {
        format!("{}/", self.base)
    }

    /// The range of the clients that hold or wait: `BASE/q/`.
    pub(crate) fn queue(&self) -> String {
        format!("{}/q/", self.base)
    }

    /// The entry of the client of `lease`.
    pub(crate) fn entry(&self, lease: i64) -> String {
        format!("{}/q/{lease:016x}", self.base)
    }

    /// The range of the runs' records: `BASE/run/`.
    pub(crate) fn runs(&self) -> String {
        format!("{}/run/", self.base)
    }

    /// The record of the run of `lease`.
    pub(crate) fn run(&self, lease: i64) -> String {
        format!("{}/run/{lease:016x}", self.base)
    }

    pub(crate) fn last_success(&self) -> String {
        format!("{}/last_success", self.base)
    }

    pub(crate) fn last_ended(&self) -> String {
        format!("{}/last_ended", self.base)
    }

    /// The range of the counters: `BASE/count/`.
    pub(crate) fn counts(&self) -> String {
        format!("{}/count/", self.base)
    }

    pub(crate) fn count(&self, label: &str) -> String {
        format!("{}/count/{label}", self.base)
    }

    /// The range of the counts taken back: `BASE/uncount/`.
    pub(crate) fn uncounts(&self) -> String {
        format!("{}/uncount/", self.base)
    }

    pub(crate) fn uncount(&self, label: &str) -> String {
        format!("{}/uncount/{label}", self.base)
    }

    /// Written by a forced release: its mod revision is the fence it gave.
    pub(crate) fn fence(&self) -> String {
        format!("{}/fence", self.base)
    }

    /// When the record's lease was last kept alive.
    pub(crate) fn kept(&self) -> String {
        format!("{}/kept", self.base)
    }

    /// The ID of the lease the record's keys are attached to: FNV-1a of `BASE`, 63 bits and
    /// never 0 (etcd's "no lease"). Clients of every build must agree on it: no hasher whose
    /// output may change between Rust releases.
    pub(crate) fn record_lease(&self) -> i64 {
        let hash = self
            .base
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        ((hash >> 1) as i64).max(1)
    }

    /// The lock's name of a key under `prefix` that is one of a lock's (None: another key).
    pub(crate) fn name_of(prefix: &str, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
        // An escaped name holds no brace: the first `}` ends it.
        let (name, rest) = key.strip_prefix('{')?.split_once("}/")?;
        if name.contains(['{', '}', '/']) {
            return None;
        }
        let known = rest.starts_with("q/")
            || rest.starts_with("run/")
            || rest.starts_with("count/")
            || rest.starts_with("uncount/")
            || rest == "kept"
            || rest == "fence"
            || rest == "last_success"
            || rest == "last_ended";
        known.then(|| unescape(name))
    }

    /// The lease of an entry's key (`BASE/q/LEASE`), if it is one.
    pub(crate) fn lease_of(key: &[u8]) -> Option<i64> {
        let key = std::str::from_utf8(key).ok()?;
        let (_, lease) = key.rsplit_once("/q/")?;
        (lease.len() == 16)
            .then(|| u64::from_str_radix(lease, 16).ok())
            .flatten()
            .map(|l| l as i64)
    }
}

fn escape(name: &str) -> String {
    name.replace('%', "%25")
        .replace('/', "%2F")
        .replace('{', "%7B")
        .replace('}', "%7D")
}

fn unescape(name: &str) -> String {
    name.replace("%7D", "}")
        .replace("%7B", "{")
        .replace("%2F", "/")
        .replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_locks_range_never_holds_anothers_keys() {
        let a = Keys::new("redlock:", "a");
        let nested = Keys::new("redlock:", "a/q");
        assert_eq!(a.entry(255), "redlock:{a}/q/00000000000000ff");
        assert_eq!(nested.entry(1), "redlock:{a%2Fq}/q/0000000000000001");
        // No two prefixes name one lock.
        assert!(
            !Keys::new("redlock:a", "b")
                .all()
                .starts_with(&Keys::new("redlock:", "ab").all())
        );
        assert_eq!(
            Keys::name_of("redlock:", Keys::new("redlock:a", "b").entry(1).as_bytes()),
            None
        );
        assert!(!nested.entry(1).starts_with(&a.queue()));
        assert!(
            !Keys::new("redlock:", "a%2Fq")
                .all()
                .starts_with(&nested.all())
        );
        for name in ["a", "a/q", "100%", "%2F", "x/run/y", "{x}", "a}/q/b", "%7D"] {
            let keys = Keys::new("p:", name);
            for key in [
                keys.entry(7),
                keys.run(7),
                keys.last_success(),
                keys.count("busy"),
                keys.uncount("vanished"),
                keys.kept(),
            ] {
                assert_eq!(Keys::name_of("p:", key.as_bytes()).as_deref(), Some(name));
            }
        }
        assert_eq!(Keys::name_of("p:", b"p:{a}/other"), None);
        assert_eq!(Keys::name_of("p:", b"q:{a}/q/1"), None);
        assert_eq!(Keys::name_of("p:", b"p:a/q/1"), None);
        assert_eq!(Keys::lease_of(a.entry(-2).as_bytes()), Some(-2));
        assert_eq!(Keys::lease_of(b"redlock:{a}/q/12"), None);
    }

    #[test]
    fn the_records_lease_is_fixed_by_the_lock_and_differs_between_locks() {
        // Part of the layout: a change here is a change of the wire format.
        assert_eq!(
            Keys::new("redlock:", "a").record_lease(),
            0x4de0_2b53_690d_004d
        );
        let leases: std::collections::BTreeSet<i64> = ["a", "b", "ab", "a/q"]
            .iter()
            .map(|name| Keys::new("redlock:", name).record_lease())
            .chain([Keys::new("redlock:a", "b").record_lease()])
            .collect();
        assert_eq!(leases.len(), 5);
        assert!(leases.iter().all(|l| *l > 0));
    }
}
