#!/usr/bin/env bash
# Idle memory of daemon binaries side by side: `packaging/idle-memory.sh BIN...` starts each
# binary three times on one private headless desktop (Xvfb, a session bus with AT-SPI, openbox,
# an xterm), makes the MCP handshake and one contained `shell run` (as the gui bench does before
# it reads the idle RSS), and prints the daemon's resident set, the part of it that is the
# binary's code, and its anonymous memory. Used to compare a build in the compiler's function
# order with one laid out by packaging/function-order.txt (BENCHMARKS.md, "Code laid out by
# use"): copy each build out of target/ first, since both land at target/release/computer.
set -euo pipefail
export LC_ALL=C
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf $work; }
d=; trap '[[ -n $d ]] && kill $d 2>/dev/null; cleanup' EXIT
Xvfb -displayfd 3 -screen 0 1920x1080x24 -nolisten tcp 3>"$work/display" 2>/dev/null & pids+=($!)
until test -s $work/display; do sleep 0.1; done
export DISPLAY=":$(head -n1 $work/display)"
dbus-daemon --session --nofork --print-address=3 3>"$work/bus" 2>/dev/null & pids+=($!)
until test -s $work/bus; do sleep 0.1; done
export DBUS_SESSION_BUS_ADDRESS=$(head -n1 $work/bus) XDG_SESSION_TYPE=x11 GDK_BACKEND=x11 NO_AT_BRIDGE=0
openbox >/dev/null 2>&1 & pids+=($!)
until xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q "window id"; do sleep 0.1; done
dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus org.freedesktop.DBus.Properties.Set string:org.a11y.Status string:IsEnabled variant:boolean:true >/dev/null
xterm -title bench-xterm -geometry 80x24+50+50 >/dev/null 2>&1 & pids+=($!)
for bin in "$@"; do
 for round in 1 2 3; do
  export HOME=$work/h XDG_RUNTIME_DIR=$work/r XDG_CONFIG_HOME=$work/c XDG_DATA_HOME=$work/d XDG_STATE_HOME=$work/s
  rm -rf $HOME $XDG_RUNTIME_DIR $XDG_DATA_HOME $XDG_STATE_HOME; mkdir -p $HOME $XDG_RUNTIME_DIR $XDG_CONFIG_HOME $XDG_DATA_HOME $XDG_STATE_HOME; chmod 700 $XDG_RUNTIME_DIR
  mkdir -p $XDG_CONFIG_HOME/computer; printf "[defaults]\nact = \"allow\"\n" > $XDG_CONFIG_HOME/computer/config.toml
  $bin serve 2>$work/serve.log & d=$!
  until test -S $XDG_RUNTIME_DIR/computer/computer.sock; do sleep 0.05; done
  python3 - $XDG_RUNTIME_DIR/computer/computer.sock <<'PY'
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
