//! Programmatic calls from a run: which commands a `shell run` given `complications.tools` may
//! call (the default set by risk, widened by config, cut to the agent's scope), and the run's
//! capability: a fresh token and a channel the run inherits as a descriptor, served for as long
//! as the run lives. Every call that comes through it is handed to the gateway's programmatic
//! caller (`Gateway::handle_via`): the same stages as any call, tagged `via` the run's receipt.
//!
//! Why an inherited descriptor rather than a socket path: a run's mount namespace is made once
//! per slot and reused, and hides the daemon's own directories; a path every run could see
//! would be reachable from other runs and from outside, and a path only this run could see
//! would need a mount per run. A descriptor reaches exactly the processes of the run that kept
//! it, and nothing in any file system leads to it; the token then binds each request to the
//! run it was minted for.
//!
//! What a run finds on its `PATH` and `PYTHONPATH` is the same for every run, so it is written
//! once, at start, into `run-tools` in the daemon's own state dir (`prepare_dir`): `computer`,
//! a link to this binary, and `computer_tools.py`, which asks the channel what the run may call
//! and defines a function for each. Containment hides the state dir from runs and binds this
//! one directory back, read-only: no run can change what another imports, and the daemon never
//! writes where a run could have put a link or a FIFO. Each run's channel holds at most
//! [`MAX_CONNECTIONS_PER_RUN`] connections, and every connection draws on the daemon's
//! descriptor budget (`descriptors.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use computer_ipc::tools::{ENV_FD, ENV_RUN, ENV_TOKEN, TOOLS_FD, ToolsOp, ToolsRequest};
use computer_ipc::{ErrorCode, SurfaceName, ToolError, ToolsAsk};
use computer_surfaces::kit::secrets::CallSecrets;
use computer_surfaces::{CommandSpec, OpenedTools, Registry, Risk, RunTools, SurfaceError};
use rmcp::model::CallToolResult;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::call::cancel::CallCancel;
use crate::guard::policy::Caller;

/// `[tools]`: what runs given tools may call beyond the default set.
///
/// ```toml
/// [tools]
/// allow = ["ax.act"]            # every agent's runs
/// [tools.agent.ci]
/// allow = ["gui.click"]         # the runs of agent `ci` only
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    pub allow: Vec<String>,
    pub agent: BTreeMap<String, AgentTools>,
}

/// `[tools.agent.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentTools {
    pub allow: Vec<String>,
}

/// Observe-risk commands left out of the default set: what they read is a terminal's screen
/// (a session of the agent's, where a person may type) or, with `reveal`, a secret's value.
/// Config may name them; `reveal` stays refused whatever it says (its risk is `secret`).
const NOT_BY_DEFAULT: &[&str] = &[
    "keychain.get",
    "shell.read",
    "shell.screen",
    "shell.list",
    "shell.close",
];

/// What decides which commands a run may call: the config, and the commands the daemon serves
/// itself on a surface (`job`), which no surface lists.
#[derive(Debug, Clone, Default)]
pub struct ToolRules {
    pub config: ToolsConfig,
    pub served: Vec<(SurfaceName, CommandSpec)>,
}

/// One command a run may call, as `computer tools` and the Python module show it.
#[derive(Debug, Clone)]
pub struct Callable {
    pub name: String,
    pub risk: Risk,
    /// The JSON Schema of its args.
    pub args: Value,
}

impl ToolRules {
    /// Every `surface.command` of this build (ready or not), with its spec.
    fn known(&self, registry: &Registry) -> Vec<(SurfaceName, CommandSpec)> {
        let mut known: Vec<(SurfaceName, CommandSpec)> = registry
            .all()
            .iter()
            .flat_map(|s| s.commands().iter().map(move |c| (s.name(), *c)))
            .collect();
        known.extend(
            self.served
                .iter()
                .filter(|(surface, _)| registry.get(*surface).is_some())
                .cloned(),
        );
        known
    }

