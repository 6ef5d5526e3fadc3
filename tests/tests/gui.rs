//! The gui surface on a real headless X desktop (Xvfb + openbox): pointer, clicks, drags, typing
//! (including characters missing from the keymap), keys, focus, screenshots and their scale, the
//! window list, evidence shots and their receipts, and the no-display diagnosis. Every effect is
//! checked by another client: xdotool, xwininfo, xprop, or a GTK app reporting what it received.

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use computer_tests::desktop::{App, Desktop, TestDesktop};
use computer_tests::{Daemon, structured, try_wait_for, wait_for};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A GTK window for the tests: `canvas` is pure red (CSS) and prints each click and
/// scroll with root coordinates; `track` prints every press, release and motion with a button
/// held, with root coordinates; `entry` holds a text entry and prints its text as JSON on Return.
const APP: &str = r#"
import json, sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, Gdk
mode, title = sys.argv[1], sys.argv[2]
win = Gtk.Window(title=title)
win.set_default_size(400, 300)
win.move(int(sys.argv[3]), int(sys.argv[4]))
def say(obj):
    print(json.dumps(obj), flush=True)
if mode == "canvas":
    # CSS, not cairo: python3-gi-cairo may be missing.
    css = Gtk.CssProvider()
    css.load_from_data(b"window { background-color: #ff0000; background-image: none; }")
    Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, 800)
    win.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.SCROLL_MASK)
    def press(w, ev):
        say({"click": ev.button, "x": int(ev.x_root), "y": int(ev.y_root), "type": int(ev.type)})
    def scroll(w, ev):
        say({"scroll": int(ev.direction)})
    win.connect("button-press-event", press)
    win.connect("scroll-event", scroll)
elif mode == "track":
    win.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK
                   | Gdk.EventMask.BUTTON_MOTION_MASK)
    def report(kind):
        return lambda w, ev: say({kind: int(getattr(ev, "button", 0)),
                                  "x": int(ev.x_root), "y": int(ev.y_root)})
    win.connect("button-press-event", report("press"))
    win.connect("motion-notify-event", report("motion"))
    win.connect("button-release-event", report("release"))
else:
    entry = Gtk.Entry()
    entry.connect("activate", lambda e: say({"text": e.get_text()}))
    win.add(entry)
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"#;

const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// A test app and the lines it prints.
struct TestApp {
    _app: App,
    pid: u32,
    lines: mpsc::Receiver<Value>,
    window: u32,
}

impl TestApp {
    fn launch(mode: &str, title: &str, x: i32, y: i32) -> TestApp {
        let desktop = Desktop::shared();
        // The system interpreter has python3-gi; a pyenv or venv python on PATH may not. `env`
        // execs it, so the pid stays the app's.
        let mut app = desktop.launch(
            "env",
            &[
                SYSTEM_PYTHON,
                "-c",
                APP,
                mode,
                title,
                &x.to_string(),
                &y.to_string(),
            ],
        );
        let lines = app.json_lines_without_repeats();
        let window = wait_for(
            "the test window to be mapped",
            Duration::from_secs(20),
            || {
                let out = desktop
                    .command("xdotool")
                    .args(["search", "--onlyvisible", "--name", &format!("^{title}$")])
                    .output()
                    .ok()?;
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .next()?
                    .trim()
                    .parse()
                    .ok()
            },
        );
        TestApp {
            pid: app.pid(),
            _app: app,
            lines,
            window,
        }
    }

    /// Every printed line up to and including the first that has `key`.
    fn lines_until(&self, key: &str) -> Vec<Value> {
        let mut lines = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("the app printed no `{key}` line after {lines:?}"));
            let last = line.get(key).is_some();
            lines.push(line);
            if last {
                return lines;
            }
        }
    }

    /// The next printed line that has `key`.
    fn expect(&self, key: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the app printed no `{key}` line"));
        assert!(
            line.get(key).is_some(),
            "expected a `{key}` line, got {line}"
        );
        line
    }
}

/// The pointer, the keyboard focus and the window stack are one per desktop: tests that move,
/// type, drag windows or read pixels take turns, or one would see another's effects.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn xtool(program: &str, args: &[&str]) -> String {
    Desktop::shared().tool_output(program, args)
}

