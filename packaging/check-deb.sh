#!/usr/bin/env bash
# The .deb as a person installs it: built by cargo-deb from the programs the test suite built
# (stripped, as a release is), installed with dpkg, its files and user unit checked, the
# installed daemon started and asked for a receipted run, then purged and checked gone. The
# book's pages are installed beside README (/usr/share/doc/computer/docs/src), where its links go.
# Run by .ci/run after the suite, whose build it packs; needs root (or sudo) for dpkg. What is
# checked is the package (files, maintainer scripts, install, removal); the release workflow
# builds the same package from the release profile.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'check-deb: %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# Pinned: packing the dev profile's build is what newer releases may refuse.
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  log "installing cargo-deb $CARGO_DEB_VERSION"
  cargo install --locked --quiet "cargo-deb@$CARGO_DEB_VERSION"
fi
# --install-only: cargo-deb and nothing else (.ci/run installs it early, while packages install).
[ "${1:-}" = "--install-only" ] && exit 0
dpkg-query -W -f='${Status}' computer 2>/dev/null | grep -q "installed" \
  && fail "a package named computer is already installed here; remove it first"

work=$(mktemp -d)
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
  $sudo dpkg --purge computer >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cargo deb -p computer-daemon --no-build --profile dev --fast -o "$work/" 2>&1 \
  | grep -v -e "dev profile is not supported" -e "To enable debug symbols" || true
deb=$(ls "$work"/computer_*.deb)
log "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

$sudo dpkg -i "$deb" >/dev/null
for path in /usr/bin/computer /usr/bin/computer-approval-window \
    /usr/lib/systemd/user/computer.service /etc/xdg/autostart/computer-approval-window.desktop \
    /etc/apparmor.d/computer /usr/share/doc/computer/README.md; do
  [ -e "$path" ] || fail "$path is not installed"
done
# The book beside README, at the paths README's links name.
packaging/check-doc-links.sh /usr/share/doc/computer || fail "the packaged docs are incomplete"
readelf --section-headers /usr/bin/computer | grep -q "\.debug_info" && fail "/usr/bin/computer is not stripped"
/usr/bin/computer --version | grep -q "^computer " || fail "the installed program does not run"
mkdir -m 700 "$work/runtime"
XDG_RUNTIME_DIR="$work/runtime" systemd-analyze verify --user \
  /usr/lib/systemd/user/computer.service 2> "$work/verify.log" \
  || { cat "$work/verify.log" >&2; fail "systemd-analyze rejects the packaged unit"; }
[ -s "$work/verify.log" ] && { cat "$work/verify.log" >&2; fail "the packaged unit has warnings"; }

# The installed daemon serves, runs a command contained and receipts it.
export COMPUTER_SOCKET="$work/run/computer.sock" COMPUTER_STATE_DIR="$work/state"
export COMPUTER_CONFIG="$work/config.toml"
printf '[defaults]\nact = "allow"\n' > "$COMPUTER_CONFIG"
/usr/bin/computer serve 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 1 300); do
  [ -S "$COMPUTER_SOCKET" ] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log" >&2; fail "the daemon exited at start"; }
  sleep 0.1
done
reply=$(/usr/bin/computer call shell run --json -- echo packaged) \
  || { cat "$work/daemon.log" >&2; fail "the packaged daemon did not run a command: $reply"; }
grep -q '"stdout":"packaged\\n"' <<< "$reply" || fail "unexpected reply: $reply"
/usr/bin/computer receipts verify >/dev/null || fail "the receipts of the packaged daemon do not verify"
kill "$daemon" && wait "$daemon" || true
daemon=""

$sudo dpkg --purge computer >/dev/null
for path in /usr/bin/computer /usr/lib/systemd/user/computer.service /etc/apparmor.d/computer \
    /usr/share/doc/computer; do
  [ -e "$path" ] && fail "$path is left after purge"
done
log "ok: built, installed, served a receipted run, purged"
