//! The `Surface` trait and its backends: each surface validates a command into a prepared action
//! and runs it, knowing nothing of policy, receipts or sockets.
//!
//! # Layout
//! - `contract`: the `Surface` and `PreparedAction` traits and what passes through them
//!   (re-exported here); it knows no surface and not the registry.
//! - [`capture`]: bounded capture of an output stream (head, tail, sha256, spill to an artifact).
//! - [`contain`]: containment of the processes runs start (namespaces on Linux, Seatbelt on macOS).
//! - [`one_shot`]: one-shot runs of argv or a script in their own process group (containment,
//!   deadline, bounded capture), which `shell run` and `applescript run` share.
//! - [`shell`]: the shell surface: `run` (a one-shot run) and its terminal sessions
//!   ([`shell::session`]: a program on a pty, its screen as text).
//! - [`command_line`]: a terminal's command line as typed keys leave it (gui terminals and
//!   shell sessions).
//! - [`spawn`]: what every surface that starts a process shares (finding the program, secrets
//!   in its environment, the children the daemon waits for itself).
//! - [`script`]: what a shell run will execute, found with a shell parser (for [`ActionFacts`]).
//! - [`effect`]: what an act achieved, read back after it (`effect`, `effect_evidence`).
//! - [`mask`]: secret values masked in every common encoding, also across stream chunks.
//! - [`secrets`]: secrets a call references, the per-call holder of resolved values that masks
//!   everything the call produces, and resolution at the moment of use.
//! - [`secret_store`]: references, the seam over the OS keychain and its store, which every
//!   surface uses (the `keychain` surface is one of them).
//! - [`keychain`]: the `keychain` surface: keychain items named by reference, listed, looked up,
//!   stored and deleted; values shown only on an approved `reveal`.
//! - [`gui`]: screenshots, windows, pointer and keyboard; also the evidence capturer.
//! - [`accessibility`]: what any surface may read of the accessibility tree: the backends
//!   (AT-SPI on Linux, AXUIElement on macOS), windows, elements and the read-back of an act on
//!   one. No surface owns it; `ax` and `gui` both use it.
//! - [`ax`]: the ax surface: accessibility trees as outlines, selectors and actions.
//! - [`applescript`]: AppleScript and JXA through `osascript` (offered on macOS only).
//! - [`registry`]: the per-OS factory that picks the backends and logs its choice.
//! - [`snapshot`]: observations remembered per agent, for acts bound to them (`seen`).

pub mod accessibility;
pub mod applescript;
pub mod ax;
pub mod capture;
pub mod command_line;
pub mod contain;
mod contract;
pub mod effect;
pub mod gui;
pub mod keychain;
pub mod mask;
pub mod one_shot;
pub mod registry;
pub mod script;
pub mod secret_store;
pub mod secrets;
pub mod shell;
pub mod snapshot;
pub mod spawn;

pub use contract::*;
pub use registry::{Registry, SurfaceLimits};
