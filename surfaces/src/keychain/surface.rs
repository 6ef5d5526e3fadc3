//! The `keychain` surface itself: its config, and the probe that offers it only where a
//! keychain service answers; its commands are in `commands/`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::commands;
use crate::kit::secret_store::{STORE_DEADLINE, SecretStore, StoreError, system_store};
use crate::{Availability, CommandSpec, PreparedAction, SectionError, Surface};

/// How long a probe's answer is reused before it is asked again in the background.
const PROBE_FRESH: Duration = Duration::from_secs(5);
/// How long the first probe (at start-up) waits for the store.
const FIRST_PROBE_DEADLINE: Duration = Duration::from_secs(3);

/// Settings of the `[keychain]` config section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeychainSettings {
    /// Whether `keychain set` may take its value from the model's args.
    #[serde(default)]
    model_values: bool,
}

/// The `keychain` surface over a [`SecretStore`].
pub struct KeychainSurface {
    store: Arc<dyn SecretStore>,
    model_values: AtomicBool,
    availability: Arc<Mutex<ProbeState>>,
}

struct ProbeState {
    availability: Availability,
    asked: Instant,
    refreshing: bool,
}

impl KeychainSurface {
    /// The surface over this OS's keychain.
    pub fn new() -> KeychainSurface {
        KeychainSurface::with_store(system_store())
    }

    /// The surface over `store`; probes it once now (bounded), then in the background.
    pub fn with_store(store: Arc<dyn SecretStore>) -> KeychainSurface {
        let availability = probe_bounded(&store, FIRST_PROBE_DEADLINE);
        KeychainSurface {
            store,
            model_values: AtomicBool::new(false),
            availability: Arc::new(Mutex::new(ProbeState {
                availability,
                asked: Instant::now(),
                refreshing: false,
            })),
        }
    }

    pub fn store(&self) -> &Arc<dyn SecretStore> {
        &self.store
    }
}

impl Default for KeychainSurface {
    fn default() -> Self {
        KeychainSurface::new()
    }
}

/// Asks the store whether it is reachable, from a thread of its own so that neither a runtime
/// thread nor start-up waits longer than `deadline`. A locked keychain is reachable: calls then
/// prompt to unlock it, or say it is locked.
fn probe_bounded(store: &Arc<dyn SecretStore>, deadline: Duration) -> Availability {
    let (tx, rx) = mpsc::channel();
    let store = store.clone();
    let spawned = std::thread::Builder::new()
        .name("keychain-probe".into())
        .spawn(move || {
            let _ = tx.send(store.reachable());
        });
    if let Err(err) = spawned {
        return unavailable(&StoreError::Other {
            reason: format!("cannot start the probe thread: {err}"),
        });
    }
    match rx.recv_timeout(deadline) {
        Ok(Ok(())) => Availability::Ready,
        Ok(Err(err)) => unavailable(&err),
        Err(_) => unavailable(&StoreError::Unresponsive {
            seconds: deadline.as_secs(),
            fix: "restart the keychain service (gnome-keyring-daemon, KWallet) or check the session bus".into(),
        }),
    }
}

fn unavailable(err: &StoreError) -> Availability {
    let (reason, fix) = match err {
        StoreError::NoService { reason, fix }
        | StoreError::Locked { reason, fix }
        | StoreError::Refused { reason, fix } => (reason.clone(), fix.clone()),
        StoreError::Unresponsive { seconds, fix } => (
            format!("the keychain did not answer within {seconds} s"),
            fix.clone(),
        ),
        other => (other.to_string(), "see `computer doctor`".to_string()),
    };
    Availability::Unavailable {
        reason: format!("no keychain answers: {reason}"),
        fix,
    }
}

#[async_trait]
impl Surface for KeychainSurface {
    fn name(&self) -> SurfaceName {
        SurfaceName::Keychain
    }

    fn backend(&self) -> &'static str {
        self.store.backend()
    }

    fn commands(&self) -> &'static [CommandSpec] {
        &commands::COMMANDS
    }

    fn needs_desktop(&self) -> bool {
        // The Secret Service lives on the desktop session's bus.
        cfg!(target_os = "linux")
    }

    fn probe(&self) -> Availability {
        let mut state = self.availability.lock().unwrap_or_else(|p| p.into_inner());
        if state.asked.elapsed() >= PROBE_FRESH && !state.refreshing {
            // Refresh in the background: `probe` is called on runtime threads (tools/list).
            state.refreshing = true;
            let store = self.store.clone();
            let shared = self.availability.clone();
            let spawned = std::thread::Builder::new()
                .name("keychain-probe".into())
                .spawn(move || {
                    let availability = probe_bounded(&store, STORE_DEADLINE);
                    let mut state = shared.lock().unwrap_or_else(|p| p.into_inner());
                    state.availability = availability;
                    state.asked = Instant::now();
                    state.refreshing = false;
                });
            if spawned.is_err() {
                state.refreshing = false;
            }
        }
        state.availability.clone()
    }

    fn configure(&self, section: &toml::Table) -> Result<(), SectionError> {
        let settings: KeychainSettings = SectionError::decode(SurfaceName::Keychain, section)?;
        self.model_values
            .store(settings.model_values, Ordering::Relaxed);
        Ok(())
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        commands::result_fields(command)
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        _complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let call = commands::Preparing {
            store: self.store.clone(),
            model_values: self.model_values.load(Ordering::Relaxed),
        };
        commands::prepare(command, args, call)
    }
}
