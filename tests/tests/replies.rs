//! Reply shapes against the real daemon and the shared headless desktop: what the model sees of
//! each reply (its text blocks) carries only what informs, every field the tool description
//! promises for a command is there when it applies and no other, and each promise about a reply
//! (an artifact for a cut, a visible cut under `select`, a wait that says what it found, distinct
//! error codes, the window `gui type` reached, the evidence's size) holds.

use std::time::Duration;

use std::collections::BTreeMap;

use computer_tests::desktop::TestApp;
use computer_tests::{Daemon, receipt_of, structured, wait_for};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Tests that send input or move focus take turns on the shared desktop.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Gui and ax acts run without asking: the suite is about reply shapes, not approvals.
const ALLOW_ACTS: &str = "[defaults]\nact = \"allow\"\n";

/// One call; the whole MCP result.
async fn call(daemon: &Daemon, surface: &str, command: &str, args: Value) -> CallToolResult {
    call_with(daemon, surface, command, args, json!({})).await
}

async fn call_with(
    daemon: &Daemon,
    surface: &str,
    command: &str,
    args: Value,
    complications: Value,
) -> CallToolResult {
    daemon
        .call_result_once(json!({"surface": surface, "command": command, "args": args, "complications": complications}))
        .await
}

/// What a model is shown of a result: its text blocks.
fn visible_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fields a reply shows, beside `ok` and `receipt`.
fn reply_fields(result: &CallToolResult) -> Vec<String> {
    structured(result)
        .as_object()
        .expect("an object")
        .keys()
        .filter(|k| !["ok", "receipt"].contains(&k.as_str()))
        .cloned()
        .collect()
}

/// Waits until the app's window is on the bus.
async fn wait_on_bus(daemon: &Daemon, pid: u32) {
    wait_for("the app on AT-SPI", Duration::from_secs(20), || {
        let out = futures_block(call(daemon, "ax", "tree", json!({"app": pid})));
        visible_text(&out).contains("Say Hello").then_some(())
    });
}

fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// The result fields `help` promises, by `surface.command`: the names after `→`
/// on each command's line, `?` marking those present only when they apply.
async fn promised_fields(daemon: &Daemon) -> BTreeMap<String, Vec<String>> {
    let client = daemon.client().await;
    let tools = client.list_tools().await.expect("tools/list");
    let mut description = String::new();
    for surface in tools[0].input_schema["properties"]["surface"]["enum"]
        .as_array()
        .expect("surfaces")
    {
        description += &computer_tests::help(&client, surface.as_str().unwrap()).await;
    }
    client.close().await;
    let mut promised = BTreeMap::new();
    for line in description.lines() {
        // Command lines are `- surface.command {…}`; the complications' lines have no dot.
        let Some(rest) = line
            .strip_prefix("- ")
            .filter(|rest| rest.split(' ').next().is_some_and(|w| w.contains('.')))
        else {
            continue;
        };
        let (head, fields) = rest.split_once(" → ").unwrap_or((rest, ""));
        let (surface, commands) = head
            .split(' ')
            .next()
            .and_then(|names| names.split_once('.'))
            .expect("surface.command");
        let fields: Vec<String> = fields
            .split(", ")
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        for command in commands.split('|') {
            promised.insert(format!("{surface}.{command}"), fields.clone());
        }
    }
    promised
}

/// Fields any reply may carry beside its command's own: a cut output, evidence.
const COMMON_FIELDS: &[&str] = &["cut", "evidence"];

