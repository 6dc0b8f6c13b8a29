#!/usr/bin/env bash
# Benchmark redlock side by side with flock(1), the single-host floor, and, when etcd is
# installed, redlock on etcd (the redlock-etcd column: `redlock run --url etcd://...`) beside
# `etcdctl lock`, both against the same local single-member etcd in the same passes, and, when java
# and Debian's ZooKeeper 3.8 jars are installed, redlock on ZooKeeper (the redlock-zk column:
# `redlock run --url zk://...`) against a local standalone ZooKeeper, held to redlock-etcd's
# numbers of the same run. Prints one markdown table, then the budget ratios this release is held
# to (see the end):
#   overhead   median wall time of `WRAPPER -- true` minus that of bare `true` (hyperfine)
#   handoff    gap from one holder's command ending to the next waiter's command starting,
#              p50 and p99, with 10, 30 and 100 waiters (timed by examples/stamp.rs, built
#              static like redlock so that its own start-up adds little to every column)
#   slot       the same for a semaphore (`--limit 3`, 30 waiters): from a holder's command
#              ending to the command of the waiter that took the freed slot starting, beside
#              the plain lock's and flock's 30-waiter hand-over of the same passes
#   wait cost  requests each waiter sends per second while the lock (or every slot) stays held;
#              on etcd, gRPC messages the server received (its /metrics), per waiter per second;
#              on ZooKeeper, packets the server received (its `mntr`), per waiter per second
#   gRPC msgs  on etcd, gRPC messages the server received per run during the hand-over passes
#              (the waiters' watches and keep-alives included), for etcdctl and redlock-etcd
#   ZK packets on ZooKeeper, packets the server received per run during the hand-over passes
#              (`mntr`'s zk_packets_received: requests and session pings), for redlock-zk
#   Redis time what a shared Redis pays per run (INFO commandstats): the time it spent on the
#              requests of each run, the scripts' work included, and the commands the scripts
#              ran, for runs alone and for runs shared among 10 waiters on one key
#   peak RSS   VmHWM of the wrapper process while it holds the lock
#   per mode   Redis time of a plain run (acquire + release, nobody waiting) and the commands
#              the scripts ran in it, for a bare lock (examples/bare_lock.rs: SET NX PX + INCR in
#              one script, a compare-and-DEL in another, one connection per run) and for
#              redlock plain, --fair, --limit 2 and --shared; each as a multiple of the bare lock's
#   list       `redlock list` of 10,000 held locks: its wall time and the Redis time it costs
#   PostgreSQL when Debian's postgresql is installed: redlock on a local PostgreSQL (the
#              redlock-pg column, `redlock run --url postgres://...`) beside one `psql -c 'SELECT
#              1'` against the same server (the psql column: its whole run, as overhead), one
#              psql session making two durable one-row writes (psql-2w: what a run's take and
#              release are at the least, for reference), and the server's time per plain run
#              from pg_stat_statements
# Timings depend on the machine: compare the columns of one run. Rows are measured in passes
# that take turns between the tools, so drift during a run weighs on every column alike.
#
# The overhead and the 10/30/100-waiter hand-over rows are also drawn as an SVG chart
# (scripts/bench-chart.py) into docs/img/bench.svg, or BENCH_CHART=PATH, which
# docs/performance.md shows; the numbers it was drawn from go beside it (the same name, .tsv).
#
# Budgets, printed after the table from the same run as "ratio (budget, met/NOT met)": on Redis,
# a plain run's Redis time at most 3.5x the bare lock's, hand-over p50 at most 2x flock's (10, 30
# and 100 waiters), overhead at most flock's + 2 ms and no more than the old build's, peak RSS at
# most 6 MiB; on etcd, overhead at most 0.4x
# etcdctl lock's, hand-over p50 at most 1.5x etcdctl lock's with 10 and with 100 waiters, peak
# RSS at most 8 MiB; on PostgreSQL, overhead at most 1.5x psql-2w's, hand-over p50 no worse than
# 0.3.0's (the pg-0.3.0 column: that release on the same server, in a schema of its own) with 10
# and with 100 waiters, peak RSS at most 8 MiB; on ZooKeeper, overhead no more than redlock-etcd's
# (at most 1.0x), hand-over p50 at most 1.5x redlock-etcd's with 10 and with 100 waiters, peak RSS
# at most 8 MiB.
# ZooKeeper's sessions last tickTime x 2 to x 20 (4 s to 40 s here, its defaults): wherever the
# other columns take a --ttl outside that (1 s for peak RSS, 300 s for a holder during the wait
# cost), redlock-zk takes 4 s or 40 s, since a --ttl above the maximum is refused.
# "No worse than" another build is judged from the samples, not from two numbers: the ratio
# with its 95 % bootstrap interval (scripts/bench-compare.py over every hand-over gap, or every
# hyperfine run, of the two columns), met unless the whole interval lies above 1.00. Two copies
# of one build scatter a few per cent either side of 1.00 from run to run.
#
# Usage: scripts/bench.sh [--quick]     (--quick: fewer runs, about a minute)
# The `old` column is the build the round started from (scripts/old-build.sh --release builds it
# from git as it ships, once; BENCH_OLD=0 leaves it out), measured in the same interleaved passes.
# The pg-0.3.0 column is 0.3.0 on PostgreSQL, built the same way (BENCH_PG_REF=COMMIT names another
# build, BENCH_PG_REF=0 leaves it out), and etcd-0.3.0 the same build on the same etcd: each
# backend's overhead and hand-over p50 are held to be no worse than 0.3.0's.
# BENCH_BASELINE=PATH adds a column for another redlock binary (an earlier build, say; the
# chart names it BENCH_BASELINE_LABEL, "baseline, Redis" by default), measured
# in the same interleaved passes: a before/after comparison that the machine's drift cannot skew;
# on Redis its overhead and hand-over p50 are budget lines too (BENCH_BASELINE=the 0.3.0 build
# holds Redis to 0.3.0's).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[ "${1:-}" = "--quick" ] && quick=true
# rounds10 and rounds100: runs per waiter in each of the hand_passes hand-over passes; the
# 30-waiter rows (plain and --limit 3) run once per waiter, in passes30 passes.
# mode_runs: runs per pass of the per-mode Redis time, in mode_passes passes; lists: how many
# times `redlock list` of $list_locks locks is timed (the median is shown).
if $quick; then
    runs=30 hand_passes=1 rounds10=5 rounds100=1 passes30=1 idle=3 rt_runs=50 rt_passes=1
    mode_runs=30 mode_passes=3 lists=1
else
    runs=300 hand_passes=6 rounds10=5 rounds100=1 passes30=10 idle=30 rt_runs=200 rt_passes=3
    mode_runs=100 mode_passes=3 lists=3
fi
list_locks=10000
slots=3 # the semaphore's N

