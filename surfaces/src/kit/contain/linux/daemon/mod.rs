//! The daemon's side of Linux containment: the [`Launcher`] that prepares a run's request and
//! pipes and hands them to a slot, and the [`Run`] it follows to its end.
//!
//! # Layout
//! - `plan.rs`: the [`Plan`] every slot is made under, built once from the config.
//! - `desktop.rs`: what a run on a desktop of an agent's own must not reach.
//! - `run.rs`: a run as the daemon follows it: its report pipe, its stop pipe, its slot.
//! - `zygote_handle.rs`: the daemon's handle on the zygote and on the prepared slots it sends.

mod desktop;
mod plan;
mod run;
mod zygote_handle;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(in crate::kit::contain) use run::Run;
use zygote_handle::Zygote;

use super::report::Stage;
use super::wire::{self, Plan, Request};
use crate::kit::contain::{ContainError, ExecSpec, RunLimits};

/// How long the daemon waits, at start, for the probe run.
const PROBE_LIMIT_MS: i32 = 10_000;

fn c_string(bytes: &[u8]) -> Result<CString, ContainError> {
    CString::new(bytes).map_err(|_| ContainError::Setup {
        stage: "program and arguments",
        source: io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"),
    })
}

/// The daemon's side of Linux containment: the plan and the zygote that starts runs under it.
#[derive(Debug)]
pub(in crate::kit::contain) struct Launcher {
    plan: Plan,
    zygote: Arc<Mutex<Zygote>>,
}

/// A run handed to the zygote, with the daemon's ends of its pipes.
pub(in crate::kit::contain) struct Started {
    pub run: Run,
    pub pipes: Pipes,
}

