//! Terminal sessions of the shell surface: a program on a pty (`portable-pty`) that an agent
//! drives over several calls — `open`, `send` (text and named keys), `read` (new output since a
//! cursor, with bounded waits), `screen` (the terminal rendered as text by `vt100`), `resize`,
//! `close`, `list`.
//!
//! # Layout
//! - `term.rs`: the emulator, its answers to terminal queries, the plain-text output log, and
//!   the masking of secrets in the output.
//! - `keys.rs`: named keys as bytes, and what input does to a shell's command line.
//! - `pty.rs`: starting the program contained on a pty, and ending every process of a session.
//! - `fuzzing.rs` (feature `fuzzing`): the terminal, without its pty, for the fuzz targets.
//!
//! A session belongs to the agent that opened it; no other agent sees or drives it. Text sent to
//! a session that runs a shell is a command line, stated as `ActionFacts.terminal` exactly as
//! keys typed into a terminal window are, so policy decides it as the shell run it is.
//!
//! Secrets by reference: `open` puts `complications.secrets` into the program's environment and
//! `send` types `{"secret": "keychain://…"}` as input, each resolved only when the call runs. The
//! session keeps every value it was given, masks its log and screen with them, and lends them to
//! each later call on it, so replies, receipts and log lines of those calls are masked too.

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod pty;
mod term;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, ToolError};
use portable_pty::{MasterPty, PtySize};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::capture::CapturedText;
use crate::command_line::Line;
use crate::contain::{Containment, ExecSpec, RunLimits};
use crate::secret_store::SecretRef;
use crate::secrets::{CallSecrets, SecretDestination, SecretUse};
use crate::{
    ActionFacts, CallContext, CommandSpec, Effect, EffectReport, NoArgs, Outcome, PreparedAction,
    Risk, StdinFacts, SurfaceError, TerminalInput, decode_args, receipt_value,
};

/// The session commands, as the shell surface lists them.
pub const OPEN: CommandSpec = CommandSpec::of::<OpenArgs>("open", Risk::Act);
pub const SEND: CommandSpec = CommandSpec::of::<SendArgs>("send", Risk::Act);
pub const READ: CommandSpec = CommandSpec::of::<ReadArgs>("read", Risk::Observe);
pub const SCREEN: CommandSpec = CommandSpec::of::<SessionArgs>("screen", Risk::Observe);
pub const RESIZE: CommandSpec = CommandSpec::of::<ResizeArgs>("resize", Risk::Act);
// Closing ends only what the caller itself started; asking a person to let an agent stop its
// own work would only teach people to approve blindly.
pub const CLOSE: CommandSpec = CommandSpec::of::<SessionArgs>("close", Risk::Observe);
pub const LIST: CommandSpec = CommandSpec::of::<NoArgs>("list", Risk::Observe);

/// Whether `command` is a session command.
pub fn is_session_command(command: &str) -> bool {
    ["open", "send", "read", "screen", "resize", "close", "list"].contains(&command)
}

/// Field names each session command's result may carry, for `complications.return.select`.
pub fn result_fields(command: &str) -> &'static [&'static str] {
    match command {
        "open" => &["session", "program", "rows", "cols"],
        // `secret`: a secret was typed (its length is not told).
        "send" => &["sent_bytes?", "secret?", "effect", "effect_evidence"],
        // `?`: only when it applies (a wait, a dropped span, the program's end).
        "read" => &[
            "output?",
            "cursor",
            "dropped?",
            "met?",
            "timed_out?",
            "exited?",
            "exit_code?",
            "signal?",
        ],
        "screen" => &[
            "screen",
            "cursor",
            "rows",
            "cols",
            "alternate_screen?",
            "exited?",
        ],
        "resize" => &["rows", "cols"],
        "close" => &["closed", "killed_processes?"],
        "list" => &["sessions"],
        _ => &[],
    }
}

/// Limits of sessions, from the `[shell]` config section.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings {
    /// A session nobody used for this long is closed.
    pub idle: Duration,
    /// Open sessions at most, all agents together.
    pub max_sessions: usize,
    /// Open sessions at most for one agent, so that no agent can take every slot.
    pub max_sessions_per_agent: usize,
    /// Output bytes (plain text) each session keeps for `read`.
    pub log_bytes: usize,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            idle: Duration::from_secs(30 * 60),
            max_sessions: 16,
            max_sessions_per_agent: 8,
            log_bytes: 1024 * 1024,
        }
    }
}

/// What a session's start needs from the shell surface.
pub struct StartLimits {
    pub containment: Arc<Containment>,
    /// The environment every run gets before the call's own.
    pub base_env: BTreeMap<OsString, OsString>,
    /// The bound of `read`'s waits.
    pub max_wait: Duration,
}

/// The longest `read` waits without `complications.timeout_ms`.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Longest text one `send` takes.
const MAX_SEND_BYTES: usize = 64 * 1024;
/// How long a `send` may wait for the program to take its input.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// After the program ended, output still in the pty is read for at most this long.
const EXIT_DRAIN: Duration = Duration::from_millis(300);
/// Closed sessions remembered, so a command on one says why it is gone.
const REMEMBERED_CLOSED: usize = 64;
/// Programs whose input lines are shell command lines.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "tcsh", "csh", "yash", "busybox",
];

/// Every open session of this daemon.
#[derive(Default)]
pub struct Sessions {
    table: Mutex<Table>,
    next_id: AtomicU32,
    settings: RwLock<SessionSettings>,
}

#[derive(Default)]
struct Table {
    open: BTreeMap<u32, Arc<Session>>,
    /// Sessions being started, by id: their owners. They count against the caps from the
    /// moment they pass them, so that opens running side by side cannot pass them together.
    starting: BTreeMap<u32, String>,
    /// Recently closed sessions: whose they were, and why they are gone.
    closed: VecDeque<Closed>,
}

struct Closed {
    id: u32,
    owner: String,
    why: String,
}

impl Sessions {
    pub fn new(settings: SessionSettings) -> Arc<Sessions> {
        Arc::new(Sessions {
            settings: RwLock::new(settings),
            ..Sessions::default()
        })
    }

    pub fn configure(&self, settings: SessionSettings) {
        *self
            .settings
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = settings;
    }

