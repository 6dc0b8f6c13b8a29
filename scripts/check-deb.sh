#!/usr/bin/env bash
# Build the .deb with cargo-deb, install it with dpkg -i, check that redlock, its man page and its
# completions are where they belong and match the committed files, then remove it again.
#
# Part of scripts/test.sh (so CI runs it). It installs for real, so it runs dpkg as root (through
# sudo when not root), refuses to touch a redlock package that was installed by someone else, and
# takes a lock file so that two checks on one machine take turns.
#
# By default it packages the debug build that the test run needs anyway: a few seconds, where a
# release build (LTO, one codegen unit) adds about 100 s on two cores. (cargo-deb warns that dev
# profiles are not for releases, and --quiet hides that: this is a check, not a release.)
# REDLOCK_DEB_PROFILE=release checks the package as released.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

cargo_deb_version=3.8.0
profile=${REDLOCK_DEB_PROFILE:-dev}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)

if ! command -v cargo-deb >/dev/null 2>&1; then
  echo "check-deb: installing cargo-deb $cargo_deb_version (about 2 minutes, once per machine)" >&2
  cargo install cargo-deb --locked --version "$cargo_deb_version" --quiet
fi

out=$(mktemp -d)
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
installed=no
cleanup() {
  if [ "$installed" = yes ]; then
    "${sudo[@]}" dpkg -r redlock >/dev/null || echo "check-deb: could not remove the test install (dpkg -r redlock)" >&2
  fi
  rm -rf "$out"
}
trap cleanup EXIT

echo "check-deb: building the .deb ($profile profile)" >&2
if [ "$profile" = release ]; then
  # As released: static (scripts/release-env.sh).
  . scripts/release-env.sh
  release_cargo deb --locked --quiet --profile release --output "$out/redlock.deb" >/dev/null
else
  cargo deb --locked --quiet --fast --profile "$profile" --output "$out/redlock.deb" >/dev/null
fi
deb=$out/redlock.deb

fail() {
  echo "check-deb: $*" >&2
  exit 1
}

# Files the package must install, and the committed file each must equal.
declare -A want=(
  [/usr/share/man/man1/redlock.1.gz]=man/redlock.1
  [/usr/share/bash-completion/completions/redlock]=completions/redlock.bash
  [/usr/share/zsh/vendor-completions/_redlock]=completions/_redlock
  [/usr/share/fish/vendor_completions.d/redlock.fish]=completions/redlock.fish
  [/usr/share/doc/redlock/README.md]=README.md
  [/usr/share/doc/redlock/CHANGELOG.md]=CHANGELOG.md
)
# The guide beside the README, every page and the pictures.
for page in docs/*.md docs/img/bench.svg docs/img/timeline.svg; do
  want[/usr/share/doc/redlock/$page]=$page
done

exec 9>"${TMPDIR:-/tmp}/redlock-check-deb.lock"
flock -w 300 9 || fail "another check-deb has held the lock for 5 minutes"

if dpkg-query -W -f='${Status}' redlock 2>/dev/null | grep -q 'install ok installed'; then
  fail "a redlock package is already installed here; this check installs and removes its own build, so remove that one first (dpkg -r redlock)"
fi

"${sudo[@]}" dpkg -i "$deb" >/dev/null
installed=yes

listed=$(dpkg -L redlock)
for path in /usr/bin/redlock "${!want[@]}"; do
  grep -qx "$path" <<<"$listed" || fail "the package does not list $path"
  [ -f "$path" ] || fail "$path is missing after dpkg -i"
done
for path in "${!want[@]}"; do
  if [[ $path == *.gz ]]; then
    zcat "$path" | cmp -s - "${want[$path]}" || fail "$path differs from ${want[$path]}"
  else
    cmp -s "$path" "${want[$path]}" || fail "$path differs from ${want[$path]}"
  fi
done

[ -x /usr/bin/redlock ] || fail "/usr/bin/redlock is not executable"
[ "$(/usr/bin/redlock --version)" = "redlock $version" ] || fail "redlock --version says '$(/usr/bin/redlock --version)', want 'redlock $version'"
[ "$(command -v redlock)" = /usr/bin/redlock ] || fail "redlock on PATH is $(command -v redlock), not /usr/bin/redlock"
page=$(man -w redlock) || fail "man -w redlock finds no page"
[ "$page" = /usr/share/man/man1/redlock.1.gz ] || fail "man -w redlock finds $page"
bash --norc --noprofile -c 'source /usr/share/bash-completion/completions/redlock && complete -p redlock' >/dev/null ||
  fail "the installed bash completion does not register for redlock"

"${sudo[@]}" dpkg -r redlock >/dev/null
installed=no
for path in /usr/bin/redlock "${!want[@]}"; do
  [ ! -e "$path" ] || fail "$path is still there after dpkg -r"
done

size=$(stat -c %s "$deb")
echo "check-deb: ok: dpkg -i put redlock, its man page, bash/zsh/fish completions and the docs in place; dpkg -r removed them (.deb $size bytes, $((SECONDS - start)) s)" >&2
