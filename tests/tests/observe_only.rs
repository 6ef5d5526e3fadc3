//! The observe-only relay (`computer mcp --observe-only`), for hosts that run read-only tools
//! without asking: the same `COMPUTER` tool annotated read-only and listing only what observes,
//! and the daemon refusing (never asking) whatever acts on such a connection, alone, as a step
//! or detached. Attacks: the host's client trying to switch the flag off, through the relay and
//! on a connection of its own.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use computer_tests::{Daemon, RawConnection};
use serde_json::{Value, json};

/// Every act asks: a refusal that asked nobody shows as no pending request.
const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";

/// A relay as a host runs it, spoken to line by line.
struct Relay {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    next_id: i64,
}

impl Relay {
    fn start(daemon: &Daemon, args: &[&str]) -> Relay {
        let mut child = daemon
            .command()
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the relay");
        let to = child.stdin.take().unwrap();
        let from = BufReader::new(child.stdout.take().unwrap());
        Relay {
            child,
            to,
            from,
            next_id: 0,
        }
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.to.write_all(&line).unwrap();
    }

    /// Sends a request and reads until its response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.from.read_line(&mut line).unwrap() > 0,
                "the relay closed"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "observe-host", "version": "0"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    fn call(&mut self, arguments: Value) -> Value {
        let reply = self.request(
            "tools/call",
            json!({"name": "COMPUTER", "arguments": arguments}),
        );
        reply["result"]["structuredContent"].clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(argv: Value) -> Value {
    json!({"surface": "shell", "command": "run", "args": {"argv": argv}})
}

/// The `command` enum of a tool's input schema, as the host was given it.
fn command_enum(tool: &Value) -> Vec<String> {
    tool["inputSchema"]["properties"]["command"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no command enum in the input schema: {tool}"))
        .iter()
        .map(|c| c.as_str().expect("a command name").to_string())
        .collect()
}

fn assert_refused_as_observe_only(reply: &Value) {
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["error"]["code"], "denied", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("observe-only")),
        "{reply}"
    );
}

#[test]
fn the_observe_only_relay_serves_a_read_only_tool_and_acts_are_refused_not_asked() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    let mut relay = Relay::start(&daemon, &["--observe-only"]);
    relay.initialize();

    let listed = relay.request("tools/list", json!({}));
    let tool = &listed["result"]["tools"][0];
    assert_eq!(tool["name"], "COMPUTER", "{listed}");
    assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    assert_eq!(tool["annotations"]["destructiveHint"], false, "{tool}");
    let description = tool["description"].as_str().unwrap();
    assert!(description.starts_with("OBSERVE ONLY"), "{description}");
    assert!(
        !description.contains("run{"),
        "an act is listed: {description}"
    );
    // The input schema offers the same: only commands that observe, each one the description
    // lists; the acts the full tool offers are not among them.
    let observe_commands = command_enum(tool);
    assert!(
        observe_commands.contains(&"help".to_string())
            && observe_commands.contains(&"job".to_string()),
        "{observe_commands:?}"
    );
    assert!(
        !observe_commands.contains(&"run".to_string()),
        "the observe-only schema offers an act: {observe_commands:?}"
    );
    for command in &observe_commands {
        assert!(
            description.contains(&format!(" {command}")),
            "the schema offers `{command}`, which the description does not list: {description}"
        );
    }

