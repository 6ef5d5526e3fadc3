//! The `keychain` surface itself: its commands, their facts and risks, and the probe that
//! offers it only where a keychain service answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, ErrorCode, SurfaceName, ToolError};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::secret_store::{
    DAEMON_SERVICES, ItemInfo, STORE_DEADLINE, SecretRef, SecretStore, StoreError,
    call_with_deadline, system_store,
};
use crate::{
    ActionFacts, Availability, CallContext, CapturedText, CommandSpec, NoArgs, Outcome,
    PreparedAction, Risk, SectionError, Surface, SurfaceError, TargetFacts, TargetKind,
    decode_args,
};

/// Lists the items a reference can name (service, account, label, reference); never values.
type ListArgs = NoArgs;

/// Whether an item exists under a reference.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExistsArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
}

/// An item's metadata and its reference; its value only with `reveal: true`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
    /// Return the value itself (Secret risk: asked by default). Prefer passing the reference
    /// to the surface that uses it, which resolves it without showing it to you.
    #[serde(default)]
    pub reveal: bool,
}

/// Stores an item. The value comes from the person: run `computer secrets set <reference>` in
/// a terminal. `value` is accepted only where the config sets `[keychain] model_values = true`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
    /// What keychain apps show for the item (default: the reference).
    #[serde(default)]
    pub label: Option<String>,
    /// The value, only where the config allows model-supplied values.
    #[serde(default)]
    pub value: Option<String>,
}

/// Deletes an item.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
}

const COMMANDS: &[CommandSpec] = &[
    CommandSpec::of::<ListArgs>("list", Risk::Observe),
    CommandSpec::of::<ExistsArgs>("exists", Risk::Observe),
    CommandSpec::of::<GetArgs>("get", Risk::Observe),
    CommandSpec::of::<SetArgs>("set", Risk::Act),
    CommandSpec::of::<DeleteArgs>("delete", Risk::Act),
];

const LIST_FIELDS: &[&str] = &["items"];
const EXISTS_FIELDS: &[&str] = &["reference", "exists"];
const GET_FIELDS: &[&str] = &["reference", "service", "account", "label", "value"];
const SET_FIELDS: &[&str] = &["reference", "label"];
const DELETE_FIELDS: &[&str] = &["reference", "deleted"];

/// What receipts and logs show in place of a value.
const WITHHELD: &str = "[withheld]";

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