/// Checks a reply against its command's promise: every field it shows is named there (or is
/// common to every reply), and every field promised without `?` is shown.
fn check_against_promise(name: &str, result: &CallToolResult, promised: &[String]) {
    let shown = reply_fields(result);
    assert_ne!(
        structured(result)["ok"],
        false,
        "{name} failed, so its fields say nothing: {:?}",
        result.structured_content
    );
    for field in &shown {
        let named = promised
            .iter()
            .any(|p| p.strip_suffix('?').unwrap_or(p) == field);
        assert!(
            named || COMMON_FIELDS.contains(&field.as_str()),
            "{name}: `{field}` is not among the promised {promised:?}: {}",
            visible_text(result)
        );
    }
    for field in promised.iter().filter(|p| !p.ends_with('?')) {
        assert!(
            shown.contains(field),
            "{name}: promised `{field}` is missing: {}",
            visible_text(result)
        );
    }
    // The model's text is the structured content without `ok` (true) and the receipt id.
    let mut expected = structured(result);
    let map = expected.as_object_mut().unwrap();
    map.remove("receipt");
    map.remove("ok");
    let text: Value = serde_json::from_str(&visible_text(result)).expect("text is JSON");
    assert_eq!(text, expected, "{name}");
}

/// The id of the app's window, from `gui windows`.
async fn window_of(daemon: &Daemon, title: &str) -> u64 {
    let windows = structured(&call(daemon, "gui", "windows", json!({})).await);
    windows["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["title"] == title)
        .and_then(|w| w["id"].as_u64())
        .unwrap_or_else(|| panic!("no window {title:?} in {windows}"))
}

/// A point inside the app's status label, where pointer actions change nothing.
async fn quiet_point(daemon: &Daemon, pid: u32) -> (i64, i64) {
    let read = structured(
        &call(
            daemon,
            "ax",
            "read",
            json!({"app": pid, "selector": "label"}),
        )
        .await,
    );
    let bounds = read["bounds"].as_array().expect("label bounds");
    let at = |i: usize| bounds[i].as_i64().unwrap();
    (at(0) + at(2) / 2, at(1) + at(3) / 2)
}

/// One call of every command the desktop fixture can serve, each compared with the fields its
/// surface's `help` promises for it.
#[tokio::test(flavor = "multi_thread")]
async fn every_reply_shows_exactly_the_fields_its_description_promises() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Reply Shapes");
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;
    let promised = promised_fields(&daemon).await;
    let window = window_of(&daemon, "Reply Shapes").await;
    let (x, y) = quiet_point(&daemon, pid).await;

    let calls: Vec<(&str, &str, Value)> = vec![
        ("shell", "run", json!({"argv": ["echo", "shape"]})),
        ("gui", "screenshot", json!({"max_dim": 200})),
        ("gui", "windows", json!({})),
        ("gui", "monitors", json!({})),
        ("gui", "focus", json!({"window": window})),
        ("gui", "move", json!({"x": x, "y": y})),
        ("gui", "cursor", json!({})),
        (
            "gui",
            "desktop",
            json!({"op": "open", "size": [64, 64], "visible": false}),
        ),
        ("gui", "click", json!({"x": x, "y": y})),
        (
            "gui",
            "drag",
            json!({"from_x": x, "from_y": y, "to_x": x + 2, "to_y": y}),
        ),
        ("gui", "scroll", json!({"x": x, "y": y, "dy": 1})),
        ("ax", "apps", json!({})),
        ("ax", "tree", json!({"app": pid})),
        ("ax", "find", json!({"app": pid, "selector": "button"})),
        (
            "ax",
            "act",
            json!({"app": pid, "selector": "textInput \"Your name\"", "action": "focus"}),
        ),
        (
            "ax",
            "wait",
            json!({"app": pid, "selector": "textInput \"Your name\"", "until": "focused"}),
        ),
        ("ax", "focused", json!({"app": pid})),
        ("gui", "type", json!({"text": "shape"})),
        ("shell", "job", json!({"op": "list"})),
        ("shell", "open", json!({"argv": ["cat"]})),
        ("shell", "send", json!({"session": 1, "text": "shape\n"})),
        ("shell", "read", json!({"session": 1, "until": "shape"})),
        ("shell", "screen", json!({"session": 1})),
        (
            "shell",
            "resize",
            json!({"session": 1, "rows": 30, "cols": 90}),
        ),
        ("shell", "list", json!({})),
        ("shell", "close", json!({"session": 1})),
        ("gui", "key", json!({"combo": "End"})),
        (
            "ax",
            "read",
            json!({"app": pid, "selector": "textInput \"Your name\""}),
        ),
        ("shell", "help", json!({})),
        ("gui", "help", json!({"command": "click"})),
        ("ax", "help", json!({})),
    ];
    let mut seen = Vec::new();
    for (surface, command, args) in calls {
        let name = format!("{surface}.{command}");
        let result = call(&daemon, surface, command, args).await;
        let fields = promised
            .get(&name)
            .unwrap_or_else(|| panic!("the description lists no {name}: {promised:?}"));
        check_against_promise(&name, &result, fields);
        seen.push(name);
    }
    // Every command the description lists here was called (applescript is macOS-only).
    let listed: Vec<&String> = promised.keys().collect();
    assert_eq!(
        listed,
        {
            let mut seen: Vec<&String> = seen.iter().collect();
            seen.sort();
            seen
        },
        "a listed command was not called"
    );
    // The text reached the entry that had the focus: the reply's fields were about a real act.
    let read = structured(
        &call(
            &daemon,
            "ax",
            "read",
            json!({"app": pid, "selector": "textInput \"Your name\""}),
        )
        .await,
    );
    assert_eq!(read["text"], "shape", "{read}");
}

