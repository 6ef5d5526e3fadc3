//! The agent socket under abuse, done the way a hostile or broken client would: slow and
//! unfinished lines, connections that never initialize, more connections than the cap or the
//! descriptor budget allows, floods of partial lines, duplicate keys, batches, authentication with
//! an id, calls from inside a run, and a client that leaves while its call waits. Beside each, an
//! ordinary client must still be served.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, computer_bin, shell_run, structured, wait_for};
use serde_json::{Value, json};

/// A call on `bystander` that must succeed whatever the other connections do.
async fn assert_served(bystander: &computer_ipc::Client, what: &str) {
    let result = bystander
        .call_raw(shell_run(json!({"argv": ["echo", "served"]}), json!({})))
        .await
        .unwrap_or_else(|err| panic!("{what}: the bystander was not served: {err}"));
    assert_eq!(structured(&result)["stdout"], "served\n", "{what}");
}

/// Reads lines until the end of the stream (or a reset); returns them as JSON.
fn read_to_end(stream: &UnixStream) -> Vec<Value> {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stream).lines() {
        match line {
            Ok(line) if line.trim().is_empty() => {}
            Ok(line) => lines.push(serde_json::from_str(&line).expect("a JSON line")),
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(err) => panic!("reading from the daemon: {err}"),
        }
    }
    lines
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unfinished_line_is_closed_after_the_read_timeout_while_others_are_served() {
    let daemon = Daemon::start_with_config("[server]\nread_timeout_ms = 300\n");
    let bystander = daemon.client().await;
    // Initialized before the slow client starts, then idle for longer than the read timeout:
    // the timeout is about unfinished lines, never about quiet clients.
    let mut idle = RawConnection::connect(&daemon.socket);
    idle.initialize("2025-11-25");

    let mut slow = RawConnection::connect(&daemon.socket);
    slow.initialize("2025-11-25");
    slow.send_bytes(br#"{"jsonrpc":"2.0","id":1,"method":"tools/"#)
        .unwrap();
    assert_served(&bystander, "while a line hangs half-sent").await;
    let refusal = slow.recv().expect("an error before the close");
    assert_eq!(refusal["error"]["code"], -32000, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(message.contains("server.read_timeout_ms"), "{message}");
    assert!(
        slow.recv().is_none(),
        "the connection is closed after the error"
    );

    let (reply, _) = idle.call_tool(&shell_run(json!({"argv": ["echo", "idle"]}), json!({})));
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "idle\n",
        "{reply}"
    );
    assert_served(&bystander, "after the slow client was closed").await;
    bystander.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_that_never_sends_a_request_is_closed() {
    let daemon = Daemon::start_with_config("[server]\nhandshake_timeout_ms = 300\n");
    let bystander = daemon.client().await;

    let silent = UnixStream::connect(&daemon.socket).unwrap();
    let lines = read_to_end(&silent);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let message = lines[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("server.handshake_timeout_ms") && message.contains("initialize"),
        "{message}"
    );

    // Authenticating is no request: the clock keeps running.
    let token = daemon.add_agent("quiet");
    let mut authenticated = RawConnection::connect(&daemon.socket);
    authenticated.send(&json!({"jsonrpc": "2.0", "method": "computer/authenticate",
                               "params": {"token": token}}));
    let refusal = authenticated.recv().expect("an error before the close");
    assert_eq!(refusal["error"]["code"], -32000, "{refusal}");
    assert!(authenticated.recv().is_none());

    // The bystander initialized long before the timeout and is kept.
    assert_served(&bystander, "after the silent clients were closed").await;
    bystander.close().await;
}

/// Connects and initializes; `None` when the daemon refuses the connection instead.
fn try_initialize(daemon: &Daemon) -> Option<RawConnection> {
    let mut raw = RawConnection::connect(&daemon.socket);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "abuse", "version": "0"}}
    });
    // A refused connection may be closed before the request is written: that is a refusal too.
    let mut line = serde_json::to_vec(&initialize).expect("json");
    line.push(b'\n');
    raw.send_bytes(&line).ok()?;
    let reply = raw.recv()?;
    if reply["id"] != 0 {
        return None;
    }
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    Some(raw)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connection_cap_refuses_the_excess_at_once_while_clients_are_served() {
    let daemon = Daemon::start_with_config("[server]\nmax_connections = 4\n");
    let bystander = daemon.client().await;
    let mut held: Vec<RawConnection> = (0..3)
        .map(|_| try_initialize(&daemon).expect("under the cap"))
        .collect();

    for _ in 0..3 {
        let excess = UnixStream::connect(&daemon.socket).unwrap();
        let lines = read_to_end(&excess);
        assert_eq!(
            lines.len(),
            1,
            "one refusal line, then the close: {lines:?}"
        );
        assert_eq!(lines[0]["error"]["code"], -32000, "{lines:?}");
        let message = lines[0]["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("4 connections") && message.contains("server.max_connections"),
            "{message}"
        );
    }
    assert_served(&bystander, "at the cap").await;
    let (reply, _) = held[0].call_tool(&shell_run(json!({"argv": ["true"]}), json!({})));
    assert!(reply["result"].is_object(), "{reply}");

    // Three refusals, one log line.
    let logged = daemon
        .log_text()
        .lines()
        .filter(|line| line.contains("max_connections"))
        .count();
    assert_eq!(logged, 1, "{}", daemon.log_text());

    // A slot freed is a slot served again.
    held.pop();
    let again = wait_for(
        "a freed slot to serve a new client",
        Duration::from_secs(10),
        || try_initialize(&daemon),
    );
    drop(again);
    bystander.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_past_the_descriptor_budget_is_refused_and_the_reserve_keeps_the_daemon_serving() {
    let limit = 64;
    let daemon = Daemon::start_with_open_file_limit(
        "[server]\nmax_connections = 10000\nhandshake_timeout_ms = 120000\n",
        limit,
    );
    // Counted once the daemon has said all it says at start (the log holds only this start).
    wait_for("the daemon's start lines", Duration::from_secs(20), || {
        let log = daemon.log_text();
        let serving = log
            .lines()
            .any(|line| line.contains("computer_daemon::server") && line.contains(" serving"));
        // The containment proof finishes in the background and says so too.
        (serving && log.contains("control socket serving") && log.contains("runs are contained"))
            .then_some(())
    });

    // Twice as many connections as the daemon may hold descriptors: those past its budget are
    // told so in one line and closed, so it never runs out.
    let flood: Vec<UnixStream> = (0..2 * limit)
        .map(|_| UnixStream::connect(&daemon.socket).expect("connect"))
        .collect();
    let refused = read_to_end(flood.last().unwrap());
    let message = refused
        .first()
        .and_then(|line| line["error"]["message"].as_str())
        .unwrap_or_else(|| panic!("no refusal line: {refused:?}"))
        .to_string();
    assert!(
        message.contains("kept for its own work and the control socket"),
        "{message}"
    );
    // While the flood holds what it got: the control socket answers, and nothing failed for
    // want of a descriptor.
    let approvals = daemon.cli(&["approvals", "list", "--json"]);
    assert!(
        approvals.status.success(),
        "the control socket did not answer: {}{}",
        approvals.stdout,
        approvals.stderr
    );
    assert!(
        !daemon.log_text().contains("cannot accept connections"),
        "{}",
        daemon.log_text()
    );

    // The flood leaves; calls are served again.
    drop(flood);
    let reply = wait_for("the daemon to serve again", Duration::from_secs(20), || {
        let out = daemon.cli(&["call", "shell", "run", "--json", "--", "echo", "back"]);
        out.status.success().then(|| out.json())
    });
    assert_eq!(reply["stdout"], "back\n", "{reply}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_partial_lines_keeps_memory_within_the_cap() {
    let cap = 32;
    let daemon = Daemon::start_with_config(&format!(
        "[server]\nmax_connections = {cap}\nread_timeout_ms = 120000\nhandshake_timeout_ms = 120000\n"
    ));
    let bystander = daemon.client().await;
    assert_served(&bystander, "before the flood").await;
    let baseline_kib = daemon.memory_kib("VmRSS");

    // Each line is just under the 1 MiB request cap and never finished.
    let partial = vec![b'x'; (1 << 20) - 16];
    let mut held = Vec::new();
    for _ in 0..200 {
        let mut stream = UnixStream::connect(&daemon.socket).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // Refused connections (over the cap) fail the write; served ones take it all.
        let _ = stream.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"");
        let _ = stream.write_all(&partial);
        held.push(stream);
    }
    assert_served(&bystander, "during the flood").await;
    let grown_mib = daemon.memory_kib("VmRSS").saturating_sub(baseline_kib) / 1024;
    // The bound: each served connection holds at most max_request_bytes (1 MiB) of an unfinished
    // line, and at most `cap` connections are served. Generously: three times that.
    let bound_mib = 3 * cap as u64;
    assert!(
        grown_mib <= bound_mib,
        "RSS grew by {grown_mib} MiB under 200 partial lines; the cap allows about {cap} MiB"
    );
    drop(held);
    assert_served(&bystander, "after the flood").await;
    bystander.close().await;
}

#[test]
fn duplicate_keys_are_refused_naming_the_key() {
    let daemon = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("touched");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");

    // Two argv: a reader that takes the first would approve `echo`, one that takes the last runs
    // `touch`.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"COMPUTER","arguments":{{"surface":"shell","command":"run","args":{{"argv":["echo","harmless"],"argv":["touch","{}"]}}}}}}}}"#,
        mark.display()
    );
    raw.send_bytes(format!("{line}\n").as_bytes()).unwrap();
    let reply = raw.recv_response(7);
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`argv`") && message.contains("params.arguments.args"),
        "{message}"
    );
    assert!(!mark.exists(), "the duplicated request ran");

    // A repeated id cannot be answered by id; a repeated method neither runs.
    raw.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"id\":9,\"method\":\"tools/list\"}\n")
        .unwrap();
    let reply = raw.recv().unwrap();
    assert!(reply["id"].is_null(), "{reply}");
    assert!(
        reply["error"]["message"].as_str().unwrap().contains("`id`"),
        "{reply}"
    );
    raw.send_bytes(
        b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\",\"method\":\"ping\"}\n",
    )
    .unwrap();
    let reply = raw.recv_response(10);
    assert_eq!(reply["error"]["code"], -32600, "{reply}");

    // The same connection still serves an honest call.
    let (reply, _) = raw.call_tool(&shell_run(json!({"argv": ["echo", "ok"]}), json!({})));
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "ok\n",
        "{reply}"
    );

    // Two tokens in one authentication: neither is taken.
    let token = daemon.add_agent("twice");
    let mut twice = UnixStream::connect(&daemon.socket).unwrap();
    let auth = format!(
        r#"{{"jsonrpc":"2.0","id":"a","method":"computer/authenticate","params":{{"token":"{token}","token":"{token}"}}}}"#
    );
    twice.write_all(format!("{auth}\n").as_bytes()).unwrap();
    let lines = read_to_end(&twice);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], "a", "{lines:?}");
    assert_eq!(lines[0]["error"]["code"], -32001, "{lines:?}");
}