    fn settings(&self) -> SessionSettings {
        *self
            .settings
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes a slot for a session of `agent` that is about to start, or says which cap is
    /// reached. The slot is given back when the reservation is dropped unless the session
    /// took it ([`Reservation::open`]).
    fn reserve(&self, agent: &str) -> Result<Reservation<'_>, SurfaceError> {
        let settings = self.settings();
        let mut table = self.table();
        let taken = table.open.len() + table.starting.len();
        let mine: Vec<String> = table
            .open
            .values()
            .filter(|s| s.owner == agent)
            .map(|s| s.id)
            .chain(
                table
                    .starting
                    .iter()
                    .filter(|(_, owner)| *owner == agent)
                    .map(|(id, _)| *id),
            )
            .map(|id| id.to_string())
            .collect();
        let yours = if mine.is_empty() {
            "none".to_string()
        } else {
            mine.join(", ")
        };
        if taken >= settings.max_sessions {
            return Err(SurfaceError::Failed {
                message: format!(
                    "{taken} sessions are open, this daemon's maximum (`[shell] max_sessions`); \
                     close one first (yours: {yours})"
                ),
            });
        }
        if mine.len() >= settings.max_sessions_per_agent {
            return Err(SurfaceError::Failed {
                message: format!(
                    "agent `{agent}` has {} sessions open, the most one agent may have \
                     (`[shell] max_sessions_per_agent` = {}; a person can raise it in the \
                     daemon's config); close one first (yours: {yours})",
                    mine.len(),
                    settings.max_sessions_per_agent
                ),
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        table.starting.insert(id, agent.to_string());
        Ok(Reservation { sessions: self, id })
    }

    /// The open session `id`, or what is known of it: for its owner, why it was closed.
    fn lookup(&self, id: u32) -> Result<Arc<Session>, Gone> {
        let table = self.table();
        if let Some(session) = table.open.get(&id) {
            return Ok(session.clone());
        }
        let closed = table
            .closed
            .iter()
            .find(|closed| closed.id == id)
            .map(|closed| (closed.owner.clone(), closed.why.clone()));
        Err(Gone { id, closed })
    }

    fn forget(&self, id: u32, why: String) -> Option<Arc<Session>> {
        let mut table = self.table();
        let session = table.open.remove(&id);
        if let Some(session) = &session {
            table.closed.push_back(Closed {
                id,
                owner: session.owner.clone(),
                why,
            });
            while table.closed.len() > REMEMBERED_CLOSED {
                table.closed.pop_front();
            }
        }
        session
    }

    /// Checks a session command's args into a prepared action.
    pub fn prepare(
        self: &Arc<Self>,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
        limits: StartLimits,
        cwd: Option<PathBuf>,
        sandbox: RunLimits,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        if command != "open" {
            let given = [
                ("cwd", complications.cwd.is_some()),
                ("env", !complications.env.is_empty()),
                ("sandbox", complications.sandbox.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, given)| *given) {
                return Err(ToolError::invalid(format!(
                    "complications.{name} applies where a program starts (`run`, `open`); a \
                     session keeps what it was opened with"
                ))
                .at(format!("complications.{name}")));
            }
        }
        let wait = match complications.timeout_ms {
            Some(ms) => Duration::from_millis(ms).min(limits.max_wait),
            None => DEFAULT_WAIT.min(limits.max_wait),
        };
        let sessions = self.clone();
        let action: Box<dyn PreparedAction> = match command {
            "open" => {
                let args: OpenArgs = decode_args(args)?;
                Box::new(prepare_open(
                    sessions,
                    args,
                    complications,
                    limits,
                    cwd,
                    sandbox,
                )?)
            }
            "send" => {
                // Checked first for an error that says what a secret looks like.
                if let Some(text) = args.get("text") {
                    crate::secrets::secret_in_place(text, "args.text")?;
                }
                let args: SendArgs = decode_args(args)?;
                check_send(&args)?;
                match self.lookup(args.session) {
                    Ok(session) => Box::new(prepare_send(session, args)),
                    Err(gone) => Box::new(gone),
                }
            }
            "read" => {
                let args: ReadArgs = decode_args(args)?;
                let until = match &args.until {
                    Some(pattern) => Some(regex::Regex::new(pattern).map_err(|err| {
                        ToolError::invalid(format!("`until` is not a valid regex: {err}"))
                            .at("args.until")
                    })?),
                    None => None,
                };
                match self.lookup(args.session) {
                    Ok(session) => Box::new(ReadOutput {
                        session,
                        args,
                        until,
                        wait,
                    }),
                    Err(gone) => Box::new(gone),
                }
            }
            "screen" | "close" => {
                let args: SessionArgs = decode_args(args)?;
                let session = match self.lookup(args.session) {
                    Ok(session) => session,
                    Err(gone) => return Ok(Box::new(gone)),
                };
                Box::new(Simple {
                    sessions,
                    command: if command == "screen" {
                        SimpleCommand::Screen
                    } else {
                        SimpleCommand::Close
                    },
                    session: Some(session),
                    args: json!({"session": args.session}),
                })
            }
            "resize" => {
                let args: ResizeArgs = decode_args(args)?;
                check_size(args.rows, args.cols)?;
                let session = match self.lookup(args.session) {
                    Ok(session) => session,
                    Err(gone) => return Ok(Box::new(gone)),
                };
                Box::new(Simple {
                    sessions,
                    command: SimpleCommand::Resize(args.rows, args.cols),
                    session: Some(session),
                    args: json!({"session": args.session, "rows": args.rows, "cols": args.cols}),
                })
            }
            "list" => {
                let _: NoArgs = decode_args(args)?;
                Box::new(Simple {
                    sessions,
                    command: SimpleCommand::List,
                    session: None,
                    args: json!({}),
                })
            }
            other => {
                return Err(
                    ToolError::invalid(format!("`{other}` is no session command")).at("command"),
                );
            }
        };
        Ok(action)
    }
}

fn check_size(rows: u16, cols: u16) -> Result<(), ToolError> {
    if !(2..=500).contains(&rows) {
        return Err(
            ToolError::invalid(format!("rows {rows} is out of range (2..=500)")).at("args.rows"),
        );
    }
    if !(10..=1000).contains(&cols) {
        return Err(
            ToolError::invalid(format!("cols {cols} is out of range (10..=1000)")).at("args.cols"),
        );
    }
    Ok(())
}

// `shell open`'s args. Doc comments here are the tool description's text (`schema.rs`).
/// cwd/env/secrets/sandbox as for run
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenArgs {
    /// none: a login shell
    #[serde(default)]
    argv: Option<Vec<String>>,
    /// =24
    #[serde(default = "default_rows")]
    rows: u16,
    /// =80
    #[serde(default = "default_cols")]
    cols: u16,
}

fn default_rows() -> u16 {
    24
}

fn default_cols() -> u16 {
    80
}

// `shell send`'s args.
/// text first, then keys
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    session: u32,
    // The type's doc is what the description says of this field (an untagged enum is its doc).
    #[serde(default)]
    text: Option<SendText>,
    /// Enter Tab Escape Backspace Up Down Left Right Home End PageUp PageDown Delete F1-F12 C-x M-x
    #[serde(default)]
    keys: Option<Vec<String>>,
}

/// as typed (\n=Enter), or {secret:"keychain://svc/acct"}: typed unseen
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SendText {
    Text(String),
    Secret { secret: String },
}

// `shell read`'s args.
/// new output; waits ≤ timeout_ms (=10000)
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    session: u32,
    /// =the last read's end
    #[serde(default)]
    cursor: Option<u64>,
    /// regex
    #[serde(default)]
    until: Option<String>,
    /// wait for the end
    #[serde(default)]
    exit: bool,
    /// wait for this much silence
    #[serde(default)]
    quiet_ms: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    session: u32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeArgs {
    session: u32,
    rows: u16,
    cols: u16,
}

/// One session: a program on a pty, its terminal, and whose it is.
struct Session {
    id: u32,
    owner: String,
    argv: Vec<String>,
    /// Whether its input lines are shell command lines.
    shell: bool,
    state: Mutex<State>,
    /// Bumped whenever output arrives, the output ends or the program ends.
    changed: watch::Sender<u64>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    master: Mutex<Box<dyn MasterPty + Send>>,
    process: pty::Process,
    last_used: Mutex<Instant>,
    /// Commands on the session now; an idle close waits for none.
    busy: AtomicUsize,
    closed: CancellationToken,
    /// The secrets the session was given, by name: its output, and every call on it, is
    /// masked with them; while the session lives, so are the daemon's log lines.
    secrets: CallSecrets,
}

struct State {
    term: term::Terminal,
    /// The pty reads ended: no process holds the terminal any more.
    eof: bool,
    /// The shell's command line, as far as followed, and its count of changes.
    line: Line,
    generation: u64,
    /// Answers of the emulator to the program's queries, already counted on `line` and not yet
    /// written: whoever writes next to the pty writes them first, so that the program's input
    /// gets bytes in the very order the line was followed in.
    answers: Vec<u8>,
    /// Where the last `read` ended.
    read_cursor: u64,
}

impl State {
    /// Queues the emulator's answers to the program's queries. They go into the program's
    /// input as if typed: a shell that reads them takes them onto its command line (`\e[0n`
    /// leaves `n` there), so the line followed is no longer known, and the next Return is
    /// never decided as the line the agent typed alone.
    fn take_answers(&mut self, answers: Vec<u8>, shell: bool) {
        if shell {
            self.line.make_opaque(format!(
                "the terminal answered a query of the program ({}) into its input, which the \
                 shell may read as typed",
                escape_answer(&answers)
            ));
            self.generation += 1;
        }
        self.answers.extend_from_slice(&answers);
    }
}

/// An answer's bytes as a person would spell them (`\e[0n`).
fn escape_answer(answer: &[u8]) -> String {
    answer
        .iter()
        .map(|&b| match b {
            0x1b => "\\e".to_string(),
            0x20..=0x7e => (b as char).to_string(),
            other => format!("\\x{other:02x}"),
        })
        .collect()
}

impl Session {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn exit(&self) -> Option<pty::Exit> {
        *self.process.exit.borrow()
    }

    /// Marks the session in use for as long as the guard lives.
    fn use_now(self: &Arc<Self>) -> InUse {
        self.busy.fetch_add(1, Ordering::SeqCst);
        *self
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
        InUse(self.clone())
    }

    /// Refuses a caller that is not the session's owner, in the words used for a session that
    /// does not exist: another agent's sessions are not its business.
    fn check_owner(&self, agent: &str) -> Result<(), ToolError> {
        if agent == self.owner {
            Ok(())
        } else {
            Err(not_yours(self.id))
        }
    }

    /// Writes `bytes` to the program, waiting at most [`SEND_TIMEOUT`] for it to take them. (The
    /// bytes may hold a secret: they are zeroed once written.)
    /// Writes `bytes` to the program, after the query answers still queued. `follow` moves the
    /// tracked line on (or refuses, and nothing is written) under the writer's lock, so that the
    /// line is followed in the order its bytes reach the program.
    async fn write(
        self: &Arc<Self>,
        bytes: zeroize::Zeroizing<Vec<u8>>,
        follow: impl FnOnce(&mut State) -> Result<(), SurfaceError> + Send + 'static,
    ) -> Result<(), SurfaceError> {
        let session = self.clone();
        let write = tokio::task::spawn_blocking(move || {
            let mut writer = session
                .writer
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let answers = {
                let mut state = session.state();
                follow(&mut state)?;
                std::mem::take(&mut state.answers)
            };
            writer
                .write_all(&answers)
                .and_then(|()| writer.write_all(&bytes))
                .and_then(|()| writer.flush())
                .map_err(|err| SurfaceError::io(format!("writing to session {}", session.id), err))
        });
        match tokio::time::timeout(SEND_TIMEOUT, write).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(err))) => Err(err),
            Ok(Err(err)) => Err(SurfaceError::Failed {
                message: format!("writing to session {} failed: {err}", self.id),
            }),
            Err(_) => Err(SurfaceError::Failed {
                message: format!(
                    "session {}'s program did not take the input within {} ms (it is not \
                     reading its terminal)",
                    self.id,
                    SEND_TIMEOUT.as_millis()
                ),
            }),
        }
    }

    fn describe_program(&self) -> String {
        self.argv.join(" ")
    }

    /// Registers the session's secrets with a call on it, so that the call's reply, receipt
    /// and log lines are masked with them as the session's output is.
    fn lend_secrets(&self, ctx: &CallContext) {
        ctx.secrets.adopt(&self.secrets);
    }

    /// Adds secrets to the session's, and masks its output with all of them from now on.
    fn hold_secrets(&self, added: impl IntoIterator<Item = (String, SecretString)>) {
        let before = self.secrets.masker();
        let added: Vec<(String, SecretString)> = added.into_iter().collect();
        self.secrets
            .register_all(added.iter().map(|(name, value)| (name.as_str(), value)));
        match self.secrets.masker() {
            // The same secret typed again adds nothing to mask.
            Some(masker) if !before.is_some_and(|b| Arc::ptr_eq(&b, &masker)) => {
                self.state().term.mask_with(masker);
            }
            _ => {}
        }
    }
}