/// The typical calls whose model-visible bytes are measured: the set (a shell run, gui
/// windows and type, ax find/act/read) and, apart, a tree and a wait.
async fn typical_calls(daemon: &Daemon, app: &TestApp) -> Vec<(&'static str, CallToolResult)> {
    let pid = app.pid();
    vec![
        (
            "shell run echo",
            call(daemon, "shell", "run", json!({"argv": ["echo", "hello"]})).await,
        ),
        (
            "shell run ls",
            call(daemon, "shell", "run", json!({"argv": ["ls", "/usr"]})).await,
        ),
        (
            "gui windows",
            call(daemon, "gui", "windows", json!({})).await,
        ),
        (
            "ax find",
            call(
                daemon,
                "ax",
                "find",
                json!({"app": pid, "selector": "button \"Say Hello\""}),
            )
            .await,
        ),
        (
            "ax act press",
            call(
                daemon,
                "ax",
                "act",
                json!({"app": pid, "selector": "button \"Say Hello\"", "action": "press"}),
            )
            .await,
        ),
        (
            "ax act focus",
            call(
                daemon,
                "ax",
                "act",
                json!({"app": pid, "selector": "textInput \"Your name\"", "action": "focus"}),
            )
            .await,
        ),
        (
            "gui type",
            call(daemon, "gui", "type", json!({"text": "Ada"})).await,
        ),
        (
            "ax read",
            call(
                daemon,
                "ax",
                "read",
                json!({"app": pid, "selector": "textInput \"Your name\""}),
            )
            .await,
        ),
        (
            "+ ax tree",
            call(daemon, "ax", "tree", json!({"app": pid})).await,
        ),
        (
            "+ ax wait",
            call(
                daemon,
                "ax",
                "wait",
                json!({"app": pid, "selector": "checkBox \"Dark mode\""}),
            )
            .await,
        ),
    ]
}

/// Prints the model-visible bytes of the typical calls (`--nocapture` shows the table; run it
/// with `COMPUTER_BIN` set to another build to compare) and checks that no text carries the
/// receipt id, a `null` or a `false` flag.
#[tokio::test(flavor = "multi_thread")]
async fn typical_replies_show_the_model_only_what_informs() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Lean Replies");
    wait_on_bus(&daemon, app.pid()).await;
    let calls = typical_calls(&daemon, &app).await;
    let (mut core, mut all) = (0, 0);
    for (name, result) in &calls {
        let text = visible_text(result);
        all += text.len();
        if !name.starts_with('+') {
            core += text.len();
        }
        println!("{name:>14}: {:>5} bytes  {text}", text.len());
    }
    println!(
        "model-visible bytes: {core} (shell, gui windows/type, ax find/act/read), {all} with tree and wait"
    );
    for (name, result) in &calls {
        let text = visible_text(result);
        let receipt = receipt_of(result);
        assert!(
            !text.contains(&receipt),
            "{name}: receipt in the text: {text}"
        );
        for flag in [":false", ":null", "\"receipt\"", "\"ok\""] {
            assert!(!text.contains(flag), "{name}: `{flag}` in the text: {text}");
        }
    }
}

