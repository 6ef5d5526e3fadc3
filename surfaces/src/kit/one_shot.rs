//! One-shot runs of argv or a `/bin/sh -c` script in their own process group, with a scrubbed
//! environment, a deadline that kills the whole group, and bounded output capture: the run of
//! `shell run`, and of the applescript surface's `osascript`. No surface owns it; each checks its
//! own args into an argv and hands it here with its limits.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::kit::capture::{CaptureLimits, CapturedText, StreamCapture};
use crate::kit::contain::{ContainError, Containment, ExecSpec, RunLimits};
pub use crate::kit::run_env::DESKTOP_ENV;
use crate::kit::run_env::{ShellLimits, checked_cwd_and_env, passed_env};
use crate::kit::secret_store::SecretRef;
use crate::kit::secrets::env_secrets;
use crate::kit::spawn::{OwnChild, own_children, resolve_program, zero_secret_env};
use crate::{
    ActionFacts, Availability, CallContext, Outcome, PreparedAction, Risk, StdinFacts,
    SurfaceError, decode_args, receipt_value,
};

/// What a run's reply may carry; `?`: only when it applies (a signal, a timeout, processes
/// left behind, output that is not empty).
pub(crate) const RUN_FIELDS: &[&str] = &[
    "exit_code?",
    "signal?",
    "timed_out?",
    "killed_processes?",
    "duration_ms",
    "stdout?",
    "stderr?",
];

/// How long readers may keep draining after the process group was killed. A descendant that left
/// the group (setsid) can hold a pipe open forever; the run still ends within its deadline plus
/// this grace.
const DRAIN_GRACE: Duration = Duration::from_millis(1500);

/// How long a stopped run's supervisor may take to count, kill and report before the whole
/// process group is killed without a count.
const STOP_GRACE: Duration = Duration::from_secs(2);

// `shell run`'s args. Doc comments here are the tool description's text (`schema.rs`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// or script
    #[serde(default)]
    argv: Option<Vec<String>>,
    /// (sh -c)
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    stdin: Option<String>,
}

/// The complications a run honours; `secrets` only where a keychain answers.
pub(crate) fn complications() -> &'static [&'static str] {
    const WITHOUT_SECRETS: &[&str] = &[
        "cwd",
        "env",
        "timeout_ms",
        "evidence",
        "return",
        "sandbox",
        "detach",
        "tools",
    ];
    const WITH_SECRETS: &[&str] = &[
        "cwd",
        "env",
        "timeout_ms",
        "evidence",
        "return",
        "sandbox",
        "detach",
        "tools",
        "secrets",
    ];
    // Listed only where a keychain answers: what the tool lists is what is callable.
    if crate::kit::secrets::keychain_answers() {
        WITH_SECRETS
    } else {
        WITHOUT_SECRETS
    }
}

/// Whether runs can start here: contained as `limits` say, and with `/bin/sh`.
pub(crate) fn probe(limits: &ShellLimits) -> Availability {
    // While the daemon still proves containment the surface is listed: runs wait for the
    // proof, and are refused if it fails.
    if let Some(containment) = limits.containment.status_now()
        && containment.mechanism == "unavailable"
    {
        return Availability::Unavailable {
            reason: format!("runs cannot be contained here: {}", containment.detail),
            fix: "see `computer doctor`".into(),
        };
    }
    if Path::new("/bin/sh").exists() {
        Availability::Ready
    } else {
        Availability::Unavailable {
            reason: "/bin/sh does not exist".into(),
            fix: "install a POSIX shell at /bin/sh".into(),
        }
    }
}

