//! Multi-step calls: several calls in one round, each decided by policy, approved where asked
//! (one request showing every step) and receipted on its own under its parent call's id, with
//! `wait` steps, `{"ref": "$N.path"}` values taken from earlier steps' results, `stop_on_error`
//! and a `return.select` deciding what comes back.
//!
//! Order of a multi-step call: decode every step → validate and decide every step whose args are
//! known (policy) → one approval for every step that asks → parent intent receipt → per step:
//! resolve its refs, then (if it had any) validate, decide and ask for it again, intent receipt,
//! run, result receipt → parent result receipt → reply.

use std::time::{Duration, Instant};

use computer_ipc::control::StepRow;
use computer_ipc::shown::WillRun;
use computer_ipc::{ComputerCall, ErrorCode, StepsCall, ToolError, WaitStep};
use computer_surfaces::kit::effect::EFFECT_FIELD;
use computer_surfaces::{Effect, Risk, receipt_value};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::call::cancel::CallCancel;
use crate::call::replies::{self, Shaped};
use crate::call::stages::{self, Asking, CallScope, DaemonState, Decided, Early, Refusal};
use crate::guard::approval::{PendingRequest, Resolution};
use crate::guard::policy::{Caller, Decision};
use crate::record::receipts::{NewRow, RowKind};

pub use crate::config::StepLimits;

/// The longest a `wait` step may pause: waits are for a screen to settle, not for scheduling.
pub const MAX_WAIT_MS: u64 = 60_000;

/// What the receipt rows of a multi-step call's parent name as surface and command.
const PARENT_SURFACE: &str = "steps";
const PARENT_COMMAND: &str = "call";

/// One step as decoded from the call.
enum Plan {
    Wait(WaitStep),
    Call {
        call: Box<ComputerCall>,
        /// Whether its args take values from earlier steps' results.
        refs: bool,
    },
}

/// How a step ended.
struct StepEnd {
    ok: bool,
    /// What the model would have seen of the step as a call of its own (refs read this).
    visible: Value,
    /// For the parent's result receipt.
    receipt: Value,
}

/// Handles a call carrying `steps`. Always answers with a tool result and always leaves
/// receipts: the parent's, and every decided step's. Each stage before the steps run ends the
/// call with a [`Refusal`], receipted in one place.
pub(crate) async fn handle(
    state: &DaemonState,
    limits: StepLimits,
    scope: CallScope<'_>,
    raw: &Value,
    cancel: &CallCancel,
) -> CallToolResult {
    let CallScope {
        id: call_id,
        caller,
        cancelled,
        ..
    } = scope;
    let parent = Early {
        surface: PARENT_SURFACE.into(),
        command: PARENT_COMMAND.into(),
        args: raw.clone(),
        stated: None,
        tags: Map::new(),
    };
    let policy = state.policy();
    let unknown_surface = |step: &Value| state.deciding(&policy).unknown_surface(step);
    let (call, mut plans) = match decode(raw, &limits, &unknown_surface) {
        Ok(decoded) => decoded,
        Err(error) => return state.refuse(call_id, caller, parent, error.into()).await,
    };
    for (index, plan) in plans.iter_mut().enumerate() {
        if let Plan::Call { call, .. } = plan
            && let Err(error) = state.desktops.confine(&caller.agent, call).await
        {
            let path = format!("steps[{index}].{}", error.path.clone().unwrap_or_default());
            let error = error.at(path);
            return state.refuse(call_id, caller, parent, error.into()).await;
        }
    }
    let run = Steps {
        state,
        scope,
        ids: plans
            .iter()
            .map(|_| uuid::Uuid::now_v7().to_string())
            .collect(),
        stop_on_error: call.stop_on_error.unwrap_or(true),
        cancel,
    };
    let decided = match run.admit(&plans) {
        Ok(()) => run.decide_up_front(&plans).await,
        Err(refusal) => Err(refusal),
    };
    let mut upfront = match decided {
        Ok(upfront) => upfront,
        Err(refusal) => return state.refuse(call_id, caller, parent, refusal).await,
    };
    let summary = run.summary(&plans, &upfront);
    let intent = json!({
        "caller": caller,
        "args": receipt_value(raw),
        "args_sha256": stages::digest(raw),
        "steps": summary,
    });
    if let Err(refusal) = run.approve(&plans, &mut upfront, &parent, &intent).await {
        return state.refuse(call_id, caller, parent, refusal).await;
    }
    let mut intent = intent;
    intent["approval"] = upfront.approval.clone();
    let open = match state.write_intent(call_id, &parent, intent).await {
        Ok(open) => open,
        Err(mut error) => {
            error.message = format!(
                "the steps were refused because their receipt could not be written: {}",
                error.message
            );
            return replies::unreceipted_error(&error);
        }
    };

    // The deadline covers the steps from here; it fires a child of the token surfaces watch, so
    // a step running at the deadline ends the way a cancelled call does.
    let deadline = call
        .timeout_ms
        .map(Duration::from_millis)
        .map_or(limits.deadline, |asked| asked.min(limits.deadline));
    let steps_cancel = cancelled.child_token();
    let _deadline_guard = {
        let token = steps_cancel.clone();
        let guard = CancellationToken::new();
        let done = guard.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(deadline) => token.cancel(),
                _ = done.cancelled() => {}
            }
        });
        guard.drop_guard()
    };
    let ran = run
        .run_all(&plans, upfront, &steps_cancel, Instant::now(), deadline)
        .await;

    let reply = reply(
        call_id,
        &call,
        &plans,
        &ran.results,
        &ran.failed,
        ran.stopped_at,
    );
    let mut body = json!({
        "ok": ran.failed.is_empty(),
        "steps": ran.report,
        "not_run": (ran.report.len() + 1..=plans.len()).collect::<Vec<_>>(),
    });
    if let Some(by) = cancel.by() {
        body["cancelled"] = json!({"by": by});
    }
    open.finish(body, reply).await
}

