//! The computer daemon: the server loop, the one dispatch path, the receipts ledger and the CLI.
//!
//! The folders follow the path of a call: it comes in through [`server`], goes through
//! [`call`] (the stages), is checked by [`guard`] on the way, and leaves its [`record`].
//!
//! # Layout
//! - [`server`]: the way in: sockets (private dir, single daemon, 0600), peer checks, the
//!   JSON-RPC transport, the MCP handler, and the control socket where people answer approvals.
//! - [`call`]: one call's path: the stages, a single call, multi-step calls, jobs, tools for
//!   runs, the response budget, replies, the daemon's own commands, the tool's schema.
//! - [`guard`]: policy, approvals, agents, rate limits, process ancestry, notifications and the
//!   descriptor budget.
//! - [`record`]: the receipts ledger, secrets kept out of it, and its export.
//! - [`config`]: embedded defaults and the optional TOML file.
//! - [`cli`]: the `computer` command's subcommands.
//! - [`docs`]: the book's generated pages (`computer docs --out DIR`): the tool, configuration
//!   and command-line references and `llms.txt`, rendered from the binary.
//! - [`reaper`]: the daemon as a child subreaper, so a process a run double-forks away stays its
//!   descendant (the control socket still tells it) and is reaped here.

pub mod call;
pub mod cli;
pub mod config;
pub mod docs;
pub mod guard;
pub mod reaper;
pub mod record;
pub mod server;

// The paths benches and fuzz targets name from outside the crate, kept as they were before the
// modules moved into their folders.
pub use call::{gateway, schema, tools};
pub use guard::{approval, policy, ratelimit};
pub use record::receipts;
pub use server::transport;
