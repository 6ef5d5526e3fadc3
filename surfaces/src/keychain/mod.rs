//! The `keychain` surface: items of the OS keychain named by reference
//! (`keychain://<service>/<account>`), listed, looked up, stored and deleted; values shown only
//! on an approved `reveal`.
//!
//! - [`reference`]: the reference syntax other surfaces accept in place of a secret value.
//! - [`store`]: the [`SecretStore`] seam, its errors and the deadline its callers use.
//! - `surface`: the commands, their facts and risks, and the probe.
//! - `secret_service` (Linux) and `macos`: the OS stores.

pub mod reference;
pub mod store;
mod surface;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "linux")]
mod secret_service;

pub use reference::{RefError, SecretRef};
pub use store::{
    ItemInfo, STORE_DEADLINE, SecretStore, StoreError, call_with_deadline, system_store,
};
pub use surface::{DAEMON_SERVICES, KeychainSurface};