struct InUse(Arc<Session>);

impl Drop for InUse {
    fn drop(&mut self) {
        *self
            .0
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A checked `shell open`.
struct Open {
    sessions: Arc<Sessions>,
    argv: Vec<String>,
    /// The login shell was asked for (no argv).
    login: bool,
    rows: u16,
    cols: u16,
    cwd: Option<PathBuf>,
    env: BTreeMap<String, String>,
    /// Variables whose values are secrets, resolved when the session starts.
    secrets: Vec<(String, SecretRef)>,
    limits: StartLimits,
    sandbox: RunLimits,
}

fn prepare_open(
    sessions: Arc<Sessions>,
    args: OpenArgs,
    complications: &Complications,
    limits: StartLimits,
    cwd: Option<PathBuf>,
    sandbox: RunLimits,
) -> Result<Open, ToolError> {
    check_size(args.rows, args.cols)?;
    let secrets = crate::secrets::env_secrets(complications)?;
    let (argv, login) = match args.argv {
        Some(argv) => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(ToolError::invalid("argv must name a program").at("args.argv"));
            }
            if let Some(i) = argv.iter().position(|w| w.contains('\0')) {
                return Err(ToolError::invalid("arguments cannot contain NUL bytes")
                    .at(format!("args.argv[{i}]")));
            }
            (argv, false)
        }
        None => (vec![login_shell(&limits.base_env), "-l".into()], true),
    };
    Ok(Open {
        sessions,
        argv,
        login,
        rows: args.rows,
        cols: args.cols,
        cwd,
        env: complications.env.clone(),
        secrets,
        limits,
        sandbox,
    })
}

