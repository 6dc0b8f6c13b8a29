//! What a server says it is (ROLE, asked in the set-up of each new connection to a data node,
//! before anything is written to it), and whether the lock may live there: only on a master.
//! A replica that accepts writes (`replica-read-only no`) would otherwise take a lock its
//! master knows nothing of. Also which server it is ([`Identity`], asked in the same set-up of
//! a quorum's connections), so that one server given under several names is not counted as
//! several nodes.

use redis::Value;

use crate::lock::Failure;

/// What ROLE said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    Master,
    /// A replica of `master` (`host:port`), None when ROLE named none (a bare `slave`, an
    /// empty host, port 0).
    Replica {
        master: Option<String>,
    },
    /// A Sentinel, monitoring these services.
    Sentinel {
        services: Vec<String>,
    },
    /// The server would not say (an ACL without `+role`, a proxy without the command): the
    /// server's error.
    Unknown(String),
    /// A reply no Redis gives to ROLE.
    Strange,
}

impl Role {
    /// ROLE's reply as a role; Err for a server error that means more than "not allowed"
    /// (NOAUTH, LOADING, ...), which the connection's failure then reports.
    pub(crate) fn of(reply: Value) -> Result<Role, redis::RedisError> {
        let items = match reply {
            Value::Array(items) => items,
            Value::ServerError(e) => {
                return match e.code() {
                    "NOPERM" | "ERR" => Ok(Role::Unknown(
                        e.details()
                            .map_or_else(|| e.code().to_owned(), |d| format!("{} {d}", e.code())),
                    )),
                    _ => Err(e.into()),
                };
            }
            _ => return Ok(Role::Strange),
        };
        let text = |v: &Value| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            Value::Int(n) => Some(n.to_string()),
            _ => None,
        };
        let role = items.first().and_then(text);
        Ok(match role.as_deref() {
            Some("master") => Role::Master,
            Some("slave" | "replica") => Role::Replica {
                master: match (items.get(1).and_then(text), items.get(2).and_then(text)) {
                    (Some(host), Some(port)) => master_of(&host, &port),
                    _ => None,
                },
            },
            Some("sentinel") => Role::Sentinel {
                services: match items.get(1) {
                    Some(Value::Array(names)) => names.iter().filter_map(text).collect(),
                    _ => Vec::new(),
                },
            },
            _ => Role::Strange,
        })
    }
}

/// The master a replica's ROLE names, as `host:port`; None for an empty host or a port that
/// is not one (0, say, before the replica knows its master).
pub(crate) fn master_of(host: &str, port: &str) -> Option<String> {
    let port = port.parse::<u16>().ok().filter(|port| *port != 0)?;
    (!host.is_empty() && host != "?")
        .then(|| crate::backend::redis::transport::node_name(host, port))
}

/// Why a replica given by its URL is refused: naming its master's URL when ROLE said which it
/// is, and never making one up when it did not.
pub(crate) fn replica_refused(addr: &str, master: Option<&str>) -> String {
    match master {
        Some(master) => format!(
            "Redis at {addr} is a replica (of {master}), which cannot hold a lock: give its \
             master, redis://{master}, or a redis+sentinel:// URL to follow failovers"
        ),
        None => format!(
            "Redis at {addr} is a replica; give its master's URL instead (it did not say which \
             server that is), or a redis+sentinel:// URL to follow failovers"
        ),
    }
}

/// Which server a connection reaches, as the `run_id` of INFO server says: a random id the
/// server draws each time it starts, so two connections that get the same one reach one
/// server, whatever names (`127.0.0.1`, `localhost`, a DNS alias, a proxy) they used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    RunId(String),
    /// The server would not say (an ACL without `+info`, a proxy without the command) or
    /// gave no `run_id`: why, for the message.
    Unknown(String),
}

impl Identity {
    /// INFO server's reply as an identity.
    pub(crate) fn of(reply: &Value) -> Identity {
        let text = match reply {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::VerbatimString { text, .. } => text.clone(),
            Value::ServerError(e) => {
                return Identity::Unknown(
                    e.details()
                        .map_or_else(|| e.code().to_owned(), |d| format!("{} {d}", e.code())),
                );
            }
            _ => return Identity::Unknown("INFO server gave no text".to_owned()),
        };
        text.lines()
            .find_map(|line| line.strip_prefix("run_id:"))
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map_or_else(
                || Identity::Unknown("INFO server gave no run_id".to_owned()),
                |id| Identity::RunId(id.to_owned()),
            )
    }

    /// The `run_id`, when the server gave one.
    pub(crate) fn run_id(&self) -> Option<&str> {
        match self {
            Identity::RunId(id) => Some(id),
            Identity::Unknown(_) => None,
        }
    }
}

/// Where the server was named, which decides what a replica means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// By the URL: a replica is a mistake in it (refused).
    Url,
    /// By the sentinels: a replica is a master not promoted yet (a failover in progress: retry).
    Sentinels,
}

