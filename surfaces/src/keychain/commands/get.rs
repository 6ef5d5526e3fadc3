//! `keychain get`: an item's metadata and reference; its value only on an approved `reveal`
//! (never one of the daemon's own).

use async_trait::async_trait;
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::*;
use crate::kit::secret_store::{STORE_DEADLINE, call_with_deadline};
use crate::{CallContext, CapturedText};

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

/// A checked `keychain get`.
pub(super) struct Get {
    store: Arc<dyn SecretStore>,
    reference: SecretRef,
    reveal: bool,
}

impl Command for Get {
    const NAME: &'static str = "get";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["reference", "service", "account", "label", "value"];
    type Args = GetArgs;

    fn prepare(args: GetArgs, call: Preparing) -> Result<Get, ToolError> {
        if args.reveal {
            // The desktop portal's restore token among them lets whoever holds it capture the
            // screen and send input without the person being asked.
            refuse_daemon_item(
                &args.reference,
                "args.reveal",
                format!(
                    "{} is the daemon's own item (services starting with \"{DAEMON_SERVICES}\" hold what the person granted the daemon, such as the desktop portal's restore token); its value is never revealed to a call",
                    args.reference
                ),
            )?;
        }
        Ok(Get {
            store: call.store,
            reference: args.reference,
            reveal: args.reveal,
        })
    }
}

#[async_trait]
impl PreparedAction for Get {
    fn risk(&self) -> Risk {
        if self.reveal {
            Risk::Secret
        } else {
            Self::RISK
        }
    }

    fn describe(&self) -> String {
        if self.reveal {
            format!("REVEAL the value of {} to the agent", self.reference)
        } else {
            format!("look up {} in the keychain (no value)", self.reference)
        }
    }

    fn facts(&self) -> ActionFacts {
        item_facts(
            &self.reference,
            json!({"reference": self.reference.uri(), "reveal": self.reveal}),
        )
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let lookup = self.reference.clone();
        let secrets = ctx.secrets.clone();
        let reveal = self.reveal;
        let (info, value) = call_with_deadline(&self.store, STORE_DEADLINE, move |store| {
            let info = store
                .info(&lookup)?
                .ok_or_else(|| StoreError::not_found(&lookup))?;
            let value = if reveal {
                let value = store.get(&lookup)?;
                // From here on the value is masked in every other call's outputs and in every
                // receipt row and log line, however it travels (a later step's ref, a bridged
                // call, a job, text the model pastes); this call's reply alone carries it.
                secrets.reveal(&value);
                Some(value)
            } else {
                None
            };
            Ok((info, value))
        })
        .await
        .map_err(store_failure)?;
        let mut outcome = item_outcome(&self.reference, item_fields(&info));
        if let Some(value) = value {
            // A text, not a field: the result receipt records a text's size and digest but
            // never its bytes, and the digest here is withheld too (a digest of a short
            // password can be searched for).
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
        Ok(outcome)
    }
}
