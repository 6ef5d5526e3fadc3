//! Terminals known by what they are: a terminal emulator holds the master side of the
//! pseudo-terminal its shell runs on (opened from `/dev/ptmx`), whatever its window is called.
//! So a window whose process, or a descendant of it, holds a pty master open is a terminal
//! (see `commands::Terminals`), beside the names in `[gui] terminal_apps`: elementary's
//! terminal, Warp, WaveTerm, Termite and any other emulator on no list are known too. Electron
//! terminals keep their ptys in a child process, which is why descendants count. It errs on the
//! strict side: a window whose process started a terminal as its child (a file manager's "open
//! a terminal here", an editor with a built-in terminal) is taken for a terminal too, so its
//! line ends are decided as a shell's. A pty held by a process that left the tree (a
//! double-forked server such as tmux's) is not seen; the emulator showing it holds its own.
//!
//! The look is bounded (processes and descriptors per window) and its answer kept briefly per
//! process, so that a run of keystrokes does not walk `/proc` for each. A process whose
//! descriptors cannot be read (another user's, or one that made itself undumpable) holds none
//! that this can see: its window is a terminal by its name only.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Processes looked at per window: the window's own first, then its descendants, nearest
/// first. A terminal emulator holds its ptys itself or in a child; a window whose tree is
/// larger than this and holds none in the part looked at is not known as a terminal by this.
const MAX_PROCESSES: usize = 512;

/// Descriptors looked at per process (a pty master is among the first an emulator opens).
const MAX_FDS_PER_PROCESS: usize = 4096;

/// How long an answer is kept for a process: long enough that a call's keystrokes and the
/// checks around them share one look, short enough that a terminal which opens its first pty
/// after its window shows is known within it.
const KEPT_FOR: Duration = Duration::from_secs(2);

/// Processes found to be (or not to be) holding a pty master, and when.
static ANSWERS: Mutex<Option<HashMap<u32, (bool, Instant)>>> = Mutex::new(None);

/// Whether process `pid` or one of its descendants holds a pty master open.
pub fn holds_pty_master(pid: u32) -> bool {
    let now = Instant::now();
    {
        let answers = ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(holds, at)) = answers.as_ref().and_then(|a| a.get(&pid))
            && now.duration_since(at) < KEPT_FOR
        {
            return holds;
        }
    }
    let holds = tree_holds_pty_master(Path::new("/proc"), pid);
    let mut answers = ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
    let answers = answers.get_or_insert_with(HashMap::new);
    answers.retain(|_, (_, at)| now.duration_since(*at) < KEPT_FOR);
    answers.insert(pid, (holds, now));
    holds
}

/// The walk over `proc` (a procfs mount): breadth first from `pid`, at most
/// [`MAX_PROCESSES`] processes.
fn tree_holds_pty_master(proc: &Path, pid: u32) -> bool {
    let mut queue = VecDeque::from([pid]);
    let mut seen = HashSet::from([pid]);
    // Built only where the kernel lists no children per task (no CONFIG_PROC_CHILDREN).
    let mut parents: Option<HashMap<u32, Vec<u32>>> = None;
    let mut looked_at = 0;
    while let Some(process) = queue.pop_front() {
        if looked_at == MAX_PROCESSES {
            tracing::debug!(
                pid,
                "a window's process tree is larger than the {MAX_PROCESSES} processes looked at \
                 for a pty master"
            );
            return false;
        }
        looked_at += 1;
        if holds_one(proc, process) {
            return true;
        }
        let children = match children_of(proc, process) {
            Some(children) => children,
            None => parents
                .get_or_insert_with(|| children_by_parent(proc))
                .get(&process)
                .cloned()
                .unwrap_or_default(),
        };
        for child in children {
            if seen.insert(child) {
                queue.push_back(child);
            }
        }
    }
    false
}

/// Whether `pid` itself has a pty master among its first [`MAX_FDS_PER_PROCESS`] descriptors.
fn holds_one(proc: &Path, pid: u32) -> bool {
    let fds = proc.join(pid.to_string()).join("fd");
    let Ok(entries) = std::fs::read_dir(&fds) else {
        return false;
    };
    entries
        .take(MAX_FDS_PER_PROCESS)
        .filter_map(Result::ok)
        .any(|entry| is_pty_master(&entry.path()))
}

/// Whether the descriptor at `fd` (a `/proc/<pid>/fd/<n>` link) is a pty master: opened from
/// `/dev/ptmx` or `/dev/pts/ptmx`. A `ptmx` elsewhere (a devpts of another mount namespace, as
/// in a Flatpak sandbox) counts when it is the multiplexor device itself (major 5, minor 2).
fn is_pty_master(fd: &Path) -> bool {
    let Ok(target) = std::fs::read_link(fd) else {
        return false;
    };
    if target == Path::new("/dev/ptmx") || target == Path::new("/dev/pts/ptmx") {
        return true;
    }
    if target.file_name() != Some(std::ffi::OsStr::new("ptmx")) {
        return false;
    }
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // Through the link: the descriptor's own file, wherever it was opened.
    std::fs::metadata(fd)
        .is_ok_and(|meta| meta.file_type().is_char_device() && meta.rdev() == libc::makedev(5, 2))
}

/// The children of `pid`, from `/proc/<pid>/task/<tid>/children` (each thread's); None where
/// the kernel keeps no such files (built without `CONFIG_PROC_CHILDREN`).
fn children_of(proc: &Path, pid: u32) -> Option<Vec<u32>> {
    static LISTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*LISTED.get_or_init(|| Path::new("/proc/thread-self/children").exists()) {
        return None;
    }
    // A process gone or unreadable meanwhile has no children to look at.
    let Ok(tasks) = std::fs::read_dir(proc.join(pid.to_string()).join("task")) else {
        return Some(Vec::new());
    };
    let mut children = Vec::new();
    for task in tasks.filter_map(Result::ok) {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    Some(children)
}

/// Every process's children, from each `/proc/<pid>/stat`'s parent field.
fn children_by_parent(proc: &Path) -> HashMap<u32, Vec<u32>> {
    let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return parents;
    };
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the command may hold spaces and parentheses.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        parents.entry(ppid).or_default().push(pid);
    }
    parents
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process of the test's own that opens a pty master is found, and through its parent
    /// (this test) too; a process beside it that holds none is not.
    #[test]
    fn a_process_holding_a_pty_master_is_found_through_its_parent() {
        let proc = Path::new("/proc");
        let me = std::process::id();
        // A process that holds none, beside it.
        let mut bystander = std::process::Command::new("sh")
            .args(["-c", "read line"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        // `sh` opens /dev/ptmx on descriptor 3, says so, and waits; its parent is this test.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exec 3<>/dev/ptmx; echo held; read line"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = child.id();
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
            &mut said,
        )
        .expect("sh's line");
        assert_eq!(said, "held\n");
        assert!(holds_one(proc, pid), "sh holds /dev/ptmx open");
        assert!(tree_holds_pty_master(proc, pid));
        assert!(!tree_holds_pty_master(proc, bystander.id()));
        assert!(
            tree_holds_pty_master(proc, me),
            "the pty master of a child counts for its parent"
        );
        drop(child.stdin.take());
        child.wait().unwrap();
        drop(bystander.stdin.take());
        bystander.wait().unwrap();
        assert!(
            !tree_holds_pty_master(proc, pid),
            "a process gone holds none"
        );
    }
}
