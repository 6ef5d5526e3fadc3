//! Who calls and what is asked: the caller's identity, the input policy decides on, and the
//! decision it answers (the `Policy` trait, and `AllowAll` for tests and benches).

use std::path::PathBuf;

use computer_ipc::SurfaceName;
use computer_surfaces::{ActionFacts, Risk};
use serde::{Deserialize, Serialize};

/// Who is calling, as the socket's peer credentials and token say.
#[derive(Debug, Clone, Serialize)]
pub struct Caller {
    pub uid: u32,
    pub pid: Option<i32>,
    /// The agent profile; `default` for callers without a token.
    pub agent: String,
    /// The surfaces this caller may use; `None` means every surface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surfaces: Option<Vec<SurfaceName>>,
    /// Set for the whole connection by its first line (`computer mcp --observe-only`): it may
    /// observe and nothing else; whatever acts is refused, never asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observe_only: bool,
}

impl Caller {
    pub fn may_use(&self, surface: SurfaceName) -> bool {
        self.surfaces.as_ref().is_none_or(|s| s.contains(&surface))
    }
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
    /// What the action will do, as its surface states it: the only view policy has of the
    /// surface's args.
    pub facts: &'a ActionFacts,
    pub cwd: Option<&'a str>,
    /// Set while the lines keys end in a terminal window (the gui surface) are decided as the
    /// shell run they are: a shell of the person's, outside containment. Only allow rules that
    /// name terminal typing (`terminal = true`) allow them; a default that allows asks.
    pub typed_into_terminal: bool,
}

impl<'a> PolicyInput<'a> {
    /// The input for a prepared action: the one way the daemon and `policy explain` build it.
    pub fn of(
        caller: &'a Caller,
        call: &'a computer_ipc::ComputerCall,
        action: &'a str,
        risk: Risk,
        facts: &'a ActionFacts,
    ) -> Self {
        PolicyInput {
            caller,
            surface: call.surface,
            command: &call.command,
            // A call that references a secret is decided as one, whatever its surface says.
            risk: if facts.secrets.is_empty() {
                risk
            } else {
                Risk::Secret
            },
            action,
            facts,
            cwd: call.complications.cwd.as_deref(),
            typed_into_terminal: false,
        }
    }
}

/// A rule's or default's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
}

/// A policy's answer, with the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    Allow {
        rule: String,
    },
    Deny {
        rule: String,
        reason: String,
    },
    Ask {
        rule: String,
        /// Why a person must look, where the rule alone does not say (a login file named).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Login files the call names: the person's yes leaves them writable in its run.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        login_files: Vec<PathBuf>,
    },
}

impl Decision {
    /// An ask by `rule`, for no other reason than the rule.
    pub fn ask(rule: impl Into<String>) -> Decision {
        Decision::Ask {
            rule: rule.into(),
            reason: None,
            login_files: Vec::new(),
        }
    }

    pub fn rule(&self) -> &str {
        match self {
            Decision::Allow { rule } | Decision::Deny { rule, .. } | Decision::Ask { rule, .. } => {
                rule
            }
        }
    }

    /// The rule, and the reason where there is one: what an approver is shown as why it asks.
    pub fn asked_because(&self) -> String {
        match self {
            Decision::Ask {
                rule,
                reason: Some(reason),
                ..
            } => format!("{rule}: {reason}"),
            decision => decision.rule().to_string(),
        }
    }
}

pub trait Policy: Send + Sync {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision;
}

/// Allows every call (for pipeline benchmarks and tests that are not about policy).
pub struct AllowAll;

impl Policy for AllowAll {
    fn decide(&self, _input: &PolicyInput<'_>) -> Decision {
        Decision::Allow {
            rule: "builtin:allow-all".into(),
        }
    }
}
