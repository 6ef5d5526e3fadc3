//! Multi-step calls: several calls in one round, each decided by policy, approved where asked
//! (one request showing every step) and receipted on its own under its parent call's id, with
//! `wait` steps, `{"ref": "$N.path"}` values taken from earlier steps' results, `stop_on_error`
//! and a `return.select` deciding what comes back.
//!
//! Order of a multi-step call: decode every step → validate and decide every step whose args are
//! known (policy) → one approval for every step that asks → parent intent receipt → per step:
//! resolve its refs, then (if it had any) validate, decide and ask for it again, intent receipt,
//! run, result receipt → parent result receipt → reply.
//!
//! # Layout
//! - this file: the running: every step decided, one approval, then each step receipted and run.
//! - [`decode`]: the call decoded into its steps, limits held, refs checked to point back.
//! - [`refs`]: refs between steps, found, parsed and resolved against earlier results.
//! - [`reply`]: what the call answers.
//! - `tests`: refs and `return.select` over real result shapes.

mod decode;
mod refs;
mod reply;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use computer_ipc::control::StepRow;
use computer_ipc::shown::WillRun;
use computer_ipc::{ComputerCall, ErrorCode, ToolError, WaitStep};
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
pub use decode::MAX_WAIT_MS;
use decode::{Plan, decode};
use refs::resolve;
use reply::{join_numbers, nothing_ran, plan_name, prefixed, reply, step_error};

/// What the receipt rows of a multi-step call's parent name as surface and command.
const PARENT_SURFACE: &str = "steps";
const PARENT_COMMAND: &str = "call";

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
    if let Err(error) = confine_steps(state, caller, &mut plans).await {
        return state.refuse(call_id, caller, parent, error.into()).await;
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
    let _deadline_guard = cancel_at(steps_cancel.clone(), deadline);
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

/// Every call step confined to its agent's own desktop, where the agent has one; a refusal names
/// the step.
async fn confine_steps(
    state: &DaemonState,
    caller: &Caller,
    plans: &mut [Plan],
) -> Result<(), ToolError> {
    for (index, plan) in plans.iter_mut().enumerate() {
        if let Plan::Call { call, .. } = plan
            && let Err(error) = state.desktops.confine(&caller.agent, call).await
        {
            let path = format!("steps[{index}].{}", error.path.clone().unwrap_or_default());
            return Err(error.at(path));
        }
    }
    Ok(())
}

/// Cancels `token` once `deadline` has passed, unless the guard handed back is dropped first.
fn cancel_at(token: CancellationToken, deadline: Duration) -> tokio_util::sync::DropGuard {
    let guard = CancellationToken::new();
    let done = guard.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(deadline) => token.cancel(),
            _ = done.cancelled() => {}
        }
    });
    guard.drop_guard()
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
