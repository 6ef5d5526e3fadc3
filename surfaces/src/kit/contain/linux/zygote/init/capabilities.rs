//! Every capability dropped, and none to gain: the init's last step before it serves runs.

use super::super::errno;

/// Drops every capability of this process, from its bounding, ambient, inheritable, permitted
/// and effective sets, and sets `no_new_privs`: what it starts (as root too) holds none and can
/// gain none, by a setuid program or file capabilities. Whether it all held.
pub(super) fn drop_all_capabilities() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: prctl with integer arguments; capset reads the structures we own, laid out as
    // the kernel's.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return false;
        }
        // Every capability the kernel knows, until it says there is no such one. The bounding
        // set goes first: dropping from it needs CAP_SETPCAP, which the capset below removes.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                if errno() == libc::EINVAL {
                    break;
                }
                return false;
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return false;
        }
        libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) == 0
    }
}