. scripts/need.sh
# etcd-server and etcd-client: the etcdctl column (without them the run leaves it out); java and
# libzookeeper-java: the redlock-zk column (likewise; BENCH_ZK=0 leaves it out and installs neither).
zk_packages=()
[ "${BENCH_ZK:-1}" != 0 ] && zk_packages=(java:default-jre-headless /usr/share/java/zookeeper.jar:libzookeeper-java)
need_packages hyperfine curl etcd:etcd-server etcdctl:etcd-client "${zk_packages[@]}"
. scripts/release-env.sh
release_cargo build --release --locked --bin redlock --example stamp --example bare_lock >&2
redlock=$PWD/$release_dir/redlock
stamp=$PWD/$release_dir/examples/stamp
bare=$PWD/$release_dir/examples/bare_lock
# The build the round started from, built as it ships (once; later runs find it).
old=
if [ "${BENCH_OLD:-1}" != 0 ]; then
    old=$(bash scripts/old-build.sh --release)
fi
# 0.3.0 as it shipped: PostgreSQL's hand-over is held to it.
pg_ref=${BENCH_PG_REF:-84b5d377afb0befbd675035f05d628df27a214a0}
pgold=
if [ "$pg_ref" != 0 ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    pgold=$(bash scripts/old-build.sh --release "$pg_ref")
fi

. scripts/bench-lib.sh

# --- servers ---------------------------------------------------------------------------------
start_on_free_port "redis-cli -p PORT ping" redis-server --port PORT --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$work" --logfile "$work/redis.log"
rport=$port
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
    ep=127.0.0.1:$eport
    eurl=etcd://$ep
fi
# ZooKeeper 3.8 (Debian's jars), standalone, run by java directly (no zkServer.sh, not on 2181):
# ZooKeeper's default tickTime (sessions of 4 s to 40 s), no limit on connections from one
# address (the 100 waiters all come from 127.0.0.1), the four-letter words on (ruok, mntr). The
# JVM as Debian's service runs it (its JAVA_OPTS are empty: G1 and the tiered JIT), the heap
# bounded to 256 MiB.
# Answers a four-letter word WORD on PORT (ZooKeeper closes the connection after its answer; a
# word sent while it is still starting can go unanswered, hence the timeout).
zk_4lw() { # port word
    (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null
}
zk_ok() { [ "$(zk_4lw "$1" ruok)" = imok ]; }
have_zk=false
zkjar=/usr/share/java/zookeeper.jar
if [ "${BENCH_ZK:-1}" != 0 ] && command -v java >/dev/null && [ -e "$zkjar" ]; then
    have_zk=true
    mkdir -p "$work/zk/conf" "$work/zk/data"
    cp /etc/zookeeper/conf/log4j.properties "$work/zk/conf/"
    zk_cp=$work/zk/conf:$zkjar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
    start_on_free_port "zk_ok PORT" sh -c \
        "printf '%s\n' tickTime=2000 'dataDir=$work/zk/data' clientPort=PORT \
        clientPortAddress=127.0.0.1 admin.enableServer=false '4lw.commands.whitelist=*' \
        maxClientCnxns=0 >'$work/zk/conf/zoo.cfg' &&
        exec java -Xmx256m \
        -Dzookeeper.root.logger=INFO,CONSOLE -cp '$zk_cp' \
        org.apache.zookeeper.server.quorum.QuorumPeerMain '$work/zk/conf/zoo.cfg' >'$work/zk.log' 2>&1"
    zport=$port
    zurl=zk://127.0.0.1:$zport
    # Warmed before any pass: a member that has served for a while has compiled its request
    # path (the JIT), which one just started has not. Measured cold, the first passes of
    # redlock-zk took 1.3 to 1.8x the time of later ones; after 1500 runs they no longer move.
    # etcd, Redis and PostgreSQL are compiled ahead of time, and hyperfine's warm-up does for
    # them what it needs.
    echo "bench: [${SECONDS}s] warming ZooKeeper's JIT: 1500 runs" >&2
    for _ in $(seq 1500); do $redlock run --url "$zurl" --key warm -- true; done
fi
# PostgreSQL (Debian's server binaries), as Debian configures it (fsync and synchronous commits
# on), with pg_stat_statements loaded; run as the postgres user, since it refuses root.
have_pg=false
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -n "$pgbin" ] && [ -x "$pgbin/initdb" ]; then
    have_pg=true
    mkdir -p "$work/pg"
    as_pg=()
    if [ "$(id -u)" = 0 ]; then
        chmod 755 "$work"
        chown postgres "$work/pg"
        as_pg=(runuser -u postgres --)
    fi
    "${as_pg[@]}" "$pgbin/initdb" -D "$work/pg/data" -U postgres --auth=trust --no-instructions >/dev/null
    start_on_free_port "$pgbin/pg_isready -q -h 127.0.0.1 -p PORT" "${as_pg[@]}" "$pgbin/postgres" \
        -D "$work/pg/data" -k "$work/pg" -p PORT -c listen_addresses=127.0.0.1 \
        -c shared_preload_libraries=pg_stat_statements -c max_connections=300
    pport=$port
    purl=postgres://postgres@127.0.0.1:$pport/postgres
    "$redlock" init --url "$purl" >/dev/null
    # 0.3.0 in a schema of its own, made by its own init: the two builds' tables need not match.
    purl_old="$purl?schema=redlock_old"
    [ -n "$pgold" ] && "$pgold" init --url "$purl_old" >/dev/null
    pg() { "$pgbin/psql" -X -q -At -d "$purl" -c "$1"; }
    pg "CREATE EXTENSION pg_stat_statements" >/dev/null
    # For the psql-2w column: one row that psql updates twice, as a run writes its lock twice.
    pg "CREATE TABLE bench_floor (id int PRIMARY KEY, n bigint); INSERT INTO bench_floor VALUES (1, 0)" >/dev/null
fi
# gRPC messages the etcd server received so far (unary requests, and each message on a stream:
# watch requests, keep-alives), from its /metrics.
grpc_msgs() {
    curl -s "http://$ep/metrics" |
        awk '/^grpc_server_msg_received_total/ {s += $NF} END {printf "%d\n", s}'
}
# Packets the ZooKeeper server received so far (requests and session pings; of the four-letter
# words only the previous reading, which counts as one packet: the callers take 1 off), and the
# ephemeral nodes it holds (one per waiting or holding redlock-zk).
zk_stat() { # mntr-key
    zk_4lw "$zport" mntr | awk -v k="$1" '$1 == k {print $2 + 0}'
}
# How many keys etcd holds under PREFIX.
etcd_count() { # prefix
    etcdctl --endpoints="$ep" get --prefix --keys-only --limit=1 -w json "$1" |
        sed -n 's/.*"count":\([0-9]*\).*/\1/p'
}

# The wrappers, as prefixes of a command line: WRAPPER NAME -- CMD...
# redlock-sem and baseline-sem hold one of $slots slots of a semaphore.
wrap() { # tool lockname
    case $1 in
    redlock) echo "$redlock run --url $url --key $2 --wait forever --" ;;
    baseline) echo "$BENCH_BASELINE run --url $url --key $2 --wait forever --" ;;
    old) echo "$old run --url $url --key $2 --wait forever --" ;;
    old-sem) echo "$old run --url $url --key $2 --limit $slots --wait forever --" ;;
    bare) echo "$bare $url bare:{$2}" ;;
    redlock-sem) echo "$redlock run --url $url --key $2 --limit $slots --wait forever --" ;;
    baseline-sem) echo "$BENCH_BASELINE run --url $url --key $2 --limit $slots --wait forever --" ;;
    flock) echo "flock $work/$2.flock" ;;
    etcdctl) echo "etcdctl --endpoints=$ep lock $2 --" ;;
    redlock-etcd) echo "$redlock run --url $eurl --key $2 --wait forever --" ;;
    redlock-pg) echo "$redlock run --url $purl --key $2 --wait forever --" ;;
    pg-0.3.0) echo "$pgold run --url $purl_old --key $2 --wait forever --" ;;
    etcd-0.3.0) echo "$pgold run --url $eurl --key $2 --wait forever --" ;;
    redlock-zk) echo "$redlock run --url $zurl --key $2 --wait forever --" ;;
    esac
}
tools=(flock redlock)
[ -n "$old" ] && tools+=(old)
[ -n "${BENCH_BASELINE:-}" ] && tools+=(baseline)
$have_etcd && tools+=(etcdctl redlock-etcd)
$have_pg && tools+=(redlock-pg)
$have_pg && [ -n "$pgold" ] && tools+=(pg-0.3.0)
# 0.3.0 on the same etcd, its keys beside this build's (lock names are per tool).
$have_etcd && [ -n "$pgold" ] && tools+=(etcd-0.3.0)
$have_zk && tools+=(redlock-zk)
# The table's columns: the bare lock has no --wait, so it is in the rows of single runs only
# (overhead, Redis time per mode, peak RSS); one psql is in the overhead row only.
columns=(flock bare "${tools[@]:1}")
$have_pg && columns+=(psql psql-2w)
# The semaphore's hand-over is measured for the redlock builds that have --limit.
sems=(redlock-sem)
[ -n "$old" ] && sems+=(old-sem)
if [ -n "${BENCH_BASELINE:-}" ] && "$BENCH_BASELINE" run --help 2>/dev/null | grep -q -- --limit; then
    sems+=(baseline-sem)
