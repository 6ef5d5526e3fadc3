//! The gui surface on a real headless sway (wlroots): the backend chosen at run time and named
//! by `doctor`, screenshots compared against `grim`'s, the window list and focus against
//! sway's IPC (`swaymsg`), Unicode typing and key combos checked by `foot` (a terminal in raw
//! mode writing what it receives to a file), clicks checked by a GTK app on Wayland, evidence
//! shots, and keys refused where their window cannot be confirmed.

use std::sync::mpsc;
use std::time::Duration;

use computer_tests::desktop::{App, TestDesktop};
use computer_tests::wayland::{Sway, TypingTarget};
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// The suites share one compositor: one test at a time owns its windows and focus.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A daemon on the shared sway, with no X display.
fn daemon() -> Daemon {
    Sway::shared().start_daemon("")
}

async fn gui(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon
        .call_raw_once(json!({"surface": "gui", "command": command, "args": args}))
        .await
}

/// A GTK window on Wayland that prints each button press with its window-local point.
const CLICK_APP: &str = r#"
import json, sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, Gdk
win = Gtk.Window(title=sys.argv[1])
# No client-side title bar: a press there would start a window move instead of a click.
win.set_decorated(False)
area = Gtk.EventBox()
area.add_events(Gdk.EventMask.BUTTON_PRESS_MASK)
def press(w, ev):
    if ev.type == Gdk.EventType.BUTTON_PRESS:
        print(json.dumps({"click": ev.button, "x": int(ev.x), "y": int(ev.y)}), flush=True)
area.connect("button-press-event", press)
win.add(area)
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"#;

struct ClickApp {
    _app: App,
    pid: u32,
    lines: mpsc::Receiver<Value>,
}

impl ClickApp {
    fn launch(title: &str) -> ClickApp {
        ClickApp::launch_on(Sway::shared(), title)
    }

    fn launch_on(sway: &Sway, title: &str) -> ClickApp {
        // Through `env` (which execs, keeping the pid), with the Python that has GTK bindings.
        let python = computer_tests::desktop::gi_python();
        let mut app = sway.launch("env", &[&python, "-c", CLICK_APP, title]);
        let pid = app.pid();
        let lines = app.json_lines();
        sway.wait_view(pid);
        ClickApp {
            _app: app,
            pid,
            lines,
        }
    }

    fn next_click(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the GTK app reports the click")
    }
}

