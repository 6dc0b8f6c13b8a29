//! redlock on Redis: one server, a Sentinel service's master, the Cluster node of the lock's
//! slot, or a quorum of independent masters (several `--url`).
//!
//! The lock protocol is Lua that Redis runs: the key layout (`keys`), the scripts and their
//! typed boundary (`scripts`: one `.lua` file and one Rust definition of its keys, arguments,
//! helpers, following steps and reply each; `reply` reads the replies), a lock on one server
//! (`single`) or on a quorum (`quorum`), what the admin commands read (`holder`), the fencing
//! counter when it holds what redlock did not write (`counter`), `--min-replicas` and `--fsync`
//! (`durable`) and the eviction-policy warning (`preflight`). The plain run's scripts
//! (`scripts/take.lua`, `extend.lua`, `give_back.lua`) carry only the lock's own step; each
//! feature keeps its Lua in a folder of its own, which a plain run sends only the steps of that
//! it uses: the record of runs (`record/`, with its Rust), waiting and the fair queue
//! (`waiters/`, with its timing), semaphores and shared holders (`several/`). `--fair`,
//! `--min-interval` and a writer queued behind shared holders take the lock with
//! `scripts/acquire.lua`. The connection to each server, and its failures, are `transport`.
//!
//! Every key a script touches is passed in KEYS and carries the `{name}` hash tag, so the same
//! scripts run unchanged on Redis Cluster.
//!
//! May use `lock` (the boundary it implements), `report`, `clock`, `exit` and `file`; nothing
//! above.

pub(crate) mod counter;
pub(crate) mod durable;
mod holder;
pub(crate) mod keys;
mod names;
pub(crate) mod preflight;
pub(crate) mod quorum;
pub(crate) mod record;
pub(crate) mod reply;
pub(crate) mod scripts;
pub(crate) mod single;
pub mod transport;
pub(crate) mod waiters;

use std::collections::BTreeSet;
use std::time::Duration;

pub use keys::Keys;
pub(crate) use preflight::Preflight;
use quorum::Quorum;
use single::SingleRedis;
use transport::endpoint::Endpoint;
use waiters::{FAIR_ENTRY_LIFETIME, WAKE_LINGER};

use crate::backend::{Connect, block};
use crate::lock::Fence;
use crate::lock::{Backend, Capabilities, Failure, Forced, Inspected, Locker, Node, RunSpec, Runs};
use durable::Durability;

/// The Redis servers given: one (a plain server, a Sentinel service, a Cluster), or several
/// independent masters that make a quorum; the key prefix; what each write must reach.
#[derive(Debug)]
pub(crate) struct Redis {
    endpoints: Vec<Endpoint>,
    prefix: String,
    /// What each write must reach beyond the server that takes it (the `min-replicas` and
    /// `fsync` options); None: the server's answer is enough.
    durability: Option<Durability>,
}

/// The Redis servers `connect` names, with the TLS options and the password applied. Several
/// make a quorum; the same host:port twice is refused.
pub(crate) fn open(connect: Connect) -> Result<Redis, String> {
    let Connect {
        urls,
        tls,
        password,
        prefix,
        options,
    } = connect;
    let durability = Durability::from_options(&options)?;
    if urls.iter().all(|url| url.is_empty()) {
        return Err(
            "'' is not a Redis URL (use redis://, rediss://, unix:// or redis+unix://)".into(),
        );
    }
    let mut endpoints: Vec<Endpoint> = Vec::with_capacity(urls.len());
    for url in urls {
        let mut endpoint = Endpoint::parse(url).and_then(|e| e.with_tls(&tls))?;
        if let Some(password) = &password {
            endpoint = endpoint.with_password(password);
        }
        if endpoints
            .iter()
            .any(|e| e.to_string() == endpoint.to_string())
        {
            return Err(format!(
                "{endpoint} is given twice: the nodes of a quorum must be independent servers"
            ));
        }
        endpoints.push(endpoint);
    }
    if tls.ca_cert.is_none() && endpoints.iter().any(Endpoint::uses_tls) {
        crate::backend::tls::check_ssl_cert_file()?;
    }
    if tls.insecure {
        crate::report!(
            0,
            "warning: --tls-insecure: the Redis server's certificate is not verified, so anyone on the network path can pose as it; for testing only"
        );
    }
    Ok(Redis {
        endpoints,
        prefix,
        durability,
    })
}

impl Backend for Redis {
    fn nodes(&self) -> Vec<String> {
        self.endpoints.iter().map(Endpoint::to_string).collect()
    }

    /// A quorum of independent masters has no queue in common, nor one count of holders; one
    /// server (a Sentinel service, a Cluster) has both. Either takes `--min-replicas` and
    /// `--fsync`, which a quorum applies on each node.
    fn capabilities(&self) -> Capabilities {
        let quorum = self.endpoints.len() > 1;
        let on_one = |why: &str| if quorum { Err(why.to_owned()) } else { Ok(()) };
        Capabilities {
            quorum,
            fair: on_one(
                "--fair does not work with several --url (a quorum): each node would keep its \
                 own queue, in its own order",
            ),
            several_holders: on_one(
                "--limit and --shared do not work with several --url (a quorum): counted on \
                 independent masters, more than N holders can each win a majority (with 3 nodes \
                 and --limit 3, 4 holders on 2 nodes each fit in 3 slots a node); use one Redis, \
                 a Sentinel service or a Cluster",
            ),
            options: vec![("min-replicas", Ok(())), ("fsync", Ok(()))],
            init: false,
        }
    }

