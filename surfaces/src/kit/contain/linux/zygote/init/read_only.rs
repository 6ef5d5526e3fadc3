//! Read-only mounts in a run's namespace: everything but a run's writable paths when it asks,
//! the kernel's settings, and the files that run code at the person's next login.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::{errno, fail_later};
use crate::kit::contain::linux::report::Stage;
use crate::kit::contain::linux::wire::Plan;

/// Kernel settings and interfaces made read-only in every run, once mounted: a write to
/// `core_pattern` would make the kernel run a program as root outside containment, `sysrq-trigger`
/// reboots, `/sys` holds cgroups, devices and tunables. Those absent on a machine are skipped.
const KERNEL_READ_ONLY: &[&std::ffi::CStr] = &[
    c"/proc/sys",
    c"/proc/sysrq-trigger",
    c"/proc/irq",
    c"/proc/bus",
    c"/proc/fs",
    c"/sys",
];

/// Flags of the mount API calls below (linux/mount.h, linux/fcntl.h).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// A detached read-only copy of the mount tree at `path` (its target, for a symbolic link).
/// `Ok(None)` when nothing is there (a dangling link included).
unsafe fn read_only_clone(path: &std::ffi::CStr) -> Result<Option<OwnedFd>, ()> {
    // SAFETY: system calls on a path we own and a descriptor they return.
    unsafe {
        let tree = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        );
        if tree < 0 {
            return match errno() {
                libc::ENOENT | libc::ENOTDIR => Ok(None),
                _ => Err(()),
            };
        }
        let tree = OwnedFd::from_raw_fd(tree as RawFd);
        if set_read_only_at(
            tree.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH as libc::c_uint,
            true,
        ) != 0
        {
            return Err(());
        }
        Ok(Some(tree))
    }
}

/// Puts the detached tree `tree` at `path`, without following a symbolic link there: the link
/// itself is covered (it can be neither removed nor pointed elsewhere while covered).
unsafe fn attach(tree: &OwnedFd, path: &std::ffi::CStr) -> bool {
    // SAFETY: move_mount on a descriptor we own and a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0
    }
}

/// Makes the plan's login files read-only in this mount namespace, where they exist: each is
/// covered by a read-only copy of itself, and every directory above them is bound onto itself
/// (renaming a mount point fails, so none can be moved away and replaced). Nothing is made in
/// the person's files here: a path that does not exist is left alone. Whether it all held.
pub(super) unsafe fn cover_login_files(plan: &Plan) -> bool {
    // SAFETY: mount calls on NUL-terminated paths of the plan.
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        for dir in &plan.read_only_pins {
            if libc::mount(
                dir.as_ptr(),
                dir.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
                && !matches!(errno(), libc::ENOENT | libc::ENOTDIR)
            {
                return false;
            }
        }
        for path in &plan.read_only {
            match read_only_clone(path) {
                Ok(None) => {}
                Ok(Some(tree)) => {
                    if !attach(&tree, path) {
                        return false;
                    }
                }
                Err(()) => return false,
            }
        }
        true
    }
}

/// Sets or clears the read-only flag on the mount at `path` and every mount beneath it.
pub(super) unsafe fn set_read_only(path: &std::ffi::CStr, read_only: bool) -> libc::c_long {
    // SAFETY: as set_read_only_at's.
    unsafe { set_read_only_at(libc::AT_FDCWD, path, 0, read_only) }
}

/// As [`set_read_only`], for `path` from `dir` with `flags` (`AT_EMPTY_PATH`: `dir` itself).
unsafe fn set_read_only_at(
    dir: RawFd,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    read_only: bool,
) -> libc::c_long {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads the structure we own, of the size we give.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            path.as_ptr(),
            AT_RECURSIVE | flags,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// For a run that asked to write only some paths: everything read-only, then each writable path
/// a fresh bind with the flag cleared.
pub(super) unsafe fn apply_writable_limit(plan: &Plan, slot: RawFd) {
    let Some(writable) = &plan.writable else {
        return;
    };
    // SAFETY: mount calls on NUL-terminated paths of the plan.
    unsafe {
        if set_read_only(c"/", true) != 0 {
            fail_later(slot, Stage::ReadOnly);
        }
        for path in writable {
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
                || set_read_only(path, false) != 0
            {
                fail_later(slot, Stage::Writable);
            }
        }
    }
}

/// Makes [`KERNEL_READ_ONLY`] read-only where it exists, each bound onto itself first.
pub(super) unsafe fn make_kernel_settings_read_only(slot: RawFd) {
    for path in KERNEL_READ_ONLY {
        // SAFETY: access and mount calls on NUL-terminated paths of this module.
        unsafe {
            if libc::access(path.as_ptr(), libc::F_OK) != 0 {
                continue;
            }
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
                || set_read_only(path, true) != 0
            {
                fail_later(slot, Stage::KernelReadOnly);
            }
        }
    }
}
