//! Containment of the processes a surface starts: what the guard lets run can never reach the
//! guard. A contained run cannot read or write the daemon's state, config or sockets, cannot see,
//! signal or trace the daemon or an approver, and leaves nothing behind when it ends.
//!
//! # Layout
//! - `linux/`: a user (unless the daemon is root), mount and PID namespace per run; the
//!   daemon's paths are masked, `/proc` shows only the run, `/dev/pts` only its own terminals,
//!   kernel settings are read-only, and runs hold no capability (a root daemon's included).
//!   Its `daemon/` side hands runs to prepared slots; its `zygote/` side is the small process,
//!   started from the daemon's binary, that forks each run's supervisor and keeps the next
//!   run's sandbox prepared; `wire.rs` is what the two send each other.
//! - `login.rs`: the files that run code at the person's next login, which runs find read-only.
//! - `macos.rs`: a Seatbelt profile (`sandbox-exec`) denying the same paths and signals.
//!
//! Every run's receipt names the containment it ran under ([`Containment::status`]). Where
//! containment cannot be set up, runs are refused unless the config turns containment off.

#[cfg(target_os = "linux")]
mod linux;
mod login;
#[cfg(target_os = "macos")]
mod macos;

#[cfg(target_os = "linux")]
pub use linux::serve_if_zygote;
pub use login::{login_files, login_paths};

/// Serves as the containment zygote when this process was started as one; returns otherwise.
/// (Only Linux has a zygote.)
#[cfg(not(target_os = "linux"))]
pub fn serve_if_zygote() {}

use std::path::{Path, PathBuf};

use serde::Serialize;

/// What the daemon asks of containment.
#[derive(Debug, Clone, Default)]
pub struct ContainmentConfig {
    /// False only when the person's config says `[containment] mode = "off"`.
    pub enabled: bool,
    /// Paths no run may reach: the daemon's state dir, config, socket dirs.
    pub hidden: Vec<PathBuf>,
    /// Directories inside hidden ones that every run sees read-only, at the same path: the
    /// daemon's tools for runs (the `computer` command and the `computer_tools` module), written
    /// only by the daemon. One that does not exist when containment is set up is left hidden.
    pub shown: Vec<PathBuf>,
    /// Paths runs find read-only where they exist: what runs code at the person's next login
    /// or terminal ([`login_files`]).
    pub read_only: Vec<PathBuf>,
}

/// Tighter limits one run asks for (`complications.sandbox`), on top of the daemon's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// No network namespace access: the run gets an empty one.
    pub no_network: bool,
    /// Everything read-only except these existing absolute paths.
    pub writable: Option<Vec<PathBuf>>,
    /// Login files (of [`login_files`]) left writable in this run: the person said yes to a
    /// call that names them. Never from the call's own args.
    pub login_files_writable: Vec<PathBuf>,
    /// The run is placed on a desktop of an agent's own: it reaches that desktop's display and
    /// buses, and none of the person's session nor of another desktop.
    pub desktop: Option<DesktopReach>,
}

impl RunLimits {
    pub fn is_default(&self) -> bool {
        !self.no_network
            && self.writable.is_none()
            && self.login_files_writable.is_empty()
            && self.desktop.is_none()
    }
}

/// What a run on a desktop of an agent's own may reach of it; everything else of the kind is
/// hidden from it. On Linux: `/tmp/.X11-unix` shows the desktop's X socket alone; the person's
/// runtime directory, session, accessibility, Wayland and sway sockets, and the directory of
/// every desktop's private directory ([`desktops_dir`], the run's own bound back) are covered;
/// abstract sockets outside the run are refused by Landlock scoping, or, where the kernel has
/// none, the run gets an empty network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesktopReach {
    /// The desktop's sockets and private directory (`AgentDesktop::sockets`): its X socket in
    /// `/tmp/.X11-unix`, its buses' sockets, its runtime directory.
    pub own: Vec<PathBuf>,
    /// D-Bus addresses of the person's to hide beside those the daemon's environment names
    /// (the person's accessibility bus, as the person's session bus gives it).
    pub person_buses: Vec<String>,
}

