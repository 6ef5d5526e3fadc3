#!/usr/bin/env bash
# Builds the book in docs/ with mdBook (into target/book). mdBook is not packaged by Debian, so it
# comes from crates.io: `cargo install` of a pinned release, without its default features (the
# local server and file watcher, which a build does not use), into a cache under target/ that
# later runs reuse (about 2.5 min on 2 cores the first time, nothing after). With --install-only
# it installs mdBook and builds nothing (.ci/run does that early, while packages install).
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.5.4
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
root="$target_dir/tools/mdbook-$version"
mdbook="$root/bin/mdbook"

if [ ! -x "$mdbook" ]; then
  echo "build-book: installing mdbook $version into $root" >&2
  CARGO_TARGET_DIR="$root/build" cargo install mdbook --locked --no-default-features \
    --version "=$version" --root "$root"
  rm -rf "$root/build"
fi
[ "${1:-}" = "--install-only" ] && exit 0
"$mdbook" build docs --dest-dir "$target_dir/book"
echo "build-book: the book is in $target_dir/book (open index.html)" >&2