#[test]
fn a_batch_gets_an_error_reply() {
    let daemon = Daemon::start();
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "ping"},
    ]));
    let reply = raw.recv().expect("a reply to the batch");
    let answers = reply.as_array().expect("a batch is answered by an array");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!("two")], "{reply}");
    for answer in answers {
        assert_eq!(answer["error"]["code"], -32600, "{reply}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("batches are not supported"),
            "{reply}"
        );
    }
    raw.send_bytes(b"[]\n").unwrap();
    let reply = raw.recv().expect("a reply to the empty batch");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert!(reply["id"].is_null(), "{reply}");

    let (reply, _) = raw.call_tool(&shell_run(json!({"argv": ["echo", "ok"]}), json!({})));
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "ok\n",
        "{reply}"
    );
}

#[test]
fn authenticate_sent_with_an_id_is_answered() {
    let daemon = Daemon::start();
    let token = daemon.add_agent("builder");

    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": "auth", "method": "computer/authenticate",
                     "params": {"token": token}}),
    );
    let answer = raw.recv().expect("an answer to the authentication");
    assert_eq!(answer["id"], "auth", "{answer}");
    assert_eq!(answer["result"]["agent"], "builder", "{answer}");
    let init = raw.initialize("2025-11-25");
    assert!(init["result"].is_object(), "{init}");
    let (reply, _) = raw.call_tool(&shell_run(json!({"argv": ["true"]}), json!({})));
    let receipt = reply["result"]["structuredContent"]["receipt"].clone();
    let intent = daemon.receipt_row(&receipt, "intent");
    assert_eq!(intent["body"]["caller"]["agent"], "builder", "{intent}");

    // A bad token sent with an id: an error with that id, then the close.
    let mut bad = UnixStream::connect(&daemon.socket).unwrap();
    bad.write_all(
        b"{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"computer/authenticate\",\"params\":{\"token\":\"ct_wrong\"}}\n",
    )
    .unwrap();
    let lines = read_to_end(&bad);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], 41, "{lines:?}");
    assert_eq!(lines[0]["error"]["code"], -32001, "{lines:?}");
    assert!(
        lines[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown agent token"),
        "{lines:?}"
    );
}