    /// Names in the config that no surface of this build offers: an error naming the first,
    /// with the valid names.
    pub fn check(&self, registry: &Registry) -> Result<(), String> {
        let known: BTreeSet<String> = self
            .known(registry)
            .iter()
            .map(|(s, c)| format!("{s}.{}", c.name))
            .collect();
        let named = self.config.allow.iter().map(|n| ("tools.allow", n)).chain(
            self.config
                .agent
                .values()
                .flat_map(|a| a.allow.iter().map(|n| ("tools.agent.*.allow", n))),
        );
        for (key, name) in named {
            if !known.contains(name) {
                return Err(format!(
                    "{key}: unknown command `{name}`; valid: {}",
                    known.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    /// What a run given `ask` by `caller` may call: the default set (observe-risk commands but
    /// [`NOT_BY_DEFAULT`]) and what config widens it with, within the caller's scope. A name
    /// that is unknown, not callable from a run, or outside the scope is an error naming it
    /// and what would be valid.
    pub fn resolve(
        &self,
        registry: &Registry,
        caller: &Caller,
        ask: &ToolsAsk,
    ) -> Result<Vec<Callable>, ToolError> {
        let known = self.known(registry);
        let widened: BTreeSet<&String> = self
            .config
            .allow
            .iter()
            .chain(
                self.config
                    .agent
                    .get(&caller.agent)
                    .map(|a| a.allow.as_slice())
                    .unwrap_or_default(),
            )
            .collect();
        let permitted: Vec<Callable> = known
            .iter()
            .filter_map(|(surface, spec)| {
                let name = format!("{surface}.{}", spec.name);
                let by_default =
                    spec.risk == Risk::Observe && !NOT_BY_DEFAULT.contains(&name.as_str());
                (by_default || widened.contains(&name)).then(|| Callable {
                    name,
                    risk: spec.risk,
                    args: serde_json::to_value((spec.args)()).unwrap_or_default(),
                })
            })
            .collect();
        let in_scope = |name: &str| {
            let surface = name.split('.').next().unwrap_or_default();
            SurfaceName::parse(surface).is_some_and(|s| caller.may_use(s))
        };
        let names = match ask {
            ToolsAsk::Default(false) => return Ok(Vec::new()),
            ToolsAsk::Default(true) => {
                return Ok(permitted
                    .into_iter()
                    .filter(|c| in_scope(&c.name))
                    .collect());
            }
            ToolsAsk::Named(names) => names,
        };
        let callable_here: Vec<String> = permitted
            .iter()
            .filter(|c| in_scope(&c.name))
            .map(|c| c.name.clone())
            .collect();
        let mut chosen: Vec<Callable> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let at = format!("complications.tools[{i}]");
            if !known
                .iter()
                .any(|(s, c)| format!("{s}.{}", c.name) == *name)
            {
                let valid: Vec<String> = known
                    .iter()
                    .map(|(s, c)| format!("{s}.{}", c.name))
                    .collect();
                return Err(ToolError::invalid(format!(
                    "unknown command `{name}`; tools are named `surface.command`"
                ))
                .at(at)
                .valid(valid));
            }
            let Some(callable) = permitted.iter().find(|c| c.name == *name) else {
                return Err(ToolError::new(
                    ErrorCode::Denied,
                    format!(
                        "`{name}` is not callable from a run: runs call observe-risk commands, and \
                         others only where the operator's config names them (`[tools] allow`)"
                    ),
                )
                .at(at)
                .valid(callable_here));
            };
            if !in_scope(name) {
                return Err(ToolError::new(
                    ErrorCode::Denied,
                    format!(
                        "agent `{}` may not use the surface of `{name}`, so neither may its runs",
                        caller.agent
                    ),
                )
                .at(at)
                .valid(callable_here));
            }
            if !chosen.iter().any(|c| c.name == *name) {
                chosen.push(callable.clone());
            }
        }
        Ok(chosen)
    }
}

/// Sends one programmatic call through the gateway (for the run it was made for).
pub type CallThrough = Arc<
    dyn Fn(Map<String, Value>, CallCancel) -> Pin<Box<dyn Future<Output = CallToolResult> + Send>>
        + Send
        + Sync,
>;

/// The most one request line may hold.
const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// The most connections one run's channel holds at once; one more is refused with a line that
/// says so. A connection serves any number of calls in turn (the Python module keeps one).
pub const MAX_CONNECTIONS_PER_RUN: usize = 8;

/// What one run was given: its capability is minted when the run starts (`open`).
pub struct RunGrant {
    /// The run's receipt id (`via` on every call it makes).
    pub via: String,
    pub callable: Vec<Callable>,
    pub call: CallThrough,
    /// The run's own secrets: its calls' replies are masked with them too.
    pub secrets: Arc<CallSecrets>,
}

impl std::fmt::Debug for RunGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.callable.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("RunGrant")
            .field("via", &self.via)
            .field("callable", &names)
            .finish()
    }
}

/// How many of a run's calls ran, and how many were refused before they could.
#[derive(Debug, Default)]
struct Counts {
    allowed: AtomicU32,
    refused: AtomicU32,
}

impl RunTools for RunGrant {
    fn open(&self) -> Result<OpenedTools, SurfaceError> {
        let failed = |what: &str, err: std::io::Error| SurfaceError::Failed {
            message: format!("the run's tools could not be set up ({what}): {err}"),
        };
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|err| SurfaceError::Failed {
            message: format!("the run's tools could not be set up (a token): {err}"),
        })?;
        let token = format!("ctr_{}", hex::encode(bytes));
        let bin_dir = RUN_TOOLS_DIR
            .get()
            .cloned()
            .ok_or_else(|| SurfaceError::Failed {
                message: "the run's tools could not be set up: the daemon did not prepare its \
                          directory of tools at start"
                    .into(),
            })?;
        let (ours, theirs) = seqpacket_pair().map_err(|err| failed("its channel", err))?;
        // SAFETY: the AsyncFd owns the OwnedFd, which stays open and unchanged until it drops.
        let served = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(ours, tokio::io::Interest::READABLE)
        }
        .map_err(|err| failed("its channel", err.into()))?;
        let ended = CancellationToken::new();
        let counts = Arc::new(Counts::default());
        let list = json!({
            "callable": self.callable.iter().map(|c| json!({
                "name": c.name,
                "risk": c.risk.name(),
                "args": c.args,
            })).collect::<Vec<_>>(),
        });
        let channel = Channel {
            token: token.clone(),
            list,
            call: self.call.clone(),
            secrets: self.secrets.clone(),
            counts: counts.clone(),
            ended: ended.clone(),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS_PER_RUN)),
        };
        tokio::spawn(accept(Arc::new(channel), served));
        let closing = ended.clone();
        let via = self.via.clone();
        Ok(OpenedTools {
            channel: theirs,
            env: vec![
                (ENV_TOKEN.into(), token),
                (ENV_FD.into(), TOOLS_FD.to_string()),
                (ENV_RUN.into(), self.via.clone()),
            ],
            bin_dir,
            close: Box::new(move || {
                closing.cancel();
                let (allowed, refused) = (
                    counts.allowed.load(Ordering::Acquire),
                    counts.refused.load(Ordering::Acquire),
                );
                tracing::info!(%via, allowed, refused, "a run's tools closed");
                json!({"allowed": allowed, "refused": refused})
            }),
        })
    }
}

