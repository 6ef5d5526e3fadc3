//! The keychain surface against a real Secret Service (gnome-keyring on a private bus): items
//! shared with `secret-tool` both ways; list, exists, get, delete; values stored by the person
//! through `computer secrets set`; a revealed value asked for by default and kept out of the
//! receipts and the log; a model-supplied value refused unless the config allows it; a locked
//! keyring and a missing Secret Service each giving their error, named by `computer doctor`.
#![cfg(target_os = "linux")]

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use computer_tests::keyring::Keyring;
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

fn daemon_on(keyring: &Keyring, toml: &str) -> Daemon {
    Daemon::start_with(toml, &keyring.env())
}

fn call(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon.call_json("keychain", command, &args.to_string())
}

/// `computer secrets set REFERENCE [--label L]` with `value` on stdin.
fn secrets_set(
    daemon: &Daemon,
    reference: &str,
    label: Option<&str>,
    value: &str,
) -> (bool, String) {
    let mut command = daemon.command();
    command.args(["secrets", "set", reference]);
    if let Some(label) = label {
        command.args(["--label", label]);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("computer secrets set");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{value}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every byte of every file under `dir` (the receipts database, its journal, artifacts).
fn bytes_under(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all.extend(bytes_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            all.extend(bytes);
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn items_interoperate_with_secret_tool_both_ways() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");

    // An item secret-tool stored is listed, looked up (metadata only) and exists.
    let (stored, _) = keyring.secret_tool(
        &[
            "store",
            "--label",
            "Deploy token",
            "service",
            "interop.example",
            "username",
            "deploy",
        ],
        "from-secret-tool",
    );
    assert!(stored, "secret-tool store");
    let list = call(&daemon, "list", json!({}));
    assert_eq!(list["ok"], true, "{list}");
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["service"] == "interop.example")
        .unwrap_or_else(|| panic!("secret-tool's item in {list}"))
        .clone();
    assert_eq!(item["account"], "deploy");
    assert_eq!(item["label"], "Deploy token");
    assert_eq!(item["reference"], "keychain://interop.example/deploy");
    assert!(
        !list.to_string().contains("from-secret-tool"),
        "list shows no values: {list}"
    );

    let got = call(
        &daemon,
        "get",
        json!({"reference": "keychain://interop.example/deploy"}),
    );
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["label"], "Deploy token", "{got}");
    assert_eq!(got["reference"], "keychain://interop.example/deploy");
    assert!(got.get("value").is_none(), "no value without reveal: {got}");
    assert!(!got.to_string().contains("from-secret-tool"), "{got}");
    let exists = call(
        &daemon,
        "exists",
        json!({"reference": "keychain://interop.example/deploy"}),
    );
    assert_eq!(exists["exists"], true, "{exists}");
    // The item is the call's target, in a secret item's words: service and account.
    let intent = daemon.receipt_row(&exists["receipt"], "intent");
    let target = &intent["body"]["facts"]["target"];
    assert_eq!(target["kind"], "secret_item", "{intent}");
    assert_eq!(target["app"], "interop.example", "{intent}");
    assert_eq!(target["window"], "deploy", "{intent}");

    // An item the person stores with `computer secrets set` is secret-tool's to read, with the
    // same attributes and the label given.
    let (ok, out) = secrets_set(
        &daemon,
        "keychain://ours.example/me%40example.com",
        Some("Our label"),
        "from-computer",
    );
    assert!(ok, "{out}");
    assert!(
        !out.contains("from-computer"),
        "the CLI echoes no value: {out}"
    );
    let (found, value) = keyring.secret_tool(
        &[
            "lookup",
            "service",
            "ours.example",
            "username",
            "me@example.com",
        ],
        "",
    );
    assert!(found, "secret-tool lookup finds our item");
    assert_eq!(
        value, "from-computer",
        "one trailing newline of stdin is dropped"
    );
    let (_, search) = keyring.secret_tool(
        &[
            "search",
            "service",
            "ours.example",
            "username",
            "me@example.com",
        ],
        "",
    );
    assert!(search.contains("label = Our label"), "{search}");

    // Setting it again replaces the value, not adding a second item.
    let (ok, out) = secrets_set(
        &daemon,
        "keychain://ours.example/me%40example.com",
        None,
        "second",
    );
    assert!(ok, "{out}");
    let (_, value) = keyring.secret_tool(
        &[
            "lookup",
            "service",
            "ours.example",
            "username",
            "me@example.com",
        ],
        "",
    );
    assert_eq!(value, "second");
}

#[test]
fn delete_removes_the_item_and_says_when_there_was_none() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");
    let (stored, _) = keyring.secret_tool(
        &[
            "store",
            "--label",
            "Old",
            "service",
            "delete.example",
            "username",
            "old",
        ],
        "to-delete",
    );
    assert!(stored);
    let reference = json!({"reference": "keychain://delete.example/old"});

    let deleted = call(&daemon, "delete", reference.clone());
    assert_eq!(deleted["deleted"], true, "{deleted}");
    let (found, _) = keyring.secret_tool(
        &["lookup", "service", "delete.example", "username", "old"],
        "",
    );
    assert!(!found, "secret-tool no longer finds it");
    assert_eq!(call(&daemon, "exists", reference.clone())["exists"], false);
    let again = call(&daemon, "delete", reference.clone());
    assert_eq!(again["deleted"], false, "{again}");

    // A lookup of what is not there fails saying so and how to store it.
    let missing = call(&daemon, "get", reference);
    assert_eq!(missing["ok"], false, "{missing}");
    let message = missing["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no keychain item keychain://delete.example/old"),
        "{message}"
    );
    assert!(message.contains("computer secrets set"), "{message}");
}

