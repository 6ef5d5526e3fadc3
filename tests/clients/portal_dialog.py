#!/usr/bin/env python3
"""An independent AT-SPI client (libatspi through gi.repository.Atspi) that answers
xdg-desktop-portal-gnome's remote-desktop dialog the way a person would: it waits for the
dialog of the process PID, optionally ticks "Allow remote interaction", then presses Share or
Cancel through the buttons' accessible actions.

Usage: portal_dialog.py PID share|cancel|look [--allow-input] [--timeout SECONDS]

Prints one JSON object: {"showing": true, "answered": "share"|"cancel"|null,
"interaction": true|false|null} or, when the dialog never showed within the timeout (or at
once, for `look`), {"showing": false} with exit status 1 (0 for `look`).
"""

import argparse
import json
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


def dialog(pid):
    """The dialog's share and cancel buttons and interaction check box, if it shows."""
    app = find_app(pid)
    if app is None:
        return None
    app.clear_cache()
    found = {}
    for node in nodes(app):
        role = node.get_role()
        name = node.get_name() or ""
        if role == Atspi.Role.FRAME and name == "Remote desktop":
            found["frame"] = node
        elif role == Atspi.Role.PUSH_BUTTON and name.endswith("Share"):
            found["share"] = node
        elif role == Atspi.Role.PUSH_BUTTON and name.endswith("Cancel"):
            found["cancel"] = node
        elif role == Atspi.Role.CHECK_BOX and "remote interaction" in name:
            found["interaction"] = node
    if "frame" in found and "share" in found and "cancel" in found:
        return found
    return None


def press(node):
    action = node.get_action_iface()
    return action is not None and action.get_n_actions() > 0 and action.do_action(0)


def checked(node):
    return node.get_state_set().contains(Atspi.StateType.CHECKED)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pid", type=int)
    parser.add_argument("answer", choices=["share", "cancel", "look"])
    parser.add_argument("--allow-input", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0)
    options = parser.parse_args()

    deadline = time.monotonic() + (0 if options.answer == "look" else options.timeout)
    pause = 0.02
    while True:
        try:
            found = dialog(options.pid)
        except GLib.Error:
            found = None
        if found is not None:
            break
        if time.monotonic() >= deadline:
            print(json.dumps({"showing": False}))
            return 0 if options.answer == "look" else 1
        time.sleep(pause)
        pause = min(pause * 2, 0.2)

    interaction = None
    if "interaction" in found:
        box = found["interaction"]
        if options.allow_input and not checked(box):
            press(box)
            # The box's state follows its action; wait for it (bounded).
            for _ in range(50):
                if checked(box):
                    break
                time.sleep(0.02)
        interaction = checked(box)
    answered = None
    if options.answer in ("share", "cancel"):
        if not press(found[options.answer]):
            print(json.dumps({"showing": True, "error": "the button's action failed"}))
            return 1
        answered = options.answer
    print(json.dumps({"showing": True, "answered": answered, "interaction": interaction}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
