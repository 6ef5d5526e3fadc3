//! Agent identity: tokens minted by a person, presented by clients, compared by the daemon;
//! scopes narrow what `tools/list` shows and what calls may do; wrong tokens are refused.

use computer_ipc::Client;
use computer_tests::{Daemon, RawConnection, computer_bin, shell_run, structured};
use serde_json::{Value, json};

fn surface_enum(tools: &[rmcp::model::Tool]) -> Value {
    Value::Object((*tools[0].input_schema).clone())["properties"]["surface"]["enum"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_name_agents_and_scopes_narrow_what_they_see_and_do() {
    let daemon = Daemon::start();
    let token = daemon.add_agent_for_surfaces("builder", "shell");
    assert!(token.starts_with("ct_"));
    let narrow = daemon.add_agent_for_surfaces("reader", "ax");

    let client = Client::connect_as(&daemon.socket, Some(&token))
        .await
        .unwrap();
    assert_eq!(
        surface_enum(&client.list_tools().await.unwrap()),
        json!(["shell"])
    );
    let out = structured(
        &client
            .call_raw(shell_run(json!({"argv": ["true"]}), json!({})))
            .await
            .unwrap(),
    );
    assert_eq!(out["ok"], true);
    client.close().await;
    let intent = daemon
        .receipts()
        .into_iter()
        .find(|r| r["call_id"] == out["receipt"] && r["kind"] == "intent")
        .unwrap();
    assert_eq!(intent["body"]["caller"]["agent"], "builder");

    // An agent scoped away from the shell neither sees it nor may use it.
    let client = Client::connect_as(&daemon.socket, Some(&narrow))
        .await
        .unwrap();
    assert_eq!(surface_enum(&client.list_tools().await.unwrap()), json!([]));
    let out = structured(
        &client
            .call_raw(shell_run(json!({"argv": ["true"]}), json!({})))
            .await
            .unwrap(),
    );
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert_eq!(out["error"]["path"], "surface");
    client.close().await;

    // No token: the default agent, every surface.
    let client = Client::connect_as(&daemon.socket, None).await.unwrap();
    assert_eq!(
        surface_enum(&client.list_tools().await.unwrap()),
        json!(["shell"])
    );
    client.close().await;
}

#[test]
fn wrong_and_revoked_tokens_are_refused_not_downgraded() {
    let daemon = Daemon::start();
    let token = daemon.add_agent("temp");
    let listed = daemon.cli(&["agents", "list"]);
    assert!(listed.stdout.contains("temp"), "{}", listed.stdout);
    assert!(
        !listed.stdout.contains(&token),
        "the token is never shown again"
    );

    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send_bytes(&computer_ipc::client::authenticate_line("ct_not-a-token"))
        .unwrap();
    let reply = raw.recv().expect("a refusal");
    assert_eq!(reply["error"]["code"], -32001, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown agent token")
    );
    assert!(raw.recv().is_none(), "the connection is closed");

    assert!(daemon.cli(&["agents", "remove", "temp"]).status.success());
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send_bytes(&computer_ipc::client::authenticate_line(&token))
        .unwrap();
    assert_eq!(raw.recv().expect("a refusal")["error"]["code"], -32001);
    assert!(daemon.log_text().contains("bad token"));
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_cannot_mint_tokens_through_the_shell_surface() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let bin = computer_bin();
    let script = format!(
        "COMPUTER_SOCKET={} COMPUTER_STATE_DIR={} {} agents add sneaky",
        daemon.socket.display(),
        daemon.state.display(),
        bin.display()
    );
    // The state dir is protected: naming it is denied outright.
    let out = structured(
        &client
            .call_raw(shell_run(json!({"script": script}), json!({})))
            .await
            .unwrap(),
    );
    assert_eq!(out["error"]["code"], "denied", "{out}");
    // Naming it where policy does not look (an env value), the run still cannot reach the
    // store: containment hides the state dir from every run.
    let script = format!(
        "COMPUTER_STATE_DIR=\"$S\" {} agents add sneaky",
        bin.display()
    );
    let out = structured(
        &client
            .call_raw(shell_run(
                json!({"script": script}),
                json!({"env": {"S": daemon.state}}),
            ))
            .await
            .unwrap(),
    );
    assert_ne!(out["exit_code"], 0, "{out}");
    client.close().await;
    assert!(!daemon.cli(&["agents", "list"]).stdout.contains("sneaky"));
}