/// The person's shell: `$SHELL` of the environment runs get, else bash, else sh.
fn login_shell(env: &BTreeMap<OsString, OsString>) -> String {
    env.get(&OsString::from("SHELL"))
        .and_then(|s| s.to_str())
        .filter(|s| s.starts_with('/') && std::path::Path::new(s).exists())
        .map(str::to_string)
        .unwrap_or_else(|| {
            if std::path::Path::new("/bin/bash").exists() {
                "/bin/bash".into()
            } else {
                "/bin/sh".into()
            }
        })
}

#[async_trait]
impl PreparedAction for Open {
    fn risk(&self) -> Risk {
        if self.secrets.is_empty() {
            Risk::Act
        } else {
            Risk::Secret
        }
    }

    fn describe(&self) -> String {
        let what = if self.login {
            format!(
                "open a terminal session with a login shell ({})",
                self.argv[0]
            )
        } else {
            format!("open a terminal session running {:?}", self.argv)
        };
        match &self.cwd {
            Some(cwd) => format!("{what} in {}", cwd.display()),
            None => what,
        }
    }

    fn facts(&self) -> ActionFacts {
        // A shell's input is the terminal, whose every line is decided when it is sent: at
        // open, it has read nothing yet.
        let found = crate::script::argv_commands(&self.argv, Some(""));
        ActionFacts {
            programs: found.programs,
            argv: Some(self.argv.clone()),
            opaque: found.opaque,
            env: self.env.clone(),
            script_env: found.assigned,
            cwd: self.cwd.clone(),
            words: found.words,
            args: Some(json!({
                "argv": receipt_value(&json!(self.argv)),
                "rows": self.rows,
                "cols": self.cols,
            })),
            secrets: crate::secrets::env_uses(&self.secrets),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let settings = self.sessions.settings();
        let reservation = self.sessions.reserve(&ctx.agent)?;
        let id = reservation.id;
        let mut env = self.limits.base_env.clone();
        env.insert("TERM".into(), "xterm-256color".into());
        // What an agent types into a shell, a secret at a prompt included, stays out of the
        // person's shell history (bash and zsh save none without a HISTFILE), unless `env`
        // names one.
        env.insert("HISTFILE".into(), "".into());
        for (key, value) in &self.env {
            env.insert(key.into(), value.into());
        }
        // Resolved only now, after policy and approval; the session masks its output with them
        // from its first byte on.
        let mut resolved = Vec::new();
        for (name, reference) in &self.secrets {
            let value = ctx.secrets.resolve_blocking(name, reference).await?;
            env.insert(name.into(), value.expose_secret().to_string().into());
            resolved.push((name.clone(), value));
        }
        let path_var = env
            .get(&OsString::from("PATH"))
            .and_then(|p| p.to_str())
            .unwrap_or_default()
            .to_string();
        let program = crate::spawn::resolve_program(&self.argv[0], &path_var).ok_or_else(|| {
            SurfaceError::Failed {
                message: format!(
                    "command not found: `{}` (not an existing path, nor on PATH={path_var})",
                    self.argv[0]
                ),
            }
        })?;
        let mut exec = ExecSpec {
            program,
            argv: self.argv.iter().map(OsString::from).collect(),
            env: env.into_iter().collect(),
        };
        let cwd = crate::one_shot::start_dir(self.cwd.as_deref());
        let size = PtySize {
            rows: self.rows,
            cols: self.cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        let marker = format!("{}-{id}", ctx.call_id);
        let spawned = pty::spawn(
            &self.limits.containment,
            &self.sandbox,
            &exec,
            &cwd,
            size,
            &marker,
        );
        crate::spawn::zero_secret_env(&mut exec, self.secrets.iter().map(|(name, _)| name));
        let spawned = spawned?;
        let (changed, _) = watch::channel(0u64);
        let program_name = crate::script::file_name(&self.argv[0]).trim_start_matches('-');
        let session = Arc::new(Session {
            id,
            owner: ctx.agent.clone(),
            argv: self.argv.clone(),
            shell: SHELLS.contains(&program_name),
            state: Mutex::new(State {
                term: term::Terminal::new(self.rows, self.cols, settings.log_bytes),
                eof: false,
                line: Line::default(),
                answers: Vec::new(),
                generation: 0,
                read_cursor: 0,
            }),
            changed,
            writer: Arc::new(Mutex::new(spawned.writer)),
            master: Mutex::new(spawned.master),
            process: spawned.process,
            last_used: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            closed: CancellationToken::new(),
            secrets: CallSecrets::default(),
        });
        // Before the reader starts: no byte of output is logged unmasked.
        session.hold_secrets(resolved);
        start_reader(&session, spawned.reader);
        watch_exit(&session);
        reservation.open(session.clone());
        watch_idle(&self.sessions, &session);
        if let Some(run_ended) = &ctx.run_ended {
            watch_run(&self.sessions, &session, run_ended.clone());
        }

        let mut fields = Map::new();
        fields.insert("session".into(), json!(id));
        fields.insert("program".into(), json!(self.argv));
        fields.insert("rows".into(), json!(self.rows));
        fields.insert("cols".into(), json!(self.cols));
        let mut receipt = Map::new();
        receipt.insert("session".into(), json!(id));
        receipt.insert(
            "containment".into(),
            json!(self.limits.containment.status()),
        );
        Ok(Outcome {
            success: true,
            fields,
            receipt,
            ..Outcome::default()
        })
    }
}

/// A session slot taken by an `open` that has not started its session yet.
struct Reservation<'a> {
    sessions: &'a Sessions,
    id: u32,
}

impl Reservation<'_> {
    /// The session started: it holds the slot now.
    fn open(self, session: Arc<Session>) {
        let mut table = self.sessions.table();
        table.starting.remove(&self.id);
        table.open.insert(self.id, session);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        // After `open` this finds nothing; otherwise the start failed and the slot is free.
        self.sessions.table().starting.remove(&self.id);
    }
}

