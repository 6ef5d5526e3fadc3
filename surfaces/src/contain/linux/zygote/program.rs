//! The program of a run: a `clone(CLONE_VM | CLONE_VFORK)` child of the init (as posix_spawn's)
//! that drops what it must not keep and executes what the run asked for.

use std::ffi::CString;
use std::os::fd::RawFd;

use super::{close_from, errno};
use crate::contain::linux::report::{Stage, report_setup_error};

/// Stack size of the program until its exec.
pub(super) const PROGRAM_STACK: usize = 64 * 1024;

/// `keyctl` operation: join a new anonymous session keyring.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// What the program's clone needs: C data made before it, read until the exec.
pub(super) struct Launch<'a> {
    pub(super) terminal: bool,
    pub(super) report: RawFd,
    /// The run's end of its tools channel, inherited as `TOOLS_FD`; -1 without tools.
    pub(super) tools: RawFd,
    pub(super) path: &'a CString,
    pub(super) argv: Vec<*const libc::c_char>,
    pub(super) envp: Vec<*const libc::c_char>,
}

pub(super) fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The highest 16-byte-aligned address of `stack` (stacks grow down on every Linux target).
pub(super) fn stack_top(stack: &[u8]) -> *mut libc::c_void {
    let end = stack.as_ptr() as usize + stack.len();
    (end & !15) as *mut libc::c_void
}

pub(super) extern "C" fn program_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Launch, alive in the shared memory; the init waits for the exec
    // (CLONE_VFORK).
    unsafe {
        let launch = &*(arg as *const Launch);
        prepare_program();
        let mut report = launch.report;
        if launch.tools >= 0 {
            // The one descriptor a run inherits beyond its stdio: its tools channel, at the
            // number the run is told. The report pipe moves out of its way first (this is the
            // program's own descriptor table: the init's is untouched).
            let tools_fd = computer_ipc::tools::TOOLS_FD;
            if report == tools_fd {
                report = libc::fcntl(report, libc::F_DUPFD_CLOEXEC, tools_fd + 1);
            }
            let inherited = if launch.tools == tools_fd {
                libc::fcntl(tools_fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(launch.tools, tools_fd)
            };
            if report < 0 || inherited < 0 {
                report_setup_error(launch.report, Stage::Exec, errno());
                libc::_exit(127);
            }
        }
        // A session keyring of the run's own, empty: keys the daemon's session holds (root's,
        // for a root daemon) are not the run's, and keys the run adds are gone with it. Only
        // where the kernel has no keyrings at all does the run go on without; an ordinary
        // user's run also where the user's key quota is spent (its keyring is the user's own).
        if libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        ) < 0
            && errno() != libc::ENOSYS
            && libc::getuid() == 0
        {
            report_setup_error(report, Stage::Keyring, errno());
            libc::_exit(127);
        }
        if launch.terminal && (libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0) {
            report_setup_error(report, Stage::Terminal, errno());
            libc::_exit(127);
        }
        libc::execve(
            launch.path.as_ptr(),
            launch.argv.as_ptr(),
            launch.envp.as_ptr(),
        );
        report_setup_error(report, Stage::Exec, errno());
        libc::_exit(127);
    }
}

/// The program's last steps before exec: a clean signal mask, no descriptor beyond stdin,
/// stdout and stderr. (It holds no capability already: the init dropped them all.)
unsafe fn prepare_program() {
    // SAFETY: system calls only.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Close-on-exec rather than close: the report pipe must stay open until the exec, to
        // tell of its failure.
        close_from(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    }
}
