#!/usr/bin/env python3
"""An independent AT-SPI client (libatspi through gi.repository.Atspi, not the ax surface) that
waits for an application's label and button, then presses the button the way a screen reader
user would: through the button's accessible action.

Usage: atspi_press.py PID --label TEXT [--press NAME] [--focused NAME] [--timeout SECONDS]

Waits until the app with process id PID shows a label whose accessible name contains TEXT (and,
with --press, a push button named exactly NAME; with --focused, a push button named NAME that has
keyboard focus), then invokes the button's first action. Prints one JSON object:
{"label": <the matching label's name>, "buttons": [names], "focused": [names],
"extents": {name: [x, y, width, height]}, "pressed": NAME|null}
or {"error": ..., "labels": [...], "buttons": [...]} with exit status 1 after the timeout.
"""

import argparse
import json
import sys
import time

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib  # noqa: E402


def find_app(pid):
    desktop = Atspi.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is not None and app.get_process_id() == pid:
            return app
    return None


def nodes(root):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        for i in range(node.get_child_count() - 1, -1, -1):
            child = node.get_child_at_index(i)
            if child is not None:
                stack.append(child)


def look(pid):
    """The app's labels and buttons now: ([label names], [(button name, node, focused)])."""
    app = find_app(pid)
    if app is None:
        return [], []
    # The tree changes as requests come and go; read it afresh each time.
    app.clear_cache()
    labels, buttons = [], []
    for node in nodes(app):
        role = node.get_role()
        name = node.get_name() or ""
        if role == Atspi.Role.LABEL:
            labels.append(name)
        elif role == Atspi.Role.PUSH_BUTTON:
            focused = node.get_state_set().contains(Atspi.StateType.FOCUSED)
            buttons.append((name, node, focused))
    return labels, buttons


def extents(node):
    """A button's place on the screen: [x, y, width, height], or None."""
    try:
        box = node.get_extents(Atspi.CoordType.SCREEN)
        return [box.x, box.y, box.width, box.height]
    except GLib.Error:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pid", type=int)
    parser.add_argument("--label", required=True)
    parser.add_argument("--press")
    parser.add_argument("--focused")
    parser.add_argument("--timeout", type=float, default=30.0)
    options = parser.parse_args()

    deadline = time.monotonic() + options.timeout
    pause = 0.01
    labels, buttons = [], []
    while True:
        try:
            labels, buttons = look(options.pid)
        except GLib.Error:
            # The app may be mid-update or not registered yet.
            labels, buttons = [], []
        label = next((name for name in labels if options.label in name), None)
        wanted = options.press or options.focused
        target = next(
            (
                node
                for name, node, focused in buttons
                if name == wanted and (options.focused is None or focused)
            ),
            None,
        )
        if label is not None and (wanted is None or target is not None):
            pressed = None
            if options.press is not None:
                action = target.get_action_iface()
                if action is None or action.get_n_actions() == 0:
                    print(json.dumps({"error": "the button has no action"}))
                    return 1
                if not action.do_action(0):
                    print(json.dumps({"error": "the button's action failed"}))
                    return 1
                pressed = options.press
            print(
                json.dumps(
                    {
                        "label": label,
                        "buttons": [name for name, _, _ in buttons],
                        "focused": [name for name, _, focused in buttons if focused],
                        "extents": {name: extents(node) for name, node, _ in buttons},
                        "pressed": pressed,
                    }
                )
            )
            return 0
        if time.monotonic() >= deadline:
            print(
                json.dumps(
                    {
                        "error": "timed out",
                        "labels": labels,
                        "buttons": [name for name, _, _ in buttons],
                    }
                )
            )
            return 1
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


if __name__ == "__main__":
    sys.exit(main())