/// What was decided before anything ran.
struct Upfront {
    /// Per step: decided (steps without refs that policy did not deny), or not yet.
    decided: Vec<Option<Decided>>,
    /// Per step: refused up front and skipped (only with `stop_on_error: false`).
    skipped: Vec<Option<ToolError>>,
    /// The steps (from 0) the one approval request asked for.
    asking: Vec<usize>,
    /// That request's resolution, as receipts record it.
    approval: Value,
}

/// How the steps went.
struct Ran {
    /// Per step: what the model would have seen of it (refs and `return.select` read these).
    results: Vec<Option<Value>>,
    /// Per step that ended: its receipt id and outcome, for the parent's result receipt.
    report: Vec<Value>,
    /// The steps (from 1) that failed, were denied or skipped.
    failed: Vec<usize>,
    /// The step (from 1) `stop_on_error` stopped at.
    stopped_at: Option<usize>,
}

/// One multi-step call in progress: what every stage needs.
struct Steps<'a> {
    state: &'a DaemonState,
    /// The parent call.
    scope: CallScope<'a>,
    /// Each step's own receipt id.
    ids: Vec<String>,
    stop_on_error: bool,
    cancel: &'a CallCancel,
}

impl Steps<'_> {
    /// A call of N steps is N calls to the rate limit (the gateway admitted the first), all
    /// admitted together or none: a call refused here uses none of the window.
    fn admit(&self, plans: &[Plan]) -> Result<(), Refusal> {
        let calls = plans
            .iter()
            .filter(|p| matches!(p, Plan::Call { .. }))
            .count();
        let more = u32::try_from(calls.saturating_sub(1)).unwrap_or(u32::MAX);
        self.state
            .admit_more(self.scope.caller, more)
            .map_err(|retry_after| {
                ToolError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "agent `{}` is over its rate limit (a call with {calls} call steps counts as {calls} calls; none of them was counted); retry in {} ms",
                        self.scope.caller.agent,
                        retry_after.as_millis()
                    ),
                )
                .into()
            })
    }

    /// Validates and decides every step whose args are known, before anything runs, so the
    /// person sees them all at once and a refusal up front leaves nothing half done. A step
    /// refused here stops the call (`stop_on_error`), or is skipped.
    async fn decide_up_front(&self, plans: &[Plan]) -> Result<Upfront, Refusal> {
        let mut decided: Vec<Option<Decided>> = Vec::with_capacity(plans.len());
        let mut skipped: Vec<Option<ToolError>> = vec![None; plans.len()];
        for (n, plan) in plans.iter().enumerate() {
            let index = n + 1;
            let Plan::Call { call, refs: false } = plan else {
                decided.push(None);
                continue;
            };
            let step_raw = Value::Object(call.to_arguments());
            let refused = match decide(self.state, self.scope.caller, call, &step_raw, n) {
                Ok(step) => match &step.decision {
                    Decision::Deny { reason, .. } => {
                        let error = step_error(index, call, ErrorCode::Denied, reason);
                        let context = json!({"policy": step.decision});
                        self.refuse_step(index, call, Some(&step.stated), &error, context)
                            .await;
                        error
                    }
                    _ => {
                        decided.push(Some(step));
                        continue;
                    }
                },
                Err(error) => {
                    let error = prefixed(index, call, error);
                    self.refuse_step(index, call, None, &error, Value::Null)
                        .await;
                    error
                }
            };
            if self.stop_on_error {
                return Err(nothing_ran(refused).into());
            }
            skipped[n] = Some(refused);
            decided.push(None);
        }
        Ok(Upfront {
            decided,
            skipped,
            asking: Vec::new(),
            approval: Value::Null,
        })
    }

    /// One request for every step that asks, showing all the steps. A denial stops the call
    /// before anything runs, naming the steps it asked for.
    async fn approve(
        &self,
        plans: &[Plan],
        upfront: &mut Upfront,
        parent: &Early,
        intent: &Value,
    ) -> Result<(), Refusal> {
        upfront.asking = upfront
            .decided
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d, Some(d) if matches!(d.decision, Decision::Ask { .. })))
            .map(|(n, _)| n)
            .collect();
        if upfront.asking.is_empty() {
            return Ok(());
        }
        let request = approval_request(
            self.scope.id,
            self.scope.caller,
            plans,
            &upfront.decided,
            &upfront.skipped,
        );
        let keys: Vec<&str> = upfront
            .asking
            .iter()
            .filter_map(|n| upfront.decided[*n].as_ref().map(|d| d.grant_key.as_str()))
            .collect();
        let grant_key = stages::digest(&json!(keys));
        let resolution = self
            .state
            .ask(self.scope, parent, intent.clone(), request, &grant_key)
            .await;
        let recorded = serde_json::to_value(&resolution).unwrap_or_default();
        let Resolution::Denied { reason, .. } = &resolution else {
            upfront.approval = recorded;
            return Ok(());
        };
        let steps: Vec<usize> = upfront.asking.iter().map(|n| n + 1).collect();
        // A refused consent says what was asked and how to grant it, as for a single call.
        let mut questions: Vec<&str> = upfront
            .asking
            .iter()
            .filter_map(|n| upfront.decided[*n].as_ref()?.facts.consent.as_deref())
            .collect();
        questions.dedup();
        let message = format!(
            "not approved: {reason} (the request asked for step{} {}); nothing ran{}",
            if steps.len() == 1 { "" } else { "s" },
            join_numbers(&steps),
            questions
                .iter()
                .map(|q| format!("; {q}"))
                .collect::<String>()
        );
        for n in &upfront.asking {
            if let (Some(step), Plan::Call { call, .. }) = (&upfront.decided[*n], &plans[*n]) {
                let context = json!({"policy": step.decision, "approval": recorded});
                let error = step_error(n + 1, call, ErrorCode::Denied, &message);
                self.refuse_step(n + 1, call, Some(&step.stated), &error, context)
                    .await;
            }
        }
        Err(Refusal {
            error: ToolError::new(ErrorCode::Denied, message),
            context: json!({"approval": recorded}),
        })
    }

    /// Every step's receipt id and what was decided of it, for the parent's intent.
    fn summary(&self, plans: &[Plan], upfront: &Upfront) -> Vec<Value> {
        plans
            .iter()
            .enumerate()
            .map(|(n, plan)| {
                json!({
                    "step": n + 1,
                    "receipt": self.ids[n],
                    "call": plan_name(plan),
                    "decision": match (&upfront.decided[n], plan) {
                        (Some(step), _) => json!(step.decision),
                        (None, Plan::Wait(_)) => json!("wait"),
                        (None, _) if upfront.skipped[n].is_some() => json!("skipped"),
                        (None, _) => json!("later"),
                    },
                })
            })
            .collect()
    }

    /// Runs the steps in order until the last, or the first failure under `stop_on_error`.
    async fn run_all(
        &self,
        plans: &[Plan],
        mut upfront: Upfront,
        steps_cancel: &CancellationToken,
        started: Instant,
        deadline: Duration,
    ) -> Ran {
        let mut ran = Ran {
            results: vec![None; plans.len()],
            report: Vec::new(),
            failed: Vec::new(),
            stopped_at: None,
        };
        for (n, plan) in plans.iter().enumerate() {
            let index = n + 1;
            if let Some(error) = &upfront.skipped[n] {
                ran.failed.push(index);
                ran.results[n] = Some(self.refused_visible(plan, error));
                ran.report.push(
                    json!({"step": index, "receipt": self.ids[n], "ok": false, "skipped": true}),
                );
                continue;
            }
            let end = if steps_cancel.is_cancelled() {
                let error = halted(index, plan, self.cancel, started, deadline);
                if let Plan::Call { call, .. } = plan {
                    self.refuse_step(index, call, None, &error, Value::Null)
                        .await;
                }
                self.refused(plan, error)
            } else {
                match plan {
                    Plan::Wait(wait) => self.run_wait(index, *wait, steps_cancel).await,
                    Plan::Call { call, refs } => {
                        let approval = if upfront.asking.contains(&n) {
                            upfront.approval.clone()
                        } else {
                            Value::Null
                        };
                        let step = match upfront.decided[n].take() {
                            Some(step) => Ok((step, approval)),
                            None if *refs => {
                                self.resolve_and_decide(index, call, &ran.results, steps_cancel)
                                    .await
                            }
                            None => {
                                unreachable!("a step without refs is decided or skipped up front")
                            }
                        };
                        match step {
                            Ok((step, approval)) => {
                                self.run_step(index, call, step, approval, steps_cancel)
                                    .await
                            }
                            Err(error) => self.refused(plan, error),
                        }
                    }
                }
            };
            let mut line = json!({"step": index, "receipt": self.ids[n], "ok": end.ok});
            if let Value::Object(extra) = end.receipt {
                line.as_object_mut().unwrap().extend(extra);
            }
            ran.report.push(line);
            ran.results[n] = Some(end.visible);
            if !end.ok {
                ran.failed.push(index);
                if self.stop_on_error {
                    ran.stopped_at = Some(index);
                    break;
                }
            }
        }
        ran
    }
}

