#!/usr/bin/env bash
# Release archives in dist/:
#   redlock-VERSION-TARGET.tar.gz   the release binary (static on glibc, see scripts/release-env.sh), man page, completions, README and docs/ (and LICENSE*)
#   redlock-VERSION.tar.gz          the source at HEAD (git archive), what the Homebrew formula builds
#   *.sha256                        one `sha256sum` line per archive
#   redlock.rb                      packaging/homebrew/redlock.rb with version, url and sha256 filled in
# The archives are reproducible: sorted names, owner 0, mtimes and gzip headers from the commit time.
# REDLOCK_RELEASE_URL is where the source archive will be published (the formula's url is
# $REDLOCK_RELEASE_URL/redlock-VERSION.tar.gz). The worktree must be clean: the archives are HEAD.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
. scripts/release-env.sh
target=$triple
release_url=${REDLOCK_RELEASE_URL:-https://example.com/redlock/releases}
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "release-archive: commit or stash your changes first; the archives are built from HEAD" >&2
  exit 1
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

release_cargo build --release --locked
docs_stale=0
bash scripts/gen-docs.sh >/dev/null
git diff --quiet -- man completions || docs_stale=1
if [ "$docs_stale" -eq 1 ]; then
  git checkout -- man completions
  echo "release-archive: man/ or completions/ were out of date with the CLI; run scripts/gen-docs.sh and commit" >&2
  exit 1
fi

mkdir -p dist
name=redlock-$version-$target
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/man" "$stage/$name/completions" "$stage/$name/docs/img"
install -m 755 "$release_dir/redlock" "$stage/$name/redlock"
install -m 644 man/redlock.1 "$stage/$name/man/"
install -m 644 completions/* "$stage/$name/completions/"
install -m 644 README.md CHANGELOG.md "$stage/$name/"
install -m 644 docs/*.md "$stage/$name/docs/"
install -m 644 docs/img/bench.svg docs/img/timeline.svg "$stage/$name/docs/img/"
for license in LICENSE*; do
  [ -e "$license" ] && install -m 644 "$license" "$stage/$name/"
done

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$stage" -cf - "$name" | gzip -9n >"dist/$name.tar.gz"
git archive --format=tar --prefix="redlock-$version/" HEAD | gzip -9n >"dist/redlock-$version.tar.gz"

(cd dist && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256" &&
  sha256sum "redlock-$version.tar.gz" >"redlock-$version.tar.gz.sha256")
source_sha=$(cut -d' ' -f1 "dist/redlock-$version.tar.gz.sha256")
sed -e "s|^  url \".*\"|  url \"$release_url/redlock-$version.tar.gz\"|" \
  -e "s|^  sha256 \".*\"|  sha256 \"$source_sha\"|" \
  packaging/homebrew/redlock.rb >dist/redlock.rb

echo "release-archive: wrote" >&2
(cd dist && ls -l "$name.tar.gz" "redlock-$version.tar.gz" redlock.rb && cat ./*.sha256)
