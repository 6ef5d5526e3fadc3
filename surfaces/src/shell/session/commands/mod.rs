//! The terminal session commands, one type per command and one file each: its args, the fields
//! its result may carry, the check of its args into the action ready to run
//! ([`Command::prepare`]) and the action itself (its facts and its run, as a
//! [`PreparedAction`]). [`TABLE`] below is the only place the commands are listed, and each
//! names itself once (`Command::NAME`): the table makes the specs the shell surface offers, the
//! fields of each result, and the dispatch of a call by its name.

mod close;
mod list;
mod open;
mod read;
mod resize;
mod screen;
mod send;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use computer_ipc::{Complications, ToolError};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{Session, Sessions, StartLimits, not_yours, pty};
use crate::kit::contain::RunLimits;
use crate::kit::one_shot::run_limits;
use crate::kit::run_env::checked_cwd_and_env;
use crate::{
    ActionFacts, CallContext, CommandSpec, Outcome, PreparedAction, Risk, SurfaceError, decode_args,
};
use close::Close;
use list::List;
use open::Open;
use read::ReadOutput;
use resize::Resize;
use screen::Screen;
use send::SendInput;

/// Every session command, by name, in the order the shell surface offers them.
const TABLE: &[Entry] = &[
    Entry::of::<Open>(),
    Entry::of::<SendInput>(),
    Entry::of::<ReadOutput>(),
    Entry::of::<Screen>(),
    Entry::of::<Resize>(),
    Entry::of::<Close>(),
    Entry::of::<List>(),
];

/// One session command, implemented by the action a checked call of it is.
trait Command: PreparedAction + Sized + 'static {
    /// How a call names it (`"command": "open"`).
    const NAME: &'static str;
    /// The risk its spec declares; the action may raise it (a secret makes it
    /// [`Risk::Secret`]).
    const RISK: Risk;
    /// Field names its result may carry; `?`: only when it applies (a wait, a dropped span,
    /// the program's end).
    const FIELDS: &'static [&'static str];
    /// Whether it starts a program: only then do `complications.cwd`, `env` and `sandbox`
    /// apply (a session keeps what it was opened with).
    const STARTS_A_PROGRAM: bool = false;
    /// Its args, decoded with [`decode_args`]; their JSON Schema is its part of the tool's help.
    type Args: DeserializeOwned + schemars::JsonSchema;

    /// Checks the args as they came, before they are decoded, for an error that says more than
    /// the decoder's.
    fn check_raw(_args: &Map<String, Value>) -> Result<(), ToolError> {
        Ok(())
    }

    /// Checks the args into the action; a session the args name that is not open gives
    /// [`Gone`] instead, which answers the caller when it runs.
    fn prepare(args: Self::Args, call: Preparing<'_>)
    -> Result<Box<dyn PreparedAction>, ToolError>;
}

/// What checking a command's args may use beyond them.
struct Preparing<'a> {
    sessions: Arc<Sessions>,
    complications: &'a Complications,
    limits: StartLimits,
    /// The checked `complications.cwd` of a command that starts a program.
    cwd: Option<PathBuf>,
    /// The checked `complications.sandbox` of a command that starts a program.
    sandbox: RunLimits,
    /// How long a `read` may wait: `complications.timeout_ms`, bounded by the surface's limit.
    wait: Duration,
}

/// A call checked into the action ready to run, or why it is refused.
type Checked = Result<Box<dyn PreparedAction>, ToolError>;

/// A command as the table holds it: its spec, its result fields and its args check.
struct Entry {
    spec: CommandSpec,
    fields: &'static [&'static str],
    starts_a_program: bool,
    prepare: fn(&Map<String, Value>, Preparing<'_>) -> Checked,
}

impl Entry {
    const fn of<C: Command>() -> Entry {
        Entry {
            spec: CommandSpec::of::<C::Args>(C::NAME, C::RISK),
            fields: C::FIELDS,
            starts_a_program: C::STARTS_A_PROGRAM,
            prepare: decode_and_prepare::<C>,
        }
    }
}

fn decode_and_prepare<C: Command>(
    args: &Map<String, Value>,
    call: Preparing<'_>,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    C::check_raw(args)?;
    let args: C::Args = decode_args(args)?;
    C::prepare(args, call)
}

/// The specs of [`TABLE`], as the shell surface lists them after `run`.
pub const COMMANDS: [CommandSpec; TABLE.len()] = {
    let mut specs = [TABLE[0].spec; TABLE.len()];
    let mut i = 1;
    while i < TABLE.len() {
        specs[i] = TABLE[i].spec;
        i += 1;
    }
    specs
};

/// Whether `command` is a session command.
pub fn is_session_command(command: &str) -> bool {
    TABLE.iter().any(|entry| entry.spec.name == command)
}

/// Field names each session command's result may carry, for `complications.return.select`.
pub fn result_fields(command: &str) -> &'static [&'static str] {
    TABLE
        .iter()
        .find(|entry| entry.spec.name == command)
        .map_or(&[], |entry| entry.fields)
}

impl Sessions {
    /// Checks a session command's args into a prepared action.
    pub fn prepare(
        self: &Arc<Self>,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
        limits: StartLimits,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let Some(entry) = TABLE.iter().find(|entry| entry.spec.name == command) else {
            return Err(
                ToolError::invalid(format!("`{command}` is no session command")).at("command"),
            );
        };
        let (cwd, sandbox) = if entry.starts_a_program {
            (
                checked_cwd_and_env(complications)?,
                RunLimits {
                    desktop: limits.on_desktop.clone(),
                    ..run_limits(complications)?
                },
            )
        } else {
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
            (None, RunLimits::default())
        };
        let wait = match complications.timeout_ms {
            Some(ms) => Duration::from_millis(ms).min(limits.max_wait),
            None => DEFAULT_WAIT.min(limits.max_wait),
        };
        let call = Preparing {
            sessions: self.clone(),
            complications,
            limits,
            cwd,
            sandbox,
            wait,
        };
        (entry.prepare)(args, call)
    }
}

/// The facts of a command whose only arg is its session.
fn session_facts(id: u32) -> ActionFacts {
    ActionFacts {
        args: Some(json!({"session": id})),
        ..ActionFacts::default()
    }
}

impl Preparing<'_> {
    /// The open session `id`, or [`Gone`] for a command on one that is not.
    fn session(&self, id: u32) -> Result<Arc<Session>, Gone> {
        self.sessions.lookup(id)
    }
}

/// The longest `read` waits without `complications.timeout_ms`.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);

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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    session: u32,
}

/// A command on a session that is not open. The caller learns why only if the session was its
/// own.
pub(super) struct Gone {
    pub(super) id: u32,
    /// Whose it was and why it closed, if it closed recently.
    pub(super) closed: Option<(String, String)>,
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
