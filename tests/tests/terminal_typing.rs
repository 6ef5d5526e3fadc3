//! Typing into a terminal is a shell run: on the shared headless desktop, real xterms running a
//! real shell, driven through the gui surface the way an agent would. Keys that end a line there
//! are decided as the shell run of that line, one outside containment, as the person (deny rules
//! hold; only allow rules that name terminal typing allow, and a default that allows asks; a
//! line edited in ways not followed is asked), this daemon's approval commands are denied
//! whatever the rules say, nothing started in a terminal an agent typed into can answer an
//! approval (a copy of the daemon, a script that runs it), and typing into other windows is
//! unaffected.

use std::path::{Path, PathBuf};
use std::time::Duration;

use computer_tests::desktop::{App, Desktop, TestDesktop};
use computer_tests::{Daemon, computer_bin, touch_task, wait_for};
use serde_json::{Value, json};

/// The keyboard focus is one per desktop: tests that type take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Acts are asked; gui actions are allowed by rule, as an agent trusted with the desktop has them.
const GUI_ALLOWED: &str =
    "[defaults]\nact = \"ask\"\n[[rules]]\nsurface = \"gui\"\ndecision = \"allow\"\n";

/// A rule that lets `ls` typed into a terminal run without a person.
const TERMINAL_LS: &str = "[[rules]]\nterminal = true\nargv0 = [\"ls\"]\ndecision = \"allow\"\n";

async fn gui(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon.call_once("gui", command, args).await
}

/// A gui call on its own task, for calls that wait for a person.
fn gui_task(daemon: &Daemon, command: &str, args: Value) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(json!({"surface": "gui", "command": command, "args": args}))
}

fn first_pending(daemon: &Daemon) -> Value {
    wait_for("a pending approval", Duration::from_secs(20), || {
        daemon.pending_approvals().into_iter().next()
    })
}

/// An xterm running `sh`, whose PATH finds this daemon's `computer` and whose environment names
/// its control socket: what a person's own terminal has.
struct Terminal {
    app: App,
    window: u64,
    /// The middle of its window, in screen pixels.
    center: (i64, i64),
}

impl Terminal {
    async fn open(daemon: &Daemon, title: &str) -> Terminal {
        Terminal::open_with(daemon, title, &[]).await
    }

    /// An xterm given `options` (before its `-e sh`).
    async fn open_with(daemon: &Daemon, title: &str, options: &[&str]) -> Terminal {
        let desktop = Desktop::shared();
        let bin_dir = computer_bin().parent().unwrap().to_path_buf();
        let path = format!(
            "PATH={}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let control = format!(
            "COMPUTER_CONTROL_SOCKET={}",
            daemon.control_socket().display()
        );
        // `env` execs xterm, so the pid is the terminal's.
        let mut args = vec![path.as_str(), control.as_str(), "xterm"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["-title", title, "-e", "sh"]);
        let app = desktop.launch("env", &args);
        let pid = app.pid();
        let entry = tokio::task::block_in_place(|| daemon.wait_for_window(pid, title));
        let number = |key: &str| entry[key].as_i64().unwrap();
        let terminal = Terminal {
            app,
            window: entry["id"].as_u64().unwrap(),
            center: (
                number("x") + number("width") / 2,
                number("y") + number("height") / 2,
            ),
        };
        terminal.focus(daemon).await;
        terminal
    }

    async fn focus(&self, daemon: &Daemon) {
        let focused = gui(daemon, "focus", json!({"window": self.window})).await;
        assert_eq!(focused["focused"], true, "{focused}");
    }
}

fn assert_denied_by(daemon: &Daemon, reply: &Value, rule: &str, what: &str) {
    assert_eq!(reply["ok"], false, "{what} went through: {reply}");
    assert_eq!(reply["error"]["code"], "denied", "{what}: {reply}");
    let intent = daemon.receipt_row(&reply["receipt"], "intent");
    assert_eq!(
        intent["body"]["policy"]["rule"], rule,
        "{what}: {}",
        intent["body"]["policy"]
    );
}