/// No match, several matches and a failed action each have their own code, beside a press that
/// works.
#[tokio::test(flavor = "multi_thread")]
async fn a_miss_an_ambiguity_and_a_failure_have_distinct_codes() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Error Codes");
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;

    let pressed = structured(
        &call(
            &daemon,
            "ax",
            "act",
            json!({"app": pid, "selector": "button \"Say Hello\"", "action": "press"}),
        )
        .await,
    );
    assert_eq!(pressed["ok"], true, "{pressed}");
    app.wait_line("clicked 1");

    // A typo, as a model makes them: no match, and the message shows the nearest name.
    let missed = call(
        &daemon,
        "ax",
        "act",
        json!({"app": pid, "selector": "button \"Say Helo\"", "action": "press"}),
    )
    .await;
    let error = &structured(&missed)["error"];
    assert_eq!(error["code"], "no_match", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("Say Hello"),
        "the miss shows what is there: {error}"
    );
    assert!(visible_text(&missed).contains("no_match"));

    let several = call(
        &daemon,
        "ax",
        "act",
        json!({"app": pid, "selector": "button \"Duplicate\"", "action": "press"}),
    )
    .await;
    let error = &structured(&several)["error"];
    assert_eq!(error["code"], "ambiguous", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("matches 2 elements"),
        "{error}"
    );

    // An app that is not there is a miss too; a ref the daemon never gave out as well.
    let no_app = structured(
        &call(
            &daemon,
            "ax",
            "find",
            json!({"app": "no-such-app-x", "selector": "button"}),
        )
        .await,
    );
    assert_eq!(no_app["error"]["code"], "no_match", "{no_app}");
    let no_ref = structured(&call(&daemon, "ax", "read", json!({"ref": 999_999})).await);
    assert_eq!(no_ref["error"]["code"], "no_match", "{no_ref}");

    // A run that cannot start is a failed action, not a miss.
    let failed = structured(
        &call(
            &daemon,
            "shell",
            "run",
            json!({"argv": ["/nonexistent/program"]}),
        )
        .await,
    );
    assert_eq!(failed["error"]["code"], "action_failed", "{failed}");
    assert_eq!(
        app.lines_starting("duplicate"),
        Vec::<String>::new(),
        "nothing ambiguous was pressed"
    );
}

/// A wait that times out says what it found instead: the element in its other state, the
/// nearest names for a selector that matches nothing, how many still match.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_times_out_says_what_it_found() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Wait Found");
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;

    let met = structured(
        &call(
            &daemon,
            "ax",
            "wait",
            json!({"app": pid, "selector": "checkBox \"Dark mode\""}),
        )
        .await,
    );
    assert_eq!(met["met"], true, "{met}");
    assert!(met.get("found").is_none(), "{met}");

    let state = structured(
        &call(&daemon, "ax", "wait", json!({"app": pid, "selector": "checkBox \"Dark mode\"", "until": "checked", "timeout_ms": 300})).await,
    );
    assert_eq!(state["met"], false, "{state}");
    assert!(
        state["found"].as_str().unwrap().contains("another state"),
        "{state}"
    );
    let states: Vec<&str> = state["states"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        states.contains(&"focusable") && !states.contains(&"checked"),
        "{state}"
    );
    assert!(
        state["node"].as_str().unwrap().contains("Dark mode"),
        "{state}"
    );

    let typo = structured(
        &call(
            &daemon,
            "ax",
            "wait",
            json!({"app": pid, "selector": "button \"Open Dialgo\"", "timeout_ms": 300}),
        )
        .await,
    );
    assert_eq!(typo["met"], false, "{typo}");
    assert!(
        typo["nearest"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("Open Dialog")),
        "{typo}"
    );

    let stays = structured(
        &call(&daemon, "ax", "wait", json!({"app": pid, "selector": "button \"Duplicate\"", "until": "disappears", "timeout_ms": 300})).await,
    );
    assert_eq!(stays["met"], false, "{stays}");
    assert!(
        stays["found"].as_str().unwrap().contains("still matches 2"),
        "{stays}"
    );

    let no_app = structured(
        &call(
            &daemon,
            "ax",
            "wait",
            json!({"app": "no-such-app-y", "selector": "button", "timeout_ms": 300}),
        )
        .await,
    );
    assert_eq!(no_app["met"], false, "{no_app}");
    assert!(
        no_app["found"].as_str().unwrap().contains("no-such-app-y"),
        "{no_app}"
    );
}

