//! Benchmarks of the ax surface against same-run anchors: a full-tree dump of gtk3-widget-factory
//! through the real daemon (socket, receipts) against a Python libatspi client walking the same
//! tree, the same dump without the app's own cache (node by node), time to the first nodes of a
//! small page, and model-visible bytes of the outline vs JSON vs a PNG screenshot of the same
//! window. Starts its own Xvfb, session bus and app.
//! Run: `cargo bench -p computer-daemon --bench ax`.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use computer_tests::Daemon;
use computer_tests::desktop::{Desktop, TestDesktop, gi_python};
use serde_json::{Value, json};

use crate::common::{load_average, median};

const RUNS: usize = 15;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/clients")
}

async fn tree(daemon: &Daemon, args: Value) -> Value {
    let client = daemon.client().await;
    let result = client
        .call_raw(json!({"surface": "ax", "command": "tree", "args": args,
                         "complications": {"return": {"max_bytes": 1 << 20}}}))
        .await
        .expect("call");
    client.close().await;
    computer_tests::structured(&result)
}

/// Wall time of one call over a connection opened beforehand (the connect is not the surface).
async fn timed_tree(daemon: &Daemon, args: Value) -> (f64, Value) {
    let client = daemon.client().await;
    let call = json!({"surface": "ax", "command": "tree", "args": args,
                      "complications": {"return": {"max_bytes": 1 << 20}}});
    let started = Instant::now();
    let result = client.call_raw(call).await.expect("call");
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    client.close().await;
    (ms, computer_tests::structured(&result))
}

fn python_walk(desktop: &Desktop) -> (f64, u64) {
    let out = desktop
        .command(&gi_python())
        .arg(clients_dir().join("atspi_dump.py"))
        .arg("gtk3-widget-factory")
        .output()
        .expect("python3 atspi_dump.py");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("atspi_dump.py: {}", String::from_utf8_lossy(&out.stderr)));
    (v["ms"].as_f64().unwrap(), v["nodes"].as_u64().unwrap())
}

/// The PNG of the factory's window, base64-encoded as a model would get it: the window's bounds
/// come from the ax surface itself, the pixels from ImageMagick's `import` of the screen.
async fn screenshot_b64_bytes(daemon: &Daemon, desktop: &Desktop) -> (usize, String) {
    let client = daemon.client().await;
    let result = client
        .call_raw(json!({"surface": "ax", "command": "find",
                         "args": {"app": "gtk3-widget-factory", "selector": "window",
                                  "include": ["bounds"], "format": "json"}}))
        .await
        .expect("call");
    client.close().await;
    let out = computer_tests::structured(&result);
    let windows: Vec<Value> =
        serde_json::from_str(out["matches"].as_str().unwrap_or("[]")).unwrap_or_default();
    let crop = windows
        .iter()
        .find_map(|w| w["bounds"].as_array().cloned())
        .map(|b| format!("{}x{}+{}+{}", b[2], b[3], b[0], b[1]));
    let mut import = desktop.command("import");
    import.args(["-window", "root"]);
    let what = match &crop {
        Some(geometry) => {
            import.args(["-crop", geometry]);
            format!("window ({geometry})")
        }
        None => "screen".to_string(),
    };
    let png = import.arg("png:-").output().expect("ImageMagick import");
    (png.stdout.len().div_ceil(3) * 4, what)
}

