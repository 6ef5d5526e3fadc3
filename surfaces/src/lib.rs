//! The `Surface` trait and its backends: each surface validates a command into a prepared action
//! and runs it, knowing nothing of policy, receipts or sockets.
//!
//! # Layout
//! - `contract`: the `Surface` and `PreparedAction` traits and what passes through them
//!   (re-exported here); it knows no surface and not the registry.
//! - [`kit`]: what several surfaces stand on and none owns: runs and their containment, output
//!   capture, secrets and their masking, scripts read for their facts, effects and snapshots.
//! - [`shell`]: the shell surface: `run` (a one-shot run) and its terminal sessions
//!   ([`shell::session`]: a program on a pty, its screen as text).
//! - [`keychain`]: the `keychain` surface: keychain items named by reference, listed, looked up,
//!   stored and deleted; values shown only on an approved `reveal`.
//! - [`gui`]: screenshots, windows, pointer and keyboard; also the evidence capturer.
//! - [`accessibility`]: what any surface may read of the accessibility tree: the backends
//!   (AT-SPI on Linux, AXUIElement on macOS), windows, elements and the read-back of an act on
//!   one. No surface owns it; `ax` and `gui` both use it.
//! - [`ax`]: the ax surface: accessibility trees as outlines, selectors and actions.
//! - [`desktops`]: desktops of the agents' own (Linux): their servers and buses, the
//!   environment that puts a program there, and gui and ax surfaces bound to them alone.
//! - [`applescript`]: AppleScript and JXA through `osascript` (offered on macOS only).
//! - [`registry`]: the per-OS factory that picks the backends and logs its choice.

pub mod accessibility;
pub mod applescript;
pub mod ax;
mod contract;
pub mod desktops;
pub mod gui;
pub mod keychain;
pub mod kit;
pub mod registry;
pub mod shell;

pub use contract::*;
pub use registry::{Registry, SurfaceLimits};
