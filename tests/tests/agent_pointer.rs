//! The agent's own pointer and keyboard on X11 (`[gui] own_pointer = true`): the daemon's
//! XInput2 master pair "computer-agent". The agent's clicks and typed text land in its window
//! while the person's pointer and keyboard focus, read from outside with xdotool, stay put and
//! the person's own typing goes on undisturbed; the person watch still pauses on the person's
//! input and not on the agent's; the pair is reused after the daemon is killed, remade when
//! left unusable and removed when the daemon stops; `doctor` says which mode is in force.

use std::sync::mpsc;
use std::time::Duration;

use computer_tests::desktop::{App, Desktop, TestDesktop, gi_python};
use computer_tests::{Daemon, try_wait_for, wait_for};
use serde_json::{Value, json};

/// A GTK window: its upper part prints each button press (root coordinates and server time,
/// which tells a press from GTK's repeat of it), its entry prints its text on Return; Ctrl+D
/// opens a dialog (transient for the window) whose entry prints its text on Return and closes.
const APP: &str = r#"
import json, sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk, GLib
title, x, y = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def say(obj):
    print(json.dumps(obj), flush=True)
win = Gtk.Window(title=title)
win.set_default_size(400, 300)
win.move(x, y)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
area = Gtk.EventBox()
area.connect("button-press-event", lambda w, ev: say(
    {"click": ev.button, "x": int(ev.x_root), "y": int(ev.y_root), "time": ev.time}))
entry = Gtk.Entry()
entry.connect("activate", lambda e: say({"text": e.get_text()}))
def open_dialog():
    dialog = Gtk.Dialog(title=title + " dialog", transient_for=win, modal=True)
    field = Gtk.Entry()
    def done(field):
        say({"dialog_text": field.get_text()})
        dialog.destroy()
    field.connect("activate", done)
    dialog.get_content_area().add(field)
    dialog.connect("map-event", lambda *_: say({"dialog": "shown"}) and False)
    dialog.show_all()
keys = Gtk.AccelGroup()
keys.connect(Gdk.keyval_from_name("d"), Gdk.ModifierType.CONTROL_MASK, 0,
             lambda *_: open_dialog() or True)
win.add_accel_group(keys)
box.pack_start(area, True, True, 0)
box.pack_start(entry, False, False, 0)
win.add(box)
def mapped(*_):
    win.disconnect(handler)
    GLib.idle_add(lambda: say({"ready": True}) and False)
handler = win.connect("map-event", mapped)
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"#;

const OWN_POINTER: &str = "[gui]\nown_pointer = true\n";

/// The agent's window and what it printed.
struct AgentWindow {
    _app: App,
    lines: mpsc::Receiver<Value>,
}

impl AgentWindow {
    fn launch(desktop: &Desktop, title: &str, x: i32, y: i32) -> AgentWindow {
        let python = gi_python();
        let (x, y) = (x.to_string(), y.to_string());
        let mut app = desktop.launch("env", &[&python, "-c", APP, title, &x, &y]);
        let lines = app.json_lines();
        let window = AgentWindow { _app: app, lines };
        window.next_with("ready");
        window
    }

    /// The next printed line that has `key` (bounded).
    fn next_with(&self, key: &str) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("the agent's window printed no {key:?} line"));
            if line.get(key).is_some() {
                return line;
            }
        }
    }
}

/// `program args` on `desktop`, its stdout.
fn tool(desktop: &Desktop, program: &str, args: &[&str]) -> String {
    desktop.tool_output(program, args)
}

/// The person's pointer (the core pointer, as xdotool reads it): "x:.. y:..".
fn persons_pointer(desktop: &Desktop) -> String {
    let location = tool(desktop, "xdotool", &["getmouselocation"]);
    location
        .split(" screen")
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The person's keyboard focus (the core keyboard's, as xdotool reads it).
fn persons_focus(desktop: &Desktop) -> String {
    tool(desktop, "xdotool", &["getwindowfocus"])
}

async fn gui(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon.call_once("gui", command, args).await
}

async fn gui_ok(daemon: &Daemon, command: &str, args: Value) -> Value {
    let out = gui(daemon, command, args.clone()).await;
    assert_eq!(out["ok"], true, "gui {command} {args}: {out}");
    out
}

