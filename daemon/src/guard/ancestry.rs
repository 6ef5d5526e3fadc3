//! Process ancestry: whether a peer descends from this daemon. Both sockets ask it, because a
//! process a surface started (and everything it starts, detached or not: the daemon is a child
//! subreaper on Linux) is an agent's doing, never a person's answer nor a fresh agent. The
//! control socket also asks what a peer is kin to (lineage, process group and session), to
//! refuse answers from terminals an agent typed into.

/// Whether `ancestor` is `pid` or one of its ancestors. An unreadable ancestry is an error, so
/// callers can refuse on it.
pub fn descends_from(pid: i32, ancestor: i32) -> Result<bool, String> {
    let mut current = pid;
    for _ in 0..4096 {
        if current == ancestor {
            return Ok(true);
        }
        if current <= 1 {
            return Ok(false);
        }
        current = parent_pid(current).ok_or_else(|| format!("ancestry of pid {pid} unreadable"))?;
    }
    Err("ancestry too deep".into())
}

/// `pid` and its ancestors below init, as far as they can be read.
pub fn lineage(pid: i32) -> Vec<i32> {
    let mut chain = Vec::new();
    let mut current = pid;
    while current > 1 && chain.len() < 4096 {
        chain.push(current);
        match parent_pid(current) {
            Some(parent) => current = parent,
            None => break,
        }
    }
    chain
}

/// The processes `pid` keeps ties with even when it leaves its parent (a double fork leaves it
/// to init): its lineage, and those of its process group's and session's leaders, which a
/// fork keeps unless it starts a session of its own (`setsid`).
pub fn kin(pid: i32) -> Vec<i32> {
    let mut kin = lineage(pid);
    for leader in group_and_session(pid).into_iter().flatten() {
        for relative in lineage(leader) {
            if !kin.contains(&relative) {
                kin.push(relative);
            }
        }
    }
    kin
}

/// The fields of `/proc/PID/stat` after the command name (the third field on).
#[cfg(target_os = "linux")]
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last ')' do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

#[cfg(target_os = "linux")]
fn parent_pid(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// The leaders of `pid`'s process group and session.
#[cfg(target_os = "linux")]
fn group_and_session(pid: i32) -> [Option<i32>; 2] {
    let fields = stat_fields(pid).unwrap_or_default();
    let leader = |index: usize| fields.get(index).and_then(|f| f.parse().ok());
    [leader(2), leader(3)]
}

/// macOS's `ps` names a process's group leader, but its session only by a kernel address.
#[cfg(not(target_os = "linux"))]
fn group_and_session(pid: i32) -> [Option<i32>; 2] {
    let group = std::process::Command::new("ps")
        .args(["-o", "pgid=", "-p", &pid.to_string()])
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok());
    [group, None]
}

#[cfg(not(target_os = "linux"))]
fn parent_pid(pid: i32) -> Option<i32> {
    let out = std::process::Command::new("ps")
        .args(["-o", "ppid=", "-p", &pid.to_string()])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineage_runs_from_the_pid_up_to_below_init() {
        let own = std::process::id() as i32;
        let chain = lineage(own);
        assert_eq!(chain.first(), Some(&own));
        assert_eq!(chain.get(1).copied(), parent_pid(own));
        assert!(!chain.contains(&1), "init is never protected");
        assert!(descends_from(own, *chain.last().unwrap()).unwrap());
    }

    #[test]
    fn kin_holds_the_lineage_and_the_group_and_session_leaders() {
        let own = std::process::id() as i32;
        let kin = kin(own);
        assert_eq!(kin[..lineage(own).len()], lineage(own)[..]);
        // SAFETY: getpgrp and getsid have no preconditions.
        let (group, session) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
        for leader in [group, session].into_iter().filter(|l| *l > 1) {
            assert!(kin.contains(&leader), "{leader} missing from {kin:?}");
        }
    }

    #[test]
    fn a_process_is_not_its_own_childs_descendant() {
        let own = std::process::id() as i32;
        let parent = parent_pid(own).expect("parent");
        assert!(!descends_from(parent, own).unwrap());
    }
}