/// Checks a run's args (`argv` or `script`, and `stdin`) and the call's complications into a run
/// under `limits`.
pub(crate) fn prepare(
    limits: &ShellLimits,
    args: &Map<String, Value>,
    complications: &Complications,
) -> Result<ShellRun, ToolError> {
    let run: RunArgs = decode_args(args)?;
    let program = match (run.argv, run.script) {
        (Some(argv), None) => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(ToolError::invalid("argv must name a program").at("args.argv"));
            }
            Program::Argv(argv)
        }
        (None, Some(script)) => Program::Script(script),
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid("give either argv or script, not both")
                .at("args")
                .valid(["argv", "script"]));
        }
        (None, None) => {
            return Err(ToolError::invalid("shell run needs argv or script")
                .at("args")
                .valid(["argv", "script"]));
        }
    };
    if let Some(position) = program.words().iter().position(|w| w.contains('\0')) {
        return Err(
            ToolError::invalid("arguments cannot contain NUL bytes").at(program.path_of(position))
        );
    }

    let cwd = checked_cwd_and_env(complications)?;
    let secrets = env_secrets(complications)?;
    let timeout = match complications.timeout_ms {
        Some(0) => {
            return Err(
                ToolError::invalid("timeout_ms must be at least 1").at("complications.timeout_ms")
            );
        }
        Some(ms) if Duration::from_millis(ms) > limits.max_timeout => {
            return Err(ToolError::invalid(format!(
                "timeout_ms {ms} is over this daemon's maximum of {} ms",
                limits.max_timeout.as_millis()
            ))
            .at("complications.timeout_ms"));
        }
        Some(ms) => Duration::from_millis(ms),
        // A detached run is a long one by intent (a build, a test suite): nobody waits on
        // the call, so it gets the longest deadline this daemon allows.
        None if complications.detach => limits.max_timeout,
        None => limits.default_timeout,
    };
    Ok(ShellRun {
        ready: None,
        program,
        stdin: run.stdin,
        cwd,
        env: complications.env.clone(),
        secrets,
        timeout,
        capture: limits.capture,
        containment: limits.containment.clone(),
        sandbox: limits.with_desktop(run_limits(complications)?),
        tools: complications.tools.as_ref().is_some_and(|t| t.wanted()),
        base_env: passed_env(limits.desktop_env.as_deref()),
    })
}

#[derive(Debug)]
enum Program {
    Argv(Vec<String>),
    Script(String),
}

impl Program {
    fn words(&self) -> Vec<&str> {
        match self {
            Program::Argv(argv) => argv.iter().map(String::as_str).collect(),
            Program::Script(script) => vec![script.as_str()],
        }
    }

    fn path_of(&self, position: usize) -> String {
        match self {
            Program::Argv(_) => format!("args.argv[{position}]"),
            Program::Script(_) => "args.script".into(),
        }
    }
}

/// A validated `shell run`.
#[derive(Debug)]
pub struct ShellRun {
    program: Program,
    stdin: Option<String>,
    cwd: Option<PathBuf>,
    env: BTreeMap<String, String>,
    /// Variables whose values come from the keychain when the run starts (name, reference).
    secrets: Vec<(String, SecretRef)>,
    timeout: Duration,
    capture: CaptureLimits,
    containment: Arc<Containment>,
    sandbox: RunLimits,
    /// The run may call the tool back (`complications.tools`): the daemon opens its channel
    /// when it starts (`CallContext::tools`).
    tools: bool,
    /// The run made ready while its intent receipt was written (`look_before`).
    ready: Option<Ready>,
    /// What the run gets of the daemon's environment (and of its desktop's, on an agent's own).
    base_env: BTreeMap<OsString, OsString>,
}

/// A contained run made ready before its intent is on disk: its program, environment and
/// directory settled, its request and pipes made; nothing of it started.
#[derive(Debug)]
struct Ready {
    exec: ExecSpec,
    run: crate::kit::contain::PreparedRun,
}

impl ShellRun {
    /// The args as receipts keep them: the program or script (long ones cut), and stdin as its
    /// size, digest and head, which is what approvers see of it too.
    fn receipt_args(&self) -> Value {
        let mut args = match &self.program {
            Program::Argv(argv) => json!({"argv": receipt_value(&json!(argv))}),
            Program::Script(script) => json!({"script": receipt_value(&json!(script))}),
        };
        if let Some(stdin) = self.stdin.as_deref() {
            args["stdin"] = StdinFacts::of(stdin).for_receipt();
        }
        args
    }

