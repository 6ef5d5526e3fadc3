//! The desktop approval window on the shared headless desktop, against the real daemon: the window
//! shows an asked call in the terminal approver's plain words, readable over AT-SPI; a second,
//! independent AT-SPI client (libatspi from Python, not the ax surface) presses its buttons; the
//! daemon runs or refuses the call and receipts the answer as given `via: window` by the window's
//! own pid. Also: requests answered elsewhere leave the window, a closed window answers nothing,
//! a lost daemon is reconnected, the keyboard answers only from a button tabbed to, and a
//! misleading call is shown exactly and flagged while the window asks for attention on X (the
//! urgency hint in `WM_HINTS` and `_NET_WM_STATE_ABOVE`, read with x11rb), withdrawn once nothing
//! waits. A click sent through XTEST (as `xdotool` in an agent's run sends it) answers nothing; the
//! person's keys on a desktop whose devices are not XTEST ones (Xephyr inside Xvfb) answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use computer_tests::desktop::{App, Desktop, TestDesktop, spawn_tied};
use computer_tests::{Daemon, approval_window_bin, computer_bin, touch_task, wait_for};
use serde_json::{Value, json};

/// Acts run without asking, except `touch`, which waits for a person.
const ASK_TOUCH: &str =
    "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"touch\"]\ndecision = \"ask\"\n";

const BUTTONS: [&str; 3] = ["Allow once", "Allow for this session", "Deny"];

/// Keyboard input goes to whichever window has focus, and every window a test opens may take it:
/// the keyboard test holds this exclusively, the others share it.
static FOCUS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The Python with AT-SPI bindings: the distribution's (python3-gi is a system package), not
/// whatever `python3` a version manager puts first on PATH.
fn gi_python() -> String {
    std::env::var("GI_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".into()
        } else {
            "python3".into()
        }
    })
}

/// How the window is started.
enum Start {
    /// `computer-approval-window` itself.
    Directly,
    /// `computer approve --window`, which execs it (keeping the pid).
    ThroughCli,
}

/// Opens the approval window for `daemon` on the shared desktop.
fn open_window(daemon: &Daemon, start: Start) -> App {
    open_window_on(Desktop::shared(), daemon, start)
}

/// The desktop whose input devices are not XTEST ones: keys and clicks sent to its outer server
/// are the person's (see [`Desktop::private_with_a_person`]); the tests that use it take turns.
fn persons_desktop() -> &'static Desktop {
    static DESKTOP: std::sync::OnceLock<Desktop> = std::sync::OnceLock::new();
    DESKTOP.get_or_init(Desktop::private_with_a_person)
}

static PERSONS_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Opens the approval window for `daemon` on `desktop`, taking Allow from accessible actions
/// (`--accessible-answers`, as a screen reader's user starts it): the AT-SPI client presses
/// its buttons as a person's screen reader would.
fn open_window_on(desktop: &Desktop, daemon: &Daemon, start: Start) -> App {
    let mut command = window_command(desktop, daemon, start);
    command.env("COMPUTER_APPROVAL_ACCESSIBLE_ANSWERS", "true");
    App(spawn_tied(command))
}