/// What every connection of one run's channel shares.
struct Channel {
    token: String,
    list: Value,
    call: CallThrough,
    secrets: Arc<CallSecrets>,
    counts: Arc<Counts>,
    /// Fires when the run ends: the channel and its connections close, calls in flight are
    /// cancelled.
    ended: CancellationToken,
    /// The run's share of connections ([`MAX_CONNECTIONS_PER_RUN`]).
    connections: Arc<Semaphore>,
}

/// Takes the connections the run sends over its channel until the run ends.
async fn accept(channel: Arc<Channel>, served: tokio::io::unix::AsyncFd<OwnedFd>) {
    loop {
        let mut ready = tokio::select! {
            _ = channel.ended.cancelled() => return,
            ready = served.readable() => match ready {
                Ok(ready) => ready,
                Err(_) => return,
            },
        };
        match ready.try_io(|fd| computer_ipc::tools::receive_connection(fd.as_raw_fd())) {
            Ok(Ok(Some(connection))) => match admit(&channel) {
                Ok(held) => {
                    tokio::spawn(serve(channel.clone(), connection, held));
                }
                Err(error) => refuse_connection(connection, error),
            },
            // Every process of the run closed its end.
            Ok(Ok(None)) => return,
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::InvalidData => {}
            Ok(Err(_)) => return,
            Err(_would_block) => {}
        }
    }
}

/// A connection's place: one of the run's own, and one of the daemon's descriptor budget.
type Held = (OwnedSemaphorePermit, crate::guard::descriptors::Permit);

