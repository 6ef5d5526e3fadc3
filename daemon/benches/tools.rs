//! Benchmark of programmatic calls from a run (`complications.tools`) with the real daemon: two
//! 16-read investigations of a GTK app through AT-SPI (16 buttons read one by one; the trees of
//! 16 report windows) each as 16 single calls against one run whose script makes the 16 calls
//! and prints one line (model rounds and model-visible bytes, beside the bytes the script's
//! calls returned to it), and a programmatic call's round trip against the same call over the
//! agent socket. Starts its own Xvfb, session bus and app.
//! Run: `cargo bench -p computer-daemon --bench tools`.

mod common;

use std::time::{Duration, Instant};

use computer_tests::Daemon;
use computer_tests::desktop::{TestApp, gi_python};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::common::{load_average, median};

/// Round trips measured for each way, after as many unmeasured ones.
const ROUND_TRIPS: usize = 300;

/// What the model receives of one reply: every content block's text and the structured content.
fn visible_bytes(result: &CallToolResult) -> usize {
    let content: usize = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.len(),
            other => serde_json::to_string(other).map(|s| s.len()).unwrap_or(0),
        })
        .sum();
    let structured = result
        .structured_content
        .as_ref()
        .map(|v| v.to_string().len())
        .unwrap_or(0);
    content + structured
}

fn read_call(pid: u32, i: usize) -> Value {
    json!({"surface": "ax", "command": "read",
           "args": {"app": pid, "selector": format!("button \"Item {i}\"")}})
}

/// A whole window's tree in one reply: the return budget is raised past the default 4,000 bytes
/// (a page) so that no cursor needs following, the same for the model's calls and the script's.
fn tree_call(pid: u32, i: usize) -> Value {
    json!({"surface": "ax", "command": "tree",
           "args": {"app": pid, "window": format!("window \"Report {i}\"")},
           "complications": {"return": {"max_bytes": 100_000}}})
}

