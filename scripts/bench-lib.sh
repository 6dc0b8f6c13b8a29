# Sourced by the benchmark scripts: a scratch directory ($work) and the servers started in it
# ($pids), both gone when the script exits; free_port; start_on_free_port.
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

# A server on a random port, started again on another one if the port turns out to be taken
# (free_port cannot see a port held by an outgoing connection). Sets $port and $spid, and adds
# the server to $pids.
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
            if ${check//PORT/$port} >/dev/null 2>&1; then
                pids+=("$spid")
                return 0
            fi
            kill -0 "$spid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
    done
    echo "bench: cannot start $1" >&2
    exit 1
}
