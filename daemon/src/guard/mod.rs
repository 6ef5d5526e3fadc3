//! The guard: who may call, what is allowed, who must be asked, and how much a caller may take.
//!
//! # Layout
//! - [`policy`]: rules over defaults by risk, protected paths, and the caller's identity.
//! - [`approval`]: pending requests, answers, session grants; deny on every failure.
//! - [`agents`]: agent profiles, tokens (stored as digests) and scopes.
//! - [`ratelimit`]: per-agent sliding-window limits.
//! - [`ancestry`]: whether a peer process descends from this daemon (both sockets refuse those).
//! - [`notify`]: desktop notifications of pending approvals.
//! - [`descriptors`]: the descriptor limit raised at start, and the budget of connections peers
//!   may hold, which leaves a reserve for the daemon's own work and the control socket.

pub mod agents;
pub mod ancestry;
pub mod approval;
pub mod descriptors;
pub mod notify;
pub mod policy;
pub mod ratelimit;
