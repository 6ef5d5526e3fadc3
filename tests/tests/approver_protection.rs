//! No agent may act on an approver through the gui or ax surface: a real GTK dialog (zenity)
//! runs as a connected approver on the shared headless desktop, and every way our surfaces offer
//! to press its "Yes" (ax act, a click on it, keys while it is active, focusing it) is refused
//! and receipted, while the dialog stays unanswered (it would exit at once if any got through).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;

use computer_tests::desktop::Desktop;
use computer_tests::{Daemon, wait_for};
use serde_json::Value;

fn call(daemon: &Daemon, surface: &str, command: &str, args: &str) -> Value {
    daemon
        .cli(&["call", surface, command, "--json", "--args", args])
        .json()
}

fn assert_refused(daemon: &Daemon, reply: &Value, what: &str) {
    assert_eq!(reply["ok"], false, "{what} went through: {reply}");
    assert_eq!(reply["error"]["code"], "denied", "{what}: {reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("approver"), "{what}: {message}");
    let receipt = reply["receipt"].as_str().expect("a receipt id");
    let result = daemon
        .receipts()
        .into_iter()
        .find(|r| r["call_id"] == receipt && r["kind"] == "result")
        .unwrap_or_else(|| panic!("{what}: no result receipt"));
    assert_eq!(
        result["body"]["refused"], "targets_approver",
        "{what}: {result}"
    );
}

#[test]
fn gui_and_ax_actions_on_an_approver_are_refused_and_receipted() {
    // Acts are allowed by the harness's default rules: only the approver protection can refuse.
    let daemon = Daemon::start_on_desktop("");
    let desktop = Desktop::shared();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/as_approver.py");
    let control = daemon.control_socket();
    let mut approver = desktop.launch(
        "python3",
        &[
            script.to_str().unwrap(),
            control.to_str().unwrap(),
            "zenity",
            "--question",
            "--title",
            "Protected approver",
            "--text",
            "Allow the request?",
        ],
    );
    let mut first = String::new();
    BufReader::new(approver.0.stdout.take().expect("stdout piped"))
        .read_line(&mut first)
        .expect("approver output");
    assert_eq!(first.trim(), "registered", "the approver did not connect");
    let pid = approver.pid();

    // Observing is allowed: find the dialog's window through our own gui surface.
    let window = wait_for("the approver's window", Duration::from_secs(20), || {
        let windows = call(&daemon, "gui", "windows", "{}");
        windows["windows"]
            .as_array()?
            .iter()
            .find(|w| w["pid"] == pid && w["focused"] == true && w["width"].as_u64() > Some(50))
            .cloned()
    });
    let id = window["id"].as_u64().unwrap();
    let (cx, cy) = (
        window["x"].as_i64().unwrap() + window["width"].as_i64().unwrap() / 2,
        window["y"].as_i64().unwrap() + window["height"].as_i64().unwrap() / 2,
    );

    // Its button is on the accessibility bus, and reading it is allowed too.
    wait_for("the dialog's Yes button", Duration::from_secs(20), || {
        let found = call(
            &daemon,
            "ax",
            "find",
            &format!(r#"{{"app":{pid},"selector":"button \"Yes\""}}"#),
        );
        (found["ok"] == true && found["nodes"].as_u64() >= Some(1)).then_some(())
    });
    let press = call(
        &daemon,
        "ax",
        "act",
        &format!(r#"{{"app":{pid},"selector":"button \"Yes\"","action":"press"}}"#),
    );
    assert_refused(&daemon, &press, "ax act press");

    let click = call(
        &daemon,
        "gui",
        "click",
        &format!(r#"{{"x":{cx},"y":{cy}}}"#),
    );
    assert_refused(&daemon, &click, "gui click on the dialog");
    let drag = call(
        &daemon,
        "gui",
        "drag",
        &format!(r#"{{"from_x":1,"from_y":1,"to_x":{cx},"to_y":{cy}}}"#),
    );
    assert_refused(&daemon, &drag, "gui drag onto the dialog");
    let key = call(&daemon, "gui", "key", r#"{"combo":"Return"}"#);
    assert_refused(&daemon, &key, "gui key while the dialog is active");
    let typed = call(&daemon, "gui", "type", r#"{"text":"\n"}"#);
    assert_refused(&daemon, &typed, "gui type while the dialog is active");
    let focus = call(&daemon, "gui", "focus", &format!(r#"{{"window":{id}}}"#));
    assert_refused(&daemon, &focus, "gui focus of the dialog");

    // Nothing reached the dialog: it still waits for its answer.
    assert!(
        approver.0.try_wait().unwrap().is_none(),
        "the approver's dialog was answered"
    );
    // Pointer actions elsewhere still work while an approver is connected.
    let elsewhere = call(&daemon, "gui", "move", r#"{"x":0,"y":0}"#);
    assert_eq!(elsewhere["ok"], true, "{elsewhere}");
    daemon.assert_chain_holds();
}

#[test]
fn the_terminal_hosting_an_approver_is_protected_too() {
    let daemon = Daemon::start_on_desktop("");
    let desktop = Desktop::shared();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/as_approver.py");
    let control = daemon.control_socket();
    // An approver running inside xterm, as `computer approve` would: keys typed into the xterm
    // would answer it, so the xterm (its ancestor) is protected while it is connected.
    let terminal = desktop.launch(
        "xterm",
        &[
            "-title",
            "Approver terminal",
            "-e",
            "python3",
            script.to_str().unwrap(),
            control.to_str().unwrap(),
            "cat",
        ],
    );
    let pid = terminal.pid();
    let window = wait_for("the terminal's window", Duration::from_secs(20), || {
        let windows = call(&daemon, "gui", "windows", "{}");
        windows["windows"]
            .as_array()?
            .iter()
            .find(|w| w["pid"] == pid && w["focused"] == true)
            .cloned()
    });
    let (x, y) = (
        window["x"].as_i64().unwrap() + 10,
        window["y"].as_i64().unwrap() + 10,
    );
    // A harmless move onto the terminal is refused once the approver inside it has connected.
    let moved = wait_for("the approver to connect", Duration::from_secs(20), || {
        let moved = call(&daemon, "gui", "move", &format!(r#"{{"x":{x},"y":{y}}}"#));
        (moved["ok"] == false).then_some(moved)
    });
    assert_refused(&daemon, &moved, "gui move onto the approver's terminal");
    let typed = call(&daemon, "gui", "type", r#"{"text":"a\n"}"#);
    assert_refused(&daemon, &typed, "gui type into the approver's terminal");
}