fi

say() { echo "bench: [${SECONDS}s] $*" >&2; }

# The machine drifts (other tenants, CPU frequency) over the minutes a run takes, so every row
# is measured in passes that take turns between the tools, and pooled: a slow minute then
# weighs on every column alike instead of on whichever tool was measuring.
passes=5

# --- overhead --------------------------------------------------------------------------------
# Per pass, one hyperfine over bare `true` and each wrapper; the row is the median of the pass
# medians, each minus its pass's bare `true`.
declare -A overhead over_raw
over_tools=(flock bare "${tools[@]:1}")
$have_pg && over_tools+=(psql psql-2w)
cmds=(true)
floor_write="UPDATE bench_floor SET n = n + 1 WHERE id = 1"
for t in "${over_tools[@]}"; do
    case $t in
    psql) cmds+=("$pgbin/psql -X -q -d $purl -c 'SELECT 1'") ;;
    psql-2w) cmds+=("$pgbin/psql -X -q -d $purl -c '$floor_write' -c '$floor_write'") ;;
    *) cmds+=("$(wrap "$t" over) true") ;;
    esac
done
say "overhead"
for p in $(seq "$passes"); do
    hyperfine -N --style none --warmup 10 --runs $((runs / passes)) \
        --export-csv "$work/over-$p.csv" --export-json "$work/over-$p.json" "${cmds[@]}" >&2
done
# Every run's wall time (seconds), one file per pass: times-true.P and times-TOOL.P, for the
# "no worse than" lines (scripts/bench-compare.py).
python3 - "$work" "$passes" true "${over_tools[@]}" <<'PY'
import json, sys
work, passes, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for p in range(1, passes + 1):
    with open(f"{work}/over-{p}.json", encoding="utf-8") as f:
        results = json.load(f)["results"]
    for name, result in zip(names, results):
        with open(f"{work}/times-{name}.{p}", "w", encoding="utf-8") as out:
            out.writelines(f"{t}\n" for t in result["times"])
PY
# CSV: command,mean,stddev,median,user,system,min,max (seconds)
median_of() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(for p in $(seq "$passes"); do awk -F, 'NR==2 {print $4}' "$work/over-$p.csv"; done | median_of)
i=3
for t in "${over_tools[@]}"; do
    over_raw[$t]=$(for p in $(seq "$passes"); do
        awk -F, -v n="$i" 'NR==2 {b = $4} NR==n {printf "%.6f\n", ($4 - b) * 1000}' "$work/over-$p.csv"
    done | median_of)
    overhead[$t]=$(awk -v v="${over_raw[$t]}" 'BEGIN {printf "%.2f ms", v}')
    i=$((i + 1))
done

