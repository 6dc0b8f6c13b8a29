#!/usr/bin/env bash
# Install the Debian packages the demo and tests use (redis-server, redis-cli, tmux, openssl,
# groff, man, fish) when missing, and protoc, which every build of redlock runs (the etcd
# client's gRPC code is generated at build time). Sourced by demo.sh, test.sh and bench.sh; uses
# apt-get as root, or sudo.
# Arguments name tools; TOOL:PACKAGE when the Debian package has another name (groff:groff-base).
need_packages() {
  local missing=()
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
  command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
  for spec in "$@"; do
    command -v "${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "installing ${missing[*]} with apt-get" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}
