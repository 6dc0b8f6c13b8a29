#!/usr/bin/env bash
# The chaos suite's partition phases in their long form, for a nightly run: clients on hosts in
# network namespaces race `redlock run --wait` for one lock on a 3-member etcd cluster, on a
# quorum of three Redis masters, and on Redis with Sentinel (`--min-replicas 1`), while the
# links between the hosts are cut and healed at random. Fails on two workers at once, a write
# refused, a token repeated or out of order, or a holder cut off from a majority that ran past
# its lease. Needs root (ip netns, nft, unshare),
# etcd and redis-server. CHAOS_SEED repeats a printed schedule; CHAOS_PHASES=partition-etcd
# (partition-quorum, partition-sentinel) runs one backend. docs/testing.md has the numbers.
# Usage: sudo scripts/chaos-partition.sh [seconds per backend] [clients]   (300 and 8 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "chaos-partition.sh: needs root, for network namespaces" >&2
    exit 1
fi
export CHAOS_PARTITION_SECS=${1:-300}
export CHAOS_CLIENTS=${2:-8}
export CHAOS_PHASES=${CHAOS_PHASES:-partition}
exec cargo test --locked --test chaos
