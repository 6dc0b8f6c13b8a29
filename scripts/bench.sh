#!/usr/bin/env bash
# Benchmark redlock side by side with flock(1), the single-host floor, and with `etcdctl lock`
# against a local etcd when etcd is installed. Prints one markdown table:
#   overhead   median wall time of `WRAPPER -- true` minus that of bare `true` (hyperfine)
#   handoff    gap from one holder's command ending to the next waiter's command starting,
#              p50 and p99, with 10 and with 100 waiters (timed by examples/stamp.rs, built
#              static like redlock so that its own start-up adds little to every column)
#   wait cost  requests each waiter sends per second while the lock stays held
#   peak RSS   VmHWM of the wrapper process while it holds the lock
# Timings depend on the machine: compare the columns of one run. Rows are measured in passes
# that take turns between the tools, so drift during a run weighs on every column alike.
#
# Usage: scripts/bench.sh [--quick]     (--quick: fewer runs, for checking the script)
# BENCH_BASELINE=PATH adds a column for another redlock binary (an earlier build, say), measured
# in the same interleaved passes: a before/after comparison that the machine's drift cannot skew.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[ "${1:-}" = "--quick" ] && quick=true
# rounds10 and rounds100: runs per waiter in each of the hand_passes hand-over passes.
if $quick; then
    runs=30 hand_passes=1 rounds10=5 rounds100=1 idle=6
else
    runs=300 hand_passes=3 rounds10=10 rounds100=1 idle=30
fi

. scripts/need.sh
need_packages hyperfine curl
. scripts/release-env.sh
release_cargo build --release --locked --bin redlock --example stamp >&2
redlock=$PWD/$release_dir/redlock
stamp=$PWD/$release_dir/examples/stamp

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A loopback port nothing listens on (random, checked).
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p"; return; }
    done
}

# --- servers ---------------------------------------------------------------------------------
# A server on a random port, started again on another one if the port turns out to be taken
# (free_port cannot see a port held by an outgoing connection). Sets $port and $spid.
start_on_free_port() { # ready-check-command server-command... (PORT, and PEER in the command,
    local check=$1 tries peer #                                   are replaced by free ports)
    shift
    for tries in 1 2 3 4 5; do
        port=$(free_port)
        peer=$(free_port)
        local cmd=("${@//PORT/$port}")
        "${cmd[@]//PEER/$peer}" &
        spid=$!
        for _ in $(seq 100); do
            if ${check//PORT/$port} >/dev/null 2>&1; then return 0; fi
            kill -0 "$spid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
    done
    echo "bench: cannot start $1" >&2
    exit 1
}

start_on_free_port "redis-cli -p PORT ping" redis-server --port PORT --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$work" --logfile "$work/redis.log"
rport=$port
pids+=("$spid")
url=redis://127.0.0.1:$rport
# Requests clients sent (commands run inside scripts are counted apart, and not here).
client_calls() {
    redis-cli -p "$rport" info commandstats |
        awk -F'[:=,]' '/^cmdstat_(evalsha|eval|blpop):/ {s += $3} END {print s + 0}'
}

have_etcd=false
if command -v etcd >/dev/null && command -v etcdctl >/dev/null; then
    have_etcd=true
    export ETCDCTL_API=3
    start_on_free_port "etcdctl --endpoints=127.0.0.1:PORT endpoint health" sh -c \
        "exec etcd --data-dir '$work/etcd' --listen-client-urls http://127.0.0.1:PORT \
        --advertise-client-urls http://127.0.0.1:PORT --listen-peer-urls http://127.0.0.1:PEER \
        --initial-advertise-peer-urls http://127.0.0.1:PEER \
        --initial-cluster default=http://127.0.0.1:PEER >'$work/etcd.log' 2>&1"
    eport=$port
    pids+=("$spid")
    ep=127.0.0.1:$eport
fi

# The wrappers, as prefixes of a command line: WRAPPER NAME -- CMD...
wrap() { # tool lockname
    case $1 in
    redlock) echo "$redlock run --url $url --key $2 --wait forever --" ;;
    baseline) echo "$BENCH_BASELINE run --url $url --key $2 --wait forever --" ;;
    flock) echo "flock $work/$2.flock" ;;
    etcdctl) echo "etcdctl --endpoints=$ep lock $2 --" ;;
    esac
}
tools=(flock redlock)
[ -n "${BENCH_BASELINE:-}" ] && tools+=(baseline)
$have_etcd && tools+=(etcdctl)
is_redlock() { [ "$1" = redlock ] || [ "$1" = baseline ]; }

