//! The computer daemon: the server loop, the one dispatch path, the receipts ledger and the CLI.
//!
//! # Layout
//! - [`server`]: socket binding (private dir, single daemon, 0600), peer uid check, shutdown.
//! - `unlisted` (Linux): the daemon's listening sockets bound under a name that says nothing,
//!   then renamed to their paths, so `/proc/net/unix` lists no path of the daemon's.
//! - [`transport`]: newline-delimited JSON-RPC with a request size cap.
//! - [`mcp`]: the MCP handler of a connection, and the tasks extension's adapter.
//! - [`stages`]: the stages of one call, each written once: admit → decide → approve → write
//!   intent → execute → shape → finish; every caller below composes them.
//! - [`replies`]: what a call answers: a reply in its three parts, errors as replies, a failed
//!   action's error and result body.
//! - [`gateway`]: a single call, composed of the stages; hands `steps` and jobs on.
//! - [`steps`]: multi-step calls: every step decided, approved (one request) and receipted on its
//!   own, refs between steps, waits, `stop_on_error`, `return.select`.
//! - [`policy`]: rules over defaults by risk, protected paths, and the caller's identity.
//! - [`agents`]: agent profiles, tokens (stored as digests) and scopes.
//! - [`jobs`]: detached calls (`complications.detach`) and the `job` command that follows them.
//! - [`approval`]: pending requests, answers, session grants; deny on every failure.
//! - [`ancestry`]: whether a peer process descends from this daemon (both sockets refuse those).
//! - [`control`]: the control socket where people (never agents) answer approvals.
//! - [`desktops`]: desktops of agents' own (`gui desktop`), whose each is, and the surfaces a
//!   call naming one acts through.
//! - [`descriptors`]: the descriptor limit raised at start, and the budget of connections peers
//!   may hold, which leaves a reserve for the daemon's own work and the control socket.
//! - [`export`]: receipts sent on to syslog from a durable cursor behind the ledger.
//! - [`notify`]: desktop notifications of pending approvals.
//! - [`ratelimit`]: per-agent sliding-window limits.
//! - [`budget`]: the response budget (`complications.return`).
//! - [`cancel`]: why a call stopped early (client, disconnect).
//! - [`receipts`]: the hash-chained SQLite ledger with group commit.
//! - [`schema`]: the `COMPUTER` tool definition (short: every command with the args it needs)
//!   and each surface's full reference.
//! - [`own`]: the commands the daemon serves itself on the surfaces (`help`, `job`): their
//!   names, args and specs, below what lists and routes them.
//! - [`help`]: the `help` command every surface offers, which returns that reference.
//! - [`tools`]: programmatic calls from a run given `complications.tools`: what it may call, its
//!   capability (a token and an inherited channel) and the generated Python module.
//! - [`secrets`]: redaction in the pipeline: outcomes, replies, receipts and log lines masked;
//!   secret references in receipts as keyed digests.
//! - [`config`]: embedded defaults and the optional TOML file.
//! - [`cli`]: the `computer` command's subcommands.
//! - [`docs`]: the book's generated pages (`computer docs --out DIR`): the tool, configuration
//!   and command-line references and `llms.txt`, rendered from the binary.
//! - [`reaper`]: the daemon as a child subreaper, so a process a run double-forks away stays its
//!   descendant (the control socket still tells it) and is reaped here.

pub mod agents;
pub mod ancestry;
pub mod approval;
pub mod budget;
pub mod cancel;
pub mod cli;
pub mod config;
pub mod control;
pub mod descriptors;
pub mod desktops;
pub mod docs;
pub mod export;
pub mod gateway;
pub mod help;
pub mod jobs;
pub mod mcp;
pub mod notify;
pub mod own;
pub mod policy;
pub mod ratelimit;
pub mod reaper;
pub mod receipts;
pub mod replies;
pub mod schema;
pub mod secrets;
pub mod server;
pub mod stages;
pub mod steps;
pub mod tools;
pub mod transport;
#[cfg(target_os = "linux")]
pub mod unlisted;