/// The daemon's ends of a run's pipes.
#[derive(Debug)]
pub(in crate::kit::contain) struct Pipes {
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Launcher {
    /// Starts the zygote for `plan` and proves, by running one contained process, that this
    /// machine allows what runs will need.
    pub(in crate::kit::contain) fn new(plan: Plan) -> io::Result<Launcher> {
        let zygote = Zygote::start(&plan)?;
        let launcher = Launcher {
            plan,
            zygote: Arc::new(Mutex::new(zygote)),
        };
        launcher.probe()?;
        Ok(launcher)
    }

    pub(in crate::kit::contain) fn describe(&self) -> String {
        self.plan.describe()
    }

    fn probe(&self) -> io::Result<()> {
        let exec = ExecSpec {
            program: PathBuf::from("/bin/true"),
            argv: vec!["true".into()],
            env: Vec::new(),
        };
        let started = self
            .start(&RunLimits::default(), &exec, Path::new("/"), false, None)
            .map_err(into_io)?;
        let mut run = started.run;
        let end = run.wait_blocking(PROBE_LIMIT_MS).map_err(into_io)?;
        match end.status {
            Some(0) => Ok(()),
            other => Err(io::Error::other(format!(
                "a contained /bin/true did not exit 0 (wait status {other:?})"
            ))),
        }
    }

    /// Starts `exec` contained, in `cwd`, with `limits`. The run's end (or a setup step that
    /// failed) comes through [`Run::done`].
    pub(in crate::kit::contain) fn start(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
        tools: Option<&OwnedFd>,
    ) -> Result<Started, ContainError> {
        let prepared = self.prepare(limits, exec, cwd, with_stdin, tools.is_some())?;
        Ok(Started {
            run: prepared.handover.hand_over(self, tools)?,
            pipes: prepared.pipes,
        })
    }

    /// Makes a run ready to start: its request written, its pipes made; nothing is sent and
    /// nothing runs until [`Handover::hand_over`]. A run that takes its tools channel is told so
    /// by its request (`with_tools`) and gets the channel at the hand-over.
    pub(in crate::kit::contain) fn prepare(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
        with_tools: bool,
    ) -> Result<Prepared, ContainError> {
        let mut request = request_for(limits, exec, cwd, None)?;
        request.tools = with_tools;
        let (stdout, stdout_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("output pipes"))?;
        let (stderr, stderr_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("output pipes"))?;
        let (stdin, stdin_r) = if with_stdin {
            let (read, write) = pipe(0, libc::O_NONBLOCK).map_err(setup("input pipe"))?;
            (Some(write), read)
        } else {
            let null = std::fs::File::open("/dev/null").map_err(setup("input pipe"))?;
            (None, OwnedFd::from(null))
        };
        Ok(Prepared {
            handover: Handover {
                handing: Handing::of(&request)?,
                theirs: [stdin_r, stdout_w, stderr_w],
            },
            pipes: Pipes {
                stdin,
                stdout,
                stderr,
            },
        })
    }

    /// Starts `exec` contained on a terminal of its own: a pty made by the run's init in the
    /// run's private devpts (so that no other run, and nothing outside, can open its terminal
    /// side), `rows` by `cols`, that is the program's stdin, stdout, stderr and the controlling
    /// terminal of the new session it leads. Returns the run and the pty's master side, which
    /// the init sends back over a socket of this run's.
    pub(in crate::kit::contain) fn start_terminal(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        (rows, cols): (u16, u16),
    ) -> Result<(Run, OwnedFd), ContainError> {
        let request = request_for(limits, exec, cwd, Some((rows, cols)))?;
        let (ours, theirs) = wire::seqpacket_pair().map_err(setup("the terminal's socket"))?;
        let mut run = Handing::of(&request)?.launch(self, [&theirs, &theirs, &theirs], None)?;
        drop(theirs);
        // The daemon holds the master after the run ends: the slot's devpts must never serve
        // another run, which could open the pty's terminal side again.
        run.reusable = false;
        match receive_terminal(&ours, PROBE_LIMIT_MS) {
            Some(master) => Ok((run, master)),
            // The init reported why (and closed its end of the socket), or was lost.
            None => Err(match run.wait_blocking(PROBE_LIMIT_MS) {
                Err(err) => err,
                Ok(_) => ContainError::Setup {
                    stage: Stage::OpenTerminal.name(),
                    source: io::Error::other("the run ended without sending its terminal"),
                },
            }),
        }
    }
}

/// A run made ready by [`Launcher::prepare`], not yet handed to a slot.
#[derive(Debug)]
pub(in crate::kit::contain) struct Prepared {
    pub handover: Handover,
    pub pipes: Pipes,
}

/// What a slot gets with a prepared run: its request and report pipes, and the run's ends of
/// its stdio (stdin, stdout, stderr).
#[derive(Debug)]
pub(in crate::kit::contain) struct Handover {
    handing: Handing,
    theirs: [OwnedFd; 3],
}

impl Handover {
    /// Hands the run to a slot of `launcher`'s (with `tools`, when its request said so): from
    /// here on it runs. Its ends of the stdio are closed here once handed: only the run holds
    /// them then, so reads end when its processes are gone.
    pub(in crate::kit::contain) fn hand_over(
        self,
        launcher: &Launcher,
        tools: Option<&OwnedFd>,
    ) -> Result<Run, ContainError> {
        let [stdin, stdout, stderr] = &self.theirs;
        self.handing
            .launch(launcher, [stdin, stdout, stderr], tools)
    }
}

/// What goes to a slot with a run beside its stdio: the request, and the report and stop pipes
/// (the daemon's ends kept for the run's handle).
#[derive(Debug)]
struct Handing {
    memfd: OwnedFd,
    report: OwnedFd,
    report_w: OwnedFd,
    stop_r: OwnedFd,
    stop: OwnedFd,
    default_limits: bool,
}

impl Handing {
    fn of(request: &Request) -> Result<Handing, ContainError> {
        let memfd = wire::memfd_with(&request.encode()).map_err(setup("the run's request"))?;
        let (report, report_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("report pipe"))?;
        let (stop_r, stop) = pipe(0, libc::O_NONBLOCK).map_err(setup("stop pipe"))?;
        Ok(Handing {
            memfd,
            report,
            report_w,
            stop_r,
            stop,
            default_limits: request.uses_default_limits(),
        })
    }

