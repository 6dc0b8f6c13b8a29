#!/usr/bin/env bash
# The whole check, as CI runs it: formatting, lints, the Debian package (built, installed, checked,
# removed: scripts/check-deb.sh), then unit and integration tests against real redis-server
# processes the tests start themselves (the core of them on valkey-server first). The tests run
# last so that the full suite's summary closes the log. promtool (Debian's prometheus package)
# checks the metrics file in the counters module; pgfence:: starts a PostgreSQL server
# (Debian's postgresql, whose pg_ctlcluster stands for it on PATH); its recipe uses jq and pgrep;
# Debian's cron runs the crontab recipes in the crond module; the conformance and etcd modules
# start 3-member etcd clusters of Debian's etcd-server on free ports (its package may start a
# service on 2379 when installed; no test uses that one), read with its etcdctl (etcd-client).
# The ZooKeeper backend's tests, and zk_fixture:: which checks their fixture, start 3-member
# ZooKeeper ensembles on free ports: Debian's ZooKeeper 3.8 jars (libzookeeper-java, a file
# and not a command) run by java (default-jre-headless), with no script and no service.
# The partition suite (tests/partition.rs, run by the last line's `cargo test --locked`), and
# the chaos suite's partition phases, need root: it makes network namespaces with ip (iproute2), cuts one way with nft (nftables) and
# gives each host its hostname with unshare (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/need.sh
need_packages tmux openssl groff:groff-base man:man-db fish promtool:prometheus faketime \
  pg_ctlcluster:postgresql pgbouncer jq pgrep:procps cron etcd:etcd-server etcdctl:etcd-client \
  java:default-jre-headless /usr/share/java/zookeeper.jar:libzookeeper-java \
  ip:iproute2 nft:nftables unshare:util-linux
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
bash scripts/check-deb.sh
# The core of the suite on Valkey 8 as well (managed services are moving to it): one server's
# lock, lease and faults, contention, --min-interval, failovers under --min-replicas,
# semaphores and shared locks, and fencing tokens across restarts and failovers. About 50 s here; no TLS (that Valkey build has none). Before the
# full Redis run, whose summary closes the log.
valkey=$(bash scripts/need-valkey.sh)
REDLOCK_TEST_SERVER=$valkey cargo test --locked --test integration -- \
  basic:: contention:: lease:: cron:: faults:: failover::a_ semaphore:: fencing::
# The build this round started from, for the rolling-upgrade tests (tests/integration/upgrade.rs
# runs it beside the build under test): built from git once into target/old-build/ (about a
# minute on a clean checkout, which must have the commit: a full clone, not a shallow one).
REDLOCK_OLD_BIN=$(bash scripts/old-build.sh)
export REDLOCK_OLD_BIN
# 0.3.0, the first release on PostgreSQL, for tests/integration/postgres_upgrade.rs (its
# tables are what this build's init updates).
REDLOCK_OLD_PG_BIN=$(bash scripts/old-build.sh 84b5d377afb0befbd675035f05d628df27a214a0)
export REDLOCK_OLD_PG_BIN
cargo test --locked
