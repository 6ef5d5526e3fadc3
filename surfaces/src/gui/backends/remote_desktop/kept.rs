//! What the GNOME and portal backends keep in the keychain surface's store (GNOME's consent,
//! the portal's restore token): the service their items are kept under, and the store calls
//! they make off the async runtime.

use std::sync::Arc;
use std::time::Duration;

use crate::kit::secret_store::{SecretStore, StoreError};

/// The service the items are kept under, among the daemon's own items, which the keychain
/// surface lets no call set.
pub const SERVICE: &str = "computer.gui";
/// How long a store call may take before what it looks for counts as missing (deny when in
/// doubt).
const STORE_BOUND: Duration = Duration::from_secs(10);

/// Runs a store call on a thread of its own: the Secret Service store blocks on a runtime of
/// its own, which cannot start inside another (the surface calls this from async tasks too).
pub fn off_runtime<T: Send + 'static>(
    store: Arc<dyn SecretStore>,
    op: impl FnOnce(&dyn SecretStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("gnome-consent".into())
        .spawn(move || {
            let _ = sender.send(op(store.as_ref()));
        })
        .map_err(|err| StoreError::Other {
            reason: format!("no thread for the keychain call: {err}"),
        })?;
    receiver
        .recv_timeout(STORE_BOUND)
        .unwrap_or(Err(StoreError::Unresponsive {
            seconds: STORE_BOUND.as_secs(),
            fix: "unlock the keychain or restart its service, then try again".into(),
        }))
}
