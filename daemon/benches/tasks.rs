//! The fixed task suite of multi-step calls: five small desktop tasks (answer a dialog, fill a
//! form and submit, toggle and confirm, wait for a dialog and press its button, read git status),
//! each done one call per step and as one multi-step call, against the GTK test app the ax suite
//! uses on a headless desktop of its own. Counts model rounds and model-visible bytes per task
//! (the text content plus the structured content of every reply the model receives), and the
//! rounds an agent saves by reading each act's `effect` instead of looking again. With
//! `COMPUTER_BENCH_BASELINE_BIN` (a `computer` built from an earlier commit) the one-call-per-step
//! suite also runs against that binary, side by side, as the anchor for "today's replies".
//! Run: `cargo bench -p computer-daemon --bench tasks`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::Daemon;
use computer_tests::desktop::{Desktop, TestDesktop};
use serde_json::{Value, json};

use crate::common::visible_bytes;

struct Run {
    rounds: usize,
    bytes: usize,
    last: Value,
}

async fn one_call_per_step(daemon: &Daemon, steps: &[Value]) -> Run {
    let client = daemon.client().await;
    let mut bytes = 0;
    let mut last = Value::Null;
    let mut results: Vec<Value> = Vec::new();
    for step in steps {
        // What an agent does between rounds: reads the value it needs from an earlier reply.
        let step = resolve(step, &results);
        let result = client.call_raw(step).await.expect("call");
        bytes += visible_bytes(&result);
        last = result.structured_content.clone().unwrap_or(Value::Null);
        results.push(last.clone());
    }
    client.close().await;
    Run {
        rounds: steps.len(),
        bytes,
        last,
    }
}

/// One call per step, skipping each look-again step whose act says its effect is `confirmed`;
/// `None` when an act did not, so the agent would have had to look again.
async fn with_effects(
    daemon: &Daemon,
    steps: &[Value],
    look_again: &[(usize, usize)],
) -> Option<Run> {
    let client = daemon.client().await;
    let (mut bytes, mut rounds) = (0, 0);
    let mut last = Value::Null;
    let mut results: Vec<Value> = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        if let Some((_, act)) = look_again.iter().find(|(step, _)| *step == index + 1) {
            if results[act - 1]["effect"] != "confirmed" {
                client.close().await;
                return None;
            }
            results.push(Value::Null);
            continue;
        }
        let step = resolve(step, &results);
        let result = client.call_raw(step).await.expect("call");
        bytes += visible_bytes(&result);
        rounds += 1;
        last = result.structured_content.clone().unwrap_or(Value::Null);
        results.push(last.clone());
    }
    client.close().await;
    Some(Run {
        rounds,
        bytes,
        last,
    })
}

async fn multi_step(daemon: &Daemon, steps: &[Value], select: Option<Value>) -> Run {
    let client = daemon.client().await;
    let mut call = json!({"steps": steps});
    if let Some(select) = select {
        call["return"] = json!({"select": select});
    }
    let result = client.call_raw(call).await.expect("call");
    client.close().await;
    Run {
        rounds: 1,
        bytes: visible_bytes(&result),
        last: result.structured_content.clone().unwrap_or(Value::Null),
    }
}

/// The bench's stand-in for the model reading a value out of an earlier reply.
fn resolve(value: &Value, results: &[Value]) -> Value {
    match value {
        Value::Object(map) if map.len() == 1 && map.get("ref").is_some_and(|r| r.is_string()) => {
            let text = map["ref"].as_str().unwrap();
            let (step, field) = text[1..].split_once('.').expect("`$N.field`");
            results[step.parse::<usize>().unwrap() - 1][field].clone()
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), resolve(v, results)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve(v, results)).collect()),
        other => other.clone(),
    }
}

fn ax(command: &str, args: Value) -> Value {
    json!({"surface": "ax", "command": command, "args": args})
}

fn shell(argv: Value) -> Value {
    json!({"surface": "shell", "command": "run", "args": {"argv": argv}})
}

struct Task {
    name: &'static str,
    /// Brings the app where the task starts (not counted).
    setup: Vec<Value>,
    steps: Vec<Value>,
    /// What the multi-step call asks back (None: the last step's result).
    select: Option<Value>,
    /// Whether a run did what the task asks, judged from its last reply.
    done: fn(&Value) -> bool,
    /// Puts the app back where the task starts (not counted).
    teardown: Vec<Value>,
    /// Steps (1-based) that only look again at what an earlier act did, each with that act's
    /// step: an agent that reads the act's `effect` skips them when it says `confirmed`.
    look_again: &'static [(usize, usize)],
}

