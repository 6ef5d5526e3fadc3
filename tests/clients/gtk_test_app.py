#!/usr/bin/env python3
"""A small GTK3 app for the ax surface suite: known widgets whose effects it reports on stdout.

Prints one line per event, flushed: `ready` (once its window is mapped), `clicked N`,
`entry=<text>`, `check=True|False`, `dialog opened`, `dialog closed`. The suite reads these to
observe effects independently of AT-SPI.

With `--more` after the title it also shows the widgets the other actions need, and reports:
`activated=<text>` (Enter in the entry), `expanded=True|False` (an expander),
`selected=<row>` (a list box), `row expanded=<row>` / `row collapsed=<row>` (a tree view),
`volume=<n>` (a spin button), `scrolled` (a short scrolled list moved its view).

With `--effects` it also shows an insensitive button `Unavailable` (a click on it does
nothing, for the read-back of acts that changed nothing).

With `--reports N` it also opens N windows titled `Report 1`…`Report N`, each listing
`REPORT_LINES` labelled lines: a many-window app for investigations that read whole trees.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


REPORT_LINES = 200


def say(line):
    print(line, flush=True)


class App:
    def __init__(self, title, more=False, reports=0, effects=False):
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

        if effects:
            unavailable = Gtk.Button(label="Unavailable")
            unavailable.connect("clicked", lambda _b: say("unavailable clicked"))
            unavailable.set_sensitive(False)
            box.pack_start(unavailable, False, False, 0)

        if more:
            self.add_more(box)

        # `ready` only once the display has mapped the window: a test that ends and kills the
        # app then never leaves a map request behind, to land (and take the focus) in the next.
        def mapped(_window, _event):
            win.disconnect(self.on_mapped)
            GLib.idle_add(lambda: say("ready") and False)
            return False

        self.on_mapped = win.connect("map-event", mapped)
        win.show_all()
        self.window = win
        self.reports = [self.open_report(n) for n in range(1, reports + 1)]

    def open_report(self, n):
        report = Gtk.Window(title="Report %d" % n)
        report.set_default_size(300, 200)
        scrolled = Gtk.ScrolledWindow()
        lines = Gtk.ListBox()
        for line in range(1, REPORT_LINES + 1):
            state = "failed" if (n * line) % 17 == 0 else "passed"
            lines.add(
                Gtk.Label(
                    label="Report %d, check %d: %s in %d ms on runner linux-x64-%d (cache %s)"
                    % (n, line, state, 3 + (n * 7 + line * 13) % 400, line % 8, "hit" if line % 3 else "miss")
                )
            )
        scrolled.add(lines)
        report.add(scrolled)
        report.show_all()
        return report

    def add_more(self, box):
        self.entry.connect("activate", lambda e: say("activated=" + e.get_text()))

        expander = Gtk.Expander(label="Details")
        expander.add(Gtk.Label(label="Hidden details"))
        expander.connect(
            "notify::expanded", lambda e, _p: say("expanded=%s" % e.get_expanded())
        )
        box.pack_start(expander, False, False, 0)

        fruits = Gtk.ListBox()
        fruits.get_accessible().set_name("Fruits")
        for name in ("Apple", "Banana", "Cherry"):
            row = Gtk.ListBoxRow()
            row.add(Gtk.Label(label=name))
            row.get_accessible().set_name(name)
            fruits.add(row)
        fruits.connect(
            "row-selected",
            lambda _l, row: row is not None
            and say("selected=" + row.get_accessible().get_name()),
        )
        box.pack_start(fruits, False, False, 0)

        store = Gtk.TreeStore(str)
        citrus = store.append(None, ["Citrus"])
        for name in ("Lemon", "Lime"):
            store.append(citrus, [name])
        store.append(None, ["Berries"])
        tree = Gtk.TreeView(model=store)
        tree.get_accessible().set_name("Kinds")
        tree.append_column(Gtk.TreeViewColumn("Kind", Gtk.CellRendererText(), text=0))
        tree.connect(
            "row-expanded", lambda _t, it, _p: say("row expanded=" + store[it][0])
        )
        tree.connect(
            "row-collapsed", lambda _t, it, _p: say("row collapsed=" + store[it][0])
        )
        box.pack_start(tree, False, False, 0)

        volume = Gtk.SpinButton.new_with_range(0, 100, 1)
        volume.get_accessible().set_name("Volume")
        volume.connect("value-changed", lambda s: say("volume=%d" % s.get_value_as_int()))
        box.pack_start(volume, False, False, 0)

        # A short view on a long list: the last items start out of view.
        scrolled = Gtk.ScrolledWindow()
        scrolled.set_size_request(-1, 80)
        scrolled.get_accessible().set_name("Long list")
        items = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
        for n in range(1, 31):
            items.pack_start(Gtk.Button(label="Item %d" % n), False, False, 0)
        scrolled.add(items)
        scrolled.get_vadjustment().connect("value-changed", lambda _a: say("scrolled"))
        box.pack_start(scrolled, False, False, 0)

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
    App(
        sys.argv[1] if len(sys.argv) > 1 else "Computer Test App",
        more="--more" in sys.argv[2:],
        reports=int(sys.argv[sys.argv.index("--reports") + 1]) if "--reports" in sys.argv else 0,
        effects="--effects" in sys.argv[2:],
    )
    Gtk.main()
