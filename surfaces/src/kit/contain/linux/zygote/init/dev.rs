//! A root daemon's run's own `/dev`: a read-only tmpfs holding only what ordinary programs open.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::fail_later;
use crate::kit::contain::linux::report::Stage;

/// The device nodes a root daemon's run finds in its own `/dev` (as the machine's, when it has
/// them): what ordinary programs open. Disks, consoles, input devices and the like are not
/// there: a run as uid 0 could open every node root owns, capabilities or not.
const OWN_DEV_NODES: &[&std::ffi::CStr] = &[
    c"null", c"zero", c"full", c"random", c"urandom", c"tty", c"ptmx",
];
/// Directories of the machine's `/dev` a root daemon's run finds in its own, bound in whole:
/// shared memory and message queues programs share with the desktop, graphics and sound.
const OWN_DEV_DIRS: &[&std::ffi::CStr] = &[c"shm", c"mqueue", c"dri", c"snd"];
/// Symbolic links of every `/dev`.
const OWN_DEV_LINKS: &[(&std::ffi::CStr, &std::ffi::CStr)] = &[
    (c"fd", c"/proc/self/fd"),
    (c"stdin", c"/proc/self/fd/0"),
    (c"stdout", c"/proc/self/fd/1"),
    (c"stderr", c"/proc/self/fd/2"),
];

/// Covers `/dev` with a read-only tmpfs holding only [`OWN_DEV_NODES`] (made anew with the
/// machine's numbers and modes), [`OWN_DEV_DIRS`] (bound from the machine's), the usual links
/// and an empty `pts` for the run's devpts. For a root daemon's runs (in the init, which still
/// holds the capabilities to make nodes). Whether it all held.
pub(super) unsafe fn own_dev() -> bool {
    // SAFETY: system calls on paths and descriptors of this function; stat buffers we own.
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        // The machine's /dev, reachable through this descriptor once covered.
        let machine = libc::open(
            c"/dev".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if machine < 0 {
            return false;
        }
        let machine = OwnedFd::from_raw_fd(machine);
        let mut nodes = Vec::new();
        for name in OWN_DEV_NODES {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstatat(machine.as_raw_fd(), name.as_ptr(), &mut stat, 0) == 0
                && stat.st_mode & libc::S_IFMT == libc::S_IFCHR
            {
                nodes.push((*name, stat.st_mode, stat.st_rdev));
            }
        }
        if libc::mount(
            c"computer-dev".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"size=64k,mode=0755".as_ptr().cast(),
        ) != 0
        {
            return false;
        }
        let dev = libc::open(
            c"/dev".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dev < 0 {
            return false;
        }
        let dev = OwnedFd::from_raw_fd(dev);
        for (name, mode, rdev) in nodes {
            if libc::mknodat(dev.as_raw_fd(), name.as_ptr(), mode, rdev) != 0 {
                return false;
            }
            // mknod applies the umask; the machine's mode is what programs expect.
            if libc::fchmodat(dev.as_raw_fd(), name.as_ptr(), mode & 0o7777, 0) != 0 {
                return false;
            }
        }
        for (name, target) in OWN_DEV_LINKS {
            if libc::symlinkat(target.as_ptr(), dev.as_raw_fd(), name.as_ptr()) != 0 {
                return false;
            }
        }
        if libc::mkdirat(dev.as_raw_fd(), c"pts".as_ptr(), 0o755) != 0 {
            return false;
        }
        for name in OWN_DEV_DIRS {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstatat(machine.as_raw_fd(), name.as_ptr(), &mut stat, 0) != 0
                || stat.st_mode & libc::S_IFMT != libc::S_IFDIR
            {
                continue;
            }
            let from = CString::new(format!(
                "/proc/self/fd/{}/{}",
                machine.as_raw_fd(),
                name.to_string_lossy()
            ))
            .expect("no NUL");
            let to = CString::new(format!("/dev/{}", name.to_string_lossy())).expect("no NUL");
            if libc::mkdirat(dev.as_raw_fd(), name.as_ptr(), 0o755) != 0
                || libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
            {
                return false;
            }
        }
        // Nothing can be added to it: no node, no hard link to one.
        libc::mount(
            none,
            c"/dev".as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
            std::ptr::null(),
        ) == 0
    }
}

/// Mounts the run's own terminals: a devpts instance of its own on /dev/pts (hiding the empty
/// file masks are made of), its ptmx as /dev/ptmx. No pty of another run, of a session, or of
/// the person's is there to open.
pub(super) unsafe fn mount_own_devpts(slot: RawFd) {
    // SAFETY: mount calls with NUL-terminated strings.
    let mounted = unsafe {
        libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
        ) == 0
            && libc::mount(
                c"/dev/pts/ptmx".as_ptr(),
                c"/dev/ptmx".as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) == 0
    };
    if !mounted {
        fail_later(slot, Stage::Devpts);
    }
}
