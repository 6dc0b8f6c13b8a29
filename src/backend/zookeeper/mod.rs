//! redlock on ZooKeeper: one ensemble, named by
//! `zk://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/CHROOT]` (the members, any of which
//! may answer; `zks://` for TLS). The lock is the standard recipe: an ephemeral sequential node
//! per client under the lock's node, the lowest holds, each waiter watches the one ahead; the
//! fencing token is the entry's creation zxid, which rises across the ensemble's whole
//! history, leader changes included, and assumes no clock. The session's timeout is the lease.
//!
//! The protocol, read top down: the [`Locker`] (`locker`), its record of runs (`recorder`,
//! which reads and writes the node `record` keeps; `prune`, which removes names unused for the
//! record's lifetime where the server keeps it for ever), the names of a lock's children (`names`),
//! the URL and the lock's paths (`url`), the admin commands' reads (`node`), and the session
//! (`client`: zookeeper-client on `backend::blocking`'s runtime). Imports point one way, from
//! `locker` down: none points back.
//!
//! May use `lock` (the boundary it implements), `backend::blocking`, `backend::queue`,
//! `backend::run_record`, `report` and `exit`; nothing above.

mod client;
mod locker;
mod names;
mod node;
mod probe;
mod prune;
mod record;
mod recorder;
mod url;

use std::time::Duration;

use zookeeper_client::{Acl, Acls, AuthId, Permission, TlsOptions};

use crate::backend::{Connect, Tls};
use crate::lock::{Backend, Capabilities, Locker, Node, RunSpec};
use client::{Conn, Ensemble};

/// The session timeout the admin commands ask for: long enough that a slow read does not end
/// it, and its ephemeral nodes are none.
const ADMIN_SESSION: Duration = Duration::from_secs(10);

/// One ZooKeeper ensemble, how to log in and where the locks are.
pub(crate) struct ZooKeeper {
    ensemble: Ensemble,
    base: url::Base,
    prefix: String,
    /// Whom the nodes redlock makes let in ([`acls`]).
    acls: Acls<'static>,
}

/// The ensemble `connect` names. Refused in one line: several URLs (the members of one
/// ensemble go in one), a password without a user, the TLS options without `zks://`, and
/// `zks://` without `--tls-ca-cert` or with `--tls-insecure`.
pub(crate) fn open(connect: Connect) -> Result<ZooKeeper, String> {
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
                "several ZooKeeper URLs: the members of one ensemble go in one URL, separated \
                 by commas (zk://10.0.0.1:2181,10.0.0.2:2181); a quorum of ensembles is not \
                 needed, since ZooKeeper keeps its own"
                    .into(),
            );
        }
    };
    let parsed = url::parse(url)?;
    let password = password.or(parsed.password.clone());
    let digest = match (&parsed.user, password) {
        (Some(user), Some(password)) => Some((user.clone(), password)),
        (Some(user), None) => {
            return Err(format!(
                "the ZooKeeper URL names user '{user}' but no password: put it in a file named \
                 by --password-file or REDLOCK_PASSWORD_FILE (or in REDLOCK_PASSWORD)"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "a password for ZooKeeper needs a user name in the URL: {}://USER@{}",
                parsed.scheme(),
                parsed.hosts.join(",")
            ));
        }
        (None, None) => None,
    };
    let (tls, probe) = if parsed.tls {
        let options = tls_options(&tls, &parsed.shown())?;
        (Some(options), Some(tls))
    } else if tls.is_set() {
        return Err(format!(
            "the TLS options need a zks:// URL: {}",
            parsed.shown()
        ));
    } else {
        (None, None)
    };
    let base = url::base(&parsed.chroot, &prefix)?;
    let connect = format!("{}{}", parsed.connect_string(), parsed.chroot);
    let acls = acls(digest.as_ref());
    Ok(ZooKeeper {
        ensemble: Ensemble {
            connect,
            shown: parsed.shown(),
            digest,
            tls,
            probe: (probe, parsed.hosts.clone()),
        },
        base,
        prefix,
        acls,
    })
}

