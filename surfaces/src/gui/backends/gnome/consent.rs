//! The person's consent to the GNOME backend's remote-desktop session (screen capture and input
//! for this daemon), asked once through the daemon's approval path and kept as a secret in the
//! keychain surface's store, where it outlives daemon restarts. A call that would start the
//! session without a stored grant states `ActionFacts::consent`, which policy turns into a
//! question for the person whatever the rules say; the grant is written only when such a call
//! runs, i.e. after a person approved it. The grant's value is random and never read back into
//! anything the daemon says: only its presence counts.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use secrecy::SecretString;

use super::super::remote_desktop::kept::{SERVICE, off_runtime};
use crate::kit::secret_store::{SecretRef, SecretStore, StoreError};

/// Where the grant is kept: `keychain://computer.gui/gnome-remote-desktop`, among the daemon's
/// own items, which the keychain surface lets no call set.
pub const ACCOUNT: &str = "gnome-remote-desktop";
/// While a session runs, the grant is looked up again at most this often: a revoked grant
/// ends the session at the next call after that.
pub const RECHECK_AFTER: Duration = Duration::from_secs(5);

/// What the person is asked to approve, and what a refusal tells the agent.
pub fn question() -> String {
    format!(
        "consent needed: this call starts a GNOME remote-desktop session (this daemon may then \
         capture the screen and send pointer and key input until it stops); asked once, the \
         grant is kept in the keychain as keychain://{SERVICE}/{ACCOUNT}. To grant it, approve \
         a gui call that asks for it; to revoke it, delete that item (`secret-tool clear \
         service {SERVICE} username {ACCOUNT}`, or Seahorse)"
    )
}

/// The grant in the keychain, looked up with a short memory.
pub struct Consent {
    store: Arc<dyn SecretStore>,
    /// The last lookup: when, and whether a grant was there.
    last: Mutex<Option<(Instant, bool)>>,
}

impl Consent {
    pub fn new(store: Arc<dyn SecretStore>) -> Consent {
        Consent {
            store,
            last: Mutex::new(None),
        }
    }

    fn reference() -> SecretRef {
        SecretRef {
            service: SERVICE.into(),
            account: ACCOUNT.into(),
        }
    }

    /// Whether a grant is stored; a lookup younger than `fresh` is reused. A keychain that
    /// cannot be reached is an error (no grant can be told, so none counts).
    pub fn granted(&self, fresh: Duration) -> Result<bool, String> {
        if let Some((at, granted)) = *self.last.lock().unwrap_or_else(|e| e.into_inner())
            && at.elapsed() < fresh
        {
            return Ok(granted);
        }
        let found = off_runtime(self.store.clone(), |store| {
            match store.info(&Consent::reference()) {
                Ok(info) => Ok(info.is_some()),
                Err(StoreError::NotFound { .. }) => Ok(false),
                Err(err) => Err(err),
            }
        })
        .map_err(|err| {
            format!(
                "the GNOME backend keeps the person's consent in the keychain, which cannot be \
                 read: {err}"
            )
        })?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), found));
        Ok(found)
    }

    /// Stores the grant (a random value under the reference). Only called for a call a person
    /// approved.
    pub fn grant(&self) -> Result<(), String> {
        let value = SecretString::from(random_hex()?);
        off_runtime(self.store.clone(), move |store| {
            store.set(
                &Consent::reference(),
                "computer: consent to drive this GNOME session (remote desktop)",
                &value,
            )
        })
        .map_err(|err| format!("the consent could not be kept in the keychain: {err}"))?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), true));
        Ok(())
    }
}

fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    // SAFETY: getrandom writes at most `len` bytes into the buffer it is given.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        return Err("no random bytes for the grant".into());
    }
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that keeps items in memory and can be made to fail.
    #[derive(Debug, Default)]
    struct Memory {
        items: Mutex<Vec<(SecretRef, String)>>,
        broken: bool,
    }

    impl SecretStore for Memory {
        fn get(&self, reference: &SecretRef) -> Result<SecretString, StoreError> {
            Err(StoreError::not_found(reference))
        }
        fn set(
            &self,
            reference: &SecretRef,
            label: &str,
            _: &SecretString,
        ) -> Result<(), StoreError> {
            self.items
                .lock()
                .unwrap()
                .push((reference.clone(), label.into()));
            Ok(())
        }
        fn delete(&self, _: &SecretRef) -> Result<bool, StoreError> {
            Ok(self.items.lock().unwrap().drain(..).count() > 0)
        }
        fn list(&self) -> Result<Vec<crate::kit::secret_store::ItemInfo>, StoreError> {
            Ok(Vec::new())
        }
        fn info(
            &self,
            reference: &SecretRef,
        ) -> Result<Option<crate::kit::secret_store::ItemInfo>, StoreError> {
            if self.broken {
                return Err(StoreError::Locked {
                    reason: "locked".into(),
                    fix: "unlock it".into(),
                });
            }
            Ok(self
                .items
                .lock()
                .unwrap()
                .iter()
                .find(|(r, _)| r == reference)
                .map(|(r, label)| crate::kit::secret_store::ItemInfo {
                    service: r.service.clone(),
                    account: r.account.clone(),
                    label: label.clone(),
                }))
        }
        fn probe(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn backend(&self) -> &'static str {
            "memory"
        }
    }

    #[test]
    fn the_grant_is_among_the_items_no_call_may_set() {
        assert!(SERVICE.starts_with(crate::kit::secret_store::DAEMON_SERVICES));
    }

    #[test]
    fn a_grant_is_stored_once_asked_and_a_revoked_one_is_seen_after_the_recheck() {
        let store = Arc::new(Memory::default());
        let consent = Consent::new(store.clone());
        assert!(!consent.granted(Duration::ZERO).unwrap());
        consent.grant().unwrap();
        assert!(consent.granted(Duration::ZERO).unwrap());
        store.delete(&Consent::reference()).unwrap();
        // Within the memory window the old answer stands; after it, the revocation counts.
        assert!(consent.granted(Duration::from_secs(60)).unwrap());
        assert!(!consent.granted(Duration::ZERO).unwrap());
    }

    #[test]
    fn an_unreadable_keychain_is_no_grant_and_says_why() {
        let store = Arc::new(Memory {
            broken: true,
            ..Memory::default()
        });
        let err = Consent::new(store).granted(Duration::ZERO).unwrap_err();
        assert!(
            err.contains("cannot be read") && err.contains("unlock it"),
            "{err}"
        );
    }
}
