//! MCP on the socket: the one tool and its schema, protocol revisions, and bad input answered
//! clearly while other clients keep being served.

use computer_tests::{Daemon, RawConnection, shell_run, structured};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_is_one_small_tool_listing_only_what_is_callable() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let tools = client.list_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let tool = &tools[0];
    assert_eq!(tool.name, "COMPUTER");
    let schema = Value::Object((*tool.input_schema).clone());
    assert_eq!(schema["properties"]["surface"]["enum"], json!(["shell"]));
    // `job` follows detached runs (tests/tests/jobs.rs); `help` is every surface's reference;
    // the terminal session commands.
    assert_eq!(
        schema["properties"]["command"]["enum"],
        json!([
            "close", "help", "job", "list", "open", "read", "resize", "run", "screen", "send"
        ])
    );
    // One call or `steps`: the schema requires neither form alone (the description and the
    // daemon's errors say one of them is).
    assert!(schema.get("required").is_none(), "{schema}");
    assert_eq!(schema["properties"]["steps"]["type"], "array", "{schema}");
    let description = tool.description.as_deref().unwrap();
    assert!(
        description.contains("shell: run{argv:[str]|script}!"),
        "{description}"
    );
    assert!(tool.annotations.is_some());
    // What structuredContent holds is described: `ok` always, `receipt`, `error`.
    let output = Value::Object((*tool.output_schema.clone().expect("outputSchema")).clone());
    assert_eq!(output["required"], json!(["ok"]), "{output}");
    assert_eq!(
        output["properties"]["error"]["required"],
        json!(["code", "message"])
    );

    // Complications are taught by `help`, only those callable here: no evidence without a
    // display, no secrets without a keychain.
    let reference = computer_tests::help(&client, "shell").await;
    for listed in [
        "cwd",
        "env",
        "timeout_ms",
        "return",
        "detach",
        "sandbox",
        "tools",
    ] {
        assert!(
            reference.contains(&format!("\n- {listed}")),
            "{listed} missing: {reference}"
        );
    }
    for absent in ["evidence", "secrets"] {
        assert!(
            !reference.contains(&format!("\n- {absent}")),
            "{absent} listed but not callable here: {reference}"
        );
    }

    // The whole tools/list reply, as a client receives it, stays small.
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-06-18");
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let reply = raw.recv_response(1);
    let bytes = serde_json::to_vec(&reply).unwrap().len();
    assert!(bytes <= 3 * 1024, "tools/list reply is {bytes} bytes");
    client.close().await;
}

/// `help` is a call like any other: decided, receipted, held to the return budget; what it
/// teaches is what the daemon accepts.
#[tokio::test(flavor = "multi_thread")]
async fn help_is_a_receipted_call_that_teaches_what_the_daemon_accepts() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let help = |args: Value, complications: Value| {
        let client = &client;
        async move {
            let result = client
                .call_raw(json!({"surface": "shell", "command": "help", "args": args,
                                 "complications": complications}))
                .await
                .unwrap();
            structured(&result)
        }
    };
    let whole = help(json!({}), json!({})).await;
    assert_eq!(whole["ok"], true, "{whole}");
    let text = whole["help"].as_str().unwrap();
    assert!(
        text.starts_with("- shell.run {argv?:[str] or script"),
        "{text}"
    );
    let rows: Vec<Value> = daemon
        .receipts()
        .into_iter()
        .filter(|row| row["call_id"] == whole["receipt"])
        .collect();
    assert_eq!(rows.len(), 2, "an intent and a result: {rows:?}");
    assert_eq!(rows[0]["command"], "help");

    // One command: its line alone, and a call written from it works.
    let one = help(json!({"command": "resize"}), json!({})).await;
    assert_eq!(
        one["help"], "- shell.resize {cols, rows, session} (act) → rows, cols\n",
        "{one}"
    );
    // A command the surface lacks: the ones it has.
    let wrong = help(json!({"command": "click"}), json!({})).await;
    assert_eq!(wrong["error"]["code"], "invalid_call", "{wrong}");
    assert_eq!(wrong["error"]["path"], "args.command", "{wrong}");
    assert!(
        wrong["error"]["valid"]
            .as_array()
            .unwrap()
            .contains(&json!("run")),
        "{wrong}"
    );
    let unknown_arg = help(json!({"surface": "gui"}), json!({})).await;
    assert_eq!(
        unknown_arg["error"]["path"], "args.surface",
        "{unknown_arg}"
    );
    // The return budget holds: a cut reference says so.
    let cut = help(json!({}), json!({"return": {"max_bytes": 200}})).await;
    assert_eq!(cut["cut"]["help"]["shown"], 200, "{cut}");
    assert_eq!(cut["cut"]["help"]["bytes"], text.len(), "{cut}");
    client.close().await;
    daemon.assert_chain_holds();
}

