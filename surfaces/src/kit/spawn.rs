//! What every surface that starts a process shares: finding its program as execvp would, the
//! secrets handed to it in its environment zeroed in the daemon once it has them, and the
//! register of the children the daemon waits for itself (which the orphan reaper leaves alone).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::kit::contain::ExecSpec;

/// Finds `name` the way execvp would: as given when it holds a slash, else in each PATH directory.
pub(crate) fn resolve_program(name: &str, path_var: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    path_var
        .split(':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(dir)
            }
        })
        .map(|dir| dir.join(name))
        .find(|candidate| runnable(candidate))
}

/// Zeroes this daemon's copy of the secrets' values (the variables `names`) in a run's
/// environment once the run has it. (Copies the standard library or containment made to start
/// the run are theirs.)
pub(crate) fn zero_secret_env<'a>(exec: &mut ExecSpec, names: impl Iterator<Item = &'a String>) {
    use std::os::unix::ffi::OsStringExt;
    let names: Vec<&String> = names.collect();
    for (key, value) in &mut exec.env {
        if names.iter().any(|name| key.as_os_str() == name.as_str()) {
            let bytes = std::mem::take(value).into_vec();
            drop(zeroize::Zeroizing::new(bytes));
        }
    }
}

/// The pids of the children that runs and sessions spawned and wait for themselves. A process that
/// reaps orphans it adopted (the daemon is a child subreaper) must leave these alone: their exit
/// status belongs to their waiter. Hold the lock while reaping; spawns take it too.
pub fn own_children() -> MutexGuard<'static, BTreeSet<u32>> {
    static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
    OWN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Unregisters a run's child once the run is done with it.
pub(crate) struct OwnChild(pub(crate) u32);

impl Drop for OwnChild {
    fn drop(&mut self) {
        own_children().remove(&self.0);
    }
}
