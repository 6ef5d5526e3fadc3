//! The commands the daemon serves itself on the surfaces: `help` on every surface, and `job`
//! on those with a command that detaches. Their names, args, specs and result fields live here,
//! below everything that lists or routes them (the tool's schema, the stages, the gateway); what
//! each does lives in `help.rs` and `jobs.rs`.

use std::time::Duration;

use computer_ipc::{ComputerCall, SurfaceName};
use computer_surfaces::{CommandSpec, Risk};
use serde::{Deserialize, Serialize};

/// The command, on every surface that honours `detach`, through which jobs are followed.
pub const JOB_COMMAND: &str = "job";

/// The commands that honour `detach`: long by nature, and sound to run with nobody waiting.
pub const DETACHABLE: &[(SurfaceName, &str)] = &[(SurfaceName::Shell, "run")];

/// What the tool description says of jobs (when a listed surface honours `detach`).
pub const JOB_DESCRIPTION: &str = "detach=true (shell run; default deadline: the daemon's maximum): \
     answers {job} at once and runs on without you; follow it with job: status \
     (running|done|failed|cancelled|interrupted, output_bytes), result (the run's reply), cancel \
     (kills it), list";

/// The longest `wait_ms` a `job result` may ask for; longer waits belong in several calls.
pub const MAX_WAIT: Duration = Duration::from_secs(600);

// `job`'s args. Doc comments here are the tool description's text (`schema.rs`); the
// command's work is `jobs.rs`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobArgs {
    pub(crate) op: JobOp,
    /// the detached call's receipt; not for list
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// result: wait for the end (progress meanwhile)
    #[serde(default)]
    pub(crate) wait_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobOp {
    Status,
    Result,
    Cancel,
    List,
}

impl JobOp {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobOp::Status => "status",
            JobOp::Result => "result",
            JobOp::Cancel => "cancel",
            JobOp::List => "list",
        }
    }
}

/// The `job` command as the tool description lists it. Observe: it reads or stops what the agent
/// already started under a decided, receipted call, and acts on nothing else.
/// What a `job` reply may hold, for the tool description: a job's view (status, list, cancel);
/// `result` adds the run's own fields once it has ended.
pub const JOB_RESULT_FIELDS: &[&str] = &[
    "job?",
    "jobs?",
    "surface?",
    "command?",
    "status?",
    "elapsed_ms?",
    "output_bytes?",
    "killed_processes?",
];

pub fn job_spec() -> CommandSpec {
    CommandSpec::of::<JobArgs>(JOB_COMMAND, Risk::Observe)
}

/// The `job` command on every surface that offers it: commands the daemon serves itself, which
/// a run given tools may call like a surface's own.
pub fn served_commands() -> Vec<(SurfaceName, CommandSpec)> {
    DETACHABLE
        .iter()
        .map(|(surface, _)| (*surface, job_spec()))
        .collect()
}

/// Whether `surface` offers the `job` command (it has a command that honours `detach`).
pub fn offered_on(surface: SurfaceName) -> bool {
    DETACHABLE.iter().any(|(s, _)| *s == surface)
}

/// Whether a call is a `job` command, which the daemon serves rather than the surface.
pub fn is_job_call(call: &ComputerCall) -> bool {
    call.command == JOB_COMMAND && offered_on(call.surface)
}

/// The command, on every surface, that returns the surface's reference.
pub const HELP_COMMAND: &str = "help";

/// What a `help` reply holds.
pub const HELP_RESULT_FIELDS: &[&str] = &["help"];

/// `{}` for the whole surface, or one command.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HelpArgs {
    /// only this command
    #[serde(default)]
    pub(crate) command: Option<String>,
}

pub fn help_spec() -> CommandSpec {
    CommandSpec::of::<HelpArgs>(HELP_COMMAND, Risk::Observe)
}
