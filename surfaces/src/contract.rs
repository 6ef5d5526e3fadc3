//! The contract between the daemon and every surface: the `Surface` and `PreparedAction`
//! traits, what a call hands a surface (`CallContext`) and what it gets back (`Outcome`,
//! `SurfaceError`), the facts of an action (`ActionFacts`) and the risk classes. It knows no
//! surface and not the registry that lists them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::kit::secrets;

pub use crate::kit::capture::{Artifact, ArtifactQuota, CapturedText};
pub use crate::kit::effect::{Effect, EffectReport};
/// The facts of an action are wire types: approvers in other processes read them.
pub use computer_ipc::facts::{ActionFacts, StdinFacts, TargetFacts, TargetKind, TerminalInput};

/// How much an action can change or reveal; the policy's defaults are keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads state without changing it.
    Observe,
    /// Changes something on the desktop or the file system.
    Act,
    /// Touches secrets.
    Secret,
}

impl Risk {
    /// The risk's name as receipts, approvers and replies spell it (its serialised form).
    pub fn name(self) -> &'static str {
        match self {
            Risk::Observe => "observe",
            Risk::Act => "act",
            Risk::Secret => "secret",
        }
    }
}

/// One command a surface offers, as the tool description teaches it.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    pub name: &'static str,
    /// The JSON Schema of the type `prepare` decodes the command's args into (with
    /// [`decode_args`]): the tool description is rendered from it, so the two cannot drift.
    /// Write it as `args_schema::<MyArgs>`; [`NoArgs`] for a command without args.
    pub args: fn() -> schemars::Schema,
    pub risk: Risk,
}

impl CommandSpec {
    /// A command whose args decode into `A`: `CommandSpec::of::<RunArgs>("run", Risk::Act)`.
    pub const fn of<A: schemars::JsonSchema>(name: &'static str, risk: Risk) -> CommandSpec {
        CommandSpec {
            name,
            args: args_schema::<A>,
            risk,
        }
    }
}

/// The JSON Schema of a command's args type, for [`CommandSpec::args`].
pub fn args_schema<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::SchemaGenerator::new(
        schemars::generate::SchemaSettings::draft2020_12().with(|s| {
            s.inline_subschemas = true;
        }),
    )
    .into_root_schema_for::<T>()
}

// The args of a command that takes none: `{}` and nothing else. (A doc comment here would be
// rendered into the tool description.)
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Complications every surface honours: the daemon applies them around any action.
pub const COMMON_COMPLICATIONS: &[&str] = &["timeout_ms", "evidence", "return"];

/// A surface's config section (`[shell]`, ...) that it does not accept, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("[{surface}] {key}: {message}")]
pub struct SectionError {
    pub surface: SurfaceName,
    /// The key at fault, as a dotted path inside the section (`max_timeout_ms`).
    pub key: String,
    pub message: String,
}

impl SectionError {
    /// Decodes `section` into a surface's settings type, naming the key of the first problem.
    pub fn decode<T: serde::de::DeserializeOwned>(
        surface: SurfaceName,
        section: &toml::Table,
    ) -> Result<T, SectionError> {
        serde_path_to_error::deserialize(toml::Value::Table(section.clone())).map_err(|err| {
            let key = err.path().to_string();
            SectionError {
                surface,
                key,
                message: err.into_inner().to_string(),
            }
        })
    }
}

/// Whether a surface can be used on this machine now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Availability {
    Ready,
    Unavailable { reason: String, fix: String },
}

