#!/usr/bin/env bash
# Installs what building and testing computer needs on a fresh Debian/Ubuntu machine (or macOS
# with Homebrew): system packages, and the official MCP Python SDK that the suite uses as an
# independent client. Safe to run again; it installs only what is missing.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  log "cargo is missing: install a Rust toolchain (https://rustup.rs) and run this again"
  exit 1
fi

case "$(uname -s)" in
  Linux)
    # Commands the build and the end-to-end suites run, and the Debian package of each.
    packages=()
    need() { command -v "$1" >/dev/null 2>&1 || packages+=("$2"); }
    need cc gcc
    need pkg-config pkg-config
    need perl perl
    need setpriv util-linux
    need python3 python3
    need mkfifo coreutils
    python3 -m pip --version >/dev/null 2>&1 || packages+=(python3-pip)
    if ((${#packages[@]})); then
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo="sudo"
      log "installing ${packages[*]}"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"
    fi
    ;;
  Darwin)
    command -v python3 >/dev/null 2>&1 || brew install python
    ;;
esac

if ! python3 -c 'import mcp' >/dev/null 2>&1; then
  log "installing the MCP Python SDK"
  # Debian's own python3 refuses system-wide pip installs unless told otherwise.
  python3 -m pip install --quiet --disable-pip-version-check 'mcp>=1.10' 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'mcp>=1.10'
fi
log "ready"
