//! Secrets a call references: the facts it states about them (which secret, by which reference,
//! going where), the per-call holder of the values resolved while it runs (and the masker made
//! of them, which every output of the call passes through), and resolution at the moment of use.
//!
//! Why a holder per call: a surface resolves a reference only inside `PreparedAction::run`
//! (after policy and approval) and registers the value here before using it; the daemon masks
//! the call's whole outcome, its receipt and its log lines with the same holder, and the shell
//! capture masks its streams as they go. A surface cannot forget to mask what it never sees
//! unmasked again.
//!
//! Values live as [`SecretString`] (zeroed when dropped). What cannot be zeroed is said where it
//! happens: the masker's automaton holds the encoded forms, and a run's environment passes
//! through the standard library's and containment's own buffers.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use computer_ipc::{Complications, ErrorCode, ToolError};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::SurfaceError;
use crate::kit::mask::Masker;
use crate::kit::secret_store::{SecretRef, SecretStore, system_store};

/// The name a secret typed (`gui type`) or set (`ax act set_value`) in place of text goes by in
/// facts and masks: `[masked secret]`.
pub const IN_PLACE: &str = "secret";

/// The scheme of every secret reference.
pub const SCHEME: &str = "keychain://";

/// A reference parsed, or an error naming `at` (the JSON path) and what a valid one looks like.
pub fn parse_reference(text: &str, at: &str) -> Result<SecretRef, ToolError> {
    let reference = SecretRef::parse(text)
        .map_err(|err| ToolError::invalid(err.to_string()).at(at.to_string()))?;
    if reference
        .service
        .starts_with(crate::kit::secret_store::DAEMON_SERVICES)
    {
        return Err(daemon_item(&reference).at(at.to_string()));
    }
    Ok(reference)
}

/// The refusal of a reference to one of the daemon's own items: what the person granted the
/// daemon itself (the desktop portal's restore token lets whoever holds it capture the screen
/// and send input without the person being asked) is never handed to a call.
fn daemon_item(reference: &SecretRef) -> ToolError {
    ToolError::new(
        ErrorCode::Denied,
        format!(
            "{reference} is one of the daemon's own items (services starting with \"{}\"): \
             their values are never handed to a call, so nothing ran",
            crate::kit::secret_store::DAEMON_SERVICES
        ),
    )
}

pub use computer_ipc::facts::{SecretDestination, SecretUse};

/// The facts of secrets that go into a program's environment, each under its own name.
pub fn env_uses(secrets: &[(String, SecretRef)]) -> Vec<SecretUse> {
    secrets
        .iter()
        .map(|(name, reference)| SecretUse {
            name: name.clone(),
            reference: reference.uri(),
            to: SecretDestination::Env { var: name.clone() },
        })
        .collect()
}

/// Where values come from: the keychain, asked at the moment of use. Blocking. The narrow seam a
/// call needs of a [`SecretStore`] (tests and benchmarks give their own).
pub trait Resolve: Send + Sync {
    /// The value of the item `reference` names; errors name the reference and what to do,
    /// never a value.
    fn resolve(&self, reference: &SecretRef) -> Result<SecretString, String>;
}

/// The system keychain as a resolver.
struct StoreResolver(Arc<dyn SecretStore>);

impl Resolve for StoreResolver {
    fn resolve(&self, reference: &SecretRef) -> Result<SecretString, String> {
        self.0.get(reference).map_err(|err| err.to_string())
    }
}

/// The resolver calls use unless their holder was given another: the system keychain, one
/// connection for the daemon.
pub fn system_resolver() -> Arc<dyn Resolve> {
    static SYSTEM: OnceLock<Arc<dyn Resolve>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| Arc::new(StoreResolver(system_store())) as Arc<dyn Resolve>)
        .clone()
}

