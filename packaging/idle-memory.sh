#!/usr/bin/env bash
# Idle memory of daemon binaries side by side: `packaging/idle-memory.sh BIN...` starts each
# binary three times on one private headless desktop (Xvfb, a session bus with AT-SPI, openbox,
# an xterm), makes the MCP handshake and one contained `shell run` (as the gui bench does before
# it reads the idle RSS), and prints the daemon's resident set, the part of it that is the
# binary's code, and its anonymous memory. Used to compare a build in the compiler's function
# order with one laid out by packaging/function-order.txt (BENCHMARKS.md, "Code laid out by
# use"): copy each build out of target/ first, since both land at target/release/computer.
# Every wait is bounded: a daemon that does not come up or answer ends its round with a line that
# says so, and the script goes on to the next.
set -euo pipefail
export LC_ALL=C
wait_until() { # wait_until SECONDS COMMAND...: polls COMMAND until it succeeds, or fails
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.05; done
}
work=$(mktemp -d); pids=(); d=
# Every process this started goes with it (left behind, they would hold a reader's pipe open).
cleanup() { for p in $d "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf $work; }
trap cleanup EXIT
Xvfb -displayfd 3 -screen 0 1920x1080x24 -nolisten tcp 3>"$work/display" 2>/dev/null & pids+=($!)
wait_until 30 test -s $work/display
export DISPLAY=":$(head -n1 $work/display)"
dbus-daemon --session --nofork --print-address=3 3>"$work/bus" 2>/dev/null & pids+=($!)
wait_until 30 test -s $work/bus
export DBUS_SESSION_BUS_ADDRESS=$(head -n1 $work/bus) XDG_SESSION_TYPE=x11 GDK_BACKEND=x11 NO_AT_BRIDGE=0
openbox >/dev/null 2>&1 & pids+=($!)
wait_until 30 sh -c 'xprop -root _NET_SUPPORTING_WM_CHECK | grep -q "window id"'
dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus org.freedesktop.DBus.Properties.Set string:org.a11y.Status string:IsEnabled variant:boolean:true >/dev/null
xterm -title bench-xterm -geometry 80x24+50+50 >/dev/null 2>&1 & pids+=($!)
for bin in "$@"; do
 for round in 1 2 3; do
  export HOME=$work/h XDG_RUNTIME_DIR=$work/r XDG_CONFIG_HOME=$work/c XDG_DATA_HOME=$work/d XDG_STATE_HOME=$work/s
  rm -rf $HOME $XDG_RUNTIME_DIR $XDG_DATA_HOME $XDG_STATE_HOME; mkdir -p $HOME $XDG_RUNTIME_DIR $XDG_CONFIG_HOME $XDG_DATA_HOME $XDG_STATE_HOME; chmod 700 $XDG_RUNTIME_DIR
  mkdir -p $XDG_CONFIG_HOME/computer; printf "[defaults]\nact = \"allow\"\n" > $XDG_CONFIG_HOME/computer/config.toml
  $bin serve 2>$work/serve.log & d=$!
  if ! wait_until 30 test -S $XDG_RUNTIME_DIR/computer/computer.sock; then
    echo "$bin round $round: no socket within 30 s: $(tail -n3 $work/serve.log)"; kill $d; wait $d 2>/dev/null || true; continue
  fi
  timeout 30 python3 - $XDG_RUNTIME_DIR/computer/computer.sock <<'PY' || { echo "$bin round $round: no answer within 30 s"; kill $d; wait $d 2>/dev/null || true; continue; }
import json, socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); f = c.makefile("r")
def ask(i, m, p):
    c.sendall((json.dumps({"jsonrpc":"2.0","id":i,"method":m,"params":p})+"\n").encode())
    for l in f:
        r = json.loads(l)
        if r.get("id") == i:
            assert "error" not in r and not r.get("result",{}).get("isError"), l
            return
ask(0,"initialize",{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}})
c.sendall(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
ask(1,"tools/call",{"name":"COMPUTER","arguments":{"surface":"shell","command":"run","args":{"argv":["true"]}}})
PY
  sleep 0.5
  code=$(awk -v b="$(realpath $bin)" '$2 ~ /x/ && $6 == b {on=1; next} /^[0-9a-f]+-/ {on=0} on && /^Rss:/ {s+=$2} END {print s}' /proc/$d/smaps)
  echo "$bin round $round: code ${code} kB; $(grep VmRSS /proc/$d/status) ; $(grep -E '^(Rss|Anonymous)' /proc/$d/smaps_rollup | tr -s ' ' | tr '\n' ' ')"
  kill $d; wait $d 2>/dev/null || true
 done
done
