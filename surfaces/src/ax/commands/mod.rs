//! The ax commands, one type per command and one file each: its args, the fields its result may
//! carry, the check of its args into the command ready to run ([`Command::prepare`]) and what it
//! does ([`Command::run`]). The list in `ax_commands!` below is the only place the commands are
//! listed, and each names itself once (`Command::NAME`): the list makes the table the surface
//! offers and dispatches calls by name from ([`prepare`]), and the [`Job`] a checked call is,
//! which dispatches the run by type.

mod act;
mod apps;
mod find;
mod focused;
mod read;
mod tree;
mod wait;

use std::time::{Duration, Instant};

use computer_ipc::{Complications, ToolError};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::call::{AppArg, Target};
use super::lookup::Ax;
use super::seen::AxSnapshot;
use crate::accessibility::backend::{Backend, Dialect, Failure};
use crate::kit::snapshot::Seen;
use crate::{CommandSpec, Outcome, ProtectedProcesses, Risk, TargetFacts, TargetKind, decode_args};

pub use act::Act;
pub use apps::Apps;
pub use find::Find;
pub use focused::Focused;
pub use read::Read;
pub use tree::Tree;
pub use wait::Wait;

/// The overall deadline of a call when `complications.timeout_ms` does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// A page's byte budget when `complications.return.max_bytes` does not say.
const DEFAULT_MAX_BYTES: usize = 4000;

/// One ax command, implemented by the command checked and ready to run.
pub trait Command: Sized + Into<Job> {
    /// How a call names it (`"command": "tree"`).
    const NAME: &'static str;
    const RISK: Risk;
    /// Field names its result may carry; `?`: only when it applies (see
    /// `Surface::result_fields`).
    const FIELDS: &'static [&'static str];
    /// Whether the refs it shows become a snapshot an act can name (`complications.seen`).
    const OBSERVES: bool = false;
    /// Its args, decoded with [`decode_args`]; their JSON Schema is its part of the tool's help.
    type Args: DeserializeOwned + schemars::JsonSchema;

    /// Checks the args into the command.
    fn prepare(args: Self::Args, call: &mut Preparing<'_>) -> Result<Self, ToolError>;

    /// What the call will do, in words, for receipts and approval prompts.
    fn describe(&self) -> String;

    /// The app the args name, if any.
    fn app(&self) -> Option<&AppArg> {
        None
    }

    /// The window the args name, if any (`tree`).
    fn window(&self) -> Option<&Target> {
        None
    }

    /// The element the command reads or acts on, as the args name it.
    fn element(&self) -> Option<&Target> {
        None
    }

    /// Does it, once the backend is ready.
    fn run<B: Backend>(
        self,
        ax: &Ax<B>,
        call: &Running<'_>,
    ) -> impl Future<Output = Result<Outcome, Failure>> + Send;
}

/// What checking a command's args may use beyond them.
pub struct Preparing<'a> {
    pub dialect: &'a Dialect,
    /// The caller's byte budget for one page of a listing.
    pub max_bytes: usize,
    /// The call's overall deadline as `complications.timeout_ms` sets it; `wait` sets it when
    /// it is not given, so that the wait fits inside.
    pub timeout: Option<Duration>,
}

/// What a command runs with beside itself.
pub struct Running<'a> {
    pub deadline: Instant,
    /// The approvers' processes, which no act may touch.
    pub protected: &'a ProtectedProcesses,
    /// The observation an act is bound to (`complications.seen`).
    pub seen: Option<&'a Seen<AxSnapshot>>,
    /// The keyboard `set_value` types with into a field that takes text only from keys, and
    /// the call it types for; `None` where this daemon has no gui keyboard.
    pub keys: Option<Typing<'a>>,
}

/// The gui keyboard, lent to one call.
pub struct Typing<'a> {
    pub keyboard: &'a crate::ax::keyboard::Keyboard,
    pub ctx: &'a crate::CallContext,
}

/// A command as the table holds it: its spec, its result fields and its args check.
pub struct Entry {
    pub spec: CommandSpec,
    pub fields: &'static [&'static str],
    prepare: fn(&Map<String, Value>, &mut Preparing<'_>) -> Result<Job, ToolError>,
}

impl Entry {
    const fn of<C: Command>() -> Entry {
        Entry {
            spec: CommandSpec::of::<C::Args>(C::NAME, C::RISK),
            fields: C::FIELDS,
            prepare: decode_and_prepare::<C>,
        }
    }
}

fn decode_and_prepare<C: Command>(
    args: &Map<String, Value>,
    call: &mut Preparing<'_>,
) -> Result<Job, ToolError> {
    let args: C::Args = decode_args(args)?;
    Ok(C::prepare(args, call)?.into())
}