/// A cut output names a file that holds all of it, even when the output fit in memory; an
/// output that is not cut gets no file and no `cut`.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_output_names_an_artifact_holding_all_of_it() {
    let daemon = Daemon::start();
    let whole: String = (1..=2000).map(|n| format!("{n}\n")).collect();
    let result = call_with(
        &daemon,
        "shell",
        "run",
        json!({"argv": ["seq", "1", "2000"]}),
        json!({"return": {"max_bytes": 100}}),
    )
    .await;
    let out = structured(&result);
    let cut = &out["cut"]["stdout"];
    assert_eq!(cut["bytes"], whole.len(), "{out}");
    let path = cut["artifact"]
        .as_str()
        .unwrap_or_else(|| panic!("no artifact path: {out}"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), whole);
    assert!(
        visible_text(&result).contains(path),
        "the model sees the path"
    );
    // The receipt records the file by hash.
    let row = daemon.receipt_row(&json!(receipt_of(&result)), "result");
    let recorded = row["body"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["path"] == path)
        .unwrap_or_else(|| panic!("the artifact is not in the receipt: {row}"));
    assert_eq!(
        recorded["sha256"],
        hex::encode(Sha256::digest(whole.as_bytes()))
    );

    let short =
        structured(&call(&daemon, "shell", "run", json!({"argv": ["echo", "short"]})).await);
    assert!(short.get("cut").is_none(), "{short}");
    assert_eq!(short["stdout"], "short\n");
}

/// `select` on a listing that was cut keeps the signs of the cut (`truncated`, `cursor`); on a
/// whole listing it keeps only what was selected.
#[tokio::test(flavor = "multi_thread")]
async fn select_on_a_cut_listing_keeps_the_cut_visible() {
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Select Cut");
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;
    let select = json!({"return": {"select": ["tree"]}});

    let cut = call_with(
        &daemon,
        "ax",
        "tree",
        json!({"app": pid, "max_nodes": 3}),
        select.clone(),
    )
    .await;
    let out = structured(&cut);
    assert_eq!(out["tree"].as_str().unwrap().lines().count(), 3, "{out}");
    assert_eq!(out["truncated"], true, "the cut is visible: {out}");
    assert!(out["cursor"].is_string(), "and can be continued: {out}");
    assert!(
        out.get("revision").is_none(),
        "what was not selected is left out: {out}"
    );

    let whole = call_with(&daemon, "ax", "tree", json!({"app": pid}), select).await;
    assert_eq!(
        reply_fields(&whole),
        vec!["tree"],
        "{:?}",
        whole.structured_content
    );
}

/// `gui type` names the window the text went to, and it is the one that shows it.
#[tokio::test(flavor = "multi_thread")]
async fn gui_type_names_the_window_that_received_the_text() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Typed Into");
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;
    let window = window_of(&daemon, "Typed Into").await;
    let focus = structured(&call(&daemon, "gui", "focus", json!({"window": window})).await);
    assert_eq!(focus["ok"], true, "{focus}");
    let entry = structured(
        &call(
            &daemon,
            "ax",
            "act",
            json!({"app": pid, "selector": "textInput \"Your name\"", "action": "focus"}),
        )
        .await,
    );
    assert_eq!(entry["ok"], true, "{entry}");

    let typed = structured(&call(&daemon, "gui", "type", json!({"text": "Grace"})).await);
    assert_eq!(typed["ok"], true, "{typed}");
    assert_eq!(typed["chars"], 5);
    assert_eq!(typed["window"]["id"], window, "{typed}");
    assert_eq!(typed["window"]["title"], "Typed Into", "{typed}");
    // The keys reached the X server when `type` answered; the app takes them from its queue on
    // its own time, so the entry is read until it holds the text (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let read = structured(
            &call(
                &daemon,
                "ax",
                "read",
                json!({"app": pid, "selector": "textInput \"Your name\""}),
            )
            .await,
        );
        if read["text"] == "Grace" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline
                && "Grace".starts_with(read["text"].as_str().unwrap_or("?")),
            "the entry should come to hold exactly the typed text: {read}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The evidence reply gives each shot's size, which is the file's.
