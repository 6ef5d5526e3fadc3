//! Acts bound to what was seen, and the person taking the wheel, on a real headless X desktop
//! (Xvfb + openbox, GTK apps, AT-SPI): a click bound to a window listing is refused as `stale`
//! once the window moved or was covered, and reaches nothing; a stale ref after a dialog was
//! replaced; a click at a point read off a half-size screenshot lands on the widget there;
//! another agent's snapshot reads as unknown; and the person's own input (on a desktop served by
//! Xephyr inside a bare Xvfb, input sent to the outer server comes from Xephyr's own devices, as
//! a hand's on physical ones) pauses gui input while ax goes on, and stops a long `type` between
//! two keys (the keys the X server took counted from its raw events), while input an agent's run
//! sends through a master device of its own (`xinput create-master`) pauses nothing.

use std::sync::mpsc;
use std::time::Duration;

use computer_ipc::Client;
use computer_tests::desktop::{App, Desktop, TestApp, TestDesktop};
use computer_tests::{Daemon, structured, try_wait_for, wait_for};
use serde_json::{Value, json};

/// A white window with one blue button (`#target`, 80x40 at 240,180 inside the window) that
/// prints `{"clicked": "target"}`; a press elsewhere on the window prints its root point.
const APP: &str = r##"
import json, sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, Gdk
title, x, y = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def say(obj):
    print(json.dumps(obj), flush=True)
css = Gtk.CssProvider()
css.load_from_data(b"#target { background-color: #0000ff; background-image: none; border: none; box-shadow: none; } window { background-color: #ffffff; background-image: none; }")
Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, 800)
win = Gtk.Window(title=title)
win.set_default_size(400, 300)
win.move(x, y)
fixed = Gtk.Fixed()
target = Gtk.Button(label="")
target.set_name("target")
target.set_size_request(80, 40)
target.connect("clicked", lambda b: say({"clicked": "target"}))
fixed.put(target, 240, 180)
win.add(fixed)
win.add_events(Gdk.EventMask.BUTTON_PRESS_MASK)
win.connect("button-press-event", lambda w, ev: say({"pressed": "window", "x": int(ev.x_root), "y": int(ev.y_root)}))
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"##;

/// The test app and the JSON lines it prints.
struct Window {
    _app: App,
    lines: mpsc::Receiver<Value>,
    id: u64,
}

impl Window {
    async fn launch(daemon: &Daemon, title: &str, x: i32, y: i32) -> Window {
        Window::launch_on(Desktop::shared(), daemon, title, x, y).await
    }

    async fn launch_on(desktop: &Desktop, daemon: &Daemon, title: &str, x: i32, y: i32) -> Window {
        let mut app = desktop.launch(
            "env",
            &[
                "/usr/bin/python3",
                "-c",
                APP,
                title,
                &x.to_string(),
                &y.to_string(),
            ],
        );
        let lines = app.json_lines_without_repeats();
        let mut id = None;
        for _ in 0..200 {
            let listed = gui(daemon, "windows", json!({}), json!({})).await;
            if let Some(w) = listed["windows"]
                .as_array()
                .and_then(|ws| ws.iter().find(|w| w["title"] == title && w["width"] == 400))
            {
                id = w["id"].as_u64();
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Window {
            _app: app,
            lines,
            id: id.unwrap_or_else(|| panic!("{title} never listed")),
        }
    }

    /// The next line the app prints (bounded).
    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the app printed a line")
    }
}

/// Runs a call from a synchronous wait condition.
fn block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// The pointer, focus and stacking are one per desktop: the tests take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn call_as(client: &Client, surface: &str, command: &str, args: Value, c: Value) -> Value {
    let result = client
        .call_raw(json!({"surface": surface, "command": command, "args": args, "complications": c}))
        .await
        .expect("call");
    structured(&result)
}

async fn call(daemon: &Daemon, surface: &str, command: &str, args: Value, c: Value) -> Value {
    daemon
        .call_raw_once(
            json!({"surface": surface, "command": command, "args": args, "complications": c}),
        )
        .await
}

