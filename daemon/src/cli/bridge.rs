//! `computer mcp`: an MCP server on stdio that relays every byte to the daemon's socket, starting
//! a daemon in the background when none answers. The daemon does all the work, so stdio clients
//! take exactly the same path as socket clients.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use computer_ipc::client::connect_stream;
use computer_ipc::paths;
use interprocess::local_socket::tokio::Stream;

use super::exit;

/// How long to wait for a freshly started daemon to accept connections.
const SPAWN_WAIT: Duration = Duration::from_secs(15);

pub async fn run(no_spawn: bool) -> u8 {
    let socket = paths::socket_path();
    let stream = match connect_stream(&socket).await {
        Ok(stream) => stream,
        Err(err) if no_spawn => {
            eprintln!("error: {err}");
            return exit::UNAVAILABLE;
        }
        Err(_) => match spawn_and_connect(&socket).await {
            Ok(stream) => stream,
            Err(message) => {
                eprintln!("error: {message}");
                return exit::UNAVAILABLE;
            }
        },
    };
    let (mut from_daemon, mut to_daemon) = tokio::io::split(stream);
    // The MCP client's config hands the bridge its agent token; the daemon reads it first.
    if let Some(token) = std::env::var("COMPUTER_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        let line = computer_ipc::client::authenticate_line(&token);
        if let Err(err) = tokio::io::AsyncWriteExt::write_all(&mut to_daemon, &line).await {
            eprintln!("error: cannot reach the daemon: {err}");
            return exit::UNAVAILABLE;
        }
    }
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let upstream = async {
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        // The client closed stdin: tell the daemon no more requests are coming, but keep relaying
        // answers still in flight.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_daemon).await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut from_daemon, &mut stdout).await;
    };
    tokio::pin!(upstream);
    tokio::select! {
        _ = downstream => {}
        _ = &mut upstream => {
            // Answers to requests already sent still come back.
            let _ = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        }
    }
    exit::OK
}

async fn spawn_and_connect(socket: &Path) -> Result<Stream, String> {
    let exe =
        std::env::current_exe().map_err(|err| format!("cannot find this program's path: {err}"))?;
    let state_dir = paths::state_dir();
    paths::ensure_private_dir(&state_dir).map_err(|err| err.to_string())?;
    let log_path = state_dir.join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|err| format!("cannot open {}: {err}", log_path.display()))?;
    let mut daemon = std::process::Command::new(exe);
    daemon
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own process group: the MCP client's terminal signals must not stop the daemon.
        .process_group(0);
    let mut child = daemon
        .spawn()
        .map_err(|err| format!("cannot start the daemon: {err}"))?;
    tracing::info!(pid = child.id(), log = %log_path.display(), "started a daemon in the background");

    let deadline = tokio::time::Instant::now() + SPAWN_WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Ok(stream) = connect_stream(socket).await {
            // Reap the child in the background if it ever exits, so it leaves no zombie.
            std::thread::spawn(move || child.wait());
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Another bridge may have won the race to start one; its daemon is as good as ours.
            if let Ok(stream) = connect_stream(socket).await {
                return Ok(stream);
            }
            return Err(format!(
                "the daemon exited at start ({status}); see {}",
                log_path.display()
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the daemon did not answer on {} within {}s; see {}",
                socket.display(),
                SPAWN_WAIT.as_secs(),
                log_path.display()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}
