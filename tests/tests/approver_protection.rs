//! No agent may act on an approver through the gui or ax surface: a real GTK dialog (zenity)
//! runs as a connected approver on the shared headless desktop, and every way our surfaces offer
//! to press its "Yes" (ax act, a click on it, keys while it is active, focusing it) is refused
//! and receipted, while the dialog stays unanswered (it would exit at once if any got through).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;

use computer_tests::desktop::{Desktop, TestDesktop};
use computer_tests::{Daemon, wait_for};

/// The two tests share one desktop, and each needs its own window to hold the keyboard focus:
/// run side by side, one's keys could land in the other's dialog.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn desktop_to_ourselves() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it leaves nothing to repair.
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn gui_and_ax_actions_on_an_approver_are_refused_and_receipted() {
    let _desktop = desktop_to_ourselves();
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
        let windows = daemon.call_json("gui", "windows", "{}");
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
        let found = daemon.call_json(
            "ax",
            "find",
            &format!(r#"{{"app":{pid},"selector":"button \"Yes\""}}"#),
        );
        (found["ok"] == true && found["nodes"].as_u64() >= Some(1)).then_some(())
    });
    let press = daemon.call_json(
        "ax",
        "act",
        &format!(r#"{{"app":{pid},"selector":"button \"Yes\"","action":"press"}}"#),
    );
    daemon.assert_refused_as_targeting_an_approver(&press, "ax act press");

    let click = daemon.call_json("gui", "click", &format!(r#"{{"x":{cx},"y":{cy}}}"#));
    daemon.assert_refused_as_targeting_an_approver(&click, "gui click on the dialog");
    let drag = daemon.call_json(
        "gui",
        "drag",
        &format!(r#"{{"from_x":1,"from_y":1,"to_x":{cx},"to_y":{cy}}}"#),
    );
    daemon.assert_refused_as_targeting_an_approver(&drag, "gui drag onto the dialog");
    let key = daemon.call_json("gui", "key", r#"{"combo":"Return"}"#);
    daemon.assert_refused_as_targeting_an_approver(&key, "gui key while the dialog is active");
    let typed = daemon.call_json("gui", "type", r#"{"text":"\n"}"#);
    daemon.assert_refused_as_targeting_an_approver(&typed, "gui type while the dialog is active");
    let focus = daemon.call_json("gui", "focus", &format!(r#"{{"window":{id}}}"#));
    daemon.assert_refused_as_targeting_an_approver(&focus, "gui focus of the dialog");

    // Nothing reached the dialog: it still waits for its answer.
    assert!(
        approver.0.try_wait().unwrap().is_none(),
        "the approver's dialog was answered"
    );
    // Pointer actions elsewhere still work while an approver is connected.
    let elsewhere = daemon.call_json("gui", "move", r#"{"x":0,"y":0}"#);
    assert_eq!(elsewhere["ok"], true, "{elsewhere}");
    daemon.assert_chain_holds();
}

#[test]
fn the_terminal_hosting_an_approver_is_protected_too() {
    let _desktop = desktop_to_ourselves();
    // Lines typed into terminals are allowed by rule (they are asked by default): only the
    // approver protection can refuse.
    let daemon = Daemon::start_on_desktop("[[rules]]\nterminal = true\ndecision = \"allow\"\n");
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
        let windows = daemon.call_json("gui", "windows", "{}");
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
        let moved = daemon.call_json("gui", "move", &format!(r#"{{"x":{x},"y":{y}}}"#));
        (moved["ok"] == false).then_some(moved)
    });
    daemon.assert_refused_as_targeting_an_approver(&moved, "gui move onto the approver's terminal");
    let typed = daemon.call_json("gui", "type", r#"{"text":"a\n"}"#);
    daemon.assert_refused_as_targeting_an_approver(&typed, "gui type into the approver's terminal");
}
