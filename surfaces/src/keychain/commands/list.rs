//! `keychain list`: the items a reference can name (service, account, label, reference); never
//! values.

use async_trait::async_trait;

use super::*;
use crate::kit::secret_store::{STORE_DEADLINE, call_with_deadline};
use crate::{CallContext, NoArgs};

/// Lists the items a reference can name (service, account, label, reference); never values.
type ListArgs = NoArgs;

/// A checked `keychain list`.
pub(super) struct List {
    store: Arc<dyn SecretStore>,
}

impl Command for List {
    const NAME: &'static str = "list";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["items"];
    type Args = ListArgs;

    fn prepare(_: ListArgs, call: Preparing) -> Result<List, ToolError> {
        Ok(List { store: call.store })
    }
}

#[async_trait]
impl PreparedAction for List {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        "list the keychain's items (names only, no values)".into()
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({})),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let items = call_with_deadline(&self.store, STORE_DEADLINE, |store| store.list())
            .await
            .map_err(store_failure)?;
        let items: Vec<Value> = items
            .iter()
            .map(|item| Value::Object(item_fields(item)))
            .collect();
        let mut outcome = Outcome {
            success: true,
            ..Outcome::default()
        };
        outcome.fields.insert("items".into(), Value::Array(items));
        Ok(outcome)
    }
}