/// One investigation both ways: its 16 calls made singly by the model, then one run whose
/// script (Python source, with `t` the tools module) makes them and prints one line ending in
/// "<n> bytes read". Returns a table row group.
async fn investigate(
    client: &computer_ipc::Client,
    name: &str,
    call: impl Fn(usize) -> Value,
    script: &str,
) -> String {
    let mut single_bytes = 0;
    let started = Instant::now();
    for i in 1..=16 {
        let result = client.call_raw(call(i)).await.unwrap();
        assert_eq!(computer_tests::structured(&result)["ok"], true);
        single_bytes += visible_bytes(&result);
    }
    let single_ms = started.elapsed().as_secs_f64() * 1000.0;

    let python = gi_python();
    let script = format!("{python} -c '\nimport json, computer_tools as t\n{script}\n'");
    let started = Instant::now();
    let run = client
        .call_raw(
            json!({"surface": "shell", "command": "run", "args": {"script": script},
                         "complications": {"tools": true, "timeout_ms": 300000}}),
        )
        .await
        .unwrap();
    let run_ms = started.elapsed().as_secs_f64() * 1000.0;
    let reply = computer_tests::structured(&run);
    assert_eq!(reply["ok"], true, "{reply}");
    let run_bytes = visible_bytes(&run);
    let line = reply["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    let bridged: usize = line
        .split_whitespace()
        .rev()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .expect("the script says how many bytes its calls returned");
    format!(
        "| {name}, 16 single calls: model rounds | 16 |\n\
         | {name}, 16 single calls: model-visible bytes | {single_bytes} |\n\
         | {name}, 16 single calls: wall time | {single_ms:.0} ms |\n\
         | {name}, one run with tools (16 calls inside): model rounds | 1 |\n\
         | {name}, one run with tools: model-visible bytes | {run_bytes} (`{line}`) |\n\
         | {name}, one run with tools: wall time | {run_ms:.0} ms |\n\
         | {name}: bytes the run's calls returned to its script | {bridged} |\n\
         | {name}: model-visible bytes, run / 16 single calls | {:.2} % |\n\
         | {name}: model-visible bytes of the run / bytes bridged to the script | {:.3} % |\n",
        100.0 * run_bytes as f64 / single_bytes as f64,
        100.0 * run_bytes as f64 / bridged as f64,
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let daemon = Daemon::start_on_desktop("");
    // Two apps, so that reading a button does not walk the report windows' nodes.
    let app = TestApp::launch_with("Tools Bench", &["--more"]);
    let pid = app.pid();
    let reports = TestApp::launch_with("Reports", &["--reports", "16"]);
    let reports_pid = reports.pid();
    let client = daemon.client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    for ready in [read_call(pid, 16), tree_call(reports_pid, 16)] {
        while computer_tests::structured(&client.call_raw(ready.clone()).await.unwrap())["ok"]
            != true
        {
            assert!(Instant::now() < deadline, "the app never showed on AT-SPI");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // 1. Sixteen buttons read one by one: small replies.
    let buttons = investigate(
        &client,
        "16 buttons (`ax read`)",
        |i| read_call(pid, i),
        &format!(
            "nodes = [t.ax_read(app={pid}, selector=\"button \\\"Item %d\\\"\" % i) for i in range(1, 17)]\n\
             print(sum(\"showing\" in n[\"states\"] for n in nodes), \"of 16 showing;\", sum(len(json.dumps(n)) for n in nodes), \"bytes read\")"
        ),
    )
    .await;
    // 2. Sixteen windows read whole: an investigation that finds the few failed checks among
    // 3,200 lines.
    let windows = investigate(
        &client,
        "16 windows (`ax tree`)",
        |i| tree_call(reports_pid, i),
        &format!(
            "trees = [t.call(\"ax\", \"tree\", dict(app={reports_pid}, window=\"window \\\"Report %d\\\"\" % i), {{\"return\": {{\"max_bytes\": 100000}}}}) for i in range(1, 17)]\n\
             print(sum(n[\"tree\"].count(\"failed\") for n in trees), \"checks failed;\", sum(len(json.dumps(n)) for n in trees), \"bytes read\")"
        ),
    )
    .await;

    // 3. Round trips of one call: over the agent socket (a connection opened beforehand), and
    // from inside a run through the module (its connection opened by the first call).
    let job_list = json!({"surface": "shell", "command": "job", "args": {"op": "list"}});
    let mut socket_ms = Vec::new();
    for n in 0..2 * ROUND_TRIPS {
        let started = Instant::now();
        client.call_raw(job_list.clone()).await.unwrap();
        if n >= ROUND_TRIPS {
            socket_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let python = gi_python();
    let timing = format!(
        "{python} -c '\nimport time, computer_tools as t\nsamples = []\nfor n in range({twice}):\n    started = time.perf_counter()\n    t.shell_job(op=\"list\")\n    if n >= {half}: samples.append((time.perf_counter() - started) * 1000)\nsamples.sort()\nprint(samples[len(samples) // 2])\n'",
        twice = 2 * ROUND_TRIPS,
        half = ROUND_TRIPS
    );
    // The round trips count against the agent's rate limit like any calls: the default limit
    // allows them.
    let timed = client
        .call_raw(
            json!({"surface": "shell", "command": "run", "args": {"script": timing},
                         "complications": {"tools": ["shell.job"], "timeout_ms": 120000}}),
        )
        .await
        .unwrap();
    let timed = computer_tests::structured(&timed);
    assert_eq!(timed["ok"], true, "{timed}");
    let run_call_ms: f64 = timed["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("the script prints its median");
    let socket_call_ms = median(socket_ms);
    client.close().await;
    drop(app);
    drop(reports);

    println!("| figure | value |");
    println!("|---|---|");
    print!("{buttons}{windows}");
    println!(
        "| `shell job list` round trip, agent socket (Rust client, median of {ROUND_TRIPS}) | {socket_call_ms:.3} ms |"
    );
    println!(
        "| `shell job list` round trip, from a run (`computer_tools`, median of {ROUND_TRIPS}) | {run_call_ms:.3} ms |"
    );
    println!(
        "| programmatic / agent socket | {:.2}x |",
        run_call_ms / socket_call_ms
    );
    println!("\nload average: {}", load_average());
}
