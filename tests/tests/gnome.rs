//! The gui surface on a real headless GNOME compositor (Mutter 43, its RemoteDesktop and
//! ScreenCast D-Bus API, frames over PipeWire): the backend chosen at run time and named by
//! `doctor`, screenshots checked against the colour patches a fullscreen GTK app (on Wayland)
//! paints at known points, clicks and typing checked by that app, the window list and focus
//! from AT-SPI, input refused where its target cannot be confirmed, and the person's consent to
//! the remote-desktop session: asked once through the approval path, kept in the keychain
//! across daemon restarts, a refusal or a revoked grant saying how to grant it.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use computer_tests::desktop::TestDesktop;
use computer_tests::gnome::{BLUE_PATCH, IndependentCast, Mutter, Probe, RED_PATCH, secret_tool};
use computer_tests::{Daemon, structured, wait_for};
use serde_json::{Value, json};

/// The suites share one compositor: one test at a time owns its windows and focus.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A daemon on the shared Mutter, with no X display.
fn daemon() -> Daemon {
    Mutter::shared().start_daemon("")
}

async fn gui(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon.call_once("gui", command, args).await
}

/// A gui call on a task of its own (it may wait for a person's answer).
fn gui_task(daemon: &Daemon, command: &str, args: Value) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(json!({"surface": "gui", "command": command, "args": args}))
}

/// The pending request that asks for the consent, once it is pending.
fn pending_consent(daemon: &Daemon) -> Value {
    wait_for("the consent to be asked", Duration::from_secs(20), || {
        daemon
            .pending_approvals()
            .into_iter()
            .find(|r| r.to_string().contains("consent needed"))
    })
}

/// Makes sure the person's consent is kept before a test that is about something else: a
/// screenshot that asks for it is allowed by the person (`computer approvals allow`).
async fn with_consent(daemon: &Daemon) {
    let call = gui_task(daemon, "screenshot", json!({}));
    let asked = computer_tests::try_wait_for(Duration::from_secs(20), || {
        if call.is_finished() {
            return Some(None);
        }
        daemon
            .pending_approvals()
            .into_iter()
            .find(|r| r.to_string().contains("consent needed"))
            .map(Some)
    })
    .expect("the screenshot neither ran nor asked");
    if let Some(pending) = asked {
        let id = pending["id"].to_string();
        assert!(daemon.cli(&["approvals", "allow", &id]).status.success());
    }
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
}

/// Removes the kept consent, as a person would with the keychain's own tools.
fn revoke_consent() {
    secret_tool(&["clear", "service", "computer.gui"]);
    assert!(
        !secret_tool(&["search", "--all", "service", "computer.gui"]).contains("computer.gui"),
        "the consent is still kept"
    );
}

