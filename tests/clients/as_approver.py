"""Runs a program as a connected approver: connects to the daemon's control socket, starts
watching pending requests, then execs the program (same pid, connection inherited), so the
daemon protects that program's windows and accessibility nodes for as long as it runs.

usage: as_approver.py CONTROL_SOCKET PROGRAM [ARGS...]
Prints "registered" on stdout once the daemon has accepted the connection."""

import json
import os
import socket
import sys

control, program = sys.argv[1], sys.argv[2:]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(control)
sock.sendall(json.dumps({"op": "watch"}).encode() + b"\n")
first = b""
while not first.endswith(b"\n"):
    chunk = sock.recv(4096)
    if not chunk:
        sys.exit(f"the control socket closed: {first!r}")
    first += chunk
snapshot = json.loads(first)
if snapshot.get("event") != "snapshot":
    sys.exit(f"the control socket refused: {snapshot}")
print("registered", flush=True)
os.set_inheritable(sock.fileno(), True)
os.execvp(program[0], program)
