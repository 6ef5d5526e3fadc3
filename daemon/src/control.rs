//! The control socket: where people answer pending approvals (`computer approve`,
//! `computer approvals`). It is separate from the agent socket, and it refuses any peer that
//! descends from this daemon (shell runs and everything they start), so an agent cannot answer
//! its own request through a surface.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::ancestry::{descends_from, lineage};
use crate::approval::{Answer, Approvals, Approver, Event};

/// Longest request line on the control socket.
const MAX_LINE: usize = 64 * 1024;

/// A request on the control socket (one JSON object a line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlRequest {
    /// The pending requests.
    List,
    /// The pending requests now, then an event line for each change.
    Watch,
    /// Answer one request.
    Decide {
        id: u64,
        answer: Answer,
        /// How the person answered: `terminal`, `cli`, `window`.
        via: String,
        /// The receipt id of the request the person was shown. The terminal approver and the
        /// window always send it; when it is not the pending request's, nothing is decided.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<String>,
    },
}

pub struct ControlSocket {
    listener: Listener,
    path: PathBuf,
}

/// Binds the control socket (the caller holds the agent socket's lock, so a file here is stale).
pub fn bind(path: &Path) -> anyhow::Result<ControlSocket> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        computer_ipc::paths::ensure_private_dir(dir)?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        std::fs::remove_file(path).with_context(|| {
            format!("cannot remove the stale control socket {}", path.display())
        })?;
    }
    let listener = crate::server::listen_private(path)?;
    Ok(ControlSocket {
        listener,
        path: path.to_path_buf(),
    })
}