#[test]
fn a_call_from_inside_a_run_is_refused_and_logged() {
    // Containment off: this is the defense that holds without it (with it, runs do not even see
    // the socket; see the end of this test).
    let daemon = Daemon::start_with_config(
        "[containment]\nmode = \"off\"\n[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n",
    );
    // What an agent allowed to run shell commands would try: call the daemon back from inside
    // the run, where it would be a fresh `default` agent. COMPUTER_* cannot be passed through
    // complications.env, so the script sets it itself.
    let script = format!(
        "COMPUTER_SOCKET={} {} call shell run --json -- echo nested",
        daemon.socket.display(),
        computer_bin().display()
    );
    let reply = daemon.shell_run_json(&json!({"script": script}), &json!({}));
    assert_ne!(
        reply["exit_code"], 0,
        "the nested call went through: {reply}"
    );
    let said = format!("{}{}", reply["stdout"], reply["stderr"]);
    assert!(
        said.contains("descends from this daemon") && !said.contains("\"nested"),
        "{reply}"
    );
    assert!(
        daemon
            .log_text()
            .contains("refused a connection from inside a run"),
        "{}",
        daemon.log_text()
    );

    // A raw client from inside a run gets the same refusal, and no answer to its request.
    let python = r#"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}\n')
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode().strip())
"#;
    let reply = daemon.shell_run_json(
        &json!({"argv": ["python3", "-c", python, daemon.socket]}),
        &json!({}),
    );
    let answer: Value = serde_json::from_str(reply["stdout"].as_str().unwrap().trim())
        .unwrap_or_else(|err| panic!("{err}: {reply}"));
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");

    // Beside it, the agent itself is served.
    let out = daemon.cli(&["call", "shell", "run", "--json", "--", "echo", "direct"]);
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["stdout"], "direct\n");

    // Contained (the default), the same nested call does not get through either.
    let contained =
        Daemon::start_with_config("[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n");
    let script = format!(
        "COMPUTER_SOCKET={} {} call shell run --json -- echo nested",
        contained.socket.display(),
        computer_bin().display()
    );
    let reply = contained.call_json("shell", "run", &json!({"script": script}).to_string());
    assert_ne!(
        reply["exit_code"], 0,
        "the nested call went through: {reply}"
    );
    assert!(
        !reply["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("nested"),
        "{reply}"
    );
}