# --- handoff ---------------------------------------------------------------------------------
# One pass: first holders (one, or N for a semaphore) take the lock and hold it until every
# waiter has started and blocked (300 ms + 25 ms per waiter: etcdctl starts slowest), then each
# waiter runs the wrapper ROUNDS times around `stamp FILE 1` (1 ms hold), which appends its
# command's start and end (CLOCK_MONOTONIC). Gaps are taken within a pass, then pooled: every gap
# is a hand-over to a waiter that was already waiting, not to one still starting up.
#
# Which end a start follows (gaps): the stamps are walked in time order, ends free a slot
# and starts take one; each start is matched to the earliest end whose freed slot nobody has
# taken yet (first freed, first taken), and the gap is start minus that end. With one slot this
# is simply the previous holder's end. With N slots it is the time a freed slot stood empty: a
# slot left empty (a waiter not woken, sitting out its fallback timer) shows up as long gaps
# instead of hiding behind the other slots' quick hand-overs, and the gaps always add up to
# the slots' total empty time whichever end a start is matched to. A start that finds no freed
# slot took one of the free slots the lock began with (the first holders): not a hand-over.
# More than N commands running at once is reported as OVERLAP (a broken lock).
gaps() { # slots file: one gap (ms) per hand-over
    # Events `TIME KIND`, kind 0 an end and 1 a start: on a tie a slot is freed before it is taken.
    awk '{ print $1, 1; print $2, 0 }' "$2" | sort -k1,1n -k2,2n | awk -v slots="$1" '
        BEGIN { next_freed = 1 }
        $2 == 0 { running--; freed[++last] = $1; next }
        ++running > slots { print "OVERLAP" > "/dev/stderr" }
        next_freed <= last { printf "%.6f\n", ($1 - freed[next_freed++]) / 1e6 }'
}
handoff_pass() { # tool waiters rounds file lockname [holders]
    local t=$1 n=$2 r=$3 f=$4 first=${6:-1} w running=()
    : >"$f"
    w=$(wrap "$t" "$5")
    for _ in $(seq "$first"); do
        $w "$stamp" "$f" $((300 + n * 25)) >/dev/null 2>&1 &
        running+=($!)
    done
    sleep 0.1
    for _ in $(seq "$n"); do
        (for _ in $(seq "$r"); do $w "$stamp" "$f" 1 >/dev/null 2>&1 || echo "failed" >>"$f.err"; done) &
        running+=($!)
    done
    wait "${running[@]}"
    if [ -s "$f.err" ]; then echo "$t: $(wc -l <"$f.err") runs failed" >&2; fi
    gaps "$first" "$f" >"$f.gaps"
    cat "$f.gaps" >>"$work/gaps-$t-$n"
}
# p50 / p99 / longest of a gaps file: "P50 P99 COUNT MAX". The longest tells a waiter that sat
# out its fallback timer (seconds) from a slow minute (tens of ms).
percentiles() {
    sort -n "$1" | awk '{ g[NR] = $1 } END { print g[int((NR - 1) * 0.50) + 1], g[int((NR - 1) * 0.99) + 1], NR, g[NR] }'
}
declare -A h10 h30 h100 per10 per30 per100 eper10 eper30 eper100 zper10 zper30 zper100 calls msgs
declare -A zmsgs p50 p99
# Rows: waiters rounds passes. The 30-waiter row runs once per waiter, like the 100-waiter one
# (the queue shrinks from 30 to none), in more passes, and takes the semaphore along.
for spec in "10 $rounds10 $hand_passes" "30 1 $passes30" "100 $rounds100 $hand_passes"; do
    read -r n r np <<<"$spec"
    row_tools=("${tools[@]}")
    [ "$n" = 30 ] && row_tools+=("${sems[@]}")
    say "handoff: $n waiters, $np passes of $r rounds"
    for t in "${row_tools[@]}"; do : >"$work/gaps-$t-$n"; calls[$t]=0; msgs[$t]=0; zmsgs[$t]=0; done
    for p in $(seq "$np"); do
        for t in "${row_tools[@]}"; do
            first=1
            case $t in *-sem) first=$slots ;; esac
            redis-cli -p "$rport" config resetstat >/dev/null
            $have_etcd && before=$(grpc_msgs)
            $have_zk && zbefore=$(zk_stat zk_packets_received)
            handoff_pass "$t" "$n" "$r" "$work/hand-$t-$n-$p" "hand$n-$p" "$first"
            calls[$t]=$((calls[$t] + $(client_calls)))
            $have_etcd && msgs[$t]=$((msgs[$t] + $(grpc_msgs) - before))
            $have_zk && zmsgs[$t]=$((zmsgs[$t] + $(zk_stat zk_packets_received) - zbefore - 1))
        done
    done
    for t in "${row_tools[@]}"; do
        read -r a b c d < <(percentiles "$work/gaps-$t-$n")
        p50[$t-$n]=$a p99[$t-$n]=$b
        stats=$(printf "%.2f / %.2f ms (n=%d, max %.0f)" "$a" "$b" "$c" "$d")
        first=1
        case $t in *-sem) first=$slots ;; esac
        per=- eper=- zper=-
        case $t in
        redlock-pg | pg-0.3.0) ;;
        redlock-zk)
            zper=$(awk -v c="${zmsgs[$t]}" -v n="$(((n * r + first) * np))" 'BEGIN {printf "%.1f", c / n}') ;;
        etcdctl | redlock-etcd | etcd-0.3.0)
            eper=$(awk -v c="${msgs[$t]}" -v n="$(((n * r + first) * np))" 'BEGIN {printf "%.1f", c / n}') ;;
        redlock* | baseline*)
            per=$(awk -v c="${calls[$t]}" -v n="$(((n * r + first) * np))" 'BEGIN {printf "%.1f", c / n}') ;;
        esac
        case $n in
        10) h10[$t]=$stats per10[$t]=$per eper10[$t]=$eper zper10[$t]=$zper ;;
        30) h30[$t]=$stats per30[$t]=$per eper30[$t]=$eper zper30[$t]=$zper ;;
        100) h100[$t]=$stats per100[$t]=$per eper100[$t]=$eper zper100[$t]=$zper ;;
        esac
    done
done

# --- requests per waiter per second while waiting ---------------------------------------------
# WAITERS wait while HOLDERS hold every slot (or the lock); their requests are counted over
# $idle seconds once every waiter blocks. The holders take a 300 s ttl so that no renewal of
# theirs falls in the window and only the waiters' requests are counted (each renewal would
# add 1 / (waiters x idle): 0.01 a holder here, three times that for a semaphore's three). A
# waiter's fallback timer is the same either way: its own min(ttl, 20 s), or the holder's lease
# left if shorter, which it is not here, nor with a default-ttl holder (20-30 s, renewed).
idle_cost() { # holders waiters wrapper-for-the-holders wrapper-for-the-waiters
    local h=$1 n=$2 holders=() others=() calls
    for _ in $(seq "$h"); do
        $3 sleep $((idle + 15)) &
        holders+=($!)
    done
    sleep 0.5
    for _ in $(seq "$n"); do
        $4 true &
        others+=($!)
    done
    until [ "$(redis-cli -p "$rport" info clients | awk -F: '/^blocked_clients/ {print $2+0}')" = "$n" ]; do
        sleep 0.1
    done
    redis-cli -p "$rport" config resetstat >/dev/null
    sleep "$idle"
    calls=$(client_calls)
    kill "${holders[@]}"
    wait "${holders[@]}" "${others[@]}" || true
    awk -v c="$calls" -v n="$n" -v s="$idle" 'BEGIN {printf "%.3f", c / n / s}'
}
say "wait cost"
waiters=10
declare -A cost semcost
cost[flock]="0 (kernel)"
cost[baseline]="-"
cost[old]="-"
cost[redlock]=$(idle_cost 1 "$waiters" "$redlock run --url $url --key idle --ttl 300s --" \
    "$redlock run --url $url --key idle --wait forever --")
say "wait cost, --limit $slots"
semcost[redlock]=$(idle_cost "$slots" "$waiters" \
    "$redlock run --url $url --key idlesem --limit $slots --ttl 300s --" \
    "$redlock run --url $url --key idlesem --limit $slots --wait forever --")

# The requests a server received over $idle seconds, per waiter, once every waiter is queued
# (`$3`, a test, says so) and a second more, counted by `$4` (which itself adds `$5` requests).
idle_cost() { # holder-wrapper waiter-wrapper queued-test counter counter's-own
    local holder others=() before after
    $1 sleep $((idle + 15)) >/dev/null &
    holder=$!
    sleep 1
    for _ in $(seq "$waiters"); do
        $2 true >/dev/null &
        others+=($!)
    done
    until $3; do sleep 0.1; done
    sleep 1
    before=$($4)
    sleep "$idle"
    after=$($4)
    kill "$holder"
    wait "$holder" "${others[@]}" || true
    awk -v c="$((after - before - $5))" -v n="$waiters" -v s="$idle" 'BEGIN {printf "%.3f", c / n / s}'
}

# On etcd, gRPC messages, once every waiter's key is under the queue's prefix. etcdctl's holder
# keeps its session's lease alive (60 s, every 20 s): its keep-alives are counted with the
# waiters'. redlock-etcd's holder takes a 300 s ttl, so that none of its renewals (every ttl/3)
# falls in the window; its waiters take the default ttl.
etcd_queued() { [ "$(etcd_count "$idle_prefix")" = $((waiters + 1)) ]; }
if $have_etcd; then
    say "wait cost, etcd"
    idle_prefix=idle/
    cost[etcdctl]="$(idle_cost "etcdctl --endpoints=$ep lock idle" \
        "etcdctl --endpoints=$ep lock idle" etcd_queued grpc_msgs 0) (gRPC messages, incl. holder)"
    idle_prefix="redlock:{idle}/q/"
    cost[redlock-etcd]="$(idle_cost "$redlock run --url $eurl --key idle --ttl 300s --" \
        "$redlock run --url $eurl --key idle --wait forever --" etcd_queued grpc_msgs 0) (gRPC messages)"