/// The TLS of `zks://`: the members' certificates verified against `--tls-ca-cert`, their
/// names against the URL's hosts, and a client certificate given where asked. The CA must be
/// given: a ZooKeeper ensemble's certificates come from its operators' own CA (its keystores),
/// not from the ones a system trusts. `--tls-insecure` is refused: ZooKeeper's own clients
/// verify the members unless told not to in their configuration, and so does redlock.
fn tls_options(tls: &Tls, shown: &str) -> Result<TlsOptions, String> {
    if tls.insecure {
        return Err(
            "--tls-insecure does not work with zks://: give the CA that signed the members' \
             certificates with --tls-ca-cert"
                .into(),
        );
    }
    let Some(ca) = &tls.ca_cert else {
        return Err(format!(
            "zks:// needs the CA that signed the members' certificates: give it with \
             --tls-ca-cert ({shown})"
        ));
    };
    let text = |pem: &[u8], what: &str| {
        std::str::from_utf8(pem)
            .map(str::to_owned)
            .map_err(|_| format!("the {what} is not PEM text"))
    };
    let mut options = TlsOptions::new()
        .with_pem_ca(&text(ca, "CA certificate (--tls-ca-cert)")?)
        .map_err(|_| "--tls-ca-cert holds no certificate redlock can use (PEM)".to_owned())?;
    if let Some((cert, key)) = &tls.client {
        crate::backend::tls::check_client_pair(cert, key)?;
        options = options
            .with_pem_identity(
                &text(cert, "client certificate (--tls-cert)")?,
                &text(key, "client key (--tls-key)")?,
            )
            .map_err(|_| {
                "--tls-cert and --tls-key hold no certificate and key redlock can use (PEM)"
                    .to_owned()
            })?;
    }
    Ok(options)
}

/// Whom the nodes redlock makes let in: with a user, only that user, by its password's digest
/// (and the server's super user); without one, everyone who can reach the folder. Not the
/// `auth` scheme (the creator): that names every identity of the session, and a `zks://`
/// session is also logged in by its client certificate (x509), which would let in, without the
/// password, whoever shows a certificate of the same subject.
fn acls(digest: Option<&(String, String)>) -> Acls<'static> {
    match digest {
        Some((user, password)) => {
            let acl = Acl::new(
                Permission::ALL,
                AuthId::new("digest", &digest_id(user, password)),
            );
            // Made once per process (a run's or an admin command's), when the URL is read.
            Acls::new(Box::leak(Box::new([acl])))
        }
        None => Acls::anyone_all(),
    }
}

/// The id of ZooKeeper's digest scheme for `user` with `password`:
/// `user:BASE64(SHA1("user:password"))`, as its DigestAuthenticationProvider makes it.
fn digest_id(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let sha1 = sha1_smol::Sha1::from(format!("{user}:{password}"))
        .digest()
        .bytes();
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(sha1)
    )
}

impl Backend for ZooKeeper {
    fn nodes(&self) -> Vec<String> {
        vec![self.ensemble.shown.clone()]
    }

    /// One ensemble, whose queue is fair and counts any kind of holder; every write is
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
                        "--min-replicas is for Redis's asynchronous replicas: ZooKeeper commits \
                         every write to a majority of its members before it answers"
                            .into(),
                    ),
                ),
                (
                    "fsync",
                    Err(
                        "--fsync is for Redis's append-only file: ZooKeeper writes every commit \
                         to its log with fsync before it answers"
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
            self.ensemble.shown,
            crate::report::one_line(&self.prefix)
        )
    }

    fn locker(&self, run: &RunSpec) -> Box<dyn Locker> {
        Box::new(locker::ZkLocker::new(
            Conn::new(self.ensemble.clone(), run.ttl),
            self.base.clone(),
            self.acls,
            run,
        ))
    }

    fn node(&self, _index: usize) -> Box<dyn Node> {
        Box::new(node::ZkNode::new(
            Conn::new(self.ensemble.clone(), ADMIN_SESSION),
            self.base.clone(),
            self.acls,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id docs/zookeeper.md's ACL block makes with openssl (`echo -n 'redlock:PASSWORD' |
    /// openssl dgst -binary -sha1 | base64`), for the password `s3cret`.
    #[test]
    fn the_digest_id_is_zookeepers() {
        assert_eq!(
            digest_id("redlock", "s3cret"),
            "redlock:MTVkmhM5xfE2G3bbE/GfvDNI4qc="
        );
    }
}
