//! Terminal sessions of the shell surface: a program on a pty (`portable-pty`) that an agent
//! drives over several calls — `open`, `send` (text and named keys), `read` (new output since a
//! cursor, with bounded waits), `screen` (the terminal rendered as text by `vt100`), `resize`,
//! `close`, `list`.
//!
//! # Layout
//! - `commands/`: the commands, one file each (args, result fields, facts, run), listed once in
//!   its `TABLE`.
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

mod commands;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod pty;
mod term;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use computer_ipc::ToolError;
use portable_pty::MasterPty;
use secrecy::SecretString;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::kit::command_line::Line;
use crate::kit::contain::Containment;
use crate::kit::secrets::CallSecrets;
use crate::{CallContext, SurfaceError};
use commands::Gone;
pub use commands::{COMMANDS, is_session_command, result_fields};

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
    /// The desktop of an agent's own its programs start on, all they reach of any display.
    pub on_desktop: Option<crate::kit::contain::DesktopReach>,
    pub containment: Arc<Containment>,
    /// The environment every run gets before the call's own.
    pub base_env: BTreeMap<OsString, OsString>,
    /// The bound of `read`'s waits.
    pub max_wait: Duration,
}

/// How long a `send` may wait for the program to take its input.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
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

    /// What every command on the session does first when it runs: refuses a caller that is not
    /// its owner, lends the call its secrets (so the reply is masked with them) and marks it in
    /// use for as long as the guard lives.
    fn enter(self: &Arc<Self>, ctx: &CallContext) -> Result<InUse, SurfaceError> {
        self.check_owner(&ctx.agent).map_err(SurfaceError::Tool)?;
        self.lend_secrets(ctx);
        Ok(self.use_now())
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

/// The error for a session the caller does not have: one that never existed, another agent's
/// (open or closed), and one closed so long ago that it is forgotten all read the same.
fn not_yours(id: u32) -> ToolError {
    ToolError::invalid(format!(
        "no session {id} of yours; `shell list` shows your open sessions, `shell open` starts one"
    ))
    .at("args.session")
}