/// The one directory every desktop of an agent's own keeps its private directory in
/// (`$TMPDIR/computer-desktops-<uid>`, the daemon's user's): a run on a desktop finds it
/// covered, its own desktop's directory alone bound back, so that a desktop opened while the
/// run is under way is out of its reach as well.
pub fn desktops_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("computer-desktops-{uid}"))
}

/// What a contained run executes: the resolved program, its argv (argv\[0\] included) and its
/// whole environment (nothing of the daemon's is inherited).
#[derive(Debug, Clone, Default)]
pub struct ExecSpec {
    pub program: PathBuf,
    pub argv: Vec<std::ffi::OsString>,
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// What containment this machine gives runs, as receipts and `computer doctor` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainmentStatus {
    /// `namespaces` (Linux), `seatbelt` (macOS), `off` (turned off by config), `unavailable`
    /// (cannot be set up here), or `unconfigured` (a registry built only to describe the tools).
    pub mechanism: &'static str,
    /// What it covers, or why it is missing and how to fix that.
    pub detail: String,
}

impl ContainmentStatus {
    /// Whether runs may start: contained, or containment deliberately turned off.
    pub fn allows_runs(&self) -> bool {
        !matches!(self.mechanism, "unavailable" | "unconfigured")
    }
}

/// The containment every run of this daemon gets, probed once at start. A daemon proves it in
/// the background ([`Containment::proving`]) so that its socket answers at once; a run waits for
/// the proof, and none starts uncontained while it is pending.
#[derive(Debug)]
pub struct Containment {
    proven: std::sync::Arc<std::sync::OnceLock<Proven>>,
}

/// What the proof found: the status, and what starts runs when containment works.
#[derive(Debug)]
struct Proven {
    status: ContainmentStatus,
    #[cfg(target_os = "linux")]
    launcher: Option<linux::Launcher>,
    #[cfg(target_os = "macos")]
    profile: Option<String>,
}

impl Default for Containment {
    /// Not set up: runs are refused. Only the daemon's config decides that runs go uncontained.
    fn default() -> Self {
        Containment::of(Proven::without_runs(
            "unconfigured",
            "containment was not set up for this surface".into(),
        ))
    }
}

impl Containment {
    fn of(proven: Proven) -> Containment {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(proven);
        Containment {
            proven: std::sync::Arc::new(cell),
        }
    }

    /// Sets up containment for `config` and proves it works by running one contained process.
    pub fn new(config: &ContainmentConfig) -> Containment {
        Containment::of(Proven::prove(config))
    }

    /// As [`Containment::new`], proven on a thread of its own: returns at once. Until the
    /// proof is in, [`Containment::status_now`] says nothing and runs wait for it; a proof that
    /// fails (or panics) leaves containment unavailable, so runs are refused.
    pub fn proving(config: &ContainmentConfig) -> Containment {
        let proven = std::sync::Arc::new(std::sync::OnceLock::new());
        let cell = proven.clone();
        let config = config.clone();
        let spawned = std::thread::Builder::new()
            .name("containment-proof".into())
            .spawn(move || {
                let outcome = std::panic::catch_unwind(|| Proven::prove(&config));
                let _ = cell.set(outcome.unwrap_or_else(|_| {
                    Proven::without_runs(
                        "unavailable",
                        "proving containment failed unexpectedly; see the daemon's log".into(),
                    )
                }));
                // The zygote started here dies when the thread that started it ends (a parent
                // death signal follows the thread), so this thread lives as long as the daemon.
                loop {
                    std::thread::park();
                }
            });
        if let Err(err) = spawned {
            return Containment::of(Proven::without_runs(
                "unavailable",
                format!("cannot start the thread that proves containment: {err}"),
            ));
        }
        Containment { proven }
    }

    fn proven(&self) -> &Proven {
        self.proven.wait()
    }

    /// What containment runs get, waiting for the proof if it is still running.
    pub fn status(&self) -> &ContainmentStatus {
        &self.proven().status
    }

    /// What containment runs get, if the proof is in: never waits.
    pub fn status_now(&self) -> Option<&ContainmentStatus> {
        self.proven.get().map(|proven| &proven.status)
    }

