//! The server loop: binds the private socket (one daemon per socket), checks each peer's uid
//! before reading a byte, serves MCP per connection, and drains in-flight calls on shutdown.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;
use rmcp::ServiceExt;

use crate::config::ServerConfig;
use crate::gateway::Gateway;
use crate::mcp::Connection;
use crate::policy::Caller;
use crate::transport::{LineTransport, Unanswered};

/// A bound socket, owned by this process for as long as the lock is held.
pub struct BoundSocket {
    listener: Listener,
    path: PathBuf,
    _lock: File,
}

impl BoundSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Binds `path` for this daemon: checks (or creates) its private directory, takes the per-socket
/// lock so a second daemon refuses to start, replaces a stale socket file, and sets mode 0600.
pub fn bind(path: &Path) -> anyhow::Result<BoundSocket> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    computer_ipc::paths::ensure_private_dir(dir)?;

    let lock_path = lock_path(path);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the call.
    let locked = unsafe {
        use std::os::fd::AsRawFd;
        libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)
    };
    if locked != 0 {
        let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
        let holder = holder.trim();
        let who = if holder.is_empty() {
            String::new()
        } else {
            format!(" (pid {holder})")
        };
        bail!(
            "another computer daemon{who} is already serving {}; stop it first, or set COMPUTER_SOCKET to use another socket",
            path.display(),
        );
    }
    // The lock file names its holder, for the message above and for scripts that stop the daemon.
    lock.set_len(0).context("cannot truncate the lock file")?;
    (&lock)
        .write_all(format!("{}\n", std::process::id()).as_bytes())
        .context("cannot write the lock file")?;

    // Holding the lock means no live daemon owns this path: a socket file here is stale.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            tracing::info!(path = %path.display(), "replacing a stale socket left by a daemon that is gone");
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket; refusing to replace it",
            path.display()
        ),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err).with_context(|| format!("cannot inspect {}", path.display())),
    }

    let listener = listen_private(path)?;
    Ok(BoundSocket {
        listener,
        path: path.to_path_buf(),
        _lock: lock,
    })
}

/// Listens on `path` with mode 0600 (set again after bind, whatever the umask did). The caller
/// has checked the directory and cleared the path.
pub fn listen_private(path: &Path) -> anyhow::Result<Listener> {
    let name = path
        .to_fs_name::<GenericFilePath>()
        .with_context(|| format!("{} is not a usable socket path", path.display()))?;
    let listener = ListenerOptions::new()
        .name(name)
        .mode(0o600)
        .reclaim_name(false)
        .create_tokio()
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set mode 0600 on {}", path.display()))?;
    Ok(listener)
}

/// The lock file beside a socket; it holds the serving daemon's pid.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Serves until `shutdown` resolves, then stops accepting, lets in-flight calls finish within the
/// configured grace, and removes the socket.
pub async fn run(
    socket: BoundSocket,
    gateway: Arc<Gateway>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let our_uid = unsafe { libc::getuid() };
    tracing::info!(socket = %socket.path.display(), "serving");
    let unanswered = Arc::new(Unanswered::default());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = socket.listener.accept() => match accepted {
                Ok(stream) => {
                    tokio::spawn(serve_connection(
                        stream,
                        gateway.clone(),
                        our_uid,
                        config.max_request_bytes,
                        unanswered.clone(),
                    ));
                }
                Err(err) => tracing::warn!(error = %err, "accept failed"),
            },
        }
    }

    gateway.close();
    let _ = std::fs::remove_file(&socket.path);
    drop(socket.listener);
    let pending = unanswered.get();
    if pending > 0 {
        tracing::info!(
            pending,
            "waiting for in-flight calls to finish and be answered"
        );
        let grace = Duration::from_millis(config.shutdown_grace_ms);
        if tokio::time::timeout(grace, unanswered.drained())
            .await
            .is_err()
        {
            tracing::warn!(
                left = unanswered.get(),
                "grace period over; exiting with calls unfinished (their receipts will read interrupted)"
            );
        }
    }
    tracing::info!("stopped");
    Ok(())
}

async fn serve_connection(
    stream: Stream,
    gateway: Arc<Gateway>,
    our_uid: u32,
    max_line: usize,
    unanswered: Arc<Unanswered>,
) {
    // The uid check runs before a single byte of the request is read: the socket's file mode is
    // not the guard, this is.
    let (uid, pid) = match stream.peer_creds() {
        Ok(creds) => (creds.euid(), creds.pid()),
        Err(err) => {
            tracing::warn!(error = %err, "refused a connection whose peer credentials cannot be read");
            return;
        }
    };
    if uid != Some(our_uid) {
        tracing::warn!(peer_uid = ?uid, peer_pid = ?pid, "refused a connection from another user");
        return;
    }
    let (read, write) = tokio::io::split(stream);
    let (mut transport, writer) = LineTransport::new(read, write, max_line, unanswered);
    let Ok(token) = transport.first_line_token().await else {
        drop(transport);
        let _ = writer.await;
        return;
    };
    let (agent, surfaces) = match gateway.identify(token.as_deref()) {
        Ok(identity) => identity,
        Err(message) => {
            tracing::warn!(peer_pid = ?pid, %message, "refused a connection with a bad token");
            transport.refuse(message);
            drop(transport);
            let _ = writer.await;
            return;
        }
    };
    let caller = Caller {
        uid: our_uid,
        pid,
        agent,
        surfaces,
    };
    tracing::debug!(pid = ?caller.pid, agent = %caller.agent, "client connected");
    // Fired once the connection is gone (wired to the transport's end of input).
    let closed = tokio_util::sync::CancellationToken::new();
    let handler = Connection {
        gateway,
        caller,
        closed: closed.clone(),
    };
    match handler.serve(transport).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(err) => tracing::debug!(error = %err, "connection ended before the MCP handshake"),
    }
    let _ = writer.await;
}