fi

# On ZooKeeper, packets, once every waiter's ephemeral entry is made (mntr's count of them; its
# own request is one packet). The holder takes a 40 s ttl, the longest session the server grants
# (tickTime x 20): it renews every ttl/3, so about two renewals of its fall in the window and are
# counted with the waiters' (2 / (waiters x idle), under 0.01); its waiters take the default ttl.
zk_queued() { [ "$(zk_stat zk_ephemerals_count)" -ge $((zk_base + waiters + 1)) ]; }
zk_packets() { zk_stat zk_packets_received; }
if $have_zk; then
    say "wait cost, ZooKeeper"
    zk_base=$(zk_stat zk_ephemerals_count)
    cost[redlock-zk]="$(idle_cost "$redlock run --url $zurl --key idle --ttl 40s --" \
        "$redlock run --url $zurl --key idle --wait forever --" zk_queued zk_packets 1) (packets, incl. holder)"
fi

# --- Redis's own time per run ----------------------------------------------------------------
# What a fleet costs a shared Redis: per run, the time Redis spent on the requests clients sent
# (a script's time includes the commands it runs) and how many commands the scripts ran, from
# INFO commandstats over $rt_runs runs one after another (nobody waits) and over $rt_runs runs
# shared among 10 waiters looping on one key (each command sleeps 10 ms, so they do wait).
# Pooled over $rt_passes passes that take turns between the builds.
redis_time() { # runs: "usec commands" per run since the last CONFIG RESETSTAT
    redis-cli -p "$rport" info commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$1" '
        /^cmdstat_(config\|resetstat|info):/ { next }
        /^cmdstat_(evalsha|eval|blpop|wait|config\|get|scan|select|role|hello|client\|setinfo):/ { us += $5; next }
        /^cmdstat_/ { inner += $3 }
        END { printf "%.1f %.1f\n", us / n, inner / n }'
}
redis_time_pass() { # tool lockname waiters: "usec commands" per run
    local w pids=()
    w=$(wrap "$1" "$2")
    redis-cli -p "$rport" config resetstat >/dev/null
    if [ "$3" = 0 ]; then
        for _ in $(seq "$rt_runs"); do $w true >/dev/null 2>&1; done
    else
        for _ in $(seq "$3"); do
            (for _ in $(seq $((rt_runs / $3))); do $w sleep 0.01 >/dev/null 2>&1; done) &
            pids+=($!)
        done
        wait "${pids[@]}"
    fi
    redis_time "$rt_runs"
}
say "redis time"
declare -A rtime
rt_tools=(redlock)
[ -n "$old" ] && rt_tools+=(old)
[ -n "${BENCH_BASELINE:-}" ] && rt_tools+=(baseline)
for t in "${rt_tools[@]}"; do
    $(wrap "$t" rt-warm) true >/dev/null 2>&1 # the script cache, once
    : >"$work/rt-$t-0"
    : >"$work/rt-$t-10"
done
for p in $(seq "$rt_passes"); do
    for n in 0 10; do
        for t in "${rt_tools[@]}"; do
            redis_time_pass "$t" "rt$n-$p" "$n" >>"$work/rt-$t-$n"
        done
    done
done
for t in "${rt_tools[@]}"; do
    read -r a c < <(awk '{ u += $1; c += $2 } END { printf "%.0f %.1f\n", u / NR, c / NR }' "$work/rt-$t-0")
    read -r b d < <(awk '{ u += $1; c += $2 } END { printf "%.0f %.1f\n", u / NR, c / NR }' "$work/rt-$t-10")
    rtime[$t]="$a / $b µs ($c / $d commands)"
done

# --- Redis time per plain run, by mode ---------------------------------------------------------
# What the lock step itself costs the shared Redis, feature by feature: a plain run (`true`,
# nobody waiting), acquire + release, for the bare lock and each redlock build plain, --fair,
# --limit 2 and --shared. Passes take turns between them; each cell is the median of the passes.
#
# Time: INFO commandstats deltas over $mode_runs runs, summed over the commands clients sent
# (a script's usec already holds the commands it ran, which are not added again), per run.
# Commands: the calls made inside scripts, per run. Which calls of a command came from a script
# is seen once per variant under MONITOR (a script's calls show there as `[0 lua]`), so the
# split holds for any protocol: scripts, functions, or commands pipelined beside them. MONITOR
# leaves out admin commands (CONFIG GET): those are the client's.
mon_runs=5
redis_commands() { # the `name calls usec` of every command since the last CONFIG RESETSTAT
    redis-cli -p "$rport" info commandstats | tr -d '\r' | awk -F'[:=,]' '
        /^cmdstat_/ { sub("^cmdstat_", "", $1); print $1, $3, $5 }' |
        grep -Ev '^(config\|resetstat|info|monitor|select|dbsize|flushdb) '
}
# MONITOR output as `name from-clients from-scripts`, a container command as NAME|SUB.
monitor_split() { # file
    awk '
        NR == 1 && $1 == "OK" { next }
        {
            src = $3; sub(/\]$/, "", src)
            name = tolower($4); gsub(/"/, "", name)
            if (name ~ /^(config|client|script|function|object|memory|xinfo|cluster|command|acl|latency|slowlog|pubsub)$/) {
                sub_ = tolower($5); gsub(/"/, "", sub_); name = name "|" sub_
            }
            if (src == "lua") inner[name]++; else outer[name]++
            seen[name] = 1
        }
        END { for (n in seen) print n, outer[n] + 0, inner[n] + 0 }' "$1"
}
# Runs `CMD...` under MONITOR; the split goes to $work/split-NAME.
calibrate() { # name cmd...
    local name=$1 m
    shift
    : >"$work/mon-$name"
    redis-cli -p "$rport" monitor >"$work/mon-$name" &
    m=$!
    until [ -s "$work/mon-$name" ]; do sleep 0.02; done
    "$@"
    sleep 0.2
    kill "$m"
    wait "$m" 2>/dev/null || true
    monitor_split "$work/mon-$name" >"$work/split-$name"
}
# `usec commands` per unit (runs, or lists) since the last CONFIG RESETSTAT, split as NAME was.
attributed() { # name units
    redis_commands | awk -v n="$2" -v file="$work/split-$1" '
        BEGIN { while ((getline l < file) > 0) { split(l, f, " "); o[f[1]] = f[2]; i[f[1]] = f[3] } }
        {
            frac = ($1 in o && o[$1] + i[$1] > 0) ? o[$1] / (o[$1] + i[$1]) : 1
            us += $3 * frac; inner += $2 * (1 - frac)
        }
        END { printf "%.1f %.1f\n", us / n, inner / n }'
}
# A variant: the bare lock, or BUILD[-MODE] with MODE fair, limit or shared.
mode_wrap() { # variant lockname
    local bin m
    case ${1%%-*} in
    bare) echo "$bare $url bare:{$2}"; return ;;
    redlock) bin=$redlock ;;
    old) bin=$old ;;
    baseline) bin=$BENCH_BASELINE ;;
    esac
    case $1 in
    *-fair) m=--fair ;;
    *-limit) m="--limit 2" ;;
    *-shared) m=--shared ;;
    *) m= ;;
    esac
    echo "$bin run --url $url --key $2 $m --"
}
runs_of() { # count wrapper...
    local n=$1
    shift
    for _ in $(seq "$n"); do "$@" true >/dev/null 2>&1; done
}
say "Redis time per mode"
mode_builds=(redlock)
[ -n "$old" ] && mode_builds+=(old)
[ -n "${BENCH_BASELINE:-}" ] && mode_builds+=(baseline)
variants=(bare)
for b in "${mode_builds[@]}"; do variants+=("$b" "$b-fair" "$b-limit" "$b-shared"); done
for v in "${variants[@]}"; do
    runs_of 1 $(mode_wrap "$v" "mode-$v") # the script cache, once (the wrapper is words)
    calibrate "$v" runs_of "$mon_runs" $(mode_wrap "$v" "mode-$v")
    : >"$work/mode-$v"
