//! `ax apps`: the accessible applications, with their pids, their windows (as refs) and whether
//! they answer.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{AppInfo, Backend, Failure};
use crate::accessibility::read_back::quote;
use crate::ax::call::Format;
use crate::ax::lookup::Ax;
use crate::{CapturedText, Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppsArgs {
    #[serde(default)]
    format: Option<Format>,
}

/// `ax apps`, checked.
#[derive(Debug)]
pub struct Apps {
    format: Format,
}

impl Command for Apps {
    const NAME: &'static str = "apps";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["apps?", "count"];
    type Args = AppsArgs;

    fn prepare(args: AppsArgs, _call: &mut Preparing<'_>) -> Result<Apps, ToolError> {
        Ok(Apps {
            format: args.format.unwrap_or_default(),
        })
    }

    fn describe(&self) -> String {
        "list the accessible applications".into()
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let apps = ax.backend.apps(call.deadline, true).await?;
        let about = |app: &AppInfo<B::Element>| {
            let mut parts = Vec::new();
            if let Some(pid) = app.pid {
                parts.push(format!("pid {pid}"));
            }
            if let Some(address) = &app.address {
                parts.push(address.clone());
            }
            parts.join(", ")
        };
        let text = match self.format {
            Format::Outline => {
                let mut text = String::new();
                for app in &apps {
                    text.push_str(&format!("{} ({})", app.name, about(app)));
                    if let Some(after) = app.unresponsive {
                        text.push_str(&format!(": not answering within {} ms", after.as_millis()));
                    } else {
                        let windows: Vec<String> = app
                            .windows
                            .iter()
                            .map(|w| {
                                format!(
                                    "[{}] {}{}",
                                    ax.refs.get(&w.element),
                                    quote(&w.name),
                                    if w.active { " (active)" } else { "" }
                                )
                            })
                            .collect();
                        if !windows.is_empty() {
                            text.push_str(": ");
                            text.push_str(&windows.join(", "));
                        }
                    }
                    text.push('\n');
                }
                text
            }
            Format::Json => {
                let list: Vec<Value> = apps
                    .iter()
                    .map(|app| {
                        let mut entry = json!({
                            "name": app.name, "pid": app.pid,
                            "responsive": app.unresponsive.is_none(),
                            "windows": app.windows.iter().map(|w| json!({
                                "ref": ax.refs.get(&w.element), "name": w.name, "active": w.active
                            })).collect::<Vec<_>>(),
                        });
                        if let Some(address) = &app.address {
                            entry["bus"] = json!(address);
                        }
                        entry
                    })
                    .collect();
                serde_json::to_string(&list).unwrap_or_default()
            }
        };
        let mut fields = Map::new();
        fields.insert("count".into(), json!(apps.len()));
        Ok(Outcome {
            success: true,
            fields,
            texts: vec![CapturedText::from_bytes("apps", text.into_bytes())],
            ..Outcome::default()
        })
    }
}