#[test]
fn a_revealed_value_is_asked_for_and_reaches_only_the_reply() {
    let keyring = Keyring::shared();
    // No rule about secrets: the shipped default decides (the harness only allows acts).
    let daemon = daemon_on(keyring, "");
    let value = "reveal-me-4f1c9a7e";
    let (ok, out) = secrets_set(&daemon, "keychain://reveal.example/ci", None, value);
    assert!(ok, "{out}");

    // The reference alone is Observe: answered at once.
    let plain = call(
        &daemon,
        "get",
        json!({"reference": "keychain://reveal.example/ci"}),
    );
    assert_eq!(plain["ok"], true, "{plain}");

    // The value is Secret: the call waits for a person.
    let caller = {
        let mut command = daemon.command();
        command.args([
            "call",
            "keychain",
            "get",
            "--json",
            "--args",
            r#"{"reference":"keychain://reveal.example/ci","reveal":true}"#,
        ]);
        std::thread::spawn(move || command.output().expect("computer call"))
    };
    let pending = wait_for("the reveal to be asked", Duration::from_secs(20), || {
        daemon.pending_approvals().into_iter().next()
    });
    let shown = pending.to_string();
    assert!(
        shown.contains("keychain://reveal.example/ci"),
        "the approver sees what: {shown}"
    );
    assert!(
        !shown.contains(value),
        "the approver is not shown the value: {shown}"
    );
    let allowed = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    let out = caller.join().unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout).expect("reply JSON");
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["value"], value, "{reply}");

    // Denied, the call gets no value.
    let caller = {
        let mut command = daemon.command();
        command.args([
            "call",
            "keychain",
            "get",
            "--json",
            "--args",
            r#"{"reference":"keychain://reveal.example/ci","reveal":true}"#,
        ]);
        std::thread::spawn(move || command.output().expect("computer call"))
    };
    let pending = wait_for(
        "the second reveal to be asked",
        Duration::from_secs(20),
        || daemon.pending_approvals().into_iter().next(),
    );
    assert!(pending.to_string().contains("REVEAL"), "{pending}");
    let denied = daemon.cli(&["approvals", "deny", &pending["id"].to_string()]);
    assert!(denied.status.success(), "{}", denied.stderr);
    let out = caller.join().unwrap();
    let refused = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(refused.contains("\"ok\":false"), "{refused}");
    assert!(!refused.contains(value), "{refused}");

    // Nowhere else: not in the receipts (database and journal bytes), not in the log.
    let receipts = daemon.receipts();
    let rows: Vec<&Value> = receipts
        .iter()
        .filter(|row| row["command"] == "get")
        .collect();
    assert!(
        rows.len() >= 4,
        "intent and result of both gets: {receipts:?}"
    );
    assert!(
        !contains(&bytes_under(&daemon.state), value),
        "the value is in the state dir"
    );
    assert!(
        !daemon.log_text().contains(value),
        "the value is in the daemon log"
    );
    // Receipts hold a keyed digest of the reference, never the reference itself.
    assert!(
        receipts
            .iter()
            .all(|row| !row.to_string().contains("keychain://reveal.example/ci")),
        "a receipt names the reference in the clear"
    );
    assert!(
        receipts
            .iter()
            .any(|row| row.to_string().contains("keychain-ref:hmac-sha256:")),
        "the receipts hold the reference's keyed digest"
    );
}