/// Reads the pty on a thread of its own (portable-pty's reader blocks): feeds the terminal,
/// writes its query answers back, and wakes whoever waits for output.
fn start_reader(session: &Arc<Session>, mut reader: Box<dyn Read + Send>) {
    let weak = Arc::downgrade(session);
    let writer = session.writer.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("session-{}-read", session.id))
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                // A read error is how a pty says its last terminal-side holder is gone (EIO).
                let read = reader.read(&mut buf).unwrap_or(0);
                let Some(session) = weak.upgrade() else {
                    return;
                };
                if read == 0 {
                    let mut state = session.state();
                    state.term.finish();
                    state.eof = true;
                    drop(state);
                    session.changed.send_modify(|n| *n += 1);
                    return;
                }
                let answered = {
                    let mut state = session.state();
                    let answers = state.term.feed(&buf[..read]);
                    let answered = !answers.is_empty();
                    if answered {
                        state.take_answers(answers, session.shell);
                    }
                    answered
                };
                if answered {
                    // Written by whoever holds the writer first: this thread, or a send that
                    // came in between (which writes them ahead of its own bytes).
                    let mut writer = writer
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    let answers = std::mem::take(&mut session.state().answers);
                    let _ = writer.write_all(&answers).and_then(|()| writer.flush());
                }
                session.changed.send_modify(|n| *n += 1);
            }
        });
    if let Err(err) = spawned {
        tracing::error!(error = %err, "no thread to read a session's pty");
    }
}

/// Wakes waiters when the program ends.
fn watch_exit(session: &Arc<Session>) {
    let weak = Arc::downgrade(session);
    let mut exit = session.process.exit.clone();
    tokio::spawn(async move {
        let _ = exit.wait_for(Option::is_some).await;
        if let Some(session) = weak.upgrade() {
            session.changed.send_modify(|n| *n += 1);
        }
    });
}

/// Closes the session once nobody used it for the configured idle time.
fn watch_idle(sessions: &Arc<Sessions>, session: &Arc<Session>) {
    let sessions = Arc::downgrade(sessions);
    let session = session.clone();
    tokio::spawn(async move {
        loop {
            let Some(table) = sessions.upgrade() else {
                return;
            };
            let idle = table.settings().idle;
            drop(table);
            let last = *session
                .last_used
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let deadline = tokio::time::Instant::from_std(last + idle);
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = session.closed.cancelled() => return,
            }
            let last = *session
                .last_used
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if last.elapsed() < idle || session.busy.load(Ordering::SeqCst) > 0 {
                continue;
            }
            let Some(table) = sessions.upgrade() else {
                return;
            };
            let why = format!("closed after {} ms without use", idle.as_millis());
            if table.forget(session.id, why).is_some() {
                session.closed.cancel();
                let killed = session.process.stop().await;
                tracing::info!(session = session.id, killed, "idle session closed");
            }
            return;
        }
    });
}

/// Closes a session a run opened (through its tools channel) when that run ends: nothing a run
/// starts outlives it, a session included.
fn watch_run(sessions: &Arc<Sessions>, session: &Arc<Session>, run_ended: CancellationToken) {
    let sessions = Arc::downgrade(sessions);
    let session = session.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = run_ended.cancelled() => {}
            _ = session.closed.cancelled() => return,
        }
        let Some(table) = sessions.upgrade() else {
            return;
        };
        let why = "closed when the run that opened it ended".to_string();
        if table.forget(session.id, why).is_some() {
            session.closed.cancel();
            let killed = session.process.stop().await;
            tracing::info!(
                session = session.id,
                killed,
                "a run's session closed with the run"
            );
        }
    });
}

/// A checked `shell send`: the bytes, and for a shell, the lines they end.
struct SendInput {
    session: Arc<Session>,
    /// The text's bytes then the keys'; with a secret, the keys' alone (the value goes first
    /// when the call runs).
    bytes: Vec<u8>,
    text: Option<String>,
    secret: Option<SecretRef>,
    keys: Vec<String>,
    /// The shell's line this send was decided on, and what it does to it.
    generation: u64,
    effect: Option<crate::command_line::Effect>,
}

/// Checks what a send's args say on their own, before its session is looked up: whether a
/// session exists never changes which error bad args get.
fn check_send(args: &SendArgs) -> Result<(), ToolError> {
    let text = match &args.text {
        Some(SendText::Text(text)) => text.as_str(),
        Some(SendText::Secret { secret }) => {
            crate::secrets::parse_reference(secret, "args.text.secret")?;
            "-"
        }
        None => "",
    };
    let keys = args.keys.as_deref().unwrap_or_default();
    if text.is_empty() && keys.is_empty() {
        return Err(ToolError::invalid("send needs text or keys")
            .at("args")
            .valid(["text", "keys"]));
    }
    if text.len() > MAX_SEND_BYTES {
        return Err(ToolError::invalid(format!(
            "text of {} bytes is over the {MAX_SEND_BYTES} bytes one send takes",
            text.len()
        ))
        .at("args.text"));
    }
    for (i, key) in keys.iter().enumerate() {
        if keys::key_bytes(key, false).is_none() {
            return Err(ToolError::invalid(format!(
                "`{key}` is not a key name; valid: {}",
                keys::KEY_NAMES
            ))
            .at(format!("args.keys[{i}]")));
        }
    }
    Ok(())
}