async fn gui(daemon: &Daemon, command: &str, args: Value, complications: Value) -> Value {
    call(daemon, "gui", command, args, complications).await
}

/// The window's entry in a `windows` reply.
fn entry(listed: &Value, id: u64) -> Value {
    listed["windows"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("window {id} not in {listed}"))
}

fn xdotool(args: &[&str]) {
    Desktop::shared().tool_output("xdotool", args);
}

/// Asserts a refusal with `code`, receipted: the result row names the code.
fn assert_refused(daemon: &Daemon, out: &Value, code: &str) {
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"]["code"], code, "{out}");
    let row = daemon.receipt_row(&out["receipt"], "result");
    assert!(row.to_string().contains(code), "{row}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_click_bound_to_a_listing_is_refused_once_its_window_moved_or_is_covered() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = Window::launch(&daemon, "seen-moved", 100, 100).await;
    let listed = gui(&daemon, "windows", json!({}), json!({})).await;
    let snapshot = listed["snapshot"]
        .as_str()
        .expect("a snapshot id")
        .to_string();
    let was = entry(&listed, app.id);
    let (x, y) = (was["x"].as_i64().unwrap(), was["y"].as_i64().unwrap());

    // The window moves a little: the point aimed at still lies on it.
    xdotool(&[
        "windowmove",
        &app.id.to_string(),
        &(x + 40).to_string(),
        &(y + 30).to_string(),
    ]);
    wait_for("the window to move", Duration::from_secs(10), || {
        let now = entry(
            &block(gui(&daemon, "windows", json!({}), json!({}))),
            app.id,
        );
        (now["x"] != was["x"]).then_some(())
    });
    let aimed = (x + 60, y + 60);
    let out = gui(
        &daemon,
        "click",
        json!({"x": aimed.0, "y": aimed.1}),
        json!({"seen": snapshot}),
    )
    .await;
    assert_refused(&daemon, &out, "stale");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "window {} \"seen-moved\" moved from {x},{y}",
            app.id
        )),
        "{message}"
    );
    assert!(message.contains(&snapshot), "{message}");
    assert_eq!(out["error"]["path"], "complications.seen");

    // Bound to a fresh listing, a click at another point lands, and it is the first press the
    // app saw: the refused one sent nothing.
    let fresh = gui(&daemon, "windows", json!({}), json!({})).await;
    let control = (aimed.0 + 15, aimed.1 + 10);
    let out = gui(
        &daemon,
        "click",
        json!({"x": control.0, "y": control.1}),
        json!({"seen": fresh["snapshot"]}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    let first = app.next();
    assert_eq!(
        (first["x"].as_i64(), first["y"].as_i64()),
        (Some(control.0), Some(control.1)),
        "the refused click reached the app: {first}"
    );

    // Another window opens over the point: the listing from before it no longer holds.
    let before = gui(&daemon, "windows", json!({}), json!({})).await;
    let cover = Window::launch(&daemon, "seen-cover", (x + 20) as i32, (y + 20) as i32).await;
    let out = gui(
        &daemon,
        "click",
        json!({"x": control.0, "y": control.1}),
        json!({"seen": before["snapshot"]}),
    )
    .await;
    assert_refused(&daemon, &out, "stale");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("is covered at {},{}", control.0, control.1))
            && message.contains(&format!("window {} \"seen-cover\"", cover.id)),
        "{message}"
    );

    // Keys bound to the listing from before: the focus moved to the new window since (the
    // agent's keyboard, which the window manager's focus of a new window does not move, is
    // moved there by the agent).
    let focused = gui(&daemon, "focus", json!({"window": cover.id}), json!({})).await;
    assert_eq!(focused["focused"], true, "{focused}");
    let out = gui(
        &daemon,
        "key",
        json!({"combo": "Escape"}),
        json!({"seen": before["snapshot"]}),
    )
    .await;
    assert_refused(&daemon, &out, "stale");
    let message = out["error"]["message"].as_str().unwrap();
    // The click before focused the first window (click to focus), unless the window manager
    // had not caught up when the listing was taken.
    assert!(
        message.contains(&format!(
            "the focus moved from window {} \"seen-moved\" to window {} \"seen-cover\"",
            app.id, cover.id
        )) || message.contains(&format!(
            "no window had the focus, and window {} \"seen-cover\" has it now",
            cover.id
        )),
        "{message}"
    );

    // Without `seen`, acts behave as before: the click lands on whatever is there.
    let out = gui(
        &daemon,
        "click",
        json!({"x": control.0, "y": control.1}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    let pressed = cover.next();
    assert_eq!(pressed["x"].as_i64(), Some(control.0), "{pressed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_click_at_a_point_of_a_half_size_screenshot_lands_on_that_widget() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = Window::launch(&daemon, "seen-half", 300, 200).await;
    // The window at half size: 200 pixels for its 400.
    let shot = wait_for(
        "the blue button in a half-size screenshot",
        Duration::from_secs(10),
        || {
            let shot = block(gui(
                &daemon,
                "screenshot",
                json!({"window": app.id, "max_dim": 200}),
                json!({}),
            ));
            let image = image::load_from_memory(&std::fs::read(shot["path"].as_str()?).ok()?)
                .ok()?
                .to_rgb8();
            let blue: Vec<(u32, u32)> = image
                .enumerate_pixels()
                .filter(|(_, _, p)| p.0 == [0, 0, 255])
                .map(|(u, v, _)| (u, v))
                .collect();
            (blue.len() > 100).then_some((shot, blue))
        },
    );
    let (shot, blue) = shot;
    assert_eq!(shot["scale"], 2.0, "{shot}");
    assert_eq!(shot["width"], 200, "{shot}");
    // The button's middle, in the image's own pixels.
    let n = blue.len() as u32;
    let u = blue.iter().map(|p| p.0).sum::<u32>() / n;
    let v = blue.iter().map(|p| p.1).sum::<u32>() / n;
    let out = gui(
        &daemon,
        "click",
        json!({"x": u, "y": v}),
        json!({"seen": shot["snapshot"]}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    // The reply gives the screen point the pixel maps to: origin + pixel x scale.
    let origin = (
        shot["origin_x"].as_i64().unwrap(),
        shot["origin_y"].as_i64().unwrap(),
    );
    assert_eq!(
        (out["x"].as_i64(), out["y"].as_i64()),
        (
            Some(origin.0 + 2 * i64::from(u) + 1),
            Some(origin.1 + 2 * i64::from(v) + 1)
        ),
        "{out}"
    );
    assert_eq!(app.next(), json!({"clicked": "target"}));
    // The intent receipt keeps the args as given and says, as an approver is shown, the screen
    // point and the binding.
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    let said = intent.to_string();
    assert!(
        said.contains(&format!("at ({},{})", out["x"], out["y"]))
            && said.contains(&format!(
                "only if its target is as snapshot {} saw it",
                shot["snapshot"].as_str().unwrap()
            )),
        "{intent}"
    );

    // A pixel off the image is refused, naming the field and the image's size.
    let out = gui(
        &daemon,
        "click",
        json!({"x": 200, "y": 10}),
        json!({"seen": shot["snapshot"]}),
    )
    .await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert_eq!(out["error"]["path"], "args.x", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("200x150"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ref_bound_to_a_find_is_stale_once_its_dialog_was_replaced() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("seen-ax-dialog");
    let pid = app.pid();
    let ax = |command: &'static str, args: Value, c: Value| call(&daemon, "ax", command, args, c);
    let close = "dialog \"Confirm\" > button \"Close Dialog\"";
    let open_dialog = async |times: usize| {
        let out = ax(
            "act",
            json!({"app": pid, "selector": "button \"Open Dialog\"", "action": "press"}),
            json!({}),
        )
        .await;
        assert_eq!(out["ok"], true, "{out}");
        wait_for("the dialog to open", Duration::from_secs(10), || {
            (app.lines_starting("dialog opened").len() == times).then_some(())
        });
        let out = ax(
            "wait",
            json!({"app": pid, "selector": close, "timeout_ms": 10000}),
            json!({}),
        )
        .await;
        assert_eq!(out["met"], true, "{out}");
    };
    let find_close = async || {
        let found = ax("find", json!({"app": pid, "selector": close}), json!({})).await;
        let line = found["matches"].as_str().expect("matches").to_string();
        let inner = line.trim_start().trim_start_matches('[');
        let r: u64 = inner[..inner.find(']').unwrap()].parse().unwrap();
        (
            r,
            found["snapshot"].as_str().expect("a snapshot").to_string(),
        )
    };

    open_dialog(1).await;
    let (r, snapshot) = find_close().await;
    // The dialog closes and a new one opens in its place.
    let out = ax(
        "act",
        json!({"app": pid, "selector": close, "action": "press"}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    wait_for("the dialog to close", Duration::from_secs(10), || {
        (app.lines_starting("dialog closed").len() == 1).then_some(())
    });
    open_dialog(2).await;

    // Bound to the first find, the ref and the selector are both refused.
    let out = ax(
        "act",
        json!({"ref": r, "action": "press"}),
        json!({"seen": snapshot}),
    )
    .await;
    assert_refused(&daemon, &out, "stale");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("[{r}] button \"Close Dialog\" is gone")),
        "{message}"
    );
    let out = ax(
        "act",
        json!({"app": pid, "selector": close, "action": "press"}),
        json!({"seen": snapshot}),
    )
    .await;
    assert_refused(&daemon, &out, "stale");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("which the observation did not show"),
        "{out}"
    );

    // Bound to a fresh find, the new dialog's button is pressed; it is the only close since.
    let (fresh, snapshot) = find_close().await;
    assert_ne!(fresh, r, "a new dialog, new elements");
    let out = ax(
        "act",
        json!({"ref": fresh, "action": "press"}),
        json!({"seen": snapshot}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    wait_for("the new dialog to close", Duration::from_secs(10), || {
        (app.lines_starting("dialog closed").len() == 2).then_some(())
    });
    assert_eq!(app.lines_starting("dialog closed").len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_agents_snapshot_reads_as_unknown_and_binds_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let alice = Client::connect_as(&daemon.socket, Some(&daemon.add_agent("alice")))
        .await
        .expect("alice");
    let mallory = Client::connect_as(&daemon.socket, Some(&daemon.add_agent("mallory")))
        .await
        .expect("mallory");
    let shot = call_as(
        &alice,
        "gui",
        "screenshot",
        json!({"max_dim": 16}),
        json!({}),
    )
    .await;
    let theirs = shot["snapshot"].as_str().expect("a snapshot").to_string();

    // Mallory names alice's snapshot, with a point on alice's tiny image and one off it: both
    // read exactly as an id that never was, and nothing is clicked or told.
    let never = "s000000";
    let unknown = call_as(
        &mallory,
        "gui",
        "click",
        json!({"x": 1, "y": 1}),
        json!({"seen": never}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "invalid_call", "{unknown}");
    assert_eq!(unknown["error"]["path"], "complications.seen");
    for point in [json!({"x": 1, "y": 1}), json!({"x": 900, "y": 1})] {
        let out = call_as(&mallory, "gui", "click", point, json!({"seen": theirs})).await;
        assert_eq!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .replace(&theirs, never),
            unknown["error"]["message"],
            "{out}"
        );
        assert_eq!(out["error"]["path"], "complications.seen");
    }
    // Alice's own: the point off her image is named as such.
    let out = call_as(
        &alice,
        "gui",
        "click",
        json!({"x": 900, "y": 1}),
        json!({"seen": theirs}),
    )
    .await;
    assert_eq!(out["error"]["path"], "args.x", "{out}");

    // The same on ax: an act bound to alice's find is unknown to mallory.
    let found = call_as(
        &alice,
        "ax",
        "find",
        json!({"selector": "frame"}),
        json!({}),
    )
    .await;
    let ax_snapshot = found["snapshot"]
        .as_str()
        .expect("an ax snapshot")
        .to_string();
    let out = call_as(
        &mallory,
        "ax",
        "act",
        json!({"ref": 1, "action": "focus"}),
        json!({"seen": ax_snapshot}),
    )
    .await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no snapshot"),
        "{out}"
    );

    // `seen` binds acts only; an ordinary call of mallory's still works.
    let out = call_as(
        &mallory,
        "gui",
        "windows",
        json!({}),
        json!({"seen": theirs}),
    )
    .await;
    assert_eq!(out["error"]["path"], "complications.seen", "{out}");
    let out = call_as(&mallory, "gui", "windows", json!({}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    alice.close().await;
    mallory.close().await;
}

/// The desktop of the person tests: its input devices are not XTEST ones (see
/// [`Desktop::private_with_a_person`]); one for this suite, the tests take turns on it.
fn persons_desktop() -> &'static Desktop {
    static DESKTOP: std::sync::OnceLock<Desktop> = std::sync::OnceLock::new();
    DESKTOP.get_or_init(Desktop::private_with_a_person)
}

/// The person's hand: XTEST input on the outer server, which Xephyr passes on to the desktop
/// through its own pointer and keyboard, as a physical mouse's and keyboard's input comes.
struct Person {
    conn: x11rb::rust_connection::RustConnection,
    root: u32,
    /// The desktop's pointer device the hand's moves come from (Xephyr's own).
    pointer_device: u16,
}

/// A daemon on the person's desktop that pauses gui input for 3 s after the person's, once it
/// watches. Its runs are contained as an agent's are (they still reach the X display).
fn daemon_watching_the_person() -> Daemon {
    let daemon = persons_desktop().start_daemon("[gui]\nperson_quiet_ms = 3000\n");
    daemon.wait_for_log("watching for the person's input");
    daemon
}

impl Person {
    fn at_the_desk() -> Person {
        use x11rb::connection::Connection;
        use x11rb::protocol::xinput::{self, ConnectionExt as _};
        let desktop = persons_desktop();
        let (inner, _) = desktop.x_connection();
        inner
            .xinput_xi_query_version(2, 2)
            .unwrap()
            .reply()
            .unwrap();
        let pointer_device = inner
            .xinput_xi_query_device(xinput::Device::ALL)
            .unwrap()
            .reply()
            .unwrap()
            .infos
            .into_iter()
            .find(|d| {
                d.type_ == xinput::DeviceType::SLAVE_POINTER && d.name == b"Xephyr virtual mouse"
            })
            .map(|d| d.deviceid)
            .expect("Xephyr's own pointer device");
        let outer = desktop.person_display.as_deref().unwrap();
        let (conn, screen) = x11rb::connect(Some(outer)).expect("connect to the outer X server");
        let root = conn.setup().roots[screen].root;
        Person {
            conn,
            root,
            pointer_device,
        }
    }

    /// Returns once `daemon` watches the person's pointer.
    fn is_watched_by(&self, daemon: &Daemon) {
        let device = self.pointer_device.to_string();
        wait_for(
            "the daemon to watch the person's pointer",
            Duration::from_secs(10),
            || {
                let log = daemon.log_text();
                let line = log
                    .lines()
                    .rfind(|line| line.contains("watching for the person's input"))?;
                let watched = line.split("watched=[").nth(1)?.split(']').next()?;
                watched.split(", ").any(|id| id == device).then_some(())
            },
        );
    }

    /// Moves the person's pointer (on the outer server, over Xephyr's window at 0,0: the same
    /// point on the desktop).
    fn moves_the_mouse(&self, x: i16, y: i16) {
        use x11rb::protocol::xproto::ConnectionExt as _;
        use x11rb::protocol::xtest::ConnectionExt as _;
        self.conn
            .xtest_fake_input(
                x11rb::protocol::xproto::MOTION_NOTIFY_EVENT,
                0,
                0,
                self.root,
                x,
                y,
                0,
            )
            .unwrap();
        self.conn.get_input_focus().unwrap().reply().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_persons_input_pauses_gui_input_while_ax_goes_on() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = daemon_watching_the_person();
    let app = Window::launch_on(persons_desktop(), &daemon, "seen-person", 500, 300).await;
    let ax_app = TestApp::launch_on(persons_desktop(), "seen-person-ax", &[]);
    let listed = entry(&gui(&daemon, "windows", json!({}), json!({})).await, app.id);
    let point = (
        listed["x"].as_i64().unwrap() + 20,
        listed["y"].as_i64().unwrap() + 20,
    );

    // The person moves the mouse; once the daemon has seen it (a harmless move is refused),
    // a click is refused, saying when the agent may go on, and nothing reaches the app.
    let person = Person::at_the_desk();
    person.is_watched_by(&daemon);
    person.moves_the_mouse(5, 5);
    let mut refused = Value::Null;
    for _ in 0..100 {
        let out = gui(&daemon, "move", json!({"x": 1, "y": 1}), json!({})).await;
        if out["error"]["code"] == "interrupted_by_person" {
            refused = out;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        refused["error"]["code"], "interrupted_by_person",
        "{refused}"
    );
    let out = gui(
        &daemon,
        "click",
        json!({"x": point.0, "y": point.1}),
        json!({}),
    )
    .await;
    assert_refused(&daemon, &out, "interrupted_by_person");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("pauses for 3000 ms") && message.contains("Go on after"),
        "{message}"
    );

    // Observations are not paused.
    let out = gui(&daemon, "screenshot", json!({"max_dim": 64}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");

    // Accessible actions are not paused.
    let out = call(
        &daemon,
        "ax",
        "act",
        json!({"app": ax_app.pid(), "selector": "button \"Say Hello\"", "action": "press"}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    ax_app.wait_line("clicked 1");

    // After the quiet time the same click goes through, and it is the app's first press.
    let landed = try_wait_for(Duration::from_secs(15), || {
        let out = block(gui(
            &daemon,
            "click",
            json!({"x": point.0, "y": point.1}),
            json!({}),
        ));
        (out["ok"] == true).then_some(out)
    });
    assert!(landed.is_some(), "gui input never resumed");
    let first = app.next();
    assert_eq!(
        (first["x"].as_i64(), first["y"].as_i64()),
        (Some(point.0), Some(point.1)),
        "{first}"
    );

    // Turned off, the person's input pauses nothing.
    drop(daemon);
    let daemon = persons_desktop().start_daemon("[gui]\nyield_to_person = false\n");
    wait_for(
        "the second daemon's gui to answer",
        Duration::from_secs(10),
        || {
            let out = block(gui(&daemon, "windows", json!({}), json!({})));
            (out["ok"] == true).then_some(())
        },
    );
    person.moves_the_mouse(7, 7);
    let out = gui(
        &daemon,
        "click",
        json!({"x": point.0, "y": point.1}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
}

/// Watches every key press reach the X server (XInput2 raw events, from any device) and has
/// the person move the mouse at the first one. Returns once `mark` changes on the root window,
/// with how many key presses the server took before that.
fn person_cuts_in_at_the_first_key(person: Person, mark: u32) -> std::thread::JoinHandle<usize> {
    use x11rb::connection::Connection;
    use x11rb::protocol::Event;
    use x11rb::protocol::xinput::{self, ConnectionExt as _};
    use x11rb::protocol::xproto::{ChangeWindowAttributesAux, ConnectionExt as _, EventMask};
    let (conn, root) = persons_desktop().x_connection();
    conn.xinput_xi_query_version(2, 2).unwrap().reply().unwrap();
    conn.xinput_xi_select_events(
        root,
        &[xinput::EventMask {
            deviceid: xinput::Device::ALL_MASTER.into(),
            mask: vec![xinput::XIEventMask::RAW_KEY_PRESS],
        }],
    )
    .unwrap();
    let properties = ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE);
    conn.change_window_attributes(root, &properties).unwrap();
    // Selected before the type is sent: no key can come unseen.
    conn.get_input_focus().unwrap().reply().unwrap();
    std::thread::spawn(move || {
        let mut presses = 0;
        loop {
            match conn.wait_for_event().expect("the X server's events") {
                Event::XinputRawKeyPress(_) => {
                    presses += 1;
                    if presses == 1 {
                        person.moves_the_mouse(3, 3);
                    }
                }
                // Events come in the server's order: every key it took before the mark is
                // counted by now.
                Event::PropertyNotify(changed) if changed.atom == mark => return presses,
                _ => {}
            }
        }
    })
}

/// A `type` the person cuts into stops between two keys: the call is refused as
/// `interrupted_by_person` (and receipted so), and the server took part of the text, not all.
#[tokio::test(flavor = "multi_thread")]
async fn the_persons_input_stops_a_long_type_between_two_keys() {
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, PropMode};
    use x11rb::wrapper::ConnectionExt as _;
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = daemon_watching_the_person();
    let app = Window::launch_on(persons_desktop(), &daemon, "seen-person-type", 500, 300).await;
    // Keys go to the test's own window, not to whatever had the focus.
    let focused = gui(&daemon, "focus", json!({"window": app.id}), json!({})).await;
    assert_eq!(focused["focused"], true, "{focused}");

    // Characters that are not on the keymap go on spare keys in rounds, each waited for by
    // the server: the text takes long enough to send that the person's move comes in between.
    let text: String = (0..10_000u32)
        .map(|n| char::from_u32(0x4E00 + n % 2000).unwrap())
        .collect();
    let (marker, root) = persons_desktop().x_connection();
    let mark = marker
        .intern_atom(false, b"COMPUTER_TEST_TYPE_DONE")
        .unwrap()
        .reply()
        .unwrap()
        .atom;
    let person = Person::at_the_desk();
    person.is_watched_by(&daemon);
    let watching = person_cuts_in_at_the_first_key(person, mark);
    let out = gui(&daemon, "type", json!({"text": text}), json!({})).await;
    assert_refused(&daemon, &out, "interrupted_by_person");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("nothing more was sent"), "{message}");

    // The daemon waited for the server before it answered: a mark set now comes after every
    // key it sent.
    marker
        .change_property8(PropMode::REPLACE, root, mark, AtomEnum::STRING, b"1")
        .unwrap();
    marker.get_input_focus().unwrap().reply().unwrap();
    let presses = tokio::task::block_in_place(|| watching.join().unwrap());
    eprintln!("{presses} of 10000 keys reached the server before the person's move stopped them");
    assert!(presses >= 1, "no key was typed before the person came");
    assert!(
        presses < 10_000,
        "all {presses} keys were typed: the person's input stopped nothing"
    );
}

/// What a hostile agent's run does to pause every agent's gui input: makes a master device of
/// its own (`xinput create-master agent`), makes it the client pointer of its connection and
/// sends pointer moves and a key through it (XTEST, libXi and libXtst through ctypes), so the
/// input comes from that master's XTEST slaves and not from the core XTEST devices the daemon
/// uses. Prints the ids of the slaves it sent through.
const AGENT_MASTER_INPUT: &str = r#"
import ctypes, subprocess
subprocess.run(["xinput", "create-master", "agent"], check=True)
def device(name):
    return int(subprocess.run(["xinput", "list", "--id-only", name], capture_output=True, text=True, check=True).stdout)
master = device("agent pointer")
x11 = ctypes.CDLL("libX11.so.6")
xi = ctypes.CDLL("libXi.so.6")
xtst = ctypes.CDLL("libXtst.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
dpy = ctypes.c_void_p(x11.XOpenDisplay(None))
major, minor = ctypes.c_int(2), ctypes.c_int(2)
assert xi.XIQueryVersion(dpy, ctypes.byref(major), ctypes.byref(minor)) == 0
xi.XISetClientPointer(dpy, 0, master)
for step in range(40):
    xtst.XTestFakeMotionEvent(dpy, -1, 100 + step * 7, 120 + step * 3, 0)
    x11.XSync(dpy, 0)
shift = x11.XKeysymToKeycode(dpy, 0xffe1)
xtst.XTestFakeKeyEvent(dpy, shift, 1, 0)
xtst.XTestFakeKeyEvent(dpy, shift, 0, 0)
x11.XSync(dpy, 0)
print(device("agent XTEST pointer"), device("agent XTEST keyboard"))
"#;

/// An agent's run that sends input through a master device it made reads as a program, not as
/// the person: every agent's gui input goes on. The input is seen reaching the X server from the
/// new master's XTEST slaves (so the attack ran), and the person's own move right after is still
/// seen and pauses gui input (so the watch was live).
#[tokio::test(flavor = "multi_thread")]
async fn input_through_a_master_an_agent_made_does_not_pause_gui_input() {
    use x11rb::connection::Connection;
    use x11rb::protocol::Event;
    use x11rb::protocol::xinput::{self, ConnectionExt as _};
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = daemon_watching_the_person();
    let app = Window::launch_on(persons_desktop(), &daemon, "seen-agent-master", 500, 300).await;
    let listed = entry(&gui(&daemon, "windows", json!({}), json!({})).await, app.id);
    let point = (
        listed["x"].as_i64().unwrap() + 20,
        listed["y"].as_i64().unwrap() + 20,
    );
    // The test watches raw input from every device, to see where the run's input came from.
    let (watcher, root) = persons_desktop().x_connection();
    watcher
        .xinput_xi_query_version(2, 2)
        .unwrap()
        .reply()
        .unwrap();
    watcher
        .xinput_xi_select_events(
            root,
            &[xinput::EventMask {
                deviceid: xinput::Device::ALL.into(),
                mask: vec![xinput::XIEventMask::RAW_MOTION | xinput::XIEventMask::RAW_KEY_PRESS],
            }],
        )
        .unwrap()
        .check()
        .unwrap();

    let out = call(
        &daemon,
        "shell",
        "run",
        json!({"argv": [computer_tests::desktop::gi_python(), "-c", AGENT_MASTER_INPUT]}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["exit_code"], 0, "{out}");
    // The run was contained, as an agent's is.
    let result = daemon.receipt_row(&out["receipt"], "result");
    assert_eq!(
        result["body"]["containment"]["mechanism"], "namespaces",
        "{result}"
    );
    let stdout = out["stdout"].as_str().unwrap_or_default();
    let slaves: Vec<u16> = stdout
        .split_whitespace()
        .filter_map(|id| id.parse().ok())
        .collect();
    assert_eq!(slaves.len(), 2, "the run names its XTEST slaves: {out}");
    let mut from_agent = 0;
    while let Some(event) = watcher.poll_for_event().unwrap() {
        let source = match event {
            Event::XinputRawMotion(e) => e.sourceid,
            Event::XinputRawKeyPress(e) => e.sourceid,
            _ => continue,
        };
        from_agent += usize::from(slaves.contains(&source));
    }
    assert!(
        from_agent >= 40,
        "the run's input reached the server through its own master only {from_agent} times"
    );

    // The daemon has heard of the new devices and judged them not the person's...
    wait_for(
        "the daemon to judge the agent's devices",
        Duration::from_secs(10),
        || {
            let log = daemon.log_text();
            let line = log
                .lines()
                .rfind(|line| line.contains("watching for the person's input"))?;
            let ignored = line.split("ignored=[").nth(1)?.split(']').next()?;
            slaves
                .iter()
                .all(|id| ignored.split(", ").any(|i| i == id.to_string()))
                .then_some(())
        },
    );
    // ...and gui input goes on: the click lands.
    let out = gui(
        &daemon,
        "click",
        json!({"x": point.0, "y": point.1}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "the agent's input paused gui input: {out}");
    let first = app.next();
    assert_eq!(
        (first["x"].as_i64(), first["y"].as_i64()),
        (Some(point.0), Some(point.1)),
        "{first}"
    );

    // The person's hand is still seen.
    let person = Person::at_the_desk();
    person.is_watched_by(&daemon);
    person.moves_the_mouse(9, 9);
    let refused = try_wait_for(Duration::from_secs(5), || {
        let out = block(gui(&daemon, "move", json!({"x": 1, "y": 1}), json!({})));
        (out["error"]["code"] == "interrupted_by_person").then_some(out)
    });
    assert!(refused.is_some(), "the person's move paused nothing");

    // Removes the agent's master, so the desktop is as before for the next test.
    let status = persons_desktop()
        .command("xinput")
        .args(["remove-master", "agent pointer"])
        .status()
        .expect("xinput");
    assert!(status.success(), "xinput remove-master");
}