done
for p in $(seq "$mode_passes"); do
    for v in "${variants[@]}"; do
        redis-cli -p "$rport" config resetstat >/dev/null
        runs_of "$mode_runs" $(mode_wrap "$v" "mode-$v")
        attributed "$v" "$mode_runs" >>"$work/mode-$v"
    done
done
declare -A mode_us mode_cmds
for v in "${variants[@]}"; do
    mode_us[$v]=$(awk '{print $1}' "$work/mode-$v" | median_of)
    mode_cmds[$v]=$(awk '{print $2}' "$work/mode-$v" | median_of)
done
# What a plain run's scripts ran, command by command (from MONITOR), for the record.
for b in "${mode_builds[@]}"; do
    say "$b: commands in the scripts of a plain run: $(awk -v n="$mon_runs" '$3 > 0 {printf "%s %g, ", $1, $3 / n}' "$work/split-$b" | sed 's/, $//')"
done

# --- redlock list of 10,000 locks -----------------------------------------------------------------
# $list_locks copies (scripts/bench-locks.py: DUMP and RESTORE) of one lock that the build itself
# holds, in a database of its own; `list` is timed (wall, median of $lists) and its Redis time
# taken as above (the split seen under MONITOR on a list of 100 locks first).
say "list of $list_locks locks"
declare -A list_cost
db=1
for b in "${mode_builds[@]}"; do
    db=$((db + 1))
    case $b in redlock) bin=$redlock ;; old) bin=$old ;; baseline) bin=$BENCH_BASELINE ;; esac
    dburl=$url/$db
    rm -f "$work/tpl-$b.ready"
    $bin run --url "$dburl" --key tpl --ttl 600s -- sh -c "touch '$work/tpl-$b.ready'; exec sleep 600" &
    tpl=$!
    until [ -e "$work/tpl-$b.ready" ]; do sleep 0.02; done
    python3 scripts/bench-locks.py "$rport" "$db" redlock: tpl 100 >/dev/null
    calibrate "list-$b" "$bin" list --url "$dburl" >/dev/null
    python3 scripts/bench-locks.py "$rport" "$db" redlock: tpl "$list_locks" >/dev/null
    : >"$work/list-$b"
    for _ in $(seq "$lists"); do
        redis-cli -p "$rport" config resetstat >/dev/null
        t0=$(date +%s%N)
        "$bin" list --url "$dburl" >"$work/list-out-$b"
        t1=$(date +%s%N)
        read -r us _ < <(attributed "list-$b" 1)
        echo "$(((t1 - t0) / 1000)) $us" >>"$work/list-$b"
    done
    shown=$(grep -c . "$work/list-out-$b")
    kill "$tpl"
    wait "$tpl" || true
    redis-cli -p "$rport" -n "$db" flushdb >/dev/null
    list_cost[$b]=$(awk '{print $1}' "$work/list-$b" | median_of | awk -v r="$(awk '{print $2}' "$work/list-$b" | median_of)" -v n="$shown" \
        '{printf "%.2f s wall, %.2f s Redis (%d listed)", $1 / 1e6, r / 1e6, n}')
done

# --- PostgreSQL's own time per run -----------------------------------------------------------
# What a fleet costs a shared PostgreSQL: per plain run (`true`, nobody waiting), the execution
# time of every statement redlock sent (pg_stat_statements), over $rt_runs runs.
if $have_pg; then
    say "PostgreSQL time"
    $redlock run --url "$purl" --key pgt -- true # the functions' plans, once
    pg "SELECT pg_stat_statements_reset()" >/dev/null
    for _ in $(seq "$rt_runs"); do $redlock run --url "$purl" --key pgt -- true; done
    pg_time=$(pg "SELECT round((sum(total_exec_time) * 1000 / $rt_runs)::numeric), round(sum(calls)::numeric / $rt_runs, 1) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'" |
        awk -F'|' '{printf "%s µs (%s statements)", $1, $2}')
fi

# --- peak RSS while holding -------------------------------------------------------------------
say "peak RSS"
declare -A rss rss_kb per eper
for t in "${over_tools[@]}"; do
    [ "$t" = psql ] || [ "$t" = psql-2w ] && continue
    w=$(wrap "$t" rss)
    [ "$t" = redlock ] && w="$redlock run --url $url --key rss --ttl 1s --"
    [ "$t" = old ] && w="$old run --url $url --key rss --ttl 1s --"
    [ "$t" = baseline ] && w="$BENCH_BASELINE run --url $url --key rss --ttl 1s --"
    [ "$t" = redlock-etcd ] && w="$redlock run --url $eurl --key rss --ttl 1s --"
    [ "$t" = redlock-pg ] && w="$redlock run --url $purl --key rss --ttl 1s --"
    [ "$t" = pg-0.3.0 ] && w="$pgold run --url $purl_old --key rss --ttl 1s --"
    [ "$t" = etcd-0.3.0 ] && w="$pgold run --url $eurl --key rss-0.3.0 --ttl 1s --"
    # ZooKeeper's shortest session is 4 s: held 3 s, two renewals (every ttl/3) as with 1 s.
    hold=1.2
    [ "$t" = redlock-zk ] && w="$redlock run --url $zurl --key rss --ttl 4s --" hold=3
    kb=$($w sh -c "sleep $hold; awk '/^VmHWM/ {print \$2}' /proc/\$PPID/status")
    rss_kb[$t]=$kb
    rss[$t]=$(awk -v k="$kb" 'BEGIN {printf "%.1f MiB", k / 1024}')
done

# --- table -------------------------------------------------------------------------------------
# Ratios to flock's (overhead, hand-over) and to the bare lock's (Redis time), as cells.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
declare -A over_x hand_x50 hand_x99 mode_cell mode_cmd_cell
for t in "${over_tools[@]}"; do
    over_x[$t]="$(ratio "${overhead[$t]% ms}" "${overhead[flock]% ms}")x"
