//! Approvals that cannot be answered stale, against the real daemon: request ids are never reused
//! across a restart, an answer naming another request decides nothing, a request leaves with its
//! agent, the time left counts down, and a waiting client keeps hearing progress.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, shell_run, touch_task, wait_for};
use serde_json::{Value, json};

const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";

fn pending_for(daemon: &Daemon, file: &std::path::Path) -> Value {
    let path = file.to_str().unwrap();
    wait_for("the request to be pending", Duration::from_secs(20), || {
        daemon
            .pending_approvals()
            .into_iter()
            .find(|r| r["action"].as_str().is_some_and(|a| a.contains(path)))
    })
}

/// `shell run touch FILE` on its own task; `None` when the daemon went away before answering.
fn touch_until_the_daemon_dies(daemon: &Daemon, file: &std::path::Path) {
    let socket = daemon.socket.clone();
    let file = file.to_path_buf();
    tokio::spawn(async move {
        let client = computer_ipc::Client::connect(&socket).await.ok()?;
        client
            .call_raw(shell_run(json!({"argv": ["touch", file]}), json!({})))
            .await
            .ok()
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_id_from_before_a_restart_approves_nothing() {
    let mut daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("asked-before-the-restart");
    touch_until_the_daemon_dies(&daemon, &before);
    let old = tokio::task::block_in_place(|| pending_for(&daemon, &before));
    let old_id = old["id"].as_u64().unwrap();

    daemon.stop_with(libc::SIGKILL);
    daemon.restart();

    let after = dir.path().join("asked-after-the-restart");
    let call = touch_task(&daemon, &after);
    let new = tokio::task::block_in_place(|| pending_for(&daemon, &after));
    let new_id = new["id"].as_u64().unwrap();
    assert!(new_id > old_id, "ids continue: {old_id} then {new_id}");

    // A person (or a script) who noted the old id answers it: nothing is approved.
    let stale = daemon.cli(&["approvals", "allow", &old_id.to_string()]);
    assert!(!stale.status.success(), "{}", stale.stdout);
    assert!(
        stale
            .stderr
            .contains(&format!("no pending request with id {old_id}")),
        "{}",
        stale.stderr
    );
    // The right id with the old request's receipt: not the request that person saw.
    let mismatched = daemon.cli(&[
        "approvals",
        "allow",
        &new_id.to_string(),
        "--expect",
        old["receipt"].as_str().unwrap(),
    ]);
    assert!(!mismatched.status.success(), "{}", mismatched.stdout);
    assert!(
        mismatched.stderr.contains("not the one you were shown"),
        "{}",
        mismatched.stderr
    );
    assert!(!after.exists() && !before.exists());
    let still = daemon.pending_approvals();
    assert_eq!(still.len(), 1, "{still:?}");
    assert_eq!(
        (&still[0]["id"], &still[0]["receipt"]),
        (&new["id"], &new["receipt"]),
        "the new request still waits"
    );

    // The ordinary answer, naming the request it was shown, goes through.
    let allowed = daemon.cli(&[
        "approvals",
        "allow",
        &new_id.to_string(),
        "--expect",
        new["receipt"].as_str().unwrap(),
    ]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["receipt"], new["receipt"]);
    assert!(after.exists());
}

/// One request on the control socket, as an approver speaks it; the daemon's reply.
fn control_request(daemon: &Daemon, request: &Value) -> Value {
    let mut stream = UnixStream::connect(daemon.control_socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    serde_json::from_str(reply.lines().next().expect("a reply line")).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_naming_another_request_is_refused_and_the_terminal_names_its_own() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("answered-in-the-terminal");
    let call = touch_task(&daemon, &file);
    let pending = tokio::task::block_in_place(|| pending_for(&daemon, &file));

    // What a stale window or terminal would send: the right id, another request's receipt.
    let refused = tokio::task::block_in_place(|| {
        control_request(
            &daemon,
            &json!({"op": "decide", "id": pending["id"], "answer": "allow_once",
                    "via": "window", "expect": "0190aaaa-0000-7000-8000-000000000000"}),
        )
    });
    assert_eq!(refused["ok"], false, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("not the one you were shown"), "{error}");
    assert!(
        error.contains(pending["receipt"].as_str().unwrap()),
        "{error}"
    );
    assert!(!file.exists());
    assert_eq!(daemon.pending_approvals().len(), 1, "still waiting");

    // The terminal approver shows the request and sends its receipt id with the answer.
    let mut approver = daemon
        .command()
        .arg("approve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let shown = Arc::new(Mutex::new(String::new()));
    let mut stdout = approver.stdout.take().unwrap();
    let reader = {
        let shown = shown.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                shown
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        })
    };
    let seen = |text: &str| {
        let text = text.to_string();
        let shown = shown.clone();
        move || shown.lock().unwrap().contains(&text).then_some(())
    };
    tokio::task::block_in_place(|| {
        wait_for(
            "the terminal to show the request",
            Duration::from_secs(20),
            seen("allow? [a/s/d]"),
        );
        let text = shown.lock().unwrap().clone();
        assert!(text.contains(file.to_str().unwrap()), "{text}");
        assert!(text.contains("expires in"), "{text}");
        let mut stdin = approver.stdin.take().unwrap();
        stdin.write_all(b"a\n").unwrap();
        wait_for(
            "the terminal to send the answer",
            Duration::from_secs(20),
            seen("AllowOnce sent"),
        );
        drop(stdin);
    });
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "terminal");
    assert!(approver.wait().unwrap().success());
    reader.join().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_leaves_with_its_agent_and_a_late_allow_runs_nothing() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("withdrawn");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["touch", file]}), json!({}))}}),
    );
    let pending = tokio::task::block_in_place(|| pending_for(&daemon, &file));
    drop(raw);
    tokio::task::block_in_place(|| {
        wait_for(
            "the request to be withdrawn",
            Duration::from_secs(20),
            || daemon.pending_approvals().is_empty().then_some(()),
        )
    });
    let late = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(!late.status.success(), "{}", late.stdout);
    assert!(
        late.stderr.contains("no pending request with id"),
        "{}",
        late.stderr
    );
    let intent = daemon.receipt_row(&pending["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["outcome"], "denied", "{intent}");
    assert!(!file.exists(), "nothing ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn expires_in_ms_is_the_time_left_now() {
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"60s\"\n"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counting-down");
    let call = touch_task(&daemon, &file);
    let first = tokio::task::block_in_place(|| pending_for(&daemon, &file));
    let first_left = first["expires_in_ms"].as_u64().unwrap();
    assert!(first_left <= 60_000, "{first}");
    let later_left = tokio::task::block_in_place(|| {
        wait_for(
            "a later read to show less time left",
            Duration::from_secs(20),
            || {
                let left = daemon.pending_approvals()[0]["expires_in_ms"].as_u64()?;
                (left < first_left).then_some(left)
            },
        )
    });
    assert!(later_left < first_left);
    // The plain-words list says the same.
    let listed = daemon.cli(&["approvals", "list"]).stdout;
    let secs: u64 = listed
        .split("expires in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no time left in {listed}"));
    assert!(secs < 60, "{listed}");
    let id = first["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    assert_eq!(call.await.unwrap()["error"]["code"], "denied");
}

#[test]
fn progress_keeps_coming_for_the_whole_wait() {
    // With a 3 s approval timeout the daemon reminds every 300 ms (timeout / 10; 5 s at most).
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"3s\"\n"));
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "wait"}, "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["true"]}), json!({}))}}),
    );
    let mut progress = Vec::new();
    let reply = loop {
        let message = raw.recv().expect("the connection stays open");
        if message["id"] == 1 {
            break message;
        }
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "wait");
        progress.push(message["params"]["message"].as_str().unwrap().to_string());
    };
    assert!(
        progress.len() >= 3,
        "a notification when the wait began and then periodically: {progress:#?}"
    );
    assert!(
        progress[0].starts_with("waiting for approval"),
        "{progress:#?}"
    );
    assert!(
        progress[1..]
            .iter()
            .all(|m| m.starts_with("still waiting for approval") && m.contains("s left")),
        "{progress:#?}"
    );
    let result = &reply["result"]["structuredContent"];
    assert_eq!(result["error"]["code"], "denied", "{reply}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "{reply}"
    );
}
