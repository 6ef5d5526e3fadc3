//! The Linux store: the freedesktop Secret Service (gnome-keyring, KWallet, KeePassXC) through
//! keyring's zbus store for values, and the `secret-service` crate under it for enumeration and
//! the lock state, which keyring's API does not offer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keyring_core::api::CredentialStoreApi;
use keyring_core::{Entry, Error as KeyringError};
use secrecy::{ExposeSecret, SecretString};
use secret_service::EncryptionType;
use secret_service::blocking::SecretService;
use zbus_secret_service_keyring_store::Store;

use super::reference::SecretRef;
use super::store::{ItemInfo, SecretStore, StoreError};

/// The Secret Service's well-known name on the session bus.
const SERVICE_NAME: &str = "org.freedesktop.secrets";

/// The Secret Service of the session bus in `DBUS_SESSION_BUS_ADDRESS`.
#[derive(Debug, Default)]
pub struct SecretServiceStore {
    /// keyring's store, connected on first use and dropped when the service goes away, so
    /// that a keyring daemon started later is found.
    store: Mutex<Option<Arc<Store>>>,
}

impl SecretServiceStore {
    pub fn new() -> SecretServiceStore {
        SecretServiceStore::default()
    }

    fn store(&self) -> Result<Arc<Store>, StoreError> {
        let mut slot = self.store.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        let store = Store::new().map_err(|err| from_keyring(err, None))?;
        *slot = Some(store.clone());
        Ok(store)
    }

    /// Runs `op` on keyring's entry for `reference`, forgetting the connection when the service
    /// is gone so that the next call reconnects.
    fn with_entry<T>(
        &self,
        reference: &SecretRef,
        label: Option<&str>,
        op: impl FnOnce(&Entry) -> keyring_core::Result<T>,
    ) -> Result<T, StoreError> {
        let store = self.store()?;
        let modifiers = label.map(|label| HashMap::from([("label", label)]));
        let entry = store
            .build(&reference.service, &reference.account, modifiers.as_ref())
            .map_err(|err| from_keyring(err, Some(reference)))?;
        op(&entry).map_err(|err| {
            let err = from_keyring(err, Some(reference));
            if matches!(err, StoreError::NoService { .. } | StoreError::Other { .. }) {
                *self.store.lock().unwrap_or_else(|p| p.into_inner()) = None;
            }
            err
        })
    }

    /// A plain connection for what keyring does not expose (search without unlocking, lock
    /// state). Plain transfer is fine: it carries no secret values.
    fn connect() -> Result<SecretService<'static>, StoreError> {
        SecretService::connect(EncryptionType::Plain).map_err(|err| from_service(err, None))
    }

    /// Items matching `attributes`, unlocked ones only; locked ones are counted.
    fn search(attributes: HashMap<&str, &str>) -> Result<(Vec<ItemInfo>, usize), StoreError> {
        let ss = Self::connect()?;
        let found = ss
            .search_items(attributes)
            .map_err(|err| from_service(err, None))?;
        let mut items = Vec::with_capacity(found.unlocked.len());
        for item in &found.unlocked {
            let read = item
                .get_attributes()
                .and_then(|attributes| Ok((attributes, item.get_label()?)));
            let Some((attributes, label)) = unless_vanished(read)? else {
                continue;
            };
            let (Some(service), Some(account)) =
                (attributes.get("service"), attributes.get("username"))
            else {
                // Another application's item, with attributes of its own: no reference names it.
                continue;
            };
            items.push(ItemInfo {
                service: service.clone(),
                account: account.clone(),
                label,
            });
        }
        items.sort_by(|a, b| (&a.service, &a.account).cmp(&(&b.service, &b.account)));
        Ok((items, found.locked.len()))
    }
}

impl Drop for SecretServiceStore {
    fn drop(&mut self) {
        // zbus's blocking proxies block on their own runtime when dropped, which panics on a
        // thread that drives async tasks: let such a thread hand the connection to another.
        let store = self
            .store
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(store) = store
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::Builder::new()
                .name("keychain-close".into())
                .spawn(move || drop(store));
        }
    }
}

