//! Everything that crosses a process boundary between the computer daemon and its clients.
//!
//! # Layout
//! - [`call`]: the one tool's call shape (`surface`, `command`, `args`, `complications`), and
//!   the multi-step form (`steps`).
//! - [`reply`]: the structured results and errors a call returns, and receipt references.
//! - [`paths`]: where the socket, state and config live, and the checks that keep them private.
//! - [`client`]: the Rust client, speaking MCP over the local socket like every other caller.
//! - [`control`]: the control socket's wire (approvers' requests, the daemon's replies and
//!   events, the pending request) and its client.
//! - [`facts`]: the facts of an action, in the one shape policy, receipts and approvers share.
//! - [`shown`]: what approvers are shown of a pending call, exactly: the structured view of what
//!   will run and the one escaping function every approver uses.
//! - [`tools`]: programmatic calls from a run given tools: what `complications.tools` asks,
//!   the channel a run inherits, its wire and its client.
//! - `fdpass` (Unix): descriptors passed over a Unix socket (`SCM_RIGHTS`), which the
//!   containment's zygote and a run's tools channel both speak.

pub mod call;
pub mod client;
pub mod control;
pub mod facts;
#[cfg(unix)]
pub mod fdpass;
pub mod paths;
pub mod reply;
pub mod shown;
pub mod tools;

pub use call::{
    Complications, ComputerCall, Evidence, ReturnBudget, ReturnMode, Sandbox, StepsCall,
    StepsReturn, SurfaceName, WaitStep,
};
pub use client::{Client, ClientError};
pub use reply::{ErrorCode, ToolError};
pub use tools::ToolsAsk;

/// The name of the one tool the daemon serves.
pub const TOOL_NAME: &str = "COMPUTER";

/// The JSON-RPC method a client sends as its first line to present an agent token:
/// `{"jsonrpc":"2.0","method":"computer/authenticate","params":{"token":"ct_..."}}`.
pub const AUTHENTICATE_METHOD: &str = "computer/authenticate";

/// The param of [`AUTHENTICATE_METHOD`] that makes a connection observe-only (`true`): the
/// daemon then refuses whatever acts on it, for the connection's whole life.
pub const OBSERVE_ONLY_PARAM: &str = "observe_only";

/// Version of the call shape and reply fields, reported in the MCP server info.
///
/// Bumped when a field changes meaning; additions do not bump it.
pub const CALL_SHAPE_VERSION: u32 = 1;

/// MCP protocol revisions the daemon negotiates, oldest first.
///
/// `2026-07-28` is the stateless revision (no `initialize`; the version rides in each request's
/// `_meta`). Older clients that send an `initialize` handshake get their own version echoed back;
/// those before `2025-06-18` get no `structuredContent` (the text content carries the same JSON).
pub const MCP_PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];
