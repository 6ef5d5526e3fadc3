//! The keychain surface against a real Secret Service (gnome-keyring on a private bus): items
//! shared with `secret-tool` both ways; list, exists, get, delete; values stored by the person
//! through `computer secrets set`; a revealed value asked for by default and kept out of the
//! receipts and the log; a model-supplied value refused unless the config allows it; a locked
//! keyring and a missing Secret Service each giving their error, named by `computer doctor`; a
//! revealed value passed on (a later step's ref, a detached job, a run's programmatic call,
//! pasted into a later call) in no receipt, log line or export sink; the daemon's own items never
//! deleted through the surface; `list` unshaken by items deleted while it lists.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use computer_tests::keyring::Keyring;
use computer_tests::receivers::Rsyslog;
use computer_tests::{Daemon, shell_run, wait_for};
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
        // A link is not the state's own bytes: run-tools/computer is the daemon's binary.
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            continue;
        }
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

/// `value` as it is, in base64 and in hex: the forms a run prints it in that the masker knows.
fn forms_of(value: &str) -> [String; 3] {
    [
        value.to_string(),
        base64::engine::general_purpose::STANDARD.encode(value),
        hex::encode(value),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revealed_value_passed_on_is_in_no_receipt_log_or_export_sink() {
    let keyring = Keyring::shared();
    let rsyslog = Rsyslog::start();
    let daemon = daemon_on(
        keyring,
        &format!(
            "[defaults]\nobserve = \"allow\"\nact = \"allow\"\nsecret = \"allow\"\n\
             [export]\nsyslog = \"tcp://127.0.0.1:{}\"\n",
            rsyslog.port
        ),
    );
    let value = "passed-on-3b9e51c7d2";
    let (stored, _) = keyring.secret_tool(
        &[
            "store",
            "--label",
            "Passed on",
            "service",
            "passed-on.example",
            "username",
            "ci",
        ],
        value,
    );
    assert!(stored, "secret-tool store");
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("step-2-got");

    // Step 1 reveals the value; step 2 takes it by ref, writes it to a file and prints it as it
    // is, in base64 and in hex.
    let print_forms = "printf %s \"$1\" > \"$2\"; printf '%s ' \"$1\"; \
                       printf %s \"$1\" | base64 | tr -d '\\n'; printf ' '; \
                       printf %s \"$1\" | od -An -tx1 | tr -d ' \\n'";
    let reply = daemon
        .call_raw_once(json!({"steps": [
            {"surface": "keychain", "command": "get",
             "args": {"reference": "keychain://passed-on.example/ci", "reveal": true}},
            {"surface": "shell", "command": "run",
             "args": {"argv": ["sh", "-c", print_forms, "sh", {"ref": "$1.value"}, got]}},
        ], "return": {"select": ["$1.value", "$2.stdout"]}}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    // The reveal's reply carries the value; step 2 ran with it, and its output, which reaches
    // the same caller, shows every form of it masked, as a run's output shows a secret it used.
    assert_eq!(reply["$1.value"], value, "{reply}");
    assert_eq!(std::fs::read_to_string(&got).unwrap(), value);
    assert_eq!(
        reply["$2.stdout"], "[masked revealed] [masked revealed] [masked revealed]",
        "{reply}"
    );
    let parent = reply["receipt"].clone();

    // Pasted by the model into a later call, and into a detached job, it is masked as well.
    let pasted = daemon
        .call_raw_once(shell_run(
            json!({"argv": ["printf", "%s", value]}),
            json!({}),
        ))
        .await;
    assert_eq!(pasted["stdout"], "[masked revealed]", "{pasted}");
    let job = daemon.shell_run_json(
        &json!({"argv": ["printf", "%s", value]}),
        &json!({"detach": true}),
    );
    assert_eq!(job["status"], "running", "{job}");
    let ended = daemon.call_json(
        "shell",
        "job",
        &json!({"op": "result", "id": job["job"], "wait_ms": 30000}).to_string(),
    );
    assert_eq!(ended["status"], "done", "{ended}");
    assert_eq!(ended["stdout"], "[masked revealed]", "{ended}");

    // In a run's programmatic call (over its tools channel, the value in the call's args): the
    // answer the script gets back, so the run's output, is masked, and the call is receipted.
    let bridged = daemon.call_raw_once(shell_run(
            json!({"script": format!(
                "computer call shell job --json --args '{{\"op\": \"status\", \"id\": \"{value}\"}}'; true"
            )}),
            json!({"tools": ["shell.job"]}),
        ),
    )
    .await;
    assert_eq!(bridged["ok"], true, "{bridged}");
    let answered = bridged["stdout"].as_str().unwrap_or_default();
    assert!(answered.contains("[masked revealed]"), "{bridged}");
    assert!(
        daemon
            .receipts()
            .iter()
            .any(|row| row["body"]["via"] == bridged["receipt"] && row["command"] == "job"),
        "the bridged call is receipted"
    );

    // Step 2's intent records its args as they ran, the value masked.
    let step_2 = daemon
        .receipts()
        .into_iter()
        .find(|row| {
            row["body"]["parent"] == parent && row["body"]["step"] == 2 && row["kind"] == "intent"
        })
        .expect("step 2's intent");
    assert_eq!(
        step_2["body"]["args"]["args"]["argv"][4], "[masked revealed]",
        "{step_2}"
    );

    // In no form anywhere: receipts, the state dir's bytes (database, journal, artifacts), the
    // log, the rows rsyslog received.
    let last = daemon.last_seq();
    rsyslog.wait_through(last);
    let exported = std::fs::read_to_string(rsyslog.received()).unwrap();
    assert!(
        exported.contains("[masked revealed]"),
        "the export carries the masked rows"
    );
    let receipts = serde_json::to_string(&daemon.receipts()).unwrap();
    let state = bytes_under(&daemon.state);
    let log = daemon.log_text();
    for form in forms_of(value) {
        assert!(!receipts.contains(&form), "{form} in the receipts");
        assert!(!contains(&state, &form), "{form} in the state dir");
        assert!(!log.contains(&form), "{form} in the daemon log");
        assert!(!exported.contains(&form), "{form} exported to rsyslog");
    }
    daemon.assert_chain_holds();
}

#[test]
fn the_daemons_own_items_are_never_deleted_through_the_surface() {
    let keyring = Keyring::shared();
    let daemon = daemon_on(keyring, "");
    let own = ["service", "computer.gui", "username", "own-item-suite"];
    let (stored, _) = keyring.secret_tool(
        &[&["store", "--label", "Consent"][..], &own[..]].concat(),
        "granted-by-the-person",
    );
    assert!(stored, "secret-tool store");

    let refused = call(
        &daemon,
        "delete",
        json!({"reference": "keychain://computer.gui/own-item-suite"}),
    );
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "denied", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("daemon's own item") && message.contains("secret-tool clear"),
        "{message}"
    );
    // Overwriting it is refused the same way, and the item is as the person left it.
    let overwrite = call(
        &daemon,
        "set",
        json!({"reference": "keychain://computer.gui/own-item-suite", "value": "forged"}),
    );
    assert_eq!(overwrite["error"]["code"], "denied", "{overwrite}");
    let (found, kept) = keyring.secret_tool(&[&["lookup"][..], &own[..]].concat(), "");
    assert!(found, "the daemon's item is still there");
    assert_eq!(kept, "granted-by-the-person");

    // An ordinary item is deleted.
    let ordinary = ["service", "own-item-suite.example", "username", "me"];
    let (stored, _) = keyring.secret_tool(
        &[&["store", "--label", "Ordinary"][..], &ordinary[..]].concat(),
        "ordinary",
    );
    assert!(stored);
    let deleted = call(
        &daemon,
        "delete",
        json!({"reference": "keychain://own-item-suite.example/me"}),
    );
    assert_eq!(deleted["deleted"], true, "{deleted}");
    let (found, _) = keyring.secret_tool(&[&["lookup"][..], &ordinary[..]].concat(), "");
    assert!(!found, "the ordinary item is gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_goes_on_while_items_are_deleted_under_it() {
    // Its own keyring: the items of other tests are not deleted under them.
    let keyring = Keyring::start();
    let daemon = daemon_on(&keyring, "");
    let count = 40;
    for n in 0..count {
        let account = format!("item-{n}");
        let (stored, _) = keyring.secret_tool(
            &[
                "store",
                "--label",
                "Vanishing",
                "service",
                "vanishing.example",
                "username",
                &account,
            ],
            "v",
        );
        assert!(stored, "secret-tool store {account}");
    }
    // secret-tool deletes them one by one while the daemon lists, twenty lists a call, until
    // none is left: a list that found an item and then read it gone must not fail.
    let deleter = {
        let env = keyring.env();
        std::thread::spawn(move || {
            for n in 0..count {
                let out = std::process::Command::new("secret-tool")
                    .args(["clear", "service", "vanishing.example", "username"])
                    .arg(format!("item-{n}"))
                    .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                    .env_remove("DISPLAY")
                    .output()
                    .expect("secret-tool clear");
                assert!(out.status.success(), "secret-tool clear item-{n}");
            }
        })
    };
    let lists: Vec<Value> = (0..20)
        .map(|_| json!({"surface": "keychain", "command": "list", "args": {}}))
        .collect();
    let mut rounds = 0;
    loop {
        let done = deleter.is_finished();
        let reply = daemon.call_raw_once(json!({"steps": lists})).await;
        assert_eq!(reply["ok"], true, "a list failed: {reply}");
        rounds += 1;
        if done {
            break;
        }
    }
    deleter.join().unwrap();
    let after = call(&daemon, "list", json!({}));
    assert!(
        !after.to_string().contains("vanishing.example"),
        "{after} after {rounds} rounds"
    );
}
