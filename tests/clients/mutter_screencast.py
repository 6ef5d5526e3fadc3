#!/usr/bin/env python3
"""A screen cast of Mutter's primary monitor, for independent captures (gst-launch's
pipewiresrc) in the GNOME suite and bench: starts a RemoteDesktop session with a ScreenCast
stream through Mutter's own D-Bus API, prints the stream's PipeWire node id on stdout, and keeps
the session until stdin closes (Mutter ends a session whose D-Bus client has gone)."""

import sys
import threading

from gi.repository import Gio, GLib

BUS = Gio.bus_get_sync(Gio.BusType.SESSION)
RD = "org.gnome.Mutter.RemoteDesktop"
SC = "org.gnome.Mutter.ScreenCast"


def call(name, path, iface, method, args=None, reply=None):
    kind = GLib.VariantType(reply) if reply else None
    return BUS.call_sync(name, path, iface, method, args, kind, 0, 5000, None)


session = call(RD, "/org/gnome/Mutter/RemoteDesktop", RD, "CreateSession", reply="(o)")[0]
session_id = call(
    RD,
    session,
    "org.freedesktop.DBus.Properties",
    "Get",
    GLib.Variant("(ss)", (RD + ".Session", "SessionId")),
    "(v)",
)[0]
options = {"remote-desktop-session-id": GLib.Variant("s", session_id)}
cast = call(
    SC, "/org/gnome/Mutter/ScreenCast", SC, "CreateSession", GLib.Variant("(a{sv})", (options,)), "(o)"
)[0]
stream = call(
    SC, cast, SC + ".Session", "RecordMonitor", GLib.Variant("(sa{sv})", ("", {})), "(o)"
)[0]
loop = GLib.MainLoop()


def added(_conn, _sender, _path, _iface, _signal, params):
    print(params[0], flush=True)


BUS.signal_subscribe(SC, SC + ".Stream", "PipeWireStreamAdded", stream, None, 0, added)
call(RD, session, RD + ".Session", "Start")
threading.Thread(target=lambda: (sys.stdin.read(), GLib.idle_add(loop.quit)), daemon=True).start()
loop.run()
