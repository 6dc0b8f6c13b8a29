# Sourced by the scripts that build redlock as it ships (the benchmark, the packages, the release
# archive). Sets $triple, the host's target, and $release_dir, where
#     cargo build --release --target "$triple"
# puts the binaries; on glibc it also makes that build static. A static redlock starts about
# 0.4 ms sooner on every run (no dynamic loader, no libc.so or libgcc_s.so to map and relocate:
# 2.9 -> 2.5 ms for `redlock run -- true` here) and needs no particular glibc on the host.
# Its getaddrinfo uses the sources static glibc has built in, /etc/hosts and DNS.
#
# The flags travel in CARGO_TARGET_<TRIPLE>_RUSTFLAGS with an explicit --target, which keeps them
# away from the proc-macros cargo builds for the host (those cannot be static).
triple=$(rustc -vV | sed -n 's/^host: //p')
case $triple in
*-linux-gnu*)
  export "CARGO_TARGET_$(echo "$triple" | tr 'a-z.-' 'A-Z__')_RUSTFLAGS=-C target-feature=+crt-static"
  ;;
esac
release_dir=target/$triple/release
