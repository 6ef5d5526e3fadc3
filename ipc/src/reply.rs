//! What a call returns: the error shape models can act on, and the fields every reply carries.

use serde::{Deserialize, Serialize};

/// Why a call did not do what it was asked. Serialised as snake_case strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The call does not match the tool's shape: unknown field, surface or command, wrong type.
    InvalidCall,
    /// The surface exists but cannot be used here; the message says why and how to fix it.
    Unavailable,
    /// Policy refused the call.
    Denied,
    /// The action started but could not finish (spawn failure, I/O error, an element that
    /// refused the action).
    ActionFailed,
    /// Nothing matches what the call names (a selector, an app, a ref that is gone): the
    /// message shows what is there instead. Look again rather than retry.
    NoMatch,
    /// What the call names matches several things: the message lists them. Narrow it (a ref,
    /// an ordinal, an ancestor).
    Ambiguous,
    /// The receipt store could not record the call, so the action was refused.
    ReceiptFailed,
    /// The daemon is shutting down and takes no new calls.
    ShuttingDown,
    /// The agent made too many calls; the message says when to retry.
    RateLimited,
    /// The client cancelled the call, or went away, before it ended.
    Cancelled,
    /// The act named an observation (`complications.seen`) that no longer holds: its target
    /// moved, resized, closed, was covered or was replaced. Nothing was sent; look again.
    Stale,
    /// The person at the desk used the mouse or keyboard during or just before this gui
    /// input; nothing more was sent. The message says when the agent may go on.
    InterruptedByPerson,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidCall => "invalid_call",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Denied => "denied",
            ErrorCode::ActionFailed => "action_failed",
            ErrorCode::NoMatch => "no_match",
            ErrorCode::Ambiguous => "ambiguous",
            ErrorCode::ReceiptFailed => "receipt_failed",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Stale => "stale",
            ErrorCode::InterruptedByPerson => "interrupted_by_person",
        }
    }
}

/// An error a model can act on: what was wrong, where, and what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    /// JSON path of the offending field, e.g. `args.argv[1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The valid choices at that place, when there is a closed set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub valid: Vec<String>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            path: None,
            valid: Vec::new(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidCall, message)
    }

    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn valid<I, S>(mut self, choices: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.valid = choices.into_iter().map(Into::into).collect();
        self
    }
}

impl ToolError {
    /// An invalid-call error from a serde message such as "unknown field `x`, expected one of
    /// `a`, `b`": the choices serde names become [`ToolError::valid`].
    pub fn from_serde(message: String, path: &str) -> Self {
        let valid = message
            .split_once("expected one of ")
            .or_else(|| message.split_once("expected "))
            .map(|(_, choices)| {
                choices
                    .split([',', ' '])
                    .filter(|word| *word != "or")
                    .filter_map(|choice| choice.trim().strip_prefix('`')?.strip_suffix('`'))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let error = ToolError {
            code: ErrorCode::InvalidCall,
            message,
            path: None,
            valid,
        };
        if path.is_empty() || path == "." {
            error
        } else {
            error.at(path)
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)?;
        if let Some(path) = &self.path {
            write!(f, " (at {path})")?;
        }
        if !self.valid.is_empty() {
            write!(f, "; valid: {}", self.valid.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_error_round_trips() {
        for code in [
            ErrorCode::InvalidCall,
            ErrorCode::Unavailable,
            ErrorCode::Denied,
            ErrorCode::ActionFailed,
            ErrorCode::NoMatch,
            ErrorCode::Ambiguous,
            ErrorCode::ReceiptFailed,
            ErrorCode::ShuttingDown,
            ErrorCode::RateLimited,
            ErrorCode::Cancelled,
            ErrorCode::Stale,
            ErrorCode::InterruptedByPerson,
        ] {
            let error = ToolError::new(code, "m").at("args.x").valid(["a", "b"]);
            let text = serde_json::to_string(&error).unwrap();
            assert!(text.contains(code.as_str()), "{text}");
            assert_eq!(serde_json::from_str::<ToolError>(&text).unwrap(), error);
        }
    }

    #[test]
    fn serde_choices_become_valid() {
        let error = ToolError::from_serde(
            "unknown field `argz`, expected one of `surface`, `command`, `args`".into(),
            ".",
        );
        assert_eq!(error.valid, vec!["surface", "command", "args"]);
        assert_eq!(error.path, None);
        let error =
            ToolError::from_serde("unknown variant `x`, expected `head` or `tail`".into(), "m");
        assert_eq!(error.path.as_deref(), Some("m"));
        assert_eq!(error.valid, vec!["head", "tail"]);
        let error = ToolError::from_serde(
            "invalid type: string \"ls\", expected a sequence".into(),
            "args.argv",
        );
        assert!(error.valid.is_empty());
    }

    #[test]
    fn display_names_path_and_choices() {
        let error = ToolError::invalid("unknown surface `foo`")
            .at("surface")
            .valid(["shell"]);
        assert_eq!(
            error.to_string(),
            "invalid_call: unknown surface `foo` (at surface); valid: shell"
        );
    }
}
