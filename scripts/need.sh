#!/usr/bin/env bash
# Install the Debian packages the demo and tests use (redis-server, redis-cli, tmux, openssl,
# groff, man, fish) when missing, and protoc, which every build of redlock runs (the etcd
# client's gRPC code is generated at build time). Sourced by demo.sh, test.sh and bench.sh; uses
# apt-get as root, or sudo.
# Arguments name tools; TOOL:PACKAGE when the Debian package has another name (groff:groff-base).
# A TOOL that starts with / is a file the package installs, not a command: it must exist
# (/usr/share/java/zookeeper.jar:libzookeeper-java).
need_packages() {
  local missing=()
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
  command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
  local spec tool
  for spec in "$@"; do
    tool=${spec%%:*}
    if [[ $tool == /* ]]; then
      [ -e "$tool" ] || missing+=("${spec#*:}")
    else
      command -v "$tool" >/dev/null 2>&1 || missing+=("${spec#*:}")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "installing ${missing[*]} with apt-get" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}