/// Where the pointer the daemon acts with is, as (x, y), read from outside the daemon: the
/// agent's own pointer ("computer-agent pointer", XIQueryPointer) once the daemon has made it,
/// else the core pointer (as `xdotool getmouselocation` reads it).
fn mouse_location() -> (i64, i64) {
    use x11rb::protocol::xinput::{self, ConnectionExt as _};
    use x11rb::protocol::xproto::ConnectionExt as _;
    let (conn, root) = Desktop::shared().x_connection();
    let masters = conn
        .xinput_xi_query_device(u16::from(xinput::Device::ALL_MASTER))
        .expect("XIQueryDevice")
        .reply()
        .expect("XIQueryDevice reply");
    let agents = masters
        .infos
        .iter()
        .find(|info| info.name == b"computer-agent pointer");
    match agents {
        Some(info) => {
            let at = conn
                .xinput_xi_query_pointer(root, info.deviceid)
                .expect("XIQueryPointer")
                .reply()
                .expect("XIQueryPointer reply");
            (i64::from(at.root_x >> 16), i64::from(at.root_y >> 16))
        }
        None => {
            let at = conn
                .query_pointer(root)
                .expect("QueryPointer")
                .reply()
                .expect("QueryPointer reply");
            (i64::from(at.root_x), i64::from(at.root_y))
        }
    }
}

/// Waits (bounded) for the pointer to be at `to`, then asserts it is.
fn pointer_reaches(to: (i64, i64)) {
    try_wait_for(Duration::from_secs(10), || {
        (mouse_location() == to).then_some(())
    });
    assert_eq!(mouse_location(), to, "the pointer ends at the drop point");
}

/// The absolute bounds `xwininfo` reports for a window: (x, y, width, height).
fn xwininfo_bounds(window: u32) -> (i64, i64, i64, i64) {
    Desktop::shared().xwininfo_bounds(&window.to_string())
}

/// The window manager's frame around a window, as `xprop` reads `_NET_FRAME_EXTENTS`:
/// (left, right, top, bottom), once the window manager has set it.
fn frame_extents(window: u32) -> (i64, i64, i64, i64) {
    wait_for(
        "the window manager to frame the window",
        Duration::from_secs(10),
        || {
            let out = xtool("xprop", &["-id", &window.to_string(), "_NET_FRAME_EXTENTS"]);
            let (_, values) = out.split_once(" = ")?;
            let v: Vec<i64> = values
                .split(',')
                .map(|n| n.trim().parse())
                .collect::<Result<_, _>>()
                .ok()?;
            (v.len() == 4).then(|| (v[0], v[1], v[2], v[3]))
        },
    )
}

async fn gui(daemon: &Daemon, command: &str, args: Value, complications: Value) -> Value {
    let (value, _) = gui_raw(daemon, command, args, complications).await;
    value
}

async fn gui_raw(
    daemon: &Daemon,
    command: &str,
    args: Value,
    complications: Value,
) -> (Value, rmcp::model::CallToolResult) {
    let client = daemon.client().await;
    let result = client
        .call_raw(json!({"surface": "gui", "command": command, "args": args, "complications": complications}))
        .await
        .expect("call");
    client.close().await;
    (structured(&result), result)
}

fn sha256_of(path: &str) -> String {
    hex::encode(Sha256::digest(
        std::fs::read(path).expect("artifact exists"),
    ))
}

fn window_entry(windows: &Value, id: u32) -> Option<Value> {
    windows["windows"]
        .as_array()?
        .iter()
        .find(|w| w["id"] == json!(id))
        .cloned()
}

