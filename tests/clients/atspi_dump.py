#!/usr/bin/env python3
"""Benchmark anchor and independent reader: walks one app's accessible tree with libatspi
(gi.repository.Atspi), reading what the ax surface reads (role, name, states, children).

Usage: atspi_dump.py APP_NAME|PID [--find NAME]   -> prints JSON {nodes, ms} or the found node.
`--find` prints {"name", "role", "states", "text"} for the first node with that accessible name
(the suite uses it to check effects through a second AT-SPI client).
"""

import json
import sys
import time

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib  # noqa: E402


def find_app(name):
    desktop = Atspi.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is None:
            continue
        # By pid, ask only the bus for it: another test may hold an app stopped, and asking
        # that app for its name would wait out the call timeout and fail the whole walk.
        try:
            if name.isdigit():
                if app.get_process_id() == int(name):
                    return app
            elif app.get_name() == name:
                return app
        except GLib.Error:
            continue
    return None


def walk(node, visit):
    stack = [node]
    count = 0
    while stack:
        current = stack.pop()
        count += 1
        visit(current)
        n = current.get_child_count()
        for i in range(n - 1, -1, -1):
            child = current.get_child_at_index(i)
            if child is not None:
                stack.append(child)
    return count


def main():
    app_name = sys.argv[1]
    app = find_app(app_name)
    if app is None:
        print(json.dumps({"error": "no app " + app_name}))
        return 1
    if len(sys.argv) > 3 and sys.argv[2] == "--find":
        # libatspi gives up on a call after 800 ms by default; a loaded 2-core runner can take
        # longer, and a check of effects must not fail for that.
        Atspi.set_timeout(10000, 15000)
        wanted = sys.argv[3]
        found = {}

        def look(node):
            if not found and node.get_name() == wanted:
                found["name"] = node.get_name()
                found["role"] = node.get_role_name()
                found["states"] = [s.value_nick for s in node.get_state_set().get_states()]
                text = node.get_text_iface() if hasattr(node, "get_text_iface") else None
                if text is not None:
                    found["text"] = Atspi.Text.get_text(text, 0, -1)

        try:
            walk(app, look)
        except GLib.Error as error:
            print(json.dumps({"error": str(error)}))
            return 2
        print(json.dumps(found))
        return 0

    def read(node):
        node.get_role_name()
        node.get_name()
        node.get_state_set().get_states()

    started = time.perf_counter()
    count = walk(app, read)
    ms = (time.perf_counter() - started) * 1000
    print(json.dumps({"nodes": count, "ms": ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
