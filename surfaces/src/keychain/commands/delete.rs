//! `keychain delete`: an item deleted (never one of the daemon's own).

use async_trait::async_trait;
use serde::Deserialize;

use super::*;
use crate::CallContext;
use crate::kit::secret_store::{STORE_DEADLINE, call_with_deadline};

/// Deletes an item.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
}

/// A checked `keychain delete`.
pub(super) struct Delete {
    store: Arc<dyn SecretStore>,
    reference: SecretRef,
}

impl Command for Delete {
    const NAME: &'static str = "delete";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["reference", "deleted"];
    type Args = DeleteArgs;

    fn prepare(args: DeleteArgs, call: Preparing) -> Result<Delete, ToolError> {
        let reference = args.reference;
        // Deleting the consent or the restore token would not grant anything, but it would
        // undo what the person granted and make the daemon ask again, or fail, on the person's
        // behalf: only the person removes them.
        refuse_daemon_item(
            &reference,
            "args.reference",
            format!(
                "{reference} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what only the person grants, such as the consent to the GNOME remote-desktop session and the desktop portal's restore token); a call may not delete it: the person revokes it with `secret-tool clear service {} username {}`",
                reference.service, reference.account
            ),
        )?;
        Ok(Delete {
            store: call.store,
            reference,
        })
    }
}

#[async_trait]
impl PreparedAction for Delete {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!("delete {} from the keychain", self.reference)
    }

    fn facts(&self) -> ActionFacts {
        item_facts(&self.reference, json!({"reference": self.reference.uri()}))
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let target = self.reference.clone();
        let deleted = call_with_deadline(&self.store, STORE_DEADLINE, move |store| {
            store.delete(&target)
        })
        .await
        .map_err(store_failure)?;
        let mut fields = Map::new();
        fields.insert("reference".into(), json!(self.reference.uri()));
        fields.insert("deleted".into(), json!(deleted));
        Ok(item_outcome(&self.reference, fields))
    }
}