    /// The program to exec (an argv's resolved against the run's PATH) with the run's whole
    /// environment, and the directory it starts in.
    fn exec_spec(
        &self,
        env: BTreeMap<OsString, OsString>,
    ) -> Result<(ExecSpec, PathBuf), SurfaceError> {
        let exec = match &self.program {
            Program::Argv(argv) => {
                // Resolving the program here, against the child's PATH, lets the standard library
                // spawn with posix_spawn (vfork) instead of forking this whole daemon: it falls
                // back to fork whenever a changed PATH must be searched.
                let path_var = env
                    .get(OsStr::new("PATH"))
                    .and_then(|p| p.to_str())
                    .unwrap_or_default()
                    .to_string();
                let program = resolve_program(&argv[0], &path_var).ok_or_else(|| {
                    spawn_error(&self.program, std::io::ErrorKind::NotFound.into(), None)
                })?;
                ExecSpec {
                    program,
                    argv: argv.iter().map(OsString::from).collect(),
                    env: Vec::new(),
                }
            }
            Program::Script(script) => ExecSpec {
                program: PathBuf::from("/bin/sh"),
                argv: vec!["sh".into(), "-c".into(), script.into()],
                env: Vec::new(),
            },
        };
        let exec = ExecSpec {
            env: env.into_iter().collect(),
            ..exec
        };
        Ok((exec, start_dir(self.cwd.as_deref())))
    }

    /// The environment a run gets from the daemon's and the call's own, before any secret or
    /// tools variable.
    fn plain_env(&self) -> BTreeMap<OsString, OsString> {
        let mut env = self.base_env.clone();
        for (key, value) in &self.env {
            env.insert(key.into(), value.into());
        }
        env
    }
}

/// The stricter sandbox a call asks for, checked: writable paths absolute and existing.
pub(crate) fn run_limits(complications: &Complications) -> Result<RunLimits, ToolError> {
    let Some(sandbox) = &complications.sandbox else {
        return Ok(RunLimits::default());
    };
    let writable = match &sandbox.writable {
        None => None,
        Some(paths) => {
            let mut checked = Vec::new();
            for (i, path) in paths.iter().enumerate() {
                let at = format!("complications.sandbox.writable[{i}]");
                let path = PathBuf::from(path);
                if !path.is_absolute() {
                    return Err(ToolError::invalid(format!(
                        "`{}` is not an absolute path",
                        path.display()
                    ))
                    .at(at));
                }
                let canonical = path.canonicalize().map_err(|err| {
                    ToolError::invalid(format!(
                        "`{}` cannot be made writable: {err}",
                        path.display()
                    ))
                    .at(at.clone())
                })?;
                checked.push(canonical);
            }
            Some(checked)
        }
    };
    Ok(RunLimits {
        no_network: sandbox.network == Some(false),
        writable,
        login_files_writable: Vec::new(),
        desktop: None,
    })
}

/// Why the wait for a run's program ended before the program did.
enum Ending {
    TimedOut,
    Cancelled,
}

#[async_trait]
impl PreparedAction for ShellRun {
    fn risk(&self) -> Risk {
        if self.secrets.is_empty() {
            Risk::Act
        } else {
            Risk::Secret
        }
    }

    fn facts(&self) -> ActionFacts {
        let (found, argv, script) = match &self.program {
            Program::Argv(argv) => (
                crate::kit::script::argv_commands(argv, self.stdin.as_deref()),
                Some(argv.clone()),
                None,
            ),
            Program::Script(script) => (
                crate::kit::script::script_commands(script),
                None,
                Some(script.clone()),
            ),
        };
        ActionFacts {
            programs: found.programs,
            argv,
            script,
            opaque: found.opaque,
            env: self.env.clone(),
            script_env: found.assigned,
            stdin: self.stdin.as_deref().map(StdinFacts::of),
            cwd: self.cwd.clone(),
            words: found.words,
            target: None,
            args: Some(self.receipt_args()),
            terminal: None,
            secrets: crate::kit::secrets::env_uses(&self.secrets),
            consent: None,
        }
    }

    fn describe(&self) -> String {
        let what = match &self.program {
            Program::Argv(argv) => format!("run {argv:?}"),
            Program::Script(script) => format!("run the shell script {script:?}"),
        };
        let what = match &self.cwd {
            Some(cwd) => format!("{what} in {}", cwd.display()),
            None => what,
        };
        if self.tools {
            format!(
                "{what}, which may call the tool back from its code (each call decided and receipted on its own)"
            )
        } else {
            what
        }
    }

