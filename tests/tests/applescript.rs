//! The applescript surface where it does not exist (Linux): absent from the tool's schema, a
//! call naming it gets a clear `unavailable` error and a receipt, `computer doctor` says why,
//! and the daemon keeps serving. On macOS the surface itself is exercised by `macos.rs`.

use computer_tests::Daemon;
use serde_json::json;

#[test]
fn applescript_is_absent_here_and_naming_it_explains_why() {
    let daemon = Daemon::start();
    let tools = daemon.cli(&["tools", "--format", "mcp"]);
    assert!(tools.status.success(), "{}", tools.stderr);
    assert!(tools.stdout.contains("\"shell\""), "{}", tools.stdout);
    assert!(
        !tools.stdout.contains("applescript"),
        "listed but not callable: {}",
        tools.stdout
    );

    // A call the way an agent that read about macOS would make it.
    let out = daemon.call_json(
        "applescript",
        "run",
        &json!({"source": "tell application \"Finder\" to quit"}).to_string(),
    );
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"]["code"], "unavailable", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("only on macOS"), "{message}");
    assert!(out["receipt"].is_string(), "no receipt: {out}");

    let doctor = daemon.cli(&["doctor", "--json"]).json();
    let entry = doctor["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["surface"] == "applescript")
        .cloned()
        .unwrap();
    assert_eq!(entry["availability"]["status"], "unavailable", "{entry}");
    // No macOS permissions to report here.
    assert_eq!(doctor["permissions"], json!([]), "{doctor}");

    // The daemon still serves ordinary calls.
    let ok = daemon.shell_run_json(&json!({"argv": ["echo", "still here"]}), &json!({}));
    assert_eq!(ok["stdout"], "still here\n", "{ok}");
    daemon.assert_chain_holds();
}