impl StepEnd {
    /// A step that ended in `error`, shown as that error alone.
    fn failed(error: ToolError) -> StepEnd {
        StepEnd {
            ok: false,
            visible: json!({"ok": false, "error": error}),
            receipt: json!({"error": error}),
        }
    }
}

/// The call's shape, checked whole before anything is decided: either `steps` or one call,
/// never both; no step carrying steps of its own; refs that name earlier steps only.
fn decode(
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
fn dotted(path: &str) -> String {
    match path {
        "" | "." => String::new(),
        path if path.starts_with('[') => path.to_string(),
        path => format!(".{path}"),
    }
}

/// Decides a call step with the decide stage every call goes through; its errors' paths are
/// under the step's (`steps[N].…`).
fn decide(
    state: &DaemonState,
    caller: &Caller,
    call: &ComputerCall,
    step_raw: &Value,
    n: usize,
) -> Result<Decided, ToolError> {
    let at = format!("steps[{n}]");
    let policy = state.policy();
    state
        .deciding(&policy)
        .decide(caller, call, step_raw)
        .map_err(|error| match error.path.clone() {
            Some(path) => error.at(format!("{at}.{path}")),
            None => error.at(at),
        })
}

impl Steps<'_> {
    /// A step whose args take earlier results: its refs resolved now, then validated and decided
    /// on the values it will really run with. A step that asks is asked for now, on its own: the
    /// person could not have seen these values when the call's steps were shown.
    async fn resolve_and_decide(
        &self,
        index: usize,
        call: &ComputerCall,
        results: &[Option<Value>],
        cancelled: &CancellationToken,
    ) -> Result<(Decided, Value), ToolError> {
        let (state, caller, parent_id) = (self.state, self.scope.caller, self.scope.id);
        let at = format!("steps[{}]", index - 1);
        let mut resolved = call.clone();
        let args = resolve(
            &Value::Object(call.args.clone()),
            &format!("{at}.args"),
            results,
        )
        .map_err(|error| prefixed(index, call, error));
        let args = match args {
            Ok(Value::Object(args)) => args,
            Ok(_) => unreachable!("resolving an object's values keeps it an object"),
            Err(error) => {
                self.refuse_step(index, call, None, &error, Value::Null)
                    .await;
                return Err(error);
            }
        };
        resolved.args = args;
        let step_raw = Value::Object(resolved.to_arguments());
        let step = match decide(state, caller, &resolved, &step_raw, index - 1) {
            Ok(step) => step,
            Err(error) => {
                let error = prefixed(index, call, error);
                self.refuse_step(index, &resolved, None, &error, Value::Null)
                    .await;
                return Err(error);
            }
        };
        let early = self.step_early(index, &resolved, &step_raw, Some(&step.stated));
        let mut request = stages::approval_request(
            parent_id,
            caller,
            &early,
            &step,
            &step.decision.asked_because(),
            None,
        );
        request.action = format!(
            "step {index} of a multi-step call, with values from earlier steps: {}",
            request.action
        );
        let asking = Asking::Person(Box::new(request));
        let step_id = self.ids[index - 1].clone();
        let step_scope = CallScope {
            id: &step_id,
            cancelled,
            ..self.scope
        };
        match state.approve(step_scope, &early, &step, asking).await {
            Ok(approval) => Ok((step, approval)),
            Err(refusal) => {
                let message = match &step.decision {
                    Decision::Deny { .. } => format!(
                        "{} (decided on its args as resolved from earlier steps)",
                        refusal.error.message
                    ),
                    _ => refusal.error.message,
                };
                let error = step_error(index, call, ErrorCode::Denied, &message);
                self.refuse_step(
                    index,
                    &resolved,
                    Some(&step.stated),
                    &error,
                    refusal.context,
                )
                .await;
                Err(error)
            }
        }
    }
}

