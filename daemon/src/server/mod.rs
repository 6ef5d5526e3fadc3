//! The way in: the server loop binds the private socket (one daemon per socket), checks each
//! peer's uid before reading a byte, refuses peers a surface started (nested calls) and
//! connections over the cap, backs off when accepts fail, serves MCP per connection, and drains
//! in-flight calls on shutdown. A call then goes to [`crate::call`].
//!
//! # Layout
//! - [`transport`]: newline-delimited JSON-RPC with a request size cap.
//! - [`mcp`]: the MCP handler of a connection, and the tasks extension's adapter.
//! - [`control`]: the control socket where people (never agents) answer approvals.
//! - `unlisted` (Linux): the daemon's listening sockets bound under a name that says nothing,
//!   then renamed to their paths, so `/proc/net/unix` lists no path of the daemon's.

pub mod control;
pub mod mcp;
pub mod transport;
#[cfg(target_os = "linux")]
pub mod unlisted;

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
use serde_json::{Value, json};
use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::call::gateway::Gateway;
use crate::config::ServerConfig;
use crate::guard::ancestry::descends_from;
use crate::guard::policy::Caller;
use crate::server::mcp::Connection;
use crate::server::transport::{CLOSED_BY_LIMIT, FirstLine, Limits, LineTransport, Unanswered};

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

/// Listens on `path` with mode 0600. The caller has checked the directory and cleared the path.
///
/// Where the kernel takes a socket's mode before `bind` (Linux, the BSDs), the file is born 0600
/// and nothing touches it after `listen`: a chmod then would race whoever already connected and
/// changed it. Where it does not (macOS refuses `fchmod` on a socket), the mode is set right after
/// `bind`; until then only the owner of the private directory can reach the file.
pub fn listen_private(path: &Path) -> anyhow::Result<Listener> {
    #[cfg(target_os = "linux")]
    if let Some(listener) = listen_unlisted(path)? {
        return Ok(listener);
    }
    let name = path
        .to_fs_name::<GenericFilePath>()
        .with_context(|| format!("{} is not a usable socket path", path.display()))?;
    let options = || {
        ListenerOptions::new()
            .name(name.clone())
            .reclaim_name(false)
    };
    let cannot_listen = || format!("cannot listen on {}", path.display());
    match options().mode(0o600).create_tokio() {
        Err(err) if err.kind() == std::io::ErrorKind::Unsupported => {
            let listener = options().create_tokio().with_context(cannot_listen)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot set mode 0600 on {}", path.display()))?;
            Ok(listener)
        }
        created => created.with_context(cannot_listen),
    }
}

