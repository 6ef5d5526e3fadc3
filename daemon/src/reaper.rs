//! Keeps the daemon's descendants its descendants: the daemon is a child subreaper, so a process
//! that a shell run double-forks away from its parent (`setsid cmd &`, then the parent exits) is
//! re-parented to the daemon instead of init, and the control socket still recognises it as the
//! daemon's doing. The orphans adopted this way are reaped here when they exit.

use std::io;

use computer_surfaces::kit::spawn::own_children;

/// Makes this process the reaper of its orphaned descendants (Linux; elsewhere a no-op that says
/// so, and the control socket's ancestry check covers only undetached descendants).
pub fn become_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory of ours.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "child subreapers exist only on Linux",
        ))
    }
}

/// Reaps adopted orphans whenever a child exits, for as long as the daemon runs.
pub async fn reap_adopted_orphans() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut exits = match signal(SignalKind::child()) {
        Ok(exits) => exits,
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch SIGCHLD; adopted orphans stay zombies");
            return;
        }
    };
    while exits.recv().await.is_some() {
        // SIGCHLDs coalesce: each wake-up reaps every exited adoptee at once.
        let reaped = reap_once();
        if reaped > 0 {
            tracing::debug!(reaped, "reaped adopted orphans");
        }
    }
}

/// Reaps the exited children that are not the shell surface's own (those have their waiters).
fn reap_once() -> usize {
    let own = own_children();
    let mut reaped = 0;
    for pid in zombie_children() {
        if own.contains(&pid) {
            continue;
        }
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        let mut status = 0;
        // SAFETY: waitpid on one pid that is our exited child; status is a valid out-pointer.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            reaped += 1;
        }
    }
    reaped
}

/// This process's children that have exited and wait to be reaped.
#[cfg(target_os = "linux")]
fn zombie_children() -> Vec<u32> {
    let own_pid = std::process::id();
    let children = children_of_this_process();
    let mut zombies = Vec::new();
    for pid in children {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces and parentheses): state, ppid.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse().ok()));
        if state == Some("Z") && ppid == Some(own_pid) {
            zombies.push(pid);
        }
    }
    zombies
}

/// Every child of every thread of this process, from /proc; the whole process table when the
/// kernel does not list children.
#[cfg(target_os = "linux")]
fn children_of_this_process() -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return pids;
    };
    let mut listed = false;
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            listed = true;
            pids.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    if !listed && let Ok(all) = std::fs::read_dir("/proc") {
        pids.extend(
            all.flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok()),
        );
    }
    pids
}

#[cfg(not(target_os = "linux"))]
fn zombie_children() -> Vec<u32> {
    Vec::new()
}
