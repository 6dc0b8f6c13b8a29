#!/usr/bin/env bash
# What `--min-replicas` costs a renewal: starts a throwaway master and one replica on loopback
# and runs examples/renew_cost.rs, which times redlock's extend script alone and pipelined with
# `WAIT 1 1000` as redlock sends it (alternating, 2000 rounds each unless given).
# Usage: scripts/bench-renewal.sh [rounds]      REDLOCK_TEST_SERVER=<binary> for another server.
set -euo pipefail
cd "$(dirname "$0")/.."
server=${REDLOCK_TEST_SERVER:-redis-server}
cargo build --release --locked --example renew_cost >&2
. scripts/bench-lib.sh
"$server" --version >&2
common=(--bind 127.0.0.1 --save '' --appendonly no --dir "$work")
start_on_free_port "redis-cli -p PORT ping" "$server" --port PORT "${common[@]}" \
    --dbfilename master.rdb --logfile "$work/master.log"
mport=$port
start_on_free_port "redis-cli -p PORT ping" "$server" --port PORT "${common[@]}" \
    --dbfilename replica.rdb --logfile "$work/replica.log" --replicaof 127.0.0.1 "$mport"
for _ in $(seq 200); do
    grep -q "sync: Finished with success" "$work/replica.log" 2>/dev/null && break
    sleep 0.05
done
grep -q "sync: Finished with success" "$work/replica.log" || { cat "$work"/*.log >&2; exit 1; }
target/release/examples/renew_cost "redis://127.0.0.1:$mport" "${1:-2000}"
