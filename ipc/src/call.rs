//! The call shape of the `COMPUTER` tool: which surface, which command, typed args, complications.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One call of the `COMPUTER` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerCall {
    /// Which structured backend to act through.
    pub surface: SurfaceName,
    /// The surface's operation, e.g. `run` for `shell`.
    pub command: String,
    /// The command's arguments; each command documents its own.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Modifiers that shape the call; all optional.
    #[serde(default)]
    pub complications: Complications,
}

impl ComputerCall {
    /// A call with no args and no complications.
    pub fn new(surface: SurfaceName, command: impl Into<String>) -> Self {
        Self {
            surface,
            command: command.into(),
            args: Map::new(),
            complications: Complications::default(),
        }
    }

    /// The call as the JSON object that goes into MCP `tools/call` arguments.
    pub fn to_arguments(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // A struct always serialises to an object; anything else is a bug in this type.
            other => unreachable!("ComputerCall serialised to {other:?}"),
        }
    }
}

/// Several calls in one round: each step is decided by policy, approved where asked and
/// receipted on its own; one approval shows every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepsCall {
    /// In order, each {surface,command,args,complications} or {wait:{ms}};
    /// `{"ref":"$1.matches[0].ref"}` in args is that value of step 1's result.
    pub steps: Vec<Map<String, Value>>,
    /// Default true: stop at the first failed or denied step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_error: Option<bool>,
    /// Default: the last step's result.
    #[serde(default, rename = "return", skip_serializing_if = "Option::is_none")]
    pub return_select: Option<StepsReturn>,
    /// Deadline of all steps, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl StepsCall {
    /// A multi-step call of `steps` with the defaults.
    pub fn new(steps: Vec<Map<String, Value>>) -> Self {
        Self {
            steps,
            stop_on_error: None,
            return_select: None,
            timeout_ms: None,
        }
    }

    /// The call as the JSON object that goes into MCP `tools/call` arguments.
    pub fn to_arguments(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            other => unreachable!("StepsCall serialised to {other:?}"),
        }
    }
}

/// What a multi-step call returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepsReturn {
    /// e.g. `["$1.exit_code","$3.stdout"]`
    pub select: Vec<String>,
}

/// A step that only waits: `{"wait": {"ms": 500}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitStep {
    /// How long to wait, in milliseconds.
    pub ms: u64,
}

/// The structured backends the daemon knows. Which of them a caller may use here and now is
/// what `tools/list` says.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SurfaceName {
    Shell,
    Applescript,
    Ax,
    Keychain,
    Gui,
}

impl SurfaceName {
    pub const ALL: [SurfaceName; 5] = [
        SurfaceName::Shell,
        SurfaceName::Applescript,
        SurfaceName::Ax,
        SurfaceName::Keychain,
        SurfaceName::Gui,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SurfaceName::Shell => "shell",
            SurfaceName::Applescript => "applescript",
            SurfaceName::Ax => "ax",
            SurfaceName::Keychain => "keychain",
            SurfaceName::Gui => "gui",
        }
    }

    pub fn parse(name: &str) -> Option<SurfaceName> {
        SurfaceName::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for SurfaceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Modifiers of a call. The runtime does the mechanics they ask for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Complications {
    /// Working directory for the action (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment variables added to a scrubbed environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Deadline for the action in milliseconds (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Proof of the action's effect to capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// How much of the result reaches the model.
    #[serde(default, rename = "return", skip_serializing_if = "Option::is_none")]
    pub return_budget: Option<ReturnBudget>,
    /// Environment variables filled from the keychain: `NAME: "keychain://service/account"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
    /// Run in the background and return a job reference at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detach: bool,
    /// A stricter sandbox for processes this call starts (never a looser one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// shell run: let its code call this tool: true (read-only set) or ["surface.command"]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<crate::tools::ToolsAsk>,
    /// gui/ax act: the `snapshot` id of the observation it was aimed at; refused as `stale` if
    /// its target changed since (screenshot coordinates are that image's pixels)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    /// gui, ax, shell: act on this desktop of your own (the `desktop` id `gui desktop open`
    /// gave), not on the person's
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desktop: Option<String>,
}

/// Tighter containment for one call's processes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// `false`: no network at all (not even loopback, nor the X display's abstract socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Everything is read-only except these absolute paths (and `/dev`, `/proc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable: Option<Vec<String>>,
}

