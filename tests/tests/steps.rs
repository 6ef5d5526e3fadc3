//! Multi-step calls against the real daemon: ten steps over the shell and the ax surface (the
//! GTK test app on the shared headless desktop) with refs between them, `stop_on_error` both
//! ways, a denied step in the middle, one approval showing every step (answered through the
//! control socket), a ref that tries to smuggle a denied command past policy, per-step receipts
//! naming their parent, and clear errors for bad refs and bad shapes.

use std::time::Duration;

use computer_tests::desktop::TestApp;
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";
const DENY_RM: &str =
    "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n";

fn run(argv: Value) -> Value {
    json!({"surface": "shell", "command": "run", "args": {"argv": argv}})
}

fn call_task(daemon: &Daemon, arguments: Value) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(arguments)
}

/// The receipt rows of the steps of the parent call `parent`, as (step, kind, row).
fn step_rows(daemon: &Daemon, parent: &Value) -> Vec<(u64, String, Value)> {
    daemon
        .receipts()
        .into_iter()
        .filter(|r| r["body"]["parent"] == *parent)
        .map(|r| {
            (
                r["body"]["step"].as_u64().unwrap(),
                r["kind"].as_str().unwrap().to_string(),
                r,
            )
        })
        .collect()
}

fn pending_where(daemon: &Daemon, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, Duration::from_secs(20), || {
        daemon.pending_approvals().into_iter().find(|r| check(r))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_steps_over_shell_and_ax_with_refs_are_one_round_and_each_is_receipted() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("Steps Test");
    let pid = app.pid();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("made-by-step-2");
    let path = file.to_str().unwrap();
    wait_for_window(&daemon, pid).await;

    let close = "dialog \"Confirm\" > button \"Close Dialog\"";
    let out = daemon.call_raw_once(json!({"steps": [
            run(json!(["printf", "%s", path])),
            run(json!(["touch", {"ref": "$1.stdout"}])),
            {"surface": "ax", "command": "act", "args": {"app": pid, "selector": "textInput \"Your name\"", "action": "set_value", "value": {"ref": "$1.stdout"}}},
            {"surface": "ax", "command": "act", "args": {"app": pid, "selector": "button \"Print Entry\"", "action": "press"}},
            {"surface": "ax", "command": "act", "args": {"app": pid, "selector": "checkBox \"Dark mode\"", "action": "toggle"}},
            {"surface": "ax", "command": "act", "args": {"app": pid, "selector": "button \"Open Dialog\"", "action": "press"}},
            {"wait": {"ms": 50}},
            {"surface": "ax", "command": "wait", "args": {"app": pid, "selector": close, "timeout_ms": 5000}},
            {"surface": "ax", "command": "act", "args": {"app": pid, "ref": {"ref": "$8.ref"}, "action": "press"}},
            run(json!(["test", "-e", {"ref": "$1.stdout"}])),
        ],
        "return": {"select": ["$10.exit_code", "$3.value", "$8.met"]}}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["$10.exit_code"], 0, "{out}");
    assert_eq!(out["$3.value"], path, "{out}");
    assert_eq!(out["$8.met"], true, "{out}");
    // Only what was selected comes back.
    assert!(out.get("stdout").is_none(), "{out}");
    assert!(file.exists());
    app.wait_line(&format!("entry={path}"));
    app.wait_line("check=True");
    app.wait_line("dialog opened");
    app.wait_line("dialog closed");

    // The parent call and each of its ten steps: an intent and a result, naming the parent.
    let parent = &out["receipt"];
    daemon.receipt_row(parent, "intent");
    let result = daemon.receipt_row(parent, "result");
    assert_eq!(result["body"]["steps"].as_array().unwrap().len(), 10);
    let rows = step_rows(&daemon, parent);
    for step in 1..=10u64 {
        for kind in ["intent", "result"] {
            assert!(
                rows.iter().any(|(s, k, _)| *s == step && k == kind),
                "no {kind} receipt for step {step}: {rows:?}"
            );
        }
    }
    // A step's receipt holds its args as they ran, refs resolved.
    let (_, _, touch) = rows
        .iter()
        .find(|(s, k, _)| *s == 2 && k == "intent")
        .unwrap();
    assert_eq!(
        touch["body"]["args"]["args"]["argv"],
        json!(["touch", path])
    );
    daemon.assert_chain_holds();
}

/// `ax find`'s matches are addressable by a later step: `$1.matches[0].ref` names the first
/// match whether the find asked for the outline (the default) or `format: json`, and the act it
/// feeds presses that very button.
#[tokio::test(flavor = "multi_thread")]
async fn a_step_acts_on_the_ref_of_a_match_an_earlier_find_returned() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("Find Ref Test");
    let pid = app.pid();
    wait_for_window(&daemon, pid).await;

    for (presses, format) in [(1, None), (2, Some("json"))] {
        let mut find_args = json!({"app": pid, "selector": "button \"Say Hello\""});
        if let Some(format) = format {
            find_args["format"] = json!(format);
        }
        let out = daemon
            .call_raw_once(json!({"steps": [
                {"surface": "ax", "command": "find", "args": find_args},
                {"surface": "ax", "command": "act",
                 "args": {"app": pid, "ref": {"ref": "$1.matches[0].ref"}, "action": "press"}},
            ],
            "return": {"select": ["$1.matches[0].name", "$1.matches[0].ref", "$2.ok"]}}))
            .await;
        assert_eq!(out["ok"], true, "format {format:?}: {out}");
        assert_eq!(out["$1.matches[0].name"], "Say Hello", "{out}");
        assert!(out["$1.matches[0].ref"].is_u64(), "{out}");
        assert_eq!(out["$2.ok"], true, "{out}");
        app.wait_line(&format!("clicked {presses}"));
    }
}

/// Waits (through the daemon's own bounded `ax wait`) until the test app's window is on the
/// accessibility bus.
async fn wait_for_window(daemon: &Daemon, pid: u32) {
    let seen = daemon
        .call_raw_once(json!({"surface": "ax", "command": "wait",
               "args": {"app": pid, "selector": "button \"Say Hello\"", "timeout_ms": 30000},
               "complications": {"timeout_ms": 30000}}))
        .await;
    assert_eq!(
        seen["met"], true,
        "the test app's window never reached the accessibility bus: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_on_error_stops_at_a_failed_step_or_runs_the_rest() {
    let daemon = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let after = dir.path().join("after-the-failure");
    let steps = json!([
        run(json!(["sh", "-c", "echo broke >&2; exit 3"])),
        run(json!(["touch", after]))
    ]);

    let stopped = daemon.call_raw_once(json!({"steps": steps})).await;
    assert_eq!(stopped["ok"], false, "{stopped}");
    assert_eq!(stopped["failed_step"], 1, "{stopped}");
    assert_eq!(stopped["exit_code"], 3, "{stopped}");
    assert_eq!(stopped["stderr"], "broke\n", "{stopped}");
    assert_eq!(stopped["not_run"], json!([2]), "{stopped}");
    assert!(!after.exists(), "step 2 ran after step 1 failed");
    let result = daemon.receipt_row(&stopped["receipt"], "result");
    assert_eq!(result["body"]["not_run"], json!([2]), "{result}");

    let went_on = daemon
        .call_raw_once(json!({"steps": steps, "stop_on_error": false}))
        .await;
    assert_eq!(went_on["ok"], false, "{went_on}");
    assert_eq!(went_on["failed"][0]["step"], 1, "{went_on}");
    assert_eq!(went_on["failed"][0]["exit_code"], 3, "{went_on}");
    assert!(after.exists(), "stop_on_error=false runs the rest");
    assert_eq!(step_rows(&daemon, &went_on["receipt"]).len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_step_in_the_middle_stops_the_call_before_anything_runs_or_is_skipped() {
    let daemon = Daemon::start_with_config(DENY_RM);
    let dir = tempfile::tempdir().unwrap();
    let (first, victim, last) = (
        dir.path().join("first"),
        dir.path().join("victim"),
        dir.path().join("last"),
    );
    std::fs::write(&victim, "keep").unwrap();
    let steps = json!([
        run(json!(["touch", first])),
        run(json!(["rm", victim])),
        run(json!(["touch", last])),
    ]);

    let refused = daemon.call_raw_once(json!({"steps": steps})).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "denied", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("step 2 (shell.run)"), "{message}");
    assert!(message.contains("nothing ran"), "{message}");
    assert!(!first.exists() && !last.exists() && victim.exists());
    // The denied step is receipted on its own, naming the parent.
    let rows = step_rows(&daemon, &refused["receipt"]);
    let (_, _, denied) = rows
        .iter()
        .find(|(s, k, _)| *s == 2 && k == "result")
        .unwrap();
    assert_eq!(denied["body"]["error"]["code"], "denied");

    let skipped = daemon
        .call_raw_once(json!({"steps": steps, "stop_on_error": false}))
        .await;
    assert_eq!(skipped["ok"], false, "{skipped}");
    assert_eq!(skipped["failed"][0]["step"], 2, "{skipped}");
    assert_eq!(skipped["failed"][0]["error"]["code"], "denied", "{skipped}");
    assert!(first.exists() && last.exists() && victim.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn one_approval_shows_every_step_and_a_step_with_refs_is_asked_for_when_they_resolve() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let (made, copied) = (dir.path().join("made"), dir.path().join("copied"));
    let shifty = "label\u{202e}txt.exe";
    let task = call_task(
        &daemon,
        json!({"steps": [
            run(json!(["touch", made])),
            run(json!(["printf", "%s", copied])),
            {"wait": {"ms": 1}},
            run(json!(["cp", made, {"ref": "$2.stdout"}])),
            run(json!(["echo", shifty])),
        ]}),
    );
    let pending = tokio::task::block_in_place(|| {
        pending_where(&daemon, "the steps' request", |r| r["surface"] == "steps")
    });
    let steps = pending["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5, "{pending}");
    let decisions: Vec<&str> = steps
        .iter()
        .map(|s| s["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions[..3], ["ask", "ask", "wait"], "{pending}");
    assert!(decisions[3].starts_with("later"), "{pending}");
    assert_eq!(decisions[4], "ask");
    // The person reads every step, each value escaped, the misleading one flagged.
    let shown = daemon.cli(&["approvals", "list"]).stdout;
    assert!(
        shown.contains("step 1") && shown.contains("step 5"),
        "{shown}"
    );
    assert!(shown.contains(made.to_str().unwrap()), "{shown}");
    assert!(shown.contains("label\\u{202e}txt.exe"), "{shown}");
    assert!(!shown.contains('\u{202e}'), "{shown}");
    assert!(shown.contains("WARNING step 5 argv[1]"), "{shown}");
    assert!(!made.exists(), "nothing runs before the answer");

    let answer = |request: &Value| {
        daemon.control_request(
            &json!({"op": "decide", "id": request["id"], "answer": "allow_once",
                    "via": "cli", "expect": request["receipt"]}),
        )
    };
    let answered = tokio::task::block_in_place(|| answer(&pending));
    assert_eq!(answered["ok"], true, "{answered}");
    // Step 4's target came from step 2: it is asked for now, with the value it will use.
    let later = tokio::task::block_in_place(|| {
        pending_where(&daemon, "step 4's own request", |r| {
            r["action"].as_str().is_some_and(|a| a.contains("step 4"))
        })
    });
    assert_eq!(later["receipt"], pending["receipt"], "{later}");
    assert!(
        later["action"]
            .as_str()
            .unwrap()
            .contains(copied.to_str().unwrap()),
        "{later}"
    );
    let answered = tokio::task::block_in_place(|| answer(&later));
    assert_eq!(answered["ok"], true, "{answered}");

    let out = task.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(copied.exists());
    let rows = step_rows(&daemon, &out["receipt"]);
    // The last intent of a step: one asked for on its own has an intent as asked first.
    let approval_of = |step: u64| {
        rows.iter()
            .rev()
            .find(|(s, k, _)| *s == step && k == "intent")
            .map(|(_, _, r)| r["body"]["approval"]["outcome"].clone())
            .unwrap()
    };
    assert_eq!(approval_of(1), "allowed");
    assert_eq!(approval_of(4), "allowed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_approval_stops_the_call_and_names_the_steps_it_asked_for() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("never");
    let task = call_task(&daemon, json!({"steps": [run(json!(["touch", file]))]}));
    let pending = tokio::task::block_in_place(|| {
        pending_where(&daemon, "the steps' request", |r| r["surface"] == "steps")
    });
    let denied = tokio::task::block_in_place(|| {
        daemon.control_request(&json!({"op": "decide", "id": pending["id"], "answer": "deny", "via": "cli", "expect": pending["receipt"]}),
        )
    });
    assert_eq!(denied["ok"], true, "{denied}");
    let out = task.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(
        out["error"]["message"].as_str().unwrap().contains("step 1"),
        "{out}"
    );
    assert!(!file.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ref_cannot_smuggle_a_denied_command_past_policy() {
    let daemon = Daemon::start_with_config(DENY_RM);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();

    // The program name comes from step 1's output: policy decides step 2 on the resolved argv.
    let out = daemon
        .call_raw_once(json!({"steps": [
            run(json!(["printf", "rm"])),
            run(json!([{"ref": "$1.stdout"}, victim])),
        ]}))
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["failed_step"], 2, "{out}");
    assert_eq!(out["error"]["code"], "denied", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("step 2") && message.contains("resolved from earlier steps"),
        "{message}"
    );
    assert!(victim.exists());

    // The same through a script whose text is step 1's output.
    let out = daemon.call_raw_once(json!({"steps": [
            {"surface": "shell", "command": "run", "args": {"argv": ["printf", "%s", format!("true; rm -f {}", victim.display())]}},
            {"surface": "shell", "command": "run", "args": {"script": {"ref": "$1.stdout"}}},
        ]}),
    )
    .await;
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(victim.exists());

    // The ordinary use beside it: a program name taken from an earlier step runs.
    let made = dir.path().join("made");
    let out = daemon
        .call_raw_once(json!({"steps": [
            run(json!(["printf", "touch"])),
            run(json!([{"ref": "$1.stdout"}, made])),
        ]}))
        .await;
    assert_eq!(out["ok"], true, "{out}");
    assert!(made.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_refs_and_bad_shapes_get_clear_errors_and_the_daemon_stays_up() {
    let daemon = Daemon::start_with_config("[limits]\nmax_steps = 3\n");
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");

    // A ref to a field step 1's result does not have: which step, where, and what is there.
    let out = daemon
        .call_raw_once(json!({"steps": [
            run(json!(["touch", first])),
            run(json!(["echo", {"ref": "$1.matches[0].ref"}])),
        ]}))
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["failed_step"], 2, "{out}");
    assert_eq!(out["error"]["path"], "steps[1].args.argv[1]", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("step 2"), "{message}");
    assert!(
        message.contains("has no field `matches`; it has:"),
        "{message}"
    );
    assert!(message.contains("exit_code"), "{message}");
    assert!(first.exists(), "step 1 ran before step 2's ref was read");

    let invalid = |out: &Value, path: &str, words: &str| {
        assert_eq!(out["ok"], false, "{out}");
        assert_eq!(out["error"]["code"], "invalid_call", "{out}");
        assert_eq!(out["error"]["path"], path, "{out}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{words:?} not in {message}");
    };
    let both = daemon
        .call_raw_once(
            json!({"steps": [run(json!(["true"]))], "surface": "shell", "command": "run"}),
        )
        .await;
    invalid(&both, "surface", "either `steps` or `surface`");
    let nested = daemon
        .call_raw_once(json!({"steps": [{"steps": [run(json!(["true"]))]}]}))
        .await;
    invalid(&nested, "steps[0].steps", "nested `steps` are refused");
    let forward = daemon
        .call_raw_once(
            json!({"steps": [run(json!(["echo", {"ref": "$2.stdout"}])), run(json!(["true"]))]}),
        )
        .await;
    invalid(
        &forward,
        "steps[0].args.argv[1]",
        "refers to step 2, which does not run before it",
    );
    let many = daemon
        .call_raw_once(json!({"steps": vec![json!({"wait": {"ms": 1}}); 4]}))
        .await;
    invalid(&many, "steps", "more than the 3 one call may carry");
    let surface = daemon
        .call_raw_once(json!({"steps": [{"surface": "shel", "command": "run"}]}))
        .await;
    // In the words a single call gets, naming the ready surfaces.
    invalid(&surface, "steps[0].surface", "unknown surface `shel`");
    assert!(
        surface["error"]["valid"]
            .as_array()
            .is_some_and(|valid| valid.contains(&json!("shell"))),
        "{surface}"
    );

    // The call's deadline stops what is left.
    let late = dir.path().join("late");
    let out = daemon.call_raw_once(json!({"steps": [{"wait": {"ms": 5000}}, run(json!(["touch", late]))], "timeout_ms": 200}),
    )
    .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"]["code"], "cancelled", "{out}");
    assert!(!late.exists());

    // And the daemon still serves an ordinary call.
    let ok = daemon.call_raw_once(run(json!(["true"]))).await;
    assert_eq!(ok["ok"], true, "{ok}");
}
