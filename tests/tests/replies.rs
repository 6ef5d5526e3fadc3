//! Reply shapes against the real daemon and the shared headless desktop: what the model sees of
//! each reply (its text blocks) carries only what informs, every field the tool description
//! promises for a command is there when it applies and no other, and each promise about a reply
//! (an artifact for a cut, a visible cut under `select`, a wait that says what it found, distinct
//! error codes, the window `gui type` reached, the evidence's size) holds.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::desktop::{App, Desktop};
use computer_tests::{Daemon, wait_for};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// Gui and ax acts run without asking: the suite is about reply shapes, not approvals.
const ALLOW_ACTS: &str = "[defaults]\nact = \"allow\"\n";

fn gi_python() -> String {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3".into()
    } else {
        "python3".into()
    }
}

/// The suite's GTK app, with its stdout collected line by line.
struct TestApp {
    app: App,
    lines: Arc<Mutex<Vec<String>>>,
}

impl TestApp {
    fn launch(title: &str) -> TestApp {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/gtk_test_app.py");
        let python = gi_python();
        let mut app = Desktop::shared().launch("env", &[&python, script.to_str().unwrap(), title]);
        let out = app.0.stdout.take().expect("stdout piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let app = TestApp { app, lines };
        app.wait_line("ready");
        app
    }

    fn pid(&self) -> u32 {
        self.app.pid()
    }

    fn wait_line(&self, want: &str) {
        wait_for(
            &format!("the app to print {want:?}"),
            Duration::from_secs(20),
            || {
                self.lines
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|l| l == want)
                    .then_some(())
            },
        );
    }
}

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
    let client = daemon.client().await;
    let result = client
        .call_raw(json!({"surface": surface, "command": command, "args": args, "complications": complications}))
        .await
        .expect("call");
    client.close().await;
    result
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

/// The structured part (programs read it; `computer call --json` prints it).
fn structured(result: &CallToolResult) -> Value {
    result
        .structured_content
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&visible_text(result)).unwrap_or(Value::Null))
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

/// The set of typical calls whose model-visible bytes are measured: a shell run, gui windows and
/// type, ax find/act/read/tree/wait.
async fn typical_calls(daemon: &Daemon, app: &TestApp) -> Vec<(String, CallToolResult)> {
    let pid = app.pid();
    let mut out = Vec::new();
    let mut push = |name: &str, result: CallToolResult| out.push((name.to_string(), result));
    push(
        "shell run echo",
        call(daemon, "shell", "run", json!({"argv": ["echo", "hello"]})).await,
    );
    push(
        "shell run ls",
        call(daemon, "shell", "run", json!({"argv": ["ls", "/usr"]})).await,
    );
    push("gui windows", call(daemon, "gui", "windows", json!({})).await);
    push(
        "ax find",
        call(daemon, "ax", "find", json!({"app": pid, "selector": "button \"Say Hello\""})).await,
    );
    push(
        "ax act press",
        call(daemon, "ax", "act", json!({"app": pid, "selector": "button \"Say Hello\"", "action": "press"})).await,
    );
    push(
        "ax act focus",
        call(daemon, "ax", "act", json!({"app": pid, "selector": "textInput \"Your name\"", "action": "focus"})).await,
    );
    push(
        "gui type",
        call(daemon, "gui", "type", json!({"text": "Ada"})).await,
    );
    push(
        "ax read",
        call(daemon, "ax", "read", json!({"app": pid, "selector": "textInput \"Your name\""})).await,
    );
    push(
        "ax tree",
        call(daemon, "ax", "tree", json!({"app": pid})).await,
    );
    push(
        "ax wait",
        call(daemon, "ax", "wait", json!({"app": pid, "selector": "checkBox \"Dark mode\""})).await,
    );
    out
}

/// Prints the model-visible bytes of the typical calls (`--nocapture` shows the table) and checks
/// that none of them carries the receipt id or a false flag in its text.
#[tokio::test(flavor = "multi_thread")]
async fn typical_replies_show_the_model_only_what_informs() {
    let daemon = Daemon::start_on_desktop(ALLOW_ACTS);
    let app = TestApp::launch("Lean Replies");
    wait_on_bus(&daemon, app.pid()).await;
    let calls = typical_calls(&daemon, &app).await;
    let mut total = 0;
    for (name, result) in &calls {
        let text = visible_text(result);
        total += text.len();
        println!("{name:>14}: {:>5} bytes  {text}", text.len());
    }
    println!("{:>14}: {total:>5} bytes", "total");
    for (name, result) in &calls {
        let text = visible_text(result);
        let receipt = result
            .meta
            .as_ref()
            .and_then(|meta| meta.get("receipt"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{name}: no receipt in _meta"));
        assert!(!text.contains(receipt), "{name}: receipt in the text: {text}");
        for flag in [":false", ":null", "\"receipt\""] {
            assert!(!text.contains(flag), "{name}: `{flag}` in the text: {text}");
        }
    }
}