/// A send whose args [`check_send`] passed, on its session.
fn prepare_send(session: Arc<Session>, args: SendArgs) -> SendInput {
    let keys = args.keys.unwrap_or_default();
    let (text, secret) = match args.text {
        None => (None, None),
        Some(SendText::Text(text)) => (Some(text), None),
        // Parsed by `check_send` already.
        Some(SendText::Secret { secret }) => (None, SecretRef::parse(&secret).ok()),
    };
    let mut bytes = text.clone().unwrap_or_default().into_bytes();
    let state = session.state();
    let application_cursor = state.term.screen().application_cursor();
    for key in &keys {
        // Named by `check_send`: every one has its bytes.
        bytes.extend(keys::key_bytes(key, application_cursor).unwrap_or_default());
    }
    let effect = session.shell.then(|| {
        let mut line = state.line.clone();
        if secret.is_some() {
            // The value is known only when the call runs and must never land in facts or
            // receipts: the line goes on, opaque. (A value with a line break is refused when
            // typed, so the secret itself ends no line.)
            line.opaque.get_or_insert_with(|| {
                "a secret was typed into it, and its characters are not followed".into()
            });
        }
        keys::input_effect(&line, &bytes)
    });
    let generation = state.generation;
    drop(state);
    SendInput {
        session,
        bytes,
        text,
        secret,
        keys,
        generation,
        effect,
    }
}

impl SendInput {
    fn input_text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

#[async_trait]
impl PreparedAction for SendInput {
    fn risk(&self) -> Risk {
        if self.secret.is_some() {
            Risk::Secret
        } else {
            Risk::Act
        }
    }

    fn describe(&self) -> String {
        let sent = match (&self.secret, self.keys.is_empty()) {
            (Some(_), true) => "a stored secret".to_string(),
            (Some(_), false) => format!("a stored secret, then the keys {:?},", self.keys),
            (None, _) => format!("{:?}", self.input_text()),
        };
        let mut what = format!(
            "send {sent} to terminal session {} ({})",
            self.session.id,
            self.session.describe_program()
        );
        if let Some(effect) = &self.effect {
            let lines: Vec<String> = effect
                .completed
                .iter()
                .map(|l| match &l.opaque {
                    None => format!("{:?}", l.text),
                    Some(why) => format!("{:?} (not known exactly: {why})", l.text),
                })
                .collect();
            if !lines.is_empty() {
                what.push_str(&format!(", running the shell line(s) {}", lines.join(", ")));
            }
        }
        what
    }