    // An observation works.
    let jobs = relay.call(json!({"surface": "shell", "command": "job", "args": {"op": "list"}}));
    assert_eq!(jobs["ok"], true, "{jobs}");
    let help = relay.call(json!({"surface": "shell", "command": "help"}));
    assert_eq!(help["ok"], true, "{help}");
    // `help` holds what observes, as the listing does: no act, and none by name.
    let reference = help["help"].as_str().unwrap_or_default();
    assert!(
        reference.contains("shell.job") && !reference.contains("shell.run"),
        "observe-only help lists an act: {reference}"
    );
    let one =
        relay.call(json!({"surface": "shell", "command": "help", "args": {"command": "run"}}));
    assert_eq!(one["ok"], false, "{one}");
    assert!(
        one["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("observe-only")),
        "{one}"
    );

    // An act is refused at once, nobody is asked, nothing ran; so as a step and detached.
    let touch = relay.call(run(json!(["touch", made.to_str().unwrap()])));
    assert_refused_as_observe_only(&touch);
    let steps = relay.call(json!({"steps": [
        {"wait": {"ms": 1}},
        run(json!(["touch", made.to_str().unwrap()])),
    ]}));
    assert_eq!(steps["ok"], false, "{steps}");
    assert!(steps.to_string().contains("observe-only"), "{steps}");
    let mut detached = run(json!(["touch", made.to_str().unwrap()]));
    detached["complications"] = json!({"detach": true});
    assert_refused_as_observe_only(&relay.call(detached));
    assert!(daemon.pending_approvals().is_empty());
    assert!(!made.exists(), "an act ran through the observe-only relay");

    // The refusal is receipted like any refusal.
    let receipt = &touch["receipt"];
    assert!(
        daemon
            .receipts()
            .iter()
            .any(|row| row["call_id"] == *receipt),
        "no receipt for the refused act"
    );

    // The full relay beside it still asks (and is denied here, unanswered, by nobody).
    let mut full = Relay::start(&daemon, &[]);
    full.initialize();
    let listed = full.request("tools/list", json!({}));
    assert_eq!(
        listed["result"]["tools"][0]["annotations"]["readOnlyHint"], false,
        "{listed}"
    );
    let help = full.call(json!({"surface": "shell", "command": "help"}));
    assert!(
        help["help"]
            .as_str()
            .is_some_and(|h| h.contains("shell.run")),
        "the full tool's help lists its acts: {help}"
    );
    let full_commands = command_enum(&listed["result"]["tools"][0]);
    assert!(
        full_commands.contains(&"run".to_string())
            && observe_commands.iter().all(|c| full_commands.contains(c))
            && full_commands.len() > observe_commands.len(),
        "the full tool's commands {full_commands:?} beside the observe-only ones {observe_commands:?}"
    );
}

#[test]
fn the_host_cannot_switch_observe_only_off_through_the_relay_or_on_its_own_connection() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    let touch = run(json!(["touch", made.to_str().unwrap()]));

    // Through the relay: the host's first line claims a full connection. The relay's own
    // first line came before it, and the daemon takes no other: before the handshake it ends
    // the connection, after it it is an unknown method.
    let widen = json!({"jsonrpc": "2.0", "method": "computer/authenticate",
                       "params": {"observe_only": false}});
    let mut first = Relay::start(&daemon, &["--observe-only"]);
    first.send(&widen);
    first.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "COMPUTER", "arguments": touch}}));
    let mut line = String::new();
    while first.from.read_line(&mut line).unwrap() > 0 {
        assert!(
            !line.contains("\"result\""),
            "answered after a widening hello: {line}"
        );
        line.clear();
    }
    let mut relay = Relay::start(&daemon, &["--observe-only"]);
    relay.initialize();
    relay.send(&widen);
    let again = relay.request("computer/authenticate", json!({"observe_only": false}));
    assert!(again.get("error").is_some(), "{again}");
    assert_refused_as_observe_only(&relay.call(touch.clone()));

    // On a connection of its own that asked for observe-only, a second hello changes nothing.
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send(&json!({"jsonrpc": "2.0", "method": "computer/authenticate",
                     "params": {"observe_only": true}}));
    raw.initialize("2025-11-25");
    raw.send(&json!({"jsonrpc": "2.0", "method": "computer/authenticate",
                     "params": {"observe_only": false}}));
    let (reply, _) = raw.call_tool(&touch);
    assert_refused_as_observe_only(&reply["result"]["structuredContent"]);
    // A flag that is not a plain `true` narrows nothing, and widens nothing either: a token
    // beside it must still be a real one.
    let mut forged = RawConnection::connect(&daemon.socket);
    forged.send(
        &json!({"jsonrpc": "2.0", "id": "hello", "method": "computer/authenticate",
                        "params": {"observe_only": true, "token": "ct_forged"}}),
    );
    let refused = forged.recv().expect("an answer");
    assert!(refused.get("error").is_some(), "{refused}");

    assert!(daemon.pending_approvals().is_empty());
    assert!(!made.exists(), "an act ran on an observe-only connection");
    // An ordinary connection, claiming nothing, is decided by policy as always: it asks.
    let mut ordinary = RawConnection::connect(&daemon.socket);
    ordinary.initialize("2025-11-25");
    ordinary.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "COMPUTER", "arguments": touch}}));
    let pending = computer_tests::wait_for(
        "the ordinary call to be asked",
        std::time::Duration::from_secs(20),
        || daemon.pending_approvals().into_iter().next(),
    );
    let id = pending["id"].to_string();
    assert!(daemon.cli(&["approvals", "allow", &id]).status.success());
    let reply = ordinary.recv_response(1);
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
    assert!(made.exists());
}
