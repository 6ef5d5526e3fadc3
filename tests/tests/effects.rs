//! Acts say whether they took effect (`effect`, `effect_evidence`), against the real daemon on
//! the shared headless desktop with the GTK test app: a check button toggled and read back (by
//! `ax act` and by a gui click on it), a dialog that opened, text that landed in the entry, a
//! click on an insensitive button (a suspected no-op), a scroll nothing readable shows
//! (unverifiable), a denied act (refused, in reply and receipt), and a terminal session's
//! screen after `send`. Each effect is checked against the app's own report of what happened.

use std::time::Duration;

use computer_tests::desktop::{Desktop, TestApp, TestDesktop};
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// Tests that send input or move focus take turns on the shared desktop.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const ALLOW_ACTS: &str = "[defaults]\nact = \"allow\"\n";

/// Launches the test app with its insensitive button and waits until AT-SPI shows it.
async fn app_on_bus(daemon: &Daemon, title: &str) -> TestApp {
    let app = TestApp::launch_with(title, &["--effects"]);
    let pid = app.pid();
    wait_for("the app on AT-SPI", Duration::from_secs(20), || {
        let tree = futures_block(daemon.call_once("ax", "tree", json!({"app": pid})));
        tree["tree"]
            .as_str()
            .is_some_and(|t| t.contains("Unavailable"))
            .then_some(())
    });
    app
}

fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// The screen point at the middle of the element `selector` names in the app.
async fn middle_of(daemon: &Daemon, pid: u32, selector: &str) -> (i64, i64) {
    let read = daemon
        .call_once("ax", "read", json!({"app": pid, "selector": selector}))
        .await;
    let bounds = read["bounds"]
        .as_array()
        .unwrap_or_else(|| panic!("no bounds for {selector}: {read}"));
    let at = |i: usize| bounds[i].as_i64().unwrap();
    (at(0) + at(2) / 2, at(1) + at(3) / 2)
}

/// The effect a reply says, and that its result receipt records the same.
fn effect_of(daemon: &Daemon, reply: &Value) -> String {
    let effect = reply["effect"]
        .as_str()
        .unwrap_or_else(|| panic!("no effect in {reply}"))
        .to_string();
    let result = daemon.receipt_row(&reply["receipt"], "result");
    let recorded = if reply["ok"] == false && reply.get("error").is_some() {
        &result["body"]["effect"]
    } else {
        &result["body"]["fields"]["effect"]
    };
    assert_eq!(recorded, &json!(effect), "the receipt disagrees: {result}");
    effect
}

