//! A multi-step call decoded: every step read into a call or a wait, the limits held, and every
//! ref between steps parsed and checked to point back.

use computer_ipc::{ComputerCall, StepsCall, ToolError, WaitStep};
use serde_json::Value;

use crate::config::StepLimits;

use super::refs::{RefPath, find_refs};

/// The longest a `wait` step may pause: waits are for a screen to settle, not for scheduling.
pub const MAX_WAIT_MS: u64 = 60_000;

/// One step as decoded from the call.
pub(super) enum Plan {
    Wait(WaitStep),
    Call {
        call: Box<ComputerCall>,
        /// Whether its args take values from earlier steps' results.
        refs: bool,
    },
}

/// The call's shape, checked whole before anything is decided: either `steps` or one call,
/// never both; no step carrying steps of its own; refs that name earlier steps only.
pub(super) fn decode(
    raw: &Value,
    limits: &StepLimits,
    unknown_surface: &dyn Fn(&Value) -> Option<ToolError>,
) -> Result<(StepsCall, Vec<Plan>), ToolError> {
    let single: Vec<&str> = ["surface", "command", "args", "complications"]
        .into_iter()
        .filter(|key| raw.get(key).is_some())
        .collect();
    if let Some(first) = single.first() {
        return Err(ToolError::invalid(format!(
            "a call carries either `steps` or `surface`/`command`, not both: this one has `steps` and `{first}`; put the single call in `steps` as one more step"
        ))
        .at(*first)
        .valid(["steps", "surface"]));
    }
    let call = serde_path_to_error::deserialize::<_, StepsCall>(raw.clone()).map_err(|err| {
        let path = err.path().to_string();
        ToolError::from_serde(err.into_inner().to_string(), &path)
    })?;
    if call.steps.is_empty() {
        return Err(ToolError::invalid("`steps` is empty; give at least one step").at("steps"));
    }
    if call.steps.len() > limits.max_steps {
        return Err(ToolError::invalid(format!(
            "{} steps is more than the {} one call may carry (`[limits] max_steps`); split the work into several calls",
            call.steps.len(),
            limits.max_steps
        ))
        .at("steps"));
    }
    if call.timeout_ms == Some(0) {
        return Err(
            ToolError::invalid("`timeout_ms` must be more than 0 (milliseconds)").at("timeout_ms"),
        );
    }
    let mut plans = Vec::with_capacity(call.steps.len());
    for (n, step) in call.steps.iter().enumerate() {
        let at = format!("steps[{n}]");
        if step.contains_key("steps") {
            return Err(ToolError::invalid(format!(
                "step {}: nested `steps` are refused; a step is one call or a wait",
                n + 1
            ))
            .at(format!("{at}.steps"))
            .valid(["surface", "command", "args", "complications", "wait"]));
        }
        let value = Value::Object(step.clone());
        if let Some(wait) = step.get("wait") {
            if step.len() > 1 {
                let other = step
                    .keys()
                    .find(|k| *k != "wait")
                    .cloned()
                    .unwrap_or_default();
                return Err(ToolError::invalid(format!(
                    "step {}: a wait step has only `wait`, not `{other}`",
                    n + 1
                ))
                .at(format!("{at}.{other}")));
            }
            let wait: WaitStep = serde_path_to_error::deserialize(wait.clone()).map_err(|err| {
                let path = format!("{at}.wait{}", dotted(&err.path().to_string()));
                ToolError::from_serde(err.into_inner().to_string(), &path)
            })?;
            if wait.ms > MAX_WAIT_MS {
                return Err(ToolError::invalid(format!(
                    "step {}: a wait of {} ms is longer than the {MAX_WAIT_MS} ms a wait step may pause",
                    n + 1,
                    wait.ms
                ))
                .at(format!("{at}.wait.ms")));
            }
            plans.push(Plan::Wait(wait));
            continue;
        }
        if let Some(error) = unknown_surface(&value) {
            return Err(error.at(format!("{at}.surface")));
        }
        let call: ComputerCall = serde_path_to_error::deserialize(value).map_err(|err| {
            let path = format!("{at}{}", dotted(&err.path().to_string()));
            let message = err.into_inner().to_string();
            let message = if message.starts_with("unknown field") {
                format!("{message}, or `wait` for a wait step")
            } else {
                message
            };
            ToolError::from_serde(message, &path)
        })?;
        if call.complications.detach {
            return Err(ToolError::invalid(format!(
                "step {}: `detach` is not supported on a step; the steps of one call run in order, in the call",
                n + 1
            ))
            .at(format!("{at}.complications.detach")));
        }
        let mut refs = Vec::new();
        find_refs(
            &Value::Object(call.args.clone()),
            &format!("{at}.args"),
            &mut refs,
        );
        for (path, text) in &refs {
            let parsed = RefPath::parse(text).map_err(|why| {
                ToolError::invalid(format!("step {}: {why}", n + 1)).at(path.clone())
            })?;
            if parsed.step == 0 || parsed.step > n {
                let earlier = if n == 0 {
                    "step 1 has no earlier step to refer to".to_string()
                } else {
                    format!("valid here: $1 to ${n}")
                };
                return Err(ToolError::invalid(format!(
                    "step {}: `{text}` refers to step {}, which does not run before it; refs name an earlier step ({earlier})",
                    n + 1,
                    parsed.step
                ))
                .at(path.clone()));
            }
        }
        plans.push(Plan::Call {
            call: Box::new(call),
            refs: !refs.is_empty(),
        });
    }
    if let Some(select) = &call.return_select {
        for (k, text) in select.select.iter().enumerate() {
            let parsed = RefPath::parse(text)
                .map_err(|why| ToolError::invalid(why).at(format!("return.select[{k}]")))?;
            if parsed.step == 0 || parsed.step > plans.len() {
                return Err(ToolError::invalid(format!(
                    "`{text}` names step {}, but the call has steps $1 to ${}",
                    parsed.step,
                    plans.len()
                ))
                .at(format!("return.select[{k}]")));
            }
        }
    }
    Ok((call, plans))
}

/// serde_path_to_error's path (`args.argv[0]`, or `.` at the root) appended to a step's path.
pub(super) fn dotted(path: &str) -> String {
    match path {
        "" | "." => String::new(),
        path if path.starts_with('[') => path.to_string(),
        path => format!(".{path}"),
    }
}