fn store_failure(err: StoreError) -> SurfaceError {
    SurfaceError::Failed {
        message: err.to_string(),
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
        COMMANDS
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
        match command {
            "list" => LIST_FIELDS,
            "exists" => EXISTS_FIELDS,
            "get" => GET_FIELDS,
            "set" => SET_FIELDS,
            "delete" => DELETE_FIELDS,
            _ => &[],
        }
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        _complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let op = match command {
            "list" => {
                let _: ListArgs = decode_args(args)?;
                Op::List
            }
            "exists" => Op::Exists(decode_args::<ExistsArgs>(args)?.reference),
            "get" => {
                let get: GetArgs = decode_args(args)?;
                if get.reveal && get.reference.service.starts_with(DAEMON_SERVICES) {
                    // The desktop portal's restore token among them lets whoever holds it
                    // capture the screen and send input without the person being asked.
                    return Err(ToolError::new(
                        ErrorCode::Denied,
                        format!(
                            "{} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what the person granted the daemon, such as the desktop portal's restore token); its value is never revealed to a call",
                            get.reference
                        ),
                    )
                    .at("args.reveal"));
                }
                Op::Get {
                    reference: get.reference,
                    reveal: get.reveal,
                }
            }
            "set" => {
                let set: SetArgs = decode_args(args)?;
                if set.reference.service.starts_with(DAEMON_SERVICES) {
                    // The daemon's own items (the person's consent to the GNOME gui backend's
                    // remote-desktop session): a call that wrote one would consent for them.
                    return Err(ToolError::new(
                        ErrorCode::Denied,
                        format!(
                            "{} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what only the person grants, such as the consent to the GNOME remote-desktop session); a call may not set it: the person grants it by approving the gui call that asks",
                            set.reference
                        ),
                    )
                    .at("args.reference"));
                }
                let Some(value) = set.value else {
                    return Err(ToolError::invalid(format!(
                        "keychain set takes its value from the person, not from a call: ask them to run `computer secrets set {}` in a terminal (it reads the value without echo); a call may pass `value` only where the daemon's config sets [keychain] model_values = true",
                        set.reference
                    ))
                    .at("args.value"));
                };
                if !self.model_values.load(Ordering::Relaxed) {
                    return Err(ToolError::invalid(format!(
                        "this daemon does not take secret values from calls: ask the person to run `computer secrets set {}` in a terminal, or to set [keychain] model_values = true in the config",
                        set.reference
                    ))
                    .at("args.value"));
                }
                if value.is_empty() {
                    return Err(ToolError::invalid("the value is empty").at("args.value"));
                }
                let label = match set.label {
                    Some(label) if label.trim().is_empty() => {
                        return Err(ToolError::invalid(
                            "the label is empty; leave it out to use the reference",
                        )
                        .at("args.label"));
                    }
                    Some(label) => label,
                    None => set.reference.uri(),
                };
                Op::Set {
                    reference: set.reference,
                    label,
                    value: SecretString::from(value),
                }
            }
            "delete" => {
                let reference = decode_args::<DeleteArgs>(args)?.reference;
                if reference.service.starts_with(DAEMON_SERVICES) {
                    // Deleting the consent or the restore token would not grant anything, but
                    // it would undo what the person granted and make the daemon ask again,
                    // or fail, on the person's behalf: only the person removes them.
                    return Err(ToolError::new(
                        ErrorCode::Denied,
                        format!(
                            "{reference} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what only the person grants, such as the consent to the GNOME remote-desktop session and the desktop portal's restore token); a call may not delete it: the person revokes it with `secret-tool clear service {} username {}`",
                            reference.service, reference.account
                        ),
                    )
                    .at("args.reference"));
                }
                Op::Delete(reference)
            }
            other => {
                return Err(
                    ToolError::invalid(format!("unknown keychain command `{other}`"))
                        .at("command")
                        .valid(COMMANDS.iter().map(|c| c.name)),
                );
            }
        };
        Ok(Box::new(KeychainAction {
            store: self.store.clone(),
            op,
        }))
    }
}

enum Op {
    List,
    Exists(SecretRef),
    Get {
        reference: SecretRef,
        reveal: bool,
    },
    Set {
        reference: SecretRef,
        label: String,
        value: SecretString,
    },
    Delete(SecretRef),
}

impl Op {
    fn reference(&self) -> Option<&SecretRef> {
        match self {
            Op::List => None,
            Op::Exists(reference) | Op::Delete(reference) => Some(reference),
            Op::Get { reference, .. } | Op::Set { reference, .. } => Some(reference),
        }
    }
}

struct KeychainAction {
    store: Arc<dyn SecretStore>,
    op: Op,
}

fn item_fields(item: &ItemInfo) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("reference".into(), json!(item.reference().uri()));
    fields.insert("service".into(), json!(item.service));
    fields.insert("account".into(), json!(item.account));
    fields.insert("label".into(), json!(item.label));
    fields
}

#[async_trait]
impl PreparedAction for KeychainAction {
    fn risk(&self) -> Risk {
        match &self.op {
            Op::List | Op::Exists(_) | Op::Get { reveal: false, .. } => Risk::Observe,
            Op::Get { reveal: true, .. } => Risk::Secret,
            Op::Set { .. } | Op::Delete(_) => Risk::Act,
        }
    }

    fn describe(&self) -> String {
        match &self.op {
            Op::List => "list the keychain's items (names only, no values)".into(),
            Op::Exists(reference) => format!("check whether {reference} exists in the keychain"),
            Op::Get {
                reference,
                reveal: false,
            } => format!("look up {reference} in the keychain (no value)"),
            Op::Get {
                reference,
                reveal: true,
            } => format!("REVEAL the value of {reference} to the agent"),
            Op::Set {
                reference, label, ..
            } => format!("store a value the agent supplied as {reference} (label {label:?})"),
            Op::Delete(reference) => format!("delete {reference} from the keychain"),
        }
    }