/// What a surface needs to know about the call it runs, beyond the command itself.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The call's receipt id; artifacts are named after it.
    pub call_id: String,
    /// Where full outputs and other artifacts go.
    pub artifact_dir: PathBuf,
    /// Processes that gui and ax actions may not target.
    pub protected: Arc<ProtectedProcesses>,
    /// Fires when the call is cancelled (by its client, or because the client went away): a long
    /// action stops where it is and ends what it started.
    pub cancel: tokio_util::sync::CancellationToken,
    /// The room all artifacts share; every writer reserves before it writes.
    pub artifact_quota: Arc<ArtifactQuota>,
    /// Bytes of output the action has produced so far, counted as they arrive: a detached job's
    /// `status` reads it while the action runs.
    pub output_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The secrets this call resolved: a surface resolves references through it (only in
    /// `run`), and the daemon masks the call's outcome, receipt and log lines with it.
    pub secrets: Arc<secrets::CallSecrets>,
    /// The agent making the call (`default` without a token): what it starts that outlives the
    /// call (a terminal session) is its own.
    pub agent: String,
    /// Programmatic calls for this call's run, when the daemon gave it tools
    /// (`complications.tools` on `shell run`); `None` otherwise.
    pub tools: Option<Arc<dyn RunTools>>,
    /// For a call a run made through its tools channel: fires when that run ends. What the call
    /// starts that would outlive it (a terminal session) ends then too.
    pub run_ended: Option<tokio_util::sync::CancellationToken>,
    /// Login files the call names that the person said yes to: its run finds them writable,
    /// where every other run finds them read-only. Only the daemon sets it, after an approval.
    pub login_files_writable: Vec<std::path::PathBuf>,
}

/// A run's programmatic calls, as the daemon serves them: the shell surface opens the channel
/// when the run starts, hands the run its end, and closes it when the run has ended. What the
/// run may call, and how each call is decided and receipted, is the daemon's alone.
pub trait RunTools: Send + Sync + std::fmt::Debug {
    /// Mints the run's capability and opens its channel.
    fn open(&self) -> Result<OpenedTools, SurfaceError>;
}

/// A run's open channel.
pub struct OpenedTools {
    /// The run's end of its channel, inherited as [`computer_ipc::tools::TOOLS_FD`].
    pub channel: std::os::fd::OwnedFd,
    /// Variables the run gets (the capability, the descriptor's number).
    pub env: Vec<(String, String)>,
    /// A directory put first on the run's `PATH` and `PYTHONPATH` (the `computer` command and
    /// the generated `computer_tools` module).
    pub bin_dir: PathBuf,
    /// Closes the channel and revokes the capability; what the run's result receipt records of
    /// its calls (`{allowed, refused}`).
    pub close: Box<dyn FnOnce() -> Value + Send>,
}

/// Processes that agents' gui and ax actions may not target: the people's approvers, registered
/// for as long as they are connected to the control socket. Surfaces consult it right before they
/// act, so that an agent cannot click, type into or press its way through an approval prompt.
///
/// It also keeps the other side of that line: the terminals an agent's keys (or pointer) reached.
/// What runs in such a terminal runs as the person, outside containment, and may have been
/// started by the agent's keys; the control socket refuses answers from its processes.
#[derive(Debug, Default)]
pub struct ProtectedProcesses {
    /// pid → how many live registrations it holds (an approver may open several connections).
    pids: Mutex<HashMap<u32, usize>>,
    /// Terminal processes an agent's input reached, by pid, with their start times (a pid
    /// reused by a later process is not the terminal that was typed into).
    typed_into: Mutex<HashMap<u32, Option<u64>>>,
}

impl ProtectedProcesses {
    /// Protects `pids` until the returned guard is dropped.
    pub fn protect(self: &Arc<Self>, pids: Vec<u32>) -> Protection {
        let mut map = self.lock();
        for pid in &pids {
            *map.entry(*pid).or_default() += 1;
        }
        drop(map);
        Protection {
            set: self.clone(),
            pids,
        }
    }

    /// Whether no process is protected now (surfaces then skip their target checks).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.lock().contains_key(&pid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, usize>> {
        // The map stays consistent even if a holder panicked: every update is a single step.
        self.pids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that an agent's input is about to reach the terminal run by process `pid`. Kept
    /// for as long as that process lives: what the input started may answer much later (a
    /// background job, a function, an alias typed now and run by a person's keys later).
    pub fn typed_into(&self, pid: u32) {
        let started = process_start(pid);
        self.typed_into
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(pid, started);
    }

    /// The first of `pids` that is a terminal an agent's input reached, if any.
    pub fn typed_terminal_among(&self, pids: &[i32]) -> Option<u32> {
        let typed = self
            .typed_into
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        pids.iter()
            .filter_map(|pid| u32::try_from(*pid).ok())
            .find(|pid| {
                typed.get(pid).is_some_and(|started| {
                    // A start time that cannot be read now counts as the same process: the
                    // safe side.
                    started.is_none() || process_start(*pid).is_none_or(|now| Some(now) == *started)
                })
            })
    }
}