fn tasks(pid: u32, repo: &str) -> Vec<Task> {
    let dialog_button = "dialog \"Confirm\" > button \"Close Dialog\"";
    vec![
        Task {
            name: "answer a dialog",
            setup: vec![ax(
                "act",
                json!({"app": pid, "selector": "button \"Open Dialog\"", "action": "press"}),
            )],
            steps: vec![
                ax(
                    "wait",
                    json!({"app": pid, "selector": dialog_button, "timeout_ms": 5000}),
                ),
                ax(
                    "act",
                    json!({"app": pid, "ref": {"ref": "$1.ref"}, "action": "press"}),
                ),
                ax(
                    "wait",
                    json!({"app": pid, "selector": "dialog \"Confirm\"", "until": "disappears", "timeout_ms": 5000}),
                ),
            ],
            select: None,
            done: |last| last["met"] == true,
            teardown: vec![],
            look_again: &[(3, 2)],
        },
        Task {
            name: "fill a form and submit",
            setup: vec![],
            steps: vec![
                ax(
                    "act",
                    json!({"app": pid, "selector": "textInput \"Your name\"", "action": "set_value", "value": "Ada Lovelace"}),
                ),
                ax(
                    "act",
                    json!({"app": pid, "selector": "button \"Print Entry\"", "action": "press"}),
                ),
                ax(
                    "read",
                    json!({"app": pid, "selector": "textInput \"Your name\""}),
                ),
            ],
            select: Some(json!(["$3.text"])),
            done: |last| last["text"] == "Ada Lovelace" || last["$3.text"] == "Ada Lovelace",
            teardown: vec![],
            look_again: &[(3, 1)],
        },
        Task {
            name: "toggle and confirm",
            setup: vec![],
            steps: vec![
                ax(
                    "act",
                    json!({"app": pid, "selector": "checkBox \"Dark mode\"", "action": "toggle"}),
                ),
                ax(
                    "wait",
                    json!({"app": pid, "selector": "checkBox \"Dark mode\"", "until": "checked", "timeout_ms": 3000}),
                ),
            ],
            select: Some(json!(["$2.met"])),
            done: |last| last["met"] == true || last["$2.met"] == true,
            teardown: vec![
                ax(
                    "act",
                    json!({"app": pid, "selector": "checkBox \"Dark mode\"", "action": "toggle"}),
                ),
                ax(
                    "wait",
                    json!({"app": pid, "selector": "checkBox \"Dark mode\"", "until": "!checked", "timeout_ms": 3000}),
                ),
            ],
            look_again: &[(2, 1)],
        },
        Task {
            name: "wait for a dialog and press its button",
            setup: vec![],
            steps: vec![
                ax(
                    "act",
                    json!({"app": pid, "selector": "button \"Open Dialog\"", "action": "press"}),
                ),
                ax(
                    "wait",
                    json!({"app": pid, "selector": dialog_button, "timeout_ms": 5000}),
                ),
                ax(
                    "act",
                    json!({"app": pid, "ref": {"ref": "$2.ref"}, "action": "press"}),
                ),
                ax(
                    "wait",
                    json!({"app": pid, "selector": "dialog \"Confirm\"", "until": "disappears", "timeout_ms": 5000}),
                ),
            ],
            select: None,
            done: |last| last["met"] == true,
            teardown: vec![],
            look_again: &[(4, 3)],
        },
        Task {
            name: "read git status",
            setup: vec![],
            steps: vec![
                shell(json!(["git", "-C", repo, "status", "--short", "--branch"])),
                shell(json!(["git", "-C", repo, "log", "-1", "--format=%h %s"])),
            ],
            select: Some(json!(["$1.stdout", "$2.stdout"])),
            done: |last| {
                last["stdout"].as_str().is_some_and(|s| s.contains("first"))
                    || last["$1.stdout"]
                        .as_str()
                        .is_some_and(|s| s.contains("notes.txt"))
            },
            teardown: vec![],
            look_again: &[],
        },
    ]
}

/// The GTK test app of the ax suite; returns once it printed `ready`.
fn launch_app(desktop: &Desktop) -> computer_tests::desktop::App {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/gtk_test_app.py");
    let mut app = desktop.launch(
        "env",
        &["/usr/bin/python3", script.to_str().unwrap(), "Tasks Bench"],
    );
    let out = app.0.stdout.take().expect("stdout piped");
    let ready = Arc::new(Mutex::new(false));
    let seen = ready.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line == "ready" {
                *seen.lock().unwrap() = true;
            }
        }
    });
    computer_tests::wait_for("the app to start", Duration::from_secs(30), || {
        (*ready.lock().unwrap()).then_some(())
    });
    app
}

/// A small git repository with one commit and one changed file.
fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.invalid",
            ])
            .args(args)
            .output()
            .expect("git");
        assert!(status.status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("notes.txt"), "one\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(dir.path().join("notes.txt"), "two\n").unwrap();
    dir
}

