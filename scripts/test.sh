#!/usr/bin/env bash
# The whole check, as CI runs it: formatting, lints, unit and integration tests against real
# redis-server processes the tests start themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/need.sh
need_packages tmux openssl groff:groff-base
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked
