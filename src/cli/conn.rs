//! What `--url`, the password sources and the TLS options come to: the backend the URLs name,
//! with its credentials and TLS settings, read and checked once at start-up.

use std::path::Path;

use crate::backend::{self, Connect, Tls};
use crate::cli::args::{ConnArgs, PASSWORD_ENV};
use crate::error::{Class, classified};
use crate::file::{self, Unusable};
use crate::lock::Backend;

impl ConnArgs {
    /// The backend named by --url / REDLOCK_URL (split on whitespace), with the TLS options,
    /// the password and the key prefix applied, and the backend `options` given (`run`'s
    /// `--min-replicas` and `--fsync`; the admin subcommands give none).
    pub(crate) fn backend(
        &self,
        options: Vec<(&'static str, String)>,
    ) -> anyhow::Result<Box<dyn Backend>> {
        let usage = |message: String| classified(Class::Usage, message);
        let tls = self.tls().map_err(usage)?;
        let password = password(self.password_file.as_deref()).map_err(usage)?;
        let urls = self.urls()?;
        backend::open(Connect {
            urls,
            tls,
            password,
            prefix: self.prefix.clone(),
            options,
        })
        .map_err(usage)
    }

    /// The URLs as given: each `--url` is one URL, whatever it holds (a password may contain
    /// spaces); REDLOCK_URL is split on whitespace, and a word in it that is not a URL refused.
    fn urls(&self) -> anyhow::Result<Vec<&str>> {
        let urls = if self.url_from_env {
            let urls: Vec<&str> = self
                .url
                .iter()
                .flat_map(|url| url.split_ascii_whitespace())
                .collect();
            // One word without a scheme is just that (`127.0.0.1:6379`); among several, a
            // piece without one is most likely part of a password with a space in it: say so
            // without showing any piece.
            if let [url] = urls[..]
                && !url.contains("://")
            {
                return Err(classified(
                    Class::Usage,
                    format!("REDLOCK_URL: {}", crate::backend::url::no_scheme(url)),
                ));
            }
            if urls.iter().any(|url| !url.contains("://")) {
                return Err(classified(
                    Class::Usage,
                    "REDLOCK_URL holds a word that is not a URL: several URLs are separated by \
                     whitespace, so a password with a space must be percent-encoded (%20)"
                        .to_owned(),
                ));
            }
            urls
        } else {
            // Each --url is one URL, whatever it holds (a password may contain spaces).
            self.url.iter().map(|url| url.trim()).collect()
        };
        Ok(urls)
    }

    /// The `REDLOCK_URL` the command sees: the URLs redlock locks on (every one of a quorum,
    /// from `--url` as from REDLOCK_URL, or the default), each without its password, separated
    /// by spaces as REDLOCK_URL takes them, so that a nested `redlock status` reads the same
    /// servers. Whitespace left in a URL (a socket path's) is percent-encoded, or it would
    /// split it in two. Called after [`ConnArgs::endpoints`] accepted the URLs.
    pub fn command_url(&self) -> String {
        let urls = self.urls().unwrap_or_default();
        // A password given apart: a word alone before a URL's `@` is the user's name.
        let apart = self.password_file.is_some()
            || std::env::var_os(PASSWORD_ENV).is_some_and(|v| !v.is_empty());
        let seen: Vec<String> = urls
            .into_iter()
            .map(|url| crate::backend::url::for_command(url, apart))
            // A word that is not a URL may be a piece of a password: dropped.
            .filter(|url| !url.is_empty())
            .map(|url| {
                url.chars()
                    .map(|c| match c {
                        c if c.is_ascii_whitespace() => format!("%{:02X}", c as u32),
                        c => c.to_string(),
                    })
                    .collect()
            })
            .collect();
        seen.join(" ")
    }

    fn tls(&self) -> Result<Tls, String> {
        if self.tls_insecure && self.tls_ca_cert.is_some() {
            return Err(
                "the argument '--tls-ca-cert <FILE>' cannot be used with '--tls-insecure'".into(),
            );
        }
        let client = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                read_pem("--tls-cert", cert, "CERTIFICATE-----")?,
                read_pem("--tls-key", key, "PRIVATE KEY-----")?,
            )),
            _ => None,
        };
        let ca_cert = self
            .tls_ca_cert
            .as_deref()
            .map(|path| read_pem("--tls-ca-cert", path, "CERTIFICATE-----"))
            .transpose()?;
        Ok(Tls {
            ca_cert,
            client,
            insecure: self.tls_insecure,
        })
    }
}