/// The one request that shows every step of a call: each step's row, and what policy said of it.
fn approval_request(
    call_id: &str,
    caller: &Caller,
    plans: &[Plan],
    decided: &[Option<Decided>],
    skipped: &[Option<ToolError>],
) -> PendingRequest {
    let mut rows = Vec::with_capacity(plans.len());
    let mut rules: Vec<String> = Vec::new();
    let mut risk = Risk::Observe;
    for (n, plan) in plans.iter().enumerate() {
        let (surface, command) = match plan {
            Plan::Wait(_) => ("steps".to_string(), "wait".to_string()),
            Plan::Call { call, .. } => (call.surface.to_string(), call.command.clone()),
        };
        let (decision, action, will_run) = match (plan, &decided[n]) {
            (Plan::Wait(wait), _) => (
                "wait".to_string(),
                format!("wait {} ms", wait.ms),
                Default::default(),
            ),
            (_, Some(step)) => {
                let decision = match &step.decision {
                    Decision::Ask { .. } => {
                        let rule = step.decision.asked_because();
                        if !rules.contains(&rule) {
                            rules.push(rule);
                        }
                        risk = higher(risk, step.action.risk());
                        "ask".to_string()
                    }
                    Decision::Allow { .. } => "allow".to_string(),
                    Decision::Deny { .. } => "deny".to_string(),
                };
                let will_run = WillRun::new(&step.described, step.facts.clone());
                (decision, will_run.one_line(), will_run)
            }
            (Plan::Call { call, .. }, None) if skipped[n].is_some() => (
                "skipped: refused".to_string(),
                receipt_value(&Value::Object(call.args.clone())).to_string(),
                Default::default(),
            ),
            (Plan::Call { call, .. }, None) => (
                "later: decided when its refs resolve, asked again if policy asks".to_string(),
                format!(
                    "args with values from earlier steps: {}",
                    receipt_value(&Value::Object(call.args.clone()))
                ),
                Default::default(),
            ),
        };
        rows.push(StepRow {
            index: n + 1,
            surface,
            command,
            decision,
            action,
            will_run,
        });
    }
    let asked: Vec<String> = rows
        .iter()
        .filter(|r| r.decision == "ask")
        .map(|r| r.index.to_string())
        .collect();
    PendingRequest {
        id: 0,
        receipt: call_id.to_string(),
        agent: caller.agent.clone(),
        caller_pid: caller.pid,
        surface: PARENT_SURFACE.into(),
        command: PARENT_COMMAND.into(),
        action: format!(
            "{} steps in one call; this answer decides step{} {}",
            plans.len(),
            if asked.len() == 1 { "" } else { "s" },
            asked.join(", ")
        ),
        will_run: Default::default(),
        warnings: Vec::new(),
        cwd: None,
        desktop: None,
        risk: risk.name().to_string(),
        rule: rules.join(", "),
        asked_at_ms: 0,
        expires_in_ms: 0,
        steps: rows,
    }
}