/// Whether the system keychain answered when first asked (bounded at 3 s, on a thread of its
/// own: the store must not be called on a runtime thread). The tool lists `secrets` only where
/// it does, as it lists only what is callable; the answer holds for the daemon's life, as the
/// tool it is listed in does.
pub fn keychain_answers() -> bool {
    static ANSWERS: OnceLock<bool> = OnceLock::new();
    *ANSWERS.get_or_init(|| {
        let (tell, told) = std::sync::mpsc::channel();
        let asked = std::thread::Builder::new()
            .name("keychain-probe".into())
            .spawn(move || {
                let _ = tell.send(system_store().probe());
            });
        match asked.ok().and_then(|_| told.recv_timeout(Duration::from_secs(3)).ok()) {
            Some(Ok(())) => true,
            Some(Err(err)) => {
                tracing::info!(error = %err, "secret references are unavailable: the keychain does not answer");
                false
            }
            None => {
                tracing::info!("secret references are unavailable: the keychain did not answer within 3 s");
                false
            }
        }
    })
}

/// The secrets one call resolved: their values, and the masker made of them. Every output of the
/// call is masked through it; while it lives, its masker also masks the daemon's log lines.
pub struct CallSecrets {
    resolver: Option<Arc<dyn Resolve>>,
    state: Mutex<Resolved>,
}

#[derive(Default)]
struct Resolved {
    values: Vec<(String, SecretString)>,
    /// The masker of `values` alone.
    masker: Option<Arc<Masker>>,
    /// This call revealed a value to its caller (`keychain get` with `reveal`): its own reply
    /// carries it, so its outputs are not masked with revealed values (its receipt rows and
    /// log lines are, as every row and line is).
    reveals: bool,
    /// `values` and the revealed values in one masker, with the [`Revealed::generation`] it was
    /// built for.
    with_revealed: Option<(u64, Arc<Masker>)>,
}

impl Default for CallSecrets {
    /// A holder that resolves through the system keychain.
    fn default() -> Self {
        CallSecrets {
            resolver: None,
            state: Mutex::default(),
        }
    }
}

impl fmt::Debug for CallSecrets {
    // Names only: the values are the secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.lock().values.iter().map(|(n, _)| n.clone()).collect();
        f.debug_struct("CallSecrets")
            .field("resolved", &names)
            .finish()
    }
}