impl SecretStore for SecretServiceStore {
    fn get(&self, reference: &SecretRef) -> Result<SecretString, StoreError> {
        let bytes = self.with_entry(reference, None, |entry| entry.get_secret())?;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(SecretString::from(text)),
            Err(_) => Err(StoreError::Other {
                reason: format!("the value of {reference} is not UTF-8 text"),
            }),
        }
    }

    fn set(
        &self,
        reference: &SecretRef,
        label: &str,
        value: &SecretString,
    ) -> Result<(), StoreError> {
        self.with_entry(reference, Some(label), |entry| {
            entry.set_secret(value.expose_secret().as_bytes())?;
            // keyring keeps an existing item's label: set the one asked for.
            let credential = entry.get_credential()?;
            if let Some(wrapper) = credential
                .as_any()
                .downcast_ref::<zbus_secret_service_keyring_store::cred::Wrapper>(
            ) {
                wrapper.set_label(label)?;
            }
            Ok(())
        })
    }

    fn delete(&self, reference: &SecretRef) -> Result<bool, StoreError> {
        match self.with_entry(reference, None, |entry| entry.delete_credential()) {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    fn list(&self) -> Result<Vec<ItemInfo>, StoreError> {
        let (items, locked) = Self::search(HashMap::new())?;
        if items.is_empty() && locked > 0 {
            return Err(locked_error(format!(
                "all {locked} items are in locked collections"
            )));
        }
        Ok(items)
    }

    fn info(&self, reference: &SecretRef) -> Result<Option<ItemInfo>, StoreError> {
        let (items, locked) = Self::search(HashMap::from([
            ("service", reference.service.as_str()),
            ("username", reference.account.as_str()),
        ]))?;
        match items.into_iter().next() {
            Some(item) => Ok(Some(item)),
            None if locked > 0 => Err(locked_error(format!(
                "the collection holding {reference} is locked"
            ))),
            None => Ok(None),
        }
    }

    fn probe(&self) -> Result<(), StoreError> {
        // Only a running service is asked about its lock: connecting to one that is merely
        // activatable would start it (doctor must not start a keyring as a side effect).
        self.reachable()?;
        let ss = Self::connect()?;
        let collection = ss
            .get_default_collection()
            .map_err(|err| from_service(err, None))?;
        if collection
            .is_locked()
            .map_err(|err| from_service(err, None))?
        {
            return Err(locked_error("the default collection is locked".to_string()));
        }
        Ok(())
    }

    fn reachable(&self) -> Result<(), StoreError> {
        // Asking the bus, not the service: a call to an activatable Secret Service that is not
        // running would start one (and, in a session without a login, a locked one). A desktop
        // session starts its keyring at login; one that nobody started does not answer.
        let bus = zbus::blocking::Connection::session()
            .map_err(|err| from_service(secret_service::Error::Zbus(err), None))?;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&bus)
            .map_err(|err| from_service(secret_service::Error::Zbus(err), None))?;
        let name = zbus::names::BusName::try_from(SERVICE_NAME).expect("a valid bus name");
        let owned = dbus.name_has_owner(name).map_err(|err| StoreError::Other {
            reason: format!("the session bus did not answer: {err}"),
        })?;
        if owned {
            return Ok(());
        }
        Err(no_service(format!(
            "nothing owns {SERVICE_NAME} on the session bus"
        )))
    }

    fn backend(&self) -> &'static str {
        "secret-service"
    }
}

/// What was read of an item found by a search, or `None` when the item was deleted between the
/// search and the read (another program, or another call, deleting while this one lists): it is
/// no longer there to list, which is not a failure of the listing.
fn unless_vanished<T>(read: Result<T, secret_service::Error>) -> Result<Option<T>, StoreError> {
    match read {
        Ok(read) => Ok(Some(read)),
        Err(err) if vanished(&err) => Ok(None),
        Err(err) => Err(from_service(err, None)),
    }
}

/// Whether `err` says the object is not there (any more). gnome-keyring answers a deleted
/// item's path with `UnknownMethod` ("Object does not exist at path …"); other services with
/// `UnknownObject`.
fn vanished(err: &secret_service::Error) -> bool {
    const GONE: [&str; 2] = [
        "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
    ];
    let fdo_gone = |fdo: &zbus::fdo::Error| {
        matches!(
            fdo,
            zbus::fdo::Error::UnknownObject(_) | zbus::fdo::Error::UnknownMethod(_)
        )
    };
    match err {
        secret_service::Error::ZbusFdo(fdo) => fdo_gone(fdo),
        secret_service::Error::Zbus(zbus::Error::FDO(fdo)) => fdo_gone(fdo),
        secret_service::Error::Zbus(zbus::Error::MethodError(name, _, _)) => {
            GONE.contains(&name.as_str())
        }
        _ => false,
    }
}

fn locked_error(reason: String) -> StoreError {
    StoreError::Locked {
        reason,
        fix: "unlock it (log in to the desktop, open Passwords and Keys, or `gnome-keyring-daemon --unlock` with its password on stdin) and try again".to_string(),
    }
}