#[test]
fn a_client_gone_while_its_call_waits_for_approval_is_withdrawn_at_once() {
    let daemon = Daemon::start_with_config("[defaults]\nact = \"ask\"\n");
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("made-by-the-run");

    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "COMPUTER",
                   "arguments": shell_run(json!({"argv": ["touch", mark]}), json!({}))}}));
    let pending = wait_for(
        "the call to wait for a person",
        Duration::from_secs(20),
        || daemon.pending_approvals().into_iter().next(),
    );
    let id = pending["id"].to_string();

    // The agent goes away: the request is withdrawn before a person could allow it.
    drop(raw);
    let out = daemon.cli(&["approvals", "allow", &id]);
    assert!(
        !out.status.success(),
        "an allow after the agent left went through: {}{}",
        out.stdout,
        out.stderr
    );
    assert!(daemon.pending_approvals().is_empty());

    // The refusal's receipt is written as the call unwinds, just after the withdrawal.
    let result = wait_for("the result receipt", Duration::from_secs(20), || {
        daemon
            .receipts()
            .into_iter()
            .rfind(|row| row["kind"] == "result")
    });
    let text = result.to_string();
    assert!(
        text.contains("denied") && text.contains("went away"),
        "{result}"
    );
    assert!(!mark.exists(), "the run happened after its agent left");
}

