//! The daemon's descriptors: the soft limit raised to the hard one at start, and one budget that
//! every connection a peer can open at will (agent clients, the connections of runs' tools
//! channels) draws from. The budget leaves a reserve below the limit for what the daemon opens
//! itself (the ledger, a run's pipes, its containment's sockets) and for the control socket,
//! which never draws from it: a client or a run that opens connections without end is refused
//! before the person's approvals or another agent's calls run out of descriptors.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The budget keeps back a quarter of the limit, and at least 256 descriptors (half of a limit
/// under 512).
const RESERVE_AT_LEAST: usize = 256;
const RESERVE_SHARE: usize = 4;

/// Connections peers hold, against the cap the limit leaves them.
#[derive(Debug)]
pub struct Budget {
    held: AtomicUsize,
    cap: usize,
    /// The soft limit the cap was derived from.
    pub limit: usize,
}

/// One connection's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    budget: &'static Budget,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Budget {
    /// A budget for a process whose descriptor limit is `limit`, the reserve kept back.
    pub fn for_limit(limit: usize) -> Budget {
        let reserve = (limit / RESERVE_SHARE).max(RESERVE_AT_LEAST.min(limit / 2));
        Budget {
            held: AtomicUsize::new(0),
            cap: limit.saturating_sub(reserve),
            limit,
        }
    }

    /// A permit for one more connection, or `None` when the cap is reached.
    pub fn try_take(&'static self) -> Option<Permit> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < self.cap).then_some(held + 1)
            })
            .ok()
            .map(|_| Permit { budget: self })
    }

    /// How many connections may be held at once.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// How many are held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

/// The daemon's budget; the first use raises the soft descriptor limit to the hard one.
pub fn budget() -> &'static Budget {
    static BUDGET: OnceLock<Budget> = OnceLock::new();
    BUDGET.get_or_init(|| Budget::for_limit(raise_limit()))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (where it is lower); returns the soft limit
/// in force after.
fn raise_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the structure we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the descriptor limit; assuming 1024");
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the structure we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                soft = limit.rlim_cur,
                hard = limit.rlim_max,
                "cannot raise the descriptor limit to the hard one"
            );
        }
    }
    usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_a_reserve_and_permits_come_back() {
        let budget: &'static Budget = Box::leak(Box::new(Budget::for_limit(1024)));
        assert_eq!(budget.cap(), 768);
        let held: Vec<Permit> = (0..768).map(|_| budget.try_take().unwrap()).collect();
        assert!(budget.try_take().is_none(), "over the cap");
        drop(held);
        assert_eq!(budget.held(), 0);
        assert!(budget.try_take().is_some());
        let small = Budget::for_limit(100);
        assert_eq!(small.cap(), 50, "a small limit lends half");
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let limit = budget().limit;
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the structure we own.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
        assert_eq!(now.rlim_cur, now.rlim_max);
        assert_eq!(limit as u64, now.rlim_cur);
    }
}