    fn facts(&self) -> ActionFacts {
        let text = self.input_text();
        let sent_text = match &self.secret {
            Some(reference) => json!({"secret": reference.uri()}),
            None => json!(self.text.as_ref().map(|t| receipt_value(&json!(t)))),
        };
        let args = Some(json!({
            "session": self.session.id,
            "text": sent_text,
            "keys": self.keys,
        }));
        let secrets: Vec<SecretUse> = self
            .secret
            .iter()
            .map(|reference| SecretUse {
                name: crate::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: SecretDestination::SessionInput {
                    session: self.session.id,
                    program: self.session.describe_program(),
                    shell: self.session.shell,
                },
            })
            .collect();
        // The input as far as it is known: never the secret's value, which nobody knows yet.
        let stdin = self.secret.is_none().then(|| StdinFacts::of(&text));
        match &self.effect {
            // A shell's lines: decided as the shell run they are, as keys typed into a
            // terminal window are (policy's shell-in-disguise rule).
            Some(effect) => {
                let terminal = (!effect.completed.is_empty()).then(|| {
                    let lines: Vec<String> =
                        effect.completed.iter().map(|l| l.text.clone()).collect();
                    let opaque = effect.completed.iter().find_map(|l| l.opaque.clone());
                    let script = lines.join("\n");
                    let found = crate::script::script_commands(&script);
                    TerminalInput {
                        app: Some(format!("session {}", self.session.id)),
                        window: None,
                        lines,
                        opaque: opaque.clone(),
                        run: Box::new(ActionFacts {
                            programs: found.programs,
                            opaque: opaque
                                .map(|why| {
                                    format!("the session's line is not known exactly: {why}")
                                })
                                .or(found.opaque),
                            script: Some(script),
                            script_env: found.assigned,
                            words: found.words,
                            ..ActionFacts::default()
                        }),
                    }
                });
                ActionFacts {
                    stdin,
                    terminal,
                    args,
                    secrets,
                    ..ActionFacts::default()
                }
            }
            // Any other program: the input is its standard input, decided as a run of the
            // session's program with that input.
            None => {
                let found = crate::script::argv_commands(&self.session.argv, Some(&text));
                let opaque = match &self.secret {
                    // What the program makes of a value nobody has seen is not known.
                    Some(_) => {
                        Some("a stored secret is typed as the program's input, unseen".to_string())
                    }
                    None => found.opaque,
                };
                ActionFacts {
                    programs: found.programs,
                    argv: Some(self.session.argv.clone()),
                    opaque,
                    script_env: found.assigned,
                    stdin,
                    words: found.words,
                    args,
                    secrets,
                    ..ActionFacts::default()
                }
            }
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        self.session
            .check_owner(&ctx.agent)
            .map_err(SurfaceError::Tool)?;
        self.session.lend_secrets(&ctx);
        let _in_use = self.session.use_now();
        if self.session.closed.is_cancelled() {
            return Err(SurfaceError::Failed {
                message: format!("session {} was closed", self.session.id),
            });
        }
        // Resolved only now, after policy and approval, and held by the session (masking its
        // output) before a byte of it is written.
        let mut input = zeroize::Zeroizing::new(Vec::new());
        if let Some(reference) = &self.secret {
            let value = ctx
                .secrets
                .resolve_blocking(crate::secrets::IN_PLACE, reference)
                .await?;
            crate::secrets::check_typed_secret(value.expose_secret(), MAX_SEND_BYTES)?;
            input.extend_from_slice(value.expose_secret().as_bytes());
            self.session
                .hold_secrets([(crate::secrets::IN_PLACE.to_string(), value)]);
        }
        input.extend_from_slice(&self.bytes);
        // The line is checked and moved on as the bytes go, under the state lock, so that two
        // sends decided on the same line cannot both go through, and a query answer the
        // emulator gave meanwhile is not missed.
        let (id, decided) = (self.session.id, self.generation);
        let effect = self.effect;
        let sent = input.len();
        // What the input is read back against: the screen before it, and every change after.
        let mut changes = self.session.changed.subscribe();
        let screen_before = self.session.state().term.screen_text();
        self.session
            .write(input, move |state| {
                let Some(effect) = effect else {
                    return Ok(());
                };
                if state.generation != decided {
                    return Err(SurfaceError::Refused {
                        message: format!(
                            "session {id}'s command line changed since this send was decided \
                             (another send went first, or the terminal answered a query of the \
                             program into its input); read the screen and send again"
                        ),
                    });
                }
                state.line = effect.after;
                state.generation += 1;
                Ok(())
            })
            .await?;
        let mut fields = Map::new();
        match self.secret {
            // Neither the value nor its length: the model learns that it was typed.
            Some(_) => fields.insert("secret".into(), json!("typed")),
            None => fields.insert("sent_bytes".into(), json!(sent)),
        };
        let mut outcome = Outcome {
            success: true,
            fields,
            ..Outcome::default()
        };
        screen_read_back(&self.session, &screen_before, &mut changes)
            .await
            .record(&mut outcome);
        Ok(outcome)
    }
}

/// Whether a send took effect: the session's screen changed after the input (an echo, the
/// program's answer) = confirmed; no change once its output has been quiet for the settle
/// wait = suspected_noop. Woken by each change of the session, never polled.
async fn screen_read_back(
    session: &Session,
    before: &str,
    changes: &mut watch::Receiver<u64>,
) -> EffectReport {
    let started = tokio::time::Instant::now();
    let bound = started + crate::effect::READ_BACK_BOUND;
    let mut quiet_until = started + crate::effect::READ_BACK_QUIET;
    loop {
        if session.state().term.screen_text() != before {
            return EffectReport::new(
                Effect::Confirmed,
                format!(
                    "session {}'s screen changed within {} ms of the input",
                    session.id,
                    started.elapsed().as_millis()
                ),
            );
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                quiet_until = (tokio::time::Instant::now() + crate::effect::READ_BACK_QUIET)
                    .min(bound);
            }
            _ = tokio::time::sleep_until(quiet_until) => break,
        }
    }
    EffectReport::new(
        Effect::SuspectedNoop,
        format!(
            "session {}'s screen did not change within {} ms of the input",
            session.id,
            started.elapsed().as_millis()
        ),
    )
}

/// The error for a session the caller does not have: one that never existed, another agent's
/// (open or closed), and one closed so long ago that it is forgotten all read the same.
fn not_yours(id: u32) -> ToolError {
    ToolError::invalid(format!(
        "no session {id} of yours; `shell list` shows your open sessions, `shell open` starts one"
    ))
    .at("args.session")
}

/// A command on a session that is not open. The caller learns why only if the session was its
/// own.
struct Gone {
    id: u32,
    /// Whose it was and why it closed, if it closed recently.
    closed: Option<(String, String)>,
}

impl Gone {
    fn error(&self, agent: &str) -> ToolError {
        match &self.closed {
            Some((owner, why)) if owner == agent => ToolError::invalid(format!(
                "session {} is closed: {why}; `shell open` starts a new one",
                self.id
            ))
            .at("args.session"),
            _ => not_yours(self.id),
        }
    }
}

#[async_trait]
impl PreparedAction for Gone {
    fn risk(&self) -> Risk {
        Risk::Observe
    }

    fn describe(&self) -> String {
        format!(
            "a command on terminal session {}, which is not open",
            self.id
        )
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({"session": self.id})),
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        Err(self.error(agent))
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        Err(SurfaceError::Tool(self.error(&ctx.agent)))
    }
}

/// A checked `shell read`.
struct ReadOutput {
    session: Arc<Session>,
    args: ReadArgs,
    until: Option<regex::Regex>,
    wait: Duration,
}

#[async_trait]
impl PreparedAction for ReadOutput {
    fn risk(&self) -> Risk {
        Risk::Observe
    }

    fn describe(&self) -> String {
        format!("read the output of terminal session {}", self.session.id)
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({
                "session": self.args.session,
                "cursor": self.args.cursor,
                "until": self.args.until,
                "exit": self.args.exit,
                "quiet_ms": self.args.quiet_ms,
            })),
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let session = &self.session;
        session
            .check_owner(&ctx.agent)
            .map_err(SurfaceError::Tool)?;
        session.lend_secrets(&ctx);
        let _in_use = session.use_now();
        let cursor = match self.args.cursor {
            Some(cursor) => cursor,
            None => session.state().read_cursor,
        };
        let end = session.state().term.log().end();
        if cursor > end {
            return Err(SurfaceError::Failed {
                message: format!(
                    "cursor {cursor} is past the end of session {}'s output ({end}); use a \
                     cursor a read returned",
                    session.id
                ),
            });
        }
        let waits = self.until.is_some() || self.args.exit || self.args.quiet_ms.is_some();
        let deadline = tokio::time::Instant::now() + self.wait;
        let quiet = self.args.quiet_ms.map(Duration::from_millis);
        let mut changes = session.changed.subscribe();
        let mut last_change = tokio::time::Instant::now();
        let mut exited_at: Option<tokio::time::Instant> = None;
        let met = loop {
            let (matched, eof, exited) = {
                let state = session.state();
                let since = state.term.log().since(cursor);
                let matched = self
                    .until
                    .as_ref()
                    .map(|re| re.is_match(&String::from_utf8_lossy(&since.text)));
                (matched, state.eof, session.exit().is_some())
            };
            if exited && exited_at.is_none() {
                exited_at = Some(tokio::time::Instant::now());
            }
            let now = tokio::time::Instant::now();
            // The program's end counts once its output is read to the end (or after a short
            // drain, when something it left keeps the terminal open).
            let ended = exited && (eof || exited_at.is_some_and(|at| now >= at + EXIT_DRAIN));
            let quiet_met = quiet.is_some_and(|q| now >= last_change + q);
            let met = !waits
                || matched == Some(true)
                || (self.args.exit && ended)
                || quiet_met
                // Nothing more can come: an unmet regex or quiet wait ends with the program.
                || (ended && eof);
            if met {
                break !waits || matched == Some(true) || (self.args.exit && ended) || quiet_met;
            }
            if now >= deadline {
                break false;
            }
            let mut next = deadline;
            if let Some(q) = quiet {
                next = next.min(last_change + q);
            }
            if let Some(at) = exited_at {
                next = next.min(at + EXIT_DRAIN);
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        break false;
                    }
                    last_change = tokio::time::Instant::now();
                }
                _ = tokio::time::sleep_until(next) => {}
                _ = ctx.cancel.cancelled() => {
                    return Err(SurfaceError::Failed { message: "cancelled while waiting".into() });
                }
            }
        };
        let since = {
            let mut state = session.state();
            let since = state.term.log().since(cursor);
            state.read_cursor = since.end;
            since
        };
        let mut fields = Map::new();
        fields.insert("cursor".into(), json!(since.end));
        if since.dropped > 0 {
            fields.insert("dropped".into(), json!(since.dropped));
        }
        if waits {
            fields.insert("met".into(), json!(met));
            if !met && tokio::time::Instant::now() >= deadline {
                fields.insert("timed_out".into(), json!(true));
            }
        }
        insert_exit(&mut fields, session.exit());
        Ok(Outcome {
            success: met,
            fields,
            texts: vec![CapturedText::from_bytes("output", since.text)],
            ..Outcome::default()
        })
    }
}

