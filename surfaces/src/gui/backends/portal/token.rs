//! The xdg-desktop-portal's restore token: what the portal returns when the person allowed a
//! remote-desktop session to be restored, and what lets the next session start without asking
//! again. It grants screen capture and input to whoever presents it, so it is kept as a secret
//! in the keychain surface's store, among the daemon's own items
//! (`keychain://computer.gui/portal-restore-token`, which no call may set), and never logged,
//! receipted or replied. The portal replaces it at every start, so the latest one is kept.

use std::sync::Arc;

use secrecy::SecretString;

use super::super::remote_desktop::kept::{SERVICE, off_runtime};
use crate::kit::secret_store::{SecretRef, SecretStore, StoreError};

pub const ACCOUNT: &str = "portal-restore-token";

/// How to grant the session again, for errors and `doctor`.
pub fn how_to_grant() -> String {
    format!(
        "to grant it, repeat the call and choose to share the screen with remote interaction \
         allowed in the desktop's dialog; the grant is then kept as keychain://{SERVICE}/{ACCOUNT} \
         (delete that item, e.g. `secret-tool clear service {SERVICE} username {ACCOUNT}`, to be \
         asked again)"
    )
}

/// The token in the keychain.
pub struct RestoreToken {
    store: Arc<dyn SecretStore>,
}

impl RestoreToken {
    pub fn new(store: Arc<dyn SecretStore>) -> RestoreToken {
        RestoreToken { store }
    }

    fn reference() -> SecretRef {
        SecretRef {
            service: SERVICE.into(),
            account: ACCOUNT.into(),
        }
    }

    /// The stored token, if any. Errors say why the keychain could not be read, never a value.
    pub fn load(&self) -> Result<Option<SecretString>, String> {
        off_runtime(self.store.clone(), |store| {
            match store.get(&RestoreToken::reference()) {
                Ok(token) => Ok(Some(token)),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(err) => Err(err),
            }
        })
        .map_err(|err| {
            format!("the portal's restore token cannot be read from the keychain: {err}")
        })
    }

    /// Keeps `token`, replacing the one before (which the portal has invalidated).
    pub fn save(&self, token: SecretString) -> Result<(), String> {
        off_runtime(self.store.clone(), move |store| {
            store.set(
                &RestoreToken::reference(),
                "computer: the desktop portal's grant to restore its remote-desktop session",
                &token,
            )
        })
        .map_err(|err| {
            format!("the portal's restore token could not be kept in the keychain: {err}")
        })
    }

    /// Drops the stored token (the person refused, or the portal no longer honours it).
    pub fn forget(&self) -> Result<(), String> {
        off_runtime(self.store.clone(), |store| {
            store.delete(&RestoreToken::reference()).map(|_| ())
        })
        .map_err(|err| format!("the portal's restore token could not be deleted: {err}"))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Mutex;

    use secrecy::ExposeSecret;

    use super::*;

    /// A store that keeps items in memory and can be made to fail.
    #[derive(Debug, Default)]
    pub(in crate::gui) struct Memory {
        pub(in crate::gui) items: Mutex<Vec<(SecretRef, String)>>,
        pub(in crate::gui) broken: bool,
    }

    impl SecretStore for Memory {
        fn get(&self, reference: &SecretRef) -> Result<SecretString, StoreError> {
            if self.broken {
                return Err(StoreError::Locked {
                    reason: "locked".into(),
                    fix: "unlock it".into(),
                });
            }
            self.items
                .lock()
                .unwrap()
                .iter()
                .find(|(r, _)| r == reference)
                .map(|(_, v)| SecretString::from(v.clone()))
                .ok_or_else(|| StoreError::not_found(reference))
        }
        fn set(
            &self,
            reference: &SecretRef,
            _: &str,
            value: &SecretString,
        ) -> Result<(), StoreError> {
            let mut items = self.items.lock().unwrap();
            items.retain(|(r, _)| r != reference);
            items.push((reference.clone(), value.expose_secret().to_string()));
            Ok(())
        }
        fn delete(&self, reference: &SecretRef) -> Result<bool, StoreError> {
            let mut items = self.items.lock().unwrap();
            let before = items.len();
            items.retain(|(r, _)| r != reference);
            Ok(items.len() < before)
        }
        fn list(&self) -> Result<Vec<crate::kit::secret_store::ItemInfo>, StoreError> {
            Ok(Vec::new())
        }
        fn info(
            &self,
            _: &SecretRef,
        ) -> Result<Option<crate::kit::secret_store::ItemInfo>, StoreError> {
            Ok(None)
        }
        fn probe(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn backend(&self) -> &'static str {
            "memory"
        }
    }

    #[test]
    fn the_token_is_among_the_items_no_call_may_set() {
        assert!(SERVICE.starts_with(crate::kit::secret_store::DAEMON_SERVICES));
    }

    #[test]
    fn the_latest_token_is_kept_and_a_forgotten_one_is_gone() {
        let store = Arc::new(Memory::default());
        let tokens = RestoreToken::new(store.clone());
        assert!(tokens.load().unwrap().is_none());
        tokens.save(SecretString::from("first")).unwrap();
        tokens.save(SecretString::from("second")).unwrap();
        assert_eq!(tokens.load().unwrap().unwrap().expose_secret(), "second");
        assert_eq!(store.items.lock().unwrap().len(), 1, "one item, replaced");
        tokens.forget().unwrap();
        assert!(tokens.load().unwrap().is_none());
    }

    #[test]
    fn an_unreadable_keychain_says_why_and_shows_no_value() {
        let store = Arc::new(Memory {
            broken: true,
            ..Memory::default()
        });
        let err = RestoreToken::new(store).load().unwrap_err();
        assert!(
            err.contains("cannot be read") && err.contains("unlock it"),
            "{err}"
        );
    }
}
