//! The secret store every surface uses, owned by none: references (`keychain://service/account`),
//! the [`SecretStore`] seam over the OS's keychain with its errors and deadline, and the store
//! of this OS. The `keychain` surface is one of its users.
//!
//! - [`reference`]: the reference syntax every surface accepts in place of a secret value.
//! - [`store`]: the [`SecretStore`] seam, its errors and the deadline its callers use.
//! - `secret_service` (Linux) and `macos`: the OS stores; [`system_store`] picks one.

pub mod reference;
pub mod store;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "linux")]
mod secret_service;

use std::sync::Arc;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use secrecy::SecretString;

pub use reference::{RefError, SecretRef};
pub use store::{ItemInfo, STORE_DEADLINE, SecretStore, StoreError, call_with_deadline};

/// The services of the daemon's own keychain items (the portal's restore token, the GNOME
/// consent), which calls may neither set, delete nor reveal.
pub const DAEMON_SERVICES: &str = "computer.";

/// The real store of this OS, shared. It connects lazily: building it never fails, and a
/// missing or locked keychain shows in [`SecretStore::probe`] and in each call's error.
pub fn system_store() -> Arc<dyn SecretStore> {
    #[cfg(target_os = "linux")]
    {
        Arc::new(secret_service::SecretServiceStore::new())
    }
    #[cfg(target_os = "macos")]
    {
        Arc::new(macos::MacKeychain::new())
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Arc::new(Absent)
    }
}

/// The store of a platform without a supported keychain: every call says so.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[derive(Debug)]
struct Absent;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
impl Absent {
    fn error() -> StoreError {
        StoreError::NoService {
            reason: "this platform has no supported keychain".to_string(),
            fix: "use Linux (Secret Service) or macOS (Keychain)".to_string(),
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
impl SecretStore for Absent {
    fn get(&self, _: &SecretRef) -> Result<SecretString, StoreError> {
        Err(Self::error())
    }
    fn set(&self, _: &SecretRef, _: &str, _: &SecretString) -> Result<(), StoreError> {
        Err(Self::error())
    }
    fn delete(&self, _: &SecretRef) -> Result<bool, StoreError> {
        Err(Self::error())
    }
    fn list(&self) -> Result<Vec<ItemInfo>, StoreError> {
        Err(Self::error())
    }
    fn info(&self, _: &SecretRef) -> Result<Option<ItemInfo>, StoreError> {
        Err(Self::error())
    }
    fn probe(&self) -> Result<(), StoreError> {
        Err(Self::error())
    }
    fn backend(&self) -> &'static str {
        "none"
    }
}
