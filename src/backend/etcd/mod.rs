//! redlock on etcd: one cluster, named by `etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]`
//! (the members, any of which may answer; `etcds://` for TLS). The lock's fencing token is its
//! entry's create revision, kept by Raft: it rises across holders, restarts and leader changes,
//! and assumes no clock.
//!
//! The protocol, read top down: the [`Locker`] methods (`locker`) call the run's steps
//! (`steps`, which owns the run's state), each a few transactions that `protocol` builds from
//! plain inputs (no I/O); the record's writes (`recorder`), a waiter's watch and keep-alives
//! (`session`), and what a take read (`seen`). Beside them: who holds a lock from the queue of
//! entries (`queue`, no I/O), the key layout (`keys`), the record of runs as etcd keeps it
//! (`record`), the admin commands' reads (`node`), and the connection to the members
//! (`client`: etcd-client on `backend::blocking`'s runtime, one member asked at a time).
//! Imports point one way, from `locker` down to `protocol` and `keys`: none points back.
//!
//! May use `lock` (the boundary it implements), `backend::blocking`, `report`, `exit` and
//! `file`; nothing above.

mod client;
mod keys;
mod locker;
mod node;
mod protocol;
mod record;
mod recorder;
mod seen;
mod session;
mod steps;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use crate::backend::{Connect, Tls};
use crate::lock::{Backend, Capabilities, Locker, Node, RunSpec};
use client::{Access, Conn, Members};

/// The members of one etcd cluster, how to log in and the key prefix.
pub(crate) struct Etcd {
    members: Members,
    /// The URL as shown: scheme and members, no credentials.
    shown: String,
    prefix: String,
}

/// The etcd cluster `connect` names. Refused in one line: several URLs (the members of one
/// cluster go in one), `--tls-insecure`. What only Redis does (`--min-replicas`, `--fsync`)
/// its capabilities refuse.
pub(crate) fn open(connect: Connect) -> Result<Etcd, String> {
    let Connect {
        urls,
        tls,
        password,
        prefix,
        options: _,
    } = connect;
    let url = match urls.as_slice() {
        [one] => *one,
        _ => {
            return Err(
                "several etcd URLs: the members of one cluster go in one URL, separated by \
                 commas (etcd://10.0.0.1:2379,10.0.0.2:2379); a quorum of clusters is not needed, \
                 since etcd keeps its own"
                    .into(),
            );
        }
    };
    let parsed = parse(url)?;
    let options = ConnectOptions::new()
        .with_require_leader(true)
        .with_auto_token_refresh(true)
        .with_connect_timeout(std::time::Duration::from_secs(5));
    let mut options = login(options, &parsed, password)?;
    if parsed.tls {
        options = options.with_tls(tls_options(&tls)?);
    } else if tls.is_set() {
        return Err(format!(
            "the TLS options need an etcds:// URL: {}",
            parsed.shown()
        ));
    }
    Ok(Etcd {
        shown: parsed.shown(),
        members: Members {
            addrs: parsed.members,
            scheme: if parsed.tls { "https" } else { "http" },
            options,
        },
        prefix,
    })
}

/// `options` with the URL's user and its password (given apart, or in the URL): etcd has no
/// user without a password, nor a password without a user.
fn login(
    mut options: ConnectOptions,
    parsed: &Parsed,
    password: Option<String>,
) -> Result<ConnectOptions, String> {
    let password = password.or(parsed.password.clone());
    match (&parsed.user, password) {
        (Some(user), Some(password)) => options = options.with_user(user.clone(), password),
        // etcd has no user without a password (a client certificate's name is its user, and
        // needs none in the URL), so asking the cluster would only earn "invalid password".
        (Some(user), None) => {
            return Err(format!(
                "the etcd URL names user '{user}' but no password: put it in a file named by \
                 --password-file or REDLOCK_PASSWORD_FILE (or in REDLOCK_PASSWORD)"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "a password for etcd needs a user name in the URL: {}://USER@{}",
                parsed.scheme(),
                parsed.members.join(",")
            ));
        }
        (None, None) => {}
    }
    Ok(options)
}

fn tls_options(tls: &Tls) -> Result<TlsOptions, String> {
    if tls.insecure {
        return Err(
            "--tls-insecure does not work with etcds://: give the CA that signed the \
                    members' certificates with --tls-ca-cert"
                .into(),
        );
    }
    let mut options = TlsOptions::new();
    options = match &tls.ca_cert {
        Some(pem) => options.ca_certificate(Certificate::from_pem(pem)),
        None => {
            // tonic reads the system's store through rustls-native-certs, as Redis does.
            crate::backend::tls::check_ssl_cert_file()?;
            options.with_native_roots()
        }
    };
    if let Some((cert, key)) = &tls.client {
        crate::backend::tls::check_client_pair(cert, key)?;
        options = options.identity(Identity::from_pem(cert, key));
    }
    Ok(options)
}

/// An etcd URL, read.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    tls: bool,
    user: Option<String>,
    password: Option<String>,
    /// `host:port` of each member.
    members: Vec<String>,
}

impl Parsed {
    fn scheme(&self) -> &'static str {
        if self.tls { "etcds" } else { "etcd" }
    }

    fn shown(&self) -> String {
        format!("{}://{}", self.scheme(), self.members.join(","))
    }
}

/// The default client port of an etcd member.
const ETCD_PORT: u16 = 2379;

