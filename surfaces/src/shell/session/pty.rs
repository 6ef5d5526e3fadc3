//! Starting a session's program on a new pty, and ending every process of the session: through
//! containment's terminal start (Linux namespaces), or as a command that containment made ready
//! (macOS Seatbelt, or containment off by config) spawned by `portable-pty`.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use portable_pty::{CommandBuilder, MasterPty, PtySize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::SurfaceError;
use crate::kit::contain::{ContainError, Containment, ExecSpec, RunHandle, RunLimits};

/// How long the end of a stopped session's processes may take to be reported.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// How a session's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// A program started on a pty, with the daemon's side of the pty.
pub(super) struct Spawned {
    pub master: Box<dyn MasterPty + Send>,
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
    pub process: Process,
}

/// The processes of a session: its program's end, and the way to end all of them.
pub(super) struct Process {
    /// `Some` once the program has ended.
    pub exit: watch::Receiver<Option<Exit>>,
    kind: Kind,
}

enum Kind {
    /// Contained: the run's init kills everything in its namespace when asked.
    Contained {
        stop: CancellationToken,
        killed: Arc<AtomicU32>,
    },
    /// Started as a command: the session's processes are found by their session id and by the
    /// marker in their environment (which `setsid` does not shed).
    Command { leader: u32, marker: String },
}

/// Opens a pty of `size` and starts `exec` on it in `cwd`, contained as every run is.
pub(super) fn spawn(
    containment: &Containment,
    limits: &RunLimits,
    exec: &ExecSpec,
    cwd: &Path,
    size: PtySize,
    marker: &str,
) -> Result<Spawned, SurfaceError> {
    let failed = |what: &str, err: &dyn std::fmt::Display| SurfaceError::Failed {
        message: format!("the session could not start: {what}: {err}"),
    };
    if containment.starts_runs() {
        // The pty is made inside the run, in its own devpts: no other run can open its
        // terminal side. The daemon gets the master side only.
        let (handle, master) = containment
            .start_terminal(limits, exec, cwd, (size.rows, size.cols))
            .map_err(|err| SurfaceError::Failed {
                message: format!("the session could not be contained, so it did not start: {err}"),
            })?;
        let master = ContainedMaster(master);
        let reader = master
            .try_clone_reader()
            .map_err(|err| failed("reading the pty", &err))?;
        let writer = master
            .take_writer()
            .map_err(|err| failed("writing the pty", &err))?;
        return Ok(Spawned {
            master: Box::new(master),
            reader,
            writer,
            process: contained(handle),
        });
    }
    let pair = portable_pty::native_pty_system()
        .openpty(size)
        .map_err(|err| failed("opening a pty", &err))?;
    let reader = pair
        .master
        .try_clone_reader()
        .map_err(|err| failed("reading the pty", &err))?;
    let writer = pair
        .master
        .take_writer()
        .map_err(|err| failed("writing the pty", &err))?;

    let process = {
        let mut command = std::process::Command::new(&exec.program);
        command.args(exec.argv.iter().skip(1));
        command.env_clear();
        command.envs(exec.env.iter().map(|(k, v)| (k, v)));
        command.env(MARKER_VAR, marker);
        containment
            .prepare(&mut command, limits, exec)
            .map_err(|err| err.for_call("the session did not start"))?;
        let mut builder = CommandBuilder::from_argv(
            std::iter::once(command.get_program().to_owned())
                .chain(command.get_args().map(|a| a.to_owned()))
                .collect(),
        );
        if let Some(arg0) = exec.argv.first()
            && command.get_program() == exec.program.as_os_str()
        {
            // The program as the caller named it (a login shell's `-bash`, say), where no
            // wrapper stands before it.
            builder.get_argv_mut()[0] = arg0.clone();
        }
        builder.env_clear();
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                builder.env(key, value);
            }
        }
        builder.cwd(cwd);
        // Registered under the lock the reaper takes, so that the daemon's reaping of adopted
        // orphans never takes this child's exit from its waiter.
        let (child, leader) = {
            let mut own = crate::kit::spawn::own_children();
            let child = pair
                .slave
                .spawn_command(builder)
                .map_err(|err| failed(&format!("starting {:?}", exec.program), &err))?;
            let leader = child.process_id().unwrap_or_default();
            own.insert(leader);
            (child, leader)
        };
        drop(pair.slave);
        commanded(child, leader, marker.to_string())
    };
    Ok(Spawned {
        master: pair.master,
        reader,
        writer,
        process,
    })
}

/// The master side of a pty made inside a contained run (see `Containment::start_terminal`):
/// read, written and resized as portable-pty's own.
struct ContainedMaster(OwnedFd);

impl ContainedMaster {
    fn file(&self) -> std::io::Result<std::fs::File> {
        Ok(std::fs::File::from(self.0.try_clone()?))
    }
}

