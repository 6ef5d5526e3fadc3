//! What a multi-step call answers: the last step's result or the values `return.select` names,
//! and, when a step failed or was refused, which one and why.

use computer_ipc::{ComputerCall, ErrorCode, StepsCall, ToolError};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use crate::call::replies;

use super::refs::RefPath;

use super::decode::Plan;

pub(super) fn plan_name(plan: &Plan) -> String {
    match plan {
        Plan::Wait(_) => "wait".into(),
        Plan::Call { call, .. } => format!("{}.{}", call.surface, call.command),
    }
}

pub(super) fn step_error(
    index: usize,
    call: &ComputerCall,
    code: ErrorCode,
    message: &str,
) -> ToolError {
    ToolError::new(
        code,
        format!(
            "step {index} ({}.{}): {message}",
            call.surface, call.command
        ),
    )
}

/// A step's error as the call reports it: its message names the step.
pub(super) fn prefixed(index: usize, call: &ComputerCall, mut error: ToolError) -> ToolError {
    let prefix = format!("step {index} ");
    if !error.message.starts_with(&prefix) {
        error.message = format!(
            "step {index} ({}.{}): {}",
            call.surface, call.command, error.message
        );
    }
    error
}

pub(super) fn nothing_ran(mut error: ToolError) -> ToolError {
    error.message.push_str("; nothing ran");
    error
}

pub(super) fn join_numbers(numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reply: the last step's result (or the values `return.select` names), under the parent's
/// receipt; when a step failed, which one and why.
pub(super) fn reply(
    call_id: &str,
    call: &StepsCall,
    plans: &[Plan],
    results: &[Option<Value>],
    failed: &[usize],
    stopped_at: Option<usize>,
) -> CallToolResult {
    let mut visible = Map::new();
    let without_envelope = |value: &Value| -> Map<String, Value> {
        let mut map = value.as_object().cloned().unwrap_or_default();
        map.remove("ok");
        map.remove("receipt");
        map
    };
    if let Some(index) = stopped_at {
        // The failed step's own fields say why (its error, or an exit code and stderr).
        visible.insert("failed_step".into(), json!(index));
        if let Some(Some(result)) = results.get(index - 1) {
            visible.extend(without_envelope(result));
        }
        if index < plans.len() {
            visible.insert(
                "not_run".into(),
                json!((index + 1..=plans.len()).collect::<Vec<_>>()),
            );
        }
    } else {
        if !failed.is_empty() {
            let errors: Vec<Value> = failed
                .iter()
                .map(|index| {
                    let mut entry = Map::new();
                    entry.insert("step".into(), json!(index));
                    if let Some(Some(result)) = results.get(index - 1) {
                        entry.extend(without_envelope(result));
                    }
                    Value::Object(entry)
                })
                .collect();
            visible.insert("failed".into(), json!(errors));
        }
        match &call.return_select {
            Some(select) => {
                let mut missing = Map::new();
                for text in &select.select {
                    match RefPath::parse(text)
                        .map_err(|why| why.to_string())
                        .and_then(|path| path.lookup(results))
                    {
                        Ok(value) => {
                            visible.insert(text.clone(), value);
                        }
                        Err(why) => {
                            missing.insert(text.clone(), json!(why));
                        }
                    }
                }
                if !missing.is_empty() {
                    visible.insert("unresolved".into(), Value::Object(missing));
                }
            }
            None => {
                if let Some(Some(last)) = results.last() {
                    let last_failed = failed.last() == Some(&results.len());
                    if !last_failed {
                        visible.extend(without_envelope(last));
                    }
                }
            }
        }
    }
    replies::reply(Some(call_id), failed.is_empty(), visible)
}