/// The listed window titled `title`: (id, x, y, width, height).
async fn listed(daemon: &Daemon, title: &str) -> (u64, i64, i64, i64, i64) {
    let windows = gui_ok(daemon, "windows", json!({})).await;
    let w = windows["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["title"] == title)
        .unwrap_or_else(|| panic!("no window {title:?} in {windows}"))
        .clone();
    let n = |k: &str| w[k].as_i64().unwrap();
    (
        w["id"].as_u64().unwrap(),
        n("x"),
        n("y"),
        n("width"),
        n("height"),
    )
}

/// The agent's master pointer's id, if the pair is there.
fn agent_pointer_id(desktop: &Desktop) -> Option<String> {
    let out = desktop
        .command("xinput")
        .args(["list", "--id-only", "computer-agent pointer"])
        .output()
        .expect("xinput");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_clicks_and_typing_land_while_the_persons_pointer_focus_and_typing_stay() {
    let desktop = Desktop::shared();
    let daemon = Daemon::start_on_desktop(OWN_POINTER);
    let agents = AgentWindow::launch(desktop, "Agent desk", 620, 120);
    let (_terminal, person, typed) = persons_terminal(desktop, "Person desk");
    tool(desktop, "xdotool", &["windowactivate", "--sync", &person]);
    tool(desktop, "xdotool", &["mousemove", "150", "200"]);
    let (pointer, focus) = (persons_pointer(desktop), persons_focus(desktop));
    assert_eq!(focus, person, "the person works in the terminal");

    // The agent focuses its window: its keyboard's focus, not the person's.
    let (window, x, y, width, height) = listed(&daemon, "Agent desk").await;
    let focused = gui_ok(&daemon, "focus", json!({"window": window})).await;
    assert_eq!(focused["focused"], true, "{focused}");
    assert_eq!(
        persons_focus(desktop),
        focus,
        "gui focus left the person's focus"
    );

    // Clicks land in the agent's window, each seen by the app once; the person's pointer and
    // focus do not move.
    let mut seen_times = std::collections::HashSet::new();
    for round in 0..100 {
        let (cx, cy) = (x + 20 + (round % 10) * 30, y + 20 + (round / 10) * 20);
        gui_ok(&daemon, "click", json!({"x": cx, "y": cy})).await;
        let click = loop {
            let click = agents.next_with("click");
            if seen_times.insert(click["time"].clone()) {
                break click;
            }
        };
        assert_eq!(
            (click["x"].as_i64(), click["y"].as_i64()),
            (Some(cx), Some(cy))
        );
        assert_eq!(
            persons_pointer(desktop),
            pointer,
            "round {round}: the person's pointer"
        );
        assert_eq!(
            persons_focus(desktop),
            focus,
            "round {round}: the person's focus"
        );
    }
    let cursor = gui_ok(&daemon, "cursor", json!({})).await;
    assert_eq!(
        (cursor["x"].as_i64(), cursor["y"].as_i64()),
        (Some(x + 20 + 9 * 30), Some(y + 20 + 9 * 20)),
        "gui cursor reads the agent's pointer"
    );

    // The agent types into its entry while the person types into the terminal.
    gui_ok(
        &daemon,
        "click",
        json!({"x": x + width / 2, "y": y + height - 14}),
    )
    .await;
    let words = "the persons own words 42";
    let person_types = {
        let mut command = desktop.command("xdotool");
        command.args(["type", "--delay", "15", words]);
        std::thread::spawn(move || command.status().expect("xdotool type").success())
    };
    let text = "Agent typed, é and ✓ too";
    for round in 0..10 {
        let typed = gui_ok(&daemon, "type", json!({"text": format!("{round}")})).await;
        assert_eq!(typed["window"]["id"], json!(window), "{typed}");
    }
    gui_ok(&daemon, "type", json!({"text": text})).await;
    gui_ok(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(
        agents.next_with("text")["text"],
        format!("0123456789{text}"),
        "the agent's text, whole and alone"
    );
    assert!(person_types.join().unwrap(), "the person's xdotool type");
    let persons_text = try_wait_for(Duration::from_secs(10), || {
        let got = std::fs::read_to_string(typed.path()).ok()?;
        (got == words).then_some(got)
    });
    assert_eq!(
        persons_text.as_deref(),
        Some(words),
        "the person's typing reached the terminal whole: {:?}",
        std::fs::read_to_string(typed.path())
    );
    assert_eq!(
        persons_pointer(desktop),
        pointer,
        "the person's pointer at the end"
    );
    assert_eq!(
        persons_focus(desktop),
        focus,
        "the person's focus at the end"
    );
}

/// The person's terminal titled `title`, where what the person types lands in a file, byte by
/// byte: the app, its window id and the file.
fn persons_terminal(desktop: &Desktop, title: &str) -> (App, String, tempfile::NamedTempFile) {
    let typed = tempfile::NamedTempFile::new().unwrap();
    let sink = format!("stty -icanon -echo; exec cat > {}", typed.path().display());
    let terminal = desktop.launch(
        "xterm",
        &[
            "-title",
            title,
            "-geometry",
            "60x12+20+120",
            "-e",
            "sh",
            "-c",
            &sink,
        ],
    );
    let pattern = format!("^{title}$");
    let window = wait_for("the person's terminal", Duration::from_secs(20), || {
        let out = desktop
            .command("xdotool")
            .args(["search", "--onlyvisible", "--name", &pattern])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .map(str::to_string)
    });
    (terminal, window, typed)
}

/// A dialog the agent's app opens takes the agent's keyboard, as the window manager gives a
/// dialog the person's: what the agent types goes into the dialog, not the window behind it;
/// once the dialog closes, the agent's keys go back to its window. The person's focus and
/// pointer stay where they were throughout.
#[tokio::test(flavor = "multi_thread")]
async fn the_agents_keyboard_follows_its_apps_dialog_and_comes_back() {
    // Its own desktop: the person's focus and the windows are the other tests' on the shared one.
    let private = Desktop::private();
    let desktop = &private;
    let daemon = desktop.start_daemon(OWN_POINTER);
    let agents = AgentWindow::launch(desktop, "Agent dialogs", 640, 160);
    let (_terminal, person, _typed) = persons_terminal(desktop, "Person dialog desk");
    tool(desktop, "xdotool", &["windowactivate", "--sync", &person]);
    tool(desktop, "xdotool", &["mousemove", "170", "210"]);
    let (pointer, focus) = (persons_pointer(desktop), persons_focus(desktop));

    let (window, x, y, width, height) = listed(&daemon, "Agent dialogs").await;
    // The entry, clicked: the agent's keyboard is on the agent's window.
    gui_ok(
        &daemon,
        "click",
        json!({"x": x + width / 2, "y": y + height - 14}),
    )
    .await;
    let opened = gui_ok(&daemon, "key", json!({"combo": "ctrl+d"})).await;
    assert_eq!(opened["window"]["id"], json!(window), "{opened}");
    agents.next_with("dialog");
    let typed = gui_ok(&daemon, "type", json!({"text": "into the dialog"})).await;
    assert_ne!(
        typed["window"]["id"],
        json!(window),
        "the keys went to the dialog, not the window behind it: {typed}"
    );
    assert_eq!(typed["window"]["title"], "Agent dialogs dialog", "{typed}");
    gui_ok(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(
        agents.next_with("dialog_text")["dialog_text"],
        "into the dialog"
    );

    // The dialog closed: the keys go back to the window it was opened for.
    let typed = gui_ok(&daemon, "type", json!({"text": "back in the window"})).await;
    assert_eq!(typed["window"]["id"], json!(window), "{typed}");
    gui_ok(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(agents.next_with("text")["text"], "back in the window");
    assert_eq!(persons_focus(desktop), focus, "the person's focus");
    assert_eq!(persons_pointer(desktop), pointer, "the person's pointer");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_person_watch_pauses_on_the_persons_input_and_not_on_the_agents() {
    let desktop = Desktop::private_with_a_person();
    let daemon = desktop.start_daemon(&format!("{OWN_POINTER}person_quiet_ms = 3000\n"));
    daemon.wait_for_log("watching for the person's input");
    // The agent's own devices come and go unwatched; its acts never pause it.
    for round in 0..10 {
        let out = gui(&daemon, "click", json!({"x": 300 + round * 7, "y": 300})).await;
        assert_eq!(
            out["ok"], true,
            "round {round}: the agent's own input: {out}"
        );
    }
    let log = daemon.log_text();
    assert!(
        log.contains("name=computer-agent XTEST pointer persons=false"),
        "the agent's pointer is judged not the person's:\n{log}"
    );
    // The person's hand (the outer server's input, through Xephyr's own devices) pauses it.
    let mut person = desktop.person_command("xdotool");
    person.args(["mousemove", "120", "130"]);
    assert!(person.status().unwrap().success(), "the person's move");
    let refused = wait_for(
        "an act refused for the person's input",
        Duration::from_secs(10),
        || {
            let out = futures_block(gui(&daemon, "move", json!({"x": 400, "y": 400})));
            (out["error"]["code"] == "interrupted_by_person").then_some(out)
        },
    );
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(
        persons_pointer(&desktop),
        "x:120 y:130",
        "the person's pointer is where the person put it"
    );
}

fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pair_is_reused_after_a_crash_remade_when_broken_and_removed_at_stop() {
    let desktop = Desktop::private();
    let mut daemon = desktop.start_daemon(OWN_POINTER);
    let doctor = daemon.cli(&["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("input: the agent's own pointer and keyboard (XInput2 master"),
        "doctor says the mode: {}",
        doctor.stdout
    );
    assert_eq!(
        agent_pointer_id(&desktop),
        None,
        "no pair before the first input"
    );
    gui_ok(&daemon, "click", json!({"x": 5, "y": 5})).await;
    let made = agent_pointer_id(&desktop).expect("the pair, made at the first input");

    // Killed: the pair stays, and the restarted daemon takes it over.
    daemon.stop_with(libc::SIGKILL);
    assert_eq!(
        agent_pointer_id(&desktop),
        Some(made.clone()),
        "left by the crash"
    );
    daemon.restart();
    gui_ok(&daemon, "click", json!({"x": 6, "y": 6})).await;
    assert_eq!(
        agent_pointer_id(&desktop),
        Some(made.clone()),
        "reused, not remade"
    );
    assert!(
        daemon
            .log_text()
            .contains("found the agent's pointer and keyboard; using them"),
        "{}",
        daemon.log_text()
    );
    let masters = tool(&desktop, "xinput", &["list", "--name-only"]);
    assert_eq!(
        masters
            .lines()
            .filter(|l| *l == "computer-agent pointer")
            .count(),
        1,
        "one pair: {masters}"
    );

    // Stopped: the pair goes.
    daemon.stop_with(libc::SIGTERM);
    assert_eq!(agent_pointer_id(&desktop), None, "removed at stop");

    // One left disabled (its XTEST devices floating, then gone) is enabled, removed and made anew;
    // the X server lives on.
    tool(&desktop, "xinput", &["create-master", "computer-agent"]);
    tool(&desktop, "xinput", &["disable", "computer-agent pointer"]);
    daemon.restart();
    gui_ok(&daemon, "click", json!({"x": 7, "y": 7})).await;
    assert!(
        daemon
            .log_text()
            .contains("removing the agent's broken pointer and keyboard"),
        "{}",
        daemon.log_text()
    );
    let devices = tool(&desktop, "xinput", &["list", "--short"]);
    assert!(
        devices
            .lines()
            .any(|l| l.contains("computer-agent XTEST pointer") && l.contains("[slave  pointer")),
        "a whole pair again, its XTEST pointer attached: {devices}"
    );
    daemon.stop_with(libc::SIGTERM);
    assert_eq!(agent_pointer_id(&desktop), None, "removed at stop");

    // Without the key, the agent's own pair is the default, and doctor says so.
    let mut by_default = desktop.start_daemon("");
    let doctor = by_default.cli(&["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("input: the agent's own pointer and keyboard"),
        "doctor says the default mode: {}",
        doctor.stdout
    );
    by_default.stop_with(libc::SIGTERM);

    // With the key off, input is the person's pointer's, and doctor says so.
    let plain = desktop.start_daemon("[gui]\nown_pointer = false\n");
    let doctor = plain.cli(&["doctor"]);
    assert!(
        doctor.stdout.contains("[gui] own_pointer is off"),
        "doctor says the mode: {}",
        doctor.stdout
    );
    tool(&desktop, "xdotool", &["mousemove", "10", "10"]);
    gui_ok(&plain, "move", json!({"x": 40, "y": 50})).await;
    assert_eq!(
        persons_pointer(&desktop),
        "x:40 y:50",
        "the core pointer moved"
    );
    assert_eq!(agent_pointer_id(&desktop), None, "no pair made");
}

/// The absolute bounds `xwininfo` reports for a window: (x, y, width).
fn bounds(desktop: &Desktop, window: &str) -> (i64, i64, i64) {
    let (x, y, width, _) = desktop.xwininfo_bounds(window);
    (x, y, width)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_drag_moves_a_window_by_its_title_bar_and_not_the_persons_pointer() {
    // Its own desktop: the other tests' windows stay out of the drag's way.
    let desktop = Desktop::private();
    let daemon = desktop.start_daemon(OWN_POINTER);
    let _agents = AgentWindow::launch(&desktop, "Dragged desk", 300, 150);
    let window = tool(
        &desktop,
        "xdotool",
        &["search", "--onlyvisible", "--name", "^Dragged desk$"],
    );
    let top = wait_for(
        "the window manager to frame the window",
        Duration::from_secs(10),
        || {
            let out = tool(&desktop, "xprop", &["-id", &window, "_NET_FRAME_EXTENTS"]);
            let (_, values) = out.split_once(" = ")?;
            values.split(',').nth(2)?.trim().parse::<i64>().ok()
        },
    );
    tool(&desktop, "xdotool", &["mousemove", "900", "700"]);
    let pointer = persons_pointer(&desktop);
    let (x, y, w) = bounds(&desktop, &window);
    let from = (x + w / 2, y - top / 2);
    let to = (from.0 + 120, from.1 + 90);
    gui_ok(
        &daemon,
        "drag",
        json!({"from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1}),
    )
    .await;
    let moved = try_wait_for(Duration::from_secs(10), || {
        let (nx, ny, _) = bounds(&desktop, &window);
        ((nx, ny) == (x + 120, y + 90)).then_some(())
    });
    assert!(
        moved.is_some(),
        "the window moved with the agent's drag: from ({x},{y}) to {:?}",
        bounds(&desktop, &window)
    );
    assert_eq!(
        persons_pointer(&desktop),
        pointer,
        "the person's pointer stays"
    );
}