fn insert_exit(fields: &mut Map<String, Value>, exit: Option<pty::Exit>) {
    if let Some(exit) = exit {
        fields.insert("exited".into(), json!(true));
        if let Some(code) = exit.code {
            fields.insert("exit_code".into(), json!(code));
        }
        if let Some(signal) = exit.signal {
            fields.insert("signal".into(), json!(signal));
        }
    }
}

enum SimpleCommand {
    Screen,
    Resize(u16, u16),
    Close,
    List,
}

/// `screen`, `resize`, `close` and `list`: one step each.
struct Simple {
    sessions: Arc<Sessions>,
    command: SimpleCommand,
    session: Option<Arc<Session>>,
    args: Value,
}

#[async_trait]
impl PreparedAction for Simple {
    fn risk(&self) -> Risk {
        match self.command {
            SimpleCommand::Resize(..) => Risk::Act,
            _ => Risk::Observe,
        }
    }

    fn describe(&self) -> String {
        let id = self.session.as_ref().map(|s| s.id).unwrap_or_default();
        match self.command {
            SimpleCommand::Screen => format!("read the screen of terminal session {id}"),
            SimpleCommand::Resize(rows, cols) => {
                format!("resize terminal session {id} to {rows}x{cols}")
            }
            SimpleCommand::Close => format!("close terminal session {id}, ending its processes"),
            SimpleCommand::List => "list this agent's terminal sessions".into(),
        }
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(self.args.clone()),
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        match &self.session {
            Some(session) => session.check_owner(agent),
            None => Ok(()),
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let mut fields = Map::new();
        let mut texts = Vec::new();
        if let Some(session) = &self.session {
            session
                .check_owner(&ctx.agent)
                .map_err(SurfaceError::Tool)?;
            session.lend_secrets(&ctx);
        }
        match (self.command, self.session) {
            (SimpleCommand::Screen, Some(session)) => {
                let _in_use = session.use_now();
                let state = session.state();
                let screen = state.term.screen();
                let (row, col) = screen.cursor_position();
                let (rows, cols) = screen.size();
                fields.insert("cursor".into(), json!({"row": row, "col": col}));
                fields.insert("rows".into(), json!(rows.get()));
                fields.insert("cols".into(), json!(cols.get()));
                if screen.alternate_screen() {
                    fields.insert("alternate_screen".into(), json!(true));
                }
                texts.push(CapturedText::from_bytes(
                    "screen",
                    state.term.screen_text().into_bytes(),
                ));
                drop(state);
                insert_exit(&mut fields, session.exit());
            }
            (SimpleCommand::Resize(rows, cols), Some(session)) => {
                let _in_use = session.use_now();
                session
                    .master
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .resize(PtySize {
                        rows,
                        cols,
                        pixel_width: 0,
                        pixel_height: 0,
                    })
                    .map_err(|err| SurfaceError::Failed {
                        message: format!("resizing session {}: {err}", session.id),
                    })?;
                session.state().term.resize(rows, cols);
                fields.insert("rows".into(), json!(rows));
                fields.insert("cols".into(), json!(cols));
            }
            (SimpleCommand::Close, Some(session)) => {
                let why = format!("closed by `shell close` (call {})", ctx.call_id);
                if self.sessions.forget(session.id, why).is_none() {
                    return Err(SurfaceError::Failed {
                        message: format!("session {} was closed already", session.id),
                    });
                }
                session.closed.cancel();
                let killed = session.process.stop().await;
                fields.insert("closed".into(), json!(session.id));
                fields.insert("killed_processes".into(), json!(killed));
            }
            (SimpleCommand::List, _) => {
                let mine: Vec<Arc<Session>> = self
                    .sessions
                    .table()
                    .open
                    .values()
                    .filter(|s| s.owner == ctx.agent)
                    .cloned()
                    .collect();
                let listed: Vec<Value> = mine
                    .iter()
                    .map(|s| {
                        let idle_ms = s
                            .last_used
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .elapsed()
                            .as_millis() as u64;
                        let (rows, cols) = s.state().term.screen().size();
                        let mut entry = json!({
                            "session": s.id,
                            "program": s.argv,
                            "rows": rows.get(),
                            "cols": cols.get(),
                            "idle_ms": idle_ms,
                        });
                        if let Some(exit) = s.exit() {
                            entry["exited"] = json!(true);
                            if let Some(code) = exit.code {
                                entry["exit_code"] = json!(code);
                            }
                        }
                        entry
                    })
                    .collect();
                fields.insert("sessions".into(), json!(listed));
            }
            (_, None) => {
                return Err(SurfaceError::Failed {
                    message: "no session named".into(),
                });
            }
        }
        Ok(Outcome {
            success: true,
            fields,
            texts,
            ..Outcome::default()
        })
    }
}