/// The daemon's window entry for a process, once AT-SPI lists it (and, with `active`, once it
/// is the active one).
async fn window_of(daemon: &Daemon, pid: u32, active: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = gui(daemon, "windows", json!({})).await;
        if let Some(window) = last["windows"].as_array().into_iter().flatten().find(|w| {
            w["pid"].as_u64() == Some(u64::from(pid)) && (!active || w["focused"] == true)
        }) {
            return window.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no window of pid {pid} (active: {active}) in gui windows: {last}");
}

fn decode(out: &Value) -> image::RgbImage {
    image::load_from_memory(&std::fs::read(out["path"].as_str().unwrap()).unwrap())
        .unwrap()
        .to_rgb8()
}

fn centre((x, y, w, h): (i32, i32, i32, i32)) -> (u32, u32) {
    ((x + w / 2) as u32, (y + h / 2) as u32)
}

/// Waits (bounded) until a full screenshot shows the probe's patches where it painted them:
/// the window is fullscreen and on screen (Mutter may show a new window's first frames at
/// another place, and sends a frame only when the screen changes). The last screenshot.
async fn shows_the_patches(daemon: &Daemon) -> Value {
    let (red, blue) = (centre(RED_PATCH), centre(BLUE_PATCH));
    let mut last = Value::Null;
    for _ in 0..100 {
        last = gui(daemon, "screenshot", json!({"max_dim": 4096})).await;
        assert_eq!(last["ok"], true, "{last}");
        let shot = decode(&last);
        let corner = (RED_PATCH.0 as u32, RED_PATCH.1 as u32);
        if shot.get_pixel(red.0, red.1).0 == [255, 0, 0]
            && shot.get_pixel(corner.0, corner.1).0 == [255, 0, 0]
            && shot.get_pixel(corner.0 - 1, corner.1 - 1).0 == [255, 255, 255]
            && shot.get_pixel(blue.0, blue.1).0 == [0, 0, 255]
        {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the patches never showed where the app painted them: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gnome_backend_is_chosen_and_doctor_says_why_and_what_is_missing() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let entry = daemon.doctor_surface("gui");
    assert_eq!(entry["availability"]["status"], "ready", "{entry}");
    let backend = entry["backend"].as_str().unwrap_or_default();
    assert!(backend.starts_with("gnome-mutter"), "{backend}");
    assert!(
        backend.contains("org.gnome.Mutter.RemoteDesktop is on the session bus"),
        "why: {backend}"
    );
    assert!(backend.contains("missing: window positions"), "{backend}");

    // The tool lists what works here: no `focus` (no window can be raised), no `cursor`.
    let client = daemon.client().await;
    let listed = computer_tests::listed_commands(&client, "gui").await;
    client.close().await;
    let gui_commands: Vec<&str> = listed.iter().map(String::as_str).collect();
    let description = format!("{gui_commands:?}");
    for offered in ["screenshot", "windows", "click", "type", "key"] {
        assert!(gui_commands.contains(&offered), "{offered}: {description}");
    }
    for missing in ["focus", "cursor"] {
        assert!(!gui_commands.contains(&missing), "{missing}: {description}");
    }
    let out = gui(&daemon, "focus", json!({"window": 1})).await;
    assert_eq!(out["error"]["code"], "unavailable", "{out}");
    daemon.assert_chain_holds();
}

/// The screenshot shows what the app painted where it painted it (an independent check: the
/// app's own coordinates are the screen's, as it is fullscreen), with origin and scale.
#[tokio::test(flavor = "multi_thread")]
async fn screenshots_show_the_patches_the_app_painted_with_origin_and_scale() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    with_consent(&daemon).await;
    let _probe = Probe::launch("gnome-shot");
    let monitors = gui(&daemon, "monitors", json!({})).await;
    assert_eq!(
        (
            &monitors["monitors"][0]["width"],
            &monitors["monitors"][0]["height"]
        ),
        (&json!(1920), &json!(1080)),
        "{monitors}"
    );
    let last = shows_the_patches(&daemon).await;
    let shot = decode(&last);
    // Just outside the patches, the white page.
    assert_eq!(shot.get_pixel(199, 299).0, [255, 255, 255]);
    assert_eq!(shot.get_pixel(400, 400).0, [255, 255, 255]);
    // An independent capture (its own screen cast, read by gst-launch's pipewiresrc) agrees
    // pixel for pixel, but for the entry, whose text cursor blinks.
    let cast = IndependentCast::start();
    let mutter = Mutter::shared();
    let mut differing = usize::MAX;
    for attempt in 0..5 {
        let ours = decode(&gui(&daemon, "screenshot", json!({"max_dim": 4096})).await);
        let theirs = image::load_from_memory(
            &cast.capture(&mutter.log_dir.join(format!("gst-{attempt}.png"))),
        )
        .unwrap()
        .to_rgb8();
        assert_eq!(ours.dimensions(), theirs.dimensions());
        differing = ours
            .enumerate_pixels()
            .zip(theirs.pixels())
            .filter(|((x, y, a), b)| !(*x < 600 && *y < 60) && a != b)
            .count();
        if differing == 0 {
            break;
        }
    }
    assert_eq!(differing, 0, "pixels differ from gst-launch's capture");
    assert_eq!(
        (&last["width"], &last["height"], &last["scale"]),
        (&json!(1920), &json!(1080), &json!(1.0)),
        "{last}"
    );
    assert_eq!(
        (&last["origin_x"], &last["origin_y"]),
        (&json!(0), &json!(0))
    );

    // A region keeps its origin: its corners are the blue patch's.
    let (x, y, w, h) = BLUE_PATCH;
    let out = gui(
        &daemon,
        "screenshot",
        json!({"region": {"x": x, "y": y, "width": w, "height": h}}),
    )
    .await;
    assert_eq!((&out["origin_x"], &out["origin_y"]), (&json!(x), &json!(y)));
    let part = decode(&out);
    assert_eq!(part.dimensions(), (w as u32, h as u32));
    assert!(part.pixels().all(|p| p.0 == [0, 0, 255]), "{out}");
    // A downscaled shot says its scale.
    let small = gui(&daemon, "screenshot", json!({"max_dim": 960})).await;
    assert_eq!(
        (&small["width"], &small["scale"]),
        (&json!(960), &json!(2.0))
    );
    daemon.assert_chain_holds();
}

/// A click lands at its point (the app reports it, in screen coordinates); text reaches the
/// entry of the active window, which AT-SPI confirms before any key is sent; characters the
/// layout lacks are refused whole, nothing typed.
#[tokio::test(flavor = "multi_thread")]
async fn clicks_land_at_their_point_and_text_reaches_the_active_window() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    with_consent(&daemon).await;
    let probe = Probe::launch("gnome-input");
    shows_the_patches(&daemon).await;
    let out = gui(&daemon, "click", json!({"x": 1000, "y": 600})).await;
    assert_eq!(out["ok"], true, "{out}");
    let click = probe.wait_for_line("the app to report the click", |v| v["click"] == 1);
    assert_eq!(
        (&click["x"], &click["y"]),
        (&json!(1000), &json!(600)),
        "{click}"
    );
    let out = gui(
        &daemon,
        "click",
        json!({"x": 1701, "y": 33, "button": "right"}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    let click = probe.wait_for_line("the right click", |v| v["click"] == 3);
    assert_eq!(
        (&click["x"], &click["y"]),
        (&json!(1701), &json!(33)),
        "{click}"
    );

    // AT-SPI names the probe's window as the active one, with its process.
    let window = window_of(&daemon, probe.pid(), true).await;
    assert_eq!(window["title"], probe.title, "{window}");

    let out = gui(&daemon, "type", json!({"text": "Hello, GNOME 43!"})).await;
    assert_eq!(out["ok"], true, "{out}");
    probe.wait_for_line("the typed text", |v| v["text"] == "Hello, GNOME 43!");
    // The receipt names the window the keys went to, for policy and approvers.
    let intent = daemon.receipt_row(&out["receipt"], "intent").to_string();
    assert!(
        intent.contains(&probe.title) && intent.contains(&format!("\"pid\":{}", probe.pid())),
        "the intent names no target window: {intent}"
    );

    let out = gui(&daemon, "type", json!({"text": " café"})).await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert_eq!(out["error"]["path"], "args.text", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("'é' (U+00E9)"), "{out}");
    assert!(message.contains("nothing was typed"), "{out}");
    let out = gui(&daemon, "key", json!({"combo": "ctrl+a"})).await;
    assert_eq!(out["ok"], true, "{out}");
    let out = gui(&daemon, "key", json!({"combo": "BackSpace"})).await;
    assert_eq!(out["ok"], true, "{out}");
    probe.wait_for_line("the text selected and erased", |v| v["text"] == "");
    assert!(
        !probe.lines().iter().any(|v| v["text"]
            .as_str()
            .is_some_and(|t| t.contains('é') || t.contains(" caf"))),
        "part of the refused text was typed: {:?}",
        probe.lines()
    );
    daemon.assert_chain_holds();
}

/// Keys are refused when no window AT-SPI knows is active (nothing is typed blind), and typing
/// works once the app's window is back.
#[tokio::test(flavor = "multi_thread")]
async fn keys_are_refused_when_no_active_window_can_be_confirmed() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    with_consent(&daemon).await;
    let probe = Probe::launch("gnome-gone");
    window_of(&daemon, probe.pid(), true).await;
    drop(probe);
    let mut out = Value::Null;
    for _ in 0..200 {
        out = gui(&daemon, "type", json!({"text": "blind"})).await;
        if out["ok"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(out["ok"], false, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot be confirmed"), "{out}");
    // The remedy is one that works on GNOME, which has no `gui focus`.
    assert!(message.contains("`gui click`"), "{out}");
    assert!(!message.contains("focus a window first"), "{out}");
    let probe = Probe::launch("gnome-back");
    window_of(&daemon, probe.pid(), true).await;
    let out = gui(&daemon, "type", json!({"text": "ok"})).await;
    assert_eq!(out["ok"], true, "{out}");
    probe.wait_for_line("the typed text", |v| v["text"] == "ok");
    daemon.assert_chain_holds();
}

/// A consent the person refuses inside a multi-step call says what was asked and how to grant
/// it, as the refusal of a single call does; nothing is kept, and a call that needs no consent
/// still runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_consent_refused_inside_steps_says_how_to_grant_it() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    revoke_consent();
    let daemon = daemon();
    let call = daemon.call_task(json!({"steps": [
        {"surface": "gui", "command": "monitors", "args": {}},
        {"surface": "gui", "command": "screenshot", "args": {}},
    ]}));
    let id = pending_consent(&daemon)["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = call.await.unwrap();
    assert_eq!(out["ok"], false, "{out}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not approved"), "{out}");
    assert!(message.contains("consent needed"), "{out}");
    assert!(message.contains("To grant it, approve"), "{out}");
    assert!(
        !secret_tool(&["search", "--all", "service", "computer.gui"]).contains("computer.gui"),
        "a refused consent was kept"
    );
    let out = gui(&daemon, "windows", json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    daemon.assert_chain_holds();
}

/// A hostile agent acts while a person's approver is connected. Mutter tells no window
/// positions, so any point may lie on the approver's window: pointer input is refused. Keys
/// while the approver's own window is active are refused (AT-SPI names its process). Reading
/// the screen still works, and so do keys for an ordinary active window.
#[tokio::test(flavor = "multi_thread")]
async fn input_that_may_reach_an_approver_is_refused_on_gnome() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    let mutter = Mutter::shared();
    let daemon = daemon();
    with_consent(&daemon).await;
    let ordinary = Probe::launch("gnome-ordinary");
    window_of(&daemon, ordinary.pid(), true).await;
    shows_the_patches(&daemon).await;
    let out = gui(&daemon, "click", json!({"x": 900, "y": 900})).await;
    assert_eq!(out["ok"], true, "before any approver: {out}");

    // The approver: the probe app itself, connected to the control socket.
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/as_approver.py");
    let probe_script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("clients/gtk_fullscreen_probe.py");
    let python = computer_tests::desktop::gi_python();
    let control = daemon.control_socket();
    let mut approver = mutter.launch(
        "env",
        &[
            &python,
            script.to_str().unwrap(),
            control.to_str().unwrap(),
            &python,
            probe_script.to_str().unwrap(),
            "gnome-approver",
        ],
    );
    let mut lines = BufReader::new(approver.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "registered");
    let window = window_of(&daemon, approver.pid(), true).await;
    assert_eq!(window["title"], "gnome-approver", "{window}");

    let out = gui(&daemon, "click", json!({"x": 900, "y": 900})).await;
    daemon.assert_refused_as_targeting_an_approver(&out, "a click while window places are unknown");
    let out = gui(&daemon, "type", json!({"text": "y\n"})).await;
    daemon.assert_refused_as_targeting_an_approver(&out, "keys into the approver's window");
    let out = gui(&daemon, "screenshot", json!({})).await;
    assert_eq!(out["ok"], true, "{out}");

    // The approver's window gone, the ordinary window is active again: keys reach it.
    drop(lines);
    drop(approver);
    window_of(&daemon, ordinary.pid(), true).await;
    let out = gui(&daemon, "type", json!({"text": "fine"})).await;
    assert_eq!(out["ok"], true, "{out}");
    ordinary.wait_for_line("the typed text", |v| v["text"] == "fine");
    daemon.assert_chain_holds();
}

/// The person is asked once, through the approval path, before the first remote-desktop
/// session; a refusal is a clear error saying how to grant it, and nothing is kept. Once
/// granted, the grant is in the keychain (its value nowhere in receipts or logs), reused after
/// a daemon restart without asking, and a revoked grant asks again.
#[tokio::test(flavor = "multi_thread")]
async fn consent_is_asked_once_kept_across_a_restart_and_a_refusal_says_how_to_grant_it() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    revoke_consent();
    let mut daemon = daemon();
    // Listing windows (AT-SPI) starts no session: not asked.
    let out = gui(&daemon, "windows", json!({})).await;
    assert_eq!(out["ok"], true, "{out}");

    // Refused: a clear error that says how to grant it; nothing kept.
    let call = gui_task(&daemon, "screenshot", json!({}));
    let pending = pending_consent(&daemon);
    assert!(
        pending.to_string().contains("GNOME remote-desktop session"),
        "the person is told what they consent to: {pending}"
    );
    let id = pending["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("consent needed"), "{out}");
    assert!(message.contains("To grant it, approve"), "{out}");
    assert!(
        !secret_tool(&["search", "--all", "service", "computer.gui"]).contains("computer.gui"),
        "a refused consent was kept"
    );

    // Granted: the call runs, and the grant is kept in the keychain.
    let call = gui_task(&daemon, "screenshot", json!({}));
    let id = pending_consent(&daemon)["id"].to_string();
    assert!(daemon.cli(&["approvals", "allow", &id]).status.success());
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    let item = secret_tool(&["search", "--all", "service", "computer.gui"]);
    assert!(
        item.contains("attribute.username = gnome-remote-desktop"),
        "{item}"
    );
    let value = secret_tool(&[
        "lookup",
        "service",
        "computer.gui",
        "username",
        "gnome-remote-desktop",
    ]);
    assert!(value.trim().len() >= 32, "a grant value: {value:?}");
    // Not asked again: input runs at once.
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        gui_task(&daemon, "click", json!({"x": 10, "y": 1000})),
    )
    .await
    .expect("a click after the grant is not asked")
    .unwrap();
    assert_eq!(out["ok"], true, "{out}");

    // Kept across a restart: the new daemon's first session is not asked.
    daemon.stop_with(libc::SIGTERM);
    daemon.restart();
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        gui_task(&daemon, "screenshot", json!({})),
    )
    .await
    .expect("a screenshot after a restart is not asked")
    .unwrap();
    assert_eq!(out["ok"], true, "{out}");
    // The grant's value is in no receipt and no log line.
    let receipts = daemon.cli(&["receipts", "export"]).stdout;
    assert!(
        !receipts.contains(value.trim()),
        "the grant's value is in a receipt"
    );
    assert!(
        !daemon.log_text().contains(value.trim()),
        "the grant's value is logged"
    );

    // Revoked: the next call that needs the session asks again; refused, it says how.
    revoke_consent();
    // The running session rechecks the grant every few seconds: calls run until it notices.
    let (call, pending) = wait_for("a call to ask again", Duration::from_secs(30), || {
        let call = gui_task(&daemon, "click", json!({"x": 10, "y": 1000}));
        let asked = computer_tests::try_wait_for(Duration::from_secs(10), || {
            if call.is_finished() {
                return Some(None);
            }
            daemon
                .pending_approvals()
                .into_iter()
                .find(|r| r.to_string().contains("consent needed"))
                .map(Some)
        })
        .flatten();
        asked.map(|pending| (call, pending))
    });
    let id = pending["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("To grant it"),
        "{out}"
    );
    daemon.assert_chain_holds();
}

/// A hostile agent forges the person's consent through the daemon's own keychain surface (where
/// the config lets calls set values): refused, nothing kept, and the next session is still
/// asked; setting an ordinary item still works.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cannot_forge_the_consent_through_the_keychain_surface() {
    let _mutter = ONE_AT_A_TIME.lock().await;
    revoke_consent();
    let daemon = Mutter::shared().start_daemon(
        "[defaults]\nobserve = \"allow\"\nact = \"allow\"\nsecret = \"allow\"\n\
         [keychain]\nmodel_values = true\n",
    );
    let keychain = |args: Value| {
        let daemon = &daemon;
        async move {
            let client = daemon.client().await;
            let result = client
                .call_raw(json!({"surface": "keychain", "command": "set", "args": args}))
                .await
                .expect("call");
            client.close().await;
            structured(&result)
        }
    };
    let forged = keychain(json!({
        "reference": "keychain://computer.gui/gnome-remote-desktop",
        "value": "forged-by-an-agent",
    }))
    .await;
    assert_eq!(forged["error"]["code"], "denied", "{forged}");
    assert!(
        forged["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the daemon's own item"),
        "{forged}"
    );
    assert!(
        !secret_tool(&["search", "--all", "service", "computer.gui"]).contains("computer.gui"),
        "the forged consent was kept"
    );
    let ordinary = keychain(json!({
        "reference": "keychain://example.test/agent",
        "value": "an ordinary value",
    }))
    .await;
    assert_eq!(ordinary["ok"], true, "{ordinary}");

    // The session is still asked for.
    let call = gui_task(&daemon, "screenshot", json!({}));
    let id = pending_consent(&daemon)["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    assert_eq!(call.await.unwrap()["error"]["code"], "denied");
    daemon.assert_chain_holds();
}
