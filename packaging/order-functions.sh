#!/usr/bin/env bash
# Writes packaging/function-order.txt: the functions a release daemon runs, in the order the
# linker should lay them out (daemon/build.rs asks for it; packaging/link-ordered hands it to lld).
# Functions are named by keys: their symbols without the crate hashes that differ from one build
# of the same code to another (packaging/symbol-keys.sed).
#
# Why: what an idle daemon keeps resident is mostly its own code, and the kernel maps code in
# 64 KiB around every page a call touches. Left to the compiler's order, the few thousand
# functions of start-up and of the common calls are spread over all 15 MB of text, so touching
# them maps most of it. Placed side by side they fill a few hundred pages (BENCHMARKS.md,
# "Code laid out by use").
#
# How: a release daemon runs under valgrind's callgrind on a private headless desktop (Xvfb, a
# session bus with AT-SPI, openbox, an xterm and gtk3-widget-factory). Two phases are recorded
# apart:
#   1. start-up and idle: `serve`, an MCP handshake, `tools/list` and one contained `shell run`
#      (what the bench does before it reads the idle RSS);
#   2. the common calls: gui windows, screenshot, click, move and type; ax find, read and act;
#      a terminal session; receipts list.
# The file lists phase 1's functions first, then each call's new ones in turn; keys sorted
# within each, so that a rerun on the same code changes nothing. Keys a later build no longer has are
# skipped, so a stale file costs memory, never correctness; run this again after large changes,
# such as renamed modules or new dependencies (`packaging/order-functions.sh [path/to/computer]`,
# about 5 minutes).
set -euo pipefail
export LC_ALL=C # sort and comm must agree on one order
cd "$(dirname "$0")/.."

log() { printf 'order-functions: %s\n' "$*" >&2; }

bin=${1:-target/release/computer}
out=packaging/function-order.txt
for tool in valgrind callgrind_control Xvfb dbus-daemon openbox xterm xdotool gtk3-widget-factory nm python3; do
  command -v "$tool" >/dev/null || { log "$tool is missing (packaging/install-deps.sh, valgrind)"; exit 1; }
done
[[ -x $bin ]] || { log "no binary at $bin: cargo build --release -p computer-daemon"; exit 1; }
bin=$(realpath "$bin")

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

wait_until() { # wait_until WHAT SECONDS COMMAND...: polls COMMAND until it succeeds
  local what=$1 limit=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "gave up waiting for $what"; exit 1; }
    sleep 0.1
  done
}

# The desktop.
Xvfb -displayfd 3 -screen 0 1920x1080x24 -nolisten tcp 3>"$work/display" 2>"$work/xvfb.log" &
pids+=($!)
wait_until "the X server's display number" 30 test -s "$work/display"
export DISPLAY=":$(head -n1 "$work/display")"
dbus-daemon --session --nofork --print-address=3 3>"$work/bus" 2>"$work/dbus.log" &
pids+=($!)
wait_until "the session bus" 30 test -s "$work/bus"
DBUS_SESSION_BUS_ADDRESS=$(head -n1 "$work/bus")
export DBUS_SESSION_BUS_ADDRESS XDG_SESSION_TYPE=x11 GDK_BACKEND=x11 NO_AT_BRIDGE=0
unset WAYLAND_DISPLAY
openbox >/dev/null 2>&1 &
pids+=($!)
wait_until "the window manager" 30 sh -c 'xprop -root _NET_SUPPORTING_WM_CHECK | grep -q "window id"'
dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus \
  org.freedesktop.DBus.Properties.Set string:org.a11y.Status string:IsEnabled variant:boolean:true >/dev/null
xterm -title order-xterm -geometry 80x24+50+50 >/dev/null 2>&1 &
pids+=($!)
gtk3-widget-factory >/dev/null 2>&1 &
pids+=($!)
wait_until "the xterm window" 30 sh -c 'xdotool search --name "^order-xterm$"'

# The daemon's own places, private to this run.
export HOME=$work/home XDG_RUNTIME_DIR=$work/run XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
export XDG_STATE_HOME=$work/state
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_STATE_HOME"
chmod 700 "$XDG_RUNTIME_DIR"
# valgrind cannot follow the containment zygote (started from /proc/self/exe, it would be
# valgrind's own binary) nor the namespaces its slots make, so runs here are uncontained: the
# daemon's half of a contained run is left out of the order. Acts are allowed: an uncontained
# run would otherwise wait for a person.
mkdir -p "$XDG_CONFIG_HOME/computer"
printf '[defaults]\nact = "allow"\n[containment]\nmode = "off"\n' >"$XDG_CONFIG_HOME/computer/config.toml"

valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
  --callgrind-out-file="$work/callgrind.out" "$bin" serve 2>"$work/valgrind.log" &
daemon=$!
pids+=($daemon)

# Phase 1: start-up and idle, as the bench reaches it.
mcp() { # one MCP session over the socket: handshake, tools/list, then each argument as a tools/call
  python3 - "$XDG_RUNTIME_DIR/computer/computer.sock" "$@" <<'PY'
import json, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
lines = conn.makefile("r")
def ask(id, method, params):
    conn.sendall((json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}) + "\n").encode())
    for line in lines:
        reply = json.loads(line)
        if reply.get("id") == id:
            if "error" in reply or reply.get("result", {}).get("isError"):
                sys.exit(f"order-functions: {method} {params} failed: {line[:1500]}")
            return
    sys.exit(f"order-functions: the daemon closed the connection during {method}")
ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "order", "version": "1"}})
conn.sendall(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
ask(1, "tools/list", {})
for id, call in enumerate(sys.argv[2:], start=2):
    ask(id, "tools/call", {"name": "COMPUTER", "arguments": json.loads(call)})
PY
}
wait_until "the daemon's socket" 120 test -S "$XDG_RUNTIME_DIR/computer/computer.sock"
mcp '{"surface":"shell","command":"run","args":{"argv":["true"]}}'
callgrind_control --dump=idle "$daemon" >/dev/null

# Phase 2: the common calls, one dump each, so that each call's functions lie together: a daemon
# that only ever takes screenshots maps the screenshot's code, not the code of every call.
calls=(
  '{"surface":"gui","command":"windows","args":{}}'
  '{"surface":"gui","command":"screenshot","args":{}}'
  '{"surface":"gui","command":"move","args":{"x":700,"y":400}}'
  '{"surface":"gui","command":"click","args":{"x":700,"y":400}}'
  '{"surface":"gui","command":"click","args":{"x":100,"y":100}}'
  '{"surface":"gui","command":"type","args":{"text":"echo hi"}}'
  '{"surface":"ax","command":"find","args":{"selector":"checkBox:4"}}'
  '{"surface":"ax","command":"tree","args":{"depth":3}}'
  '{"surface":"ax","command":"read","args":{"selector":"checkBox:4"}}'
  '{"surface":"ax","command":"act","args":{"selector":"checkBox:4","action":"toggle"}}'
  '{"surface":"shell","command":"run","args":{"argv":["sh","-c","echo out; echo err >&2"]}}'
  '{"surface":"shell","command":"open","args":{"argv":["sh"]}}'
)
for i in "${!calls[@]}"; do
  mcp "${calls[$i]}"
  callgrind_control --dump="call-$((i + 10))" "$daemon" >/dev/null
done
kill -TERM "$daemon"
wait "$daemon" || true

# Every function that ran, by phase; only the binary's own symbols (not libc's).
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$work/symbols"
functions_of() { # the keys of the functions that ran in one callgrind dump (`fn=` lines), sorted
  sed -n 's/^fn=\(([0-9]*) \)\?//p' "$1" | sort -u | comm -12 - "$work/symbols" |
    sed -E -f packaging/symbol-keys.sed | sort -u
}
dump_of() { # the dump callgrind_control wrote for a hint
  grep -l "^desc: Trigger: .*dump $1\$" "$work"/callgrind.out* ||
    { log "no callgrind dump for $1"; cat "$work/valgrind.log" >&2; exit 1; }
}
functions_of "$(dump_of idle)" >"$work/idle"
cp "$work/idle" "$work/seen"
: >"$work/calls"
for i in "${!calls[@]}"; do # each call's new functions, after those of the calls before it
  functions_of "$(dump_of "call-$((i + 10))")" | comm -23 - "$work/seen" >"$work/call"
  cat "$work/call" >>"$work/calls"
  sort -u "$work/seen" "$work/call" -o "$work/seen"
done
{
  echo "# Written by packaging/order-functions.sh from a release build of $(git rev-parse --short HEAD):"
  echo "# $(wc -l <"$work/idle") functions of start-up and idle, then $(wc -l <"$work/calls") of the common calls."
  cat "$work/idle" "$work/calls"
} >"$out"
log "wrote $out: $(wc -l <"$work/idle") idle and $(wc -l <"$work/calls") call functions"