    /// A plain contained run (no secret to resolve, no tools channel to open: both wait for
    /// the run itself) is made ready here, while its intent receipt is written: what a start
    /// costs before anything runs is then off the call's path. Whatever fails here is left for
    /// `run`, which reports it as it would have.
    async fn look_before(&mut self) {
        if !self.secrets.is_empty() || self.tools || !self.containment.starts_runs() {
            return;
        }
        let Ok((exec, cwd)) = self.exec_spec(self.plain_env()) else {
            return;
        };
        if let Ok(run) =
            self.containment
                .prepare_start(&self.sandbox, &exec, &cwd, self.stdin.is_some())
        {
            self.ready = Some(Ready { exec, run });
        }
    }

    async fn run(mut self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let started = Instant::now();
        if !ctx.login_files_writable.is_empty() {
            // The person said yes to the login files this call names: its run finds them
            // writable, so a run made ready before that answer is not the one to use.
            self.ready = None;
            self.sandbox.login_files_writable = ctx.login_files_writable.clone();
        }
        if let Some(Ready { exec, run }) = self.ready.take() {
            let ran = self.run_contained(&ctx, Launch::Ready(run)).await;
            return self.finish(ran, exec, ToolsGuard(None), started);
        }
        // The run's whole environment: what passes through from the daemon's, then the call's.
        let mut env = self.plain_env();
        // Resolved only now, after policy and approval; registered for masking before any
        // byte of the run's output is read.
        for (name, reference) in &self.secrets {
            let value = ctx.secrets.resolve_blocking(name, reference).await?;
            env.insert(
                name.into(),
                secrecy::ExposeSecret::expose_secret(&value).into(),
            );
        }
        // The run's tools channel, opened only now (after policy and approval), and closed,
        // whatever happens, when this returns.
        let tools = ToolsGuard(match (self.tools, &ctx.tools) {
            (false, _) => None,
            (true, Some(tools)) => Some(tools.open()?),
            (true, None) => {
                return Err(SurfaceError::Tool(
                    ToolError::invalid(
                        "tools are given to a single call's `shell run`, not to a step of a multi-step call",
                    )
                    .at("complications.tools"),
                ));
            }
        });
        if let Some(opened) = &tools.0 {
            for (key, value) in &opened.env {
                env.insert(key.into(), value.into());
            }
            for key in ["PATH", "PYTHONPATH"] {
                let mut joined = opened.bin_dir.clone().into_os_string();
                if let Some(rest) = env.get(OsStr::new(key)).filter(|v| !v.is_empty()) {
                    joined.push(":");
                    joined.push(rest);
                }
                env.insert(key.into(), joined);
            }
        }
        let (exec, cwd) = self.exec_spec(env)?;
        let channel = tools.0.as_ref().map(|opened| &opened.channel);
        let ran = if self.containment.starts_runs() {
            let launch = Launch::Start {
                exec: &exec,
                cwd: &cwd,
                tools: channel,
            };
            self.run_contained(&ctx, launch).await
        } else {
            self.run_command(&ctx, &exec, &cwd, channel).await
        };
        self.finish(ran, exec, tools, started)
    }
}

/// How a contained run starts: made ready before (`look_before`), or now.
enum Launch<'a> {
    Ready(crate::kit::contain::PreparedRun),
    Start {
        exec: &'a ExecSpec,
        cwd: &'a Path,
        tools: Option<&'a std::os::fd::OwnedFd>,
    },
}

