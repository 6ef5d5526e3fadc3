//! The evidence a call asks for (`complications.evidence`): what takes the screenshots (the
//! person's desktop or an agent's own), and their report in the result.

use std::sync::Arc;

use computer_ipc::{ComputerCall, Evidence};
use computer_surfaces::{CallContext, EvidenceCapture, EvidenceShot, Outcome, Registry};
use serde_json::{Map, Value, json};

use crate::call::desktops::Desktops;

/// The evidence a call asked for, and what takes it.
pub(crate) struct Shots {
    pub(crate) asked: Evidence,
    capturer: Option<Arc<dyn EvidenceCapture>>,
}

impl Shots {
    pub(crate) async fn capture(
        &self,
        ctx: &CallContext,
        label: &str,
        settle: bool,
    ) -> Result<EvidenceShot, String> {
        match &self.capturer {
            Some(capturer) => capturer
                .capture(ctx, label, settle)
                .await
                .map_err(|err| err.to_string()),
            None => Err("screenshots are unavailable here".into()),
        }
    }
}

impl Shots {
    /// The screenshots `call` asked for (`complications.evidence`), of the desktop it acts on:
    /// an agent's own (`complications.desktop`, from `desktops`) or the person's (`registry`).
    pub(crate) fn for_call(call: &ComputerCall, registry: &Registry, desktops: &Desktops) -> Shots {
        Shots {
            asked: call.complications.evidence.unwrap_or(Evidence::None),
            capturer: match &call.complications.desktop {
                Some(id) => desktops.evidence(id),
                None => registry.evidence().cloned(),
            },
        }
    }
}

/// The evidence part of a result: a compact reference to each shot (or why it failed). The shots'
/// files join the outcome's artifacts so the receipt records their hashes.
pub(crate) fn evidence_report(
    shots: &[(&str, Option<Result<EvidenceShot, String>>)],
    outcome: &mut Outcome,
) -> Option<Value> {
    let mut report = Map::new();
    for (label, shot) in shots {
        let Some(shot) = shot else { continue };
        let entry = match shot {
            Ok(shot) => {
                outcome.artifacts.push(shot.artifact.clone());
                let mut entry = json!({
                    "path": shot.artifact.path,
                    "sha256": shot.artifact.sha256,
                    "bytes": shot.artifact.bytes,
                    "width": shot.width,
                    "height": shot.height,
                });
                // How long the screen took to settle, for the shot taken after the action; that
                // it did not settle within the bound is the news, not that it did.
                if let Some(settle_ms) = shot.settle_ms {
                    entry["settle_ms"] = json!(settle_ms);
                }
                if !shot.settled {
                    entry["settled"] = json!(false);
                    entry["settle_bound_ms"] = json!(shot.settle_bound_ms);
                }
                entry
            }
            Err(message) => json!({"error": message}),
        };
        report.insert(label.to_string(), entry);
    }
    (!report.is_empty()).then_some(Value::Object(report))
}