    fn described(&self) -> String {
        format!(
            "{} under prefix '{}'",
            self.nodes().join(", "),
            crate::report::one_line(&self.prefix)
        )
    }

    fn locker(&self, run: &RunSpec) -> Box<dyn Locker> {
        let keys = Keys::new(&self.prefix, &run.key);
        let node = |endpoint: &Endpoint| {
            SingleRedis::new(
                endpoint.clone(),
                keys.clone(),
                run.fair,
                FAIR_ENTRY_LIFETIME,
            )
            .with_token(&run.token)
            .with_holder(run.holder.clone())
            .with_min_interval(run.min_interval)
            .with_durability(
                self.durability.map_or(0, |d| d.replicas),
                self.durability.is_some_and(|d| d.fsync),
                replica_wait(run.ttl),
            )
            .with_preflight(Preflight::Weekly)
            .with_kind(run.kind)
            .with_waiting_lifetime(block::waiting_lifetime(run.waiting, waiters::BLPOP))
        };
        match self.endpoints.as_slice() {
            [one] => Box::new(node(one)),
            many => Box::new(Quorum::new(many.iter().map(node).collect())),
        }
    }

    fn node(&self, index: usize) -> Box<dyn Node> {
        let endpoint = self.endpoints[index].clone();
        let keys = Keys::new(&self.prefix, "");
        Box::new(RedisNode {
            redis: SingleRedis::new(endpoint, keys, false, WAKE_LINGER)
                .with_preflight(Preflight::Always),
            prefix: self.prefix.clone(),
        })
    }
}

/// How long `--min-replicas` waits for replicas to acknowledge a fresh lock (the server's WAIT
/// timeout; the reply may take as long again): a tenth of the ttl, at least 10 ms, at most 1 s,
/// so the first renewal, due ttl/3 after the acquire was sent, still comes in time.
pub(crate) fn replica_wait(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// One Redis server as the admin commands read it: a connection reused for every lock.
struct RedisNode {
    redis: SingleRedis,
    prefix: String,
}

impl RedisNode {
    fn at(&mut self, name: &str) -> &mut SingleRedis {
        self.redis.set_keys(Keys::new(&self.prefix, name));
        &mut self.redis
    }
}

impl Node for RedisNode {
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure> {
        names::lock_names(self.redis.endpoint(), &self.prefix, timeout)
    }

    /// Read in one script; a counter of 0 is looked at again (the script reads a word redlock
    /// did not write there as 0; a key of another kind its guard names).
    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure> {
        let redis = self.at(name);
        let mut inspected = redis.inspect(timeout)?;
        if let Inspected::Lock(info) = &mut inspected
            && info.fence == Fence::Counter(0)
            && let Some(foreign) = redis.foreign_fence(timeout).ok().flatten()
        {
            info.fence = Fence::Unreadable(foreign);
        }
        Ok(inspected)
    }

    fn inspect_each(
        &mut self,
        names: &[String],
        with_runs: bool,
        timeout: Duration,
    ) -> Result<Vec<Option<Inspected>>, Failure> {
        let keys: Vec<Keys> = names
            .iter()
            .map(|name| Keys::new(&self.prefix, name))
            .collect();
        self.redis.inspect_each(&keys, with_runs, timeout)
    }

    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure> {
        self.at(name).runs(timeout)
    }

    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        self.at(name).force_release(token, timeout)
    }
}

/// How long the fencing counter lives after the last acquisition (or forced release): forty
/// days, so that a lock used once a month still shows it in `status`. After that, the next
/// token comes from the server's clock (see `scripts/fence.lua`), which keeps tokens
/// increasing without the counter. The scripts have it as `FENCE_LIFETIME_MS` (fence.lua); the
/// test below holds the two together.
#[cfg(test)]
pub(crate) const FENCE_LIFETIME: Duration = Duration::from_secs(40 * 24 * 3600);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn replica_wait_leaves_room_for_the_first_renewal() {
        for ms in [100u64, 1000, 30_000, 3_600_000] {
            let ttl = Duration::from_millis(ms);
            // WAIT's reply may take twice the wait (plus 10 ms) after the acquire, and the
            // first renewal is due ttl/3 after it.
            assert!(super::replica_wait(ttl) * 2 + Duration::from_millis(10) < ttl / 3);
        }
    }

    #[test]
    fn the_fencing_counters_lifetime_is_the_same_in_the_lua() {
        let ms = super::FENCE_LIFETIME.as_millis();
        for (name, lua) in [
            ("fence.lua", include_str!("scripts/fence.lua")),
            ("take.lua", include_str!("scripts/take.lua")),
        ] {
            assert!(
                lua.contains(&format!("local FENCE_LIFETIME_MS = '{ms}'\n")),
                "{name}'s FENCE_LIFETIME_MS is not {ms}"
            );
        }
    }
}