#[tokio::test(flavor = "multi_thread")]
async fn ax_act_reads_back_a_toggled_check_button_and_suspects_an_insensitive_button() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = app_on_bus(&daemon, "Effects Ax").await;
    let pid = app.pid();

    let toggled = daemon
        .call_once(
            "ax",
            "act",
            json!({"app": pid, "selector": "checkBox \"Dark mode\"", "action": "press"}),
        )
        .await;
    app.wait_line("check=True");
    assert_eq!(effect_of(&daemon, &toggled), "confirmed", "{toggled}");
    assert!(
        toggled["effect_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("reads checked")),
        "{toggled}"
    );

    let noop = daemon
        .call_once(
            "ax",
            "act",
            json!({"app": pid, "selector": "button \"Unavailable\"", "action": "press"}),
        )
        .await;
    assert_eq!(effect_of(&daemon, &noop), "suspected_noop", "{noop}");
    assert!(
        app.lines_starting("unavailable").is_empty(),
        "the insensitive button did act"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gui_acts_read_back_a_check_button_a_dialog_and_typed_text() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // The read-back's own log line says how many change signals the element sent.
    let daemon = Desktop::shared().start_daemon_with(
        ALLOW_ACTS,
        &[(
            "RUST_LOG",
            "info,computer_surfaces::gui::read_back=debug".to_string(),
        )],
    );
    let app = app_on_bus(&daemon, "Effects Gui").await;
    let pid = app.pid();

    // A click on the check button: its state read back through AT-SPI.
    let (x, y) = middle_of(&daemon, pid, "checkBox \"Dark mode\"").await;
    let clicked = daemon
        .call_once("gui", "click", json!({"x": x, "y": y}))
        .await;
    app.wait_line("check=True");
    assert_eq!(effect_of(&daemon, &clicked), "confirmed", "{clicked}");
    assert!(
        clicked["effect_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("checkBox \"Dark mode\" reads checked")),
        "{clicked}"
    );
    // The button's change was signalled to the read-back (which it waits on between reads),
    // not only found by reading again.
    let log = daemon.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("gui act read back") && l.contains("effect=Confirmed"))
        .unwrap_or_else(|| panic!("no read-back line in the log:\n{log}"));
    assert!(line.contains("watched=true"), "{line}");
    assert!(!line.contains("change_signals=0"), "{line}");

    // Clicked again, it unchecks: the hit test asks the path it found the first time all at
    // once, and that path still holds.
    let again = daemon
        .call_once("gui", "click", json!({"x": x, "y": y}))
        .await;
    app.wait_line("check=False");
    assert_eq!(effect_of(&daemon, &again), "confirmed", "{again}");

    // A click on the insensitive button: readable, and nothing changed. The path the check
    // button's clicks took parts from this one: the element judged is the button.
    let (x, y) = middle_of(&daemon, pid, "button \"Unavailable\"").await;
    let noop = daemon
        .call_once("gui", "click", json!({"x": x, "y": y}))
        .await;
    assert_eq!(effect_of(&daemon, &noop), "suspected_noop", "{noop}");
    assert!(
        noop["effect_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("\"Unavailable\"")),
        "{noop}"
    );

    // A scroll over the status label: nothing readable can show what it did.
    let (x, y) = middle_of(&daemon, pid, "label").await;
    let scrolled = daemon
        .call_once("gui", "scroll", json!({"x": x, "y": y, "dy": 1}))
        .await;
    assert_eq!(effect_of(&daemon, &scrolled), "unverifiable", "{scrolled}");

    // A click that opens a dialog: the window appeared.
    let (x, y) = middle_of(&daemon, pid, "button \"Open Dialog\"").await;
    let opened = daemon
        .call_once("gui", "click", json!({"x": x, "y": y}))
        .await;
    app.wait_line("dialog opened");
    assert_eq!(effect_of(&daemon, &opened), "confirmed", "{opened}");
    assert!(
        opened["effect_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("\"Confirm\" appeared")),
        "{opened}"
    );
    // Closed through ax: the button went away with its window.
    let closed = daemon
        .call_once(
            "ax",
            "act",
            json!({"app": pid, "selector": "button \"Close Dialog\"", "action": "press"}),
        )
        .await;
    app.wait_line("dialog closed");
    assert_eq!(effect_of(&daemon, &closed), "confirmed", "{closed}");

    // Text typed into the focused entry landed there; the evidence does not quote it.
    let (x, y) = middle_of(&daemon, pid, "textInput \"Your name\"").await;
    daemon
        .call_once("gui", "click", json!({"x": x, "y": y}))
        .await;
    let typed = daemon
        .call_once("gui", "type", json!({"text": "landed"}))
        .await;
    assert_eq!(effect_of(&daemon, &typed), "confirmed", "{typed}");
    let evidence = typed["effect_evidence"].as_str().unwrap();
    assert!(evidence.contains("typed text"), "{typed}");
    assert!(
        !evidence.contains("landed"),
        "the evidence quotes the text: {typed}"
    );

    // The pointer read back where it was moved.
    let moved = daemon
        .call_once("gui", "move", json!({"x": x + 3, "y": y}))
        .await;
    assert_eq!(effect_of(&daemon, &moved), "confirmed", "{moved}");

    // A click where no window lies: unverifiable from the first read after it, said so.
    let listed = daemon.call_once("gui", "windows", json!({})).await;
    let windows = listed["windows"].as_array().cloned().unwrap_or_default();
    let covers = |(x, y): (i64, i64)| {
        windows.iter().any(|w| {
            let (wx, wy) = (w["x"].as_i64().unwrap_or(0), w["y"].as_i64().unwrap_or(0));
            let (ww, wh) = (
                w["width"].as_i64().unwrap_or(0),
                w["height"].as_i64().unwrap_or(0),
            );
            x >= wx && y >= wy && x < wx + ww && y < wy + wh
        })
    };
    let bare = [(1915, 1075), (1915, 5), (5, 1075)]
        .into_iter()
        .find(|point| !covers(*point))
        .expect("a corner of the screen with no window");
    let on_nothing = daemon
        .call_once("gui", "click", json!({"x": bare.0, "y": bare.1}))
        .await;
    let evidence = on_nothing["effect_evidence"].as_str().unwrap_or_default();
    // The window manager may take the focus from the app on a click on the root, and the read
    // right after may already show it; else nothing readable can show the click.
    match effect_of(&daemon, &on_nothing).as_str() {
        "unverifiable" => assert!(
            evidence.starts_with("no window lies under the point"),
            "{on_nothing}"
        ),
        "confirmed" => assert!(evidence.contains("focus"), "{on_nothing}"),
        other => panic!("a click on no window read back as {other}: {on_nothing}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_act_says_refused_in_reply_and_receipt_and_read_back_can_be_turned_off() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(
        "[defaults]\nact = \"allow\"\n[[rules]]\nsurface = \"gui\"\ncommand = \"click\"\ndecision = \"deny\"\n",
    );
    let denied = daemon
        .call_once("gui", "click", json!({"x": 5, "y": 5}))
        .await;
    assert_eq!(denied["error"]["code"], "denied", "{denied}");
    assert_eq!(effect_of(&daemon, &denied), "refused", "{denied}");
    // An ordinary act still runs and reads back.
    let moved = daemon
        .call_once("gui", "move", json!({"x": 7, "y": 9}))
        .await;
    assert_eq!(effect_of(&daemon, &moved), "confirmed", "{moved}");
    // A read that is not an act carries no effect.
    let windows = daemon.call_once("gui", "windows", json!({})).await;
    assert!(windows.get("effect").is_none(), "{windows}");

    let off = Daemon::start_on_desktop("[defaults]\nact = \"allow\"\n[gui]\nread_back = false\n");
    let moved = off.call_once("gui", "move", json!({"x": 8, "y": 9})).await;
    assert_eq!(effect_of(&off, &moved), "unverifiable", "{moved}");
    assert_eq!(moved["effect_evidence"], "read-back off", "{moved}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_send_is_confirmed_when_the_screen_changed_and_suspected_when_it_did_not() {
    let daemon = Daemon::start_with_config(ALLOW_ACTS);
    let opened = daemon
        .call_once("shell", "open", json!({"argv": ["cat"]}))
        .await;
    let session = opened["session"].clone();
    let echoed = daemon
        .call_once(
            "shell",
            "send",
            json!({"session": session, "text": "echoed\n"}),
        )
        .await;
    assert_eq!(effect_of(&daemon, &echoed), "confirmed", "{echoed}");

    // A terminal that echoes nothing and a program that prints nothing: the screen stays.
    let opened = daemon
        .call_once(
            "shell",
            "open",
            json!({"argv": ["sh", "-c", "stty -echo; echo ready; exec cat > /dev/null"]}),
        )
        .await;
    let quiet = opened["session"].clone();
    let ready = daemon
        .call_once("shell", "read", json!({"session": quiet, "until": "ready"}))
        .await;
    assert_eq!(ready["met"], true, "{ready}");
    let unseen = daemon
        .call_once(
            "shell",
            "send",
            json!({"session": quiet, "text": "unseen\n"}),
        )
        .await;
    assert_eq!(effect_of(&daemon, &unseen), "suspected_noop", "{unseen}");
}
