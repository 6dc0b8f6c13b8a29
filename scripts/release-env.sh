# Sourced by the scripts that build redlock as it ships (the benchmark, the packages, the release
# archive, the Dockerfile). Sets $triple, the host's target, and $release_dir, where
#     release_cargo build --release
# puts the binaries. release_cargo runs cargo for $triple; on glibc it also links statically.
# A static redlock starts about 0.35 ms sooner on every run (no dynamic loader, no libc.so or
# libgcc_s.so to map and relocate: 3.07-3.22 ms against 3.43-3.47 ms for `redlock run -- true`
# here, before the other start-up trims) and needs no particular glibc on the host. Its
# getaddrinfo uses the sources static glibc has built in, /etc/hosts and DNS.
#
# The flag travels in CARGO_TARGET_<TRIPLE>_RUSTFLAGS, for that one cargo command, with an
# explicit --target: that keeps it away from the proc-macros cargo builds for the host, which
# cannot be static, and from any later plain `cargo build`.
triple=$(rustc -vV | sed -n 's/^host: //p')
release_dir=target/$triple/release

release_cargo() { # cargo SUBCOMMAND [ARGS...], for $triple, static on glibc
  case $triple in
  *-linux-gnu*)
    env "CARGO_TARGET_$(echo "$triple" | tr 'a-z.-' 'A-Z__')_RUSTFLAGS=-C target-feature=+crt-static" \
      cargo "$@" --target "$triple"
    ;;
  *) cargo "$@" --target "$triple" ;;
  esac
}
