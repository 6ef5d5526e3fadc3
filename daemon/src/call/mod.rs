//! The call: what happens to one call between the way in ([`crate::server`]) and its reply, the
//! guard ([`crate::guard`]) and the record ([`crate::record`]) consulted on the way.
//!
//! # Layout
//! - [`gateway`]: a single call, composed of the stages; hands `steps` and jobs on.
//! - [`stages`]: the stages of one call, each written once: admit → decide → approve → write
//!   intent → execute → shape → finish; every caller composes them. Also the daemon's shared
//!   state ([`stages::DaemonState`]) they run on.
//! - [`steps`]: multi-step calls: every step decided, approved (one request) and receipted on its
//!   own, refs between steps, waits, `stop_on_error`, `return.select`.
//! - [`jobs`]: detached calls (`complications.detach`) and the `job` command that follows them.
//! - [`tools`]: programmatic calls from a run given `complications.tools`: what it may call, its
//!   capability (a token and an inherited channel) and the generated Python module.
//! - [`budget`]: the response budget (`complications.return`).
//! - [`replies`]: what a call answers: a reply in its three parts, errors as replies, a failed
//!   action's error and result body.
//! - [`own`]: the commands the daemon serves itself on the surfaces (`help`, `job`): their
//!   names, args and specs, below what lists and routes them.
//! - [`help`]: the `help` command every surface offers, which returns that reference.
//! - [`schema`]: the `COMPUTER` tool definition (short: every command with the args it needs)
//!   and each surface's full reference.
//! - [`cancel`]: why a call stopped early (client, disconnect).
//! - [`complications`]: the complications a call gives, and whether the surface it reaches
//!   honours each.
//! - [`evidence`]: the screenshots a call asks for (`complications.evidence`), of the desktop it
//!   acts on, and their report in its result.
//! - [`desktops`]: desktops of agents' own (`gui desktop`), whose each is, and the surfaces a
//!   call naming one acts through.

pub mod budget;
pub mod cancel;
pub mod complications;
pub mod desktops;
pub mod evidence;
pub mod gateway;
pub mod help;
pub mod jobs;
pub mod own;
pub mod replies;
pub mod schema;
pub mod stages;
pub mod steps;
pub mod tools;