/// The daemon's window entry for a process, once its list shows it.
async fn window_of(daemon: &Daemon, pid: u32) -> Value {
    for _ in 0..200 {
        let out = gui(daemon, "windows", json!({})).await;
        if let Some(window) = out["windows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|w| w["pid"].as_u64() == Some(u64::from(pid)))
        {
            return window.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no window of pid {pid} in gui windows");
}

/// Waits until sway says the window of `pid` has the focus.
fn wait_sway_focus(pid: u32) {
    wait_for(
        &format!("sway to focus pid {pid}"),
        Duration::from_secs(10),
        || {
            Sway::shared()
                .views()
                .iter()
                .any(|v| v["pid"].as_u64() == Some(u64::from(pid)) && v["focused"] == true)
                .then_some(())
        },
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wayland_backend_is_chosen_and_doctor_says_why_and_what_is_missing() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let entry = daemon.doctor_surface("gui");
    assert_eq!(entry["availability"]["status"], "ready", "{entry}");
    let backend = entry["backend"].as_str().unwrap_or_default();
    assert!(backend.starts_with("wayland-wlroots"), "{backend}");
    assert!(backend.contains("WAYLAND_DISPLAY="), "why: {backend}");
    assert!(backend.contains("wlr-screencopy"), "{backend}");
    assert!(backend.contains("sway"), "{backend}");
    assert!(backend.contains("missing:"), "{backend}");
    assert!(backend.contains("pointer position"), "{backend}");

    // The tool lists the gui commands that work here: no `cursor` (no protocol reads it).
    let client = daemon.client().await;
    let listed = computer_tests::listed_commands(&client, "gui").await;
    client.close().await;
    let gui_commands: Vec<&str> = listed.iter().map(String::as_str).collect();
    assert!(gui_commands.contains(&"screenshot"), "{gui_commands:?}");
    let description = format!("{gui_commands:?}");
    assert!(gui_commands.contains(&"click"), "{description}");
    assert!(gui_commands.contains(&"type"), "{description}");
    assert!(!gui_commands.contains(&"cursor"), "{description}");

    // Asked anyway, it is refused with the commands that work, and receipted.
    let out = gui(&daemon, "cursor", json!({})).await;
    assert_eq!(out["error"]["code"], "unavailable", "{out}");
    assert_eq!(out["error"]["path"], "command", "{out}");
    assert!(
        out["error"]["valid"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "click"),
        "{out}"
    );
    // A click without a point cannot be aimed: the pointer position is unknown.
    let out = gui(&daemon, "click", json!({})).await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x and y"),
        "{out}"
    );
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn screenshots_match_grim_and_say_their_origin_and_scale() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let sway = Sway::shared();
    let daemon = daemon();
    // Something on screen besides the background: a terminal.
    let _target = TypingTarget::launch("shot-target");
    let monitors = gui(&daemon, "monitors", json!({})).await;
    assert_eq!(
        monitors["monitors"][0],
        json!({"index": 0, "name": "HEADLESS-1", "x": 0, "y": 0, "width": 1920, "height": 1080, "primary": true}),
        "{monitors}"
    );
    // The screen is still now (cat waits); grim and the daemon must agree pixel for pixel.
    // A few tries allow for a frame still being drawn when one of them captured.
    let mut last = String::new();
    for attempt in 0..5 {
        let out = gui(&daemon, "screenshot", json!({"max_dim": 4096})).await;
        assert_eq!(out["ok"], true, "{out}");
        assert_eq!(
            (&out["width"], &out["height"], &out["scale"]),
            (&json!(1920), &json!(1080), &json!(1.0)),
            "{out}"
        );
        assert_eq!((&out["origin_x"], &out["origin_y"]), (&json!(0), &json!(0)));
        let ours = image::load_from_memory(&std::fs::read(out["path"].as_str().unwrap()).unwrap())
            .unwrap()
            .to_rgb8();
        let grim_file = sway.log_dir.join(format!("grim-{attempt}.png"));
        let theirs = image::load_from_memory(&sway.grim(&grim_file))
            .unwrap()
            .to_rgb8();
        assert_eq!(ours.dimensions(), theirs.dimensions());
        let differing = ours
            .pixels()
            .zip(theirs.pixels())
            .filter(|(a, b)| a != b)
            .count();
        if differing == 0 {
            // A region keeps its origin and holds that part of the screen, checked against
            // grim's shot right after it (a few tries again: the terminal may still be drawing
            // its first frame, which CI saw once under load).
            let mut region = String::new();
            for region_try in 0..5 {
                let out = gui(
                    &daemon,
                    "screenshot",
                    json!({"region": {"x": 100, "y": 50, "width": 200, "height": 100}}),
                )
                .await;
                assert_eq!(
                    (&out["origin_x"], &out["origin_y"]),
                    (&json!(100), &json!(50))
                );
                let part =
                    image::load_from_memory(&std::fs::read(out["path"].as_str().unwrap()).unwrap())
                        .unwrap()
                        .to_rgb8();
                assert_eq!(part.dimensions(), (200, 100));
                let grim_file = sway.log_dir.join(format!("grim-region-{region_try}.png"));
                let now = image::load_from_memory(&sway.grim(&grim_file))
                    .unwrap()
                    .to_rgb8();
                let differing = part
                    .enumerate_pixels()
                    .filter(|(x, y, pixel)| *pixel != now.get_pixel(x + 100, y + 50))
                    .count();
                if differing == 0 {
                    region.clear();
                    break;
                }
                region = format!("{differing} pixels of the region differ from grim's");
            }
            assert!(region.is_empty(), "{region}");
            let small = gui(&daemon, "screenshot", json!({"max_dim": 960})).await;
            assert_eq!(
                (&small["width"], &small["scale"]),
                (&json!(960), &json!(2.0))
            );
            daemon.assert_chain_holds();
            return;
        }
        last = format!("{differing} pixels differ on attempt {attempt}");
    }
    panic!("the daemon's screenshot never matched grim's: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn windows_are_listed_with_sways_facts_and_focus_moves_between_them() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let sway = Sway::shared();
    let daemon = daemon();
    let first = TypingTarget::launch("list-first");
    let second = TypingTarget::launch("list-second");
    for target in [&first, &second] {
        let window = window_of(&daemon, target.pid).await;
        let view = sway.wait_view(target.pid);
        assert_eq!(window["app"], view["app_id"], "{window}");
        assert_eq!(window["title"], view["name"], "{window}");
        assert_eq!(
            [
                &window["x"],
                &window["y"],
                &window["width"],
                &window["height"]
            ],
            [
                &view["rect"]["x"],
                &view["rect"]["y"],
                &view["rect"]["width"],
                &view["rect"]["height"]
            ],
            "{window} vs sway {view}"
        );
        assert_eq!(window["monitor"], 0, "{window}");
    }
    // The later window has the focus; move it to the first and back, as sway sees it.
    for target in [&first, &second, &first] {
        let id = window_of(&daemon, target.pid).await["id"].clone();
        let out = gui(&daemon, "focus", json!({"window": id})).await;
        assert_eq!(out["ok"], true, "{out}");
        assert_eq!(out["focused"], true, "{out}");
        wait_sway_focus(target.pid);
        let listed = gui(&daemon, "windows", json!({})).await;
        let focused: Vec<&Value> = listed["windows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["focused"] == true)
            .collect();
        assert_eq!(focused.len(), 1, "{listed}");
        assert_eq!(focused[0]["id"], id, "{listed}");
    }
    // An unknown id names the field and the ids that exist.
    let out = gui(&daemon, "focus", json!({"window": 999_999})).await;
    assert_eq!(out["error"]["path"], "args.window", "{out}");
}

/// The first keys of a new virtual keyboard arrive whole: each fresh daemon makes one (the
/// last one's went with it, so the seat has no keyboard until then and foot must bind the new
/// one), and its first call types at once; the keys wait for the seat's announcement, not for
/// a fixed pause.
#[tokio::test(flavor = "multi_thread")]
async fn the_first_keys_of_a_new_virtual_keyboard_arrive_whole() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let sway = Sway::shared();
    let target = TypingTarget::launch("first-keys");
    sway.swaymsg(&[&format!("[pid={}] focus", target.pid)])
        .expect("focus the target through sway");
    wait_sway_focus(target.pid);
    let mut want = String::new();
    for round in 0..3 {
        let daemon = daemon();
        let text = format!("first-{round}-ü");
        let out = gui(&daemon, "type", json!({"text": text})).await;
        assert_eq!(out["ok"], true, "{out}");
        want.push_str(&text);
        target.wait_typed(want.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unicode_text_and_key_combos_reach_the_focused_app() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let target = TypingTarget::launch("typing-target");
    let id = window_of(&daemon, target.pid).await["id"].clone();
    let out = gui(&daemon, "focus", json!({"window": id})).await;
    assert_eq!(out["focused"], true, "{out}");

    let text = "héllo wörld ✓ 日本語 🙂 ÆØÅ";
    let out = gui(&daemon, "type", json!({"text": text})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["chars"], text.chars().count(), "{out}");
    assert_eq!(out["window"]["id"], id, "the reply names the window: {out}");
    target.wait_typed(text.as_bytes());

    // A second call with other characters (a new keymap), then a combo: ctrl+u is 0x15.
    let more = "Ω≈ç√";
    let out = gui(&daemon, "type", json!({"text": more})).await;
    assert_eq!(out["ok"], true, "{out}");
    let out = gui(&daemon, "key", json!({"combo": "ctrl+u"})).await;
    assert_eq!(out["ok"], true, "{out}");
    let mut want = format!("{text}{more}").into_bytes();
    want.push(0x15);
    target.wait_typed(&want);

    // The receipt names the window the keys went to, for policy and approvers.
    let receipts = daemon.receipts();
    assert!(
        receipts
            .iter()
            .any(|r| r.to_string().contains("typing-target")),
        "no receipt names the target window"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clicks_land_at_the_point_in_a_gtk_app_on_wayland() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let app = ClickApp::launch("wayland-click-target");
    let window = window_of(&daemon, app.pid).await;
    let (left, top) = (window["x"].as_i64().unwrap(), window["y"].as_i64().unwrap());
    for (dx, dy, button, number) in [(40, 30, "left", 1), (123, 77, "right", 3)] {
        let out = gui(
            &daemon,
            "click",
            json!({"x": left + dx, "y": top + dy, "button": button}),
        )
        .await;
        assert_eq!(out["ok"], true, "{out}");
        assert_eq!(
            (&out["x"], &out["y"]),
            (&json!(left + dx), &json!(top + dy))
        );
        let click = app.next_click();
        assert_eq!(click["click"], number, "{click}");
        assert_eq!(
            (&click["x"], &click["y"]),
            (&json!(dx), &json!(dy)),
            "{click}"
        );
    }
    // The click's facts name the window under the point, from the compositor.
    let receipts = daemon.receipts();
    assert!(
        receipts
            .iter()
            .any(|r| r.to_string().contains("wayland-click-target")),
        "no receipt names the clicked window"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn evidence_shots_are_taken_on_wayland() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let out = daemon
        .call_raw_once(
            json!({"surface": "shell", "command": "run", "args": {"argv": ["true"]},
               "complications": {"evidence": "full"}}),
        )
        .await;
    assert_eq!(out["ok"], true, "{out}");
    for label in ["before", "after"] {
        let shot = &out["evidence"][label];
        let path = shot["path"].as_str().unwrap_or_else(|| panic!("{out}"));
        let image = image::load_from_memory(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!((image.width(), image.height()), (1920, 1080), "{shot}");
    }
    daemon.assert_chain_holds();
}

/// A hostile agent types when no window has the focus (the keys could reach a surface no
/// protocol lists, such as a lock screen or panel): refused, nothing typed, receipted; typing
/// into a focused window still works.
#[tokio::test(flavor = "multi_thread")]
async fn keys_are_refused_when_the_focused_window_cannot_be_confirmed() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let sway = Sway::shared();
    let daemon = daemon();
    let target = TypingTarget::launch("unfocused-target");
    // An empty workspace takes the focus away from every window.
    sway.swaymsg(&["workspace", "computer-empty"]).unwrap();
    wait_for("no window focused", Duration::from_secs(10), || {
        (!sway.views().iter().any(|v| v["focused"] == true)).then_some(())
    });
    let out = gui(&daemon, "type", json!({"text": "leak"})).await;
    assert_eq!(out["ok"], false, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be confirmed"),
        "{out}"
    );
    let out = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(out["ok"], false, "{out}");

    // Back on the window's workspace, focused: the same call types.
    sway.swaymsg(&["workspace", "1"]).unwrap();
    let id = window_of(&daemon, target.pid).await["id"].clone();
    let out = gui(&daemon, "focus", json!({"window": id})).await;
    assert_eq!(out["focused"], true, "{out}");
    let out = gui(&daemon, "type", json!({"text": "ok"})).await;
    assert_eq!(out["ok"], true, "{out}");
    target.wait_typed(b"ok");
    daemon.assert_chain_holds();
}

/// A hostile agent acts on an approver's terminal on Wayland: a click on it, keys while it has
/// the focus, focusing it are refused (sway tells its pid). Windows whose owner cannot be told
/// (two with the same app id and title, which sway's facts cannot be joined to) may be an
/// approver's: pointer input is refused while one is open and approvers are connected. A click
/// on an ordinary window works before that.
#[tokio::test(flavor = "multi_thread")]
async fn input_on_an_approver_is_refused_on_wayland_even_where_owners_are_unknown() {
    let _sway = ONE_AT_A_TIME.lock().await;
    let sway = Sway::shared();
    // The approver runs in a terminal (foot holds a pty), so a line typed there is also a
    // command, which is asked first; nobody answers here, and what is asked never goes through.
    let daemon = sway.start_daemon("[approval]\ntimeout = \"1s\"\n");
    let ordinary = ClickApp::launch("wayland-ordinary-window");
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/as_approver.py");
    let control = daemon.control_socket();
    let approver = sway.launch(
        "foot",
        &[
            "--app-id",
            "approver-terminal",
            "--title",
            "approver-terminal",
            "python3",
            script.to_str().unwrap(),
            control.to_str().unwrap(),
            "cat",
        ],
    );
    let window = window_of(&daemon, approver.pid()).await;
    let (x, y) = (
        window["x"].as_i64().unwrap() + 20,
        window["y"].as_i64().unwrap() + 20,
    );
    // Refused once the approver inside the terminal has connected.
    let mut clicked = Value::Null;
    for _ in 0..200 {
        clicked = gui(&daemon, "click", json!({"x": x, "y": y})).await;
        if clicked["ok"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.assert_refused_as_targeting_an_approver(&clicked, "gui click on the approver");
    let focus = gui(&daemon, "focus", json!({"window": window["id"]})).await;
    daemon.assert_refused_as_targeting_an_approver(&focus, "gui focus of the approver");
    let typed = gui(&daemon, "type", json!({"text": "y\n"})).await;
    if typed["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("not approved"))
    {
        assert_eq!(typed["ok"], false, "gui type into the approver: {typed}");
    } else {
        daemon.assert_refused_as_targeting_an_approver(&typed, "gui type into the approver");
    }

    // An ordinary window's owner is known: clicking it works.
    let target = window_of(&daemon, ordinary.pid).await;
    let point =
        json!({"x": target["x"].as_i64().unwrap() + 30, "y": target["y"].as_i64().unwrap() + 30});
    let out = gui(&daemon, "click", point.clone()).await;
    assert_eq!(out["ok"], true, "{out}");
    ordinary.next_click();

    // Twins whose owners cannot be told: any of them may be an approver's.
    let _twins: Vec<App> = (0..2)
        .map(|_| sway.launch("foot", &["--app-id", "twin", "--title", "twin", "cat"]))
        .collect();
    wait_for("both twins listed", Duration::from_secs(20), || {
        (sway
            .views()
            .iter()
            .filter(|v| v["app_id"] == "twin")
            .count()
            == 2)
            .then_some(())
    });
    let listed = gui(&daemon, "windows", json!({})).await;
    let twins: Vec<&Value> = listed["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["app"] == "twin")
        .collect();
    assert_eq!(twins.len(), 2, "{listed}");
    assert!(twins.iter().all(|w| w["pid"].is_null()), "{listed}");
    let out = gui(&daemon, "click", point).await;
    daemon.assert_refused_as_targeting_an_approver(&out, "a click while owners are unknown");
    daemon.assert_chain_holds();
}

/// A second monitor plugged in while the daemon runs, at scale 2 and placed right of the first
/// (`swaymsg create_output`, then `output … scale 2 pos 1920 0`): `monitors` lists both in
/// layout units; a screenshot of it says its origin and scale (half a unit per pixel) and
/// matches `grim -o` on that output pixel for pixel; a point read off that screenshot,
/// mapped back by origin + pixel × scale, is where the GTK app on that monitor says the click
/// landed; the whole screen across both scales is one image at one pixel per unit. On a sway
/// of its own: sway 1.7 cannot take a headless output away again.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_monitor_at_scale_two_is_listed_captured_and_clicked_exactly() {
    let own = Sway::own("two-monitors");
    let sway = &own;
    let daemon = sway.start_daemon("");
    // The daemon's connection exists before the monitor does: it must see it come.
    let before = gui(&daemon, "monitors", json!({})).await;
    assert_eq!(
        before["monitors"].as_array().map(Vec::len),
        Some(1),
        "{before}"
    );
    sway.swaymsg(&["create_output"]).expect("create_output");
    let name = wait_for("sway to add an output", Duration::from_secs(10), || {
        outputs(sway).into_iter().find(|o| o != "HEADLESS-1")
    });
    sway.swaymsg(&[
        "output",
        &name,
        "resolution",
        "1280x720",
        "position",
        "1920",
        "0",
        "scale",
        "2",
    ])
    .expect("configure the new output");
    sway.swaymsg(&["focus", "output", &name]).expect("focus it");
    let second = json!({"index": 1, "name": name, "x": 1920, "y": 0, "width": 640,
                        "height": 360, "primary": false});
    let mut listed = Value::Null;
    for _ in 0..200 {
        listed = gui(&daemon, "monitors", json!({})).await;
        if listed["monitors"][1] == second {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(listed["monitors"][1], second, "{listed}");
    assert_eq!(listed["monitors"][0]["name"], "HEADLESS-1", "{listed}");

    // An app on the new monitor (new windows open on the focused output).
    let app = ClickApp::launch_on(sway, "scaled-click-target");
    let window = window_of(&daemon, app.pid).await;
    assert_eq!(window["monitor"], 1, "{window}");
    let (left, top) = (window["x"].as_i64().unwrap(), window["y"].as_i64().unwrap());
    assert!(
        left >= 1920,
        "the window lies on the second monitor: {window}"
    );

    let mut matched = None;
    for attempt in 0..5 {
        let shot = gui(
            &daemon,
            "screenshot",
            json!({"monitor": 1, "max_dim": 4096}),
        )
        .await;
        assert_eq!(shot["ok"], true, "{shot}");
        assert_eq!(
            (&shot["origin_x"], &shot["origin_y"], &shot["scale"]),
            (&json!(1920), &json!(0), &json!(0.5)),
            "{shot}"
        );
        assert_eq!(
            (&shot["width"], &shot["height"]),
            (&json!(1280), &json!(720))
        );
        let ours = image::load_from_memory(&std::fs::read(shot["path"].as_str().unwrap()).unwrap())
            .unwrap()
            .to_rgb8();
        let grim_file = sway.log_dir.join(format!("grim-scaled-{attempt}.png"));
        let status = sway
            .command("grim")
            .args(["-o", &name])
            .arg(&grim_file)
            .status()
            .expect("grim runs");
        assert!(status.success(), "grim -o {name}");
        let theirs = image::open(&grim_file).unwrap().to_rgb8();
        assert_eq!(ours.dimensions(), theirs.dimensions());
        if ours == theirs {
            matched = Some(shot);
            break;
        }
    }
    let shot = matched.expect("the daemon's shot of the scaled monitor never matched grim's");

    // A point read off the scaled shot: pixel (px, py) is layout point origin + pixel × scale.
    let (px, py) = (2 * (left - 1920) + 246, 2 * top + 158);
    let scale = shot["scale"].as_f64().unwrap();
    let x = shot["origin_x"].as_i64().unwrap() + (px as f64 * scale) as i64;
    let y = shot["origin_y"].as_i64().unwrap() + (py as f64 * scale) as i64;
    let out = gui(&daemon, "click", json!({"x": x, "y": y})).await;
    assert_eq!(out["ok"], true, "{out}");
    let click = app.next_click();
    assert_eq!(
        (&click["x"], &click["y"]),
        (&json!(x - left), &json!(y - top)),
        "the app saw the click elsewhere: {click}"
    );
    assert_eq!((x - left, y - top), (123, 79));

    // The whole screen spans both scales: one image at one pixel per unit.
    let whole = gui(&daemon, "screenshot", json!({"max_dim": 4096})).await;
    assert_eq!(whole["ok"], true, "{whole}");
    assert_eq!(
        (&whole["width"], &whole["height"], &whole["scale"]),
        (&json!(2560), &json!(1080), &json!(1.0)),
        "{whole}"
    );
    daemon.assert_chain_holds();
}

/// The names of sway's active outputs.
fn outputs(sway: &Sway) -> Vec<String> {
    let list: Value =
        serde_json::from_str(&sway.swaymsg(&["-t", "get_outputs"]).expect("get_outputs"))
            .expect("JSON");
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["active"] == true)
        .filter_map(|o| o["name"].as_str().map(str::to_string))
        .collect()
}
