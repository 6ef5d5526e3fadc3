//! `ax read`: one element (by ref or selector) in full: its description, all its states, its
//! value or text, bounds and actions.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{Backend, Failure, Include};
use crate::accessibility::roles::all_states;
use crate::ax::call::{AppArg, RefArg, Shown, Target, in_app, line, target_of};
use crate::ax::lookup::{Ax, located, shown};
use crate::{CapturedText, Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    #[serde(default)]
    selector: Option<String>,
    /// [n] or selector
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
}

/// `ax read`, checked.
#[derive(Debug)]
pub struct Read {
    target: Target,
    app: Option<AppArg>,
}

impl Command for Read {
    const NAME: &'static str = "read";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "node",
        "description?",
        "states",
        "value?",
        "bounds?",
        "actions?",
        "text?",
        "snapshot",
    ];
    const OBSERVES: bool = true;
    type Args = ReadArgs;

    fn prepare(a: ReadArgs, call: &mut Preparing<'_>) -> Result<Read, ToolError> {
        Ok(Read {
            target: target_of(call.dialect, a.reference, a.selector, "args")?,
            app: a.app,
        })
    }

    fn describe(&self) -> String {
        format!("read {}{}", self.target.describe(), in_app(&self.app))
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    fn element(&self) -> Option<&Target> {
        Some(&self.target)
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let deadline = call.deadline;
        let (r, node) = located(ax, deadline, &self.target, &self.app, None).await?;
        crate::ax::seen::note(r, || (node.role_name(), node.name.clone()));
        let mut fields = read_fields(&shown(&node), &node.description);
        let contents = ax.backend.contents(&node, deadline).await?;
        let mut texts = Vec::new();
        if let Some(text) = contents.text {
            texts.push(CapturedText::from_bytes("text", text.into_bytes()));
        } else if let Some(value) = &node.value {
            fields.insert("value".into(), json!(value));
        }
        if let Some(value) = contents.value {
            fields.insert("value".into(), value);
        }
        Ok(read_outcome(&shown(&node), r, fields, texts))
    }
}

/// The first fields `read` reports of a node: its description and all its states (its value or
/// text follow, read as each backend can). Its ref, role and name are on its outline line
/// (`node`), which [`read_outcome`] adds.
fn read_fields(node: &Shown, description: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    if !description.is_empty() {
        fields.insert("description".into(), json!(description));
    }
    fields.insert("states".into(), json!(all_states(node.states)));
    fields
}

/// `read`'s result: `fields` and `texts` with the node's bounds, actions and outline line.
fn read_outcome(
    node: &Shown,
    r: u32,
    mut fields: Map<String, Value>,
    texts: Vec<CapturedText>,
) -> Outcome {
    if let Some((x, y, w, h)) = node.bounds
        && x != i32::MIN
    {
        fields.insert("bounds".into(), json!([x, y, w, h]));
    }
    if !node.actions.is_empty() {
        fields.insert("actions".into(), json!(node.actions));
    }
    fields.insert(
        "node".into(),
        json!(line(node, r, Include::default(), u32::MAX)),
    );
    Outcome {
        success: true,
        fields,
        texts,
        ..Outcome::default()
    }
}
