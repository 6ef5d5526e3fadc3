#!/usr/bin/env bash
# The documentation as a package ships it: README.md and the book's pages under docs/src, at the
# paths README's links name. Checks an installed or staged copy (DIR holds README.md):
#   packaging/check-doc-links.sh DIR
# every page of the repository's docs/src is in DIR/docs/src, and every link of DIR/README.md
# into docs/ names a file there. Run by check-deb.sh on the installed .deb and by
# release/archive.sh on the archive it stages.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: packaging/check-doc-links.sh DIR}
fail() { printf 'check-doc-links: FAILED: %s\n' "$*" >&2; exit 1; }

[ -f "$dir/README.md" ] || fail "$dir/README.md is not there"
pages=0
while IFS= read -r page; do
  [ -f "$dir/docs/src/$page" ] || fail "docs/src/$page is not in $dir"
  pages=$((pages + 1))
done < <(cd docs/src && find . -type f | sed 's|^\./||' | sort)
[ "$pages" -gt 20 ] || fail "only $pages pages under docs/src: is the scan broken?"

links=0
while IFS= read -r link; do
  [ -f "$dir/$link" ] || fail "README.md links to $link, which is not in $dir"
  links=$((links + 1))
done < <(grep -o '](docs/[^)#[:space:]]*' "$dir/README.md" | cut -c3- | sort -u)
[ "$links" -gt 5 ] || fail "README.md links to only $links files under docs/: is the scan broken?"
printf 'check-doc-links: %s: %d pages of the book, README'"'"'s %d links into them resolve\n' \
  "$dir" "$pages" "$links" >&2
