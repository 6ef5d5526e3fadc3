//! `keychain exists`: whether an item exists under a reference.

use async_trait::async_trait;
use serde::Deserialize;

use super::*;
use crate::CallContext;
use crate::kit::secret_store::{STORE_DEADLINE, call_with_deadline};

/// Whether an item exists under a reference.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExistsArgs {
    /// `keychain://<service>/<account>`.
    pub reference: SecretRef,
}

/// A checked `keychain exists`.
pub(super) struct Exists {
    store: Arc<dyn SecretStore>,
    reference: SecretRef,
}

impl Command for Exists {
    const NAME: &'static str = "exists";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["reference", "exists"];
    type Args = ExistsArgs;

    fn prepare(args: ExistsArgs, call: Preparing) -> Result<Exists, ToolError> {
        Ok(Exists {
            store: call.store,
            reference: args.reference,
        })
    }
}

#[async_trait]
impl PreparedAction for Exists {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!("check whether {} exists in the keychain", self.reference)
    }

    fn facts(&self) -> ActionFacts {
        item_facts(&self.reference, json!({"reference": self.reference.uri()}))
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let lookup = self.reference.clone();
        let info = call_with_deadline(&self.store, STORE_DEADLINE, move |store| {
            store.info(&lookup)
        })
        .await
        .map_err(store_failure)?;
        let mut fields = Map::new();
        fields.insert("reference".into(), json!(self.reference.uri()));
        fields.insert("exists".into(), json!(info.is_some()));
        Ok(item_outcome(&self.reference, fields))
    }
}
