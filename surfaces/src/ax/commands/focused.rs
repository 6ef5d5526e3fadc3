//! `ax focused`: the element with keyboard focus in the active window, with its ref and the
//! named elements above it.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::{Map, json};

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{Backend, Failure, Include};
use crate::accessibility::read_back::quote;
use crate::ax::call::{AppArg, in_app, line};
use crate::ax::lookup::{Ax, active_window, no_match, shown, shown_ref};
use crate::{Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FocusedArgs {
    #[serde(default)]
    app: Option<AppArg>,
}

/// `ax focused`, checked.
#[derive(Debug)]
pub struct Focused {
    app: Option<AppArg>,
}

impl Command for Focused {
    const NAME: &'static str = "focused";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["ref", "node", "path", "snapshot"];
    const OBSERVES: bool = true;
    type Args = FocusedArgs;

    fn prepare(a: FocusedArgs, _call: &mut Preparing<'_>) -> Result<Focused, ToolError> {
        Ok(Focused { app: a.app })
    }

    fn describe(&self) -> String {
        format!("read the focused element{}", in_app(&self.app))
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let deadline = call.deadline;
        let window = active_window(ax, deadline, &self.app).await?;
        let Some((forest, i)) = ax.backend.focused(&window, deadline).await? else {
            return Err(no_match(
                "nothing in the active window has keyboard focus; `ax act` with action focus gives it",
            ));
        };
        let path: Vec<String> = forest
            .ancestors(i)
            .into_iter()
            .filter(|&a| !forest.nodes[a].name.is_empty())
            .map(|a| {
                format!(
                    "{} {}",
                    forest.nodes[a].role_name(),
                    quote(&forest.nodes[a].name)
                )
            })
            .collect();
        let node = &forest.nodes[i];
        let r = shown_ref(ax, node);
        let mut fields = Map::new();
        fields.insert("ref".into(), json!(r));
        fields.insert(
            "node".into(),
            json!(line(&shown(node), r, Include::default(), u32::MAX)),
        );
        fields.insert("path".into(), json!(path.join(" > ")));
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }
}