/// `etcd://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/]`, or `etcds://`. A message that
/// quotes the URL never quotes its user part.
fn parse(url: &str) -> Result<Parsed, String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("etcd://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("etcds://") {
        (true, rest)
    } else {
        return Err("not an etcd URL (use etcd:// or etcds://)".into());
    };
    let scheme = if tls { "etcds" } else { "etcd" };
    let (userinfo, hosts) = match rest.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, rest),
    };
    let hosts = hosts.strip_suffix('/').unwrap_or(hosts);
    if hosts.contains(['/', '?', '#']) {
        return Err(format!(
            "invalid etcd URL '{scheme}://{}': it takes members only (HOST:PORT, comma-separated), \
             no path or parameters",
            crate::report::one_line(hosts)
        ));
    }
    let (user, password) = credentials(scheme, hosts, userinfo)?;
    let mut members = Vec::new();
    for member in hosts.split(',') {
        let member = member.trim();
        let (host, port) = split_port(member).ok_or_else(|| {
            let v6 = if member.matches(':').count() > 1 && !member.starts_with('[') {
                " (an IPv6 address goes in brackets: [::1]:2379)"
            } else {
                ""
            };
            format!(
                "invalid etcd URL '{scheme}://{hosts}': '{}' is not HOST:PORT{v6}",
                crate::report::one_line(member)
            )
        })?;
        let member = format!("{host}:{port}");
        if members.contains(&member) {
            return Err(format!("{member} is given twice in the etcd URL"));
        }
        members.push(member);
    }
    Ok(Parsed {
        tls,
        user,
        password,
        members,
    })
}

/// The user and password of a URL's user part (`USER[:PASSWORD]`), decoded.
fn credentials(
    scheme: &str,
    hosts: &str,
    userinfo: Option<&str>,
) -> Result<(Option<String>, Option<String>), String> {
    Ok(match userinfo {
        None => (None, None),
        Some(userinfo) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((user, password)) => (user, Some(decode(password)?)),
                None => (userinfo, None),
            };
            let user = decode(user)?;
            if user.is_empty() {
                return Err(format!(
                    "invalid etcd URL '{scheme}://...@{hosts}': the user name is empty"
                ));
            }
            (Some(user), password)
        }
    })
}

/// `host:port`, `host` (etcd's port) or `[v6]:port`: the host and the port.
fn split_port(member: &str) -> Option<(&str, u16)> {
    crate::backend::url::host_and_port(member, ETCD_PORT)
}

/// A URL's percent-encoded part, decoded.
fn decode(part: &str) -> Result<String, String> {
    use crate::backend::url::{BadEscape, percent_decode};
    percent_decode(part).map_err(|bad| match bad {
        BadEscape::NotHex => {
            "a '%' in the etcd URL's user part is not followed by two hex digits".to_owned()
        }
        BadEscape::NotUtf8 => "the etcd URL's user part is not UTF-8".to_owned(),
    })
}

impl Backend for Etcd {
    fn nodes(&self) -> Vec<String> {
        vec![self.shown.clone()]
    }

    /// One cluster, whose queue is fair and counts any kind of holder; every write is
    /// committed to a majority of its members, on disk, before it is answered.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            quorum: false,
            fair: Ok(()),
            several_holders: Ok(()),
            options: vec![
                (
                    "min-replicas",
                    Err(
                        "--min-replicas is for Redis's asynchronous replicas: etcd commits \
                         every write to a majority of its members before it answers"
                            .into(),
                    ),
                ),
                (
                    "fsync",
                    Err(
                        "--fsync is for Redis's append-only file: etcd writes every commit to \
                         its log with fsync before it answers"
                            .into(),
                    ),
                ),
            ],
            init: false,
        }
    }

    fn described(&self) -> String {
        format!(
            "{} under prefix '{}'",
            self.shown,
            crate::report::one_line(&self.prefix)
        )
    }

    fn locker(&self, run: &RunSpec) -> Box<dyn Locker> {
        let keys = keys::Keys::new(&self.prefix, &run.key);
        Box::new(steps::EtcdLocker::new(
            Conn::new(self.members.clone(), Access::ReadWrite),
            keys,
            run,
        ))
    }

    fn node(&self, _index: usize) -> Box<dyn Node> {
        Box::new(node::EtcdNode::new(
            Conn::new(self.members.clone(), Access::Read),
            self.prefix.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_members_of_one_cluster() {
        let ok = |url: &str| parse(url).unwrap();
        let p = ok("etcd://10.0.0.1:2379,10.0.0.2:22379,10.0.0.3/");
        assert_eq!(
            p.members,
            ["10.0.0.1:2379", "10.0.0.2:22379", "10.0.0.3:2379"]
        );
        assert!(!p.tls && p.user.is_none());
        let p = ok("etcds://redlock:s%40cret@[::1]:2379,[::2]");
        assert!(p.tls);
        assert_eq!(
            (p.user.as_deref(), p.password.as_deref()),
            (Some("redlock"), Some("s@cret"))
        );
        assert_eq!(p.members, ["[::1]:2379", "[::2]:2379"]);
        assert_eq!(p.shown(), "etcds://[::1]:2379,[::2]:2379");
        for bad in [
            "etcd://",
            "etcd://host:0",
            "etcd://host:99999",
            "etcd://host:+2379",
            "etcd://host:0x10",
            "etcd://host:2379/path",
            "etcd://host:2379?x=1",
            "etcd://a:1,,b:2",
            "etcd://:pw@host:1",
            "etcd://h:1,h:1",
            "etcd://[::1",
            "redis://h:1",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(!err.contains("pw"), "{bad}: {err}");
        }
    }
}
