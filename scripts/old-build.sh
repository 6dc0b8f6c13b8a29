#!/usr/bin/env bash
# Build redlock as it was at the start of this round (the "old build" that a rolling upgrade
# runs beside the new one) and print the path of its binary. The source is taken from git
# (git archive of the commit) into target/old-build/COMMIT/src and built there, debug profile,
# with its own CARGO_TARGET_DIR beside it: a second call finds the binary and prints its path
# at once. scripts/test.sh runs it before the tests and hands
# the path to tests/integration/upgrade.rs as REDLOCK_OLD_BIN; the test runs it itself when the
# variable is unset. scripts/bench.sh uses it for its old-build column.
#
# Usage: scripts/old-build.sh [--release] [COMMIT]   (default: the start of the round;
# REDLOCK_OLD_COMMIT too). --release builds it as it ships instead (scripts/release-env.sh:
# release profile, static on glibc), as the benchmark compares it: a few minutes, once.
# Progress and cargo's output go to stderr; stdout is the path and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

release=false
if [ "${1:-}" = --release ]; then
    release=true
    shift
fi

# d5021e9: "A new watchdog gets its orders before redlock says it started one", 0.2.0 as it
# shipped, the start of this round (backends, etcd).
commit=${1:-${REDLOCK_OLD_COMMIT:-d5021e918c9e6b17c2540a96b9253af473897d74}}

if ! full=$(git rev-parse --verify --quiet "$commit^{commit}"); then
    if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
        echo "old-build: commit $commit is not in this shallow clone; the rolling-upgrade test" \
            "builds it from git: fetch the history (git fetch --unshallow) or set" \
            "REDLOCK_OLD_BIN to a redlock built from it" >&2
    else
        echo "old-build: commit $commit is not in this repository (git fetch it, or set" \
            "REDLOCK_OLD_BIN to a redlock built from it)" >&2
    fi
    exit 1
fi
short=${full:0:9}
root=$PWD/target/old-build/$short
if $release; then
    . scripts/release-env.sh
    bin=$root/$release_dir/redlock
    built=$root/built-release
else
    bin=$root/target/debug/redlock
    built=$root/built
fi
mkdir -p "$root"

# One build at a time (a test process and the benchmark, say); the second waits, then finds it.
exec 9>"$root/.lock"
flock 9

# The source, once: extracted beside its final name and renamed, so that a build interrupted
# half-way through the extraction never leaves a partial tree that looks complete.
if [ ! -e "$root/src/Cargo.toml" ]; then
    echo "old-build: extracting $short" >&2
    rm -rf "$root/src.partial"
    mkdir "$root/src.partial"
    git archive "$full" | tar -x -C "$root/src.partial"
    rm -rf "$root/src"
    mv "$root/src.partial" "$root/src"
fi

# Built once: the tree above is never rewritten, so a binary that a finished build left (the
# stamp is written after it) is current, and cargo is not even asked; asking would wait for
# cargo's package-cache lock whenever another cargo on the machine holds it. Under nice: the
# machines this runs on are shared.
if [ ! -e "$built" ] || [ ! -x "$bin" ]; then
    if $release; then
        echo "old-build: building $short (release, as it ships, once)" >&2
        # $release_dir is target/TRIPLE/release: under $root, with this CARGO_TARGET_DIR.
        (
            renice -n 10 "$BASHPID" >/dev/null
            export CARGO_TARGET_DIR=$root/target
            release_cargo build --release --locked --quiet \
                --manifest-path "$root/src/Cargo.toml" --bin redlock >&2
        )
    else
        echo "old-build: building $short (debug, once)" >&2
        CARGO_TARGET_DIR=$root/target nice -n 10 cargo build --locked --quiet \
            --manifest-path "$root/src/Cargo.toml" --bin redlock >&2
    fi
    echo "$full" >"$built"
fi
echo "$bin"
