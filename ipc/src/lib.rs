//! Everything that crosses a process boundary between the computer daemon and its clients.
//!
//! # Layout
//! - [`call`]: the one tool's call shape (`surface`, `command`, `args`, `complications`).
//! - [`reply`]: the structured results and errors a call returns, and receipt references.
//! - [`paths`]: where the socket, state and config live, and the checks that keep them private.
//! - [`client`]: the Rust client, speaking MCP over the local socket like every other caller.

pub mod call;
pub mod client;
pub mod paths;
pub mod reply;

pub use call::{
    Complications, ComputerCall, Evidence, ReturnBudget, ReturnMode, Sandbox, SurfaceName,
};
pub use client::{Client, ClientError};
pub use reply::{ErrorCode, ToolError};

/// The name of the one tool the daemon serves.
pub const TOOL_NAME: &str = "COMPUTER";

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