say() { echo "bench: $*" >&2; }

# The machine drifts (other tenants, CPU frequency) over the minutes a run takes, so every row
# is measured in passes that take turns between the tools, and pooled: a slow minute then
# weighs on every column alike instead of on whichever tool was measuring.
passes=5

# --- overhead --------------------------------------------------------------------------------
# Per pass, one hyperfine over bare `true` and each wrapper; the row is the median of the pass
# medians, each minus its pass's bare `true`.
declare -A overhead
cmds=(true)
for t in "${tools[@]}"; do cmds+=("$(wrap "$t" over) true"); done
say "overhead"
for p in $(seq "$passes"); do
    hyperfine -N --style none --warmup 10 --runs $((runs / passes)) \
        --export-csv "$work/over-$p.csv" "${cmds[@]}" >&2
done
# CSV: command,mean,stddev,median,user,system,min,max (seconds)
median_of() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(for p in $(seq "$passes"); do awk -F, 'NR==2 {print $4}' "$work/over-$p.csv"; done | median_of)
i=3
for t in "${tools[@]}"; do
    overhead[$t]=$(for p in $(seq "$passes"); do
        awk -F, -v n="$i" 'NR==2 {b = $4} NR==n {printf "%.6f\n", ($4 - b) * 1000}' "$work/over-$p.csv"
    done | median_of | awk '{printf "%.2f ms", $1}')
    i=$((i + 1))
done

# --- handoff ---------------------------------------------------------------------------------
# One pass: a first holder takes the lock and holds it until N waiters have started and blocked
# (300 ms + 25 ms per waiter: etcdctl starts slowest), then each waiter runs the wrapper ROUNDS
# times around `stamp FILE 1` (1 ms hold). Gaps are taken within a pass, then pooled: every gap is
# a hand-over to a waiter that was already waiting, not to one still starting up.
handoff_pass() { # tool waiters rounds file
    local t=$1 n=$2 r=$3 f=$4 w running=()
    : >"$f"
    w=$(wrap "$t" "hand$n")
    $w "$stamp" "$f" $((300 + n * 25)) >/dev/null 2>&1 &
    running+=($!)
    sleep 0.1
    for _ in $(seq "$n"); do
        (for _ in $(seq "$r"); do $w "$stamp" "$f" 1 >/dev/null 2>&1 || echo "failed" >>"$f.err"; done) &
        running+=($!)
    done
    wait "${running[@]}"
    if [ -s "$f.err" ]; then echo "$t: $(wc -l <"$f.err") runs failed" >&2; fi
    sort -n "$f" | awk '
        NR > 1 { printf "%.6f\n", ($1 - prev_end) / 1e6; if ($1 < prev_end) print "OVERLAP" > "/dev/stderr" }
        { prev_end = $2 }' >>"$work/gaps-$t-$n"
}
declare -A h10 h100 per10 per100 calls
for n in 10 100; do
    [ "$n" = 10 ] && r=$rounds10 || r=$rounds100
    say "handoff: $n waiters, $hand_passes passes of $r rounds"
    for t in "${tools[@]}"; do : >"$work/gaps-$t-$n"; calls[$t]=0; done
    for p in $(seq "$hand_passes"); do
        for t in "${tools[@]}"; do
            redis-cli -p "$rport" config resetstat >/dev/null
            handoff_pass "$t" "$n" "$r" "$work/hand-$t-$n-$p"
            calls[$t]=$((calls[$t] + $(client_calls)))
        done
    done
    for t in "${tools[@]}"; do
        stats=$(sort -n "$work/gaps-$t-$n" | awk '{ g[NR] = $1 } END {
            printf "%.2f / %.2f ms (n=%d)", g[int((NR - 1) * 0.50) + 1], g[int((NR - 1) * 0.99) + 1], NR }')
        per=-
        is_redlock "$t" && per=$(awk -v c="${calls[$t]}" -v n="$(((n * r + 1) * hand_passes))" 'BEGIN {printf "%.1f", c / n}')
        if [ "$n" = 10 ]; then h10[$t]=$stats per10[$t]=$per; else h100[$t]=$stats per100[$t]=$per; fi
    done
