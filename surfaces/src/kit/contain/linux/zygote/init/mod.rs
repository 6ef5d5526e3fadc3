//! The init: pid 1 of a run's PID namespace, a fork of the supervisor. It prepares the sandbox
//! in stages, each of which refuses the slot's run when it fails, then serves runs one at a
//! time.
//!
//! # Layout
//! - `masks.rs`: the daemon's paths covered, and its tools shown read-only among them.
//! - `desktop.rs`: a run on a desktop of an agent's own: its X socket alone, its private
//!   directory alone among desktops', no abstract socket.
//! - `dev.rs`: a root daemon's run's own `/dev`.
//! - `read_only.rs`: read-only mounts: a run's limits, kernel settings, login files.
//! - `capabilities.rs`: every capability dropped before the first run.
//! - `run.rs`: one run served: its program started, waited for, and everything it left killed.

mod capabilities;
mod desktop;
mod dev;
mod masks;
mod read_only;
mod run;

use std::io;
use std::os::fd::RawFd;

use super::{SETUP_FAILED, fail_later, program::PROGRAM_STACK};
use crate::kit::contain::linux::report::Stage;
use crate::kit::contain::linux::wire::{self, Plan};

/// The init: pid 1 of the run, a fork of the supervisor. Prepares the sandbox, stage by stage
/// (the order matters: each step says what must come before it), then serves runs. Never
/// returns.
pub(super) fn run_init(plan: &Plan, slot: RawFd) -> ! {
    // SAFETY: system calls of this single-threaded process on its own data.
    unsafe {
        become_init();
        keep_mounts_from_the_daemon(slot);
        masks::pin_directories(plan, slot);
        // Held from before the masks, which hide their paths; bound back after them.
        let shown = masks::open_shown(plan, slot);
        let own_x_socket = desktop::open_own_x_socket(plan, slot);
        let own_dirs = desktop::open_own_dirs(plan, slot);
        masks::mask_directories(plan, &plan.masked_dirs, false, slot);
        masks::mask_files(plan, slot);
        // After the plan's file masks: the person's runtime directory may hold some of them.
        if let Some(on_desktop) = &plan.desktop {
            masks::mask_directories(plan, &on_desktop.hidden_dirs, true, slot);
        }
        desktop::show_own_x_socket_alone(plan, own_x_socket, slot);
        // Before the writable limit, which treats it as the rest of the place it lies in.
        desktop::bind_own_dirs(plan, own_dirs, slot);
        if !plan.rootless && !dev::own_dev() {
            fail_later(slot, Stage::OwnDev);
        }
        dev::mount_own_devpts(slot);
        read_only::apply_writable_limit(plan, slot);
        // After the writable paths (whose recursive binds would otherwise clear the flag), and
        // before /proc is the run's (the held directories are reached through the daemon's).
        masks::bind_shown(plan, shown, slot);
        mount_own_proc(slot);
        // After the writable paths, so that none of them can make these writable again.
        read_only::make_kernel_settings_read_only(slot);
        // After the writable paths too: no writable limit a call asks for reaches them.
        if !read_only::cover_login_files(plan) {
            fail_later(slot, Stage::LoginFiles);
        }
        // Nothing more to mount: from here on the init, and every run it serves, holds no
        // capability and can gain none (no setuid bit or file capability counts).
        if !capabilities::drop_all_capabilities() {
            fail_later(slot, Stage::Capabilities);
        }
        // With no_new_privs set; before the first run, so that all of them are in its domain.
        desktop::keep_from_abstract_sockets(plan, slot);
        serve_runs(slot)
    }
}

/// Makes this process the run's init: it dies with the supervisor, and is pid 1 of the run's
/// namespace (or ends here).
unsafe fn become_init() {
    // SAFETY: process-wide settings of this single-threaded process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::prctl(libc::PR_SET_NAME, c"computer-init".as_ptr());
        // `kill(-1)` in a run's end must only ever reach this namespace.
        if libc::getpid() != 1 {
            libc::_exit(SETUP_FAILED);
        }
    }
}

/// Makes every mount of this namespace a slave: mounts made here must never propagate back to
/// the daemon's namespace.
unsafe fn keep_mounts_from_the_daemon(slot: RawFd) {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: a mount call with NUL-terminated strings and no data.
    if unsafe {
        libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        )
    } != 0
    {
        fail_later(slot, Stage::Propagation);
    }
}

/// Mounts a `/proc` of the run's PID namespace: it shows only the run's processes.
unsafe fn mount_own_proc(slot: RawFd) {
    // SAFETY: a mount call with NUL-terminated strings and no data.
    if unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } != 0
    {
        fail_later(slot, Stage::Proc);
    }
}

/// Serves runs, one at a time, until the slot's socket closes. A run is handed here only once
/// everything of the one before it is gone. Never returns.
unsafe fn serve_runs(slot: RawFd) -> ! {
    // SAFETY: system calls of this single-threaded process on its own data.
    unsafe {
        // What the run will need, made while nothing waits on it: the watch on the program's
        // end, and the stack its clone starts on (touched now, so its pages are not faulted in
        // on the run's path).
        let mut wanted: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wanted);
        libc::sigaddset(&mut wanted, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &wanted, std::ptr::null_mut());
        let children = libc::signalfd(-1, &wanted, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if children < 0 {
            fail_later(slot, Stage::Signals);
        }
        let stack = vec![1u8; PROGRAM_STACK];
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        loop {
            let fds = match wire::recv_fds(slot) {
                Ok(Some(fds)) if fds.len() == wire::RUN_FDS => fds,
                Ok(Some(_)) => continue,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                _ => libc::_exit(0),
            };
            run::serve_run(slot, fds, children, null, &stack);
        }
    }
}