/// What proof of an action's effect to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    None,
    Screenshot,
    Full,
}

/// The response budget: what of a result reaches the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReturnBudget {
    /// Most bytes of text output shown (default 4000), shared across text fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Which part of a long output to keep (default `head_tail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ReturnMode>,
    /// Only these result fields (plus `ok` and `receipt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Vec<String>>,
    /// Put a screenshot inline as MCP image content (default: a reference only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<bool>,
}

/// Which part of an over-long output to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReturnMode {
    Head,
    Tail,
    #[default]
    HeadTail,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(call: &ComputerCall) {
        let text = serde_json::to_string(call).unwrap();
        let back: ComputerCall = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, call, "round trip of {text}");
    }

    #[test]
    fn minimal_call_round_trips() {
        round_trip(&ComputerCall::new(SurfaceName::Shell, "run"));
    }

    #[test]
    fn every_surface_and_complication_round_trips() {
        for surface in SurfaceName::ALL {
            let mut call = ComputerCall::new(surface, "run");
            call.args.insert("argv".into(), json!(["ls", "-la"]));
            call.complications = Complications {
                cwd: Some("/tmp".into()),
                env: BTreeMap::from([("A".into(), "1".into())]),
                timeout_ms: Some(5),
                evidence: Some(Evidence::Full),
                return_budget: Some(ReturnBudget {
                    max_bytes: Some(10),
                    mode: Some(ReturnMode::Tail),
                    select: Some(vec!["stdout".into()]),
                    image: Some(true),
                }),
                secrets: BTreeMap::from([("T".into(), "keychain://s/a".into())]),
                detach: true,
                sandbox: Some(Sandbox {
                    network: Some(false),
                    writable: Some(vec!["/tmp".into()]),
                }),
                tools: Some(crate::tools::ToolsAsk::Named(vec!["ax.tree".into()])),
                seen: Some("s3f9a2c".into()),
                desktop: Some("d1".into()),
            };
            round_trip(&call);
            assert_eq!(SurfaceName::parse(surface.as_str()), Some(surface));
        }
    }

    #[test]
    fn unknown_fields_are_named_with_the_valid_choices() {
        let err = serde_json::from_value::<ComputerCall>(
            json!({"surface": "shell", "command": "run", "argz": {}}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `argz`"), "{err}");
        assert!(err.contains("`args`"), "{err}");
    }

    #[test]
    fn steps_call_round_trips_with_its_wire_names() {
        let value = json!({
            "steps": [
                {"surface": "shell", "command": "run", "args": {"argv": ["ls"]}},
                {"wait": {"ms": 5}},
                {"surface": "shell", "command": "run", "args": {"argv": [{"ref": "$1.stdout"}]}},
            ],
            "stop_on_error": false,
            "return": {"select": ["$3.stdout"]},
            "timeout_ms": 9,
        });
        let call: StepsCall = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(call.steps.len(), 3);
        assert_eq!(call.stop_on_error, Some(false));
        assert_eq!(serde_json::to_value(&call).unwrap(), value);
        assert_eq!(Value::Object(call.to_arguments()), value);
        let wait: WaitStep = serde_json::from_value(json!({"ms": 5})).unwrap();
        assert_eq!(serde_json::to_value(wait).unwrap(), json!({"ms": 5}));
    }

    #[test]
    fn a_steps_call_with_a_surface_names_the_field() {
        let err = serde_json::from_value::<StepsCall>(json!({"steps": [], "surface": "shell"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `surface`"), "{err}");
    }

    #[test]
    fn return_uses_its_wire_name() {
        let value = json!({"surface": "shell", "command": "run",
            "complications": {"return": {"max_bytes": 7, "mode": "head_tail"}}});
        let call: ComputerCall = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            call.complications.return_budget.as_ref().unwrap().max_bytes,
            Some(7)
        );
        assert_eq!(
            serde_json::to_value(&call).unwrap()["complications"],
            value["complications"]
        );
    }
}