/// Whether the lock may live on the server at `addr` whose ROLE is `role`.
pub(crate) fn admit(role: Role, addr: &str, named: Named) -> Result<(), Failure> {
    match role {
        Role::Master => Ok(()),
        Role::Replica { master } => Err(match named {
            Named::Url => Failure::Refused(replica_refused(addr, master.as_deref()).into()),
            Named::Sentinels => Failure::Unreachable(
                format!("Redis at {addr} is not a master yet (a failover in progress?)").into(),
            ),
        }),
        // The sentinels' word for the master is a sentinel: their configuration is wrong, not
        // the URL (which already is a redis+sentinel:// one).
        Role::Sentinel { .. } if named == Named::Sentinels => Err(Failure::Refused(
            format!(
                "the sentinels name {addr} as the master, but it is a Redis Sentinel itself: \
                 check what their `sentinel monitor` lines point at"
            )
            .into(),
        )),
        Role::Sentinel { services } => {
            let service = services.first().map_or("SERVICE", String::as_str);
            Err(Failure::Refused(
                format!(
                    "{addr} is a Redis Sentinel, not a Redis server: use \
                     redis+sentinel://{addr}/{service} (it monitors: {})",
                    if services.is_empty() {
                        "nothing".to_owned()
                    } else {
                        services.join(", ")
                    }
                )
                .into(),
            ))
        }
        Role::Unknown(why) => {
            crate::report!(
                1,
                RoleUnchecked { "node" => addr },
                "could not ask Redis at {addr} for its ROLE ({why}); not checked whether it is a replica"
            );
            Ok(())
        }
        Role::Strange => Err(Failure::Refused(
            format!(
                "{addr} did not answer ROLE as Redis does: is it a Redis server? check the port"
            )
            .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn roles_from_replies() {
        let master = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(Role::of(master).unwrap(), Role::Master);
        let replica = Value::Array(vec![
            bulk("slave"),
            bulk("127.0.0.1"),
            Value::Int(6380),
            bulk("connected"),
            Value::Int(14),
        ]);
        assert_eq!(
            Role::of(replica).unwrap(),
            Role::Replica {
                master: Some("127.0.0.1:6380".into())
            }
        );
        for bare in [
            vec![bulk("slave")],
            vec![bulk("slave"), bulk(""), Value::Int(6379)],
            vec![bulk("replica"), bulk("10.0.0.1"), Value::Int(0)],
        ] {
            let role = Role::of(Value::Array(bare)).unwrap();
            assert_eq!(role, Role::Replica { master: None });
            let err = admit(role, "10.0.0.2:6379", Named::Url).unwrap_err();
            assert!(!err.to_string().contains("redis://"), "{err}");
        }
        let sentinel = Value::Array(vec![
            bulk("sentinel"),
            Value::Array(vec![bulk("mymaster"), bulk("other")]),
        ]);
        assert_eq!(
            Role::of(sentinel).unwrap(),
            Role::Sentinel {
                services: vec!["mymaster".into(), "other".into()]
            }
        );
        assert_eq!(Role::of(Value::Okay).unwrap(), Role::Strange);
        assert_eq!(Role::of(Value::Int(1)).unwrap(), Role::Strange);
    }

    #[test]
    fn identities_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:5e1c0ffee\r\ntcp_port:6379\r\n";
        assert_eq!(
            Identity::of(&bulk(info)),
            Identity::RunId("5e1c0ffee".into())
        );
        let verbatim = Value::VerbatimString {
            format: redis::VerbatimFormat::Text,
            text: info.to_owned(),
        };
        assert_eq!(Identity::of(&verbatim).run_id(), Some("5e1c0ffee"));
        // A proxy's INFO of its own, an error, anything else: not known, and never a match.
        for unknown in [
            bulk("# Server\r\nproxy_version:1\r\n"),
            bulk("run_id:\r\n"),
            Value::Int(1),
            Value::Nil,
        ] {
            assert!(matches!(Identity::of(&unknown), Identity::Unknown(_)));
        }
        let noperm = redis::parse_redis_value(
            b"-NOPERM User redlock has no permissions to run the 'info' command\r\n",
        )
        .unwrap();
        let Identity::Unknown(why) = Identity::of(&noperm) else {
            panic!("{noperm:?}")
        };
        assert!(why.starts_with("NOPERM User redlock has no"), "{why}");
    }

    #[test]
    fn only_a_master_may_hold_the_lock() {
        let replica = || Value::Array(vec![bulk("slave"), bulk("10.0.0.1"), Value::Int(6379)]);
        let check = |reply, named| admit(Role::of(reply).unwrap(), "10.0.0.2:6379", named);
        let err = check(replica(), Named::Url).unwrap_err();
        assert!(matches!(err, Failure::Refused(_)), "{err}");
        assert!(err.to_string().contains("redis://10.0.0.1:6379"), "{err}");
        let err = check(replica(), Named::Sentinels).unwrap_err();
        assert!(matches!(err, Failure::Unreachable(_)), "{err}");
        let master = Value::Array(vec![bulk("master"), Value::Int(0)]);
        assert!(check(master, Named::Url).is_ok());
        // A sentinel: given as redis://, the URL to use instead; named by the sentinels as the
        // master, their configuration to check (that URL is the one in use already).
        let sentinel = || Value::Array(vec![bulk("sentinel"), Value::Array(vec![bulk("m")])]);
        let err = check(sentinel(), Named::Url).unwrap_err().to_string();
        assert!(
            err.contains("use redis+sentinel://10.0.0.2:6379/m"),
            "{err}"
        );
        let err = check(sentinel(), Named::Sentinels).unwrap_err().to_string();
        assert!(
            err.starts_with("the sentinels name 10.0.0.2:6379 as the master, but it is a Redis")
                && !err.contains("redis+sentinel://"),
            "{err}"
        );
    }
}