done
for t in "${tools[@]}"; do
    hand_x50[$t]="$(ratio "${p50[$t-10]}" "${p50[flock-10]}") / $(ratio "${p50[$t-30]}" "${p50[flock-30]}") / $(ratio "${p50[$t-100]}" "${p50[flock-100]}")"
    hand_x99[$t]="$(ratio "${p99[$t-10]}" "${p99[flock-10]}") / $(ratio "${p99[$t-30]}" "${p99[flock-30]}") / $(ratio "${p99[$t-100]}" "${p99[flock-100]}")"
done
for v in "${variants[@]}"; do
    mode_cell[$v]=$(printf '%.0f µs (%sx)' "${mode_us[$v]}" "$(ratio "${mode_us[$v]}" "${mode_us[bare]}")")
    mode_cmd_cell[$v]=$(printf '%g' "${mode_cmds[$v]}")
done
for b in "${mode_builds[@]}"; do
    mode_cmd_cell[$b]="${mode_cmds[$b]} / ${mode_cmds[$b-fair]} / ${mode_cmds[$b-limit]} / ${mode_cmds[$b-shared]}"
done

echo
echo "| | $(printf '%s | ' "${columns[@]}")"
echo "|---|$(printf -- '---|%.0s' "${columns[@]}")"
row() { # title assoc-name [suffix: the entries come from TOOL-SUFFIX]
    local -n m=$2
    printf '| %s |' "$1"
    for t in "${columns[@]}"; do printf ' %s |' "${m[$t${3:-}]:--}"; done
    echo
}
for t in "${tools[@]}"; do per[$t]="${per10[$t]} / ${per30[$t]} / ${per100[$t]}"; done
for t in "${sems[@]}"; do per[$t]=${per30[$t]}; done
for t in "${tools[@]}"; do eper[$t]="${eper10[$t]} / ${eper30[$t]} / ${eper100[$t]}"; done
declare -A zper
for t in "${tools[@]}"; do zper[$t]="${zper10[$t]} / ${zper30[$t]} / ${zper100[$t]}"; done
row "overhead (median, minus bare \`true\`)" overhead
row "overhead ÷ flock's" over_x
row "handoff p50 / p99, 10 waiters" h10
row "handoff p50 / p99, 30 waiters" h30
row "handoff of a freed slot p50 / p99, \`--limit $slots\`, 30 waiters" h30 -sem
row "handoff p50 / p99, 100 waiters" h100
row "handoff p50 ÷ flock's, 10 / 30 / 100 waiters" hand_x50
row "handoff p99 ÷ flock's, 10 / 30 / 100 waiters" hand_x99
row "Redis requests per run, 10 / 30 / 100 waiters" per
row "Redis requests per run, \`--limit $slots\`, 30 waiters" per -sem
$have_etcd && row "etcd gRPC messages received per run, 10 / 30 / 100 waiters" eper
$have_zk && row "ZooKeeper packets received per run, 10 / 30 / 100 waiters" zper
row "Redis time per run, alone / 10 waiters (commands the scripts ran)" rtime
$have_pg && rtime[redlock-pg]=$pg_time && row "server time per plain run (Redis: alone above; PostgreSQL: pg_stat_statements)" rtime
row "requests per waiter per second while waiting" cost
row "requests per waiter per second while waiting, \`--limit $slots\` (all slots held)" semcost
row "Redis time of a plain run, acquire + release (x the bare lock's)" mode_cell
row "the same, \`--fair\`" mode_cell -fair
row "the same, \`--limit 2\`" mode_cell -limit
row "the same, \`--shared\`" mode_cell -shared
row "commands the scripts ran in a plain run (plain / \`--fair\` / \`--limit 2\` / \`--shared\`)" mode_cmd_cell
row "\`list\` of $list_locks held locks" list_cost
row "peak RSS while holding" rss
echo
# The semaphore against the plain lock and flock's (exclusive) lock, 30 waiters, same passes.
for t in "${sems[@]}"; do
    plain=${t%-sem}
    echo "$plain \`--limit $slots\` hand-over, 30 waiters: $(ratio "${p50[$t-30]}" "${p50[$plain-30]}") / $(ratio "${p99[$t-30]}" "${p99[$plain-30]}") x the plain lock's p50 / p99, $(ratio "${p50[$t-30]}" "${p50[flock-30]}") / $(ratio "${p99[$t-30]}" "${p99[flock-30]}") x flock's"