#[tokio::main]
async fn main() {
    // The daemon under test is the binary cargo built for this bench.
    // SAFETY: set before any thread of ours reads the environment.
    unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
    let load_before = load_average();
    let desktop = Desktop::shared();
    let daemon = desktop.start_daemon("");
    let walking = desktop.start_daemon_with("", &[("COMPUTER_AX_APP_CACHE", "off".into())]);
    let _factory = desktop.launch("gtk3-widget-factory", &[]);
    let full_args = json!({"app": "gtk3-widget-factory", "max_nodes": 5000});
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut warm = tree(&daemon, full_args.clone()).await;
    // Wait until the tree has settled (GTK builds some pages lazily at start).
    let mut last = 0;
    loop {
        let nodes = warm["nodes"].as_u64().unwrap_or(0);
        if nodes > 150 && nodes == last {
            break;
        }
        last = nodes;
        assert!(
            Instant::now() < deadline,
            "gtk3-widget-factory never settled: {warm}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        warm = tree(&daemon, full_args.clone()).await;
    }

    let mut ours = Vec::new();
    let mut nodes = 0;
    let mut outline_bytes = 0;
    for _ in 0..RUNS {
        let (ms, out) = timed_tree(&daemon, full_args.clone()).await;
        assert_eq!(out["truncated"], false, "{out}");
        nodes = out["nodes"].as_u64().unwrap();
        outline_bytes = out["tree"].as_str().unwrap().len();
        ours.push(ms);
    }
    let mut walked = Vec::new();
    let mut walked_nodes = 0;
    for _ in 0..RUNS {
        let (ms, out) = timed_tree(&walking, full_args.clone()).await;
        assert_eq!(out["truncated"], false, "{out}");
        walked_nodes = out["nodes"].as_u64().unwrap();
        walked.push(ms);
    }
    let mut theirs = Vec::new();
    let mut their_nodes = 0;
    for _ in 0..5 {
        let (ms, n) = python_walk(desktop);
        theirs.push(ms);
        their_nodes = n;
    }
    let (ours_ms, walked_ms, theirs_ms) = (median(ours), median(walked), median(theirs));

    let mut first = Vec::new();
    for _ in 0..RUNS {
        let (ms, out) = timed_tree(
            &daemon,
            json!({"app": "gtk3-widget-factory", "max_nodes": 10}),
        )
        .await;
        assert_eq!(out["nodes"], 10, "{out}");
        first.push(ms);
    }
    let first_ms = median(first);
    let mut first_walked = Vec::new();
    for _ in 0..RUNS {
        let (ms, out) = timed_tree(
            &walking,
            json!({"app": "gtk3-widget-factory", "max_nodes": 10}),
        )
        .await;
        assert_eq!(out["nodes"], 10, "{out}");
        first_walked.push(ms);
    }
    let first_walked_ms = median(first_walked);

    let json_out = tree(
        &daemon,
        json!({"app": "gtk3-widget-factory", "max_nodes": 5000, "format": "json"}),
    )
    .await;
    let json_bytes = json_out["tree"].as_str().unwrap().len();
    let (png_b64, what) = screenshot_b64_bytes(&daemon, desktop).await;

    println!(
        "load average (1, 5, 15 min) at the start: {load_before}; at the end: {}; medians of {RUNS} runs (Python: 5)",
        load_average()
    );
    println!();
    println!("| measure | computer | anchor (same run) | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| full-tree dump of gtk3-widget-factory, ax tree through the daemon (socket, receipts) vs Python libatspi walk (role, name, states) | {ours_ms:.1} ms, {nodes} nodes, {:.0} nodes/s | {theirs_ms:.1} ms, {their_nodes} nodes, {:.0} nodes/s | {:.1}× faster | ≥ 5× faster |",
        nodes as f64 / (ours_ms / 1000.0),
        their_nodes as f64 / (theirs_ms / 1000.0),
        theirs_ms / ours_ms
    );
    println!(
        "| the same dump without the app's cache (`COMPUTER_AX_APP_CACHE=off`: node by node, concurrently) | {walked_ms:.1} ms, {walked_nodes} nodes | Python libatspi walk: {theirs_ms:.1} ms | {:.1}× faster | — |",
        theirs_ms / walked_ms
    );
    println!(
        "| time to the first 10 nodes (`max_nodes: 10`) vs the full dump | {first_ms:.1} ms | {ours_ms:.1} ms | {:.2}× | < full dump |",
        first_ms / ours_ms
    );
    println!(
        "| time to the first 10 nodes without the app's cache | {first_walked_ms:.1} ms | the full dump without it: {walked_ms:.1} ms | {:.2}× | < full dump |",
        first_walked_ms / walked_ms
    );
    println!(
        "| model-visible bytes, outline vs PNG screenshot (base64) of the same {what} | {outline_bytes} B | {png_b64} B | {:.3}× | < 0.5× |",
        outline_bytes as f64 / png_b64 as f64
    );
    println!(
        "| model-visible bytes, outline vs `format: json` | {outline_bytes} B | {json_bytes} B | {:.2}× | < 1× |",
        outline_bytes as f64 / json_bytes as f64
    );
}