impl MasterPty for ContainedMaster {
    fn resize(&self, size: PtySize) -> anyhow::Result<()> {
        let winsize = libc::winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: size.pixel_width,
            ws_ypixel: size.pixel_height,
        };
        // SAFETY: TIOCSWINSZ reads the winsize we own from a descriptor we own.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCSWINSZ, &winsize) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(())
    }

    fn get_size(&self) -> anyhow::Result<PtySize> {
        // SAFETY: TIOCGWINSZ writes into the winsize we own.
        let mut winsize: libc::winsize = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCGWINSZ, &mut winsize) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(PtySize {
            rows: winsize.ws_row,
            cols: winsize.ws_col,
            pixel_width: winsize.ws_xpixel,
            pixel_height: winsize.ws_ypixel,
        })
    }

    fn try_clone_reader(&self) -> anyhow::Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.file()?))
    }

    fn take_writer(&self) -> anyhow::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.file()?))
    }

    fn process_group_leader(&self) -> Option<libc::pid_t> {
        None
    }

    fn as_raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.0.as_raw_fd())
    }

    /// Its name is the run's (`/dev/pts/N` of the run's own devpts), meaningless out here.
    fn tty_name(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// The environment variable that marks every process of an uncontained session.
const MARKER_VAR: &str = "COMPUTER_SESSION";

fn contained(mut handle: RunHandle) -> Process {
    let (tell, exit) = watch::channel(None);
    let stop = CancellationToken::new();
    let killed = Arc::new(AtomicU32::new(0));
    let (asked, counted) = (stop.clone(), killed.clone());
    tokio::spawn(async move {
        let end = tokio::select! {
            end = handle.done() => end,
            _ = asked.cancelled() => {
                handle.stop();
                tokio::time::timeout(STOP_GRACE, handle.done())
                    .await
                    .unwrap_or(Err(ContainError::Lost))
            }
        };
        let exit = match end {
            Ok(end) => {
                counted.store(end.killed, Ordering::SeqCst);
                let status = end.status.map(std::process::ExitStatus::from_raw);
                Exit {
                    code: status.and_then(|s| s.code()),
                    signal: match status {
                        Some(status) => status.signal(),
                        None => Some(libc::SIGKILL),
                    },
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "a contained session ended without a report");
                Exit {
                    code: None,
                    signal: None,
                }
            }
        };
        let _ = tell.send(Some(exit));
    });
    Process {
        exit,
        kind: Kind::Contained { stop, killed },
    }
}

use std::os::unix::process::ExitStatusExt;

fn commanded(
    mut child: Box<dyn portable_pty::Child + Send + Sync>,
    leader: u32,
    marker: String,
) -> Process {
    let (tell, exit) = watch::channel(None);
    std::thread::Builder::new()
        .name(format!("session-wait-{leader}"))
        .spawn(move || {
            let status = child.wait();
            crate::kit::spawn::own_children().remove(&leader);
            let exit = match status {
                Ok(status) => match status.signal() {
                    Some(name) => Exit {
                        code: None,
                        signal: signal_number(name),
                    },
                    None => Exit {
                        code: Some(status.exit_code() as i32),
                        signal: None,
                    },
                },
                Err(_) => Exit {
                    code: None,
                    signal: None,
                },
            };
            let _ = tell.send(Some(exit));
        })
        .expect("spawning a thread");
    Process {
        exit,
        kind: Kind::Command { leader, marker },
    }
}

/// portable-pty names a signal by its description (`Killed`, `Hangup`...).
fn signal_number(name: &str) -> Option<i32> {
    (1..32).find(|&n| {
        // SAFETY: strsignal returns a pointer to a static (or thread-local) string.
        let described = unsafe { libc::strsignal(n) };
        !described.is_null()
            && unsafe { std::ffi::CStr::from_ptr(described) }.to_string_lossy() == name
    })
}

impl Process {
    /// Ends every process of the session; returns how many were alive besides the program's
    /// own end (as far as known).
    pub(super) async fn stop(&self) -> u32 {
        let killed = match &self.kind {
            Kind::Contained { stop, killed } => {
                stop.cancel();
                let mut exit = self.exit.clone();
                let _ = tokio::time::timeout(STOP_GRACE, exit.wait_for(Option::is_some)).await;
                killed.load(Ordering::SeqCst)
            }
            Kind::Command { leader, marker } => {
                let (leader, marker) = (*leader, marker.clone());
                tokio::task::spawn_blocking(move || kill_session(leader, &marker))
                    .await
                    .unwrap_or(0)
            }
        };
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(STOP_GRACE, exit.wait_for(Option::is_some)).await;
        killed
    }
}

/// Kills every process in the session `leader` leads, and every process carrying `marker` in
/// its environment (a `setsid` child has left the session but not the environment), until a
/// sweep finds none: what forks while a sweep runs is caught by the next. Returns how many were
/// killed.
#[cfg(target_os = "linux")]
fn kill_session(leader: u32, marker: &str) -> u32 {
    let needle = format!("{MARKER_VAR}={marker}\0");
    let me = std::process::id();
    let mut killed: BTreeSet<u32> = BTreeSet::new();
    for _ in 0..20 {
        let mut found = 0;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            break;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // After the command name (which may hold anything, so the last `)` ends it):
            // state, ppid, pgrp, session.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            if fields.first() == Some(&"Z") {
                continue;
            }
            let in_session = fields.get(3).and_then(|s| s.parse::<u32>().ok()) == Some(leader);
            let marked = || {
                std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                    env.windows(needle.len()).any(|w| w == needle.as_bytes())
                        || env.ends_with(&needle.as_bytes()[..needle.len() - 1])
                })
            };
            if in_session || marked() {
                // SAFETY: kill only sends a signal.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                killed.insert(pid);
                found += 1;
            }
        }
        if found == 0 {
            break;
        }
    }
    killed.len() as u32
}

/// Elsewhere (macOS) the session's process group is all that can be told apart; Seatbelt keeps
/// signals within the sandbox, so the group is what is killed.
#[cfg(not(target_os = "linux"))]
fn kill_session(leader: u32, _marker: &str) -> u32 {
    // SAFETY: killpg only sends a signal.
    let sent = unsafe { libc::killpg(leader as i32, libc::SIGKILL) } == 0;
    let _ = BTreeSet::<u32>::new();
    u32::from(sent)
}
