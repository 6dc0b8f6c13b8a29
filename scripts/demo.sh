#!/usr/bin/env bash
# A demo with a throwaway Redis: three jobs race for one lock. One runs, one skips (exit 75),
# one waits its turn. Then three jobs share a semaphore of two (--limit 2): two run together,
# the third waits for a free slot. Installs redis-server when missing; leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/need.sh
need_packages

echo "== building redlock"
cargo build --release --quiet
redlock=$PWD/target/release/redlock

dir=$(mktemp -d)
trap 'redis-cli -s "$dir/redis.sock" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
redis-server --port 0 --unixsocket "$dir/redis.sock" --save "" --appendonly no \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
for _ in $(seq 100); do redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done
export REDLOCK_URL="unix://$dir/redis.sock"
echo "== throwaway Redis on $REDLOCK_URL"

job='echo "  [$1] running with fencing token $REDLOCK_FENCING_TOKEN"; sleep 2; echo "  [$1] done"'

echo "== job A takes the lock 'backup' and works for 2 s"
"$redlock" run --key backup --ttl 3s -- sh -c "$job" sh A &
a=$!
sleep 0.5

echo "== job B tries the same lock once"
set +e
"$redlock" run --key backup -- sh -c "$job" sh B
echo "  [B] redlock exited $? (75: the lock is busy, the job was skipped)"
set -e

echo "== job C waits up to 10 s for its turn"
"$redlock" run --key backup --wait 10s -- sh -c "$job" sh C
echo "  [C] redlock exited $?"
wait "$a"
echo "  [A] redlock exited $?"
echo "== the lock is free again: $(redis-cli -s "$dir/redis.sock" exists 'redlock:{backup}') keys held"

echo "== jobs D, E and F share the semaphore 'dumps' (--limit 2): two at once, F waits for a slot"
for j in D E F; do
  "$redlock" run --key dumps --limit 2 --ttl 3s --wait 10s -- sh -c "$job" sh "$j" &
  sleep 0.2
done
wait
echo "== the semaphore is free again: $(redis-cli -s "$dir/redis.sock" exists 'redlock:{dumps}') keys held"
