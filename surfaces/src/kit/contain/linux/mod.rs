//! Linux containment: runs get user (unless the daemon is root), mount and PID namespaces,
//! set up ahead of them by processes that hold nothing of the daemon's.
//!
//! The processes of a run:
//! - the *zygote*, started from the daemon's binary at start-up (its loop, [`serve_if_zygote`],
//!   is in `zygote/`; the daemon's handle on it is `daemon/zygote_handle.rs`), forks *slots* and sends them to the
//!   daemon, which keeps them at hand and hands runs straight to them;
//! - the *supervisor* (in the daemon's PID namespace) unshares the namespaces, forks the init
//!   and waits for it;
//! - the *init* (pid 1 of the run's PID namespace) masks the daemon's paths, mounts a `/proc`
//!   that shows only its runs, and then serves runs one at a time: the request (program, argv,
//!   env, cwd) and the run's descriptors. It changes to the run's directory (after the masks, so
//!   that no directory opened before them leads around them), starts the program, and when the
//!   program ends (or the daemon closes the run's stop pipe) counts what is left, kills it all,
//!   reports, and takes the next run only once nothing of this one is left;
//! - the *program*, a `clone(CLONE_VM | CLONE_VFORK)` child of the init (as posix_spawn's), which
//!   drops what it must not keep and executes what the run asked for.
//!
//! When the init dies the kernel kills every process of its namespace, so nothing a run starts
//! outlives it: not `setsid`, not a double fork. The init dies with the supervisor, the
//! supervisor with the zygote, the zygote with the daemon (`PR_SET_PDEATHSIG` each).
//!
//! A setup step that fails is reported to the run the slot is handed, so a run is refused with
//! the stage that failed rather than started uncontained.
//!
//! # Layout
//! - `daemon/`: the daemon's side: the plan, the launcher that hands runs to slots, the runs it
//!   follows, and its handle on the zygote.
//! - `zygote/`: the zygote's side: its loop, a slot's supervisor, its init and the program.
//! - `wire.rs`: what the daemon, the zygote and a slot's init send each other over their
//!   sockets; both sides build on it and neither on the other.
//! - `report.rs`: the records a run's init reports on the run's report pipe, and the setup
//!   stages named in them.
//! - `landlock.rs`: Landlock scoping of abstract sockets, asked for by the daemon and applied
//!   by the init of a run on a desktop of an agent's own.

mod daemon;
mod landlock;
mod report;
mod wire;
mod zygote;

pub(super) use daemon::{Handover, Launcher, Pipes, Run};
pub(super) use wire::Plan;
pub use zygote::serve_if_zygote;
