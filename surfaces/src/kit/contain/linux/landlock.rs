//! Landlock scoping of abstract unix sockets (Landlock ABI 6, Linux 6.12): a process in the
//! domain cannot connect to an abstract socket bound by a process outside it (the person's X
//! server's `@/tmp/.X11-unix/X0`, a session bus at `unix:abstract=`). Path sockets, TCP and
//! sockets the domain made itself are untouched. Three system calls, made by hand: the daemon
//! asks which ABI the kernel has, a slot's init restricts itself before serving runs.

use std::io;

/// `landlock_create_ruleset` flag: return the highest ABI the kernel supports.
const CREATE_RULESET_VERSION: u32 = 1;
/// `scoped` bit: abstract unix sockets of processes outside the domain are out of reach.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1;
/// The first ABI with `scoped`.
pub(super) const SCOPE_ABI: i64 = 6;

/// `struct landlock_ruleset_attr` as of ABI 6.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// The Landlock ABI this kernel supports; 0 when it has none (or Landlock is not enabled).
pub(super) fn abi() -> i64 {
    // SAFETY: the version query reads no attribute and returns a number or -1.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    version.max(0)
}

/// Whether runs can be kept from abstract sockets by Landlock here.
pub(super) fn scopes_abstract_sockets() -> bool {
    abi() >= SCOPE_ABI
}

/// Puts this process (and everything it starts from now on) in a Landlock domain that refuses
/// connections to abstract unix sockets bound outside it. Needs `no_new_privs` (or
/// CAP_SYS_ADMIN). Allocates nothing: safe in a single-threaded init.
pub(super) fn scope_abstract_sockets() -> io::Result<()> {
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: SCOPE_ABSTRACT_UNIX_SOCKET,
    };
    // SAFETY: the kernel reads `attr`, of the size given, and returns a new descriptor or -1.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if ruleset < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: restricts this process with the ruleset just made, then closes it.
    unsafe {
        let restricted = libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32);
        let error = io::Error::last_os_error();
        libc::close(ruleset as libc::c_int);
        if restricted != 0 {
            return Err(error);
        }
    }
    Ok(())
}
