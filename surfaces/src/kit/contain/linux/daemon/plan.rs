//! The [`Plan`] every slot is made under: what to hide, show and make read-only, built once by
//! the daemon from its config and handed to the zygote.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::super::wire::Plan;

impl Plan {
    pub(in crate::kit::contain) fn new(
        hidden: &[PathBuf],
        shown: &[PathBuf],
        read_only: &[PathBuf],
    ) -> io::Result<Plan> {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut pins: Vec<PathBuf> = Vec::new();
        for path in hidden {
            // Only what exists can be covered; the daemon names the directory of a file it
            // has not written yet (its config), so that no run can create it.
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            let (target, is_dir) = (path.clone(), meta.is_dir());
            for ancestor in target.ancestors().skip(1) {
                if ancestor != Path::new("/") && !pins.iter().any(|p| p == ancestor) {
                    pins.push(ancestor.to_path_buf());
                }
            }
            if is_dir {
                dirs.push(target);
            } else {
                files.push(target);
            }
        }
        // Outer directories are pinned first; a later bind of an inner one then lands on top.
        pins.sort_by_key(|p| p.components().count());
        let c = |p: &PathBuf| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
        };
        let namespaces = if uid == 0 {
            "mount and PID namespaces per run (no user namespace: the daemon is root, so runs \
             run as root with every capability dropped)"
        } else {
            "user, mount and PID namespaces per run"
        };
        // Every directory above a login file, up to (not) `/`: covered or not, a login file
        // stays where it is named only while no directory above it can be renamed.
        let mut read_only_pins: Vec<PathBuf> = Vec::new();
        for path in read_only {
            for ancestor in path.ancestors().skip(1) {
                if ancestor != Path::new("/") && !read_only_pins.iter().any(|p| p == ancestor) {
                    read_only_pins.push(ancestor.to_path_buf());
                }
            }
        }
        read_only_pins.sort_by_key(|p| p.components().count());
        let mut read_only = read_only.to_vec();
        read_only.sort_by_key(|p| p.components().count());
        let hidden_list: Vec<String> = dirs
            .iter()
            .chain(&files)
            .map(|p| p.display().to_string())
            .collect();
        let shown_list = if shown.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = shown.iter().map(|p| p.display().to_string()).collect();
            format!("; shown read-only: {}", list.join(", "))
        };
        let described = format!(
            "{namespaces}; hidden from runs: {}{shown_list}; \
             a run sees only its own processes and its own \
             terminals (a private /dev/pts), holds no capability, cannot gain privileges \
             (no_new_privs), finds /proc/sys and /sys read-only, finds the files that run code \
             at the next login read-only ({} of them, where they exist), has a kernel keyring \
             of its own, and everything it started is killed when it ends; {}",
            hidden_list.join(", "),
            read_only.len(),
            super::desktop::described()
        );
        Ok(Plan {
            rootless: uid != 0,
            uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("digits only"),
            gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("digits only"),
            pins: pins.iter().map(c).collect::<io::Result<_>>()?,
            masked_dirs: dirs.iter().map(c).collect::<io::Result<_>>()?,
            masked_files: files.iter().map(c).collect::<io::Result<_>>()?,
            shown: shown.iter().map(c).collect::<io::Result<_>>()?,
            read_only: read_only.iter().map(c).collect::<io::Result<_>>()?,
            read_only_pins: read_only_pins.iter().map(c).collect::<io::Result<_>>()?,
            no_network: false,
            writable: None,
            desktop: None,
            described,
        })
    }

    pub(in crate::kit::contain) fn describe(&self) -> String {
        self.described.clone()
    }
}