done

# --- requests per waiter per second while waiting ---------------------------------------------
say "wait cost"
waiters=10
declare -A cost
cost[flock]="0 (kernel)"
cost[baseline]="-"
$redlock run --url "$url" --key idle -- sleep $((idle + 15)) &
holder=$!
sleep 0.5
others=()
for _ in $(seq "$waiters"); do
    $redlock run --url "$url" --key idle --wait forever -- true &
    others+=($!)
done
until [ "$(redis-cli -p "$rport" info clients | awk -F: '/^blocked_clients/ {print $2+0}')" = "$waiters" ]; do
    sleep 0.1
done
redis-cli -p "$rport" config resetstat >/dev/null
sleep "$idle"
calls=$(client_calls)
cost[redlock]=$(awk -v c="$calls" -v n="$waiters" -v s="$idle" 'BEGIN {printf "%.3f", c / n / s}')
kill "$holder"
wait "$holder" "${others[@]}" || true

if $have_etcd; then
    grpc_msgs() {
        curl -s "http://$ep/metrics" |
            awk '/^grpc_server_msg_received_total/ {s += $NF} END {printf "%d\n", s}'
    }
    etcdctl --endpoints="$ep" lock idle sleep $((idle + 15)) >/dev/null &
    holder=$!
    sleep 1
    others=()
    for _ in $(seq "$waiters"); do
        etcdctl --endpoints="$ep" lock idle true >/dev/null &
        others+=($!)
    done
    sleep 2
    before=$(grpc_msgs)
    sleep "$idle"
    after=$(grpc_msgs)
    cost[etcdctl]=$(awk -v c="$((after - before))" -v n="$waiters" -v s="$idle" \
        'BEGIN {printf "%.3f (gRPC messages, incl. holder)", c / n / s}')
    kill "$holder"
    wait "$holder" "${others[@]}" || true
fi

# --- peak RSS while holding -------------------------------------------------------------------
say "peak RSS"
declare -A rss per
for t in "${tools[@]}"; do per[$t]="${per10[$t]} / ${per100[$t]}"; done
for t in "${tools[@]}"; do
    w=$(wrap "$t" rss)
    [ "$t" = redlock ] && w="$redlock run --url $url --key rss --ttl 1s --"
    [ "$t" = baseline ] && w="$BENCH_BASELINE run --url $url --key rss --ttl 1s --"
    kb=$($w sh -c 'sleep 1.2; awk "/^VmHWM/ {print \$2}" /proc/$PPID/status')
    rss[$t]=$(awk -v k="$kb" 'BEGIN {printf "%.1f MiB", k / 1024}')
done

# --- table -------------------------------------------------------------------------------------
echo
echo "| | $(printf '%s | ' "${tools[@]}")"
echo "|---|$(printf -- '---|%.0s' "${tools[@]}")"
row() { # title assoc-name
    local -n m=$2
    printf '| %s |' "$1"
    for t in "${tools[@]}"; do printf ' %s |' "${m[$t]}"; done
    echo
}
row "overhead (median, minus bare \`true\`)" overhead
row "handoff p50 / p99, 10 waiters" h10
row "handoff p50 / p99, 100 waiters" h100
row "Redis requests per run, 10 / 100 waiters" per
row "requests per waiter per second while waiting" cost
row "peak RSS while holding" rss
echo
echo "bare \`true\`: $(awk -v b="$base" 'BEGIN {printf "%.2f ms", b * 1000}') median; $(nproc) cores; $(redis-server --version | awk '{print $3}')$($have_etcd && echo ", etcd $(etcd --version | awk 'NR==1 {print $3}')")"
