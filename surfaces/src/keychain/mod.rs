//! The `keychain` surface: items of the OS keychain named by reference
//! (`keychain://<service>/<account>`), listed, looked up, stored and deleted; values shown only
//! on an approved `reveal`. The store itself, which every surface uses, is
//! [`crate::secret_store`].
//!
//! - `surface`: the commands, their facts and risks, and the probe.

mod surface;

pub use surface::KeychainSurface;
