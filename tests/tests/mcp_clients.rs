//! MCP clients nobody here wrote: the official Python SDK drives `computer mcp`, which starts a
//! daemon when none runs, lists the one tool and runs a shell command whose receipt verifies.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use computer_tests::{Daemon, computer_bin};
use serde_json::Value;

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python_mcp_client.py")
}

fn require_python_sdk() {
    let found = Command::new(python())
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "the MCP Python SDK is missing: `pip install mcp` (.ci/run installs it)"
    );
}

fn run_python_client(env: &[(&str, PathBuf)]) -> Value {
    let out = Command::new(python())
        .arg(client_script())
        .arg(computer_bin())
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client prints JSON")
}

/// Stops a daemon that `computer mcp` started in the background, found through its lock file.
struct SpawnedDaemon(PathBuf);

impl Drop for SpawnedDaemon {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0)
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

#[test]
fn python_sdk_through_the_bridge_starts_a_daemon_and_runs_a_receipted_call() {
    require_python_sdk();
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("run/computer.sock");
    std::fs::write(tmp.path().join("config.toml"), computer_tests::ALLOW_ACTS).unwrap();
    let env = [
        ("COMPUTER_SOCKET", socket.clone()),
        ("COMPUTER_STATE_DIR", tmp.path().join("state")),
        ("COMPUTER_CONFIG", tmp.path().join("config.toml")),
    ];
    let _daemon = SpawnedDaemon(tmp.path().join("run/computer.sock.lock"));
    let report = run_python_client(&env);
    assert_eq!(report["tools"], serde_json::json!(["COMPUTER"]));
    assert_eq!(report["server"], "computer");
    assert_eq!(report["is_error"], false);
    assert_eq!(report["structured"]["stdout"], "from python\n");
    assert!(socket.exists(), "the bridge left a daemon serving");

    let receipt = report["structured"]["receipt"].as_str().unwrap();
    let cli = |args: &[&str]| {
        Command::new(computer_bin())
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .output()
            .unwrap()
    };
    let shown = cli(&["receipts", "show", receipt]);
    assert!(shown.status.success());
    let rows: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(rows[1]["body"]["ok"], true);
    assert!(cli(&["receipts", "verify"]).status.success());
}

#[test]
fn python_sdk_through_the_bridge_uses_a_running_daemon() {
    require_python_sdk();
    let daemon = Daemon::start();
    let report = run_python_client(&daemon.env());
    assert_eq!(report["structured"]["ok"], true);
    assert!(
        ["2025-06-18", "2025-11-25"].contains(&report["protocol_version"].as_str().unwrap()),
        "{report}"
    );
    let rows = daemon.receipts();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["call_id"], report["structured"]["receipt"]);
    daemon.assert_chain_holds();
}

#[test]
fn the_bridge_without_spawning_says_no_daemon_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(computer_bin())
        .args(["mcp", "--no-spawn"])
        .env("COMPUTER_SOCKET", tmp.path().join("none.sock"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no daemon is listening") && stderr.contains("computer serve"),
        "{stderr}"
    );
}
