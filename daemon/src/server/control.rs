//! The control socket: where people answer pending approvals (`computer approve`,
//! `computer approvals`). It is separate from the agent socket, and it refuses any peer that
//! descends from this daemon (shell runs and everything they start), so an agent cannot answer
//! its own request through a surface.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use computer_ipc::control::{ControlEvent, DaemonFacts};
pub use computer_ipc::control::{ControlReply, ControlRequest};
use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::guard::ancestry::{descends_from, kin, lineage};
use crate::guard::approval::{Approvals, Approver};

/// Longest request line on the control socket.
const MAX_LINE: usize = 64 * 1024;

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
    /// Serves approvers until the process ends; `facts` says what the daemon is (in `list`).
    pub async fn run(self, approvals: Arc<Approvals>, facts: Facts) {
        // SAFETY: getuid/getpid have no preconditions and cannot fail.
        let (our_uid, our_pid) = unsafe { (libc::getuid(), libc::getpid()) };
        tracing::info!(socket = %self.path.display(), "control socket serving approvers");
        tokio::spawn(notify_each_request(approvals.clone()));
        // Out of descriptors, a failing accept would otherwise be retried at once, forever.
        let mut accepting = crate::server::AcceptBackoff::new("control");
        loop {
            match self.listener.accept().await {
                Ok(stream) => {
                    accepting.succeeded();
                    tokio::spawn(serve(
                        stream,
                        approvals.clone(),
                        facts.clone(),
                        our_uid,
                        our_pid,
                    ));
                }
                Err(err) => tokio::time::sleep(accepting.failed(&err)).await,
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Tells the desktop of each new request (a notification), so that a person not looking at an
/// approver still hears of it. Notifications are fire and forget: they never hold up a request.
/// Each is taken back once its request is resolved.
async fn notify_each_request(approvals: Arc<Approvals>) {
    let notifier = crate::guard::notify::Notifier::default();
    let mut events = approvals.subscribe();
    loop {
        match events.recv().await {
            Ok(ControlEvent::Pending { request }) => notifier.announce(&request),
            Ok(ControlEvent::Resolved { id, .. }) => notifier.withdraw(id),
            Ok(ControlEvent::Snapshot { .. })
            | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
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

/// What the daemon says of itself, asked afresh for each reply (its config file may come or go).
pub type Facts = Arc<dyn Fn() -> DaemonFacts + Send + Sync>;

async fn serve(
    stream: Stream,
    approvals: Arc<Approvals>,
    facts: Facts,
    our_uid: u32,
    our_pid: i32,
) {
    let (uid, pid) = match refusal(&stream, our_uid, our_pid) {
        Ok(peer) => peer,
        Err(reason) => {
            tracing::warn!(%reason, "refused a control connection");
            let (mut read, mut write) = tokio::io::split(stream);
            let _ = write_line(
                &mut write,
                &ControlReply::refused(format!("refused: {reason}")),
            )
            .await;
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
    // What the peer was kin to when it connected: a process that later loses its parent (the
    // shell that started it exits) is still known by it.
    let kin_at_connect = kin(pid);
    let (read, mut write) = tokio::io::split(stream);
    // An approver sends a few short lines; cap what one connection may send at all.
    let mut lines =
        BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_LINE as u64 * 64)).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.len() > MAX_LINE {
            break;
        }
        let reply = match serde_json::from_str::<ControlRequest>(&line) {
            Err(err) => ControlReply::refused(format!(
                "not a control request: {err} (valid: {{\"op\":\"list\"}}, {{\"op\":\"watch\"}}, {{\"op\":\"decide\",\"id\":N,\"answer\":\"allow_once|allow_session|deny\",\"via\":\"...\"}})"
            )),
            Ok(ControlRequest::List) => ControlReply {
                daemon: Some(facts()),
                ..ControlReply::pending(approvals.list())
            },
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
                let typed_into = typed_terminal(&approvals, pid, &kin_at_connect);
                if let Some(terminal) = typed_into {
                    tracing::warn!(
                        id,
                        peer = pid,
                        terminal,
                        "refused an answer from a terminal an agent typed into"
                    );
                    ControlReply::refused(format!(
                        "refused: this answer comes from a process of terminal pid {terminal}, \
                         which an agent's keys reached; what runs there may be the agent's \
                         doing, so it cannot answer approvals. Request #{id} still waits: \
                         answer it from another terminal or the approval window"
                    ))
                } else {
                    match approvals.decide(id, answer, approver, expect.as_deref()) {
                        Ok(()) => ControlReply::done(),
                        Err(refused) => {
                            tracing::info!(id, %refused, "an answer was refused");
                            ControlReply::refused(refused.to_string())
                        }
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
        if write_line(&mut write, &reply).await.is_err() {
            return;
        }
    }
}

/// The terminal an agent typed into that the peer is kin to, now or when it connected. Such a
/// peer's answer is not counted, and the request stays pending: an answer from there carries
/// no sign of a person, and counting it as a deny would let an agent deny other agents'
/// requests; a request nobody else answers is denied when its time runs out, as always.
fn typed_terminal(approvals: &Approvals, pid: i32, kin_at_connect: &[i32]) -> Option<u32> {
    let typed = approvals.approvers();
    typed
        .typed_terminal_among(kin_at_connect)
        .or_else(|| typed.typed_terminal_among(&kin(pid)))
}

/// Writes one message as a line.
async fn write_line(
    write: &mut (impl AsyncWriteExt + Unpin),
    message: &impl Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}

async fn watch(approvals: &Approvals, write: &mut (impl AsyncWriteExt + Unpin)) {
    let mut events = approvals.subscribe();
    let snapshot = ControlEvent::Snapshot {
        pending: approvals.list(),
    };
    if write_line(write, &snapshot).await.is_err() {
        return;
    }
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => ControlEvent::Snapshot {
                pending: approvals.list(),
            },
            Err(_) => return,
        };
        if write_line(write, &event).await.is_err() {
            return;
        }
    }
}
