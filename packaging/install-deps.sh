#!/usr/bin/env bash
# Installs what building and testing computer needs on a fresh Debian/Ubuntu machine (or macOS
# with Homebrew): system packages, the official MCP Python SDK that the suite uses as an
# independent client, and check-jsonschema for the workflow check. Safe to run again; it installs
# only what is missing.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  log "cargo is missing: install a Rust toolchain (https://rustup.rs) and run this again"
  exit 1
fi

case "$(uname -s)" in
  Linux)
    # Debian packages the build and the real-component suites need:
    # build: C toolchain and the headers xcap (screenshots) links against;
    # X: a headless server, a window manager with EWMH, and independent checkers (xdotool, xprop);
    # Xephyr (a nested server whose input devices are not XTEST ones: the person's hand in the
    # person-watch and approval-window tests) and xinput (what an agent's run makes masters with);
    # GL and X input libraries the approval window (eframe/glow, winit) loads at run time;
    # accessibility: a session bus, AT-SPI, GTK apps with known widgets, a Python AT-SPI client;
    # secrets: a Secret Service (gnome-keyring) and secret-tool, which the keychain suite and
    # bench cross-check against; anchors: ImageMagick's `import`; and the tools tests call
    # (systemd-analyze checks the user unit `computer service install` writes); terminal
    # sessions: vim for their suite, tmux as their benchmark's anchor; Wayland: a wlroots
    # compositor that runs headless (sway), grim (an independent screencopy capture), wtype (the
    # typing benchmark's anchor) and foot (a terminal the Wayland suite types into); GNOME:
    # Mutter (runs headless with its RemoteDesktop and ScreenCast D-Bus API), PipeWire and
    # WirePlumber (screen-cast frames), and gst-launch with pipewiresrc (an independent capture);
    # the portal route: xdg-desktop-portal with its GNOME backend (serves RemoteDesktop and
    # ScreenCast over that Mutter and shows its consent dialog there); remote use: OpenSSH's
    # server and client (the suite forwards the daemon's socket through a private sshd);
    # receipts export: rsyslog with its GnuTLS driver (a private rsyslogd receives them over TCP
    # and TLS) and openssl (makes a test CA and the receiver's certificate it signs); the
    # journal sink's receiver is a systemd-journald namespace instance (systemd, above).
    wanted=(
      gcc pkg-config libclang-dev libwayland-dev libpipewire-0.3-dev libgbm-dev libdbus-1-dev
      xvfb xauth x11-utils xdotool xterm openbox xserver-xephyr xinput
      libgl1 libegl1 libgl1-mesa-dri libxkbcommon-x11-0 libxcursor1 libxi6 libxrandr2
      dbus dbus-x11 at-spi2-core gtk-3-examples zenity python3-gi gir1.2-atspi-2.0 gir1.2-gtk-3.0
      gnome-keyring libsecret-tools keyutils bubblewrap
      imagemagick perl util-linux coreutils procps python3 python3-pip
      systemd vim tmux
      sway grim wtype foot
      mutter pipewire wireplumber gstreamer1.0-pipewire gstreamer1.0-tools gstreamer1.0-plugins-base
      gstreamer1.0-plugins-good xdg-desktop-portal xdg-desktop-portal-gnome
      openssh-server openssh-client rsyslog rsyslog-gnutls openssl
      # real apps the real-apps suite drives (tests/tests/real_apps.rs): browsers, the office
      # suite with its GTK3 plugin (the only one that exposes AT-SPI), GTK3 and GTK4 editors, a
      # GTK4 calculator and a file manager
      chromium firefox-esr libreoffice-calc libreoffice-writer libreoffice-gtk3
      gedit gnome-text-editor gnome-calculator thunar
      # a Qt5 editor (Qt's own AT-SPI bridge and its widget-based file dialog)
      featherpad
    )
    missing=()
    for package in "${wanted[@]}"; do
      dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
    done
    if ((${#missing[@]})); then
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo="sudo"
      log "installing ${missing[*]}"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
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
# check-jsonschema validates .github/workflows/ci.yml in .ci/run against the published GitHub
# workflow schema, which the package ships (no network at check time).
if ! python3 -c 'import check_jsonschema' >/dev/null 2>&1; then
  log "installing check-jsonschema"
  python3 -m pip install --quiet --disable-pip-version-check 'check-jsonschema>=0.29' 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'check-jsonschema>=0.29'
fi
# The official MCP TypeScript SDK (the one most hosts are built on) and the hosts the suite sets
# up from their own packages (Gemini CLI, Claude Code, Codex, the MCP Inspector), at the
# releases pinned in tests/clients/ts/package-lock.json: the suite drives `computer mcp` with
# them and never downloads at test time. Needs Node.js 20 or later (Gemini CLI); the Inspector's package asks
# for 22 and prints an engine warning on 20, where its CLI mode, the one the suite uses, runs.
ts_clients="$(cd "$(dirname "$0")/.." && pwd)/tests/clients/ts"
if ! command -v npm >/dev/null 2>&1; then
  case "$(uname -s)" in
    Linux)
      log "installing Node.js and npm"
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm
      ;;
    Darwin) brew install node ;;
  esac
fi
if ! (cd "$ts_clients" && npm ls --silent >/dev/null 2>&1); then
  log "installing the MCP TypeScript SDK into $ts_clients/node_modules"
  (cd "$ts_clients" && npm ci --no-audit --no-fund --silent)
fi
log "ready"