#[test]
fn handshake_echoes_each_supported_revision() {
    let daemon = Daemon::start();
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut raw = RawConnection::connect(&daemon.socket);
        let reply = raw.initialize(version);
        assert_eq!(reply["result"]["protocolVersion"], version, "{reply}");
        assert_eq!(reply["result"]["serverInfo"]["name"], "computer");
    }
    // An unknown future version gets the newest one with a handshake.
    let mut raw = RawConnection::connect(&daemon.socket);
    let reply = raw.initialize("2099-01-01");
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
}

#[test]
fn stateless_revision_serves_calls_without_a_handshake() {
    let daemon = Daemon::start();
    let mut raw = RawConnection::connect(&daemon.socket);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stateless", "version": "0"},
    });
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "_meta": meta, "name": "COMPUTER",
            "arguments": shell_run(json!({"argv": ["echo", "stateless"]}), json!({})),
        }}),
    );
    let reply = raw.recv_response(1);
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "stateless\n",
        "{reply}"
    );
}

fn call(raw: &mut RawConnection, id: i64, arguments: Value) -> Value {
    raw.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "COMPUTER", "arguments": arguments}}));
    raw.recv_response(id)["result"].clone()
}

#[test]
fn invalid_calls_are_tool_errors_that_name_the_field_and_the_choices() {
    let daemon = Daemon::start();
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    let cases = [
        (
            json!({"surface": "shelll", "command": "run"}),
            "surface",
            vec!["shell"],
        ),
        (
            json!({"surface": "gui", "command": "click"}),
            "surface",
            vec!["shell"],
        ),
        (
            json!({"surface": "shell", "command": "exec"}),
            "command",
            vec!["run"],
        ),
        (
            json!({"surface": "shell", "command": "run", "argz": {}}),
            ".",
            vec![],
        ),
        (
            shell_run(json!({"argv": ["ls", 7]}), json!({})),
            "args.argv[1]",
            vec![],
        ),
        (
            shell_run(json!({"argv": ["ls"], "cwd": "/"}), json!({})),
            "args.cwd",
            vec!["argv", "script", "stdin"],
        ),
        (
            shell_run(json!({}), json!({})),
            "args",
            vec!["argv", "script"],
        ),
        (
            shell_run(json!({"argv": ["ls"]}), json!({"timeout_ms": "soon"})),
            "complications.timeout_ms",
            vec![],
        ),
        (
            shell_run(
                json!({"argv": ["ls"]}),
                json!({"return": {"mode": "middle"}}),
            ),
            "complications.return.mode",
            vec![],
        ),
        (
            shell_run(
                json!({"argv": ["ls"]}),
                json!({"return": {"select": ["exit"]}}),
            ),
            "complications.return.select[0]",
            vec!["exit_code"],
        ),
        (
            shell_run(json!({"argv": ["ls"]}), json!({"cwd": "relative/dir"})),
            "complications.cwd",
            vec![],
        ),
        (
            shell_run(
                json!({"argv": ["ls"]}),
                json!({"env": {"COMPUTER_SOCKET": "/x"}}),
            ),
            "complications.env.COMPUTER_SOCKET",
            vec![],
        ),
        (
            shell_run(json!({"argv": ["ls"]}), json!({"evidence": "screenshot"})),
            "complications.evidence",
            vec![],
        ),
    ];
    for (id, (arguments, path, valid)) in cases.into_iter().enumerate() {
        let result = call(&mut raw, id as i64 + 1, arguments.clone());
        assert_eq!(result["isError"], true, "{arguments} -> {result}");
        let error = &result["structuredContent"]["error"];
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{error}"
        );
        if path != "." {
            assert_eq!(error["path"], path, "{arguments} -> {error}");
        }
        for choice in valid {
            assert!(
                error["valid"].as_array().unwrap().contains(&json!(choice)),
                "{arguments}: `{choice}` not among valid choices in {error}"
            );
        }
        assert!(
            result["structuredContent"]["receipt"].is_string(),
            "{result}"
        );
    }
    // Unknown top-level fields are named, with the valid ones.
    let result = call(
        &mut raw,
        99,
        json!({"surface": "shell", "command": "run", "argz": {}}),
    );
    let message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("`argz`") && message.contains("`args`"),
        "{message}"
    );
    // An unknown tool name is a tool error too.
    raw.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
        "params": {"name": "SHELL", "arguments": {}}}));
    let reply = raw.recv_response(100);
    assert_eq!(
        reply["result"]["structuredContent"]["error"]["valid"],
        json!(["COMPUTER"])
    );

    // Every one of those calls left receipts, and the chain holds.
    let rows = daemon.receipts();
    assert_eq!(rows.len(), 2 * 15, "two rows per refused call");
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bytes_are_answered_or_closed_while_others_are_served() {
    let daemon = Daemon::start_with_config("[server]\nmax_request_bytes = 65536\n");
    let bystander = daemon.client().await;
    let bystander_works = || async {
        let result = bystander
            .call_raw(shell_run(
                json!({"argv": ["echo", "still here"]}),
                json!({}),
            ))
            .await
            .expect("bystander call");
        assert_eq!(structured(&result)["stdout"], "still here\n");
    };

    // Malformed JSON: a JSON-RPC parse error, and the connection stays usable.
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send_bytes(b"{this is not json\n").unwrap();
    let reply = raw.recv().expect("parse error reply");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert!(reply["id"].is_null());
    let init = raw.initialize("2025-11-25");
    assert!(init["result"].is_object(), "{init}");
    // Well-formed JSON that is no request: invalid request, answered with its id.
    raw.send(&json!({"jsonrpc": "2.0", "id": 5, "method": 12}));
    let reply = raw.recv_response(5);
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    bystander_works().await;

    // An over-long line: refused without being buffered whole, then the connection is closed.
    let mut long = RawConnection::connect(&daemon.socket);
    let chunk = vec![b'a'; 16 * 1024];
    let mut sent = 0;
    while sent < 4 * 65536 {
        if long.send_bytes(&chunk).is_err() {
            break; // the daemon already hung up
        }
        sent += chunk.len();
    }
    let reply = long.recv().expect("a size error before the close");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("65536"),
        "{reply}"
    );
    assert!(
        long.recv().is_none(),
        "the connection is closed after the size error"
    );
    bystander_works().await;

    // Half a request, then a hang-up.
    let mut half = RawConnection::connect(&daemon.socket);
    half.send_bytes(br#"{"jsonrpc":"2.0","id":1,"method":"initi"#)
        .unwrap();
    half.shutdown_write();
    assert!(half.recv().is_none());
    drop(half);
    bystander_works().await;

    // Wrong types inside a well-formed tools/call: a tool error naming the path.
    let result = bystander
        .call_raw(json!({"surface": "shell", "command": "run", "args": {"argv": "ls"}}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(structured(&result)["error"]["path"], "args.argv");
    bystander_works().await;
    bystander.close().await;
}