fn higher(a: Risk, b: Risk) -> Risk {
    let rank = |r: Risk| match r {
        Risk::Observe => 0,
        Risk::Act => 1,
        Risk::Secret => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

impl Steps<'_> {
    /// Runs a decided step through the stages every call goes through: intent receipt, the
    /// action (with evidence when asked) shaped as a call of its own, result receipt. Its error
    /// keeps everything a single call's would (code, path, valid choices), its message naming
    /// the step.
    async fn run_step(
        &self,
        index: usize,
        call: &ComputerCall,
        mut step: Decided,
        approval: Value,
        cancelled: &CancellationToken,
    ) -> StepEnd {
        let (state, caller, cancel) = (self.state, self.scope.caller, self.cancel);
        let step_id = self.ids[index - 1].as_str();
        let step_raw = Value::Object(call.to_arguments());
        let early = self.step_early(index, call, &step_raw, Some(&step.stated));
        let intent = DaemonState::intent_body(caller, &early, &step, &approval);
        let open = match state
            .write_intent_looking(step_id, &early, intent, step.action.as_mut())
            .await
        {
            Ok(open) => open,
            Err(error) => return StepEnd::failed(prefixed(index, call, error)),
        };
        let ctx = state.context(step_id, caller, cancelled, &step.decision);
        let Shaped { reply, mut body } = state
            .execute(
                step_id,
                step.action,
                ctx,
                &step.budget,
                state.shots(call),
                cancelled,
            )
            .await;
        let failed: Option<ToolError> = body
            .get("error")
            .and_then(|error| serde_json::from_value(error.clone()).ok());
        let (visible, ok) = match failed {
            Some(error) => {
                let error = prefixed(index, call, error);
                body["error"] = json!(error);
                let mut visible = json!({"ok": false, "error": error});
                // An act that read back its effect (or was refused before acting) says so here
                // as it would alone.
                if let Some(effect) = body.get(EFFECT_FIELD) {
                    visible[EFFECT_FIELD] = effect.clone();
                }
                (visible, false)
            }
            None => {
                let visible = reply.structured_content.unwrap_or(Value::Null);
                let ok = visible["ok"] == json!(true);
                (visible, ok)
            }
        };
        if let Some(by) = cancel.by() {
            body["ok"] = json!(false);
            body["cancelled"] = json!({"by": by});
        }
        if let Err(err) = open.close(body).await {
            tracing::error!(%step_id, error = %err, "step result receipt failed after it ran");
            let error = step_error(
                index,
                call,
                ErrorCode::ReceiptFailed,
                &format!("it ran, but its result receipt could not be written: {err}"),
            );
            return StepEnd::failed(error);
        }
        StepEnd {
            ok,
            visible,
            receipt: Value::Null,
        }
    }

    /// What a step's rows say of it: its call, tagged with its parent and its place.
    fn step_early(
        &self,
        index: usize,
        call: &ComputerCall,
        step_raw: &Value,
        stated: Option<&(Value, Value)>,
    ) -> Early {
        let mut early = Early::of(call, step_raw);
        early.stated = stated.cloned();
        early.tags.extend([
            ("parent".to_string(), json!(self.scope.id)),
            ("step".to_string(), json!(index)),
        ]);
        early
    }
}

impl Steps<'_> {
    /// A wait step: a bounded pause that ends early only when the call is cancelled or its deadline
    /// passes. Receipted like any step.
    async fn run_wait(
        &self,
        index: usize,
        wait: WaitStep,
        cancelled: &CancellationToken,
    ) -> StepEnd {
        let (state, caller, parent_id) = (self.state, self.scope.caller, self.scope.id);
        let step_id = self.ids[index - 1].as_str();
        let started = Instant::now();
        let finished = tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait.ms)) => true,
            _ = cancelled.cancelled() => false,
        };
        let waited_ms = started.elapsed().as_millis() as u64;
        let visible = if finished {
            json!({"ok": true, "waited_ms": waited_ms})
        } else {
            let error = ToolError::new(
                ErrorCode::Cancelled,
                format!(
                    "step {index} (wait): stopped after {waited_ms} of {} ms: the call was cancelled or its deadline passed",
                    wait.ms
                ),
            );
            json!({"ok": false, "waited_ms": waited_ms, "error": error})
        };
        let rows = vec![
            NewRow {
                call_id: step_id.to_string(),
                kind: RowKind::Intent,
                surface: PARENT_SURFACE.into(),
                command: "wait".into(),
                body: json!({"caller": caller, "parent": parent_id, "step": index, "args": {"wait": wait}}),
            },
            NewRow {
                call_id: step_id.to_string(),
                kind: RowKind::Result,
                surface: PARENT_SURFACE.into(),
                command: "wait".into(),
                body: {
                    let mut body = visible.clone();
                    body["parent"] = json!(parent_id);
                    body["step"] = json!(index);
                    body
                },
            },
        ];
        if let Err(err) = state.ledger.append(rows).await {
            tracing::error!(%step_id, error = %err, "wait step receipt failed");
            let error = ToolError::new(
                ErrorCode::ReceiptFailed,
                format!("step {index} (wait): its receipt could not be written: {err}"),
            );
            return StepEnd {
                ok: false,
                visible: json!({"ok": false, "error": error}),
                receipt: json!({"error": error}),
            };
        }
        StepEnd {
            ok: finished,
            receipt: Value::Null,
            visible,
        }
    }
}