impl CallSecrets {
    /// A holder that resolves through `resolver` (tests, benchmarks).
    pub fn with_resolver(resolver: Arc<dyn Resolve>) -> CallSecrets {
        CallSecrets {
            resolver: Some(resolver),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Resolved> {
        // Each update replaces whole fields: the state is consistent after a panic too.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves `reference` for the secret called `name`, and registers the value for masking
    /// before handing it out. Blocking (the keychain is a D-Bus round trip): call it from a
    /// blocking thread.
    pub fn resolve(&self, name: &str, reference: &SecretRef) -> Result<SecretString, SurfaceError> {
        if reference
            .service
            .starts_with(crate::kit::secret_store::DAEMON_SERVICES)
        {
            // Checked where references are parsed too; this holds for any other way in.
            return Err(SurfaceError::Tool(daemon_item(reference)));
        }
        let resolver = self.resolver.clone().unwrap_or_else(system_resolver);
        let value = resolver
            .resolve(reference)
            .map_err(|message| SurfaceError::Failed {
                message: format!("secret {name} could not be resolved, so nothing ran: {message}"),
            })?;
        self.register(name, &value);
        Ok(value)
    }

    /// [`CallSecrets::resolve`] on a blocking thread, for a surface's async `run`.
    pub async fn resolve_blocking(
        self: &Arc<Self>,
        name: &str,
        reference: &SecretRef,
    ) -> Result<SecretString, SurfaceError> {
        let holder = self.clone();
        let (name, reference) = (name.to_string(), reference.clone());
        tokio::task::spawn_blocking(move || holder.resolve(&name, &reference))
            .await
            .map_err(|err| SurfaceError::Failed {
                message: format!("resolving a secret failed: {err}"),
            })?
    }

    /// Registers a value to be masked in everything the call produces.
    pub fn register(&self, name: &str, value: &SecretString) {
        self.register_all([(name, value)]);
    }

    /// Registers values to be masked in everything the call produces, building the masker
    /// once for all of them.
    pub fn register_all<'a>(&self, secrets: impl IntoIterator<Item = (&'a str, &'a SecretString)>) {
        let mut state = self.lock();
        let before = state.values.len();
        for (name, value) in secrets {
            let known = state
                .values
                .iter()
                .any(|(n, v)| n == name && v.expose_secret() == value.expose_secret());
            if !known {
                state
                    .values
                    .push((name.to_string(), SecretString::from(value.expose_secret())));
            }
        }
        if state.values.len() == before {
            return;
        }
        let masker = Arc::new(Masker::new(
            state
                .values
                .iter()
                .map(|(n, v)| (n.as_str(), v.expose_secret().as_bytes())),
        ));
        live_maskers().push(Arc::downgrade(&masker));
        state.masker = Some(masker);
        state.with_revealed = None;
    }

    /// Takes on every value `other` holds (a terminal session's, lent to a call on it): as
    /// `other` built its masker when this holder has none of its own yet, else added to its own.
    pub fn adopt(&self, other: &CallSecrets) {
        let (values, masker) = {
            let theirs = other.lock();
            let values: Vec<(String, SecretString)> = theirs
                .values
                .iter()
                .map(|(n, v)| (n.clone(), SecretString::from(v.expose_secret())))
                .collect();
            (values, theirs.masker.clone())
        };
        let mut state = self.lock();
        if state.values.is_empty() {
            if let Some(masker) = &masker {
                live_maskers().push(Arc::downgrade(masker));
            }
            state.values = values;
            state.masker = masker;
            state.with_revealed = None;
            return;
        }
        drop(state);
        self.register_all(values.iter().map(|(n, v)| (n.as_str(), v)));
    }

    /// Marks this call as one that reveals `value` to its caller, and remembers the value as
    /// revealed: from now on it is masked in every other call's outputs, in every receipt row
    /// (this call's too) and in every log line, however it travels (a ref of a later step, the
    /// args of a bridged call or a job, text the model pastes). This call's own outputs are not
    /// masked with revealed values: its reply is where the value goes. Blocking for a moment
    /// (the masker of every revealed value is built again): call it from a blocking thread.
    pub fn reveal(&self, value: &SecretString) {
        self.lock().reveals = true;
        remember_revealed(value);
    }

    /// Whether there is nothing to mask: no value resolved, and none revealed that this call's
    /// outputs are masked with.
    pub fn is_empty(&self) -> bool {
        self.masker().is_none()
    }

    /// The masker of every value resolved so far and, unless this call reveals one itself,
    /// of every value revealed to a caller.
    pub fn masker(&self) -> Option<Arc<Masker>> {
        let mut state = self.lock();
        if state.reveals {
            return state.masker.clone();
        }
        let Some((generation, revealed)) = revealed_masker() else {
            return state.masker.clone();
        };
        if state.values.is_empty() {
            return Some(revealed);
        }
        if let Some((built, masker)) = &state.with_revealed
            && *built == generation
        {
            return Some(masker.clone());
        }
        let (generation, masker) = masker_with_revealed(&state.values);
        state.with_revealed = Some((generation, masker.clone()));
        Some(masker)
    }

    /// `text` with every resolved value masked, in every form.
    pub fn mask_str(&self, text: &str) -> String {
        match self.masker() {
            Some(masker) => masker.mask_str(text),
            None => text.to_string(),
        }
    }

    /// `bytes` masked.
    pub fn mask_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        match self.masker() {
            Some(masker) => masker.mask(bytes),
            None => bytes.to_vec(),
        }
    }

    /// Masks every string (and key) of a JSON value in place.
    pub fn mask_json(&self, value: &mut Value) {
        if let Some(masker) = self.masker() {
            mask_json_with(&masker, value);
        }
    }
}

/// Masks every string (and key) of `value` in place; whether anything was masked.
fn mask_json_with(masker: &Masker, value: &mut Value) -> bool {
    match value {
        Value::String(text) => {
            let masked = masker.mask_str(text);
            let changed = masked != *text;
            if changed {
                *text = masked;
            }
            changed
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| mask_json_with(masker, v) | changed),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            let mut changed = false;
            for (key, mut item) in entries {
                changed |= mask_json_with(masker, &mut item);
                let masked = masker.mask_str(&key);
                changed |= masked != key;
                map.insert(masked, item);
            }
            changed
        }
        _ => false,
    }
}

