//! The masks over the daemon's paths: an empty read-only tmpfs over each hidden directory, a
//! read-only empty file over each hidden file, and the daemon's tools shown read-only among them
//! (and the mount points of a desktop run's own directories inside its masks).

use std::ffi::CString;
use std::os::fd::RawFd;

use super::super::{errno, fail_later, lies_inside};
use super::read_only::set_read_only;
use crate::kit::contain::linux::report::Stage;
use crate::kit::contain::linux::wire::Plan;

/// The empty file every masked file is covered with: on a read-only tmpfs, so that a write to
/// a masked file fails (EROFS) instead of vanishing as one to `/dev/null` would. It is made on
/// `/dev/pts` before the run's own devpts is mounted there, which hides it.
const MASK_FILE_DIR: &std::ffi::CStr = c"/dev/pts";
const MASK_FILE: &std::ffi::CStr = c"/dev/pts/computer-hidden";

// The daemon's tools, shown read-only inside its hidden state dir: the masks would hide them,
// so each shown directory is opened first (`open_shown`), its mount point made inside the
// mask's tmpfs before that is made read-only (`make_mount_points`), and the directory bound
// there read-only once every other mount is in place (`bind_shown`). A run then reads the same
// path as the daemon wrote, and can change nothing in it.

/// Opens every shown directory (not through a symbolic link) before the masks hide it.
pub(super) unsafe fn open_shown(plan: &Plan, slot: RawFd) -> Vec<RawFd> {
    // SAFETY: opens of NUL-terminated paths.
    unsafe { open_held(&plan.shown, slot, Stage::Show) }
}

/// Opens each of `paths` as a directory (`O_PATH`, not through a symbolic link), to be bound
/// back once the masks hide it; a path that cannot be opened fails the slot at `stage`.
pub(super) unsafe fn open_held(paths: &[CString], slot: RawFd, stage: Stage) -> Vec<RawFd> {
    paths
        .iter()
        .map(|path| {
            // SAFETY: open of a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                fail_later(slot, stage);
            }
            fd
        })
        .collect()
}

/// Every directory bound back inside a mask: the daemon's tools, and a run on a desktop's own
/// directories (its private directory inside the directory of every desktop's).
fn bound_back(plan: &Plan) -> impl Iterator<Item = &CString> {
    let own = plan.desktop.as_ref().map_or(&[][..], |d| &d.shown);
    plan.shown.iter().chain(own)
}

/// Makes, on the mask of `dir` (a writable tmpfs still), the directories the shown paths
/// inside it are bound onto, then makes the mask read-only.
unsafe fn make_mount_points(plan: &Plan, dir: &std::ffi::CStr, slot: RawFd) {
    for path in bound_back(plan).filter(|s| lies_inside(s, dir)) {
        let bytes = path.to_bytes();
        let inner = bytes[dir.to_bytes().len() + 1..]
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(i, _)| dir.to_bytes().len() + 1 + i)
            .chain([bytes.len()]);
        for end in inner {
            let Ok(step) = CString::new(&bytes[..end]) else {
                fail_later(slot, Stage::Show);
            };
            // SAFETY: mkdir of a NUL-terminated path.
            if unsafe { libc::mkdir(step.as_ptr(), 0o500) } != 0 && errno() != libc::EEXIST {
                fail_later(slot, Stage::Show);
            }
        }
    }
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: a remount of the tmpfs just mounted at `dir`.
    if unsafe {
        libc::mount(
            none,
            dir.as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } != 0
    {
        fail_later(slot, Stage::MaskDir);
    }
}

/// Binds each shown directory, through the descriptor held since before the masks, onto its
/// own path, read-only.
pub(super) unsafe fn bind_shown(plan: &Plan, held: Vec<RawFd>, slot: RawFd) {
    for (path, fd) in plan.shown.iter().zip(held) {
        let Ok(source) = CString::new(format!("/proc/self/fd/{fd}")) else {
            fail_later(slot, Stage::Show);
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
                || set_read_only(path, true) != 0
            {
                fail_later(slot, Stage::Show);
            }
            libc::close(fd);
        }
    }
}