#[tokio::test(flavor = "multi_thread")]
async fn evidence_gives_the_size_of_each_shot() {
    let daemon = Daemon::start_on_desktop("");
    let result = call_with(
        &daemon,
        "gui",
        "cursor",
        json!({}),
        json!({"evidence": "full"}),
    )
    .await;
    let out = structured(&result);
    for label in ["before", "after"] {
        let shot = &out["evidence"][label];
        let path = shot["path"]
            .as_str()
            .unwrap_or_else(|| panic!("no {label} shot: {out}"));
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(shot["bytes"], bytes.len(), "{label}: {shot}");
        assert_eq!(
            shot["sha256"],
            hex::encode(Sha256::digest(&bytes)),
            "{label}"
        );
    }
    assert!(out["evidence"]["after"]["settle_ms"].is_u64(), "{out}");
    assert!(visible_text(&result).contains("\"bytes\""));
}

/// The receipt id is out of the model's text but reachable by the client: structured content
/// and `_meta` (on success, on error, and at a revision without structured content), and the
/// CLI still shows it.
#[tokio::test(flavor = "multi_thread")]
async fn the_receipt_id_stays_reachable_by_the_client() {
    let daemon = Daemon::start();
    let ok = call(&daemon, "shell", "run", json!({"argv": ["echo", "hi"]})).await;
    let receipt = receipt_of(&ok);
    assert!(!visible_text(&ok).contains(&receipt));
    assert_eq!(
        daemon.receipt_row(&json!(receipt), "result")["body"]["ok"],
        true
    );

    let invalid = call(&daemon, "shell", "run", json!({"argz": []})).await;
    let receipt = receipt_of(&invalid);
    let text = visible_text(&invalid);
    assert!(
        !text.contains(&receipt) && text.contains("invalid_call"),
        "{text}"
    );
    assert_eq!(
        daemon.receipt_row(&json!(receipt), "result")["body"]["ok"],
        false
    );

    // Before 2025-06-18 there is no structured content: `_meta` carries the id.
    let mut raw = computer_tests::RawConnection::connect(&daemon.socket);
    raw.initialize("2025-03-26");
    let (reply, _) = raw.call_tool(&computer_tests::shell_run(
        json!({"argv": ["true"]}),
        json!({}),
    ));
    assert!(
        reply["result"].get("structuredContent").is_none(),
        "{reply}"
    );
    let receipt = reply["result"]["_meta"]["receipt"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    assert!(
        !reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(receipt)
    );
    daemon.receipt_row(&json!(receipt), "intent");

    // `computer call` prints it from the structured part.
    let out = daemon.cli(&["call", "shell", "run", "--", "echo", "cli"]);
    assert!(out.status.success(), "{}", out.stderr);
    let shown = format!("{}{}", out.stdout, out.stderr);
    let id = daemon.receipts().last().unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(shown.contains(&id), "the CLI shows the receipt id: {shown}");
    assert_eq!(out.stdout, "cli\n", "the run's output, as it printed it");
    // A quiet run (its empty outputs left out of the reply) prints nothing of its own.
    let quiet = daemon.cli(&["call", "shell", "run", "--", "true"]);
    assert!(quiet.status.success(), "{}", quiet.stderr);
    assert_eq!(quiet.stdout, "", "{}", quiet.stderr);
    assert!(quiet.stderr.contains("receipt "), "{}", quiet.stderr);
}
