//! The policy hook on the dispatch path: every validated call is decided here before its intent
//! receipt is written. Rules and human approvals plug in behind this trait.

use computer_ipc::SurfaceName;
use computer_surfaces::Risk;
use serde::Serialize;

/// Who is calling, as the socket's peer credentials and token say.
#[derive(Debug, Clone, Serialize)]
pub struct Caller {
    pub uid: u32,
    pub pid: Option<i32>,
    /// The agent profile; `default` for callers without a token.
    pub agent: String,
}

/// What policy sees of a call.
#[derive(Debug)]
pub struct PolicyInput<'a> {
    pub caller: &'a Caller,
    pub surface: SurfaceName,
    pub command: &'a str,
    pub risk: Risk,
    /// The action in plain words.
    pub action: &'a str,
}

/// A policy's answer, with the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    Allow { rule: String },
    Deny { rule: String, reason: String },
}

pub trait Policy: Send + Sync {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision;
}

/// Allows every call. Stands until configured rules and approvals exist; receipts name it so
/// nobody mistakes an allowed call for an approved one.
pub struct AllowAll;

impl Policy for AllowAll {
    fn decide(&self, _input: &PolicyInput<'_>) -> Decision {
        Decision::Allow {
            rule: "builtin:allow-all (no rules or approvals configured in this version)".into(),
        }
    }
}