/// Maskers of calls still running, for text produced outside any call's pipeline (log lines).
fn live_maskers() -> MutexGuard<'static, Vec<Weak<Masker>>> {
    static LIVE: Mutex<Vec<Weak<Masker>>> = Mutex::new(Vec::new());
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The maskers of every call still running, and the one of every value revealed to a caller.
fn live_and_revealed() -> Vec<Arc<Masker>> {
    let mut maskers: Vec<Arc<Masker>> = {
        let mut live = live_maskers();
        live.retain(|weak| weak.strong_count() > 0);
        live.iter().filter_map(Weak::upgrade).collect()
    };
    if let Some((_, revealed)) = revealed_masker() {
        maskers.push(revealed);
    }
    maskers
}

/// Every string of `value` masked with the secrets of every call still running and every value
/// revealed to a caller; whether anything was masked. For receipt rows: a value one call
/// resolved or revealed is masked wherever any row carries it.
pub fn mask_json_with_live(value: &mut Value) -> bool {
    live_and_revealed().iter().fold(false, |changed, masker| {
        mask_json_with(masker, value) | changed
    })
}

/// `line` masked with the secrets of every call still running and every value revealed to a
/// caller, or `None` when there are none (the common case: nothing is copied). For the daemon's
/// log writer.
pub fn mask_with_live(line: &[u8]) -> Option<Vec<u8>> {
    let maskers = live_and_revealed();
    if maskers.is_empty() {
        return None;
    }
    let mut text = line.to_vec();
    for masker in maskers {
        text = masker.mask(&text);
    }
    Some(text)
}

/// What a value revealed to a caller is masked as: `[masked revealed]`.
pub const REVEALED: &str = "revealed";

/// How many revealed values are remembered: past this, the one revealed longest ago is
/// forgotten. Each adds a few hundred forms to the masker that every output passes through,
/// rebuilt at each reveal and, for a call that resolves secrets of its own, once for that call.
pub const REVEALED_KEPT: usize = 16;

/// The values revealed to callers since the daemon started (the last [`REVEALED_KEPT`]), and
/// their masker. Maskers are built outside the lock: rows and log lines are masked meanwhile.
struct Revealed {
    values: VecDeque<SecretString>,
    /// Counts changes of `values`.
    generation: u64,
    /// The masker of `values` as they were at the generation it is given with.
    masker: Option<(u64, Arc<Masker>)>,
}

fn revealed() -> MutexGuard<'static, Revealed> {
    static REVEALED_VALUES: Mutex<Revealed> = Mutex::new(Revealed {
        values: VecDeque::new(),
        generation: 0,
        masker: None,
    });
    REVEALED_VALUES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copies of the revealed values, and the generation they are of.
fn revealed_values(state: &Revealed) -> (u64, Vec<SecretString>) {
    let values = state
        .values
        .iter()
        .map(|v| SecretString::from(v.expose_secret()))
        .collect();
    (state.generation, values)
}