impl ControlSocket {
    /// Serves approvers until the process ends.
    pub async fn run(self, approvals: Arc<Approvals>) {
        // SAFETY: getuid/getpid have no preconditions and cannot fail.
        let (our_uid, our_pid) = unsafe { (libc::getuid(), libc::getpid()) };
        tracing::info!(socket = %self.path.display(), "control socket serving approvers");
        // Out of descriptors, a failing accept would otherwise be retried at once, forever.
        let mut accepting = crate::server::AcceptBackoff::new("control");
        loop {
            match self.listener.accept().await {
                Ok(stream) => {
                    accepting.succeeded();
                    tokio::spawn(serve(stream, approvals.clone(), our_uid, our_pid));
                }
                Err(err) => tokio::time::sleep(accepting.failed(&err)).await,
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a peer may not use the control socket, if it may not.
fn refusal(stream: &Stream, our_uid: u32, our_pid: i32) -> Result<(u32, i32), String> {
    let creds = stream
        .peer_creds()
        .map_err(|err| format!("peer credentials unreadable: {err}"))?;
    let uid = creds.euid().ok_or("peer uid unknown")?;
    let pid = creds.pid().ok_or("peer pid unknown")?;
    if uid != our_uid {
        return Err(format!("peer uid {uid} is not this user"));
    }
    // A process started (directly or not) by this daemon is an agent's doing, never a person's
    // answer. Any failure to read the ancestry refuses.
    if descends_from(pid, our_pid)? {
        return Err(format!(
            "peer pid {pid} descends from this daemon (it was started through a surface)"
        ));
    }
    Ok((uid, pid))
}

async fn serve(stream: Stream, approvals: Arc<Approvals>, our_uid: u32, our_pid: i32) {
    let (uid, pid) = match refusal(&stream, our_uid, our_pid) {
        Ok(peer) => peer,
        Err(reason) => {
            tracing::warn!(%reason, "refused a control connection");
            let (mut read, mut write) = tokio::io::split(stream);
            let line = json!({"ok": false, "error": format!("refused: {reason}")});
            let _ = write.write_all(format!("{line}\n").as_bytes()).await;
            let _ = write.shutdown().await;
            // Read what the peer already sent before closing: closing with unread input resets
            // the connection, and the peer would lose the refusal.
            let mut sink = [0u8; 4096];
            let drain = async {
                let mut left: usize = 64 * 1024;
                while left > 0 {
                    match tokio::io::AsyncReadExt::read(&mut read, &mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n),
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
            return;
        }
    };
    // While a person's approver is connected, no gui or ax action may target its process: that is
    // how an agent is kept from clicking "Allow" on its own request in the approval window. Its
    // ancestors are protected too: typing into the terminal that hosts `computer approve` would
    // answer it just the same.
    let _protection = approvals.approvers().protect(
        lineage(pid)
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect(),
    );
    let (read, mut write) = tokio::io::split(stream);
    // An approver sends a few short lines; cap what one connection may send at all.
    let mut lines =
        BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_LINE as u64 * 64)).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.len() > MAX_LINE {
            break;
        }
        let reply = match serde_json::from_str::<ControlRequest>(&line) {
            Err(err) => json!({"ok": false, "error": format!("not a control request: {err}")}),
            Ok(ControlRequest::List) => json!({"ok": true, "pending": approvals.list()}),
            Ok(ControlRequest::Decide {
                id,
                answer,
                via,
                expect,
            }) => {
                let approver = Approver {
                    uid,
                    pid: Some(pid),
                    via,
                };
                match approvals.decide(id, answer, approver, expect.as_deref()) {
                    Ok(()) => json!({"ok": true}),
                    Err(refused) => {
                        tracing::info!(id, %refused, "an answer was refused");
                        json!({"ok": false, "error": refused.to_string()})
                    }
                }
            }
            Ok(ControlRequest::Watch) => {
                // Watch until the approver hangs up (its protection ends then) or stops reading.
                tokio::select! {
                    () = watch(&approvals, &mut write) => {}
                    () = async { while let Ok(Some(_)) = lines.next_line().await {} } => {}
                }
                return;
            }
        };
        if write
            .write_all(format!("{reply}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn watch(approvals: &Approvals, write: &mut (impl AsyncWriteExt + Unpin)) {
    let mut events = approvals.subscribe();
    let snapshot = json!({"event": "snapshot", "pending": approvals.list()});
    if write
        .write_all(format!("{snapshot}\n").as_bytes())
        .await
        .is_err()
    {
        return;
    }
    loop {
        let event: Value = match events.recv().await {
            Ok(event @ (Event::Pending { .. } | Event::Resolved { .. })) => {
                serde_json::to_value(event).unwrap_or_default()
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                json!({"event": "snapshot", "pending": approvals.list()})
            }
            Err(_) => return,
        };
        if write
            .write_all(format!("{event}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// A client of the control socket, for the CLI approvers.
pub struct ControlClient {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<Stream>>>,
    write: tokio::io::WriteHalf<Stream>,
}

impl ControlClient {
    pub async fn connect(path: &Path) -> anyhow::Result<ControlClient> {
        let stream = computer_ipc::client::connect_stream(path)
            .await
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        let (read, write) = tokio::io::split(stream);
        Ok(ControlClient {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    pub async fn send(&mut self, request: &ControlRequest) -> anyhow::Result<()> {
        let line = serde_json::to_string(request)?;
        self.write.write_all(format!("{line}\n").as_bytes()).await?;
        Ok(())
    }

    /// The next line from the daemon; an error when it refused or hung up.
    pub async fn next(&mut self) -> anyhow::Result<Value> {
        let line = self
            .lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the daemon closed the control connection"))?;
        let value: Value = serde_json::from_str(&line)?;
        if value["ok"] == json!(false) {
            anyhow::bail!("{}", value["error"].as_str().unwrap_or("refused"));
        }
        Ok(value)
    }

    pub async fn request(&mut self, request: &ControlRequest) -> anyhow::Result<Value> {
        if let Err(err) = self.send(request).await {
            // A refused peer may find the connection closed; the refusal says why.
            return match self.next().await {
                Err(refusal) => Err(refusal),
                Ok(_) => Err(err),
            };
        }
        self.next().await
    }
}