/// When process `pid` started (clock ticks after boot), where that can be read.
#[cfg(target_os = "linux")]
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last ')' do not.
    // The start time is the 22nd field, the 20th after the name.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn process_start(_pid: u32) -> Option<u64> {
    None
}

/// Keeps some pids protected while it lives.
#[derive(Debug)]
pub struct Protection {
    set: Arc<ProtectedProcesses>,
    pids: Vec<u32>,
}

impl Drop for Protection {
    fn drop(&mut self) {
        let mut map = self.set.lock();
        for pid in &self.pids {
            if let Some(count) = map.get_mut(pid) {
                *count -= 1;
                if *count == 0 {
                    map.remove(pid);
                }
            }
        }
    }
}

/// A failure while carrying out an action that had been validated.
#[derive(Debug, thiserror::Error)]
pub enum SurfaceError {
    #[error("{message}")]
    Failed { message: String },
    /// The action would have acted on a protected process (an approver): refused, not attempted.
    #[error("{message}")]
    Refused { message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// A check right before acting failed (the keys' window changed, the terminal's line moved
    /// on) and nothing was sent: reported as `action_failed`, and an act that reads back its
    /// effect says `effect: refused`.
    #[error("{message}")]
    NothingSent { message: String },
    /// A failure with its own error code (`no_match`, `ambiguous`, ...), path and choices, for
    /// the model to tell a miss from an action that failed.
    #[error("{0}")]
    Tool(ToolError),
}

impl SurfaceError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SurfaceError::Io {
            context: context.into(),
            source,
        }
    }
}

/// An image to put inline in the model-visible result (only when the caller asked for it with
/// `complications.return.image`).
#[derive(Debug, Clone)]
pub struct InlineImage {
    pub mime_type: String,
    pub bytes: Vec<u8>,
}

/// The result of an action, before the runtime applies the response budget. Clone: a detached
/// job keeps it to answer each `result` under that call's own budget.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// An image for the model, when asked for.
    pub inline_image: Option<InlineImage>,
    /// Whether the action did what was asked (a shell run exiting 0, for example).
    pub success: bool,
    /// Small model-visible fields, in order (`exit_code`, `timed_out`, ...).
    pub fields: Map<String, Value>,
    /// Text outputs, cut to the caller's budget by the runtime.
    pub texts: Vec<CapturedText>,
    /// Files written for this call, referenced from its receipt.
    pub artifacts: Vec<Artifact>,
    /// Facts for the result receipt only, never shown to the model (the containment a run
    /// had, for instance).
    pub receipt: Map<String, Value>,
}

/// The settle wait of evidence shots: the screen must stay unchanged this long, within the
/// bound. An act's read-back of its effect waits the same way (`effect`).
pub const SETTLE_QUIET: std::time::Duration = std::time::Duration::from_millis(100);
pub const SETTLE_BOUND: std::time::Duration = std::time::Duration::from_secs(2);
/// How often a settle wait without an event to wait on looks again.
pub const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(15);

/// A screenshot taken as evidence of an action's effect.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceShot {
    /// The image file, referenced from the receipt by sha256.
    pub artifact: Artifact,
    pub width: u32,
    pub height: u32,
    /// How long the screen took to stop changing (None when no settle wait was asked for).
    pub settle_ms: Option<u64>,
    /// The bound on the settle wait.
    pub settle_bound_ms: u64,
    /// False when the screen was still changing at the bound.
    pub settled: bool,
}

/// Captures proof of an action's effect for the `evidence` complication, on any surface.
#[async_trait]
pub trait EvidenceCapture: Send + Sync {
    /// Captures the screen into an artifact named after `ctx.call_id` and `label` ("before",
    /// "after"). With `settle`, first waits (bounded) until the screen stops changing.
    async fn capture(
        &self,
        ctx: &CallContext,
        label: &str,
        settle: bool,
    ) -> Result<EvidenceShot, SurfaceError>;
}