/// Listens on `path` through a socket bound under a name that says nothing of where it is, so
/// `/proc/net/unix` lists no path of the daemon's (see `unlisted`); `None` where that cannot be
/// done here, which is logged, and the caller binds the path itself.
#[cfg(target_os = "linux")]
fn listen_unlisted(path: &Path) -> anyhow::Result<Option<Listener>> {
    let Some(socket) = crate::server::unlisted::listen(path)
        .with_context(|| format!("cannot listen on {}", path.display()))?
    else {
        tracing::warn!(
            socket = %path.display(),
            "no /proc/self/fd here: the socket is bound by its path, which /proc/net/unix then shows"
        );
        return Ok(None);
    };
    let listener = interprocess::os::unix::uds_local_socket::tokio::Listener::try_from(socket)
        .with_context(|| format!("cannot serve {}", path.display()))?;
    Ok(Some(listener.into()))
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
    // SAFETY: getuid and getpid have no preconditions and cannot fail.
    let (our_uid, our_pid) = unsafe { (libc::getuid(), libc::getpid()) };
    let descriptors = crate::guard::descriptors::budget();
    tracing::info!(
        socket = %socket.path.display(),
        descriptor_limit = descriptors.limit,
        connections_at_most = descriptors.cap(),
        "serving"
    );
    let unanswered = Arc::new(Unanswered::default());
    let limits = Limits {
        max_line: config.max_request_bytes,
        read_timeout: Duration::from_millis(config.read_timeout_ms),
        handshake_timeout: Duration::from_millis(config.handshake_timeout_ms),
    };
    let cap = config.max_connections.min(Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(cap));
    let mut accepting = AcceptBackoff::new("agent");
    let shared = Arc::new(Shared {
        gateway: gateway.clone(),
        our_uid,
        our_pid,
        limits,
        unanswered: unanswered.clone(),
        logs: RefusalLogs::default(),
    });
    let logs = &shared.logs;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = socket.listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok(stream) => {
                accepting.succeeded();
                tokio_stream(stream)
            }
            Err(err) => {
                // Out of descriptors (or memory) the pending connection stays queued and the
                // listener stays readable: retrying at once would spin. Pause, doubling.
                let pause = accepting.failed(&err);
                if pause.is_zero() {
                    continue;
                }
                tokio::select! {
                    biased;
                    _ = &mut shutdown => break,
                    () = tokio::time::sleep(pause) => continue,
                }
            }
        };
        let peer = match check_peer(&stream, our_uid) {
            Ok(peer) => peer,
            Err(reason) => {
                if let Some(suppressed) = logs.other_user.allow() {
                    tracing::warn!(
                        %reason,
                        suppressed,
                        "refused a connection from another user, or whose user cannot be read (logged at most once a minute)"
                    );
                }
                continue;
            }
        };
        // Every connection a peer holds draws on one budget with the connections of runs'
        // tools channels, which leaves descriptors for the daemon's own work and the control
        // socket however many are opened.
        let Some(descriptor) = descriptors.try_take() else {
            refuse_short_of_descriptors(stream, descriptors, &logs.over_cap);
            continue;
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let held = (slot, descriptor);
                tokio::spawn(serve_connection(stream, peer, held, shared.clone()));
            }
            Err(_) => refuse_over_cap(stream, cap, &logs.over_cap),
        }
    }

    gateway.close();
    let _ = std::fs::remove_file(&socket.path);
    drop(socket.listener);
    // Detached jobs end with the daemon (cancelled, their processes killed), each with its
    // result receipt, before the ledger closes.
    gateway
        .jobs()
        .stop_all(Duration::from_millis(config.shutdown_grace_ms))
        .await;
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    wait_for_unanswered(&unanswered, grace).await;
    // Desktops of agents' own end with the daemon, and everything that ran in them.
    gateway.end_desktops().await;
    tracing::info!("stopped");
    Ok(())
}