/// Binds every directory above a hidden path onto itself, outer ones first (a later bind of an
/// inner one then lands on top), so that no run can rename one away, with a mask inside it.
pub(super) unsafe fn pin_directories(plan: &Plan, slot: RawFd) {
    for pin in &plan.pins {
        // SAFETY: a bind mount of a NUL-terminated path onto itself.
        if unsafe {
            libc::mount(
                pin.as_ptr(),
                pin.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        } != 0
        {
            fail_later(slot, Stage::Pin);
        }
    }
}

/// Covers every directory of `dirs` (the plan's hidden ones, or those a run on a desktop must
/// not reach) with an empty read-only tmpfs (writable until the mount points of the shown
/// directories inside it are made). With `gone_is_hidden`, a directory removed since the
/// daemon named it (another desktop closed meanwhile) is passed over: nothing is there to reach.
pub(super) unsafe fn mask_directories(
    plan: &Plan,
    dirs: &[CString],
    gone_is_hidden: bool,
    slot: RawFd,
) {
    for dir in dirs {
        let options = c"size=4k,mode=0500";
        let holds_shown = bound_back(plan).any(|s| lies_inside(s, dir));
        // A mask that holds a shown directory stays writable until its mount points exist.
        let read_only = if holds_shown { 0 } else { libc::MS_RDONLY };
        // SAFETY: a tmpfs mount on a NUL-terminated path, with NUL-terminated options.
        if unsafe {
            libc::mount(
                c"computer-hidden".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                read_only | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            )
        } != 0
        {
            if gone_is_hidden && errno() == libc::ENOENT {
                continue;
            }
            fail_later(slot, Stage::MaskDir);
        }
        if holds_shown {
            // SAFETY: `dir` holds the writable tmpfs just mounted.
            unsafe { make_mount_points(plan, dir, slot) };
        }
    }
}

/// Covers every hidden file (and every socket a run on a desktop must not reach: one removed
/// since the daemon named it is passed over) with a read-only bind of [`MASK_FILE`], made
/// first.
pub(super) unsafe fn mask_files(plan: &Plan, slot: RawFd) {
    let desktop_files = plan.desktop.as_ref().map_or(&[][..], |d| &d.hidden_files);
    if plan.masked_files.is_empty() && desktop_files.is_empty() {
        return;
    }
    // SAFETY: system calls on NUL-terminated paths of the plan and of this module.
    unsafe {
        make_mask_file(slot);
        let none = std::ptr::null::<libc::c_char>();
        for (at, file) in plan.masked_files.iter().chain(desktop_files).enumerate() {
            if libc::mount(
                MASK_FILE.as_ptr(),
                file.as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                if at >= plan.masked_files.len() && errno() == libc::ENOENT {
                    continue;
                }
                fail_later(slot, Stage::MaskFile);
            }
            if libc::mount(
                none,
                file.as_ptr(),
                none,
                libc::MS_BIND
                    | libc::MS_REMOUNT
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV
                    | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                fail_later(slot, Stage::MaskFile);
            }
        }
    }
}

/// Makes [`MASK_FILE`]: an empty file on a tmpfs made read-only (its superblock, not only this
/// mount), so that every bind of it refuses writes, whatever a writable limit clears.
unsafe fn make_mask_file(slot: RawFd) {
    // SAFETY: system calls on NUL-terminated paths of this module.
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        if libc::mount(
            c"computer-hidden".as_ptr(),
            MASK_FILE_DIR.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,mode=0500".as_ptr().cast(),
        ) != 0
        {
            fail_later(slot, Stage::MaskSource);
        }
        let made = libc::open(
            MASK_FILE.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o400,
        );
        if made < 0 {
            fail_later(slot, Stage::MaskSource);
        }
        libc::close(made);
        if libc::mount(
            none,
            MASK_FILE_DIR.as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            fail_later(slot, Stage::MaskSource);
        }
    }
}