#[tokio::test(flavor = "multi_thread")]
async fn pointer_clicks_windows_and_focus_agree_with_other_clients() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("canvas", "gui-test-canvas-click", 100, 100);

    // The window list matches xdotool (id), xwininfo (bounds) and the app's own pid.
    let listed = wait_for(
        "the window list to hold the app",
        Duration::from_secs(10),
        || {
            let list = futures_block(gui(&daemon, "windows", json!({}), json!({})));
            window_entry(&list, app.window)
        },
    );
    assert_eq!(listed["title"], "gui-test-canvas-click");
    assert_eq!(listed["pid"], json!(app.pid), "{listed}");
    assert_eq!(listed["monitor"], 0);
    let (x, y, w, h) = xwininfo_bounds(app.window);
    assert_eq!(
        (
            listed["x"].as_i64(),
            listed["y"].as_i64(),
            listed["width"].as_i64(),
            listed["height"].as_i64()
        ),
        (Some(x), Some(y), Some(w), Some(h)),
        "{listed}"
    );
    let by_name = xtool("xdotool", &["search", "--name", "^gui-test-canvas-click$"]);
    assert!(by_name.lines().any(|l| l.trim() == app.window.to_string()));

    // move lands where xdotool says.
    let out = gui(&daemon, "move", json!({"x": 10, "y": 20}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(mouse_location(), (10, 20));
    let out = gui(&daemon, "cursor", json!({}), json!({})).await;
    assert_eq!((out["x"].as_i64(), out["y"].as_i64()), (Some(10), Some(20)));

    // focus: the window manager reports it active.
    let out = gui(&daemon, "focus", json!({"window": app.window}), json!({})).await;
    assert_eq!(out["focused"], true, "{out}");
    assert_eq!(
        xtool("xdotool", &["getactivewindow"]).trim(),
        app.window.to_string()
    );

    // A click at the window's centre reaches the app at those root coordinates.
    let (cx, cy) = (x + w / 2, y + h / 2);
    let out = gui(&daemon, "click", json!({"x": cx, "y": cy}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(mouse_location(), (cx, cy));
    let click = app.expect("click");
    assert_eq!(
        (
            click["click"].as_i64(),
            click["x"].as_i64(),
            click["y"].as_i64()
        ),
        (Some(1), Some(cx), Some(cy)),
        "{click}"
    );
    let out = gui(&daemon, "click", json!({"button": "right"}), json!({})).await;
    assert_eq!(out["button"], "right");
    assert_eq!(app.expect("click")["click"], 3);

    // Scrolling down one notch there is a scroll-down event (GDK_SCROLL_DOWN = 1).
    let out = gui(&daemon, "scroll", json!({"dy": 1}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(app.expect("scroll")["scroll"], 1);

    // Mistakes name the field and the valid choices.
    let out = gui(&daemon, "click", json!({"x": 1920, "y": 5}), json!({})).await;
    assert_eq!(out["error"]["path"], "args.x", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0..=1919")
    );
    let out = gui(&daemon, "focus", json!({"window": 1}), json!({})).await;
    assert_eq!(out["error"]["path"], "args.window", "{out}");
    assert!(
        out["error"]["valid"]
            .as_array()
            .unwrap()
            .contains(&json!(app.window.to_string()))
    );
    let out = gui(&daemon, "key", json!({"combo": "ctrl+Retrun"}), json!({})).await;
    assert_eq!(out["error"]["path"], "args.combo", "{out}");
    let out = gui(
        &daemon,
        "click",
        json!({"button": "left", "bogus": 1}),
        json!({}),
    )
    .await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    let out = gui(&daemon, "click", json!({"button": "side"}), json!({})).await;
    assert_eq!(out["error"]["path"], "args.button", "{out}");
}

/// The daemon keeps the window list it read until the display says it changed: a title, place
/// or size another client changes, and a window that opens or closes, show in the very next
/// listing, with no wait in between.
#[tokio::test(flavor = "multi_thread")]
async fn the_window_list_follows_other_clients_changes_at_once() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let first = TestApp::launch("canvas", "gui-test-follow-first", 120, 140);
    let listed = wait_for(
        "the window list to hold the app",
        Duration::from_secs(10),
        || {
            window_entry(
                &futures_block(gui(&daemon, "windows", json!({}), json!({}))),
                first.window,
            )
        },
    );
    assert_eq!(listed["title"], "gui-test-follow-first");
    // Listed again unchanged: the same answer.
    let again = gui(&daemon, "windows", json!({}), json!({})).await;
    assert_eq!(window_entry(&again, first.window), Some(listed));

    let id = first.window.to_string();
    xtool(
        "xprop",
        &[
            "-id",
            &id,
            "-f",
            "_NET_WM_NAME",
            "8u",
            "-set",
            "_NET_WM_NAME",
            "renamed by another client",
        ],
    );
    xtool("xdotool", &["windowmove", "--sync", &id, "300", "260"]);
    xtool("xdotool", &["windowsize", "--sync", &id, "320", "200"]);
    let (x, y, w, h) = xwininfo_bounds(first.window);
    let now = gui(&daemon, "windows", json!({}), json!({})).await;
    let entry = window_entry(&now, first.window).expect("still listed");
    assert_eq!(entry["title"], "renamed by another client", "{entry}");
    assert_eq!(
        (
            entry["x"].as_i64(),
            entry["y"].as_i64(),
            entry["width"].as_i64(),
            entry["height"].as_i64()
        ),
        (Some(x), Some(y), Some(w), Some(h)),
        "{entry}"
    );

    // A window that opens: listed as soon as the window manager lists it.
    let second = TestApp::launch("canvas", "gui-test-follow-second", 500, 140);
    wait_for(
        "the window manager to list the second window",
        Duration::from_secs(10),
        || {
            xtool("xprop", &["-root", "_NET_CLIENT_LIST"])
                .contains(&format!("{:#x}", second.window))
                .then_some(())
        },
    );
    let now = gui(&daemon, "windows", json!({}), json!({})).await;
    assert!(window_entry(&now, second.window).is_some(), "{now}");

    // A window that closes: gone from the next listing once the window manager drops it.
    let gone = second.window;
    drop(second);
    wait_for(
        "the window manager to drop the second window",
        Duration::from_secs(10),
        || {
            (!xtool("xprop", &["-root", "_NET_CLIENT_LIST"]).contains(&format!("{gone:#x}")))
                .then_some(())
        },
    );
    let now = gui(&daemon, "windows", json!({}), json!({})).await;
    assert!(window_entry(&now, gone).is_none(), "{now}");
    assert!(window_entry(&now, first.window).is_some(), "{now}");
}

#[tokio::test(flavor = "multi_thread")]
async fn drags_move_a_window_by_its_title_bar_and_reach_an_app_as_held_motion() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");

    // A window dragged by the middle of its title bar moves by exactly the drag's offset, as
    // xwininfo sees it. It sits well away from the other tests' windows, so the window
    // manager's edge resistance cannot nudge it, and it is not red (the screenshot test looks
    // for the one red window).
    let app = TestApp::launch("track", "gui-test-drag-window", 1200, 120);
    // Once framed, the window manager has placed it: only then are its bounds final. And only
    // once the frame is mapped (the window viewable) does a press on the title bar reach the
    // window manager rather than what lies beneath: under load the two are far apart.
    let (_, _, top, _) = frame_extents(app.window);
    wait_for(
        "the framed window to be shown",
        Duration::from_secs(10),
        || {
            xtool("xwininfo", &["-id", &app.window.to_string()])
                .contains("Map State: IsViewable")
                .then_some(())
        },
    );
    // Activated through the window manager and waited for: it has finished mapping and
    // placing the window, so the press below meets its frame's title bar.
    xtool(
        "xdotool",
        &["windowactivate", "--sync", &app.window.to_string()],
    );
    let (x, y, w, _) = xwininfo_bounds(app.window);
    assert!(top >= 8, "openbox draws a title bar: frame top is {top}");
    let from = (x + w / 2, y - top / 2);
    let to = (from.0 + 150, from.1 + 230);
    let out = gui(
        &daemon,
        "drag",
        json!({"from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1}),
        json!({}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(
        (
            &out["from_x"],
            &out["from_y"],
            &out["to_x"],
            &out["to_y"],
            &out["button"]
        ),
        (
            &json!(from.0),
            &json!(from.1),
            &json!(to.0),
            &json!(to.1),
            &json!("left")
        ),
        "{out}"
    );
    // The window manager holds the pointer (a synchronous grab) while it decides what a press
    // on its frame means, so the server may apply the queued motion a little later.
    pointer_reaches(to);
    // The window manager applies the move after the release reached it: wait until it has.
    let expected = (x + 150, y + 230);
    // The drag lets the window manager catch up after its first motion (a loaded machine
    // once made openbox read the whole drag as one motion and never move the window).
    try_wait_for(Duration::from_secs(10), || {
        let (nx, ny, _, _) = xwininfo_bounds(app.window);
        ((nx, ny) == expected).then_some(())
    });
    let (nx, ny, nw, _) = xwininfo_bounds(app.window);
    assert_eq!((nx, ny), expected, "the window moved with the title bar");
    assert_eq!(nw, w, "a move, not a resize");

    // Inside an app: the press lands at the start, every motion arrives with the (right)
    // button held and lies on the straight path, and the release lands at the drop point.
    let tracker = TestApp::launch("track", "gui-test-drag-track", 150, 650);
    let (x, y, _, _) = xwininfo_bounds(tracker.window);
    let (from, to) = ((x + 40, y + 40), (x + 340, y + 190));
    let out = gui(
        &daemon,
        "drag",
        json!({"from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1, "button": "right"}),
        json!({}),
    )
    .await;
    assert_eq!(out["button"], "right", "{out}");
    pointer_reaches(to);
    let lines = tracker.lines_until("release");
    let at = |line: &Value| (line["x"].as_i64().unwrap(), line["y"].as_i64().unwrap());
    let press = lines
        .iter()
        .find(|l| l.get("press").is_some())
        .unwrap_or_else(|| panic!("no press before the release: {lines:?}"));
    assert_eq!(
        (press["press"].as_i64(), at(press)),
        (Some(3), from),
        "{press}"
    );
    let release = lines.last().unwrap();
    assert_eq!((release["release"].as_i64(), at(release)), (Some(3), to));
    let motions: Vec<(i64, i64)> = lines
        .iter()
        .filter(|l| l.get("motion").is_some())
        .map(at)
        .collect();
    assert_eq!(
        motions.last(),
        Some(&to),
        "motion reaches the drop point: {lines:?}"
    );
    for (mx, my) in &motions {
        // On the segment from `from` to `to` (slope 1/2), within a pixel of rounding.
        let on_path = ((my - from.1) * 2 - (mx - from.0)).abs() <= 2;
        let within = (from.0..=to.0).contains(mx) && (from.1..=to.1).contains(my);
        assert!(
            on_path && within,
            "motion at ({mx},{my}) is off the path: {motions:?}"
        );
    }

    // A drop point off the screen names the field.
    let out = gui(
        &daemon,
        "drag",
        json!({"from_x": 10, "from_y": 10, "to_x": 1920, "to_y": 10}),
        json!({}),
    )
    .await;
    assert_eq!(out["error"]["path"], "args.to_x", "{out}");
}

/// Runs a future to completion from inside a sync closure (wait_for's check).
fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_unicode_and_keys_arrive_exactly_in_a_gtk_entry() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("entry", "gui-test-entry-typing", 600, 100);
    let out = gui(&daemon, "focus", json!({"window": app.window}), json!({})).await;
    assert_eq!(out["focused"], true, "{out}");

    // Latin-1 with and without shift, symbols, and characters on no key of the keymap.
    let text = "Héllo wörld ✓ Ω ~!@ 日本";
    let out = gui(&daemon, "type", json!({"text": text}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["chars"], text.chars().count());
    let out = gui(&daemon, "key", json!({"combo": "Return"}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(app.expect("text")["text"], text);

    // Combos: select all and replace, BackSpace, then Return again.
    gui(&daemon, "key", json!({"combo": "ctrl+a"}), json!({})).await;
    gui(&daemon, "type", json!({"text": "Ωmega!"}), json!({})).await;
    gui(&daemon, "key", json!({"combo": "BackSpace"}), json!({})).await;
    gui(&daemon, "key", json!({"combo": "Return"}), json!({})).await;
    assert_eq!(app.expect("text")["text"], "Ωmega");

    // Many distinct characters off the keymap in one call (more than fit at once on a small
    // pool of spare keys would still arrive in order).
    gui(&daemon, "key", json!({"combo": "ctrl+a"}), json!({})).await;
    let greek: String = ('α'..='ω').chain('А'..='я').collect();
    gui(&daemon, "type", json!({"text": greek}), json!({})).await;
    gui(&daemon, "key", json!({"combo": "Return"}), json!({})).await;
    assert_eq!(app.expect("text")["text"], json!(greek));
}

/// Decodes a PNG file or bytes into RGB.
fn rgb(bytes: &[u8]) -> image::RgbImage {
    image::load_from_memory(bytes).expect("a PNG").to_rgb8()
}

#[tokio::test(flavor = "multi_thread")]
async fn screenshots_show_the_screen_and_scale_maps_back_to_it() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("canvas", "gui-test-canvas-shot", 700, 500);
    let (x, y, w, h) = xwininfo_bounds(app.window);

    // The window's own area is pure red once drawn.
    let shot = wait_for(
        "the red window in a screenshot",
        Duration::from_secs(10),
        || {
            let out = futures_block(gui(
                &daemon,
                "screenshot",
                json!({"window": app.window}),
                json!({}),
            ));
            let image = rgb(&std::fs::read(out["path"].as_str()?).ok()?);
            image.pixels().all(|p| p.0 == [255, 0, 0]).then_some(out)
        },
    );
    assert_eq!(shot["scale"], 1.0);
    assert_eq!(
        (shot["origin_x"].as_i64(), shot["origin_y"].as_i64()),
        (Some(x), Some(y))
    );
    assert_eq!(
        (shot["width"].as_i64(), shot["height"].as_i64()),
        (Some(w), Some(h))
    );
    assert_eq!(sha256_of(shot["path"].as_str().unwrap()), shot["sha256"]);

    // The whole screen scaled to 1280 wide, inline this time: find the red block in the image
    // and map it back through scale and origin onto the window's true bounds.
    let (out, result) = gui_raw(
        &daemon,
        "screenshot",
        json!({}),
        json!({"return": {"image": true}}),
    )
    .await;
    assert_eq!(
        (out["width"].as_i64(), out["height"].as_i64()),
        (Some(1280), Some(720))
    );
    let scale = out["scale"].as_f64().unwrap();
    assert!((scale - 1.5).abs() < 1e-9, "{out}");
    let inline = result
        .content
        .iter()
        .find_map(|c| c.as_image().map(|i| i.data.clone()))
        .expect("an inline image when return.image is true");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inline)
        .unwrap();
    assert_eq!(hex::encode(Sha256::digest(&bytes)), out["sha256"]);
    let image = rgb(&bytes);
    let red: Vec<(u32, u32)> = image
        .enumerate_pixels()
        .filter(|(_, _, p)| p.0 == [255, 0, 0])
        .map(|(u, v, _)| (u, v))
        .collect();
    let (u0, v0) = red
        .iter()
        .fold((u32::MAX, u32::MAX), |a, p| (a.0.min(p.0), a.1.min(p.1)));
    let (u1, v1) = red.iter().fold((0, 0), |a, p| (a.0.max(p.0), a.1.max(p.1)));
    let to_screen = |u: u32| (f64::from(u) * scale).round() as i64;
    for (seen, truth) in [
        (to_screen(u0), x),
        (to_screen(v0), y),
        (to_screen(u1 + 1), x + w),
        (to_screen(v1 + 1), y + h),
    ] {
        assert!(
            (seen - truth).abs() <= 2,
            "image edge maps to {seen}, screen has {truth}"
        );
    }

    // Without return.image there is only the reference.
    let (_, result) = gui_raw(&daemon, "screenshot", json!({"max_dim": 64}), json!({})).await;
    assert!(result.content.iter().all(|c| c.as_image().is_none()));

    // A region: its origin is reported, and the pixel at (ox+10, oy+10) is the window's red.
    let out = gui(
        &daemon,
        "screenshot",
        json!({"region": {"x": x - 5, "y": y - 5, "width": 40, "height": 30}, "format": "png"}),
        json!({}),
    )
    .await;
    assert_eq!(
        (out["origin_x"].as_i64(), out["origin_y"].as_i64()),
        (Some(x - 5), Some(y - 5))
    );
    let region = rgb(&std::fs::read(out["path"].as_str().unwrap()).unwrap());
    assert_eq!(region.get_pixel(10, 10).0, [255, 0, 0]);
    let out = gui(
        &daemon,
        "screenshot",
        json!({"window": app.window, "format": "jpeg", "quality": 90}),
        json!({}),
    )
    .await;
    assert_eq!(out["format"], "jpeg", "{out}");
    let out = gui(&daemon, "screenshot", json!({"monitor": 3}), json!({})).await;
    assert_eq!(out["error"]["path"], "args.monitor", "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn evidence_shots_are_artifacts_whose_hashes_are_receipted() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop("");
    let client = daemon.client().await;

    // With the gui ready, the tool lists it and evidence, and stays small (every surface of
    // this build with its commands: under 3 KB; BENCHMARKS.md, "tools/list"); `help` teaches
    // evidence and return.image.
    let tools = client.list_tools().await.unwrap();
    let listed = serde_json::to_string(&tools).unwrap();
    assert!(
        listed.len() <= 3 * 1024,
        "tools/list is {} bytes",
        listed.len()
    );
    let description = tools[0].description.as_deref().unwrap_or_default();
    assert!(description.contains("\ngui: screenshot "), "{description}");
    assert!(
        description.contains("evidence: screenshot|full"),
        "{description}"
    );
    let reference = computer_tests::help(&client, "gui").await;
    assert!(
        reference.contains("\n- evidence:") && reference.contains("image?:bool"),
        "{reference}"
    );

    for (evidence, labels) in [
        ("screenshot", &["after"][..]),
        ("full", &["before", "after"][..]),
    ] {
        let result = client
            .call_raw(json!({"surface": "shell", "command": "run",
                "args": {"argv": ["true"]}, "complications": {"evidence": evidence}}))
            .await
            .unwrap();
        let out = structured(&result);
        assert_eq!(out["ok"], true, "{out}");
        let row = daemon.receipt_row(&out["receipt"], "result");
        let artifacts = row["body"]["artifacts"].as_array().unwrap().clone();
        assert_eq!(
            out["evidence"].as_object().unwrap().len(),
            labels.len(),
            "{out}"
        );
        for label in labels {
            let shot = &out["evidence"][label];
            let path = shot["path"].as_str().unwrap_or_else(|| panic!("{out}"));
            assert!(path.ends_with(&format!(".evidence-{label}.png")), "{path}");
            let sha = sha256_of(path);
            assert_eq!(shot["sha256"], json!(sha));
            assert_eq!(row["body"]["evidence"][label]["sha256"], json!(sha));
            assert!(artifacts.iter().any(|a| a["sha256"] == json!(sha)));
            assert_eq!(
                (shot["width"].as_i64(), shot["height"].as_i64()),
                (Some(1920), Some(1080))
            );
            assert_eq!(
                shot["bytes"],
                json!(std::fs::metadata(path).unwrap().len()),
                "{shot}"
            );
            let image = rgb(&std::fs::read(path).unwrap());
            assert_eq!(image.dimensions(), (1920, 1080));
        }
        // Settling is the rule: only a shot that did not settle says so (with the bound).
        assert!(out["evidence"]["after"].get("settled").is_none(), "{out}");
        assert!(out["evidence"]["after"]["settle_ms"].is_u64(), "{out}");
    }
    client.close().await;
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_display_gui_is_unavailable_and_doctor_says_why() {
    let daemon = Daemon::start_with_env("", &[], &["DISPLAY", "WAYLAND_DISPLAY"]);
    let out = gui(&daemon, "cursor", json!({}), json!({})).await;
    assert_eq!(out["error"]["code"], "unavailable", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("DISPLAY is not set"), "{message}");
    assert!(message.contains("fix:"), "{message}");
    // Evidence needs screenshots: refused with a pointer to doctor.
    let client = daemon.client().await;
    let result = client
        .call_raw(json!({"surface": "shell", "command": "run",
            "args": {"argv": ["true"]}, "complications": {"evidence": "screenshot"}}))
        .await
        .unwrap();
    client.close().await;
    let out = structured(&result);
    assert_eq!(out["error"]["path"], "complications.evidence", "{out}");

    let doctor = daemon.cli(&["doctor", "--json"]).json();
    let gui = doctor["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["surface"] == "gui")
        .cloned()
        .unwrap();
    assert_eq!(gui["availability"]["status"], "unavailable", "{gui}");
    assert!(
        gui["availability"]["reason"]
            .as_str()
            .unwrap()
            .contains("DISPLAY is not set")
    );

    // A Wayland-only session is named as such.
    let mut doctor = daemon.command();
    let out = doctor
        .args(["doctor", "--json"])
        .env("WAYLAND_DISPLAY", "wayland-0")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = report.to_string();
    assert!(text.contains("Wayland session"), "{text}");

    // A display that nothing serves: the connection error is named.
    let out = Command::new(computer_tests::computer_bin())
        .envs(daemon.env())
        .env("DISPLAY", ":987")
        .env_remove("WAYLAND_DISPLAY")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cannot connect to X server :987"), "{text}");
}

/// A `window` rule decides on the window a gui action reaches, though `type` names none: the
/// active window is its target. Typing into another window still works, and the receipt records
/// the target.
#[tokio::test(flavor = "multi_thread")]
async fn window_rules_decide_on_the_window_typing_reaches() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(
        "[defaults]\nact = \"allow\"\n[[rules]]\nsurface = \"gui\"\nwindow = \"gui-test-facts-guarded\"\ndecision = \"deny\"\n",
    );
    let guarded = TestApp::launch("entry", "gui-test-facts-guarded", 100, 500);
    let open = TestApp::launch("entry", "gui-test-facts-open", 700, 500);

    // Focusing the guarded window is itself an action on it.
    let out = gui(
        &daemon,
        "focus",
        json!({"window": guarded.window}),
        json!({}),
    )
    .await;
    assert_eq!(out["error"]["code"], "denied", "{out}");
    // Focused another way, typing into it is denied all the same.
    xtool(
        "xdotool",
        &["windowactivate", "--sync", &guarded.window.to_string()],
    );
    let out = gui(&daemon, "type", json!({"text": "secret"}), json!({})).await;
    assert_eq!(out["error"]["code"], "denied", "{out}");
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    let target = &intent["body"]["facts"]["target"];
    assert_eq!(target["kind"], "window", "{intent}");
    assert_eq!(target["window"], "gui-test-facts-guarded", "{intent}");
    assert_eq!(target["window_id"], guarded.window.to_string(), "{intent}");
    assert_eq!(target["pid"], guarded.pid, "{intent}");
    assert_eq!(intent["body"]["args"]["args"]["text"], "secret", "{intent}");

    let out = gui(&daemon, "focus", json!({"window": open.window}), json!({})).await;
    assert_eq!(out["focused"], true, "{out}");
    let out = gui(&daemon, "type", json!({"text": "fine"}), json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    gui(&daemon, "key", json!({"combo": "Return"}), json!({})).await;
    assert_eq!(open.expect("text")["text"], "fine");
}

/// A display server that holds every request (a client grabbed it: a stuck or hostile X
/// client can) holds the gui calls made meanwhile and nothing else: the daemon answers other
/// calls and new connections, and the held clicks finish once the server lets go. Clicks run
/// their display work on the calling worker (`blocking` in the surface): were that work done on
/// the runtime's workers without lending them, two held clicks would stop the daemon.
#[tokio::test(flavor = "multi_thread")]
async fn a_display_that_holds_its_requests_holds_only_the_gui_calls() {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::ConnectionExt;

    // Its own desktop: the grab would hold every other test's display work. Through the
    // person's pointer: the agent's own pair, made at the first click, has the window manager
    // answer its new devices a moment later, and a preparation that reads that change while the
    // display is held waits with the act (its intent then comes once the display answers).
    let desktop = Desktop::private();
    let daemon = desktop.start_daemon("[gui]\nown_pointer = false\n");
    let click = |x: i32| json!({"surface": "gui", "command": "click", "args": {"x": x, "y": 100}});
    let first = daemon.client().await;
    let answer = structured(&first.call_raw(click(100)).await.expect("call"));
    assert_eq!(answer["ok"], true, "{answer}");
    let clicks_before = daemon.receipts().len();

    // Connected before the grab: past it, every wait on the daemon is bounded, so that a
    // daemon the held clicks stopped fails the test instead of hanging it.
    const HELD: usize = 4;
    let mut clients = Vec::new();
    for _ in 0..HELD {
        clients.push(daemon.client().await);
    }
    let other = daemon.client().await;

    let (grabber, _) = desktop.x_connection();
    grabber.grab_server().expect("grab");
    grabber
        .get_input_focus()
        .expect("sync")
        .reply()
        .expect("the grab is in place");

    let mut held = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        let call = click(200 + i as i32);
        held.push(tokio::spawn(async move {
            let answer = client
                .call_raw(call)
                .await
                .map(|result| structured(&result));
            client.close().await;
            answer
        }));
    }
    // Every held click has written its intent, so each is at (or past) the display.
    wait_for("the held clicks' intents", Duration::from_secs(30), || {
        let intents = daemon.receipts()[clicks_before..]
            .iter()
            .filter(|row| row["kind"] == "intent" && row["command"] == "click")
            .count();
        (intents == HELD).then_some(())
    });

    // The daemon still serves: an ordinary call and a new connection are answered while the
    // clicks are held (the bounds are only there to fail instead of hanging).
    let shell = tokio::time::timeout(
        Duration::from_secs(30),
        other.call_raw(json!({"surface": "shell", "command": "run", "args": {"argv": ["true"]}})),
    )
    .await
    .expect("a shell call is answered while the display holds the clicks")
    .expect("call");
    assert_eq!(structured(&shell)["ok"], true, "{}", structured(&shell));
    let late = tokio::time::timeout(Duration::from_secs(30), daemon.client())
        .await
        .expect("a new connection is answered while the display holds the clicks");
    let tools = tokio::time::timeout(Duration::from_secs(30), late.list_tools())
        .await
        .expect("tools/list is answered while the display holds the clicks")
        .expect("list");
    assert_eq!(tools.len(), 1);
    late.close().await;
    assert!(
        held.iter().all(|call| !call.is_finished()),
        "a click finished while the display held every request"
    );

    // Once the server lets go, the held clicks finish.
    grabber.ungrab_server().expect("ungrab");
    grabber.flush().expect("flush");
    for call in held {
        let answer = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("a held click finishes once the display lets go")
            .expect("task")
            .expect("call");
        assert_eq!(answer["ok"], true, "{answer}");
    }
    other.close().await;
    first.close().await;
}