/// Longest string kept verbatim in receipt args; the args digest covers the full value.
pub const RECEIPT_STRING_LIMIT: usize = 4096;

/// A copy of `value` fit for a receipt: long strings are cut, saying how long they were.
pub fn receipt_value(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > RECEIPT_STRING_LIMIT => {
            let mut end = RECEIPT_STRING_LIMIT;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}…[{} bytes in all]", &s[..end], s.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(receipt_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), receipt_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A validated command, ready to run. Validation happens before any receipt is written, so that
/// an intent receipt always describes an action that can be attempted.
#[async_trait]
pub trait PreparedAction: Send {
    /// The action's risk class.
    fn risk(&self) -> Risk;
    /// What will happen, in plain words, for approvers and logs (never containing secrets).
    fn describe(&self) -> String;
    /// What the action will do, typed, for policy, approvers and receipts.
    fn facts(&self) -> ActionFacts;
    /// Refuses a caller the action's target is not for (a terminal session is its opener's),
    /// before policy or a person sees the call. The error must read exactly as the one for a
    /// target that does not exist, so that no agent learns of another's.
    fn check_caller(&self, _agent: &str) -> Result<(), ToolError> {
        Ok(())
    }
    /// Reads what the act's effect will be judged against, once the call is decided and while
    /// its intent receipt is written, so that the read adds no time of its own. Nothing is sent
    /// here; `run` reads for itself when this was not called. Only what reads back keeps more
    /// than the default.
    async fn look_before(&mut self) {}
    /// Runs the action.
    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError>;
}

/// A structured backend of the `COMPUTER` tool. Everything the daemon knows of a surface comes
/// through here: its commands and their args types, its facts, its config section, the
/// complications it honours, its backend and whether it needs a desktop session.
#[async_trait]
pub trait Surface: Send + Sync {
    fn name(&self) -> SurfaceName;
    /// The backend behind the surface on this machine, for logs.
    fn backend(&self) -> &'static str;
    fn commands(&self) -> &'static [CommandSpec];
    fn probe(&self) -> Availability;
    /// Whether the surface works only inside a desktop session (a display, the session bus):
    /// `computer doctor` then explains where a daemon started by an MCP host finds them.
    fn needs_desktop(&self) -> bool {
        false
    }
    /// The complications this surface honours (JSON names); a call with another is refused and
    /// the tool lists only those some ready surface honours.
    fn complications(&self) -> &'static [&'static str] {
        COMMON_COMPLICATIONS
    }
    /// Checks and takes this surface's config section (`[shell]`, `[gui]`, ...; empty when the
    /// file has none). Errors name the key. A surface without settings accepts only an empty one.
    fn configure(&self, section: &toml::Table) -> Result<(), SectionError> {
        match section.keys().next() {
            None => Ok(()),
            Some(key) => Err(SectionError {
                surface: self.name(),
                key: key.clone(),
                message: "unknown key: this surface takes no settings".into(),
            }),
        }
    }
    /// The fields a command's result may carry, as the tool description lists them and
    /// `complications.return.select` accepts them. A name ending in `?` is there only when it
    /// applies (a signal, a cut listing, output that is not empty); the others always are.
    fn result_fields(&self, command: &str) -> &'static [&'static str];
    /// Checks and types a command's args and complications. Errors name the field and the valid
    /// choices.
    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError>;
}

/// Decodes `args` into a command's typed args, naming the JSON path of the first problem.
pub fn decode_args<T: serde::de::DeserializeOwned>(
    args: &Map<String, Value>,
) -> Result<T, ToolError> {
    let value = Value::Object(args.clone());
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." {
            "args".to_string()
        } else {
            format!("args.{path}")
        };
        ToolError::from_serde(err.into_inner().to_string(), &path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_lasts_while_any_guard_lives() {
        let set = Arc::new(ProtectedProcesses::default());
        assert!(set.is_empty());
        let first = set.protect(vec![42, 7]);
        let second = set.protect(vec![42]);
        assert!(set.contains(42) && set.contains(7) && !set.contains(43));
        drop(first);
        assert!(
            set.contains(42),
            "a second connection still protects the pid"
        );
        assert!(!set.contains(7));
        drop(second);
        assert!(set.is_empty());
    }
}