#[test]
fn a_client_that_only_stops_sending_still_gets_its_answer() {
    let daemon = Daemon::start();
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "COMPUTER",
                   "arguments": shell_run(json!({"script": "sleep 0.5; echo finished"}), json!({}))}}));
    // Half-close: no more requests, still reading.
    raw.shutdown_write();
    let reply = raw.recv_response(1);
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "finished\n",
        "{reply}"
    );
    assert!(
        raw.recv().is_none(),
        "the daemon closes after the last answer"
    );
}

#[test]
fn a_half_closed_client_keeps_its_waiting_call_until_it_is_gone() {
    let daemon = Daemon::start_with_config("[defaults]\nact = \"ask\"\n");
    let dir = tempfile::tempdir().unwrap();
    let ask = |raw: &mut RawConnection, file: &std::path::Path| {
        raw.initialize("2025-11-25");
        raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "COMPUTER",
                       "arguments": shell_run(json!({"argv": ["touch", file]}), json!({}))}}));
        wait_for(
            "the call to wait for a person",
            Duration::from_secs(20),
            || daemon.pending_approvals().into_iter().next(),
        )["id"]
            .to_string()
    };

    // Stopped sending, still reading: the person's allow runs the call and its answer arrives.
    let kept = dir.path().join("kept");
    let mut raw = RawConnection::connect(&daemon.socket);
    let id = ask(&mut raw, &kept);
    raw.shutdown_write();
    let out = daemon.cli(&["approvals", "allow", &id]);
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    let reply = raw.recv_response(1);
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
    assert!(kept.exists());
    assert!(raw.recv().is_none(), "closed after the last answer");

    // Stopped sending, then gone: withdrawn.
    let lost = dir.path().join("lost");
    let mut raw = RawConnection::connect(&daemon.socket);
    let id = ask(&mut raw, &lost);
    raw.shutdown_write();
    drop(raw);
    wait_for(
        "the request to be withdrawn",
        Duration::from_secs(20),
        || daemon.pending_approvals().is_empty().then_some(()),
    );
    let out = daemon.cli(&["approvals", "allow", &id]);
    assert!(!out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(!lost.exists());
}

#[test]
fn a_client_gone_mid_run_cancels_the_run_at_once() {
    let daemon = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("after-sleep");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    let script = format!("sleep 30; touch {}", mark.display());
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "COMPUTER",
                   "arguments": shell_run(json!({"script": script}), json!({}))}}));
    wait_for("the run to start", Duration::from_secs(20), || {
        daemon
            .receipts()
            .iter()
            .any(|row| row["kind"] == "intent")
            .then_some(())
    });
    // Shut for sending first, then gone altogether: the second is what cancels.
    raw.shutdown_write();
    drop(raw);
    let result = wait_for(
        "the run's result receipt",
        // Well under the run's 30 s: only a cancellation ends it this early.
        Duration::from_secs(20),
        || {
            daemon
                .receipts()
                .into_iter()
                .find(|row| row["kind"] == "result")
        },
    );
    assert_eq!(
        result["body"]["cancelled"]["by"], "disconnect",
        "the result does not say the client went away: {result}"
    );
    assert!(!mark.exists(), "the run went on after its client left");
}
