//! What an act achieved, as read back after it: one closed set of effects and the evidence
//! behind each, written into an act's model-visible fields and its result receipt alike.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::Outcome;

/// The field an act's effect is in, and the one its evidence is in.
pub const EFFECT_FIELD: &str = "effect";
pub const EVIDENCE_FIELD: &str = "effect_evidence";

/// The result fields every act that reads back its effect lists. A refused act's error reply
/// carries `effect` alone (its error says why).
pub const EFFECT_FIELDS: [&str; 2] = ["effect", "effect_evidence"];

/// How long a read-back waits for the readable state to stop changing, and at most: the
/// evidence shots' settle wait, so that an act's read-back and its `evidence` agree.
pub const READ_BACK_QUIET: Duration = crate::SETTLE_QUIET;
pub const READ_BACK_BOUND: Duration = crate::SETTLE_BOUND;
/// How often a read-back without an event to wait on reads again: first after
/// `READ_BACK_FIRST_POLL`, each pause twice the last, then every `READ_BACK_POLL`.
pub const READ_BACK_POLL: Duration = crate::SETTLE_POLL;
pub const READ_BACK_FIRST_POLL: Duration = Duration::from_millis(1);

/// What an act achieved, as far as anything readable shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// A read-back shows the intended change (never a screenshot difference alone).
    Confirmed,
    /// A read-back shows part of the intended change (typed text that only partly landed).
    Partial,
    /// Nothing readable could show whether it took effect.
    Unverifiable,
    /// What could show the change was read, and nothing changed.
    SuspectedNoop,
    /// Refused before anything was sent (policy, a person, a check right before acting).
    Refused,
}

/// An effect and what was read back to tell it: a short plain sentence that never holds a
/// secret ("check box \"Bold\" reads checked (was unchecked)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectReport {
    pub effect: Effect,
    pub evidence: String,
}

impl EffectReport {
    pub fn new(effect: Effect, evidence: impl Into<String>) -> EffectReport {
        EffectReport {
            effect,
            evidence: evidence.into(),
        }
    }

    /// The report of an act whose read-back is turned off by config.
    pub fn read_back_off() -> EffectReport {
        EffectReport::new(Effect::Unverifiable, "read-back off")
    }

    /// Writes the effect into the outcome's fields, which the reply shows and the result
    /// receipt records.
    pub fn record(self, outcome: &mut Outcome) {
        outcome
            .fields
            .insert(EFFECT_FIELD.into(), json!(self.effect));
        outcome
            .fields
            .insert(EVIDENCE_FIELD.into(), json!(self.evidence));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_serialise_as_their_names() {
        let names: Vec<_> = [
            Effect::Confirmed,
            Effect::Partial,
            Effect::Unverifiable,
            Effect::SuspectedNoop,
            Effect::Refused,
        ]
        .into_iter()
        .map(|effect| serde_json::to_value(effect).unwrap())
        .collect();
        assert_eq!(
            names,
            [
                "confirmed",
                "partial",
                "unverifiable",
                "suspected_noop",
                "refused"
            ]
        );
    }

    #[test]
    fn a_report_lands_in_the_fields() {
        let mut outcome = Outcome::default();
        EffectReport::new(Effect::SuspectedNoop, "nothing changed").record(&mut outcome);
        assert_eq!(outcome.fields["effect"], json!("suspected_noop"));
        assert_eq!(outcome.fields["effect_evidence"], json!("nothing changed"));
    }
}