/// Takes a place for one more connection of the run, or says why there is none.
fn admit(channel: &Channel) -> Result<Held, ToolError> {
    let Ok(own) = channel.connections.clone().try_acquire_owned() else {
        return Err(ToolError::new(
            ErrorCode::RateLimited,
            format!(
                "this run holds its most tools connections ({MAX_CONNECTIONS_PER_RUN}); close \
                 one (a connection serves any number of calls in turn) and connect again"
            ),
        ));
    };
    let budget = crate::guard::descriptors::budget();
    let Some(descriptor) = budget.try_take() else {
        return Err(ToolError::new(
            ErrorCode::Unavailable,
            format!(
                "the daemon holds its most connections ({} of its {} descriptors); retry later",
                budget.cap(),
                budget.limit
            ),
        ));
    };
    Ok((own, descriptor))
}

/// Tells a connection there is no room for it, in one line written without waiting, and
/// closes it: nothing of it is kept.
fn refuse_connection(connection: OwnedFd, error: ToolError) {
    use std::io::Write;
    let stream = std::os::unix::net::UnixStream::from(connection);
    if stream.set_nonblocking(true).is_ok() {
        let line = format!("{}\n", json!({"ok": false, "error": error}));
        let _ = (&stream).write(line.as_bytes());
    }
}

/// One connection: a request a line, a reply a line, until the client or the run ends.
async fn serve(channel: Arc<Channel>, connection: OwnedFd, _held: Held) {
    let stream = std::os::unix::net::UnixStream::from(connection);
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(stream) = tokio::net::UnixStream::from_std(stream) else {
        return;
    };
    let (read, mut write) = stream.into_split();
    let mut read = tokio::io::BufReader::new(read);
    loop {
        let mut line = Vec::new();
        let mut bounded = (&mut read).take(MAX_REQUEST_BYTES);
        let got = tokio::select! {
            _ = channel.ended.cancelled() => return,
            got = bounded.read_until(b'\n', &mut line) => got,
        };
        match got {
            Ok(0) | Err(_) => return,
            Ok(_) if !line.ends_with(b"\n") && line.len() as u64 >= MAX_REQUEST_BYTES => {
                let error = ToolError::invalid(format!(
                    "a request line holds at most {MAX_REQUEST_BYTES} bytes"
                ));
                let _ = reply(&mut write, &json!({"ok": false, "error": error})).await;
                return;
            }
            Ok(_) => {}
        }
        let answer = channel.answer(&line).await;
        if reply(&mut write, &answer).await.is_err() {
            return;
        }
    }
}

async fn reply(write: &mut tokio::net::unix::OwnedWriteHalf, value: &Value) -> std::io::Result<()> {
    let mut text = value.to_string();
    text.push('\n');
    write.write_all(text.as_bytes()).await
}

impl Channel {
    /// The reply to one request line.
    async fn answer(&self, line: &[u8]) -> Value {
        let refused = |error: ToolError| json!({"ok": false, "error": error});
        let request = match decode_request(line) {
            Ok(request) => request,
            Err(error) => return refused(error),
        };
        if !same_token(&request.token, &self.token) {
            tracing::warn!("a tools request with a token that is not this run's was refused");
            self.counts.refused.fetch_add(1, Ordering::AcqRel);
            return refused(ToolError::new(
                ErrorCode::Denied,
                "this token is not this run's: a run's token works only in the run it was minted for, and only while it lives",
            ));
        }
        match request.op {
            ToolsOp::List => self.list.clone(),
            ToolsOp::Call { arguments } => {
                let cancel = CallCancel {
                    request: CancellationToken::new(),
                    connection: self.ended.child_token(),
                };
                let mut result = (self.call)(arguments, cancel).await;
                let mut body = Value::Null;
                crate::record::secrets::mask_reply(&self.secrets, &mut result, &mut body);
                let structured = result.structured_content.unwrap_or(Value::Null);
                let counter = if was_refused(&structured) {
                    &self.counts.refused
                } else {
                    &self.counts.allowed
                };
                counter.fetch_add(1, Ordering::AcqRel);
                structured
            }
        }
    }
}