impl ShellRun {
    /// The outcome of a run that was started (or could not be): its fields and its receipt's.
    fn finish(
        &self,
        ran: Result<Ran, SurfaceError>,
        mut exec: ExecSpec,
        mut tools: ToolsGuard,
        started: Instant,
    ) -> Result<Outcome, SurfaceError> {
        zero_secret_env(&mut exec, self.secrets.iter().map(|(name, _)| name));
        let ran = ran?;
        let Ran {
            exit_code,
            signal,
            killed,
            timed_out,
            stdout,
            stderr,
        } = ran;

        let duration_ms = started.elapsed().as_millis() as u64;
        let mut fields = Map::new();
        fields.insert("exit_code".into(), json!(exit_code));
        if let Some(signal) = signal {
            fields.insert("signal".into(), json!(signal_name(signal)));
        }
        fields.insert("timed_out".into(), json!(timed_out));
        if killed > 0 {
            fields.insert("killed_processes".into(), json!(killed));
        }
        fields.insert("duration_ms".into(), json!(duration_ms));
        let mut receipt = Map::new();
        receipt.insert("containment".into(), json!(self.containment.status()));
        receipt.insert("killed_processes".into(), json!(killed));
        if let Some(opened) = tools.0.take() {
            receipt.insert("tool_calls".into(), (opened.close)());
        }
        if !self.sandbox.is_default() {
            receipt.insert(
                "sandbox".into(),
                json!({
                    "network": !self.sandbox.no_network,
                    "writable": self.sandbox.writable,
                    "login_files_writable": self.sandbox.login_files_writable,
                }),
            );
        }
        let artifacts = [&stdout, &stderr]
            .iter()
            .filter_map(|text| text.artifact.clone())
            .collect();
        Ok(Outcome {
            success: exit_code == Some(0) && !timed_out,
            fields,
            texts: vec![stdout, stderr],
            artifacts,
            inline_image: None,
            receipt,
        })
    }
}

/// A run's open tools channel: closed (the capability revoked) when the run is over, on every
/// path out of it.
struct ToolsGuard(Option<crate::OpenedTools>);

impl Drop for ToolsGuard {
    fn drop(&mut self) {
        if let Some(opened) = self.0.take() {
            (opened.close)();
        }
    }
}

/// How a run ended, and its output.
struct Ran {
    exit_code: Option<i32>,
    signal: Option<i32>,
    killed: u32,
    timed_out: bool,
    stdout: CapturedText,
    stderr: CapturedText,
}

/// How a run ended, before its output is read to the end.
struct Ended {
    exit_code: Option<i32>,
    signal: Option<i32>,
    killed: u32,
    timed_out: bool,
}

impl ShellRun {
    /// A run started by containment (Linux namespaces): the run's init reports when the
    /// program has ended and everything else of the run was counted and killed.
    async fn run_contained(
        &self,
        ctx: &CallContext,
        launch: Launch<'_>,
    ) -> Result<Ran, SurfaceError> {
        let started = match launch {
            Launch::Ready(ready) => self.containment.start_prepared(ready),
            Launch::Start { exec, cwd, tools } => self.containment.start_with_tools(
                &self.sandbox,
                exec,
                cwd,
                self.stdin.is_some(),
                tools,
            ),
        }
        .map_err(|err| err.for_call("the run could not be contained, so it did not start"))?;
        let mut run = started.handle;
        let pipes = started.pipes;
        self.feed_stdin(pipes.stdin);
        let ending = async {
            let ending = tokio::select! {
                end = run.done() => Ok(end),
                _ = tokio::time::sleep(self.timeout) => Err(Ending::TimedOut),
                _ = ctx.cancel.cancelled() => Err(Ending::Cancelled),
            };
            let (end, timed_out) = match ending {
                Ok(end) => (end, false),
                Err(why) => {
                    run.stop();
                    let end = match tokio::time::timeout(STOP_GRACE, run.done()).await {
                        Ok(end) => end,
                        Err(_) => Err(ContainError::Lost),
                    };
                    (end, matches!(why, Ending::TimedOut))
                }
            };
            let end = match end {
                Ok(end) => end,
                Err(err @ ContainError::Setup { .. }) => {
                    return Err(SurfaceError::Failed {
                        message: format!(
                            "the run could not be contained, so it did not start: {err}"
                        ),
                    });
                }
                Err(err) => {
                    return Err(SurfaceError::Failed {
                        message: format!("the run's containment failed: {err}"),
                    });
                }
            };
            let (exit_code, signal) = match end.status {
                Some(raw) => {
                    let status = std::process::ExitStatus::from_raw(raw);
                    (status.code(), status.signal())
                }
                // Stopped at the deadline or cancelled: the program was among the killed.
                None => (None, Some(libc::SIGKILL)),
            };
            Ok(Ended {
                exit_code,
                signal,
                killed: end.killed,
                timed_out,
            })
        };
        self.read_until(ending, Some(pipes.stdout), Some(pipes.stderr), ctx)
            .await
    }

