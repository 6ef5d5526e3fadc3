//! The daemon's life: one daemon per socket, stale sockets replaced, private directories
//! enforced, other users refused, graceful shutdown, config errors and `doctor`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, computer_bin, shell_run, structured, wait_for};
use serde_json::json;

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let daemon = Daemon::start();
    let out = daemon.cli(&["serve"]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("already serving"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("pid {}", daemon.pid())),
        "{}",
        out.stderr
    );
    // The first one is unharmed.
    RawConnection::connect(&daemon.socket).initialize("2025-11-25");
}

#[test]
fn a_stale_socket_from_a_dead_daemon_is_replaced() {
    let mut daemon = Daemon::start();
    daemon.stop_with(libc::SIGKILL);
    assert!(
        daemon.socket.exists(),
        "kill -9 leaves the socket file behind"
    );
    daemon.restart();
    // A restarted daemon that accepts and then goes away resets the connection; its log says why.
    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        RawConnection::connect(&daemon.socket).initialize("2025-11-25")
    }))
    .unwrap_or_else(|_| {
        let status = daemon.try_status();
        panic!(
            "the restarted daemon did not answer (its process: {status}); its log:\n{}",
            daemon.log_text()
        )
    });
    assert!(reply["result"].is_object());
    let mode = std::fs::metadata(&daemon.socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(daemon.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
}

fn serve_with_socket(socket: &std::path::Path, state: &std::path::Path) -> std::process::Output {
    Command::new(computer_bin())
        .arg("serve")
        .env("COMPUTER_SOCKET", socket)
        .env("COMPUTER_STATE_DIR", state)
        .env("COMPUTER_CONFIG", state.join("none.toml"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn unsafe_socket_directories_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let open_dir = tmp.path().join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = serve_with_socket(&open_dir.join("c.sock"), &tmp.path().join("state"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("writable by group or others"), "{stderr}");

    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = serve_with_socket(&link.join("c.sock"), &tmp.path().join("state"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("is a symlink"), "{stderr}");
}

/// Each component of `path` with its mode, to tell which one kept a peer out.
fn modes_along(path: &Path) -> String {
    path.ancestors()
        .map(|p| match std::fs::metadata(p) {
            Ok(meta) => format!("{} {:o}", p.display(), meta.permissions().mode() & 0o7777),
            Err(err) => format!("{} ({err})", p.display()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn a_peer_of_another_uid_is_refused_even_with_an_open_socket() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("this check needs root to connect as another user (CI runs it as root)");
        return;
    }
    let daemon = Daemon::start();
    // Open every door the file system has: only the uid check can stop the peer now.
    for dir in [daemon.root.as_path(), daemon.socket.parent().unwrap()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let script = r#"
        use Socket;
        $SIG{PIPE} = "IGNORE";
        socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
        connect($s, pack_sockaddr_un($ARGV[0])) or die "connect: $!";
        my $w = syswrite($s, qq({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"intruder","version":"0"}}}\n));
        my $n = sysread($s, my $buf, 65536);
        print "read=", (defined $n ? $n : "error: $!"), "\n";
        print STDERR "write=", (defined $w ? $w : "error: $!"), "\n";
    "#;
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "perl",
            "-e",
            script,
        ])
        .arg(&daemon.socket)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the peer could not even connect: {stderr}; on its path: {}",
        modes_along(&daemon.socket)
    );
    // Closed unanswered: an end of stream, or a reset because its request was never read.
    let refused = stdout.trim() == "read=0" || stdout.contains("reset by peer");
    assert!(refused, "the peer got an answer: {stdout} {stderr}");
    wait_for("the refusal in the log", Duration::from_secs(10), || {
        daemon
            .log_text()
            .contains("refused a connection from another user")
            .then_some(())
    });
    // Our own uid is still served.
    RawConnection::connect(&daemon.socket).initialize("2025-11-25");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_in_flight_calls_finish_then_exits_zero() {
    let mut daemon = Daemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let started = dir.path().join("started");
    // The run signals that it started, then waits for the test to open the gate.
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.02; done; echo finished",
        started.display(),
        gate.display()
    );
    let call = tokio::spawn(async move {
        let result = client
            .call_raw(shell_run(json!({"script": script}), json!({})))
            .await;
        (client, result)
    });
    let started_path = started.clone();
    tokio::task::spawn_blocking(move || {
        wait_for("the run to start", Duration::from_secs(20), || {
            started_path.exists().then_some(())
        })
    })
    .await
    .unwrap();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(daemon.pid(), libc::SIGTERM) };
    let socket = daemon.socket.clone();
    tokio::task::spawn_blocking(move || {
        wait_for("the socket to go", Duration::from_secs(20), || {
            (!socket.exists()).then_some(())
        })
    })
    .await
    .unwrap();
    std::fs::write(&gate, "").unwrap();
    let (client, result) = call.await.unwrap();
    let out = structured(&result.expect("the in-flight call is answered"));
    assert_eq!(out["stdout"], "finished\n");
    client.close().await;
    let status = daemon.stop_with(0);
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
}

#[test]
fn config_errors_name_the_line_and_key_and_doctor_explains() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        "[shell]\ndefault_timeout_ms = 100\nmax_timout_ms = 5\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(computer_bin())
            .args(args)
            .env("COMPUTER_SOCKET", tmp.path().join("run/c.sock"))
            .env("COMPUTER_STATE_DIR", tmp.path().join("state"))
            .env("COMPUTER_CONFIG", &config)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["serve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("line 3") && stderr.contains("max_timout_ms"),
        "{stderr}"
    );

    let out = run(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["config"]["status"]
            .as_str()
            .unwrap()
            .starts_with("invalid"),
        "{report}"
    );
    assert!(
        report["daemon"]
            .as_str()
            .unwrap()
            .starts_with("not answering")
    );
    let surfaces = report["surfaces"].as_array().unwrap();
    assert_eq!(surfaces.len(), 5);
    let shell = surfaces.iter().find(|s| s["surface"] == "shell").unwrap();
    assert_eq!(shell["availability"]["status"], "ready");
    let gui = surfaces.iter().find(|s| s["surface"] == "gui").unwrap();
    assert_eq!(gui["availability"]["status"], "unavailable");
    assert!(gui["availability"]["fix"].is_string());
}

#[test]
fn cli_call_prints_readable_output_and_mirrors_the_exit_status() {
    let daemon = Daemon::start();
    let out = daemon.cli(&[
        "call",
        "shell",
        "run",
        "--",
        "sh",
        "-c",
        "echo hello; exit 4",
    ]);
    assert_eq!(out.stdout, "hello\n");
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stderr.contains("receipt "), "{}", out.stderr);

    let out = daemon.cli(&["call", "shell", "run", "--json", "--", "ls", "/"]);
    assert!(out.status.success());
    let value = out.json();
    for field in ["ok", "receipt", "exit_code", "stdout", "duration_ms"] {
        assert!(value.get(field).is_some(), "{field} missing from {value}");
    }
    // An empty stderr and `timed_out: false` say nothing, and are left out.
    for field in ["stderr", "timed_out"] {
        assert!(value.get(field).is_none(), "{field} in {value}");
    }
    let receipt = value["receipt"].as_str().unwrap();
    let shown = daemon.cli(&["receipts", "show", receipt]);
    assert!(shown.status.success());
    let rows: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert_eq!(rows[0]["body"]["args"]["args"]["argv"], json!(["ls", "/"]));

    let out = daemon.cli(&["call", "shel", "run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr.contains("unknown surface `shel`") && out.stderr.contains("valid: shell"),
        "{}",
        out.stderr
    );

    let listed = daemon.cli(&["receipts", "list", "--since", "10m", "--surface", "shell"]);
    assert!(listed.status.success());
    assert_eq!(listed.stdout.lines().count(), 4, "{}", listed.stdout);

    for format in ["mcp", "openai", "anthropic"] {
        let out = daemon.cli(&["tools", "--format", format]);
        assert!(out.status.success());
        assert!(out.stdout.contains("COMPUTER"));
    }
    let value = daemon.cli(&["tools", "--format", "openai"]).json();
    assert_eq!(
        value["function"]["parameters"]["properties"]["surface"]["enum"],
        json!(["shell"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rust_client_reaches_the_same_path() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let mut call = computer_ipc::ComputerCall::new(computer_ipc::SurfaceName::Shell, "run");
    call.args.insert("argv".into(), json!(["echo", "typed"]));
    let result = client.call(&call).await.unwrap();
    assert_eq!(structured(&result)["stdout"], "typed\n");
    client.close().await;
}