/// Remembers `value` as revealed to a caller; once this returns, every revealed masker holds it.
/// A value shorter than [`crate::kit::mask::MIN_FORM`] bytes is not remembered: masking every such
/// run of characters in every later row would garble them all (`ok`, a digit) and hide nothing.
fn remember_revealed(value: &SecretString) {
    let bytes = value.expose_secret().as_bytes();
    if bytes.len() < crate::kit::mask::MIN_FORM {
        return;
    }
    let (generation, values) = {
        let mut state = revealed();
        if state
            .values
            .iter()
            .any(|known| known.expose_secret().as_bytes() == bytes)
        {
            return;
        }
        state
            .values
            .push_back(SecretString::from(value.expose_secret()));
        while state.values.len() > REVEALED_KEPT {
            state.values.pop_front();
        }
        state.generation += 1;
        revealed_values(&state)
    };
    let masker = Arc::new(Masker::new(
        values
            .iter()
            .map(|v| (REVEALED, v.expose_secret().as_bytes())),
    ));
    let mut state = revealed();
    // A reveal that began later and finished first installed a masker that holds this value
    // too; an earlier one's, finishing later, holds less.
    if state
        .masker
        .as_ref()
        .is_none_or(|(installed, _)| *installed < generation)
    {
        state.masker = Some((generation, masker));
    }
}

/// The masker of every revealed value and its generation, or `None` before any reveal.
fn revealed_masker() -> Option<(u64, Arc<Masker>)> {
    revealed().masker.clone()
}

/// A masker of `values` (a call's own, named as they are) and of every revealed value, with the
/// generation of revealed values it holds at least.
fn masker_with_revealed(values: &[(String, SecretString)]) -> (u64, Arc<Masker>) {
    let (generation, revealed_now) = {
        let state = revealed();
        let installed = state.masker.as_ref().map_or(0, |(g, _)| *g);
        (installed, revealed_values(&state).1)
    };
    let masker = Masker::new(
        values
            .iter()
            .map(|(n, v)| (n.as_str(), v.expose_secret().as_bytes()))
            .chain(
                revealed_now
                    .iter()
                    .map(|v| (REVEALED, v.expose_secret().as_bytes())),
            ),
    );
    (generation, Arc::new(masker))
}

/// Checks a secret's name for a run's environment: a portable variable name, not one the
/// daemon reserves.
pub fn check_env_name(name: &str, at: &str) -> Result<(), ToolError> {
    let portable = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Err(ToolError::invalid(format!(
            "`{name}` is not a variable name: use letters, digits and `_`, not starting with a \
             digit (e.g. API_TOKEN)"
        ))
        .at(at.to_string()));
    }
    if name.starts_with("COMPUTER_") {
        return Err(ToolError::invalid(
            "COMPUTER_* variables are reserved for the daemon and never passed to runs",
        )
        .at(at.to_string()));
    }
    Ok(())
}