#[test]
fn a_value_from_the_model_is_refused_unless_the_config_allows_it() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");
    // A hostile agent plants its own value under a reference someone else's run will use.
    let planted = call(
        &daemon,
        "set",
        json!({"reference": "keychain://planted.example/token", "value": "agent-chosen-value"}),
    );
    assert_eq!(planted["ok"], false, "{planted}");
    assert_eq!(planted["error"]["path"], "args.value", "{planted}");
    let message = planted["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("computer secrets set keychain://planted.example/token"),
        "{message}"
    );
    let (found, _) = keyring.secret_tool(
        &["lookup", "service", "planted.example", "username", "token"],
        "",
    );
    assert!(!found, "nothing was stored");
    // Without a value the call says where the value comes from.
    let bare = call(
        &daemon,
        "set",
        json!({"reference": "keychain://planted.example/token"}),
    );
    assert_eq!(bare["error"]["path"], "args.value", "{bare}");
    // The daemon stays up and ordinary calls still work.
    assert_eq!(call(&daemon, "list", json!({}))["ok"], true);

    // Where the config allows it, the value is stored, and withheld from the receipts.
    let open = daemon_on(keyring, "[keychain]\nmodel_values = true\n");
    let set = call(
        &open,
        "set",
        json!({"reference": "keychain://allowed.example/token", "value": "model-value-93b2", "label": "Allowed"}),
    );
    assert_eq!(set["ok"], true, "{set}");
    let (_, value) = keyring.secret_tool(
        &["lookup", "service", "allowed.example", "username", "token"],
        "",
    );
    assert_eq!(value, "model-value-93b2");
    let intent = open
        .receipts()
        .into_iter()
        .find(|row| row["command"] == "set" && row["kind"] == "intent")
        .expect("intent receipt of set");
    assert_eq!(
        intent["body"]["args"]["args"]["value"], "[withheld]",
        "{intent}"
    );
    assert!(!contains(&bytes_under(&open.state), "model-value-93b2"));
    assert!(!open.log_text().contains("model-value-93b2"));
}

#[test]
fn a_malformed_reference_is_refused_with_what_is_wrong_and_a_valid_form() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");
    for (reference, problem) in [
        ("github/deploy", "the keychain:// scheme is missing"),
        ("op://vault/item", "the scheme is \"op\""),
        ("keychain://github", "the account is missing"),
    ] {
        let reply = call(&daemon, "get", json!({"reference": reference}));
        assert_eq!(reply["ok"], false, "{reply}");
        assert_eq!(reply["error"]["code"], "invalid_call", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(problem), "{message}");
        assert!(
            message.contains("keychain://<service>/<account>"),
            "{message}"
        );
    }
    assert_eq!(
        call(&daemon, "list", json!({}))["ok"],
        true,
        "the daemon stays up"
    );
}

#[test]
fn a_locked_keyring_gives_its_error_and_doctor_names_it() {
    let keyring = Keyring::start();
    let daemon = daemon_on(&keyring, "");
    let (ok, out) = secrets_set(
        &daemon,
        "keychain://locked.example/me",
        None,
        "behind-the-lock",
    );
    assert!(ok, "{out}");
    assert_eq!(
        call(
            &daemon,
            "exists",
            json!({"reference": "keychain://locked.example/me"})
        )["exists"],
        true
    );

    keyring.lock();
    let listed = call(&daemon, "list", json!({}));
    assert_eq!(listed["ok"], false, "{listed}");
    let message = listed["error"]["message"].as_str().unwrap();
    assert!(message.contains("locked"), "{message}");
    assert!(message.contains("unlock"), "the fix: {message}");
    let got = call(
        &daemon,
        "get",
        json!({"reference": "keychain://locked.example/me", "reveal": false}),
    );
    assert_eq!(got["ok"], false, "{got}");
    assert!(
        got["error"]["message"].as_str().unwrap().contains("locked"),
        "{got}"
    );

    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert_eq!(doctor["keychain"]["state"], "locked", "{doctor}");
    let text = daemon.cli(&["doctor"]).stdout;
    assert!(text.contains("keychain secret-service: locked"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_secret_service_there_is_no_keychain_and_doctor_says_why() {
    let bus = Keyring::bus_only();
    let daemon = daemon_on(&bus, "");
    let client = daemon.client().await;
    let tools = client.list_tools().await.unwrap();
    let surfaces = tools[0].input_schema["properties"]["surface"]["enum"].clone();
    assert!(
        !surfaces.as_array().unwrap().iter().any(|s| s == "keychain"),
        "no keychain without a Secret Service: {surfaces}"
    );
    let reply = tokio::task::block_in_place(|| call(&daemon, "list", json!({})));
    assert_eq!(reply["error"]["code"], "unavailable", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("org.freedesktop.secrets"),
        "{reply}"
    );
    let doctor = tokio::task::block_in_place(|| daemon.cli(&["doctor", "--json"]).json());
    assert_eq!(doctor["keychain"]["state"], "no_service", "{doctor}");
    let detail = doctor["keychain"]["detail"].as_str().unwrap();
    assert!(detail.contains("gnome-keyring-daemon"), "the fix: {detail}");
    // The shell is still offered, and works.
    assert!(surfaces.as_array().unwrap().iter().any(|s| s == "shell"));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_secret_service_the_tool_lists_the_keychain() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");
    let client = daemon.client().await;
    let tools = client.list_tools().await.unwrap();
    let surfaces = &tools[0].input_schema["properties"]["surface"]["enum"];
    assert!(
        surfaces.as_array().unwrap().iter().any(|s| s == "keychain"),
        "{surfaces}"
    );
    let description = tools[0].description.as_deref().unwrap_or_default();
    assert!(description.contains("\nkeychain: "), "{description}");
    let commands = computer_tests::listed_commands(&client, "keychain").await;
    assert!(commands.contains(&"get".to_string()), "{commands:?}");
}