    /// Whether runs start through [`Containment::start`] (Linux namespaces) rather than as a
    /// command made ready by [`Containment::prepare`] (macOS, or containment off).
    pub fn starts_runs(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.proven().launcher.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Starts `exec` contained, in `cwd`, under `limits`, with a pipe for its stdin when
    /// `with_stdin`. Setup failures of the run's sandbox come through [`RunHandle::done`].
    pub fn start(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
    ) -> Result<StartedRun, ContainError> {
        self.start_with_tools(limits, exec, cwd, with_stdin, None)
    }

    /// As [`Containment::start`], and the program inherits `tools` (a run's tools channel) as
    /// `computer_ipc::tools::TOOLS_FD`: the one descriptor a run gets beyond its stdio.
    pub fn start_with_tools(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
        tools: Option<&std::os::fd::OwnedFd>,
    ) -> Result<StartedRun, ContainError> {
        #[cfg(target_os = "linux")]
        if let Some(launcher) = &self.proven().launcher {
            let started = launcher.start(limits, exec, cwd, with_stdin, tools)?;
            return Ok(StartedRun {
                handle: RunHandle { inner: started.run },
                pipes: RunPipes::of(started.pipes)?,
            });
        }
        let _ = (limits, exec, cwd, with_stdin, tools);
        Err(ContainError::Unavailable(self.status().detail.clone()))
    }

    /// Makes a run (without tools) ready as [`Containment::start`] would start it, and starts
    /// nothing: its request is written and its pipes are made and registered with the runtime,
    /// so that this part of a start can be done while something else is waited for (the run's
    /// intent receipt reaching the disk). [`Containment::start_prepared`] starts it.
    pub fn prepare_start(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
    ) -> Result<PreparedRun, ContainError> {
        #[cfg(target_os = "linux")]
        if let Some(launcher) = &self.proven().launcher {
            let prepared = launcher.prepare(limits, exec, cwd, with_stdin, false)?;
            return Ok(PreparedRun {
                handover: prepared.handover,
                pipes: RunPipes::of(prepared.pipes)?,
            });
        }
        let _ = (limits, exec, cwd, with_stdin);
        Err(ContainError::Unavailable(self.status().detail.clone()))
    }

    /// Starts a run made ready by [`Containment::prepare_start`].
    pub fn start_prepared(&self, prepared: PreparedRun) -> Result<StartedRun, ContainError> {
        #[cfg(target_os = "linux")]
        if let Some(launcher) = &self.proven().launcher {
            return Ok(StartedRun {
                handle: RunHandle {
                    inner: prepared.handover.hand_over(launcher, None)?,
                },
                pipes: prepared.pipes,
            });
        }
        let _ = prepared;
        Err(ContainError::Unavailable(self.status().detail.clone()))
    }

    /// Starts `exec` contained on a terminal of its own, `rows` by `cols`: a pty made inside
    /// the run, in its private devpts, so that no other run (and nothing outside the daemon)
    /// can open its terminal side. The program leads a new session with it as controlling
    /// terminal, stdin, stdout and stderr. Returns the run and the pty's master side. Stopping
    /// the run ends every process of it, setsid and double forks included.
    pub fn start_terminal(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        (rows, cols): (u16, u16),
    ) -> Result<(RunHandle, std::os::fd::OwnedFd), ContainError> {
        #[cfg(target_os = "linux")]
        if let Some(launcher) = &self.proven().launcher {
            let (run, master) = launcher.start_terminal(limits, exec, cwd, (rows, cols))?;
            return Ok((RunHandle { inner: run }, master));
        }
        let _ = (limits, exec, cwd, rows, cols);
        Err(ContainError::Unavailable(self.status().detail.clone()))
    }

    /// Prepares `command` to start under containment that wraps a command (macOS), or as it is
    /// when containment is off; the command's own child is the run.
    pub fn prepare(
        &self,
        command: &mut std::process::Command,
        limits: &RunLimits,
        exec: &ExecSpec,
    ) -> Result<(), ContainError> {
        if !self.status().allows_runs() {
            return Err(ContainError::Unavailable(self.status().detail.clone()));
        }
        #[cfg(target_os = "linux")]
        if self.proven().launcher.is_some() {
            // Contained runs start through `start`; a command prepared here would run bare.
            return Err(ContainError::Unavailable(
                "contained runs start through Containment::start, not a prepared command".into(),
            ));
        }
        #[cfg(target_os = "macos")]
        if let Some(profile) = &self.proven().profile {
            macos::wrap(command, &macos::with_limits(profile, limits));
            return Ok(());
        }
        if limits.desktop.is_some() {
            return Err(ContainError::Unavailable(
                "a run on an agent's own desktop is kept to that desktop by containment, which                  is off in this daemon's config (`[containment] mode`)"
                    .into(),
            ));
        }
        if !limits.is_default() {
            return Err(ContainError::Unavailable(
                "a stricter sandbox needs containment, which is off in this daemon's config".into(),
            ));
        }
        let _ = (command, exec);
        Ok(())
    }
}

impl Proven {
    fn without_runs(mechanism: &'static str, detail: String) -> Proven {
        Proven {
            status: ContainmentStatus { mechanism, detail },
            #[cfg(target_os = "linux")]
            launcher: None,
            #[cfg(target_os = "macos")]
            profile: None,
        }
    }

