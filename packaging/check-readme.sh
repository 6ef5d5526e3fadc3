#!/usr/bin/env bash
# README's first two commands, run as a newcomer runs them: the install line (system packages,
# then `cargo install` of both programs), then the daemon with its embedded defaults (no config),
# answered through `computer call` (the shell surface's `help`, which the defaults allow). One change: `cargo install` builds in the dev profile into the
# suite's target dir (`--debug`), so that CI reuses the suite's build instead of spending a
# quarter of an hour on a release one; what can fail for a newcomer (a missing system package,
# the lock file, the paths) fails the same way. With CHECK_README_INSTALL_ROOT set, the programs
# are installed there and kept (`.ci/run` runs README's test command next, with them on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "check-readme: $*" >&2; }
# The commands of README's first `sh` block, comments cut.
commands=$(awk '/^```sh$/{inside=1; next} inside && /^```$/{exit} inside{print}' README.md \
  | sed 's/[[:space:]]*#.*$//')
install_line=$(sed -n 1p <<<"$commands")
serve_line=$(sed -n 2p <<<"$commands")
case "$install_line" in
  *"cargo install"*) ;;
  *) log "README's first command installs nothing with cargo: '$install_line'"; exit 1 ;;
esac
[ "$serve_line" = "computer serve" ] || { log "README's second command is '$serve_line'"; exit 1; }

work=$(mktemp -d)
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

export CARGO_INSTALL_ROOT="${CHECK_README_INSTALL_ROOT:-$work/install}" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
log "running: ${install_line//cargo install/cargo install --debug}"
bash -c "${install_line//cargo install/cargo install --debug}"
for program in computer computer-approval-window; do
  [ -x "$CARGO_INSTALL_ROOT/bin/$program" ] || { log "$program was not installed"; exit 1; }
done

# A fresh home: no config file, no state, a socket of its own.
export PATH="$CARGO_INSTALL_ROOT/bin:$PATH" HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"
export XDG_STATE_HOME="$work/home/.local/state" XDG_RUNTIME_DIR="$work/run"
unset COMPUTER_CONFIG COMPUTER_SOCKET COMPUTER_STATE_DIR
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
log "running: $serve_line"
$serve_line > "$work/serve.log" 2>&1 &
daemon=$!
answer=""
for _ in $(seq 1 300); do
  # `help` is an observation, allowed by the embedded defaults (a run would wait for a person).
  if answer=$(computer call shell help 2>&1) && grep -q 'shell.run {' <<<"$answer"; then
    break
  fi
  kill -0 "$daemon" 2>/dev/null || { log "the daemon exited:"; cat "$work/serve.log" >&2; exit 1; }
  answer=""
  sleep 0.1
done
[ -n "$answer" ] || { log "the daemon did not answer within 30 s:"; cat "$work/serve.log" >&2; exit 1; }
log "ok: both programs installed, and the daemon answered with its embedded defaults"