/// Waits, at most `grace`, for the calls in flight to finish and be answered; those left will
/// read interrupted in their receipts.
async fn wait_for_unanswered(unanswered: &Unanswered, grace: Duration) {
    let pending = unanswered.get();
    if pending == 0 {
        return;
    }
    tracing::info!(
        pending,
        "waiting for in-flight calls to finish and be answered"
    );
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

/// How often a repeated warning about the socket (refusals over the cap, failing accepts) is
/// logged at most: a flood must not turn into a flood of log lines.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// One rate limit per kind of refused connection: a hostile client repeating one refusal must not
/// drown the others, nor the log.
struct RefusalLogs {
    over_cap: RateLimitedLog,
    other_user: RateLimitedLog,
    nested: RateLimitedLog,
}

impl Default for RefusalLogs {
    fn default() -> Self {
        RefusalLogs {
            over_cap: RateLimitedLog::new(LOG_EVERY),
            other_user: RateLimitedLog::new(LOG_EVERY),
            nested: RateLimitedLog::new(LOG_EVERY),
        }
    }
}

/// The first pause after a failed accept, and the longest.
const ACCEPT_PAUSE_FIRST: Duration = Duration::from_millis(100);
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Pauses between failing accepts (100 ms doubling to 1 s) and their one log line.
pub struct AcceptBackoff {
    /// Which socket, for the log: `agent` or `control`.
    socket: &'static str,
    pause: Option<Duration>,
    failures: u64,
    log: RateLimitedLog,
}

impl AcceptBackoff {
    pub fn new(socket: &'static str) -> Self {
        AcceptBackoff {
            socket,
            pause: None,
            failures: 0,
            log: RateLimitedLog::new(LOG_EVERY),
        }
    }

    /// Records a failed accept; returns how long to pause before the next.
    pub fn failed(&mut self, err: &std::io::Error) -> Duration {
        self.failures += 1;
        if matches!(
            err.kind(),
            std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::Interrupted
        ) {
            // The one connection is gone; the next accept is unrelated.
            return Duration::ZERO;
        }
        let pause = self
            .pause
            .map_or(ACCEPT_PAUSE_FIRST, |p| (p * 2).min(ACCEPT_PAUSE_MAX));
        self.pause = Some(pause);
        if let Some(suppressed) = self.log.allow() {
            let hint = match err.raw_os_error() {
                Some(libc::EMFILE) => {
                    "out of file descriptors for this process: raise its limit (LimitNOFILE in the systemd unit, `ulimit -n`)"
                }
                Some(libc::ENFILE) => "out of file descriptors system-wide",
                _ => "retrying",
            };
            tracing::warn!(
                socket = self.socket,
                error = %err,
                hint,
                suppressed,
                "cannot accept connections; pausing up to 1 s between tries (logged at most once a minute)"
            );
        }
        pause
    }

    /// Records a successful accept, saying so once if accepts had been failing.
    pub fn succeeded(&mut self) {
        if self.pause.take().is_some() {
            tracing::info!(
                socket = self.socket,
                failed = self.failures,
                "accepting connections again"
            );
        }
        self.failures = 0;
    }
}

/// Lets a repeated log line through at most once per interval, counting what it held back.
pub struct RateLimitedLog {
    every: Duration,
    last: std::sync::Mutex<Option<std::time::Instant>>,
    suppressed: std::sync::atomic::AtomicU64,
}

impl RateLimitedLog {
    pub fn new(every: Duration) -> Self {
        RateLimitedLog {
            every,
            last: std::sync::Mutex::new(None),
            suppressed: Default::default(),
        }
    }

    /// `Some(lines held back since the last one)` when this line may be logged.
    pub fn allow(&self) -> Option<u64> {
        use std::sync::atomic::Ordering;
        let mut last = self.last.lock().unwrap();
        let now = std::time::Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < self.every) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(now);
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

/// The accepted stream as tokio's, whose halves shut down for real (the local-socket wrapper's
/// shutdown does nothing, so a client would never see the end of our answers).
fn tokio_stream(stream: Stream) -> UnixStream {
    match stream {
        Stream::UdSocket(stream) => UnixStream::from(stream),
    }
}

/// A peer as the kernel names it.
struct Peer {
    pid: Option<i32>,
}

/// The uid check runs before a single byte of the request is read: the socket's file mode is not
/// the guard, this is.
fn check_peer(stream: &UnixStream, our_uid: u32) -> Result<Peer, String> {
    let creds = stream
        .peer_cred()
        .map_err(|err| format!("peer credentials unreadable: {err}"))?;
    if creds.uid() != our_uid {
        return Err(format!(
            "peer uid {} (pid {:?}) is another user",
            creds.uid(),
            creds.pid()
        ));
    }
    Ok(Peer { pid: creds.pid() })
}

/// Closes a connection over the cap at once, telling the client why in one line if the socket
/// takes it without waiting.
fn refuse_over_cap(stream: UnixStream, cap: usize, log: &RateLimitedLog) {
    let message = format!(
        "the daemon is serving its limit of {cap} connections (server.max_connections); close one or retry later"
    );
    let line = json!({"jsonrpc": "2.0", "id": null,
                      "error": {"code": CLOSED_BY_LIMIT, "message": message}});
    let _ = stream.try_write(format!("{line}\n").as_bytes());
    if let Some(suppressed) = log.allow() {
        tracing::warn!(
            cap,
            suppressed,
            "refused a connection over server.max_connections (logged at most once a minute)"
        );
    }
}

/// Closes a connection the descriptor budget has no room for, telling the client why.
fn refuse_short_of_descriptors(
    stream: UnixStream,
    budget: &crate::guard::descriptors::Budget,
    log: &RateLimitedLog,
) {
    let message = format!(
        "the daemon holds its most connections ({} of its {} descriptors; the rest are kept for \
         its own work and the control socket); close one or retry later",
        budget.cap(),
        budget.limit
    );
    let line = json!({"jsonrpc": "2.0", "id": null,
                      "error": {"code": CLOSED_BY_LIMIT, "message": message}});
    let _ = stream.try_write(format!("{line}\n").as_bytes());
    if let Some(suppressed) = log.allow() {
        tracing::warn!(
            cap = budget.cap(),
            limit = budget.limit,
            suppressed,
            "refused a connection: the descriptor budget is spent (logged at most once a minute)"
        );
    }
}

/// Why a peer may not be served as an agent at all, beyond the uid: it descends from this daemon
/// (a surface started it, directly or not). Its calls would otherwise come back as a fresh agent
/// outside the scope and receipts of the call that started it. An unreadable ancestry refuses.
fn nested_call_refusal(peer_pid: Option<i32>, our_pid: i32) -> Option<NestedRefusal> {
    let unknown = |reason: String| NestedRefusal {
        known_nested: false,
        reason,
    };
    let Some(pid) = peer_pid else {
        return Some(unknown(
            "the peer's pid is unknown, so a call from inside a run cannot be ruled out".into(),
        ));
    };
    // The daemon's own process (a program that embeds the server, as benchmarks do) is not a
    // run: no surface starts a process with the daemon's pid.
    if pid == our_pid {
        return None;
    }
    match descends_from(pid, our_pid) {
        Ok(false) => None,
        Ok(true) => Some(NestedRefusal {
            known_nested: true,
            reason: format!(
                "pid {pid} descends from this daemon (a surface started it): calls from inside a run are not served; make the call from the agent itself"
            ),
        }),
        Err(err) => Some(unknown(format!(
            "cannot tell whether pid {pid} descends from this daemon ({err}), so it is refused"
        ))),
    }
}

struct NestedRefusal {
    /// True when the peer surely descends from the daemon; false when that could not be ruled out.
    known_nested: bool,
    reason: String,
}

/// What every connection's task shares.
struct Shared {
    gateway: Arc<Gateway>,
    our_uid: u32,
    our_pid: i32,
    limits: Limits,
    unanswered: Arc<Unanswered>,
    logs: RefusalLogs,
}

async fn serve_connection(
    stream: UnixStream,
    peer: Peer,
    _held: (OwnedSemaphorePermit, crate::guard::descriptors::Permit),
    shared: Arc<Shared>,
) {
    let Shared {
        gateway,
        our_uid,
        our_pid,
        limits,
        unanswered,
        logs,
    } = &*shared;
    let (gateway, our_uid, our_pid) = (gateway.clone(), *our_uid, *our_pid);
    // Fired once the client is gone (or its connection closed on it): every call still running
    // on it stops at once.
    let closed = tokio_util::sync::CancellationToken::new();
    let (mut transport, writer) =
        LineTransport::new(stream, *limits, unanswered.clone(), closed.clone());
    if let Some(refusal) = nested_call_refusal(peer.pid, our_pid) {
        let reason = &refusal.reason;
        if let Some(suppressed) = logs.nested.allow() {
            if refusal.known_nested {
                tracing::warn!(
                    peer_pid = ?peer.pid, %reason, suppressed,
                    "refused a connection from inside a run (logged at most once a minute)"
                );
            } else {
                tracing::warn!(
                    peer_pid = ?peer.pid, %reason, suppressed,
                    "refused a connection whose ancestry cannot be read (logged at most once a minute)"
                );
            }
        }
        transport.refuse(None, format!("refused: {reason}")).await;
        let _ = writer.await;
        return;
    }
    let (token, auth_id, observe_only) = match transport.first_line().await {
        Ok(FirstLine::Authenticate {
            token,
            observe_only,
            id,
        }) => (token, id, observe_only),
        Ok(FirstLine::Other) => (None, None, false),
        Err(()) => {
            drop(transport);
            let _ = writer.await;
            return;
        }
    };
    let (agent, surfaces) = match gateway.identify(token.as_deref()) {
        Ok(identity) => identity,
        Err(message) => {
            tracing::warn!(peer_pid = ?peer.pid, %message, "refused a connection with a bad token");
            transport
                .refuse(Some(auth_id.unwrap_or(Value::Null)), message)
                .await;
            let _ = writer.await;
            return;
        }
    };
    if let Some(id) = auth_id {
        transport.accept_authentication(id, &agent);
    }
    let caller = Caller {
        uid: our_uid,
        pid: peer.pid,
        agent,
        surfaces,
        observe_only,
    };
    tracing::debug!(pid = ?caller.pid, agent = %caller.agent, observe_only, "client connected");
    // Counted while the connection lasts: an agent's desktops may end with its last one.
    let _presence = gateway.desktop_presence(&caller.agent);
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
    // The connection is over: whatever still runs for it has nobody to answer.
    closed.cancel();
    let _ = writer.await;
}
