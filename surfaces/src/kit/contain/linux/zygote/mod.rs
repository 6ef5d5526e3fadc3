//! The zygote's side of Linux containment: the zygote's loop, started from the daemon's binary,
//! that forks slots and hands runs on to them; each slot a supervisor, its init and the
//! programs the init starts.
//!
//! # Layout
//! - `supervisor.rs`: a slot's first process: unshares the namespaces, forks the init, waits.
//! - `init/`: the init, pid 1 of the run: prepares the sandbox in stages, then serves runs.
//! - `program.rs`: the program's clone, from the init's memory to its exec.

mod init;
mod program;
mod supervisor;

use supervisor::supervise;

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;

use super::report::{Stage, report_setup_error};
use super::wire::{self, DesktopLimits, Plan, Request};

/// The exit code of a supervisor or init whose sandbox could not be set up.
const SETUP_FAILED: i32 = 125;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn close_from(first: u32, last: u32, flags: u32) {
    if first > last {
        return;
    }
    // SAFETY: close_range only closes (or marks) descriptors of this process.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, last, flags);
    }
}

/// Whether `path` lies strictly inside the directory `dir`.
fn lies_inside(path: &std::ffi::CStr, dir: &std::ffi::CStr) -> bool {
    let (path, dir) = (path.to_bytes(), dir.to_bytes());
    path.len() > dir.len() + 1 && path.starts_with(dir) && path[dir.len()] == b'/'
}

impl Plan {
    /// This plan tightened by one run's limits (in the zygote, for a slot made for that run).
    pub(super) fn with_request_limits(&self, request: &Request) -> Plan {
        let desktop = request.desktop.as_ref().map(|desktop| {
            // What the plan hides already stays hidden: a desktop's mask inside one of its
            // masks would find no mount point there.
            let covered = |path: &CString| {
                (self.masked_dirs.iter()).any(|dir| dir == path || lies_inside(path, dir))
                    || self.masked_files.contains(path)
            };
            DesktopLimits {
                shown: (desktop.shown.iter())
                    .filter(|p| !covered(p))
                    .cloned()
                    .collect(),
                hidden_dirs: (desktop.hidden_dirs.iter())
                    .filter(|p| !covered(p))
                    .cloned()
                    .collect(),
                hidden_files: (desktop.hidden_files.iter())
                    .filter(|p| !covered(p))
                    .cloned()
                    .collect(),
                ..desktop.clone()
            }
        });
        Plan {
            no_network: request.no_network,
            writable: request.writable.clone(),
            read_only: (self.read_only.iter())
                .filter(|path| !request.login_files_writable.contains(path))
                .cloned()
                .collect(),
            desktop,
            ..self.clone()
        }
    }
}

/// Serves as the zygote when this process was started as one; returns otherwise. Call first
/// thing in `main`, before any thread is started.
pub fn serve_if_zygote() {
    if std::env::args_os().next().as_deref() != Some(OsStr::new(wire::ZYGOTE_NAME)) {
        return;
    }
    std::process::exit(serve());
}

fn serve() -> i32 {
    // SAFETY: process-wide settings of this single-threaded process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        // Out of the daemon's session: no terminal, no signal meant for its process group.
        libc::setsid();
        // Slots end on their own; the kernel reaps them.
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    let daemon: RawFd = 0;
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes an int into the variable we own.
    let is_socket = unsafe {
        libc::getsockopt(
            daemon,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    } == 0;
    if !is_socket || kind != libc::SOCK_SEQPACKET {
        eprintln!("error: the containment zygote is started by `computer serve`, not by hand");
        return 2;
    }
    let Some(plan) = receive_plan(daemon) else {
        return 2;
    };
    loop {
        let (kind, fds) = match wire::recv_message(daemon, 0) {
            Ok(Some(message)) => message,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            // The daemon is gone: so is every reason to exist.
            Ok(None) | Err(_) => return 0,
        };
        if kind == wire::MESSAGE_WANT_SLOT {
            // A slot for the daemon to keep at hand; the zygote keeps no copy of its socket. A
            // slot that cannot be made is answered all the same, with no descriptor, so the
            // daemon stops waiting for it (its runs then come here instead).
            let _ = match spawn_slot(&plan) {
                Ok(slot) => wire::send_message(daemon, wire::MESSAGE_SLOT, &[slot.as_raw_fd()], 0),
                Err(_) => wire::send_message(daemon, wire::MESSAGE_SLOT, &[], 0),
            };
            continue;
        }
        if kind != wire::MESSAGE_RUN || fds.len() != wire::RUN_FDS {
            continue;
        }
        let Some(request) = Request::read_from(&fds[wire::FD_REQUEST]) else {
            report_setup_error(
                fds[wire::FD_REPORT].as_raw_fd(),
                Stage::Request,
                libc::EINVAL,
            );
            continue;
        };
        let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        // A run reaches the zygote when it asks for stricter limits (a slot made for it alone)
        // or when the daemon had no prepared slot at hand.
        let slot_plan = if request.uses_default_limits() {
            None
        } else {
            Some(plan.with_request_limits(&request))
        };
        let handed = spawn_slot(slot_plan.as_ref().unwrap_or(&plan))
            .and_then(|slot| wire::send_fds(slot.as_raw_fd(), &raw));
        if let Err(err) = handed {
            report_setup_error(
                fds[wire::FD_REPORT].as_raw_fd(),
                Stage::Supervisor,
                err.raw_os_error().unwrap_or(libc::EIO),
            );
        }
    }
}

/// The plan the daemon sends first, in a memfd: `None` when what came is not one.
fn receive_plan(daemon: RawFd) -> Option<Plan> {
    let fds = wire::recv_fds(daemon).ok()??;
    let [memfd] = <[OwnedFd; 1]>::try_from(fds).ok()?;
    let file = std::fs::File::from(memfd);
    let mut bytes = Vec::new();
    let read = file
        .metadata()
        .and_then(|meta| {
            bytes.resize(meta.len() as usize, 0);
            file.read_exact_at(&mut bytes, 0)
        })
        .is_ok();
    read.then(|| Plan::decode(&bytes)).flatten()
}

/// Forks a slot for `plan` (in the zygote): a supervisor that prepares a run's sandbox and
/// whose init then waits for the run on the returned socket.
fn spawn_slot(plan: &Plan) -> io::Result<OwnedFd> {
    let (ours, theirs) = wire::seqpacket_pair()?;
    // SAFETY: getpid cannot fail.
    let zygote = unsafe { libc::getpid() };
    // SAFETY: the zygote is single-threaded, so its child may do anything it could.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let slot = theirs.as_raw_fd();
            std::mem::forget(theirs);
            supervise(plan, slot, zygote)
        }
        _ => Ok(ours),
    }
}

/// Waits for the run this slot was meant for, reports `stage` (with the errno it failed with)
/// to it, and ends this process.
fn fail_later(slot: RawFd, stage: Stage) -> ! {
    let errno = errno();
    if let Ok(Some(fds)) = wire::recv_fds(slot)
        && let Some(report) = fds.get(wire::FD_REPORT)
    {
        report_setup_error(report.as_raw_fd(), stage, errno);
    }
    // SAFETY: _exit ends the process at once.
    unsafe { libc::_exit(SETUP_FAILED) }
}
