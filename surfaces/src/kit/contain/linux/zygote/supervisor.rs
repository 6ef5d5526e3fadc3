//! A slot's supervisor, a fork of the zygote in the daemon's PID namespace: it unshares the
//! run's namespaces, forks the init and waits for it.

use std::os::fd::RawFd;

use super::{SETUP_FAILED, close_from, fail_later, init::run_init};
use crate::kit::contain::linux::report::Stage;
use crate::kit::contain::linux::wire::Plan;

/// The supervisor: a fork of the zygote. Never returns.
pub(super) fn supervise(plan: &Plan, slot: RawFd, zygote: i32) -> ! {
    // SAFETY: system calls of this single-threaded process on its own data.
    unsafe {
        // The supervisor dies with the zygote; its init with it, and with the init the run.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != zygote {
            libc::_exit(SETUP_FAILED);
        }
        // The zygote ignores these (SIGPIPE as every Rust program does): runs get the defaults.
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // Nothing of the zygote's stays open: stdio is /dev/null until the run brings its own.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null != fd {
                libc::dup2(null, fd);
            }
        }
        let slot_fd = slot as u32;
        close_from(3, slot_fd.saturating_sub(1), 0);
        close_from(slot_fd + 1, u32::MAX, 0);

        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        if plan.rootless {
            flags |= libc::CLONE_NEWUSER;
        }
        if plan.no_network {
            flags |= libc::CLONE_NEWNET;
        }
        if libc::unshare(flags) != 0 {
            fail_later(slot, Stage::Unshare);
        }
        if plan.rootless {
            // The zygote is not dumpable, which makes its /proc/self files root's: this child
            // may write its own maps only while dumpable, and is made undumpable again below.
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            if !write_file(b"/proc/self/setgroups\0", b"deny") {
                fail_later(slot, Stage::Setgroups);
            }
            if !write_file(b"/proc/self/uid_map\0", plan.uid_map.as_bytes()) {
                fail_later(slot, Stage::UidMap);
            }
            if !write_file(b"/proc/self/gid_map\0", plan.gid_map.as_bytes()) {
                fail_later(slot, Stage::GidMap);
            }
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        let init = libc::fork();
        if init < 0 {
            fail_later(slot, Stage::ForkInit);
        }
        if init == 0 {
            run_init(plan, slot);
        }
        close_from(0, u32::MAX, 0);
        let mut status = 0;
        loop {
            let waited = libc::waitpid(init, &mut status, libc::__WALL);
            if waited == init || waited < 0 {
                break;
            }
        }
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        libc::_exit(code);
    }
}

fn write_file(path: &[u8], text: &[u8]) -> bool {
    // SAFETY: `path` is NUL-terminated; the buffer is ours.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, text.as_ptr().cast(), text.len()) == text.len() as isize;
        libc::close(fd);
        ok
    }
}