    /// A run started as a command of its own: uncontained (containment off by config), or
    /// wrapped by containment (macOS).
    async fn run_command(
        &self,
        ctx: &CallContext,
        exec: &ExecSpec,
        cwd: &Path,
        tools: Option<&std::os::fd::OwnedFd>,
    ) -> Result<Ran, SurfaceError> {
        let mut command = tokio::process::Command::new(&exec.program);
        if let Some(channel) = tools {
            use std::os::fd::AsRawFd;
            let channel = channel.as_raw_fd();
            let tools_fd = computer_ipc::tools::TOOLS_FD;
            // SAFETY: between fork and exec only async-signal-safe calls (dup2, fcntl) on
            // descriptor numbers; nothing allocates.
            unsafe {
                command.pre_exec(move || {
                    let inherited = if channel == tools_fd {
                        libc::fcntl(tools_fd, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(channel, tools_fd)
                    };
                    if inherited < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        if let Some((arg0, args)) = exec.argv.split_first() {
            command.arg0(arg0).args(args);
        }
        command
            .env_clear()
            .envs(exec.env.iter().map(|(k, v)| (k, v)));
        self.containment
            .prepare(command.as_std_mut(), &self.sandbox, exec)
            .map_err(|err| err.for_call("the run did not start"))?;
        command.current_dir(cwd);
        command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        // Registered under the same lock as the spawn, so a reaper never sees this child
        // unregistered; unregistered when this returns, after the child was waited for.
        let (mut child, _own) = {
            let mut own = own_children();
            let child = command
                .spawn()
                .map_err(|err| spawn_error(&self.program, err, Some(cwd)))?;
            let registration = child.id().map(|pid| {
                own.insert(pid);
                OwnChild(pid)
            });
            (child, registration)
        };
        let pgid = child.id().map(|pid| pid as i32);
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        self.feed_stdin(child.stdin.take());
        let ending = async {
            let ending = tokio::select! {
                status = child.wait() => Ok(status),
                _ = tokio::time::sleep(self.timeout) => Err(Ending::TimedOut),
                _ = ctx.cancel.cancelled() => Err(Ending::Cancelled),
            };
            let timed_out = matches!(ending, Err(Ending::TimedOut));
            if ending.is_err()
                && let Some(pgid) = pgid
            {
                kill_group(pgid);
            }
            let status = match ending {
                Ok(status) => status,
                Err(_) => child.wait().await,
            }
            .map_err(|err| SurfaceError::io("waiting for the child", err))?;
            // The run is over either way: whatever it left in its process group
            // (background jobs, grandchildren) dies with it.
            if let Some(pgid) = pgid {
                kill_group(pgid);
            }
            Ok(Ended {
                exit_code: status.code(),
                signal: status.signal(),
                killed: 0,
                timed_out,
            })
        };
        self.read_until(ending, stdout, stderr, ctx).await
    }

    /// Writes the call's stdin, if it has one, on a task of its own: a child that never reads
    /// its stdin must not stall the run, and the write ends when the pipe closes.
    fn feed_stdin<W: AsyncWrite + Unpin + Send + 'static>(&self, pipe: Option<W>) {
        if let (Some(mut pipe), Some(input)) = (pipe, self.stdin.clone()) {
            tokio::spawn(async move {
                let _ = pipe.write_all(input.as_bytes()).await;
            });
        }
    }

    /// Reads a run's two outputs while `ending` waits for its end, all on this task: the
    /// run's end and its output's end wake the same task, with no task per stream to hand
    /// over to. Once the run has ended, what is still coming is read for at most
    /// `DRAIN_GRACE` (a process that left the run's group may hold a pipe open); a run that
    /// failed stops the reading at once.
    async fn read_until(
        &self,
        ending: impl Future<Output = Result<Ended, SurfaceError>>,
        stdout: Option<impl AsyncRead + Unpin>,
        stderr: Option<impl AsyncRead + Unpin>,
        ctx: &CallContext,
    ) -> Result<Ran, SurfaceError> {
        let stop = CancellationToken::new();
        let ended = CancellationToken::new();
        let ending = async {
            let end = ending.await;
            match end {
                Ok(_) => ended.cancel(),
                Err(_) => stop.cancel(),
            }
            end
        };
        let reading = async {
            let both = futures::future::join(
                read_stream(
                    stdout,
                    StreamCapture::new("stdout", self.capture, ctx),
                    &stop,
                ),
                read_stream(
                    stderr,
                    StreamCapture::new("stderr", self.capture, ctx),
                    &stop,
                ),
            );
            tokio::pin!(both);
            tokio::select! {
                biased;
                read = &mut both => read,
                () = async {
                    ended.cancelled().await;
                    tokio::time::sleep(DRAIN_GRACE).await;
                } => {
                    stop.cancel();
                    both.await
                }
            }
        };
        let (end, (stdout, stderr)) = tokio::join!(ending, reading);
        let Ended {
            exit_code,
            signal,
            killed,
            timed_out,
        } = end?;
        let captured = |text: std::io::Result<CapturedText>| {
            text.map_err(|err| SurfaceError::io("capturing output", err))
        };
        Ok(Ran {
            exit_code,
            signal,
            killed,
            timed_out,
            stdout: captured(stdout)?,
            stderr: captured(stderr)?,
        })
    }
}

/// The first read of a stream: small, since most runs say little; doubled each time a read
/// fills it, up to `MAX_READ`.
const FIRST_READ: usize = 4 * 1024;
const MAX_READ: usize = 64 * 1024;

async fn read_stream<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    mut capture: StreamCapture,
    stop: &CancellationToken,
) -> std::io::Result<CapturedText> {
    if let Some(mut pipe) = pipe {
        let mut buf = Vec::with_capacity(FIRST_READ);
        loop {
            buf.clear();
            let read = tokio::select! {
                read = pipe.read_buf(&mut buf) => read?,
                _ = stop.cancelled() => break,
            };
            if read == 0 {
                break;
            }
            capture.push(&buf).await?;
            if read == buf.capacity() && buf.capacity() < MAX_READ {
                let doubled = buf.capacity() * 2;
                buf.clear();
                buf.reserve(doubled);
            }
        }
    }
    capture.finish().await
}

fn kill_group(pgid: i32) {
    // SAFETY: killpg only sends a signal; a group that is already gone yields ESRCH, ignored.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Where a run or a session starts: the call's `cwd`, else the daemon's HOME, else `/`. A HOME
/// that is no directory (a service account's, or one removed) is no place to start: `/`, as
/// when HOME is unset.
pub(crate) fn start_dir(cwd: Option<&Path>) -> PathBuf {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_dir())
    };
    cwd.map(Path::to_path_buf)
        .or_else(home)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Why `program` did not start; `cwd`, when given, is the directory it was to start in (a
/// spawn reports a missing one as a missing program).
fn spawn_error(program: &Program, err: std::io::Error, cwd: Option<&Path>) -> SurfaceError {
    let name = match program {
        Program::Argv(argv) => argv[0].clone(),
        Program::Script(_) => "/bin/sh".into(),
    };
    let gone_cwd = cwd.filter(|cwd| !cwd.is_dir());
    let message = match (err.kind(), gone_cwd) {
        (std::io::ErrorKind::NotFound, Some(cwd)) => format!(
            "could not start `{name}`: its working directory `{}` does not exist (any more)",
            cwd.display()
        ),
        (std::io::ErrorKind::NotFound, None) => format!(
            "command not found: `{name}` (not an existing path, nor on PATH={})",
            std::env::var("PATH").unwrap_or_default()
        ),
        (std::io::ErrorKind::PermissionDenied, _) => format!("permission denied running `{name}`"),
        _ => format!("could not start `{name}`: {err}"),
    };
    SurfaceError::Failed { message }
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_in_a_directory_that_is_gone_names_the_directory_not_the_program() {
        let program = Program::Argv(vec!["true".into()]);
        let gone = tempfile::tempdir().unwrap().path().join("gone");
        let SurfaceError::Failed { message } =
            spawn_error(&program, std::io::ErrorKind::NotFound.into(), Some(&gone))
        else {
            panic!("a failure")
        };
        assert!(message.contains("working directory"), "{message}");
        assert!(message.contains(&gone.display().to_string()), "{message}");
        // In a directory that is there, a missing program is still a missing program.
        let SurfaceError::Failed { message } = spawn_error(
            &program,
            std::io::ErrorKind::NotFound.into(),
            Some(Path::new("/")),
        ) else {
            panic!("a failure")
        };
        assert!(
            message.starts_with("command not found: `true`"),
            "{message}"
        );
    }
}
