//! How a member is laid out and started: its `zoo.cfg`, `log4j.properties` and `data/myid`, and
//! the `java` command lines of a member and of ZooKeeper's own command-line client.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ZkOpts;
use crate::common::TempDir;
use crate::common::etcd::find_binary;

/// The JVM's flags for a member: a small heap; the serial collector (fewer threads to compete
/// for 2 cores: 35 a member, not 43); only the quick compiler (C1), which a member that lives
/// seconds profits from; no perf data file in /tmp/hsperfdata_*, which a SIGKILLed JVM leaves
/// behind. Three members started at once on 2 busy cores served after 1.21 s (median of 7;
/// 1.13 to 1.29) with these, 1.58 s (1.30 to 3.33) with none; C1 did most of it. Class data
/// sharing (`-Xshare:auto`) is JDK 17's default already: off, they took 1.83 s.
const JVM_FLAGS: &[&str] = &[
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
];

/// The `java` the fixture runs: `REDLOCK_TEST_JAVA`, else `java` from PATH.
pub(crate) fn java_binary() -> PathBuf {
    find_binary("REDLOCK_TEST_JAVA", "java", "default-jre-headless")
}

/// The directory of ZooKeeper's jars: `REDLOCK_TEST_ZOOKEEPER_JARS`, else /usr/share/java.
fn jar_dir() -> PathBuf {
    std::env::var_os("REDLOCK_TEST_ZOOKEEPER_JARS")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/share/java"), PathBuf::from)
}

/// `first` and then the named jars of [`jar_dir`], as a classpath. Panics, naming the Debian
/// package, if a jar is missing.
fn classpath(first: Option<&Path>, jars: &[(&str, &str)]) -> String {
    let dir = jar_dir();
    let mut parts: Vec<String> = first.map(|p| p.display().to_string()).into_iter().collect();
    for (jar, package) in jars {
        let path = dir.join(jar);
        assert!(
            path.is_file(),
            "no {}: install Debian's {package} package (apt-get install {package}), or name \
             a directory that holds it in REDLOCK_TEST_ZOOKEEPER_JARS",
            path.display()
        );
        parts.push(path.display().to_string());
    }
    parts.join(":")
}

/// Writes member `myid`'s `zoo.cfg`, `log4j.properties` and `data/myid` into `dir`; it serves
/// clients on `client` (`address:port`). `servers` is every member's `server.N=` line, or
/// nothing for a standalone server.
pub(crate) fn write_dir(
    dir: &TempDir,
    myid: usize,
    client: (&str, u16),
    servers: &str,
    opts: &ZkOpts,
) {
    let (client_address, client_port) = client;
    let data = dir.join("data");
    fs::create_dir(&data).unwrap();
    fs::write(data.join("myid"), format!("{myid}\n")).unwrap();
    let tick = opts.tick_ms;
    let mut cfg = format!(
        "# A member of a redlock test's ensemble (tests/common/zookeeper.rs).\n\
         tickTime={tick}\n\
         initLimit=20\n\
         syncLimit=10\n\
         minSessionTimeout={}\n\
         maxSessionTimeout={}\n\
         dataDir={}\n\
         clientPort={client_port}\n\
         clientPortAddress={client_address}\n\
         # Every test client comes from one address: no cap per address (60 by default).\n\
         maxClientCnxns=0\n\
         # Jetty on 8080.\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n\
         # A transaction log file of 1 MiB at a time, not 64.\n\
         preAllocSize=1024\n\
         # No fsync per write: a SIGKILLed member loses nothing the kernel has.\n\
         forceSync=no\n\
         {servers}",
        2 * tick,
        20 * tick,
        data.display(),
    );
    for line in &opts.extra_config {
        cfg += line;
        cfg += "\n";
    }
    fs::write(dir.join("zoo.cfg"), cfg).unwrap();
    fs::write(dir.join("log4j.properties"), LOG4J_PROPERTIES).unwrap();
}

/// How a member's JVM is started, beyond its directory.
#[derive(Clone, Copy, Default)]
pub(crate) struct Launch<'a> {
    /// Its wall clock moved by that much (libfaketime's offset, `+41d`).
    pub clock: Option<&'a str>,
    /// TLS on its `secureClientPort`: Netty's codec on the classpath, which Debian's
    /// zookeeper.jar leaves off (docs/zookeeper.md says so).
    pub tls: bool,
}

