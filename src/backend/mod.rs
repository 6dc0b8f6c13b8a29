//! The backends a lock can live on, each a folder of its own that implements the boundary
//! `lock` defines: Redis (`redis/`), etcd (`etcd/`), PostgreSQL (`postgres/`) and ZooKeeper
//! (`zookeeper/`), and the
//! executable model of the lock they are tested against (`memory/`, which no URL reaches). Which one a run or an admin command uses is decided here,
//! once, from the URLs' scheme ([`open`]), as object_store's `parse_url` picks a store; what
//! the command line says of how to connect ([`Connect`]) is the same for every backend, and
//! what a backend cannot honour its capabilities ([`crate::lock::Capabilities`]) refuse in
//! one line (64). How a backend's waiter blocks for a wake-up, given until when it may wait, is
//! `block`: the arithmetic once, each backend's allowances its own.
//!
//! May use `lock`, `report`, `clock`, `exit` and `file`; never `lease`, `run`, `cli` or
//! `admin`.

#[cfg(test)]
mod above;
pub(crate) mod block;
pub(crate) mod blocking;
pub(crate) mod etcd;
pub(crate) mod memory;
pub(crate) mod postgres;
pub(crate) mod queue;
pub(crate) mod redis;
pub(crate) mod run_record;
pub(crate) mod tls;
pub(crate) mod url;
pub(crate) mod zookeeper;

use crate::lock::Backend;
use url::Kind;

/// TLS settings given apart from the URL, applied to every TLS URL (`rediss://`): PEM
/// contents, read once at start-up.
#[derive(Clone, Default)]
pub struct Tls {
    /// CA certificates to trust instead of the system store (`--tls-ca-cert`).
    pub ca_cert: Option<Vec<u8>>,
    /// Client certificate chain and private key, for mutual TLS (`--tls-cert`, `--tls-key`).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Do not verify the server's certificate at all (`--tls-insecure`, for testing only).
    pub insecure: bool,
}

impl Tls {
    /// Whether any option was given.
    pub(crate) fn is_set(&self) -> bool {
        self.ca_cert.is_some() || self.client.is_some() || self.insecure
    }
}

/// How to reach the locks, as the command line gives it, checked: the URLs (several make a
/// quorum on Redis), TLS, the password given apart from the URLs, the key prefix, and the
/// backend options (`("min-replicas", "2")`, `("fsync", "")`): a backend reads those it takes,
/// and its [`crate::lock::Capabilities`] refuse the others.
pub(crate) struct Connect<'a> {
    pub urls: Vec<&'a str>,
    pub tls: Tls,
    pub password: Option<String>,
    pub prefix: String,
    pub options: Vec<(&'static str, String)>,
}

/// The backend the URLs name, opened (nothing is connected yet); an error is a usage error's
/// message (64). The URLs' scheme decides, by the one table of them ([`url::SCHEMES`]):
/// `etcd://` and `etcds://` are etcd, `postgres://` and `postgresql://` PostgreSQL, `zk://` and
/// `zks://` ZooKeeper, anything
/// else is for Redis to read (and refuse, if it is not one of its own).
pub(crate) fn open(connect: Connect) -> Result<Box<dyn Backend>, String> {
    tls::ring_by_default();
    let kinds: Vec<Kind> = connect
        .urls
        .iter()
        .map(|url| url::scheme_of(url).map_or(Kind::Redis, |s| s.kind))
        .collect();
    let all = |kind: Kind| kinds.iter().all(|&k| k == kind);
    if kinds.contains(&Kind::Postgres) {
        return match all(Kind::Postgres) {
            true => Ok(Box::new(postgres::open(connect)?)),
            false => Err(
                "PostgreSQL and other URLs together: a lock lives on one backend (one \
                 PostgreSQL database, one etcd cluster, or one or more Redis servers)"
                    .into(),
            ),
        };
    }
    if kinds.contains(&Kind::ZooKeeper) {
        return match all(Kind::ZooKeeper) {
            true => Ok(Box::new(zookeeper::open(connect)?)),
            false => Err(
                "ZooKeeper and other URLs together: a lock lives on one backend (one ZooKeeper \
                 ensemble, one etcd cluster, one PostgreSQL database, or one or more Redis \
                 servers)"
                    .into(),
            ),
        };
    }
    match kinds.contains(&Kind::Etcd) {
        true if all(Kind::Etcd) => Ok(Box::new(etcd::open(connect)?)),
        true => Err(
            "Redis and etcd URLs together: a lock lives on one backend (one etcd cluster, or \
             one or more Redis servers)"
                .into(),
        ),
        false => Ok(Box::new(redis::open(connect)?)),
    }
}