/// Lists the ax commands once, in the order the tool offers them, and makes of the list the
/// command [`TABLE`] and the [`Job`] enum with its dispatch to each command's type.
macro_rules! ax_commands {
    ($($command:ident),* $(,)?) => {
        /// Every ax command, by name.
        const TABLE: &[Entry] = &[$(Entry::of::<$command>()),*];

        /// A checked ax call: one of the commands, ready to run.
        #[derive(Debug)]
        pub enum Job {
            $($command($command),)*
        }

        $(
            impl From<$command> for Job {
                fn from(command: $command) -> Job {
                    Job::$command(command)
                }
            }
        )*

        impl Job {
            /// The risk its command declares (before a secret makes an act [`Risk::Secret`]).
            fn declared_risk(&self) -> Risk {
                match self {
                    $(Job::$command(_) => $command::RISK,)*
                }
            }

            /// Whether the refs it shows become a snapshot an act can name.
            pub fn observes(&self) -> bool {
                match self {
                    $(Job::$command(_) => $command::OBSERVES,)*
                }
            }

            /// What the call will do, in words, for receipts and approval prompts.
            pub fn describe(&self) -> String {
                match self {
                    $(Job::$command(command) => command.describe(),)*
                }
            }

            /// The app the args name, if any.
            pub fn app(&self) -> Option<&AppArg> {
                match self {
                    $(Job::$command(command) => command.app(),)*
                }
            }

            fn window(&self) -> Option<&Target> {
                match self {
                    $(Job::$command(command) => command.window(),)*
                }
            }

            fn element(&self) -> Option<&Target> {
                match self {
                    $(Job::$command(command) => command.element(),)*
                }
            }

            async fn run_command<B: Backend>(
                self,
                ax: &Ax<B>,
                call: &Running<'_>,
            ) -> Result<Outcome, Failure> {
                match self {
                    $(Job::$command(command) => command.run(ax, call).await,)*
                }
            }
        }
    };
}

ax_commands![Apps, Tree, Find, Read, Focused, Act, Wait];

/// The specs of [`TABLE`], as `Surface::commands` lists them.
pub static COMMANDS: [CommandSpec; TABLE.len()] = {
    let mut specs = [TABLE[0].spec; TABLE.len()];
    let mut i = 1;
    while i < TABLE.len() {
        specs[i] = TABLE[i].spec;
        i += 1;
    }
    specs
};

/// Field names the result of `command` may carry.
pub fn result_fields(command: &str) -> &'static [&'static str] {
    TABLE
        .iter()
        .find(|entry| entry.spec.name == command)
        .map_or(&[], |entry| entry.fields)
}

/// Checks a call into a [`Job`] and the call's overall deadline: the call's own limits, then
/// the args of the command it names.
pub fn prepare(
    dialect: &Dialect,
    command: &str,
    args: &Map<String, Value>,
    complications: &Complications,
) -> Result<(Job, Duration), ToolError> {
    let max_bytes = complications
        .return_budget
        .as_ref()
        .and_then(|b| b.max_bytes)
        .unwrap_or(DEFAULT_MAX_BYTES);
    let timeout = match complications.timeout_ms {
        Some(0) => {
            return Err(
                ToolError::invalid("timeout_ms must be at least 1").at("complications.timeout_ms")
            );
        }
        Some(ms) if Duration::from_millis(ms) > MAX_TIMEOUT => {
            return Err(ToolError::invalid(format!(
                "timeout_ms {ms} is over the ax surface's maximum of {} ms",
                MAX_TIMEOUT.as_millis()
            ))
            .at("complications.timeout_ms"));
        }
        Some(ms) => Some(Duration::from_millis(ms)),
        None => None,
    };
    let Some(entry) = TABLE.iter().find(|entry| entry.spec.name == command) else {
        return Err(
            ToolError::invalid(format!("unknown ax command `{command}`"))
                .at("command")
                .valid(COMMANDS.iter().map(|c| c.name)),
        );
    };
    let mut call = Preparing {
        dialect,
        max_bytes,
        timeout,
    };
    let job = (entry.prepare)(args, &mut call)?;
    Ok((job, call.timeout.unwrap_or(DEFAULT_TIMEOUT)))
}

impl Job {
    /// Runs the command once the backend is ready.
    pub async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        ax.backend.ready(call.deadline).await?;
        self.run_command(ax, call).await
    }

    /// The ref the command acts on or reads (or the window it walks), if it names one.
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    pub fn element_ref(&self) -> Option<u32> {
        match self.element().or(self.window()) {
            Some(Target::Ref(r)) => Some(*r),
            _ => None,
        }
    }

    /// The target as the args spell it (unresolved): the app by name or pid, the window by
    /// selector or ref. None for `apps`, which is about no app.
    pub fn spelled_target(&self) -> Option<TargetFacts> {
        if let Job::Apps(_) = self {
            return None;
        }
        let window_id = self.window().map(|window| match window {
            Target::Ref(r) => format!("[{r}]"),
            Target::Selector(selector) => selector.source.clone(),
        });
        let (app, pid) = match self.app() {
            Some(AppArg::Name(name)) => (Some(name.clone()), None),
            Some(AppArg::Pid(pid)) => (None, Some(*pid)),
            None => (None, None),
        };
        Some(TargetFacts {
            kind: TargetKind::Element,
            app,
            pid,
            window: None,
            window_id,
            resolved: false,
        })
    }

    pub fn risk(&self) -> Risk {
        match self {
            Job::Act(act) if act.secret().is_some() => Risk::Secret,
            _ => self.declared_risk(),
        }
    }

    /// The stored secret an act sets (see [`Act::secret`]).
    pub fn secret(&self) -> Option<crate::kit::secret_store::SecretRef> {
        match self {
            Job::Act(act) => act.secret(),
            _ => None,
        }
    }

    /// The element an act acts on, as the call names it (a ref or a selector).
    pub fn element_named(&self) -> Option<String> {
        match self {
            Job::Act(act) => Some(act.element_named()),
            _ => None,
        }
    }
}
