//! The macOS backend of the gui surface.
//!
//! # Layout
//! - `desktop` (macOS): the backend: captures through xcap, windows and displays from
//!   CoreGraphics, pointer and keyboard through CGEvent, focus through AX.
//! - `keys`: characters and key names as macOS virtual key codes (also built in tests on other
//!   platforms, where its table is checked).

#[cfg(target_os = "macos")]
mod desktop;
mod keys;

#[cfg(target_os = "macos")]
pub use desktop::Backend;