    /// Hands the request and the run's stdio to the zygote; returns the daemon's side of it.
    fn launch(
        self,
        launcher: &Launcher,
        stdio: [&OwnedFd; 3],
        tools: Option<&OwnedFd>,
    ) -> Result<Run, ContainError> {
        let Handing {
            memfd,
            report,
            report_w,
            stop_r,
            stop,
            default_limits,
        } = self;
        let fds = [
            memfd.as_raw_fd(),
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
            report_w.as_raw_fd(),
            stop_r.as_raw_fd(),
            // Without tools the request's memfd stands in: the init hands it to nobody.
            tools.unwrap_or(&memfd).as_raw_fd(),
        ];
        let slot = {
            let mut zygote = launcher
                .zygote
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match zygote.launch(&fds, default_limits) {
                Ok(slot) => slot,
                Err(err) => {
                    // A zygote that is gone (killed from outside the runs: none can see it)
                    // is started again once; if that fails too, the run is refused.
                    if !matches!(
                        err.raw_os_error(),
                        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED)
                    ) {
                        return Err(setup("handing the run to the containment zygote")(err));
                    }
                    tracing::warn!(error = %err, "the containment zygote is gone; starting another");
                    *zygote = Zygote::start(&launcher.plan)
                        .map_err(setup("starting the containment zygote again"))?;
                    zygote
                        .launch(&fds, default_limits)
                        .map_err(setup("handing the run to the containment zygote"))?
                }
            }
        };
        // Only the run holds the other ends now (the caller drops its stdio ends): reads end
        // when its processes are gone.
        drop((memfd, report_w, stop_r));
        Ok(Run {
            report,
            stop: Some(stop),
            done: None,
            slot,
            reusable: true,
            zygote: Some(launcher.zygote.clone()),
        })
    }
}

/// Waits (at most `limit_ms`) for the master side of a run's terminal on `socket`; `None` when
/// the run's init closed its end without sending it.
fn receive_terminal(socket: &OwnedFd, limit_ms: i32) -> Option<OwnedFd> {
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll reads and writes the one pollfd we own.
        let ready = unsafe { libc::poll(&mut poll, 1, limit_ms) };
        if ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if ready <= 0 {
            return None;
        }
        return match wire::recv_message(socket.as_raw_fd(), libc::MSG_DONTWAIT) {
            Ok(Some((wire::MESSAGE_TERMINAL, fds))) if fds.len() == 1 => fds.into_iter().next(),
            _ => None,
        };
    }
}

/// A setup failure at `stage`, from an io error.
fn setup(stage: &'static str) -> impl Fn(io::Error) -> ContainError {
    move |source: io::Error| ContainError::Setup { stage, source }
}

/// The request for one run, as it travels to its slot.
fn request_for(
    limits: &RunLimits,
    exec: &ExecSpec,
    cwd: &Path,
    terminal: Option<(u16, u16)>,
) -> Result<Request, ContainError> {
    let desktop = limits
        .desktop
        .as_ref()
        .map(desktop::limits_for)
        .transpose()?;
    Ok(Request {
        // Where Landlock cannot keep a desktop's run from abstract sockets, an empty network
        // namespace does (abstract sockets belong to a network namespace).
        no_network: limits.no_network || desktop.as_ref().is_some_and(|d| !d.scope_abstract),
        writable: match &limits.writable {
            Some(paths) => Some(
                paths
                    .iter()
                    .map(|p| c_string(p.as_os_str().as_bytes()))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        },
        login_files_writable: (limits.login_files_writable.iter())
            .map(|p| c_string(p.as_os_str().as_bytes()))
            .collect::<Result<_, _>>()?,
        terminal,
        tools: false,
        program: c_string(exec.program.as_os_str().as_bytes())?,
        cwd: c_string(cwd.as_os_str().as_bytes())?,
        argv: exec
            .argv
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<Result<_, _>>()?,
        env: exec
            .env
            .iter()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c_string(&pair)
            })
            .collect::<Result<_, _>>()?,
        desktop,
    })
}

/// A pipe, close-on-exec, with `read_flags` and `write_flags` (O_NONBLOCK) on its two ends.
fn pipe(read_flags: i32, write_flags: i32) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for (fd, flags) in [(&read, read_flags), (&write, write_flags)] {
        // SAFETY: fcntl on a descriptor we own.
        if flags != 0 && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((read, write))
}

fn into_io(err: ContainError) -> io::Error {
    io::Error::other(err.to_string())
}
