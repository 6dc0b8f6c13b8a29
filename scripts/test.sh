#!/usr/bin/env bash
# The whole check, as CI runs it: formatting, lints, the Debian package (built, installed, checked,
# removed: scripts/check-deb.sh), then unit and integration tests against real redis-server
# processes the tests start themselves. The tests run last so that their summary closes the log.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/need.sh
need_packages tmux openssl groff:groff-base man:man-db fish
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
bash scripts/check-deb.sh
cargo test --locked
