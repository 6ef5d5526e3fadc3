#!/usr/bin/env python3
"""A small GTK3 app for the ax surface suite: known widgets whose effects it reports on stdout.

Prints one line per event, flushed: `ready`, `clicked N`, `entry=<text>`, `check=True|False`,
`dialog opened`, `dialog closed`. The suite reads these to observe effects independently of
AT-SPI.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


def say(line):
    print(line, flush=True)


class App:
    def __init__(self, title):
        self.clicks = 0
        self.dialog = None
        win = Gtk.Window(title=title)
        win.set_default_size(420, 320)
        win.connect("destroy", Gtk.main_quit)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        win.add(box)

        self.status = Gtk.Label(label="Not clicked")
        box.pack_start(self.status, False, False, 0)

        hello = Gtk.Button(label="Say Hello")
        hello.connect("clicked", self.on_hello)
        box.pack_start(hello, False, False, 0)

        self.entry = Gtk.Entry()
        self.entry.get_accessible().set_name("Your name")
        box.pack_start(self.entry, False, False, 0)

        show = Gtk.Button(label="Print Entry")
        show.connect("clicked", lambda _b: say("entry=" + self.entry.get_text()))
        box.pack_start(show, False, False, 0)

        check = Gtk.CheckButton(label="Dark mode")
        check.connect("toggled", lambda b: say("check=%s" % b.get_active()))
        box.pack_start(check, False, False, 0)

        opener = Gtk.Button(label="Open Dialog")
        opener.connect("clicked", self.on_open)
        box.pack_start(opener, False, False, 0)

        # Two buttons with one name, for ambiguous selectors.
        row = Gtk.Box(spacing=6)
        for _ in range(2):
            dup = Gtk.Button(label="Duplicate")
            dup.connect("clicked", lambda _b: say("duplicate"))
            row.pack_start(dup, False, False, 0)
        box.pack_start(row, False, False, 0)

        win.show_all()
        self.window = win
        GLib.idle_add(lambda: say("ready") and False)

    def on_hello(self, _button):
        self.clicks += 1
        self.status.set_text("Clicked %d times" % self.clicks)
        say("clicked %d" % self.clicks)

    def on_open(self, _button):
        if self.dialog is not None:
            return
        dialog = Gtk.Dialog(title="Confirm", transient_for=self.window, modal=False)
        dialog.get_content_area().add(Gtk.Label(label="Are you sure?"))
        close = dialog.add_button("Close Dialog", Gtk.ResponseType.CLOSE)
        close.get_accessible().set_name("Close Dialog")
        dialog.connect("response", self.on_close)
        dialog.show_all()
        self.dialog = dialog
        say("dialog opened")

    def on_close(self, dialog, _response):
        dialog.destroy()
        self.dialog = None
        say("dialog closed")


if __name__ == "__main__":
    App(sys.argv[1] if len(sys.argv) > 1 else "Computer Test App")
    Gtk.main()