/// Checks a secret's value before it is typed as characters (`gui type`, `shell send`): a line
/// break would act as Return (running a line nobody decided on, in a terminal), other control
/// characters as keys no one asked for.
pub fn check_typed_secret(text: &str, max_chars: usize) -> Result<(), SurfaceError> {
    let chars = text.chars().count();
    let refuse = |why: String| SurfaceError::Failed {
        message: format!("the secret was not typed: {why}"),
    };
    if chars == 0 {
        return Err(refuse("its value is empty".into()));
    }
    if chars > max_chars {
        return Err(refuse(format!(
            "it is longer than the {max_chars} characters one call types at most"
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(refuse(
            "it holds a line break or another control character, which would press keys \
             (Return) no one decided on"
                .into(),
        ));
    }
    Ok(())
}

/// `{"secret": "keychain://…"}` in place of a text: the reference, or `None` for plain text.
/// Any other object is an error naming `at`.
pub fn secret_in_place(value: &Value, at: &str) -> Result<Option<SecretRef>, ToolError> {
    let Value::Object(map) = value else {
        return Ok(None);
    };
    match (map.get("secret"), map.len()) {
        (Some(Value::String(text)), 1) => parse_reference(text, &format!("{at}.secret")).map(Some),
        _ => Err(ToolError::invalid(
            "give text, or {\"secret\": \"keychain://<service>/<account>\"} to use a stored secret \
             without seeing it",
        )
        .at(at.to_string())
        .valid(["secret"])),
    }
}

/// `complications.secrets`: each name a variable of the run, each value a reference. The value
/// goes into the run's environment, not its stdin (which stays the run's own input, as the call
/// gives it) and never its argv (readable by every process in `/proc/PID/cmdline`): tools read
/// tokens from variables (`GH_TOKEN`, `AWS_SECRET_ACCESS_KEY`), as with `op run`.
pub(crate) fn env_secrets(
    complications: &Complications,
) -> Result<Vec<(String, SecretRef)>, ToolError> {
    let mut secrets = Vec::new();
    for (name, text) in &complications.secrets {
        let at = format!("complications.secrets.{name}");
        check_env_name(name, &at)?;
        if complications.env.contains_key(name) {
            // Which value the run would see would depend on an order the approver is not
            // shown: one name, one source.
            return Err(ToolError::invalid(format!(
                "`{name}` is both in env and in secrets; a secret's variable cannot also be set \
                 by env"
            ))
            .at(format!("complications.env.{name}")));
        }
        secrets.push((name.clone(), parse_reference(text, &at)?));
    }
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str);

    impl Resolve for Fixed {
        fn resolve(&self, _: &SecretRef) -> Result<SecretString, String> {
            Ok(SecretString::from(self.0))
        }
    }

    #[test]
    fn the_daemons_own_items_are_never_resolved_for_a_call() {
        let err = parse_reference(
            "keychain://computer.gui/portal-restore-token",
            "complications.secrets.T",
        )
        .unwrap_err();
        let shown = serde_json::to_string(&err).unwrap();
        assert!(
            shown.contains("denied") && shown.contains("daemon's own"),
            "{shown}"
        );
        let holder = CallSecrets::with_resolver(Arc::new(Fixed("a-restore-token")));
        let reference = SecretRef::parse("keychain://computer.gui/portal-restore-token").unwrap();
        let err = holder.resolve("T", &reference).unwrap_err().to_string();
        assert!(
            !err.contains("a-restore-token") && err.contains("nothing ran"),
            "{err}"
        );
        // An ordinary reference still resolves.
        let ordinary = SecretRef::parse("keychain://example/agent").unwrap();
        assert!(holder.resolve("O", &ordinary).is_ok());
    }

    #[test]
    fn a_bad_reference_is_an_error_at_its_path_saying_what_is_valid() {
        let err = parse_reference("op://vault/item", "complications.secrets.T").unwrap_err();
        let shown = serde_json::to_string(&err).unwrap();
        assert!(shown.contains("complications.secrets.T"), "{shown}");
        assert!(shown.contains("keychain://<service>/<account>"), "{shown}");
    }

    #[test]
    fn a_resolved_value_is_masked_everywhere_the_holder_masks_and_in_live_log_lines() {
        let holder = CallSecrets::with_resolver(Arc::new(Fixed("hunter2-value")));
        let reference = SecretRef::parse("keychain://s/a").unwrap();
        let value = holder.resolve("PW", &reference).unwrap();
        assert_eq!(value.expose_secret(), "hunter2-value");
        assert_eq!(holder.mask_str("pw=hunter2-value"), "pw=[masked PW]");
        let mut json = serde_json::json!({"out": ["x hunter2-value"], "hunter2-value": 1});
        holder.mask_json(&mut json);
        assert_eq!(
            json,
            serde_json::json!({"out": ["x [masked PW]"], "[masked PW]": 1})
        );
        let logged = mask_with_live(b"log: aHVudGVyMi12YWx1ZQ== end").unwrap();
        let logged = String::from_utf8(logged).unwrap();
        assert!(logged.starts_with("log: [masked PW]"), "{logged}");
        assert!(!logged.contains("aHVudGVy"), "{logged}");
        assert!(!format!("{holder:?}").contains("hunter2"));
        drop(holder);
        assert!(
            mask_with_live(b"hunter2-value").is_none_or(|m| m == b"hunter2-value"),
            "a finished call's secrets stop being looked for"
        );
    }

    #[test]
    fn a_revealed_value_is_masked_everywhere_but_in_the_revealing_calls_outputs() {
        let value = SecretString::from("revealed-7c1e0b9d44");
        let revealing = CallSecrets::default();
        revealing.reveal(&value);
        // The revealing call's own reply carries the value.
        assert_eq!(
            revealing.mask_str("v=revealed-7c1e0b9d44"),
            "v=revealed-7c1e0b9d44"
        );
        // Every other call's outputs mask it, in its forms, whether or not it resolved secrets
        // of its own.
        let later = CallSecrets::default();
        assert!(!later.is_empty());
        assert_eq!(
            later.mask_str("echo revealed-7c1e0b9d44"),
            "echo [masked revealed]"
        );
        let encoded = hex::encode("revealed-7c1e0b9d44");
        assert_eq!(later.mask_str(&encoded), "[masked revealed]");
        let with_own = CallSecrets::with_resolver(Arc::new(Fixed("own-value-51a2")));
        with_own
            .resolve("OWN", &SecretRef::parse("keychain://s/own").unwrap())
            .unwrap();
        assert_eq!(
            with_own.mask_str("own-value-51a2 revealed-7c1e0b9d44"),
            "[masked OWN] [masked revealed]"
        );
        // Receipt rows (the revealing call's too) and log lines mask it.
        let mut row = serde_json::json!({"args": {"argv": ["echo", "revealed-7c1e0b9d44"]}});
        assert!(mask_json_with_live(&mut row));
        assert_eq!(row["args"]["argv"][1], "[masked revealed]");
        let mut plain = serde_json::json!({"args": {"argv": ["echo", "nothing secret"]}});
        assert!(!mask_json_with_live(&mut plain));
        let logged = mask_with_live(b"log revealed-7c1e0b9d44").unwrap();
        assert_eq!(logged, b"log [masked revealed]");
        // A value too short to mask alone is not remembered: it would blank every such run of
        // characters in every row.
        revealing.reveal(&SecretString::from("ok1"));
        assert_eq!(later.mask_str("ok1"), "ok1");
    }

    #[test]
    fn only_the_last_revealed_values_are_kept() {
        let values: Vec<String> = (0..REVEALED_KEPT + 1)
            .map(|n| format!("kept-value-{n:04}-a9f3"))
            .collect();
        for value in &values {
            CallSecrets::default().reveal(&SecretString::from(value.as_str()));
        }
        let masked = CallSecrets::default().mask_str(&values.join(" "));
        assert!(
            masked.starts_with("kept-value-0000-a9f3 [masked revealed]"),
            "{masked}"
        );
        assert!(!masked[20..].contains("kept-value"), "{masked}");
    }

    #[test]
    fn secret_in_place_takes_text_or_one_reference() {
        assert!(
            secret_in_place(&Value::String("hi".into()), "args.text")
                .unwrap()
                .is_none()
        );
        let found = secret_in_place(
            &serde_json::json!({"secret": "keychain://svc/acct"}),
            "args.text",
        )
        .unwrap()
        .unwrap();
        assert_eq!(found.account, "acct");
        let err = secret_in_place(&serde_json::json!({"secret": 1}), "args.text").unwrap_err();
        assert!(serde_json::to_string(&err).unwrap().contains("keychain://"));
    }

    #[test]
    fn env_names_must_be_portable_and_not_reserved() {
        assert!(check_env_name("API_TOKEN", "x").is_ok());
        assert!(check_env_name("1X", "x").is_err());
        assert!(check_env_name("A=B", "x").is_err());
        assert!(check_env_name("COMPUTER_TOKEN", "x").is_err());
    }
}