done
# (The last $(...) decides the assignment's status under set -e: it must not fail without ZooKeeper.)
machine="$(awk -v b="$base" 'BEGIN {printf "%.2f ms", b * 1000}') median; $(nproc) cores; $(redis-server --version | awk '{sub("v=", "", $3); print "Redis " $3}')$($have_etcd && echo ", etcd $(etcd --version | awk 'NR==1 {print $3}')")$($have_pg && echo ", PostgreSQL $(pg "SHOW server_version")")$($have_zk && echo ", ZooKeeper $(zk_4lw "$zport" srvr | sed -n 's/^Zookeeper version: \([^-,]*\).*/\1/p'), $(java -version 2>&1 | awk 'NR==1 {gsub("\"", ""); print $1, $3}')" || true)"
echo "bare \`true\`: $machine"
echo "Redis time per mode: median of $mode_passes passes of $mode_runs runs each$([ -n "$old" ] && echo "; \`old\`: the round's start ($(basename "$(dirname "$(dirname "$(dirname "$(dirname "$old")")")")")), built as it ships")"

# --- budgets -------------------------------------------------------------------------------------
# What this release is held to, from the numbers above (unrounded): "ratio (budget, met/NOT met)".
# The overhead's samples of TOOL, and its hand-over gaps with N waiters, as no_worse takes them.
over_of() { seq -f "$work/times-$1.%g" -s, "$passes"; }
hand_of() { seq -f "$work/hand-$1-$2-%g.gaps" -s, "$hand_passes"; }
budget() { # ratio-numerator denominator limit limit-as-shown
    awk -v a="$1" -v b="$2" -v m="$3" -v shown="$4" \
        'BEGIN {r = a / b; printf "%.2f (budget ≤ %s, %s)", r, shown, (r <= m ? "met" : "NOT met")}'
}
# "No worse than": the ratio of NEW's samples to OLD's (medians; of overheads over BASE, bare
# `true`'s times, when given) with its 95 % bootstrap interval (scripts/bench-compare.py). Met
# unless the whole interval lies above 1.00: a slowdown this run tells from its noise.
# Each column is a comma-separated list of one file per pass.
# compare sets r, lo and hi (the caller's locals): the ratio and its interval's ends.
compare() { read -r r lo hi < <(python3 scripts/bench-compare.py "$@"); }
no_worse() { # new-samples old-samples [base-samples]
    local r lo hi
    compare "$@"
    awk -v r="$r" -v lo="$lo" -v hi="$hi" 'BEGIN {
        printf "%.2f, 95%% interval %.2f-%.2f (budget: no worse, %s)", r, lo, hi,
            (lo <= 1 ? "met" : "NOT met: slower beyond the noise") }'
}
# The ratio of NEW's samples to OLD's, as no_worse has it, with no judgement: for reference.
interval() { # new-samples old-samples [base-samples]
    local r lo hi
    compare "$@"
    awk -v r="$r" -v lo="$lo" -v hi="$hi" 'BEGIN { printf "%.2f, 95%% interval %.2f-%.2f", r, lo, hi }'
}
echo
echo "Budgets, Redis:"
echo "- Redis time of a plain run ÷ the bare lock's: $(budget "${mode_us[redlock]}" "${mode_us[bare]}" 3.5 3.5)"
for n in 10 30 100; do
    echo "- hand-over p50 ÷ flock's, $n waiters: $(budget "${p50[redlock-$n]}" "${p50[flock-$n]}" 2 2)"
done
# flock + 2 ms, as "redlock's overhead minus 2 ms, over flock's" against 1.
echo "- overhead ÷ (flock's + 2 ms): $(budget "${over_raw[redlock]}" "$(awk -v f="${over_raw[flock]}" 'BEGIN {print f + 2}')" 1 1) ($(awk -v r="${over_raw[redlock]}" -v f="${over_raw[flock]}" 'BEGIN {printf "%.2f ms against %.2f + 2 ms", r, f}'))"
echo "- peak RSS ÷ 6 MiB: $(budget "${rss_kb[redlock]}" 6144 1 1) (${rss[redlock]})"
if [ -n "${BENCH_BASELINE:-}" ]; then
    echo "- for reference, no budget: Redis time of a plain run ÷ the baseline's, the same passes: $(ratio "${mode_us[redlock]}" "${mode_us[baseline]}")"
    echo "- overhead ÷ the baseline's (BENCH_BASELINE): $(no_worse "$(over_of redlock)" "$(over_of baseline)" "$(over_of true)")"
    for n in 10 100; do
        echo "- hand-over p50 ÷ the baseline's, $n waiters: $(no_worse "$(hand_of redlock "$n")" "$(hand_of baseline "$n")")"
    done
fi
if [ -n "$old" ]; then
    echo "- overhead ÷ the old build's: $(no_worse "$(over_of redlock)" "$(over_of old)" "$(over_of true)")"
else
    echo "- overhead ÷ the old build's: not measured (no old column)"
fi
if $have_etcd; then
    echo "Budgets, etcd (redlock-etcd against etcdctl lock, the same etcd):"
    echo "- overhead ÷ etcdctl lock's: $(budget "${over_raw[redlock-etcd]}" "${over_raw[etcdctl]}" 0.4 0.4)"
    for n in 10 100; do
        echo "- hand-over p50 ÷ etcdctl lock's, $n waiters: $(budget "${p50[redlock-etcd-$n]}" "${p50[etcdctl-$n]}" 1.5 1.5)"
    done
    echo "- peak RSS ÷ 8 MiB: $(budget "${rss_kb[redlock-etcd]}" 8192 1 1) (${rss[redlock-etcd]})"
    if [ -n "$pgold" ]; then
        echo "- overhead ÷ 0.3.0's on the same etcd: $(no_worse "$(over_of redlock-etcd)" "$(over_of etcd-0.3.0)" "$(over_of true)")"
        for n in 10 100; do
            echo "- hand-over p50 ÷ 0.3.0's, $n waiters: $(no_worse "$(hand_of redlock-etcd "$n")" "$(hand_of etcd-0.3.0 "$n")")"
        done
    fi
fi
if $have_zk; then
    echo "Budgets, ZooKeeper (redlock-zk against redlock-etcd, the same run):"
    if $have_etcd; then
        echo "- overhead ÷ redlock-etcd's: $(budget "${over_raw[redlock-zk]}" "${over_raw[redlock-etcd]}" 1 1.0)"
        echo "- for reference, no budget: the same from every run's time, as \"no worse\" lines judge: $(interval "$(over_of redlock-zk)" "$(over_of redlock-etcd)" "$(over_of true)")"
        for n in 10 100; do
            echo "- hand-over p50 ÷ redlock-etcd's, $n waiters: $(budget "${p50[redlock-zk-$n]}" "${p50[redlock-etcd-$n]}" 1.5 1.5)"
        done
    else
        echo "- overhead and hand-over p50 ÷ redlock-etcd's: not measured (no etcd)"
    fi
    echo "- peak RSS ÷ 8 MiB: $(budget "${rss_kb[redlock-zk]}" 8192 1 1) (${rss[redlock-zk]})"
fi

if $have_pg; then
    echo "Budgets, PostgreSQL (redlock-pg against psql-2w, and against 0.3.0 on the same server, the same passes):"
    echo "- overhead ÷ one psql session's two durable one-row writes (psql-2w; a run's take and release are two): $(budget "${over_raw[redlock-pg]}" "${over_raw[psql-2w]}" 1.5 1.5)"
    echo "- for reference, no budget: overhead ÷ one \`psql -c 'SELECT 1'\`'s: $(ratio "${over_raw[redlock-pg]}" "${over_raw[psql]}")"
    if [ -n "$pgold" ]; then
        echo "- overhead ÷ 0.3.0's on the same server: $(no_worse "$(over_of redlock-pg)" "$(over_of pg-0.3.0)" "$(over_of true)")"
    fi
    for n in 10 100; do
        if [ -n "$pgold" ]; then
            echo "- hand-over p50 ÷ 0.3.0's, $n waiters: $(no_worse "$(hand_of redlock-pg "$n")" "$(hand_of pg-0.3.0 "$n")")"
        else
            echo "- hand-over p50 ÷ 0.3.0's, $n waiters: not measured (BENCH_PG_REF=0)"
        fi
        echo "- for reference, no budget: hand-over p50 ÷ redlock's on Redis, $n waiters: $(ratio "${p50[redlock-pg-$n]}" "${p50[redlock-$n]}")"
    done
    echo "- peak RSS ÷ 8 MiB: $(budget "${rss_kb[redlock-pg]}" 8192 1 1) (${rss[redlock-pg]})"
    echo "- PostgreSQL time per plain run: $pg_time; Redis's for redlock: ${mode_us[redlock]} µs"
fi

# --- chart -------------------------------------------------------------------------------------
# The numbers above, as computed (p50, p99 unrounded), as `tool metric waiters value` lines, then drawn.
chart=${BENCH_CHART:-docs/img/bench.svg}
mkdir -p "$(dirname "$chart")"
{
    echo "# $(date -u +%F), scripts/bench.sh$($quick && echo " --quick"): $((runs / passes)) runs x $passes passes per overhead, hand-over gaps of $hand_passes passes (10, 100 waiters) and $passes30 (30 waiters)"
    echo "# bare true $machine; $(uname -m)"
    for t in "${over_tools[@]}"; do
        printf '%s\toverhead\t-\t%s\n' "$t" "${overhead[$t]% ms}"
        [ "$t" = bare ] || [ "$t" = psql ] || [ "$t" = psql-2w ] && continue # no --wait: no hand-over
        for n in 10 30 100; do
            printf '%s\tp50\t%s\t%s\n%s\tp99\t%s\t%s\n' "$t" "$n" "${p50[$t-$n]}" "$t" "$n" "${p99[$t-$n]}"
        done
    done
} >"${chart%.svg}.tsv"
python3 scripts/bench-chart.py "${chart%.svg}.tsv" >"$chart"
say "chart: $chart (numbers: ${chart%.svg}.tsv)"
