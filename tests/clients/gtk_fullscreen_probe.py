#!/usr/bin/env python3
"""A fullscreen GTK3 window for the GNOME (Mutter) suite, run with GDK_BACKEND=wayland.

Fullscreen, so its own coordinates are the screen's. It paints a white background with a red
patch at (200, 300) 200x100 and a blue one at (1500, 800) 160x120 (the suite's RED_PATCH and
BLUE_PATCH), and holds a text entry at the top left that has the keyboard focus.

Prints one JSON line per event, flushed: {"drawn": true} after the first frame it drew
fullscreen, {"click": BUTTON, "x": X, "y": Y} for each button press (screen coordinates), and
{"text": TEXT} for each change of the entry's text.
"""

import json
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

RED = (200, 300, 200, 100)
BLUE = (1500, 800, 160, 120)


def say(value):
    print(json.dumps(value), flush=True)


win = Gtk.Window(title=sys.argv[1])
css = Gtk.CssProvider()
css.load_from_data(
    b"window, #page { background-color: #ffffff; background-image: none; }"
    b" #red { background-color: #ff0000; } #blue { background-color: #0000ff; }"
)
Gtk.StyleContext.add_provider_for_screen(
    Gdk.Screen.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_USER
)

# An event box over the whole window takes the presses; a fixed layout places the patches at
# window (= screen) coordinates.
page = Gtk.EventBox()
page.set_name("page")
page.add_events(Gdk.EventMask.BUTTON_PRESS_MASK)
layout = Gtk.Fixed()
page.add(layout)
win.add(page)

for name, (x, y, w, h) in (("red", RED), ("blue", BLUE)):
    patch = Gtk.EventBox()
    patch.set_name(name)
    patch.set_size_request(w, h)
    layout.put(patch, x, y)

entry = Gtk.Entry()
entry.set_width_chars(40)
entry.connect("changed", lambda e: say({"text": e.get_text()}))
layout.put(entry, 0, 0)

drawn = []


fullscreen = []


def state_changed(_win, event):
    if event.new_window_state & Gdk.WindowState.FULLSCREEN:
        fullscreen.append(True)
    return False


def painted(_clock):
    if not drawn and fullscreen and page.get_allocated_width() >= 1920:
        drawn.append(True)
        say({"drawn": True})


def press(widget, event):
    if event.type == Gdk.EventType.BUTTON_PRESS:
        x, y = widget.translate_coordinates(win, int(event.x), int(event.y))
        say({"click": event.button, "x": x, "y": y})
    return False


win.connect("realize", lambda w: w.get_frame_clock().connect("after-paint", painted))
page.connect("button-press-event", press)
win.connect("window-state-event", state_changed)
win.connect("destroy", Gtk.main_quit)
win.fullscreen()
win.show_all()
entry.grab_focus()
Gtk.main()