/// The approval window's command for `daemon` on `desktop`, as a person starts it by default.
fn window_command(desktop: &Desktop, daemon: &Daemon, start: Start) -> Command {
    let mut command = match start {
        Start::Directly => desktop.command(approval_window_bin().to_str().unwrap()),
        Start::ThroughCli => {
            let mut command = desktop.command(computer_bin().to_str().unwrap());
            command.args(["approve", "--window"]);
            command
        }
    };
    let log = std::fs::File::create(daemon.root.join("window.log")).expect("window log");
    command
        .envs(daemon.env())
        .env("RUST_LOG", "computer_approval_window=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .env_remove("COMPUTER_APPROVAL_ACCESSIBLE_ANSWERS");
    command
}

/// Runs the independent AT-SPI client against the window and returns its report; it waits (up
/// to its own timeout) for what `args` ask for.
fn atspi(daemon: &Daemon, window: &App, args: &[&str]) -> Value {
    atspi_on(Desktop::shared(), daemon, window, args)
}

/// [`atspi`] on `desktop`.
fn atspi_on(desktop: &Desktop, daemon: &Daemon, window: &App, args: &[&str]) -> Value {
    let out = desktop
        .command(&gi_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/atspi_press.py"))
        .arg(window.pid().to_string())
        .args(args)
        .output()
        .expect("python3 atspi_press.py");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success(),
        "atspi_press.py {args:?}: {report}\n{}\nwindow log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(daemon.root.join("window.log")).unwrap_or_default()
    );
    report
}

/// Runs `xdotool` (a command on some display) with `args`; its stdout.
fn run_xdotool(mut command: Command, args: &[&str]) -> String {
    let out = command.args(args).output().expect("xdotool");
    assert!(
        out.status.success(),
        "xdotool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_once_in_the_window_runs_the_call_and_is_receipted_as_the_windows() {
    let _focus = FOCUS.read().await;
    let daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = open_window(&daemon, Start::ThroughCli);
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("allowed-by-window");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    let report = tokio::task::block_in_place(|| {
        atspi(
            &daemon,
            &window,
            &["--label", path, "--press", "Allow once"],
        )
    });
    // The summary is the terminal approver's, readable by a screen reader.
    let summary = report["label"].as_str().unwrap();
    for want in [
        "agent `default`",
        "asks for shell.run",
        "argv[0]: touch\n",
        &format!("argv[1]: {path}"),
        "rules[0]",
    ] {
        assert!(summary.contains(want), "{want:?} missing from {summary:?}");
    }
    assert_eq!(report["buttons"], json!(BUTTONS), "{report}");
    assert_eq!(
        report["focused"],
        json!([]),
        "nothing is focused by default"
    );

    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["decision"], "ask");
    assert_eq!(intent["body"]["approval"]["outcome"], "allowed");
    assert_eq!(intent["body"]["approval"]["answer"], "allow_once");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "window");
    // `computer approve --window` exec'd the window: the answer came from the pid it started as.
    assert_eq!(intent["body"]["approval"]["by"]["pid"], window.pid());

    // The answered request leaves the window.
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    daemon.assert_chain_holds();
}

