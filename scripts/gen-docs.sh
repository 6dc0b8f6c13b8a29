#!/usr/bin/env bash
# Regenerate the committed shell completions (completions/) and man page (man/redlock.1) from the
# clap definitions, and the picture of a run's timeline (docs/img/timeline.svg) from the run's
# defaults and timing. Run after changing src/cli/ or src/lease/timing.rs; the unit test
# cli::docs::tests::committed_files_match and the docs test the_timeline_picture_is_drawn_from_the_defaults
# fail until you do.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --locked --example gen-docs
cargo run --quiet --locked --example timeline-numbers | python3 scripts/timeline.py >docs/img/timeline.svg