impl Steps<'_> {
    /// A step that did not run because of `error`.
    fn refused(&self, plan: &Plan, error: ToolError) -> StepEnd {
        let visible = self.refused_visible(plan, &error);
        StepEnd {
            visible,
            ..StepEnd::failed(error)
        }
    }

    /// What the reply shows of a step refused with `error`: an act that reads back its effect
    /// says `effect: refused`, as it would alone.
    fn refused_visible(&self, plan: &Plan, error: &ToolError) -> Value {
        let mut visible = json!({"ok": false, "error": error});
        if let Plan::Call { call, .. } = plan
            && self
                .state
                .says_refused(call.surface.as_str(), &call.command, error)
        {
            visible[EFFECT_FIELD] = json!(Effect::Refused);
        }
        visible
    }

    /// Receipts a step that will not run (invalid, denied, not approved, a ref that does not
    /// resolve): intent and result together, naming the parent and the step.
    async fn refuse_step(
        &self,
        index: usize,
        call: &ComputerCall,
        stated: Option<&(Value, Value)>,
        error: &ToolError,
        context: Value,
    ) {
        let step_id = self.ids[index - 1].as_str();
        let raw = Value::Object(call.to_arguments());
        let early = self.step_early(index, call, &raw, stated);
        // The step does not run either way; the parent's own receipt still records the error.
        let _ = self
            .state
            .record_refusal(step_id, self.scope.caller, &early, error, &context)
            .await;
    }
}

/// Why a step did not start: the call was cancelled, or its deadline passed.
fn halted(
    index: usize,
    plan: &Plan,
    cancel: &CallCancel,
    started: Instant,
    deadline: Duration,
) -> ToolError {
    let name = plan_name(plan);
    match cancel.by() {
        Some(by) => ToolError::new(
            ErrorCode::Cancelled,
            format!("step {index} ({name}): cancelled by the {by} before it ran"),
        ),
        None => ToolError::new(
            ErrorCode::Cancelled,
            format!(
                "step {index} ({name}): not run: the steps' deadline of {} ms passed after {} ms (`timeout_ms` of the call, at most `[limits] steps_timeout`)",
                deadline.as_millis(),
                started.elapsed().as_millis()
            ),
        ),
    }
}

fn plan_name(plan: &Plan) -> String {
    match plan {
        Plan::Wait(_) => "wait".into(),
        Plan::Call { call, .. } => format!("{}.{}", call.surface, call.command),
    }
}

fn step_error(index: usize, call: &ComputerCall, code: ErrorCode, message: &str) -> ToolError {
    ToolError::new(
        code,
        format!(
            "step {index} ({}.{}): {message}",
            call.surface, call.command
        ),
    )
}

/// A step's error as the call reports it: its message names the step.
fn prefixed(index: usize, call: &ComputerCall, mut error: ToolError) -> ToolError {
    let prefix = format!("step {index} ");
    if !error.message.starts_with(&prefix) {
        error.message = format!(
            "step {index} ({}.{}): {}",
            call.surface, call.command, error.message
        );
    }
    error
}

fn nothing_ran(mut error: ToolError) -> ToolError {
    error.message.push_str("; nothing ran");
    error
}