/// Reads one request line: a [`ToolsRequest`] with no field beyond those it names, or an
/// `invalid_call` error saying what was wrong and what to send.
pub fn decode_request(line: &[u8]) -> Result<ToolsRequest, ToolError> {
    serde_json::from_slice(line).map_err(|err| {
        ToolError::invalid(format!(
            "not a tools request: {err}; send {{\"token\": ..., \"op\": \"call\", \"arguments\": {{...}}}} or {{\"token\": ..., \"op\": \"list\"}}"
        ))
    })
}

/// Whether a call's reply says it was refused before it ran (rather than ran and failed).
fn was_refused(structured: &Value) -> bool {
    matches!(
        structured["error"]["code"].as_str(),
        Some("denied" | "invalid_call" | "rate_limited" | "unavailable" | "shutting_down")
    )
}

/// Compares tokens in time independent of where they differ.
fn same_token(given: &str, minted: &str) -> bool {
    let (given, minted) = (given.as_bytes(), minted.as_bytes());
    if given.len() != minted.len() {
        return false;
    }
    given
        .iter()
        .zip(minted)
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

/// A connected pair for a run's channel: the daemon's end (non-blocking) and the run's, both
/// close-on-exec (the run's end is inherited by a dup2 that clears the flag on the copy).
/// `SOCK_SEQPACKET` on Linux (one message, one connection); macOS has no seqpacket Unix
/// sockets, and a stream carries the same one-byte messages with their descriptors.
fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(target_os = "linux")]
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    #[cfg(not(target_os = "linux"))]
    let kind = libc::SOCK_STREAM;
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two new descriptors into the array we own.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours alone.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&ours, &theirs] {
        // SAFETY: fcntl on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(ours.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((ours, theirs))
}

/// The directory of tools every run given tools finds first on its `PATH` and `PYTHONPATH`,
/// once [`prepare_dir`] has written it.
static RUN_TOOLS_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Its name inside the daemon's state dir.
pub const RUN_TOOLS_DIR_NAME: &str = "run-tools";

/// Writes the runs' directory of tools afresh into the daemon's state dir (whatever a daemon
/// that was killed left there is removed first): `computer`, a link to this binary, and
/// `computer_tools.py`. Every entry is made relative to a descriptor of the directory this
/// opened itself, never through a link, never over something already there, and never by an
/// open that could wait on a FIFO. Directories `/tmp/computer-tools-*` of this user, where
/// earlier versions wrote each run's tools, are removed too. Returns the directory, which
/// containment shows to runs read-only.
pub fn prepare_dir(state_dir: &Path) -> std::io::Result<PathBuf> {
    let state = open_dir_at(libc::AT_FDCWD, state_dir)?;
    let dir = state_dir.join(RUN_TOOLS_DIR_NAME);
    match std::fs::symlink_metadata(&dir) {
        // std's removal opens every directory it descends into without following links.
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&dir)?,
        Ok(_) => std::fs::remove_file(&dir)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let name = c_path(Path::new(RUN_TOOLS_DIR_NAME))?;
    // SAFETY: mkdirat of a NUL-terminated name under a descriptor we own.
    if unsafe { libc::mkdirat(state.as_raw_fd(), name.as_ptr(), 0o700) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let tools = open_dir_at(state.as_raw_fd(), Path::new(RUN_TOOLS_DIR_NAME))?;
    let exe = c_path(&std::env::current_exe()?)?;
    // SAFETY: symlinkat of NUL-terminated strings under a descriptor we own.
    if unsafe { libc::symlinkat(exe.as_ptr(), tools.as_raw_fd(), c"computer".as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    write_new_file_at(&tools, c"computer_tools.py", python_module().as_bytes())?;
    remove_earlier_run_dirs();
    let _ = RUN_TOOLS_DIR.set(dir.clone());
    Ok(dir)
}

fn c_path(path: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} holds a NUL byte", path.display()),
        )
    })
}

