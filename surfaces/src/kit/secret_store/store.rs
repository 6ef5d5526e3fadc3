//! The secret store seam: one trait over the OS's keychain (the Secret Service on Linux, the
//! Keychain on macOS), its errors with their fixes, and the deadline every caller puts on it.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde::Serialize;

use super::reference::SecretRef;

/// An item as `list` shows it: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemInfo {
    pub service: String,
    pub account: String,
    pub label: String,
}

impl ItemInfo {
    pub fn reference(&self) -> SecretRef {
        SecretRef {
            service: self.service.clone(),
            account: self.account.clone(),
        }
    }
}

/// Where secrets are kept. Every method blocks on the OS store (D-Bus round trips, an unlock
/// prompt): call it from `spawn_blocking` or a thread of its own, under a deadline
/// ([`call_with_deadline`] does both).
pub trait SecretStore: Send + Sync + std::fmt::Debug {
    /// The value, resolved at the moment of use.
    fn get(&self, reference: &SecretRef) -> Result<SecretString, StoreError>;
    /// Stores `value` under `reference` with `label` (what keychain apps show), replacing the
    /// value and label of an item already there.
    fn set(
        &self,
        reference: &SecretRef,
        label: &str,
        value: &SecretString,
    ) -> Result<(), StoreError>;
    /// Deletes the item; false when there was none.
    fn delete(&self, reference: &SecretRef) -> Result<bool, StoreError>;
    /// Every item a reference can name (it has a service and an account), sorted; never values.
    fn list(&self) -> Result<Vec<ItemInfo>, StoreError>;
    /// The item's metadata without its value: `None` when there is no such item.
    fn info(&self, reference: &SecretRef) -> Result<Option<ItemInfo>, StoreError>;
    /// Whether the store answers and is unlocked, for `computer doctor`.
    fn probe(&self) -> Result<(), StoreError>;
    /// Whether a store is there to answer, without starting or unlocking one: the surface's
    /// probe, which runs often and must not launch a keyring daemon as a side effect.
    fn reachable(&self) -> Result<(), StoreError> {
        match self.probe() {
            Err(StoreError::Locked { .. } | StoreError::Refused { .. }) => Ok(()),
            other => other,
        }
    }
    /// Which store this is, for logs and `doctor` ("secret-service", "macos-keychain").
    fn backend(&self) -> &'static str;
}

/// Why the store could not do what was asked; each message says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No keychain service answers (no Secret Service on the session bus, no session bus).
    #[error("no keychain service answers: {reason}; {fix}")]
    NoService { reason: String, fix: String },
    /// The keychain (or the collection holding the item) is locked.
    #[error("the keychain is locked: {reason}; {fix}")]
    Locked { reason: String, fix: String },
    /// The person dismissed the unlock or access prompt, or the OS refused access.
    #[error("access to the keychain was refused: {reason}; {fix}")]
    Refused { reason: String, fix: String },
    /// No item under that reference.
    #[error(
        "no keychain item {reference}; `keychain list` shows the items there are, `computer secrets set {reference}` stores one"
    )]
    NotFound { reference: String },
    /// The store answered nothing within the deadline (an unanswered prompt, a stuck service).
    #[error("the keychain did not answer within {seconds} s; {fix}")]
    Unresponsive { seconds: u64, fix: String },
    /// Anything else the store reported.
    #[error("the keychain failed: {reason}")]
    Other { reason: String },
}

impl StoreError {
    /// A short stable word for the kind of failure (`doctor` and replies name it).
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::NoService { .. } => "no_service",
            StoreError::Locked { .. } => "locked",
            StoreError::Refused { .. } => "refused",
            StoreError::NotFound { .. } => "not_found",
            StoreError::Unresponsive { .. } => "unresponsive",
            StoreError::Other { .. } => "failed",
        }
    }

    pub fn not_found(reference: &SecretRef) -> StoreError {
        StoreError::NotFound {
            reference: reference.uri(),
        }
    }
}

/// How long one store call may take before callers give up on it: long enough for a person to
/// answer an unlock prompt, short enough that a stuck service does not hold a call for ever.
pub const STORE_DEADLINE: Duration = Duration::from_secs(30);

/// Runs `op` against `store` on a blocking thread, giving up after `deadline`. The blocking
/// thread may outlive the deadline (a D-Bus call cannot be abandoned); its result is dropped.
pub async fn call_with_deadline<T, F>(
    store: &Arc<dyn SecretStore>,
    deadline: Duration,
    op: F,
) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&dyn SecretStore) -> Result<T, StoreError> + Send + 'static,
{
    let store = store.clone();
    let task = tokio::task::spawn_blocking(move || op(store.as_ref()));
    match tokio::time::timeout(deadline, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(StoreError::Other {
            reason: format!("the keychain call stopped: {join}"),
        }),
        Err(_) => Err(StoreError::Unresponsive {
            seconds: deadline.as_secs(),
            fix: "answer or dismiss the keychain's unlock prompt, or restart the keychain service (gnome-keyring-daemon, KWallet) and try again".to_string(),
        }),
    }
}