fn no_service(reason: String) -> StoreError {
    StoreError::NoService {
        reason,
        fix: "start a Secret Service (gnome-keyring-daemon --components=secrets, KWallet or KeePassXC) on the session bus the daemon uses (DBUS_SESSION_BUS_ADDRESS)".to_string(),
    }
}

/// keyring's error, classified by the `secret-service` error it wraps.
fn from_keyring(err: KeyringError, reference: Option<&SecretRef>) -> StoreError {
    match err {
        KeyringError::NoEntry => match reference {
            Some(reference) => StoreError::not_found(reference),
            None => StoreError::Other {
                reason: "no such item".to_string(),
            },
        },
        KeyringError::NoStorageAccess(inner) | KeyringError::PlatformFailure(inner) => {
            match inner.downcast::<secret_service::Error>() {
                Ok(service) => from_service(*service, reference),
                Err(other) => StoreError::Other {
                    reason: other.to_string(),
                },
            }
        }
        KeyringError::Ambiguous(entries) => StoreError::Other {
            reason: format!(
                "{} items match {}; delete the extra ones with secret-tool clear",
                entries.len(),
                reference.map(SecretRef::uri).unwrap_or_default()
            ),
        },
        other => StoreError::Other {
            reason: other.to_string(),
        },
    }
}

fn from_service(err: secret_service::Error, reference: Option<&SecretRef>) -> StoreError {
    use secret_service::Error;
    match err {
        Error::Unavailable => no_service("no Secret Service is on the session bus".to_string()),
        Error::Zbus(zbus::Error::Address(reason)) => {
            no_service(format!("no session bus to reach it on ({reason})"))
        }
        Error::Zbus(zbus::Error::InputOutput(io)) => {
            no_service(format!("the session bus cannot be reached ({io})"))
        }
        Error::Zbus(zbus::Error::MethodError(name, _, _))
            if name.as_str() == "org.freedesktop.DBus.Error.ServiceUnknown"
                || name.as_str() == "org.freedesktop.DBus.Error.NameHasNoOwner" =>
        {
            no_service("no Secret Service is on the session bus".to_string())
        }
        Error::ZbusFdo(
            zbus::fdo::Error::ServiceUnknown(_) | zbus::fdo::Error::NameHasNoOwner(_),
        ) => no_service("no Secret Service is on the session bus".to_string()),
        Error::Locked => locked_error(match reference {
            Some(reference) => format!("the collection holding {reference} is locked"),
            None => "a collection is locked".to_string(),
        }),
        Error::Prompt => StoreError::Refused {
            reason: "the keyring is locked and its unlock prompt was dismissed (or could not be shown: no prompter in this session)".to_string(),
            fix: "accept the keychain's unlock prompt when it appears, or unlock the keyring first"
                .to_string(),
        },
        Error::PromptDisconnected => StoreError::Refused {
            reason: "the Secret Service went away while its unlock prompt was open".to_string(),
            fix: "restart the keyring daemon, unlock it, and try again".to_string(),
        },
        Error::NoResult => match reference {
            Some(reference) => StoreError::not_found(reference),
            None => StoreError::Other {
                reason: "the Secret Service found no such object".to_string(),
            },
        },
        other => StoreError::Other {
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_deleted_while_listing_is_skipped_and_other_failures_are_not() {
        let gone = "Object does not exist at path \u{201c}/org/freedesktop/secrets/collection/login/3\u{201d}";
        for err in [
            secret_service::Error::ZbusFdo(zbus::fdo::Error::UnknownMethod(gone.into())),
            secret_service::Error::ZbusFdo(zbus::fdo::Error::UnknownObject(gone.into())),
            secret_service::Error::Zbus(zbus::Error::FDO(Box::new(
                zbus::fdo::Error::UnknownMethod(gone.into()),
            ))),
        ] {
            let shown = err.to_string();
            assert_eq!(
                unless_vanished::<()>(Err(err)).unwrap(),
                None,
                "skipped: {shown}"
            );
        }
        assert_eq!(unless_vanished(Ok(7)).unwrap(), Some(7));
        // A locked collection, a gone service, a denied access still fail the listing.
        assert_eq!(
            unless_vanished::<()>(Err(secret_service::Error::Locked))
                .unwrap_err()
                .kind(),
            "locked"
        );
        assert_eq!(
            unless_vanished::<()>(Err(secret_service::Error::ZbusFdo(
                zbus::fdo::Error::AccessDenied("no".into())
            )))
            .unwrap_err()
            .kind(),
            "failed"
        );
    }
}
