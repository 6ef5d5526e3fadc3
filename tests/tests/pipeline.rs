//! The same answer from every caller: a table of calls that covers every kind of refusal (and a
//! failure at run time), each sent by the same agent as a single call, as a step of a multi-step
//! call, detached as a job (where `detach` applies), and put to `computer policy explain
//! --agent`. Each pair must give the same error (code, path, valid choices) and the same
//! decision, as the stages of one call are written once and every caller composes them.

use std::time::Duration;

use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// Acts allowed, `rm` denied, `touch` asked, and nobody to answer (a request is denied after
/// a second).
const CONFIG: &str = "[defaults]\nact = \"allow\"\n[approval]\ntimeout = \"1s\"\n\
     [[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n\
     [[rules]]\nargv0 = [\"touch\"]\ndecision = \"ask\"\n";

fn shell(command: &str, args: Value) -> Value {
    json!({"surface": "shell", "command": command, "args": args})
}

/// What must be equal between callers: the code, the path and the valid choices. A step's
/// path is under `steps[0].`; its message names the step, so it is not compared.
fn comparable(error: &Value, step: bool) -> Value {
    let path = error["path"].as_str().map(|path| {
        if step {
            path.strip_prefix("steps[0].")
                .unwrap_or_else(|| panic!("a step's error path is under steps[0]: {error}"))
                .to_string()
        } else {
            path.to_string()
        }
    });
    json!({"code": error["code"], "path": path, "valid": error["valid"]})
}