/// A file the shell in a terminal writes; waits for it to hold `expected`.
fn wait_for_file(path: &Path, expected: &str) -> String {
    wait_for(
        &format!("{} to hold {expected:?}", path.display()),
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(path).ok()?;
            text.contains(expected).then_some(text)
        },
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn typing_the_approval_command_into_a_terminal_approves_nothing() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(GUI_ALLOWED);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("self-approved");
    // A call of the agent's own waits for a person.
    let waiting = touch_task(&daemon, &file);
    let id = tokio::task::block_in_place(|| first_pending(&daemon))["id"].to_string();
    let terminal = Terminal::open(&daemon, "terminal-typing-attack").await;

    // In one go: the line and its Return.
    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("computer approvals allow {id}\n")}),
    )
    .await;
    assert_denied_by(
        &daemon,
        &typed,
        "builtin:daemon-control",
        "typed with a newline",
    );
    let message = typed["error"]["message"].as_str().unwrap();
    assert!(message.contains("computer approvals"), "{message}");
    // Wrapped in another command, which the parser sees through.
    let wrapped = gui(
        &daemon,
        "type",
        json!({"text": format!("true && sh -c 'computer approvals allow {id}'\n")}),
    )
    .await;
    assert_denied_by(
        &daemon,
        &wrapped,
        "builtin:daemon-control",
        "wrapped in sh -c",
    );
    // Under another name: a link to the program, answering all the same.
    let link = dir.path().join("c");
    std::os::unix::fs::symlink(computer_bin(), &link).unwrap();
    let renamed = gui(
        &daemon,
        "type",
        json!({"text": format!("{} approvals allow {id}\n", link.display())}),
    )
    .await;
    assert_denied_by(
        &daemon,
        &renamed,
        "builtin:daemon-control",
        "a renamed link",
    );
    // Hidden where the parser cannot follow: its text still names the command.
    let hidden = gui(
        &daemon,
        "type",
        json!({"text": format!("echo 'computer approvals allow {id}' | sh\n")}),
    )
    .await;
    assert_denied_by(&daemon, &hidden, "builtin:daemon-control", "piped into sh");

    // Split in two harmless-looking calls: the text is typed (gui is allowed), its Return is not.
    let text = gui(
        &daemon,
        "type",
        json!({"text": format!("computer approvals allow {id}")}),
    )
    .await;
    assert_eq!(
        text["ok"], true,
        "typing without Return runs nothing: {text}"
    );
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_denied_by(&daemon, &enter, "builtin:daemon-control", "the Return");
    // Other keys that end a line are no way around it.
    let linefeed = gui(&daemon, "key", json!({"combo": "ctrl+j"})).await;
    assert_denied_by(&daemon, &linefeed, "builtin:daemon-control", "ctrl+j");

    // The request is still waiting for a person, and its call did not run.
    let pending = daemon.pending_approvals();
    assert!(
        pending
            .iter()
            .any(|r| r["id"].as_u64() == id.parse::<u64>().ok()),
        "the request was answered: {pending:?}"
    );
    assert!(!file.exists());
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = waiting.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    drop(terminal);
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deny_rule_holds_for_a_line_typed_into_a_terminal() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let config = format!("{GUI_ALLOWED}[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
    let daemon = Daemon::start_on_desktop(&config);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("x");
    std::fs::create_dir(&victim).unwrap();
    let _terminal = Terminal::open(&daemon, "terminal-typing-deny").await;

    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("rm -rf {}", victim.display())}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_denied_by(&daemon, &enter, "rules[1]", "rm's Return");
    assert!(victim.exists(), "the denied line ran");

    // `policy explain` states the same facts and decision, from the daemon's own code.
    let call = json!({"surface": "gui", "command": "type",
                      "args": {"text": format!("rm -rf {}\n", victim.display())}});
    let explained = daemon.cli(&["policy", "explain", "--args", &call.to_string()]);
    assert!(explained.status.success(), "{}", explained.stderr);
    let explained = explained.json();
    assert_eq!(explained["decision"]["decision"], "deny", "{explained}");
    assert_eq!(explained["decision"]["rule"], "rules[1]", "{explained}");
    let terminal = &explained["facts"]["terminal"];
    assert_eq!(terminal["app"], "XTerm", "{explained}");
    assert_eq!(
        terminal["lines"],
        json!([format!("rm -rf {}", victim.display())])
    );
    assert_eq!(terminal["run"]["programs"][0][0], "rm", "{explained}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_command_typed_into_a_terminal_runs_there() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let config =
        format!("{GUI_ALLOWED}{TERMINAL_LS}[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
    let daemon = Daemon::start_on_desktop(&config);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marker-file"), "").unwrap();
    let listing: PathBuf = dir.path().join("listing");
    let _terminal = Terminal::open(&daemon, "terminal-typing-allow").await;

    let line = format!("ls {} > {}", dir.path().display(), listing.display());
    let typed = gui(&daemon, "type", json!({"text": line})).await;
    assert_eq!(typed["ok"], true, "{typed}");
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(enter["ok"], true, "{enter}");
    let intent = daemon.receipt_row(&enter["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["decision"], "allow");
    assert_eq!(intent["body"]["policy"]["rule"], "rules[1]");
    tokio::task::block_in_place(|| wait_for_file(&listing, "marker-file"));

    // A line and its newline in one call, then another line that the rules do not cover: that
    // one waits for a person (the default), who says no.
    let second = dir.path().join("second");
    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("ls {} > {}\n", dir.path().display(), second.display())}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    tokio::task::block_in_place(|| wait_for_file(&second, "marker-file"));
    let uncovered = gui_task(
        &daemon,
        "type",
        json!({"text": format!("touch {}/touched\n", dir.path().display())}),
    );
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    assert_eq!(request["rule"], "defaults.act", "{request}");
    assert!(
        daemon
            .cli(&["approvals", "deny", &request["id"].to_string()])
            .status
            .success()
    );
    let out = uncovered.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(!dir.path().join("touched").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pasted_line_is_asked_not_allowed() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let config = format!("{GUI_ALLOWED}{TERMINAL_LS}");
    let daemon = Daemon::start_on_desktop(&config);
    let _terminal = Terminal::open(&daemon, "terminal-typing-paste").await;

    assert_eq!(
        gui(&daemon, "type", json!({"text": "ls "})).await["ok"],
        true
    );
    // What ctrl+v (or a middle click, history, completion) puts on the line is not known.
    let paste = gui(&daemon, "key", json!({"combo": "ctrl+v"})).await;
    assert_eq!(paste["ok"], true, "{paste}");
    let enter = gui_task(&daemon, "key", json!({"combo": "Return"}));
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    // The person is shown where the keys go, the line as far as it is known, and why not all.
    let action = request["action"].as_str().unwrap();
    assert!(
        action.contains("press Return in the terminal XTerm")
            && action.contains("running the line \"ls \"")
            && action.contains("not known exactly")
            && action.contains("ctrl+v"),
        "{action}"
    );
    assert!(
        daemon
            .cli(&["approvals", "deny", &request["id"].to_string()])
            .status
            .success()
    );
    let out = enter.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");

    // With acts allowed by default, an opaque line is still asked, never allowed.
    let open = Daemon::start_on_desktop(
        "[defaults]\nact = \"allow\"\n[[rules]]\nterminal = true\nargv0 = [\"true\"]\ndecision = \"allow\"\n",
    );
    let open_terminal = Terminal::open(&open, "terminal-typing-paste-open").await;
    assert_eq!(
        gui(&open, "key", json!({"combo": "ctrl+v"})).await["ok"],
        true
    );
    let enter = gui_task(&open, "key", json!({"combo": "Return"}));
    answer_opaque_line(&open, "allow");
    assert_eq!(enter.await.unwrap()["ok"], true);
    // Once that line ran, the next one starts clear...
    let clear = gui(&open, "type", json!({"text": "true\n"})).await;
    assert_eq!(clear["ok"], true, "{clear}");
    // ...until a middle click on the terminal (which pastes the selection) clouds it.
    let (x, y) = open_terminal.center;
    let click = gui(&open, "click", json!({"x": x, "y": y, "button": "middle"})).await;
    assert_eq!(click["ok"], true, "{click}");
    let typed = gui_task(&open, "type", json!({"text": "true\n"}));
    answer_opaque_line(&open, "deny");
    assert_eq!(typed.await.unwrap()["error"]["code"], "denied");
}

#[tokio::test(flavor = "multi_thread")]
async fn typing_into_a_terminal_is_asked_whatever_act_says_unless_a_rule_names_it() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    // Acts are allowed by default, and so is `touch` as a shell run: neither reaches a line
    // typed into the person's terminal, which runs outside containment.
    let config = "[defaults]\nact = \"allow\"\n[[rules]]\nsurface = \"shell\"\nargv0 = [\"touch\"]\ndecision = \"allow\"\n";
    let daemon = Daemon::start_on_desktop(config);
    let dir = tempfile::tempdir().unwrap();
    let asked = dir.path().join("asked");
    let _terminal = Terminal::open(&daemon, "terminal-typing-asked").await;
    // Typing that ends no line is the gui action it is.
    let partial = gui(&daemon, "type", json!({"text": "touch "})).await;
    assert_eq!(partial["ok"], true, "{partial}");
    let enter = gui_task(
        &daemon,
        "type",
        json!({"text": format!("{}\n", asked.display())}),
    );
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    assert_eq!(request["rule"], "builtin:terminal-typing", "{request}");
    let action = request["action"].as_str().unwrap();
    assert!(
        action.contains(&format!("running the line \"touch {}\"", asked.display())),
        "{action}"
    );
    let denied = daemon.cli(&["approvals", "deny", &request["id"].to_string()]);
    assert!(denied.status.success(), "{}", denied.stderr);
    assert_eq!(enter.await.unwrap()["error"]["code"], "denied");
    assert!(!asked.exists(), "the asked line ran");

    // `policy explain` says the same, from the daemon's own code.
    let call = json!({"surface": "gui", "command": "type",
                      "args": {"text": format!("touch {}\n", asked.display())}});
    let explained = daemon.cli(&["policy", "explain", "--args", &call.to_string()]);
    assert!(explained.status.success(), "{}", explained.stderr);
    let explained = explained.json();
    assert_eq!(explained["decision"]["decision"], "ask", "{explained}");
    assert_eq!(
        explained["decision"]["rule"], "builtin:terminal-typing",
        "{explained}"
    );

    // A rule that names terminal typing lets the line run unseen.
    let named = Daemon::start_on_desktop(
        "[defaults]\nact = \"ask\"\n[[rules]]\nsurface = \"gui\"\ndecision = \"allow\"\n[[rules]]\nterminal = true\nargv0 = [\"touch\"]\ndecision = \"allow\"\n",
    );
    let _named_terminal = Terminal::open(&named, "terminal-typing-named").await;
    let allowed = dir.path().join("allowed");
    let typed = gui(
        &named,
        "type",
        json!({"text": format!("touch {}\n", allowed.display())}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    let intent = named.receipt_row(&typed["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["rule"], "rules[1]", "{intent}");
    tokio::task::block_in_place(|| {
        wait_for("the allowed touch", Duration::from_secs(20), || {
            allowed.exists().then_some(())
        })
    });
    // That rule decides terminal typing only: the same program as a shell run is still asked.
    let call = json!({"surface": "shell", "command": "run",
                      "args": {"argv": ["touch", allowed.display().to_string()]}});
    let explained = named.cli(&["policy", "explain", "--args", &call.to_string()]);
    assert!(explained.status.success(), "{}", explained.stderr);
    let explained = explained.json();
    assert_eq!(explained["decision"]["decision"], "ask", "{explained}");
    assert_eq!(explained["decision"]["rule"], "defaults.act", "{explained}");
}

/// A terminal the test starts with `script` running in it, as a person's own terminal running
/// their command: no agent input ever reached it.
fn persons_terminal(daemon: &Daemon, title: &str, script: &str) -> App {
    let bin_dir = computer_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "PATH={}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let control = format!(
        "COMPUTER_CONTROL_SOCKET={}",
        daemon.control_socket().display()
    );
    Desktop::shared().launch(
        "env",
        &[
            &path, &control, "xterm", "-title", title, "-e", "sh", "-c", script,
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_started_in_a_terminal_an_agent_typed_into_answers_an_approval() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    // The person lets the agent type anything into terminals, and use the gui; its shell runs
    // are asked. Even so, the agent's own request must wait for a person.
    let config = format!(
        "{GUI_ALLOWED}[[rules]]\nterminal = true\ndecision = \"allow\"\n[[rules]]\nsurface = \"shell\"\nargv0 = [\"sh\", \"printf\", \"chmod\"]\ndecision = \"allow\"\n"
    );
    let daemon = Daemon::start_on_desktop(&config);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("self-approved");
    let waiting = touch_task(&daemon, &file);
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    let id = request["id"].to_string();
    let terminal = Terminal::open(&daemon, "terminal-typing-self-approval").await;

    // A copy of the daemon's binary, under a name no rule knows, fed the answer on stdin.
    let copy = dir.path().join("cpy");
    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("cp {} {}\n", computer_bin().display(), copy.display())}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    let size = std::fs::metadata(computer_bin()).unwrap().len();
    tokio::task::block_in_place(|| {
        wait_for("the copy", Duration::from_secs(60), || {
            (std::fs::metadata(&copy).ok()?.len() == size).then_some(())
        })
    });
    // A script written by a contained run of the agent's, which runs the daemon by its own name.
    let script = dir.path().join("helper");
    let written = daemon.call_json(
        "shell",
        "run",
        &json!({"argv": ["sh", "-c", format!(
            "printf '#!/bin/sh\\nexec %s approve\\n' computer > {0}; chmod +x {0}",
            script.display()
        )]})
        .to_string(),
    );
    assert_eq!(written["ok"], true, "{written}");
    for (name, program) in [
        ("copy", format!("{} approve", copy.display())),
        ("script", script.display().to_string()),
    ] {
        let out = dir.path().join(format!("{name}.out"));
        let finished = dir.path().join(format!("{name}.finished"));
        let line = format!(
            "(sleep 1; echo a; sleep 1) | {program} > {} 2>&1; echo done > {}\n",
            out.display(),
            finished.display()
        );
        let typed = gui(&daemon, "type", json!({"text": line})).await;
        assert_eq!(typed["ok"], true, "the {name} line was not typed: {typed}");
        tokio::task::block_in_place(|| wait_for_file(&finished, "done"));
        let said = std::fs::read_to_string(&out).unwrap();
        // It reached the control socket and tried: the answer was refused, not lost.
        assert!(
            said.contains("could not answer") && said.contains("an agent's keys reached"),
            "the {name}'s answer was not refused: {said}"
        );
        let pending = daemon.pending_approvals();
        assert!(
            pending.iter().any(|r| r["id"] == request["id"]),
            "the {name} answered the request: {pending:?}"
        );
        assert!(
            !file.exists(),
            "the asked call ran after the {name}'s answer"
        );
    }
    drop(terminal);

    // A person's own answer, from a terminal no agent typed into, still counts.
    let answered = dir.path().join("answered");
    let _persons = persons_terminal(
        &daemon,
        "terminal-typing-person",
        &format!(
            "computer approvals allow {id} > {0} 2>&1; echo done >> {0}",
            answered.display()
        ),
    );
    tokio::task::block_in_place(|| wait_for_file(&answered, "done"));
    let out = waiting.await.unwrap();
    assert_eq!(out["ok"], true, "the person's answer did not count: {out}");
    assert!(file.exists());
    let rows: Vec<Value> = daemon
        .receipts()
        .into_iter()
        .filter(|r| r["call_id"] == out["receipt"])
        .collect();
    // An asked call's first intent says it waits (`pending`); a later row holds the answer.
    let approval = rows
        .iter()
        .rev()
        .find_map(|r| r["body"]["approval"].as_object().cloned())
        .expect("the call's approval in its receipt");
    // Allowed by the person's answer from their own terminal, not by the agent's.
    assert_eq!(approval["outcome"], "allowed", "{approval:?}");
    assert_eq!(approval["by"]["via"], "cli", "{approval:?}");

    daemon.assert_chain_holds();
}

/// Answers the pending request, which must be an opaque terminal line asked by the built-in rule.
fn answer_opaque_line(daemon: &Daemon, answer: &str) {
    let request = tokio::task::block_in_place(|| first_pending(daemon));
    assert_eq!(request["rule"], "builtin:opaque-terminal-line", "{request}");
    let answered = daemon.cli(&["approvals", answer, &request["id"].to_string()]);
    assert!(answered.status.success(), "{}", answered.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_grant_for_a_return_covers_only_the_same_line() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(GUI_ALLOWED);
    let dir = tempfile::tempdir().unwrap();
    let _terminal = Terminal::open(&daemon, "terminal-typing-grant").await;
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));

    let line = format!("touch {}", first.display());
    assert_eq!(
        gui(&daemon, "type", json!({"text": line})).await["ok"],
        true
    );
    let enter = gui_task(&daemon, "key", json!({"combo": "Return"}));
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    let id = request["id"].to_string();
    assert!(
        daemon
            .cli(&["approvals", "allow", "--session", &id])
            .status
            .success()
    );
    assert_eq!(enter.await.unwrap()["ok"], true);
    tokio::task::block_in_place(|| {
        wait_for("the first touch", Duration::from_secs(20), || {
            first.exists().then_some(())
        })
    });

    // The same call, `key Return`, ending another line: asked again, not granted.
    let line = format!("touch {}", second.display());
    assert_eq!(
        gui(&daemon, "type", json!({"text": line})).await["ok"],
        true
    );
    let enter = gui_task(&daemon, "key", json!({"combo": "Return"}));
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    assert!(
        request["action"].as_str().unwrap().contains("second"),
        "{request}"
    );
    assert!(
        daemon
            .cli(&["approvals", "deny", &request["id"].to_string()])
            .status
            .success()
    );
    assert_eq!(enter.await.unwrap()["error"]["code"], "denied");
    assert!(!second.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_decided_for_one_terminal_never_reach_another() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let config = format!("{GUI_ALLOWED}{TERMINAL_LS}");
    let daemon = Daemon::start_on_desktop(&config);
    let dir = tempfile::tempdir().unwrap();
    let first = Terminal::open(&daemon, "terminal-typing-first").await;
    let second = Terminal::open(&daemon, "terminal-typing-second").await;
    first.focus(&daemon).await;

    // Decided for the first terminal, it waits for a person; meanwhile the focus moves.
    let moved = dir.path().join("moved");
    let typed = gui_task(
        &daemon,
        "type",
        json!({"text": format!("touch {}\n", moved.display())}),
    );
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    second.focus(&daemon).await;
    assert!(
        daemon
            .cli(&["approvals", "allow", &request["id"].to_string()])
            .status
            .success()
    );
    let out = typed.await.unwrap();
    assert_eq!(out["ok"], false, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("nothing was sent"), "{message}");

    // The second terminal's shell runs what it is given in order: a listing it makes now shows
    // that the touch never ran there.
    let listing = dir.path().join("listing");
    let line = format!("ls {} > {}\n", dir.path().display(), listing.display());
    let listed = gui(&daemon, "type", json!({"text": line})).await;
    assert_eq!(listed["ok"], true, "{listed}");
    let text = tokio::task::block_in_place(|| wait_for_file(&listing, "listing"));
    assert!(!text.contains("moved"), "{text}");
    assert!(!moved.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_whose_window_cannot_be_told_end_no_line_unasked_while_a_terminal_is_open() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    // Keys through the person's keyboard (the agent's own keyboard's focus is the daemon's,
    // always on a window it can tell).
    let daemon = Daemon::start_on_desktop(
        "[defaults]\nact = \"allow\"\n[approval]\ntimeout = \"1s\"\n[gui]\nown_pointer = false\n",
    );
    let _terminal = Terminal::open(&daemon, "terminal-typing-unknown").await;
    // The input focus on a window that is no managed window (the window manager's own check
    // window): which window the keys reach cannot be told. (Focus on the root window would do
    // too, but openbox hands it back to a client at once.)
    let desktop = Desktop::shared();
    let found = desktop
        .command("xprop")
        .args(["-root", "_NET_SUPPORTING_WM_CHECK"])
        .output()
        .expect("xprop");
    let unmanaged = String::from_utf8_lossy(&found.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("0x"))
        .expect("the window manager's check window")
        .to_string();
    let status = desktop
        .command("xdotool")
        .args(["windowfocus", "--sync", &unmanaged])
        .status()
        .expect("xdotool");
    assert!(status.success());

    // Text that ends no line is a gui action as before.
    let text = gui(&daemon, "type", json!({"text": "abc"})).await;
    assert_eq!(text["ok"], true, "{text}");
    // A line end may run a line in the terminal: asked, and unanswered, denied.
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(enter["error"]["code"], "denied", "{enter}");
    let intent = daemon.receipt_row(&enter["receipt"], "intent");
    assert_eq!(
        intent["body"]["policy"]["rule"], "builtin:opaque-terminal-line",
        "{intent}"
    );
}

/// A GTK window with a text entry that prints its text on Return.
const ENTRY_APP: &str = r#"
import json, sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
win = Gtk.Window(title=sys.argv[1])
win.set_default_size(400, 100)
entry = Gtk.Entry()
entry.connect("activate", lambda e: print(json.dumps({"text": e.get_text()}), flush=True))
win.add(entry)
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"#;

#[tokio::test(flavor = "multi_thread")]
async fn typing_into_other_windows_is_unaffected() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let config = format!("{GUI_ALLOWED}[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
    let daemon = Daemon::start_on_desktop(&config);
    // A terminal is open too, just not where the keys go.
    let _terminal = Terminal::open(&daemon, "terminal-typing-bystander").await;
    let title = "terminal-typing-gtk-entry";
    let mut app = Desktop::shared().launch("env", &["/usr/bin/python3", "-c", ENTRY_APP, title]);
    let pid = app.pid();
    let window = tokio::task::block_in_place(|| {
        wait_for("the GTK window", Duration::from_secs(30), || {
            let windows = daemon.call_json("gui", "windows", "{}");
            windows["windows"]
                .as_array()?
                .iter()
                .find(|w| w["pid"] == pid && w["title"] == title)
                .and_then(|w| w["id"].as_u64())
        })
    });
    let focused = gui(&daemon, "focus", json!({"window": window})).await;
    assert_eq!(focused["focused"], true, "{focused}");
    let text = "rm -rf /tmp/not-a-command";
    let typed = gui(&daemon, "type", json!({"text": text})).await;
    assert_eq!(typed["ok"], true, "{typed}");
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_eq!(enter["ok"], true, "{enter}");
    let intent = daemon.receipt_row(&enter["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["rule"], "rules[0]");
    assert_eq!(intent["body"]["action"], "press Return");
    let stdout = app.0.stdout.take().unwrap();
    let line = tokio::task::block_in_place(|| {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("text"))
    });
    let printed: Value = serde_json::from_str(&line.expect("the entry printed its text")).unwrap();
    assert_eq!(printed["text"], text);
}

/// A terminal is known by what it is, not only by its name: an xterm whose class and instance
/// are on no list (`-class Weirdterm -name weirdterm`, as elementary's terminal, Warp's or
/// WaveTerm's are on none) holds a pty master, so the approval command typed into it is denied
/// as in any terminal, in one call or split from its Return; the same text typed into a GTK
/// entry beside it is ordinary typing.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_whose_name_is_on_no_list_is_known_by_its_pty() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(GUI_ALLOWED);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("self-approved");
    let waiting = touch_task(&daemon, &file);
    let id = tokio::task::block_in_place(|| first_pending(&daemon))["id"].to_string();
    let title = "terminal-typing-weirdterm";
    let terminal = Terminal::open_with(
        &daemon,
        title,
        &["-class", "Weirdterm", "-name", "weirdterm"],
    )
    .await;
    let windows = tokio::task::block_in_place(|| daemon.call_json("gui", "windows", "{}"));
    let listed = windows["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["title"] == title)
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed["app"], "Weirdterm", "{windows}");

    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("computer approvals allow {id}\n")}),
    )
    .await;
    assert_denied_by(
        &daemon,
        &typed,
        "builtin:daemon-control",
        "typed into a terminal on no list",
    );
    let text = gui(
        &daemon,
        "type",
        json!({"text": format!("computer approvals allow {id}")}),
    )
    .await;
    assert_eq!(text["ok"], true, "{text}");
    let enter = gui(&daemon, "key", json!({"combo": "Return"})).await;
    assert_denied_by(&daemon, &enter, "builtin:daemon-control", "the Return");

    // Beside it, a window that is no terminal takes the same text as typing.
    let entry_title = "terminal-typing-weirdterm-entry";
    let mut app =
        Desktop::shared().launch("env", &["/usr/bin/python3", "-c", ENTRY_APP, entry_title]);
    let pid = app.pid();
    let entry = tokio::task::block_in_place(|| daemon.wait_for_window(pid, entry_title));

    // Any X client may write a window's _NET_WM_PID: made to name the entry's process (which
    // holds no pty), the terminal is still known by the process the server tells.
    let status = Desktop::shared()
        .command("xprop")
        .args([
            "-id",
            &terminal.window.to_string(),
            "-f",
            "_NET_WM_PID",
            "32c",
        ])
        .args(["-set", "_NET_WM_PID", &pid.to_string()])
        .status()
        .expect("xprop");
    assert!(status.success(), "xprop");
    let claimed = Desktop::shared()
        .command("xprop")
        .args(["-id", &terminal.window.to_string(), "_NET_WM_PID"])
        .output()
        .expect("xprop");
    assert!(
        String::from_utf8_lossy(&claimed.stdout).contains(&format!("= {pid}")),
        "the terminal's _NET_WM_PID was not rewritten: {claimed:?}"
    );
    let listed = tokio::task::block_in_place(|| daemon.call_json("gui", "windows", "{}"));
    let pids: Vec<&Value> = listed["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["id"] == terminal.window)
        .map(|w| &w["pid"])
        .collect();
    assert_eq!(pids, [&json!(terminal.app.pid())], "{listed}");
    terminal.focus(&daemon).await;
    let typed = gui(
        &daemon,
        "type",
        json!({"text": format!("computer approvals allow {id}\n")}),
    )
    .await;
    assert_denied_by(
        &daemon,
        &typed,
        "builtin:daemon-control",
        "typed into a terminal that names another process",
    );

    let focused = gui(&daemon, "focus", json!({"window": entry["id"]})).await;
    assert_eq!(focused["focused"], true, "{focused}");
    let line = format!("computer approvals allow {id}");
    let typed = gui(&daemon, "type", json!({"text": format!("{line}\n")})).await;
    assert_eq!(typed["ok"], true, "typing into an entry: {typed}");
    let stdout = app.0.stdout.take().unwrap();
    let printed = tokio::task::block_in_place(|| {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("text"))
    });
    let printed: Value =
        serde_json::from_str(&printed.expect("the entry printed its text")).unwrap();
    assert_eq!(printed["text"], line);

    // The request still waits for a person; its call did not run.
    let pending = daemon.pending_approvals();
    assert!(
        pending
            .iter()
            .any(|r| r["id"].as_u64() == id.parse::<u64>().ok()),
        "the request was answered: {pending:?}"
    );
    assert!(!file.exists());
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = waiting.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    drop(terminal);
    daemon.assert_chain_holds();
}