/// Any program on the accessibility bus can press a button (an agent's allowed run with an
/// AT-SPI client of its own): by default such an action, which comes with no mouse or key
/// press, answers Deny and nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn an_accessible_action_takes_only_deny_unless_the_person_opted_in() {
    // No other test's input may land in between: the window judges the newest press.
    let _focus = FOCUS.write().await;
    let daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = App(spawn_tied(window_command(
        Desktop::shared(),
        &daemon,
        Start::Directly,
    )));
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pressed-over-atspi");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| {
        atspi(
            &daemon,
            &window,
            &["--label", path, "--press", "Allow once"],
        );
        atspi(
            &daemon,
            &window,
            &["--label", "accessible action", "--timeout", "20"],
        );
    });
    let pending = daemon.pending_approvals();
    assert_eq!(
        pending.len(),
        1,
        "the request is still pending: {pending:?}"
    );
    assert!(!file.exists());
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", path, "--press", "Deny"]));
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(!file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(
        intent["body"]["approval"]["by"]["via"], "window",
        "{intent}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_in_the_window_refuses_the_call() {
    let _focus = FOCUS.read().await;
    let daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = open_window(&daemon, Start::Directly);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("denied-by-window");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", path, "--press", "Deny"]));

    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(!file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["outcome"], "denied");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "window");
    assert_eq!(intent["body"]["approval"]["by"]["pid"], window.pid());
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_answered_elsewhere_leaves_the_window() {
    let _focus = FOCUS.read().await;
    let daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = open_window(&daemon, Start::Directly);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("answered-in-terminal");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", path]));

    let id = daemon.pending_approvals()[0]["id"].to_string();
    let answered = daemon.cli(&["approvals", "allow", &id]);
    assert!(answered.status.success(), "{}", answered.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "cli");
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_the_window_answers_nothing() {
    let _focus = FOCUS.read().await;
    let daemon = Daemon::start_on_desktop(&format!("{ASK_TOUCH}[approval]\ntimeout = \"8s\"\n"));
    let window = open_window(&daemon, Start::Directly);
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("window-closed");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", path]));
    drop(window);

    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "{out}"
    );
    assert!(!file.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_daemon_is_shown_and_reconnected() {
    let _focus = FOCUS.read().await;
    let mut daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = open_window(&daemon, Start::Directly);
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    daemon.stop_with(libc::SIGTERM);
    let lost = tokio::task::block_in_place(|| {
        atspi(
            &daemon,
            &window,
            &["--label", "Not connected to the daemon"],
        )
    });
    assert!(
        lost["label"].as_str().unwrap().contains("Retrying in"),
        "{lost}"
    );
    assert_eq!(lost["buttons"], json!([]), "nothing to answer while lost");

    daemon.restart();
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("after-reconnect");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| {
        atspi(
            &daemon,
            &window,
            &["--label", path, "--press", "Allow once"],
        )
    });
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_keyboard_answers_only_from_a_button_tabbed_to() {
    // The person's keyboard: keys on the outer server of a desktop with a person (XTEST keys,
    // `xdotool key` on the desktop itself, would be synthetic input and answer nothing).
    let _turn = PERSONS_TURN.lock().await;
    let desktop = persons_desktop();
    let daemon = desktop.start_daemon(ASK_TOUCH);
    let window = open_window_on(desktop, &daemon, Start::Directly);
    let atspi =
        |daemon: &Daemon, window: &App, args: &[&str]| atspi_on(desktop, daemon, window, args);
    let keys = |args: &[&str]| run_xdotool(desktop.person_command("xdotool"), args);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keyboard");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| {
        atspi(&daemon, &window, &["--label", path]);
        let pid = window.pid().to_string();
        let id = wait_for("the window on X", Duration::from_secs(20), || {
            let out = desktop
                .command("xdotool")
                .args(["search", "--pid", &pid])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .map(str::to_string)
        });
        run_xdotool(
            desktop.command("xdotool"),
            &["windowactivate", "--sync", &id],
        );

        // Enter with nothing focused, then Tab (possibly within one frame): no answer.
        keys(&["key", "--delay", "0", "Return", "Tab"]);
        atspi(
            &daemon,
            &window,
            &["--label", path, "--focused", "Allow once"],
        );
        assert_eq!(
            daemon.pending_approvals().len(),
            1,
            "Enter answered nothing"
        );

        keys(&["key", "Tab"]);
        atspi(
            &daemon,
            &window,
            &["--label", path, "--focused", "Allow for this session"],
        );
        keys(&["key", "Tab"]);
        atspi(&daemon, &window, &["--label", path, "--focused", "Deny"]);
        keys(&["key", "Return"]);
    });
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(!file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "window");
}

#[test]
fn approve_window_names_the_missing_program() {
    // A `computer` without the window beside it: a hard link (a copy if `$COMPUTER_BIN` is on
    // another file system) in a directory of its own.
    let bin = computer_bin();
    let dir = tempfile::tempdir_in(bin.parent().unwrap()).unwrap();
    let lonely = dir.path().join("computer");
    std::fs::hard_link(&bin, &lonely)
        .or_else(|_| std::fs::copy(&bin, &lonely).map(drop))
        .expect("link or copy computer");
    let out = Command::new(&lonely)
        .args(["approve", "--window"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run computer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("the approval window is not installed")
            && stderr.contains(&format!(
                "{} is missing",
                dir.path().join("computer-approval-window").display()
            )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn our_own_ax_and_gui_surfaces_cannot_answer_the_window() {
    let _focus = FOCUS.write().await;
    let daemon = Daemon::start_on_desktop(ASK_TOUCH);
    let window = open_window(&daemon, Start::Directly);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("self-approved");
    let waiting = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", path]));
    let pid = window.pid();

    tokio::task::block_in_place(|| {
        // The ax surface sees the button (observing is allowed) but may not press it.
        let press =
            format!(r#"{{"app":{pid},"selector":"button \"Allow once\"","action":"press"}}"#);
        let found = daemon.call_json(
            "ax",
            "find",
            &format!(r#"{{"app":{pid},"selector":"button \"Allow once\""}}"#),
        );
        assert_eq!(found["nodes"], 1, "{found}");
        daemon.assert_refused_as_targeting_an_approver(
            &daemon.call_json("ax", "act", &press),
            "ax act press",
        );

        // The gui surface may not click, drag onto, type into or focus the window.
        let windows = daemon.call_json("gui", "windows", "{}");
        let w = windows["windows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["pid"] == pid)
            .unwrap_or_else(|| panic!("the window in {windows}"))
            .clone();
        let (cx, cy) = (
            w["x"].as_i64().unwrap() + w["width"].as_i64().unwrap() / 2,
            w["y"].as_i64().unwrap() + w["height"].as_i64().unwrap() / 2,
        );
        let click = format!(r#"{{"x":{cx},"y":{cy}}}"#);
        daemon.assert_refused_as_targeting_an_approver(
            &daemon.call_json("gui", "click", &click),
            "gui click",
        );
        let drag = format!(r#"{{"from_x":0,"from_y":0,"to_x":{cx},"to_y":{cy}}}"#);
        daemon.assert_refused_as_targeting_an_approver(
            &daemon.call_json("gui", "drag", &drag),
            "gui drag",
        );
        let focus = format!(r#"{{"window":{}}}"#, w["id"]);
        daemon.assert_refused_as_targeting_an_approver(
            &daemon.call_json("gui", "focus", &focus),
            "gui focus",
        );
        if w["focused"] == true {
            let key = r#"{"combo":"Return"}"#;
            daemon.assert_refused_as_targeting_an_approver(
                &daemon.call_json("gui", "key", key),
                "gui key",
            );
        }

        // Nothing was answered: the request still waits for a person.
        assert_eq!(daemon.pending_approvals().len(), 1);
        assert!(!file.exists());
        // The window itself works: an independent AT-SPI client (a person's screen reader,
        // say) answers it.
        atspi(
            &daemon,
            &window,
            &["--label", path, "--press", "Allow once"],
        );
    });
    let out = waiting.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    daemon.assert_chain_holds();
}

/// Acts are asked of a person.
const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";

/// What the window's X windows say about asking for attention: (urgency hint in `WM_HINTS`,
/// `_NET_WM_STATE_ABOVE` in `_NET_WM_STATE`), over all the windows of `pid`.
fn attention(pid: u32) -> (bool, bool) {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt};
    let (conn, _) = Desktop::shared().x_connection();
    let atom = |name: &str| {
        conn.intern_atom(false, name.as_bytes())
            .unwrap()
            .reply()
            .unwrap()
            .atom
    };
    let (state, above) = (atom("_NET_WM_STATE"), atom("_NET_WM_STATE_ABOVE"));
    let out = Desktop::shared()
        .command("xdotool")
        .args(["search", "--pid", &pid.to_string()])
        .output()
        .expect("xdotool");
    let mut result = (false, false);
    for window in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
    {
        let hints = x11rb::properties::WmHints::get(&conn, window)
            .ok()
            .and_then(|cookie| cookie.reply().ok())
            .flatten();
        result.0 |= hints.is_some_and(|h| h.urgent);
        let states = conn
            .get_property(false, window, state, AtomEnum::ATOM, 0, 64)
            .ok()
            .and_then(|cookie| cookie.reply().ok());
        result.1 |= states
            .and_then(|s| s.value32().map(|mut v| v.any(|a| a == above)))
            .unwrap_or(false);
    }
    let _ = conn.flush();
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn the_window_shows_what_will_run_exactly_flags_it_and_asks_for_attention() {
    let _focus = FOCUS.read().await;
    let daemon = Daemon::start_on_desktop(ASK_ACTS);
    let window = open_window(&daemon, Start::Directly);
    tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "No pending requests"]));
    let pid = window.pid();
    assert_eq!(
        attention(pid),
        (false, false),
        "no attention asked while nothing waits"
    );

    // A bidi override in the script, a `--force` flag, stdin and one of git's config variables.
    let script = "echo git push --force \u{202e}gnirts; cat >/dev/null";
    let call = daemon.call_task(computer_tests::shell_run(
        json!({"script": script, "stdin": "rm -rf $HOME"}),
        json!({"env": {"GIT_CONFIG_KEY_0": "core.pager"}}),
    ));
    let report =
        tokio::task::block_in_place(|| atspi(&daemon, &window, &["--label", "GIT_CONFIG_KEY_0"]));
    let label = report["label"].as_str().unwrap();
    assert!(
        !label.contains('\u{202e}'),
        "the override is escaped: {label:?}"
    );
    for want in [
        "agent `default`",
        "shell.run",
        "script: echo git push --force \\u{202e}gnirts; cat >/dev/null",
        "command 1: echo git push --force \\u{202e}gnirts",
        "env GIT_CONFIG_KEY_0: core.pager",
        "): rm -rf $HOME",
        "⚠ WARNING script: bidi overrides",
    ] {
        assert!(label.contains(want), "{want:?} missing from {label:?}");
    }

    // The urgency hint is set and the window is kept above others, without taking the focus.
    tokio::task::block_in_place(|| {
        wait_for(
            "the window to ask for attention",
            Duration::from_secs(20),
            || (attention(pid) == (true, true)).then_some(()),
        );
        atspi(
            &daemon,
            &window,
            &["--label", "GIT_CONFIG_KEY_0", "--press", "Deny"],
        );
    });
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    // Nothing waits any more: the hint is withdrawn and the window is ordinary again.
    tokio::task::block_in_place(|| {
        wait_for("the window to stop asking", Duration::from_secs(20), || {
            (attention(pid) == (false, false)).then_some(())
        })
    });
}

/// A click on *Allow once* sent through XTEST, as `xdotool` in an agent's allowed run sends it,
/// answers nothing: the window says it ignored synthetic input and the request stays pending.
/// The person's own keys (from the desktop's own keyboard device) answer it.
#[tokio::test(flavor = "multi_thread")]
async fn a_synthetic_click_on_allow_once_answers_nothing_while_the_persons_keys_do() {
    let _turn = PERSONS_TURN.lock().await;
    let desktop = persons_desktop();
    let daemon = desktop.start_daemon(ASK_TOUCH);
    let window = open_window_on(desktop, &daemon, Start::Directly);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("clicked");
    let call = touch_task(&daemon, &file);
    let path = file.to_str().unwrap();
    let report = tokio::task::block_in_place(|| {
        atspi_on(
            desktop,
            &daemon,
            &window,
            &["--label", path, "--timeout", "20"],
        )
    });
    let extents = report["extents"]["Allow once"]
        .as_array()
        .unwrap_or_else(|| panic!("the button's place: {report}"))
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect::<Vec<_>>();
    let (x, y) = (
        (extents[0] + extents[2] / 2).to_string(),
        (extents[1] + extents[3] / 2).to_string(),
    );

    // The agent's click, through the core XTEST pointer of the window's own desktop.
    run_xdotool(
        desktop.command("xdotool"),
        &["mousemove", "--sync", &x, &y, "click", "1"],
    );
    tokio::task::block_in_place(|| {
        atspi_on(
            desktop,
            &daemon,
            &window,
            &["--label", "synthetic input ignored", "--timeout", "20"],
        )
    });
    assert_eq!(
        daemon.pending_approvals().len(),
        1,
        "the synthetic click answered the request"
    );
    assert!(!file.exists());

    // The person answers with the keyboard (the desktop's own keyboard device): Tab to
    // *Allow once*, then Return.
    let pid = window.pid().to_string();
    let id = run_xdotool(desktop.command("xdotool"), &["search", "--pid", &pid]);
    let id = id.lines().next().expect("the window on X").to_string();
    run_xdotool(
        desktop.command("xdotool"),
        &["windowactivate", "--sync", &id],
    );
    run_xdotool(desktop.person_command("xdotool"), &["key", "Tab"]);
    tokio::task::block_in_place(|| {
        atspi_on(
            desktop,
            &daemon,
            &window,
            &["--label", path, "--focused", "Allow once"],
        )
    });
    run_xdotool(desktop.person_command("xdotool"), &["key", "Return"]);
    let answered = computer_tests::try_wait_for(Duration::from_secs(20), || {
        daemon.pending_approvals().is_empty().then_some(())
    });
    assert!(
        answered.is_some(),
        "the person's click answered nothing; the window's log: {}",
        std::fs::read_to_string(daemon.root.join("window.log")).unwrap_or_default()
    );
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["answer"], "allow_once");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "window");
}
