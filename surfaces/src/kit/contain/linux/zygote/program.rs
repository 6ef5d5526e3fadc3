//! The program of a run: a `clone(CLONE_VM | CLONE_VFORK)` child of the init (as posix_spawn's)
//! that drops what it must not keep and executes what the run asked for.

use std::ffi::CString;
use std::os::fd::RawFd;

use super::{close_from, errno};
use crate::kit::contain::linux::report::{Stage, report_setup_error};

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
        // A root run shares root's user keyring (`@u`, and its serial in /proc/keys), which no
        // session keyring of its own hides: it gets no keyring calls at all.
        if libc::getuid() == 0 && !close_keyrings() {
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

/// The audit architecture of this build's system calls, as seccomp reports it.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7;
/// x32 system calls share x86_64's architecture, their numbers offset by this bit.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Installs a seccomp filter on this process (and what it executes) under which `keyctl`,
/// `add_key` and `request_key` fail with `EPERM`, as does every system call of another
/// architecture or ABI (i386's `int 0x80`, x32), through which they could be reached
/// otherwise. Needs `no_new_privs`, which the init set. Whether it held.
///
/// # Safety
/// In the program's vfork child: builds the filter on the stack, allocates nothing.
unsafe fn close_keyrings() -> bool {
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const IS: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const AT_LEAST: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let deny = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    // seccomp_data: the call's number at offset 0, its architecture at offset 4.
    let filter = [
        op(LOAD, 0, 0, 4),
        op(IS, 1, 0, NATIVE_ARCH),
        op(RETURN, 0, 0, deny),
        op(LOAD, 0, 0, 0),
        op(AT_LEAST, 3, 0, X32_SYSCALL_BIT),
        op(IS, 2, 0, libc::SYS_keyctl as u32),
        op(IS, 1, 0, libc::SYS_add_key as u32),
        op(IS, 0, 1, libc::SYS_request_key as u32),
        op(RETURN, 0, 0, deny),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl reads the program, which lives until it returns.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &raw const program,
        ) == 0
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
