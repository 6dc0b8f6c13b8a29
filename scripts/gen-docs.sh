#!/usr/bin/env bash
# Regenerate the committed shell completions (completions/) and man page (man/redlock.1) from the
# clap definitions. Run after changing src/cli/; the unit test cli::docs::tests::committed_files_match
# fails until you do.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --locked --example gen-docs