    fn prove(config: &ContainmentConfig) -> Proven {
        if !config.enabled {
            return Proven::without_runs(
                "off",
                "turned off by `[containment] mode = \"off\"`: runs can reach the daemon's \
                 state, config and sockets"
                    .into(),
            );
        }
        let hidden = existing_forms(&config.hidden);
        let shown = shown_forms(&config.shown, &hidden);
        #[cfg(target_os = "linux")]
        {
            match linux::Plan::new(&hidden, &shown, &config.read_only)
                .and_then(linux::Launcher::new)
            {
                Ok(launcher) => Proven {
                    status: ContainmentStatus {
                        mechanism: "namespaces",
                        detail: launcher.describe(),
                    },
                    launcher: Some(launcher),
                },
                Err(err) => Proven::without_runs(
                    "unavailable",
                    format!(
                        "cannot set up namespaces for runs: {err}; fix: allow unprivileged user \
                         namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu an \
                         AppArmor profile for `computer` granting `userns`), or set \
                         `[containment] mode = \"off\"` to run uncontained"
                    ),
                ),
            }
        }
        #[cfg(target_os = "macos")]
        {
            let profile = macos::profile(&hidden, &shown);
            Proven {
                status: ContainmentStatus {
                    mechanism: "seatbelt",
                    detail: "sandbox-exec profile: the daemon's state, config and sockets are \
                             denied; signals only within the run"
                        .into(),
                },
                profile: Some(profile),
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let _ = (hidden, shown);
            Proven::without_runs(
                "unavailable",
                "no containment mechanism on this platform".into(),
            )
        }
    }
}

/// A run that containment started itself, with the daemon's ends of its pipes.
#[derive(Debug)]
pub struct StartedRun {
    pub handle: RunHandle,
    pub pipes: RunPipes,
}

/// The daemon's ends of a contained run's pipes, registered with the async runtime.
#[derive(Debug)]
pub struct RunPipes {
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
    pub stdout: tokio::net::unix::pipe::Receiver,
    pub stderr: tokio::net::unix::pipe::Receiver,
}

#[cfg(target_os = "linux")]
impl RunPipes {
    fn of(pipes: linux::Pipes) -> Result<RunPipes, ContainError> {
        let wrap = |source: std::io::Error| ContainError::Setup {
            stage: "the run's pipes",
            source,
        };
        Ok(RunPipes {
            stdin: pipes
                .stdin
                .map(tokio::net::unix::pipe::Sender::from_owned_fd)
                .transpose()
                .map_err(wrap)?,
            stdout: tokio::net::unix::pipe::Receiver::from_owned_fd(pipes.stdout).map_err(wrap)?,
            stderr: tokio::net::unix::pipe::Receiver::from_owned_fd(pipes.stderr).map_err(wrap)?,
        })
    }
}

/// A contained run made ready by [`Containment::prepare_start`]; nothing of it runs yet.
#[derive(Debug)]
pub struct PreparedRun {
    #[cfg(target_os = "linux")]
    handover: linux::Handover,
    #[cfg(target_os = "linux")]
    pipes: RunPipes,
}

/// A contained run in progress.
#[derive(Debug)]
pub struct RunHandle {
    #[cfg(target_os = "linux")]
    inner: linux::Run,
}

/// How a contained run ended, as its supervisor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// The program's wait status (as from waitpid), when it ended before being stopped.
    pub status: Option<i32>,
    /// Processes of the run still alive at its end, killed then (the program itself included
    /// when the run was stopped at its deadline or cancelled).
    pub killed: u32,
}

impl RunHandle {
    /// Ends the run now: every process in it is killed (counted in [`RunHandle::done`]).
    pub fn stop(&self) {
        #[cfg(target_os = "linux")]
        self.inner.stop();
    }