/// Opens the directory `path` (relative to `at`), refusing a link in its last component.
fn open_dir_at(at: libc::c_int, path: &Path) -> std::io::Result<OwnedFd> {
    let path = c_path(path)?;
    // SAFETY: openat of a NUL-terminated path; the descriptor returned is ours.
    let fd = unsafe {
        libc::openat(
            at,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates `name` in `dir` as a new regular file holding `bytes`: `O_EXCL` (nothing there
/// already, a link or a FIFO included, is opened), `O_NOFOLLOW`, `O_NONBLOCK`.
fn write_new_file_at(dir: &OwnedFd, name: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    // SAFETY: openat of a NUL-terminated name under a descriptor we own.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOFOLLOW
                | libc::O_NONBLOCK
                | libc::O_CLOEXEC,
            0o400 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, ours alone.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    file.write_all(bytes)
}

/// Removes the directories `/tmp/computer-tools-*` of this user that earlier versions made per
/// run (a killed daemon left them behind). Only directories this user owns are removed, never
/// through a link.
fn remove_earlier_run_dirs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with("computer-tools-")
        {
            continue;
        }
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() && meta.uid() == uid => {
                if let Err(err) = std::fs::remove_dir_all(&path) {
                    tracing::warn!(path = %path.display(), error = %err, "cannot remove an earlier run's tools");
                }
            }
            _ => {}
        }
    }
}

/// The Python module every run given tools imports: what is importable is what is callable,
/// as the run's channel lists it when the module is imported.
pub fn python_module() -> String {
    format!(
        r#""""The tools this run may call, one function per command.

Each function takes the command's args as keyword arguments and returns the call's result (a
dict, as `computer call --json` prints it); a refused or failed call raises ToolError. Every call
goes through the daemon's policy, rate limit and receipts, like any other call; only what this
script prints reaches the model. The functions are those the run's channel lists on import.
"""

import json as _json
import os as _os
import socket as _socket


class ToolError(Exception):
    """A call that was refused or failed: `code`, `message`, `path`, `valid`, and the whole reply."""

    def __init__(self, reply):
        error = reply.get("error") or {{}}
        self.reply = reply
        self.code = error.get("code")
        self.message = error.get("message", "the call failed")
        self.path = error.get("path")
        self.valid = error.get("valid")
        super().__init__(f"{{self.code}}: {{self.message}}")


_connection = None


def _connect():
    global _connection
    if _connection is None:
        channel = _socket.socket(fileno=_os.dup(int(_os.environ.get("{ENV_FD}", "{TOOLS_FD}"))))
        ours, theirs = _socket.socketpair()
        _socket.send_fds(channel, [b"C"], [theirs.fileno()])
        theirs.close()
        channel.close()
        _connection = (ours, ours.makefile("rb"))
    return _connection


def _request(op, **fields):
    global _connection
    sock, reader = _connect()
    request = dict(token=_os.environ["{ENV_TOKEN}"], op=op, **fields)
    try:
        sock.sendall(_json.dumps(request).encode() + b"\n")
    except OSError:
        pass  # a refused connection was closed; its one line says why
    line = reader.readline()
    if not line:
        _connection = None
        raise ToolError({{"error": {{"code": "unavailable", "message": "the tools channel closed (the run is over)"}}}})
    reply = _json.loads(line)
    if (reply.get("error") or {{}}).get("code") in ("rate_limited", "unavailable"):
        # Perhaps the connection itself was refused (and closed): the next call connects anew.
        sock.close()
        _connection = None
    return reply


def call(surface, command, args=None, complications=None):
    """One call of the tool; returns its result, raises ToolError when it did not succeed."""
    arguments = {{"surface": surface, "command": command, "args": args or {{}}}}
    if complications:
        arguments["complications"] = complications
    reply = _request("call", arguments=arguments)
    if "error" in reply:
        raise ToolError(reply)
    return reply


def callable_commands():
    """The commands this run may call, with their args' schemas."""
    reply = _request("list")
    if "callable" not in reply:
        raise ToolError(reply)
    return reply["callable"]


def _args_doc(schema):
    properties = schema.get("properties") or {{}}
    if not properties:
        return "        (none)\n"
    required = schema.get("required") or []
    lines = []
    for name, prop in properties.items():
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = repr(kind)
        elif kind is None:
            kind = "one of " + _json.dumps(prop["enum"]) if "enum" in prop else "value"
        needed = ", required" if name in required else ""
        description = str(prop.get("description", "")).replace("\n", " ")
        lines.append(f"        {{name}} ({{kind}}{{needed}}): {{description}}\n")
    return "".join(lines)


def _define(command):
    surface, _, name = command["name"].partition(".")

    def function(**args):
        return call(surface, name, args)

    function.__name__ = function.__qualname__ = f"{{surface}}_{{name}}"
    function.__doc__ = f"`{{command['name']}}` ({{command['risk']}} risk).\n\n    Args:\n{{_args_doc(command.get('args') or {{}})}}"
    globals()[function.__name__] = function


if "{ENV_TOKEN}" in _os.environ:
    for _command in callable_commands():
        _define(_command)
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry::from_surfaces(vec![Arc::new(computer_surfaces::shell::ShellSurface::new(
            Default::default(),
        ))])
    }

    fn caller(agent: &str, surfaces: Option<Vec<SurfaceName>>) -> Caller {
        Caller {
            uid: 0,
            pid: None,
            agent: agent.into(),
            surfaces,
            observe_only: false,
        }
    }

    fn rules(allow: &[&str], agent: &[(&str, &[&str])]) -> ToolRules {
        ToolRules {
            config: ToolsConfig {
                allow: allow.iter().map(|s| s.to_string()).collect(),
                agent: agent
                    .iter()
                    .map(|(name, allow)| {
                        let allow = allow.iter().map(|s| s.to_string()).collect();
                        (name.to_string(), AgentTools { allow })
                    })
                    .collect(),
            },
            served: crate::call::own::served_commands(),
        }
    }

    fn names(callable: &[Callable]) -> Vec<&str> {
        callable.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn the_default_set_is_observe_risk_without_terminal_reads() {
        let registry = registry();
        let default = rules(&[], &[])
            .resolve(&registry, &caller("a", None), &ToolsAsk::Default(true))
            .unwrap();
        // The shell's observe commands read terminals; only the daemon's `job` is left.
        assert_eq!(names(&default), ["shell.job"]);
        let none = rules(&[], &[])
            .resolve(&registry, &caller("a", None), &ToolsAsk::Default(false))
            .unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn config_widens_by_name_globally_and_per_agent() {
        let registry = registry();
        let ask = ToolsAsk::Named(vec!["shell.run".into()]);
        let refused = rules(&[], &[("b", &["shell.run"])])
            .resolve(&registry, &caller("a", None), &ask)
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Denied);
        assert_eq!(refused.path.as_deref(), Some("complications.tools[0]"));
        assert_eq!(refused.valid, ["shell.job"]);
        let for_b = rules(&[], &[("b", &["shell.run"])])
            .resolve(&registry, &caller("b", None), &ask)
            .unwrap();
        assert_eq!(names(&for_b), ["shell.run"]);
        let for_all = rules(&["shell.run"], &[])
            .resolve(&registry, &caller("a", None), &ToolsAsk::Default(true))
            .unwrap();
        assert_eq!(names(&for_all), ["shell.run", "shell.job"]);
    }

    #[test]
    fn unknown_names_and_names_out_of_scope_are_refused_with_the_valid_ones() {
        let registry = registry();
        let unknown = rules(&[], &[])
            .resolve(
                &registry,
                &caller("a", None),
                &ToolsAsk::Named(vec!["shell.job".into(), "shell.nope".into()]),
            )
            .unwrap_err();
        assert_eq!(unknown.code, ErrorCode::InvalidCall);
        assert_eq!(unknown.path.as_deref(), Some("complications.tools[1]"));
        assert!(unknown.valid.contains(&"shell.run".to_string()));
        let scoped = caller("a", Some(vec![SurfaceName::Gui]));
        let out = rules(&[], &[])
            .resolve(
                &registry,
                &scoped,
                &ToolsAsk::Named(vec!["shell.job".into()]),
            )
            .unwrap_err();
        assert_eq!(out.code, ErrorCode::Denied);
        assert!(
            rules(&[], &[])
                .resolve(&registry, &scoped, &ToolsAsk::Default(true))
                .unwrap()
                .is_empty()
        );
        assert!(rules(&["shell.nope"], &[]).check(&registry).is_err());
        assert!(rules(&["shell.run"], &[]).check(&registry).is_ok());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("ctr_ab", "ctr_ab"));
        assert!(!same_token("ctr_ab", "ctr_ac"));
        assert!(!same_token("ctr_a", "ctr_ab"));
    }

    #[test]
    fn a_refusal_is_told_from_a_failure() {
        assert!(was_refused(
            &json!({"ok": false, "error": {"code": "denied"}})
        ));
        assert!(!was_refused(
            &json!({"ok": false, "error": {"code": "action_failed"}})
        ));
        assert!(!was_refused(&json!({"ok": true})));
    }
}