fn join_numbers(numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reply: the last step's result (or the values `return.select` names), under the parent's
/// receipt; when a step failed, which one and why.
fn reply(
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

/// Every `{"ref": "$…"}` inside `value`, with its JSON path.
fn find_refs(value: &Value, path: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if let Some(text) = ref_text(map) {
                found.push((path.to_string(), text.to_string()));
                return;
            }
            for (key, child) in map {
                find_refs(child, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_refs(child, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// A ref is an object with one key, `ref`, whose value starts with `$` (an ax element ref is a
/// number, or a string of digits, so the two never meet).
fn ref_text(map: &Map<String, Value>) -> Option<&str> {
    if map.len() != 1 {
        return None;
    }
    map.get("ref")?
        .as_str()
        .filter(|text| text.starts_with('$'))
}

/// `value` with every ref replaced by the value it names.
fn resolve(value: &Value, path: &str, results: &[Option<Value>]) -> Result<Value, ToolError> {
    Ok(match value {
        Value::Object(map) => {
            if let Some(text) = ref_text(map) {
                let parsed = RefPath::parse(text)
                    .map_err(|why| ToolError::invalid(why).at(path.to_string()))?;
                return parsed
                    .lookup(results)
                    .map_err(|why| ToolError::invalid(why).at(path.to_string()));
            }
            let mut out = Map::new();
            for (key, child) in map {
                out.insert(
                    key.clone(),
                    resolve(child, &format!("{path}.{key}"), results)?,
                );
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, child)| resolve(child, &format!("{path}[{i}]"), results))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// A parsed `$N.field[index]...`: step N (from 1) and the way into its result.
#[derive(Debug, PartialEq)]
struct RefPath {
    text: String,
    step: usize,
    parts: Vec<Part>,
}

#[derive(Debug, PartialEq)]
enum Part {
    Field(String),
    Index(usize),
}

const REF_SYNTAX: &str = "write `$N` then `.field` or `[index]` parts, e.g. `$1.matches[0].ref`";

impl RefPath {
    fn parse(text: &str) -> Result<RefPath, String> {
        let bad = |why: &str| format!("`{text}` is not a ref: {why}; {REF_SYNTAX}");
        let rest = text
            .strip_prefix('$')
            .ok_or_else(|| bad("it does not start with `$`"))?;
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("no step number after `$`"));
        }
        let step: usize = rest[..digits]
            .parse()
            .map_err(|_| bad("the step number is too large"))?;
        let mut rest = &rest[digits..];
        let mut parts = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                if end == 0 {
                    return Err(bad("an empty field name"));
                }
                parts.push(Part::Field(after[..end].to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after
                    .find(']')
                    .ok_or_else(|| bad("a `[` without its `]`"))?;
                let index = after[..end]
                    .parse()
                    .map_err(|_| bad("an index that is not a number"))?;
                parts.push(Part::Index(index));
                rest = &after[end + 1..];
            } else {
                return Err(bad(
                    "text after the step number that is not `.field` or `[index]`",
                ));
            }
        }
        Ok(RefPath {
            text: text.to_string(),
            step,
            parts,
        })
    }

    /// The value this ref names in the results so far, or what is there instead.
    fn lookup(&self, results: &[Option<Value>]) -> Result<Value, String> {
        let step = self.step;
        let Some(Some(mut value)) = results.get(step.wrapping_sub(1)).map(Option::as_ref) else {
            return Err(format!(
                "`{}`: step {step} has no result (it did not run)",
                self.text
            ));
        };
        let mut walked = format!("${step}");
        let mut opened: Value;
        for part in &self.parts {
            // A text is addressed by what it holds: JSON text (`format: json`) as that JSON, any
            // other text as its lines, and an outline line as its ref, role and name.
            if let Value::String(text) = value
                && let Some(inner) = addressable_text(text)
            {
                opened = inner;
                value = &opened;
            }
            let next = match (part, value) {
                (Part::Field(name), Value::Object(map)) => map.get(name).ok_or_else(|| {
                    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                    format!(
                        "`{}`: `{walked}` has no field `{name}`; it has: {}",
                        self.text,
                        keys.join(", ")
                    )
                })?,
                (Part::Index(i), Value::Array(items)) => items.get(*i).ok_or_else(|| {
                    format!(
                        "`{}`: `{walked}` has {} item{}, so [{i}] is past its end",
                        self.text,
                        items.len(),
                        if items.len() == 1 { "" } else { "s" }
                    )
                })?,
                (part, other) => {
                    let wanted = match part {
                        Part::Field(name) => format!("field `{name}`"),
                        Part::Index(i) => format!("item [{i}]"),
                    };
                    return Err(format!(
                        "`{}`: `{walked}` is {}, which has no {wanted}",
                        self.text,
                        kind_of(other)
                    ));
                }
            };
            match part {
                Part::Field(name) => walked.push_str(&format!(".{name}")),
                Part::Index(i) => walked.push_str(&format!("[{i}]")),
            }
            value = next;
        }
        Ok(value.clone())
    }
}

/// What a text result holds, when a ref walks into it: JSON text as that JSON; an ax outline
/// (lines ending in a line break, each `[ref] role …`) as the list of its lines; one line of an ax outline (`[12] button "OK" …`, what `ax
/// find` and `ax tree` show) as `{"ref": 12, "role": "button", "name": "OK", "line": …}`, so
/// `$1.matches[0].ref` names the first match whichever format the step asked for. Any other
/// text is only a string.
fn addressable_text(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['[', '{'])
        && let Ok(parsed @ (Value::Array(_) | Value::Object(_))) =
            serde_json::from_str::<Value>(text)
    {
        return Some(parsed);
    }
    if text.contains('\n') {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        return lines
            .iter()
            .all(|line| outline_line(line).is_some())
            .then(|| Value::Array(lines.iter().map(|line| json!(line)).collect()));
    }
    outline_line(text)
}

/// One line of an ax outline, `[ref] role "name"…` (the name in double quotes with `\"`, `\\`
/// and `\n` escaped, absent when the element has none), read into its parts.
fn outline_line(line: &str) -> Option<Value> {
    let rest = line.trim_start_matches(' ').strip_prefix('[')?;
    let close = rest.find(']')?;
    let element: u64 = rest[..close].parse().ok()?;
    let rest = rest[close + 1..].strip_prefix(' ')?;
    let role_end = rest.find(' ').unwrap_or(rest.len());
    let role = &rest[..role_end];
    if role.is_empty() || !role.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut name = String::new();
    if let Some(quoted) = rest[role_end..].strip_prefix(" \"") {
        let mut chars = quoted.chars();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => name.push('\n'),
                    other => name.push(other),
                },
                c => name.push(c),
            }
        }
    }
    Some(json!({"ref": element, "role": role, "name": name, "line": line.trim_start_matches(' ')}))
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(_) => "a string".into(),
        Value::Array(items) => format!("a list of {}", items.len()),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Vec<Option<Value>> {
        vec![
            Some(json!({"ok": true, "matches": [{"ref": 12, "name": "OK"}], "stdout": "rm\n"})),
            None,
            Some(json!({"ok": true,
                "matches": "[12] button \"Say \\\"hi\\\"\" (focused) in window \"Main\"\n[15] checkBox\n",
                "one": "[7] link \"Next\"\n"})),
            Some(
                json!({"ok": true, "matches": "[{\"ref\":40,\"role\":\"button\",\"name\":\"OK\"}]"}),
            ),
        ]
    }

    #[test]
    fn refs_read_into_find_matches_in_either_format() {
        let read = |text: &str| RefPath::parse(text).unwrap().lookup(&results());
        assert_eq!(read("$3.matches[0].ref").unwrap(), json!(12));
        assert_eq!(read("$3.matches[0].name").unwrap(), json!("Say \"hi\""));
        assert_eq!(read("$3.matches[0].role").unwrap(), json!("button"));
        assert_eq!(read("$3.matches[1].ref").unwrap(), json!(15));
        assert_eq!(read("$3.matches[1].name").unwrap(), json!(""));
        assert_eq!(read("$3.one[0].ref").unwrap(), json!(7));
        assert_eq!(read("$3.one[0].name").unwrap(), json!("Next"));
        assert_eq!(read("$3.one[0]").unwrap(), json!("[7] link \"Next\""));
        assert_eq!(read("$4.matches[0].ref").unwrap(), json!(40));
        let past = read("$3.matches[2]").unwrap_err();
        assert!(
            past.contains("has 2 items, so [2] is past its end"),
            "{past}"
        );
        // A plain line is a string still.
        let plain = read("$1.stdout.x").unwrap_err();
        assert!(plain.contains("is a string"), "{plain}");
    }

    #[test]
    fn refs_parse_and_read_nested_values() {
        let path = RefPath::parse("$1.matches[0].ref").unwrap();
        assert_eq!(path.step, 1);
        assert_eq!(path.lookup(&results()).unwrap(), json!(12));
        assert_eq!(
            RefPath::parse("$1.stdout")
                .unwrap()
                .lookup(&results())
                .unwrap(),
            json!("rm\n")
        );
    }

    #[test]
    fn bad_refs_say_what_is_there() {
        let check = |text: &str, expect: &str| {
            let why = RefPath::parse(text)
                .and_then(|p| p.lookup(&results()))
                .unwrap_err();
            assert!(why.contains(expect), "{text}: {why}");
        };
        check(
            "$1.match",
            "has no field `match`; it has: matches, ok, stdout",
        );
        check(
            "$1.matches[3]",
            "`$1.matches` has 1 item, so [3] is past its end",
        );
        check(
            "$1.stdout.x",
            "`$1.stdout` is a string, which has no field `x`",
        );
        check("$2.stdout", "step 2 has no result");
        check("1.stdout", "does not start with `$`");
        check("$x", "no step number");
        check("$1.a[", "without its `]`");
        check("$1..a", "empty field name");
    }

    #[test]
    fn resolving_replaces_refs_anywhere_and_names_the_path_of_a_bad_one() {
        let args = json!({"argv": ["echo", {"ref": "$1.matches[0].name"}], "n": {"ref": "$1.matches[0].ref"}});
        let resolved = resolve(&args, "steps[1].args", &results()).unwrap();
        assert_eq!(resolved, json!({"argv": ["echo", "OK"], "n": 12}));
        // An ax ref written as a plain value is not a step ref.
        let ax = json!({"ref": 12});
        assert_eq!(resolve(&ax, "a", &results()).unwrap(), ax);
        let err = resolve(
            &json!({"argv": [{"ref": "$1.nope"}]}),
            "steps[1].args",
            &results(),
        )
        .unwrap_err();
        assert_eq!(err.path.as_deref(), Some("steps[1].args.argv[0]"));
    }

    #[test]
    fn decode_refuses_mixed_nested_forward_and_oversized_calls() {
        let limits = StepLimits::default();
        let err = |value: Value| decode(&value, &limits, &|_| None).err().expect("refused");
        let mixed = err(json!({"steps": [], "surface": "shell"}));
        assert!(
            mixed.message.contains("either `steps` or `surface`"),
            "{mixed:?}"
        );
        assert_eq!(mixed.valid, ["steps", "surface"]);
        let nested = err(json!({"steps": [{"steps": []}]}));
        assert_eq!(nested.path.as_deref(), Some("steps[0].steps"));
        let forward = err(json!({"steps": [
            {"surface": "shell", "command": "run", "args": {"argv": [{"ref": "$2.stdout"}]}},
            {"wait": {"ms": 1}}]}));
        assert_eq!(forward.path.as_deref(), Some("steps[0].args.argv[0]"));
        assert!(
            forward.message.contains("does not run before it"),
            "{forward:?}"
        );
        let many = json!({"steps": vec![json!({"wait": {"ms": 1}}); 33]});
        assert!(err(many).message.contains("more than the 32"));
        let long = err(json!({"steps": [{"wait": {"ms": MAX_WAIT_MS + 1}}]}));
        assert_eq!(long.path.as_deref(), Some("steps[0].wait.ms"));
        let typo = err(json!({"steps": [{"surface": "shell", "command": "run", "argz": {}}]}));
        assert_eq!(typo.path.as_deref(), Some("steps[0].argz"), "{typo:?}");
        assert!(typo.valid.contains(&"wait".to_string()), "{typo:?}");
        let select = err(json!({"steps": [{"wait": {"ms": 1}}], "return": {"select": ["$2.x"]}}));
        assert_eq!(select.path.as_deref(), Some("return.select[0]"));
    }
}
