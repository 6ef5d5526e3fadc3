//! `keychain set`: an item stored, its value from the call only where the config allows (never
//! one of the daemon's own).

use async_trait::async_trait;
use secrecy::SecretString;
use serde::Deserialize;

use super::*;
use crate::CallContext;
use crate::kit::secret_store::{STORE_DEADLINE, call_with_deadline};

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

/// A checked `keychain set`.
pub(super) struct Set {
    store: Arc<dyn SecretStore>,
    reference: SecretRef,
    label: String,
    value: SecretString,
}

impl Command for Set {
    const NAME: &'static str = "set";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["reference", "label"];
    type Args = SetArgs;

    fn prepare(args: SetArgs, call: Preparing) -> Result<Set, ToolError> {
        // The daemon's own items (the person's consent to the GNOME gui backend's
        // remote-desktop session): a call that wrote one would consent for them.
        refuse_daemon_item(
            &args.reference,
            "args.reference",
            format!(
                "{} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what only the person grants, such as the consent to the GNOME remote-desktop session); a call may not set it: the person grants it by approving the gui call that asks",
                args.reference
            ),
        )?;
        let Some(value) = args.value else {
            return Err(ToolError::invalid(format!(
                "keychain set takes its value from the person, not from a call: ask them to run `computer secrets set {}` in a terminal (it reads the value without echo); a call may pass `value` only where the daemon's config sets [keychain] model_values = true",
                args.reference
            ))
            .at("args.value"));
        };
        if !call.model_values {
            return Err(ToolError::invalid(format!(
                "this daemon does not take secret values from calls: ask the person to run `computer secrets set {}` in a terminal, or to set [keychain] model_values = true in the config",
                args.reference
            ))
            .at("args.value"));
        }
        if value.is_empty() {
            return Err(ToolError::invalid("the value is empty").at("args.value"));
        }
        let label = match args.label {
            Some(label) if label.trim().is_empty() => {
                return Err(ToolError::invalid(
                    "the label is empty; leave it out to use the reference",
                )
                .at("args.label"));
            }
            Some(label) => label,
            None => args.reference.uri(),
        };
        Ok(Set {
            store: call.store,
            reference: args.reference,
            label,
            value: SecretString::from(value),
        })
    }
}

#[async_trait]
impl PreparedAction for Set {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!(
            "store a value the agent supplied as {} (label {:?})",
            self.reference, self.label
        )
    }

    fn facts(&self) -> ActionFacts {
        // The value never reaches a receipt, a policy matcher or an approver's screen.
        item_facts(
            &self.reference,
            json!({"reference": self.reference.uri(), "label": self.label, "value": WITHHELD}),
        )
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let Set {
            store,
            reference,
            label,
            value,
        } = *self;
        let (target, shown_label) = (reference.clone(), label.clone());
        call_with_deadline(&store, STORE_DEADLINE, move |store| {
            store.set(&target, &label, &value)
        })
        .await
        .map_err(store_failure)?;
        let mut fields = Map::new();
        fields.insert("reference".into(), json!(reference.uri()));
        fields.insert("label".into(), json!(shown_label));
        Ok(item_outcome(&reference, fields))
    }
}