/// The contents of `path`, `cap` bytes at most, if it is a regular file or a pipe (process
/// substitution); the error names the option and the file, never the contents.
fn read_file(option: &str, path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    file::read_or_pipe(path, cap).map_err(|why| {
        let why = match why {
            Unusable::TooLarge(_) if option == "--password-file" => {
                format!("{why}: a password file holds one password")
            }
            Unusable::TooLarge(_) => format!("{why}, more than a PEM file of certificates holds"),
            why => why.to_string(),
        };
        format!("{option} {}: {why}", path.display())
    })
}

/// A PEM file that must hold a section whose header ends with `marker`: a key given as a
/// certificate would otherwise mean an empty trust store, found out only at the handshake.
fn read_pem(option: &str, path: &Path, marker: &str) -> Result<Vec<u8>, String> {
    let bytes = read_file(option, path, file::PEM_CAP)?;
    let found = String::from_utf8_lossy(&bytes)
        .lines()
        .any(|line| line.starts_with("-----BEGIN ") && line.trim_end().ends_with(marker));
    if !found {
        let what = marker.trim_end_matches('-').to_lowercase();
        return Err(format!("{option} {}: holds no PEM {what}", path.display()));
    }
    Ok(bytes)
}

/// The password given apart from the URL: the file's first line (a trailing newline dropped),
/// else REDLOCK_PASSWORD when set and not empty, else None (the URL's password, if any).
fn password(file: Option<&Path>) -> Result<Option<String>, String> {
    if let Some(path) = file {
        let bytes = read_file("--password-file", path, file::PASSWORD_CAP)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("--password-file {}: not UTF-8 text", path.display()))?;
        let password = text.strip_suffix('\n').unwrap_or(&text);
        let password = password.strip_suffix('\r').unwrap_or(password);
        if password.is_empty() {
            return Err(format!("--password-file {}: empty", path.display()));
        }
        return Ok(Some(password.to_owned()));
    }
    match std::env::var_os(PASSWORD_ENV) {
        None => Ok(None),
        Some(value) if value.is_empty() => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|_| format!("{PASSWORD_ENV} is not valid UTF-8")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_files() {
        let dir = std::env::temp_dir().join(format!("redlock-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let read = |path: &Path| password(Some(path));
        assert_eq!(read(&file("lf", "pw\n")), Ok(Some("pw".into())));
        assert_eq!(read(&file("crlf", "pw\r\n")), Ok(Some("pw".into())));
        assert_eq!(read(&file("bare", "p w")), Ok(Some("p w".into())));
        // Only one newline goes: the rest is the password, as written.
        assert_eq!(read(&file("two", "pw\n\n")), Ok(Some("pw\n".into())));
        for (name, text) in [("empty", ""), ("newline", "\n")] {
            let err = read(&file(name, text)).unwrap_err();
            assert!(err.ends_with(": empty"), "{err}");
        }
        let utf8 = read(&file("utf8", "\u{ff}hunter2")).unwrap();
        assert_eq!(utf8, Some("\u{ff}hunter2".into()));
        std::fs::write(dir.join("binary"), [0xffu8, b'h', b'u', b'n']).unwrap();
        let err = read(&dir.join("binary")).unwrap_err();
        assert!(!err.contains("hun"), "{err}");
        std::fs::write(dir.join("big"), vec![b'x'; 65 << 10]).unwrap();
        let err = read(&dir.join("big")).unwrap_err();
        assert!(
            err.contains("larger than 64 KiB") && !err.contains("xx"),
            "{err}"
        );
        let err = read(Path::new("/dev/zero")).unwrap_err();
        assert!(
            err.contains("not a regular file (a character device)"),
            "{err}"
        );
        let err = read(&dir.join("missing")).unwrap_err();
        assert!(
            err.contains("missing") && err.contains("--password-file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