/// The decision the daemon receipted for a call (the last intent written for it).
fn receipted_decision(daemon: &Daemon, receipt: &Value) -> Value {
    daemon
        .receipts()
        .into_iter()
        .rev()
        .find(|row| row["call_id"] == *receipt && row["kind"] == "intent")
        .map(|row| row["body"]["policy"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_caller_gets_the_same_error_and_the_same_decision() {
    let daemon = Daemon::start_with_config(CONFIG);
    let agent = daemon.add_agent("worker");
    let narrow = daemon.add_agent_for_surfaces("narrow", "shell");
    let owner = daemon.add_agent("owner");
    let opened = daemon
        .call_raw_once_as(
            &owner,
            shell("open", json!({"argv": ["bash", "--norc", "--noprofile"]})),
        )
        .await;
    let session = opened["session"].as_u64().expect("a session opened");

    // (what, the agent's name and token, the call, whether `detach` applies to it)
    let table: Vec<(&str, (&str, &str), Value, bool)> = vec![
        (
            "unknown surface",
            ("worker", &agent),
            json!({"surface": "nope", "command": "run", "args": {}}),
            false,
        ),
        (
            "unknown command",
            ("worker", &agent),
            shell("frobnicate", json!({})),
            false,
        ),
        (
            "unknown field",
            ("worker", &agent),
            shell("run", json!({"argv": ["true"], "bogus": 1})),
            true,
        ),
        (
            "bad arg type",
            ("worker", &agent),
            shell("run", json!({"argv": "true"})),
            true,
        ),
        (
            "unsupported complication",
            ("worker", &agent),
            json!({"surface": "shell", "command": "list", "args": {},
                   "complications": {"secrets": {"T": "keychain://computer-tests/none"}}}),
            false,
        ),
        (
            "out of scope",
            ("narrow", &narrow),
            json!({"surface": "gui", "command": "windows", "args": {}}),
            false,
        ),
        (
            "denied by a rule",
            ("worker", &agent),
            shell("run", json!({"argv": ["rm", "-f", "/tmp/never-there"]})),
            true,
        ),
        (
            "asked, nobody answers",
            ("worker", &agent),
            shell(
                "run",
                json!({"argv": ["touch", "/tmp/never-made-by-pipeline"]}),
            ),
            true,
        ),
        (
            "another agent's session",
            ("worker", &agent),
            shell("read", json!({"session": session})),
            false,
        ),
        (
            "a surface's own error with valid choices",
            ("worker", &agent),
            shell(
                "send",
                json!({"session": session, "text": "x", "keys": ["Enter"]}),
            ),
            false,
        ),
        (
            "fails when it runs",
            ("worker", &agent),
            shell("run", json!({"argv": ["/nonexistent/program"]})),
            true,
        ),
    ];

    for (what, (name, token), call, detachable) in &table {
        let single = daemon.call_raw_once_as(token, call.clone()).await;
        assert_eq!(single["ok"], false, "{what}: {single}");
        let error = &single["error"];
        assert!(error["code"].is_string(), "{what}: {single}");

        // As the one step of a multi-step call.
        let steps = daemon
            .call_raw_once_as(token, json!({"steps": [call]}))
            .await;
        assert_eq!(steps["ok"], false, "{what}: {steps}");
        assert_eq!(
            comparable(&steps["error"], true),
            comparable(error, false),
            "{what}: a step and a single call differ\nstep: {steps}\nsingle: {single}"
        );

        // Detached, where `detach` applies: refused the same, or failing the same once run.
        if *detachable {
            let mut detached = call.clone();
            detached["complications"] = json!({"detach": true});
            let job = daemon.call_raw_once_as(token, detached).await;
            let job_error = match job["status"].as_str() {
                Some("running") => {
                    let id = job["job"].clone();
                    let result = shell("job", json!({"op": "result", "id": id, "wait_ms": 20_000}));
                    let result = daemon.call_raw_once_as(token, result).await;
                    assert_eq!(result["status"], "failed", "{what}: {result}");
                    result["error"].clone()
                }
                _ => job["error"].clone(),
            };
            assert_eq!(
                comparable(&job_error, false),
                comparable(error, false),
                "{what}: a job and a single call differ\njob: {job}\nsingle: {single}"
            );
        }

        // `policy explain` for the same agent says what the gateway did.
        let explained = daemon.cli(&[
            "policy",
            "explain",
            "--agent",
            name,
            "--args",
            &call.to_string(),
        ]);
        let explained = explained.json();
        match explained.get("error") {
            Some(explained_error) => {
                assert_eq!(
                    explained_error, error,
                    "{what}: explain refuses it otherwise than the gateway did"
                );
            }
            None => {
                let receipted = receipted_decision(&daemon, &single["receipt"]);
                assert_eq!(
                    explained["decision"], receipted,
                    "{what}: explain decides otherwise than the gateway did\n{explained}"
                );
                if explained["decision"]["decision"] == "allow" {
                    // Allowed, then refused or failed at run time: explain cannot run it.
                    assert_eq!(error["code"], "action_failed", "{what}: {single}");
                }
            }
        }
    }

    // The refusal kinds each say what they are, so the table covers what it claims.
    let codes: Vec<String> = {
        let mut codes = Vec::new();
        for (_, (_, token), call, _) in &table {
            let reply = daemon.call_raw_once_as(token, call.clone()).await;
            codes.push(
                reply["error"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        codes
    };
    for code in ["invalid_call", "unavailable", "denied", "action_failed"] {
        assert!(
            codes.iter().any(|c| c == code),
            "no {code} in the table: {codes:?}"
        );
    }
    // Every call above left its rows, and the chain holds.
    daemon.assert_chain_holds();
    wait_for("nothing left waiting", Duration::from_secs(10), || {
        daemon.pending_approvals().is_empty().then_some(())
    });
}

/// Acts asked, with time to spare for the test to act while a request waits.
const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n[approval]\ntimeout = \"120s\"\n";

/// The rows of one call, through `computer receipts show`, as a person would read them.
fn shown_rows(daemon: &Daemon, receipt: &str) -> Vec<Value> {
    let out = daemon.cli(&["receipts", "show", receipt]);
    assert!(
        out.status.success(),
        "receipts show {receipt}: {}",
        out.stderr
    );
    out.json().as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_waiting_when_the_daemon_is_killed_reads_as_interrupted() {
    let mut daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("asked-then-killed");
    daemon.touch_until_the_daemon_dies(&file);
    let pending = tokio::task::block_in_place(|| daemon.pending_for(&file));
    let receipt = pending["receipt"]
        .as_str()
        .expect("the approver sees a receipt id");

    // The intent is durable before the person is asked: it is there while they think.
    let rows = shown_rows(&daemon, receipt);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["kind"], "intent");
    assert_eq!(
        rows[0]["body"]["approval"]["outcome"], "pending",
        "{rows:?}"
    );
    assert_eq!(rows[0]["body"]["approval"]["request"], pending["id"]);
    assert_eq!(rows[0]["body"]["policy"]["decision"], "ask");

    daemon.stop_with(libc::SIGKILL);
    daemon.restart();

    // The id the approver saw reads as interrupted, never as missing.
    let rows = shown_rows(&daemon, receipt);
    let result = rows
        .iter()
        .find(|row| row["kind"] == "result")
        .unwrap_or_else(|| panic!("no result for {receipt}: {rows:?}"));
    assert_eq!(result["body"]["outcome"], "interrupted", "{result}");
    assert_eq!(result["body"]["ok"], false);
    assert!(!file.exists(), "nothing ran");
    daemon.assert_chain_holds();

    // An ordinary call after the restart works, and is asked and answered as before.
    let again = dir.path().join("asked-after-the-restart");
    let call = computer_tests::touch_task(&daemon, &again);
    let asked = tokio::task::block_in_place(|| daemon.pending_for(&again));
    let allowed = daemon.cli(&["approvals", "allow", &asked["id"].to_string()]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(again.exists());
    // Its rows: the intent as asked, the intent as allowed (who allowed it, durable before
    // it ran), and the result.
    let rows = shown_rows(&daemon, out["receipt"].as_str().unwrap());
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["intent", "intent", "result"], "{rows:?}");
    assert_eq!(rows[0]["body"]["approval"]["outcome"], "pending");
    assert_eq!(rows[1]["body"]["approval"]["outcome"], "allowed");
    assert_eq!(rows[1]["body"]["approval"]["by"]["via"], "cli");
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_ask_has_its_intent_and_its_result() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("asked-then-denied");
    let call = computer_tests::touch_task(&daemon, &file);
    let asked = tokio::task::block_in_place(|| daemon.pending_for(&file));
    let denied = daemon.cli(&["approvals", "deny", &asked["id"].to_string()]);
    assert!(denied.status.success(), "{}", denied.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"]["code"], "denied");
    assert!(!file.exists());
    let rows = shown_rows(&daemon, asked["receipt"].as_str().unwrap());
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["intent", "intent", "result"], "{rows:?}");
    assert_eq!(rows[0]["body"]["approval"]["outcome"], "pending");
    assert_eq!(rows[1]["body"]["approval"]["outcome"], "denied");
    assert_eq!(rows[2]["body"]["error"]["code"], "denied");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_steps_call_uses_none_of_the_window() {
    let daemon = Daemon::start_with_config("[limits]\ncalls = 3\nwindow = \"600s\"\n");
    let token = daemon.add_agent("counted");
    let echo = |word: &str| shell("run", json!({"argv": ["echo", word]}));

    // Four call steps do not fit in three: refused, and none of them counted.
    let steps = json!({"steps": [echo("1"), echo("2"), {"wait": {"ms": 1}}, echo("3"), echo("4")]});
    let refused = daemon.call_raw_once_as(&token, steps).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("none of them was counted"),
        "{refused}"
    );

    // So the whole window is still there: two steps (counted as two), then one call.
    let two = daemon
        .call_raw_once_as(&token, json!({"steps": [echo("a"), echo("b")]}))
        .await;
    assert_eq!(two["ok"], true, "{two}");
    let one = daemon.call_raw_once_as(&token, echo("c")).await;
    assert_eq!(one["ok"], true, "{one}");
    // And the window is now used up, exactly.
    let over = daemon.call_raw_once_as(&token, echo("d")).await;
    assert_eq!(over["error"]["code"], "rate_limited", "{over}");
}
