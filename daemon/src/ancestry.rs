//! Process ancestry: whether a peer descends from this daemon. Both sockets ask it, because a
//! process a surface started (and everything it starts, detached or not: the daemon is a child
//! subreaper on Linux) is an agent's doing, never a person's answer nor a fresh agent.

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

#[cfg(target_os = "linux")]
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last ')' do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
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
    fn a_process_is_not_its_own_childs_descendant() {
        let own = std::process::id() as i32;
        let parent = parent_pid(own).expect("parent");
        assert!(!descends_from(parent, own).unwrap());
    }
}
