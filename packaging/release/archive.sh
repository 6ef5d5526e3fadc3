#!/usr/bin/env bash
# Packs one target's release build into dist/: the two programs stripped (with a link to their
# debug info), the debug info in an archive of its own, the user unit, the approval window's
# autostart entry, README and the book's pages beside it (docs/src, where README's links go), and
# a sha256 sum for each archive.
#   packaging/release/archive.sh TARGET VERSION      e.g. x86_64-unknown-linux-gnu v0.1.0
# Expects `cargo build --release --target TARGET -p computer-daemon -p computer-approval-window`.
set -euo pipefail
cd "$(dirname "$0")/../.."

target=$1
version=$2
built="target/$target/release"
[ -d "$built" ] || built=target/release
name="computer-$version-$target"
work=$(mktemp -d)
stage="$work/$name"
mkdir -p "$stage" "$work/debug" dist

for program in computer computer-approval-window; do
  cp "$built/$program" "$stage/"
  case "$target" in
    *linux*)
      objcopy --only-keep-debug "$stage/$program" "$work/debug/$program.debug"
      # The link lets gdb and debuginfod-style tools find the separate file by name and CRC.
      objcopy --strip-all --add-gnu-debuglink="$work/debug/$program.debug" "$stage/$program"
      ;;
    *darwin*)
      dsymutil "$stage/$program" -o "$work/debug/$program.dSYM"
      strip -S -x "$stage/$program"
      ;;
  esac
done
cp README.md packaging/systemd/computer.service packaging/computer-approval-window.desktop "$stage/"
mkdir -p "$stage/docs"
cp -R docs/src "$stage/docs/"
packaging/check-doc-links.sh "$stage"

tar -C "$work" -czf "dist/$name.tar.gz" "$name"
tar -C "$work" -czf "dist/$name-debug.tar.gz" debug
for archive in "$name.tar.gz" "$name-debug.tar.gz"; do
  (cd dist && { command -v sha256sum >/dev/null && sha256sum "$archive" || shasum -a 256 "$archive"; } > "$archive.sha256")
done
ls -l "$stage" "dist/$name.tar.gz" "dist/$name-debug.tar.gz"
rm -rf "$work"