    fn facts(&self) -> ActionFacts {
        let (command_args, target) = match &self.op {
            Op::List => (json!({}), None),
            Op::Exists(reference) | Op::Delete(reference) => {
                (json!({"reference": reference.uri()}), Some(reference))
            }
            Op::Get { reference, reveal } => (
                json!({"reference": reference.uri(), "reveal": reveal}),
                Some(reference),
            ),
            // The value never reaches a receipt, a policy matcher or an approver's screen.
            Op::Set {
                reference, label, ..
            } => (
                json!({"reference": reference.uri(), "label": label, "value": WITHHELD}),
                Some(reference),
            ),
        };
        ActionFacts {
            args: Some(command_args),
            target: target.map(|reference| TargetFacts {
                kind: TargetKind::SecretItem,
                app: Some(reference.service.clone()),
                window: Some(reference.account.clone()),
                window_id: Some(reference.uri()),
                pid: None,
                resolved: true,
            }),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let store = self.store;
        let reference = self.op.reference().cloned();
        let mut outcome = Outcome {
            success: true,
            ..Outcome::default()
        };
        match self.op {
            Op::List => {
                let items = call_with_deadline(&store, STORE_DEADLINE, |store| store.list())
                    .await
                    .map_err(store_failure)?;
                let items: Vec<Value> = items
                    .iter()
                    .map(|item| Value::Object(item_fields(item)))
                    .collect();
                outcome.fields.insert("items".into(), Value::Array(items));
            }
            Op::Exists(reference) => {
                let lookup = reference.clone();
                let info =
                    call_with_deadline(&store, STORE_DEADLINE, move |store| store.info(&lookup))
                        .await
                        .map_err(store_failure)?;
                outcome
                    .fields
                    .insert("reference".into(), json!(reference.uri()));
                outcome
                    .fields
                    .insert("exists".into(), json!(info.is_some()));
            }
            Op::Get { reference, reveal } => {
                let lookup = reference.clone();
                let secrets = ctx.secrets.clone();
                let (info, value) = call_with_deadline(&store, STORE_DEADLINE, move |store| {
                    let info = store
                        .info(&lookup)?
                        .ok_or_else(|| StoreError::not_found(&lookup))?;
                    let value = if reveal {
                        let value = store.get(&lookup)?;
                        // From here on the value is masked in every other call's outputs and in
                        // every receipt row and log line, however it travels (a later step's
                        // ref, a bridged call, a job, text the model pastes); this call's reply
                        // alone carries it.
                        secrets.reveal(&value);
                        Some(value)
                    } else {
                        None
                    };
                    Ok((info, value))
                })
                .await
                .map_err(store_failure)?;
                outcome.fields = item_fields(&info);
                if let Some(value) = value {
                    // A text, not a field: the result receipt records a text's size and digest
                    // but never its bytes, and the digest here is withheld too (a digest of a
                    // short password can be searched for).
                    let bytes = value.expose_secret().as_bytes().to_vec();
                    outcome.texts.push(CapturedText {
                        name: "value".into(),
                        total_bytes: bytes.len() as u64,
                        head: bytes,
                        tail: Vec::new(),
                        sha256: WITHHELD.into(),
                        artifact: None,
                    });
                }
            }
            Op::Set {
                reference,
                label,
                value,
            } => {
                let (target, shown_label) = (reference.clone(), label.clone());
                call_with_deadline(&store, STORE_DEADLINE, move |store| {
                    store.set(&target, &label, &value)
                })
                .await
                .map_err(store_failure)?;
                outcome
                    .fields
                    .insert("reference".into(), json!(reference.uri()));
                outcome.fields.insert("label".into(), json!(shown_label));
            }
            Op::Delete(reference) => {
                let target = reference.clone();
                let deleted =
                    call_with_deadline(&store, STORE_DEADLINE, move |store| store.delete(&target))
                        .await
                        .map_err(store_failure)?;
                outcome
                    .fields
                    .insert("reference".into(), json!(reference.uri()));
                outcome.fields.insert("deleted".into(), json!(deleted));
            }
        }
        if let Some(reference) = reference {
            outcome
                .receipt
                .insert("keychain_reference".into(), json!(reference.uri()));
        }
        Ok(outcome)
    }
}
