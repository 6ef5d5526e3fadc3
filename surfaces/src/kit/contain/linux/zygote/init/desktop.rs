//! A run on a desktop of an agent's own: `/tmp/.X11-unix` covered by an empty tmpfs that holds
//! the desktop's X socket alone, the desktop's private directory bound back into the covered
//! directory of every desktop's, and the run kept from abstract sockets bound outside it
//! (Landlock scoping) or, where the kernel has none, in an empty network namespace already.

use std::os::fd::RawFd;

use super::super::fail_later;
use crate::kit::contain::linux::landlock;
use crate::kit::contain::linux::report::Stage;
use crate::kit::contain::linux::wire::Plan;

const X11_DIR: &std::ffi::CStr = c"/tmp/.X11-unix";

/// Opens the desktop's X socket (not through a symbolic link) before anything covers it; -1
/// when the run is on no desktop or its desktop has no X socket.
pub(super) unsafe fn open_own_x_socket(plan: &Plan, slot: RawFd) -> RawFd {
    let Some(desktop) = &plan.desktop else {
        return -1;
    };
    if desktop.x_socket.is_empty() {
        return -1;
    }
    // SAFETY: open of a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            desktop.x_socket.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        fail_later(slot, Stage::DesktopX11);
    }
    fd
}

/// Covers `/tmp/.X11-unix` with an empty tmpfs and binds the desktop's X socket (`own`, held
/// since before) back at its own name, then makes the tmpfs read-only: no other display's
/// socket is there, not even one of a desktop opened later.
pub(super) unsafe fn show_own_x_socket_alone(plan: &Plan, own: RawFd, slot: RawFd) {
    let Some(desktop) = &plan.desktop else {
        return;
    };
    // SAFETY: system calls on NUL-terminated paths and a descriptor this process owns.
    unsafe {
        // No X server ever ran here: there is nothing to hide.
        if libc::access(X11_DIR.as_ptr(), libc::F_OK) != 0 && own < 0 {
            return;
        }
        let none = std::ptr::null::<libc::c_char>();
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(
            c"computer-desktop-x11".as_ptr(),
            X11_DIR.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            c"size=4k,mode=0755".as_ptr().cast(),
        ) != 0
        {
            fail_later(slot, Stage::DesktopX11);
        }
        if own >= 0 {
            let made = libc::open(
                desktop.x_socket.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            );
            if made < 0 {
                fail_later(slot, Stage::DesktopX11);
            }
            libc::close(made);
            let Ok(source) = std::ffi::CString::new(format!("/proc/self/fd/{own}")) else {
                fail_later(slot, Stage::DesktopX11);
            };
            if libc::mount(
                source.as_ptr(),
                desktop.x_socket.as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                fail_later(slot, Stage::DesktopX11);
            }
            libc::close(own);
        }
        if libc::mount(
            none,
            X11_DIR.as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | flags,
            std::ptr::null(),
        ) != 0
        {
            fail_later(slot, Stage::DesktopX11);
        }
    }
}

/// Opens the desktop's own directories that lie inside a directory its masks cover (its private
/// directory), not through a symbolic link, before the masks hide them.
pub(super) unsafe fn open_own_dirs(plan: &Plan, slot: RawFd) -> Vec<RawFd> {
    let Some(desktop) = &plan.desktop else {
        return Vec::new();
    };
    // SAFETY: opens of NUL-terminated paths.
    unsafe { super::masks::open_held(&desktop.shown, slot, Stage::DesktopDir) }
}

/// Binds each of the desktop's own directories (`held`, opened before the masks) back at its
/// own path inside the masks, as it was: writable where the run may write there. Before the
/// run's writable limit, which then makes it read-only with the rest unless the run may write
/// where it lies.
pub(super) unsafe fn bind_own_dirs(plan: &Plan, held: Vec<RawFd>, slot: RawFd) {
    let Some(desktop) = &plan.desktop else {
        return;
    };
    for (path, fd) in desktop.shown.iter().zip(held) {
        let Ok(source) = std::ffi::CString::new(format!("/proc/self/fd/{fd}")) else {
            fail_later(slot, Stage::DesktopDir);
        };
        // SAFETY: a bind mount of two NUL-terminated paths; the descriptor is ours.
        unsafe {
            if libc::mount(
                source.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                fail_later(slot, Stage::DesktopDir);
            }
            libc::close(fd);
        }
    }
}

/// Keeps the init, and every run it serves from now on, from abstract sockets bound outside
/// them. After `no_new_privs` is set (Landlock asks for it of a process without capabilities).
/// A run on a desktop for which the kernel has no such scoping came in an empty network
/// namespace instead; one with neither is refused, never served unconfined.
pub(super) unsafe fn keep_from_abstract_sockets(plan: &Plan, slot: RawFd) {
    let Some(desktop) = &plan.desktop else {
        return;
    };
    if desktop.scope_abstract {
        if landlock::scope_abstract_sockets().is_err() {
            fail_later(slot, Stage::Landlock);
        }
    } else if !plan.no_network {
        // SAFETY: sets errno for the report, touching no memory.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        fail_later(slot, Stage::Landlock);
    }
}