async fn wait_on_bus(daemon: &Daemon, pid: u32) {
    // One bounded `ax wait` (the daemon polls the bus itself).
    let mut wait = ax(
        "wait",
        json!({"app": pid, "selector": "button \"Say Hello\"", "timeout_ms": 30000}),
    );
    wait["complications"] = json!({"timeout_ms": 30000});
    let client = daemon.client().await;
    let out = client.call_raw(wait).await.expect("call");
    client.close().await;
    assert!(
        out.structured_content
            .as_ref()
            .is_some_and(|v| v["met"] == true),
        "the app never showed on AT-SPI: {:?}",
        out.structured_content
    );
}

#[tokio::main]
async fn main() {
    let ours_bin = env!("CARGO_BIN_EXE_computer");
    let baseline_bin = std::env::var("COMPUTER_BENCH_BASELINE_BIN").ok();
    let desktop = Desktop::shared();
    // SAFETY: the harness reads COMPUTER_BIN when it starts a daemon; nothing else of ours reads
    // the environment meanwhile.
    let baseline = baseline_bin.as_ref().map(|bin| {
        unsafe { std::env::set_var("COMPUTER_BIN", bin) };
        desktop.start_daemon("")
    });
    unsafe { std::env::set_var("COMPUTER_BIN", ours_bin) };
    let daemon = desktop.start_daemon("");
    let app = launch_app(desktop);
    let pid = app.pid();
    wait_on_bus(&daemon, pid).await;
    let repo = git_repo();
    let repo_path = repo.path().to_str().unwrap().to_string();

    println!(
        "task | steps | rounds per step / per step with effects / multi-step | model-visible bytes: baseline per step | per step | multi-step | multi-step / baseline"
    );
    let (mut total_base, mut total_multi) = (0usize, 0usize);
    let mut total_rounds = (0usize, 0usize);
    for task in tasks(pid, &repo_path) {
        let mut base_bytes = None;
        if let Some(baseline) = &baseline {
            one_call_per_step(baseline, &task.setup).await;
            let run = one_call_per_step(baseline, &task.steps).await;
            assert!(
                (task.done)(&run.last),
                "{}: baseline run did not finish it: {}",
                task.name,
                run.last
            );
            base_bytes = Some(run.bytes);
            one_call_per_step(&daemon, &task.teardown).await;
        }
        one_call_per_step(&daemon, &task.setup).await;
        let per_step = one_call_per_step(&daemon, &task.steps).await;
        assert!(
            (task.done)(&per_step.last),
            "{}: per-step run did not finish it: {}",
            task.name,
            per_step.last
        );
        one_call_per_step(&daemon, &task.teardown).await;
        one_call_per_step(&daemon, &task.setup).await;
        let effects = with_effects(&daemon, &task.steps, task.look_again)
            .await
            .unwrap_or_else(|| panic!("{}: an act did not confirm its effect", task.name));
        one_call_per_step(&daemon, &task.teardown).await;
        // The skipped wait, run uncounted, so the next run starts with the dialog gone.
        if !task.look_again.is_empty() {
            let close = ax(
                "wait",
                json!({"app": pid, "selector": "dialog \"Confirm\"", "until": "disappears", "timeout_ms": 5000}),
            );
            one_call_per_step(&daemon, &[close]).await;
        }
        total_rounds.0 += per_step.rounds;
        total_rounds.1 += effects.rounds;
        one_call_per_step(&daemon, &task.setup).await;
        let multi = multi_step(&daemon, &task.steps, task.select.clone()).await;
        assert!(
            (task.done)(&multi.last),
            "{}: multi-step run did not finish it: {}",
            task.name,
            multi.last
        );
        one_call_per_step(&daemon, &task.teardown).await;
        let anchor = base_bytes.unwrap_or(per_step.bytes);
        total_base += anchor;
        total_multi += multi.bytes;
        println!(
            "{} | {} | {} / {} / {} | {} | {} | {} | {:.2}x",
            task.name,
            task.steps.len(),
            per_step.rounds,
            effects.rounds,
            multi.rounds,
            base_bytes.map_or("-".to_string(), |b| b.to_string()),
            per_step.bytes,
            multi.bytes,
            multi.bytes as f64 / anchor as f64
        );
    }
    println!(
        "all five tasks: multi-step bytes / {} bytes = {total_multi} / {total_base} = {:.2}x",
        if baseline.is_some() {
            "baseline per-step"
        } else {
            "per-step (no baseline given)"
        },
        total_multi as f64 / total_base as f64
    );
    println!(
        "all five tasks, one call per step: {} rounds; reading each act's effect instead of looking again: {} rounds",
        total_rounds.0, total_rounds.1
    );
    drop(app);
}
