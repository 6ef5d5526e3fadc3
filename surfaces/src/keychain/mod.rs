//! The `keychain` surface: items of the OS keychain named by reference
//! (`keychain://<service>/<account>`), listed, looked up, stored and deleted; values shown only
//! on an approved `reveal`. The store itself, which every surface uses, is
//! [`crate::kit::secret_store`].
//!
//! # Layout
//! - `surface.rs`: the surface, its `[keychain]` section, and the probe.
//! - `commands/`: the commands, one file each (args, result fields, facts, run), listed once in
//!   its `TABLE`.

mod commands;
mod surface;

pub use surface::KeychainSurface;