/// The jar a member's TLS needs beside [`SERVER_JARS`].
const TLS_JARS: &[(&str, &str)] = &[("netty-codec.jar", "libnetty-java")];

/// The command that runs the member whose CONFDIR is `dir`, in `dir`, as `launch` says.
pub(super) fn server_command(dir: &Path, launch: Launch) -> Command {
    server_command_from(Command::new(java_binary()), dir, launch)
}

/// [`server_command`]'s arguments after `cmd`, a command that runs [`java_binary`] (inside a
/// host of a test's network, say).
pub(crate) fn server_command_from(mut cmd: Command, dir: &Path, launch: Launch) -> Command {
    clear_java_env(&mut cmd);
    if let Some(shift) = launch.clock {
        fake_clock(&mut cmd, shift);
    }
    let jars = match launch.tls {
        true => [SERVER_JARS, TLS_JARS].concat(),
        false => SERVER_JARS.to_vec(),
    };
    cmd.current_dir(dir)
        .args(JVM_FLAGS)
        .arg("-cp")
        .arg(classpath(Some(dir), &jars))
        .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
        .arg(dir.join("zoo.cfg"));
    cmd
}

/// The command that runs ZooKeeper's command-line client (`zkCli.sh`'s class) with `args`
/// against `servers` (`host:port,host:port`).
pub(super) fn cli_command(servers: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(java_binary());
    clear_java_env(&mut cmd);
    cmd.args(JVM_FLAGS)
        .arg("-cp")
        .arg(classpath(None, CLI_JARS))
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .args(["-server", servers])
        .args(args);
    cmd
}

/// A member's classpath after its CONFDIR: ZooKeeper, and log4j 1.2 behind slf4j.
const SERVER_JARS: &[(&str, &str)] = &[
    ("zookeeper.jar", "libzookeeper-java"),
    ("slf4j-log4j12.jar", "libslf4j-java"),
    ("log4j-1.2.jar", "liblog4j1.2-java"),
];

/// zkCli's: ZooKeeper, and slf4j's backend that logs nothing (its answers go to stdout).
const CLI_JARS: &[(&str, &str)] = &[
    ("zookeeper.jar", "libzookeeper-java"),
    ("slf4j-nop.jar", "libslf4j-java"),
];

/// Every line at INFO and above to stdout, which [`ZkEnsemble`] sends to the member's log.
const LOG4J_PROPERTIES: &str = "\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
";

/// libfaketime preloaded into `cmd`, its wall clock moved by `shift`. Not through the
/// `faketime` command, which forks and waits: the JVM would not be the fixture's child, and a
/// SIGKILL of it would leave the member running. The monotonic clock is left alone: the JVM
/// times its waits and ZooKeeper its sessions with it. Java 17 runs under it: a member's nodes
/// get the moved times. `REDLOCK_TEST_LIBFAKETIME` names another library.
fn fake_clock(cmd: &mut Command, shift: &str) {
    let lib = std::env::var_os("REDLOCK_TEST_LIBFAKETIME")
        .filter(|p| !p.is_empty())
        .map_or_else(
            || {
                let arch = std::env::consts::ARCH;
                PathBuf::from(format!(
                    "/usr/lib/{arch}-linux-gnu/faketime/libfaketime.so.1"
                ))
            },
            PathBuf::from,
        );
    assert!(
        lib.is_file(),
        "no {}: install Debian's faketime package (apt-get install faketime), or name the \
         library in REDLOCK_TEST_LIBFAKETIME",
        lib.display()
    );
    // Without FAKETIME_DONT_FAKE_MONOTONIC a JVM hangs (libfaketime's README). Its
    // FORCE_MONOTONIC_FIX, on by default with this glibc, makes each pthread_cond_timedwait
    // return late: a run's take against the member took 0.18 to 1.17 s (10 runs) where one
    // against a member without libfaketime took 0.01 to 0.14 s; with the fix off, 0.01 to 0.05.
    cmd.env("LD_PRELOAD", lib)
        .env("FAKETIME", shift)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME_FORCE_MONOTONIC_FIX", "0");
}

/// Removes the variables every JVM reads as more flags (and announces on stderr), and
/// `CLASSPATH`: a member runs with the fixture's flags and classpath only.
fn clear_java_env(cmd: &mut Command) {
    for name in [
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
    ] {
        cmd.env_remove(name);
    }
}