    /// Waits until the run's init reports its end: the program has ended (or was stopped) and
    /// everything else in the run has been counted and killed; or until a setup step of its
    /// sandbox reports its failure. The namespaces' teardown that follows is not waited for.
    pub async fn done(&mut self) -> Result<RunEnd, ContainError> {
        #[cfg(target_os = "linux")]
        {
            self.inner.done().await
        }
        #[cfg(not(target_os = "linux"))]
        Err(ContainError::Lost)
    }
}

/// Why a run could not be contained.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("runs are refused: {0}")]
    Unavailable(String),
    #[error("the run's sandbox failed at {stage}: {source}")]
    Setup {
        stage: &'static str,
        source: std::io::Error,
    },
    #[error("the run's supervisor ended without reporting")]
    Lost,
}

impl ContainError {
    /// The error a call gets, `context` first: containment that is unavailable here is the
    /// surface's unavailability (code `unavailable`, however early the run was asked for), any
    /// other failure a failed action.
    pub fn for_call(self, context: &str) -> crate::SurfaceError {
        match self {
            ContainError::Unavailable(_) => crate::SurfaceError::Tool(
                computer_ipc::ToolError::new(
                    computer_ipc::ErrorCode::Unavailable,
                    format!("{context}: {self}"),
                )
                .at("surface"),
            ),
            other => crate::SurfaceError::Failed {
                message: format!("{context}: {other}"),
            },
        }
    }
}

/// Each path as given and in its canonical spelling, for those that exist (a mount covers the
/// file or directory, however it is named).
fn existing_forms(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        let chosen = match path.canonicalize() {
            Ok(canonical) => canonical,
            Err(_) => path.clone(),
        };
        if chosen.is_absolute() && !out.iter().any(|p| p == &chosen) {
            out.push(chosen);
        }
    }
    // Outer paths first, so that a masked directory never hides a path masked inside it.
    out.sort_by_key(|p| p.components().count());
    out.retain({
        let all = out.clone();
        move |p: &PathBuf| !all.iter().any(|q| q != p && p.starts_with(q))
    });
    out
}

/// The shown directories in their canonical spelling, those that exist as directories and lie
/// inside a hidden one (elsewhere runs see them anyway, with whatever access their modes give).
fn shown_forms(shown: &[PathBuf], hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in shown {
        let Ok(canonical) = path.canonicalize() else {
            continue;
        };
        let inside_hidden = hidden
            .iter()
            .any(|h| canonical != *h && canonical.starts_with(h));
        if canonical.is_dir() && inside_hidden && !out.contains(&canonical) {
            out.push(canonical);
        }
    }
    out
}

/// Whether `path` is one of the hidden paths or lies inside one.
pub fn is_hidden(hidden: &[PathBuf], path: &Path) -> bool {
    hidden.iter().any(|h| path.starts_with(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With containment off a run could reach every display: one on an agent's desktop is
    /// refused, saying why, where an ordinary run is let through.
    #[test]
    fn a_desktop_run_is_refused_when_containment_is_off() {
        let off = Containment::new(&ContainmentConfig::default());
        assert_eq!(off.status().mechanism, "off");
        let exec = ExecSpec {
            program: PathBuf::from("/bin/true"),
            argv: vec!["true".into()],
            env: Vec::new(),
        };
        let mut command = std::process::Command::new("/bin/true");
        let on_desktop = RunLimits {
            desktop: Some(DesktopReach::default()),
            ..RunLimits::default()
        };
        let refused = off.prepare(&mut command, &on_desktop, &exec).unwrap_err();
        assert!(
            refused.to_string().contains("agent's own desktop"),
            "{refused}"
        );
        assert!(
            off.prepare(&mut command, &RunLimits::default(), &exec)
                .is_ok()
        );
    }
}
