//! The keychain commands, one type per command and one file each: its args, the fields its
//! result may carry, the check of its args into the action ready to run
//! ([`Command::prepare`]) and the action itself (its facts and its run, as a
//! [`PreparedAction`]). [`TABLE`] below is the only place the commands are listed, and each
//! names itself once (`Command::NAME`).

mod delete;
mod exists;
mod get;
mod list;
mod set;

use std::sync::Arc;

use computer_ipc::{ErrorCode, ToolError};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::kit::secret_store::{DAEMON_SERVICES, ItemInfo, SecretRef, SecretStore, StoreError};
use crate::{
    ActionFacts, CommandSpec, Outcome, PreparedAction, Risk, SurfaceError, TargetFacts, TargetKind,
    decode_args,
};
use delete::Delete;
use exists::Exists;
use get::Get;
use list::List;
use set::Set;

/// Every keychain command, by name, in the order the surface offers them.
const TABLE: &[Entry] = &[
    Entry::of::<List>(),
    Entry::of::<Exists>(),
    Entry::of::<Get>(),
    Entry::of::<Set>(),
    Entry::of::<Delete>(),
];

/// What receipts and logs show in place of a value.
const WITHHELD: &str = "[withheld]";

/// One keychain command, implemented by the action a checked call of it is.
trait Command: PreparedAction + Sized + 'static {
    /// How a call names it (`"command": "get"`).
    const NAME: &'static str;
    /// The risk its spec declares; the action may raise it (`get` with `reveal` is
    /// [`Risk::Secret`]).
    const RISK: Risk;
    /// Field names its result may carry.
    const FIELDS: &'static [&'static str];
    /// Its args, decoded with [`decode_args`]; their JSON Schema is its part of the tool's help.
    type Args: DeserializeOwned + schemars::JsonSchema;

    /// Checks the args into the action.
    fn prepare(args: Self::Args, call: Preparing) -> Result<Self, ToolError>;
}

/// What checking a command's args may use beyond them.
pub(super) struct Preparing {
    pub(super) store: Arc<dyn SecretStore>,
    /// Whether the config lets a call supply a value (`[keychain] model_values`).
    pub(super) model_values: bool,
}

/// A call checked into the action ready to run, or why it is refused.
type Checked = Result<Box<dyn PreparedAction>, ToolError>;

/// A command as the table holds it: its spec, its result fields and its args check.
struct Entry {
    spec: CommandSpec,
    fields: &'static [&'static str],
    prepare: fn(&Map<String, Value>, Preparing) -> Checked,
}

impl Entry {
    const fn of<C: Command>() -> Entry {
        Entry {
            spec: CommandSpec::of::<C::Args>(C::NAME, C::RISK),
            fields: C::FIELDS,
            prepare: decode_and_prepare::<C>,
        }
    }
}

fn decode_and_prepare<C: Command>(
    args: &Map<String, Value>,
    call: Preparing,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    let args: C::Args = decode_args(args)?;
    Ok(Box::new(C::prepare(args, call)?))
}

/// The specs of [`TABLE`], as the surface lists them.
pub(super) static COMMANDS: [CommandSpec; TABLE.len()] = {
    let mut specs = [TABLE[0].spec; TABLE.len()];
    let mut i = 1;
    while i < TABLE.len() {
        specs[i] = TABLE[i].spec;
        i += 1;
    }
    specs
};

/// Field names the result of `command` may carry.
pub(super) fn result_fields(command: &str) -> &'static [&'static str] {
    TABLE
        .iter()
        .find(|entry| entry.spec.name == command)
        .map_or(&[], |entry| entry.fields)
}

/// Checks a call of `command` into the action ready to run.
pub(super) fn prepare(
    command: &str,
    args: &Map<String, Value>,
    call: Preparing,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    let Some(entry) = TABLE.iter().find(|entry| entry.spec.name == command) else {
        return Err(
            ToolError::invalid(format!("unknown keychain command `{command}`"))
                .at("command")
                .valid(COMMANDS.iter().map(|c| c.name)),
        );
    };
    (entry.prepare)(args, call)
}

/// A store call's failure as the surface's.
fn store_failure(err: StoreError) -> SurfaceError {
    SurfaceError::Failed {
        message: err.to_string(),
    }
}

/// An item's metadata, as `list` and `get` show it.
fn item_fields(item: &ItemInfo) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("reference".into(), json!(item.reference().uri()));
    fields.insert("service".into(), json!(item.service));
    fields.insert("account".into(), json!(item.account));
    fields.insert("label".into(), json!(item.label));
    fields
}

/// The facts of a command about the item `reference`, with its args as the receipt shows them.
fn item_facts(reference: &SecretRef, args: Value) -> ActionFacts {
    ActionFacts {
        args: Some(args),
        target: Some(TargetFacts {
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

/// A successful outcome about the item `reference`, which its receipt names.
fn item_outcome(reference: &SecretRef, fields: Map<String, Value>) -> Outcome {
    let mut outcome = Outcome {
        success: true,
        fields,
        ..Outcome::default()
    };
    outcome
        .receipt
        .insert("keychain_reference".into(), json!(reference.uri()));
    outcome
}

/// Refuses a call on one of the daemon's own items (services starting with
/// [`DAEMON_SERVICES`]): `why` says what the item holds and who may change it.
fn refuse_daemon_item(reference: &SecretRef, at: &str, why: String) -> Result<(), ToolError> {
    if reference.service.starts_with(DAEMON_SERVICES) {
        return Err(ToolError::new(ErrorCode::Denied, why).at(at));
    }
    Ok(())
}
