//! The macOS store: generic passwords of the login Keychain through keyring's apple-native
//! store, and `SecItemCopyMatching` (security-framework's item search) for enumeration, which
//! keyring's API does not offer.

use std::sync::Arc;

use apple_native_keyring_store::keychain::Store;
use keyring_core::Error as KeyringError;
use keyring_core::api::CredentialStoreApi;
use secrecy::{ExposeSecret, SecretString};
use security_framework::item::{ItemClass, ItemSearchOptions, Limit};

use super::reference::SecretRef;
use super::store::{ItemInfo, SecretStore, StoreError};

// Keychain result codes (SecBase.h) that say more than "failed".
const ERR_USER_CANCELED: i32 = -128;
const ERR_AUTH_FAILED: i32 = -25293;
const ERR_INTERACTION_NOT_ALLOWED: i32 = -25308;
const ERR_NOT_AVAILABLE: i32 = -25291;
const ERR_NO_SUCH_KEYCHAIN: i32 = -25294;
const ERR_ITEM_NOT_FOUND: i32 = -25300;

/// The login Keychain of the user the daemon runs as.
#[derive(Debug)]
pub struct MacKeychain {
    store: Arc<Store>,
}

impl MacKeychain {
    pub fn new() -> MacKeychain {
        MacKeychain {
            // Building the store touches no keychain; failures show on use.
            store: Store::new().expect("the login keychain store builds without I/O"),
        }
    }

    fn entry(&self, reference: &SecretRef) -> Result<keyring_core::Entry, StoreError> {
        self.store
            .build(&reference.service, &reference.account, None)
            .map_err(|err| from_keyring(err, Some(reference)))
    }

    fn search(service: Option<&str>, account: Option<&str>) -> Result<Vec<ItemInfo>, StoreError> {
        let mut options = ItemSearchOptions::new();
        options
            .class(ItemClass::generic_password())
            .load_attributes(true)
            .limit(Limit::All);
        if let Some(service) = service {
            options.service(service);
        }
        if let Some(account) = account {
            options.account(account);
        }
        let results = match options.search() {
            Ok(results) => results,
            Err(err) if err.code() == ERR_ITEM_NOT_FOUND => return Ok(Vec::new()),
            Err(err) => return Err(from_code(err.code(), err.to_string(), None)),
        };
        let mut items: Vec<ItemInfo> = results
            .iter()
            .filter_map(|result| result.simplify_dict())
            .filter_map(|attributes| {
                Some(ItemInfo {
                    service: attributes.get("svce")?.clone(),
                    account: attributes.get("acct")?.clone(),
                    label: attributes.get("labl").cloned().unwrap_or_default(),
                })
            })
            .collect();
        items.sort_by(|a, b| (&a.service, &a.account).cmp(&(&b.service, &b.account)));
        Ok(items)
    }
}

impl SecretStore for MacKeychain {
    fn get(&self, reference: &SecretRef) -> Result<SecretString, StoreError> {
        let password = self
            .entry(reference)?
            .get_password()
            .map_err(|err| from_keyring(err, Some(reference)))?;
        Ok(SecretString::from(password))
    }

    fn set(
        &self,
        reference: &SecretRef,
        _label: &str,
        value: &SecretString,
    ) -> Result<(), StoreError> {
        // The apple-native store labels items with their service; the Keychain shows that.
        self.entry(reference)?
            .set_password(value.expose_secret())
            .map_err(|err| from_keyring(err, Some(reference)))
    }

    fn delete(&self, reference: &SecretRef) -> Result<bool, StoreError> {
        match self.entry(reference)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(KeyringError::NoEntry) => Ok(false),
            Err(err) => Err(from_keyring(err, Some(reference))),
        }
    }

    fn list(&self) -> Result<Vec<ItemInfo>, StoreError> {
        Self::search(None, None)
    }

    fn info(&self, reference: &SecretRef) -> Result<Option<ItemInfo>, StoreError> {
        Ok(
            Self::search(Some(&reference.service), Some(&reference.account))?
                .into_iter()
                .next(),
        )
    }

    fn probe(&self) -> Result<(), StoreError> {
        Self::search(None, None).map(|_| ())
    }

    fn backend(&self) -> &'static str {
        "macos-keychain"
    }
}

fn from_keyring(err: KeyringError, reference: Option<&SecretRef>) -> StoreError {
    match err {
        KeyringError::NoEntry => match reference {
            Some(reference) => StoreError::not_found(reference),
            None => StoreError::Other {
                reason: "no such item".to_string(),
            },
        },
        KeyringError::NoStorageAccess(inner) | KeyringError::PlatformFailure(inner) => {
            match inner.downcast::<security_framework::base::Error>() {
                Ok(os) => from_code(os.code(), os.to_string(), reference),
                Err(other) => StoreError::Other {
                    reason: other.to_string(),
                },
            }
        }
        other => StoreError::Other {
            reason: other.to_string(),
        },
    }
}

fn from_code(code: i32, message: String, reference: Option<&SecretRef>) -> StoreError {
    match code {
        ERR_USER_CANCELED | ERR_AUTH_FAILED => StoreError::Refused {
            reason: message,
            fix: "allow the daemon's access when the Keychain asks, or grant it in Keychain Access"
                .to_string(),
        },
        ERR_INTERACTION_NOT_ALLOWED => StoreError::Locked {
            reason: message,
            fix: "unlock the login keychain (log in, or `security unlock-keychain`) and try again"
                .to_string(),
        },
        ERR_NOT_AVAILABLE | ERR_NO_SUCH_KEYCHAIN => StoreError::NoService {
            reason: message,
            fix: "make sure the user has a login keychain (Keychain Access > Keychain First Aid)"
                .to_string(),
        },
        ERR_ITEM_NOT_FOUND => match reference {
            Some(reference) => StoreError::not_found(reference),
            None => StoreError::Other { reason: message },
        },
        _ => StoreError::Other { reason: message },
    }
}
