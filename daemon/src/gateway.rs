//! The gateway: the one dispatch path every call takes, whoever sends it.
//! decode → validate → policy → intent receipt → surface → budget → result receipt → reply.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};

use computer_ipc::{ComputerCall, ErrorCode, Evidence, SurfaceName, TOOL_NAME, ToolError};
use computer_surfaces::{
    Availability, CallContext, EvidenceShot, Outcome, Registry, Surface, SurfaceError,
    receipt_value,
};
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::approval::{Approvals, PendingRequest, Resolution};
use crate::budget::Budget;
use crate::cancel::CallCancel;
use crate::jobs::Jobs;
use crate::policy::{Caller, Decision, Policy, PolicyInput};
use crate::ratelimit::RateLimiter;
use crate::receipts::{Ledger, NewRow, RowKind};

pub struct Gateway {
    pub(crate) registry: Registry,
    pub(crate) policy: RwLock<Arc<dyn Policy>>,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) limiter: RateLimiter,
    /// Every row is sealed on its way in: secret references as keyed digests, values masked.
    pub(crate) ledger: crate::secrets::SealedLedger,
    pub(crate) artifact_dir: PathBuf,
    agents_path: PathBuf,
    tool: Tool,
    closing: AtomicBool,
    step_limits: RwLock<crate::steps::StepLimits>,
    /// Detached calls and the `job` command (`jobs.rs`).
    jobs: Jobs,
    /// This gateway, for the tasks of detached jobs, which outlive the call that started them.
    me: Weak<Gateway>,
}

/// Where a call stands when it ends early: what is known of it for its receipts.
pub(crate) struct Early {
    pub(crate) surface: String,
    pub(crate) command: String,
    /// The request as received: its digest is receipted, and, cut, the request itself until a
    /// surface has stated its args.
    pub(crate) args: Value,
    /// Once the surface prepared the action: the request with the args as the surface redacts
    /// them, and the facts policy decides on.
    pub(crate) stated: Option<(Value, Value)>,
}

impl Gateway {
    pub fn new(
        registry: Registry,
        policy: Arc<dyn Policy>,
        approvals: Arc<Approvals>,
        limiter: RateLimiter,
        ledger: Ledger,
        artifact_dir: PathBuf,
    ) -> Arc<Gateway> {
        let tool = crate::schema::tool(&registry, None);
        let agents_path =
            crate::agents::store_path(artifact_dir.parent().unwrap_or(std::path::Path::new(".")));
        let jobs = Jobs::new(ledger.path().to_path_buf());
        Arc::new_cyclic(|me| Gateway {
            registry,
            policy: RwLock::new(policy),
            approvals,
            limiter,
            ledger: crate::secrets::SealedLedger::new(ledger),
            artifact_dir,
            agents_path,
            tool,
            closing: AtomicBool::new(false),
            step_limits: RwLock::new(Default::default()),
            jobs,
            me: me.clone(),
        })
    }

    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    pub(crate) fn ledger(&self) -> &crate::secrets::SealedLedger {
        &self.ledger
    }

    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    /// The tool as this caller sees it: only the surfaces in its scope are listed.
    pub fn tool_for(&self, caller: &Caller) -> Tool {
        match &caller.surfaces {
            None => self.tool.clone(),
            Some(scope) => crate::schema::tool(&self.registry, Some(scope)),
        }
    }

    /// The agent a token names (and its scope); no token is the `default` agent with every
    /// surface. An unknown token is refused, never downgraded to `default`.
    pub fn identify(
        &self,
        token: Option<&str>,
    ) -> Result<(String, Option<Vec<SurfaceName>>), String> {
        let Some(token) = token else {
            return Ok(("default".into(), None));
        };
        let store = crate::agents::AgentStore::load(&self.agents_path)?;
        store
            .authenticate(token)
            .map(|agent| (agent.name.clone(), agent.surfaces.clone()))
            .ok_or_else(|| "unknown agent token; mint one with `computer agents add NAME`".into())
    }

    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Swaps in new rules (SIGHUP); calls already decided keep their decision.
    pub fn set_policy(&self, policy: Arc<dyn Policy>, limiter: RateLimiter) {
        *self.policy.write().unwrap() = policy;
        self.limiter.replace(limiter);
    }

    /// Bounds on multi-step calls (from `[limits]`; calls already running keep theirs).
    pub fn set_step_limits(&self, limits: crate::steps::StepLimits) {
        *self.step_limits.write().unwrap() = limits;
    }

    pub(crate) fn step_limits(&self) -> crate::steps::StepLimits {
        *self.step_limits.read().unwrap()
    }

    /// Refuses new calls from now on (calls already running finish).
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Handles one `tools/call`. Always answers with a tool result, never a protocol error, and
    /// always leaves receipts.
    pub async fn handle(
        &self,
        caller: &Caller,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        cancel: CallCancel,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> CallToolResult {
        let (cancelled, _watching) = cancel.watch();
        let call_id = uuid::Uuid::now_v7().to_string();
        let raw = Value::Object(arguments.unwrap_or_default());

        if self.closing.load(Ordering::Acquire) {
            let error = ToolError::new(
                ErrorCode::ShuttingDown,
                "the daemon is shutting down; retry once it is back",
            );
            return self
                .refuse(&call_id, caller, early_from_raw(&raw), error, Value::Null)
                .await;
        }
        if let Err(retry_after) = self.limiter.admit(&caller.agent) {
            let error = ToolError::new(
                ErrorCode::RateLimited,
                format!(
                    "agent `{}` is over its rate limit; retry in {} ms",
                    caller.agent,
                    retry_after.as_millis()
                ),
            );
            return self
                .refuse(&call_id, caller, early_from_raw(&raw), error, Value::Null)
                .await;
        }
        if tool_name != TOOL_NAME {
            let error = ToolError::invalid(format!("unknown tool `{tool_name}`"))
                .at("name")
                .valid([TOOL_NAME]);
            return self
                .refuse(&call_id, caller, early_from_raw(&raw), error, Value::Null)
                .await;
        }
        if raw.get("steps").is_some() {
            return crate::steps::handle(
                self, caller, &call_id, &raw, &cancel, &cancelled, progress,
            )
            .await;
        }
        let call = match self.decode(&raw) {
            Ok(call) => call,
            Err(error) => {
                return self
                    .refuse(&call_id, caller, early_from_raw(&raw), error, Value::Null)
                    .await;
            }
        };
        let mut early = Early {
            surface: call.surface.to_string(),
            command: call.command.clone(),
            args: raw.clone(),
            stated: None,
        };
        if !caller.may_use(call.surface) {
            let scope: Vec<String> = self
                .ready_surfaces()
                .into_iter()
                .filter(|s| SurfaceName::parse(s).is_some_and(|s| caller.may_use(s)))
                .collect();
            let error = ToolError::new(
                ErrorCode::Denied,
                format!(
                    "agent `{}` may not use the {} surface",
                    caller.agent, call.surface
                ),
            )
            .at("surface")
            .valid(scope);
            return self
                .refuse(&call_id, caller, early, error, Value::Null)
                .await;
        }
        let surface = match self.registry.get(call.surface) {
            Some(surface) => surface.clone(),
            None => {
                let error = self.surface_error(call.surface);
                return self
                    .refuse(&call_id, caller, early, error, Value::Null)
                    .await;
            }
        };
        if let Availability::Unavailable { reason, fix } = surface.probe() {
            let error = ToolError::new(ErrorCode::Unavailable, format!("{reason}; fix: {fix}"))
                .at("surface")
                .valid(self.ready_surfaces());
            return self
                .refuse(&call_id, caller, early, error, Value::Null)
                .await;
        }
        if crate::jobs::is_job_call(&call) {
            return self
                .jobs
                .command(self, &call_id, caller, early, &call, &cancelled, progress)
                .await;
        }
        if let Err(error) = self.jobs.check_detach(&call, caller) {
            return self
                .refuse(&call_id, caller, early, error, Value::Null)
                .await;
        }
        if let Err(error) = self.unsupported_complications(&call, surface.as_ref()) {
            return self
                .refuse(&call_id, caller, early, error, Value::Null)
                .await;
        }
        let budget = match Budget::from_request(
            call.complications.return_budget.as_ref(),
            surface.result_fields(&call.command),
        ) {
            Ok(budget) => budget,
            Err(error) => {
                return self
                    .refuse(&call_id, caller, early, error, Value::Null)
                    .await;
            }
        };
        let action = match surface
            .prepare(&call.command, &call.args, &call.complications)
            .and_then(|action| action.check_caller(&caller.agent).map(|()| action))
        {
            Ok(action) => action,
            Err(error) => {
                return self
                    .refuse(&call_id, caller, early, error, Value::Null)
                    .await;
            }
        };
        let described = action.describe();
        let facts = action.facts();
        // The args as the surface redacts them (the digest covers the request whole), and the
        // facts policy decides on.
        let stated_args = match &facts.args {
            Some(args) => json!({
                "surface": early.surface,
                "command": early.command,
                "args": args,
                "complications": receipt_value(&json!(call.complications)),
            }),
            None => receipt_value(&raw),
        };
        early.stated = Some((stated_args, receipt_value(&json!(facts))));
        let policy = self.policy.read().unwrap().clone();
        let decision = policy.decide(&PolicyInput::of(
            caller,
            &call,
            &described,
            action.risk(),
            &facts,
        ));
        let mut approval = Value::Null;
        match &decision {
            Decision::Deny { reason, .. } => {
                let error = ToolError::new(ErrorCode::Denied, reason.clone());
                let context = json!({"policy": decision});
                return self.refuse(&call_id, caller, early, error, context).await;
            }
            Decision::Ask { rule } => {
                let request = PendingRequest {
                    id: 0,
                    receipt: call_id.clone(),
                    agent: caller.agent.clone(),
                    caller_pid: caller.pid,
                    surface: early.surface.clone(),
                    command: early.command.clone(),
                    action: crate::policy::approval_text(&described, &facts),
                    will_run: crate::policy::will_run(&described, &facts),
                    warnings: Vec::new(),
                    cwd: call.complications.cwd.clone(),
                    risk: serde_json::to_value(action.risk())
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    rule: rule.clone(),
                    asked_at_ms: 0,
                    expires_in_ms: 0,
                    steps: Vec::new(),
                };
                // A session grant covers exactly this action, in this place, for this agent; the
                // facts too, as the same args may run another line (a Return in a terminal).
                let grant_key = digest(&json!([
                    caller.agent,
                    early.surface,
                    early.command,
                    call.args,
                    call.complications.cwd,
                    call.complications.env,
                    facts,
                ]));
                let resolution = self
                    .approvals
                    .ask(request, &grant_key, cancelled.clone(), progress)
                    .await;
                let recorded = serde_json::to_value(&resolution).unwrap_or_default();
                if let Resolution::Denied { reason, .. } = &resolution {
                    let error =
                        ToolError::new(ErrorCode::Denied, format!("not approved: {reason}"));
                    let context = json!({"policy": decision, "approval": recorded});
                    return self.refuse(&call_id, caller, early, error, context).await;
                }
                approval = recorded;
            }
            Decision::Allow { .. } => {}
        }

        let (args, stated_facts) = early.stated.clone().unwrap_or_default();
        let intent = NewRow {
            call_id: call_id.clone(),
            kind: RowKind::Intent,
            surface: early.surface.clone(),
            command: early.command.clone(),
            body: json!({
                "caller": caller,
                "args": args,
                "args_sha256": digest(&raw),
                "facts": stated_facts,
                "action": described,
                "risk": action.risk(),
                "policy": decision,
                "approval": approval,
            }),
        };
        if let Err(err) = self.ledger.append(vec![intent]).await {
            tracing::error!(%call_id, error = %err, "intent receipt failed; action refused");
            return unreceipted_error(&ToolError::new(
                ErrorCode::ReceiptFailed,
                format!("the action was refused because its receipt could not be written: {err}"),
            ));
        }

        let ctx = CallContext {
            call_id: call_id.clone(),
            artifact_dir: self.artifact_dir.clone(),
            protected: self.approvals.approvers().clone(),
            cancel: cancelled.clone(),
            artifact_quota: self.registry.artifact_quota().clone(),
            output_bytes: Arc::default(),
            secrets: Default::default(),
            agent: caller.agent.clone(),
        };
        if call.complications.detach {
            let Some(gateway) = self.me.upgrade() else {
                let error = ToolError::new(ErrorCode::ShuttingDown, "the daemon is shutting down");
                return self
                    .finish(
                        &call_id,
                        &early,
                        json!({"ok": false, "error": error}),
                        error_result(&call_id, &error),
                    )
                    .await;
            };
            let fields = surface.result_fields(&call.command);
            let asked = call.complications.return_budget.clone();
            return self
                .jobs
                .start(gateway, caller, early, action, ctx, asked, fields)
                .await;
        }
        let evidence = call.complications.evidence.unwrap_or(Evidence::None);
        if let Some(by) = cancel.by() {
            let error = ToolError::new(
                ErrorCode::Cancelled,
                format!("cancelled by the {by} before it ran"),
            );
            let body = json!({"ok": false, "error": error, "cancelled": {"by": by}});
            return self
                .finish(&call_id, &early, body, error_result(&call_id, &error))
                .await;
        }
        let before = match evidence {
            Evidence::Full => Some(self.capture_evidence(&ctx, "before", false).await),
            _ => None,
        };
        let outcome = run_until_cancelled(action, ctx.clone(), &cancelled).await;
        let outcome = crate::secrets::mask_outcome(&ctx.secrets, outcome);
        let after = match evidence {
            Evidence::None => None,
            _ if cancelled.is_cancelled() => None,
            _ => Some(self.capture_evidence(&ctx, "after", true).await),
        };
        let (reply, mut result_body) = match outcome {
            Ok(mut outcome) => {
                let shots = [("before", before), ("after", after)];
                let evidence = evidence_report(&shots, &mut outcome);
                let (mut reply, mut body) = self.success_reply(&call_id, &budget, outcome);
                if let Some(report) = evidence {
                    attach_field(&mut reply, "evidence", report.clone());
                    body["evidence"] = report;
                }
                (reply, body)
            }
            Err(SurfaceError::Refused { message }) => {
                tracing::warn!(%call_id, %message, "action refused: it targets an approver");
                let error = ToolError::new(ErrorCode::Denied, message);
                let body = json!({"ok": false, "error": error, "refused": "targets_approver"});
                (error_result(&call_id, &error), body)
            }
            Err(err) => {
                let error = match err {
                    SurfaceError::Tool(error) => error,
                    err => ToolError::new(ErrorCode::ActionFailed, err.to_string()),
                };
                let body = json!({"ok": false, "error": error});
                (error_result(&call_id, &error), body)
            }
        };
        // A cancelled call is recorded as such; its client hears nothing more of it (rmcp drops
        // the reply of a cancelled request, and a gone client has nobody to read it).
        if let Some(by) = cancel.by() {
            result_body["ok"] = json!(false);
            result_body["cancelled"] = json!({"by": by});
            tracing::info!(%call_id, by, "call cancelled");
        }
        let mut reply = reply;
        crate::secrets::mask_reply(&ctx.secrets, &mut reply, &mut result_body);
        self.finish(&call_id, &early, result_body, reply).await
    }

    /// Writes a call's result receipt, then hands back its reply (or, when the receipt cannot
    /// be written, an error saying so).
    pub(crate) async fn finish(
        &self,
        call_id: &str,
        early: &Early,
        body: Value,
        reply: CallToolResult,
    ) -> CallToolResult {
        let result = NewRow {
            call_id: call_id.to_string(),
            kind: RowKind::Result,
            surface: early.surface.clone(),
            command: early.command.clone(),
            body,
        };
        if let Err(err) = self.ledger.append(vec![result]).await {
            tracing::error!(%call_id, error = %err, "result receipt failed after the action ran");
            return unreceipted_error(&ToolError::new(
                ErrorCode::ReceiptFailed,
                format!("the action ran, but its result receipt could not be written: {err}"),
            ));
        }
        reply
    }

    pub(crate) async fn capture_evidence(
        &self,
        ctx: &CallContext,
        label: &str,
        settle: bool,
    ) -> Result<EvidenceShot, String> {
        match self.registry.evidence() {
            Some(capturer) => capturer
                .capture(ctx, label, settle)
                .await
                .map_err(|err| err.to_string()),
            None => Err("screenshots are unavailable here".into()),
        }
    }

    fn decode(&self, raw: &Value) -> Result<ComputerCall, ToolError> {
        if let Some(surface) = raw.get("surface").and_then(Value::as_str)
            && SurfaceName::parse(surface).is_none()
        {
            return Err(ToolError::invalid(format!("unknown surface `{surface}`"))
                .at("surface")
                .valid(self.ready_surfaces()));
        }
        serde_path_to_error::deserialize::<_, ComputerCall>(raw.clone()).map_err(|err| {
            let path = err.path().to_string();
            ToolError::from_serde(err.into_inner().to_string(), &path)
        })
    }

    fn ready_surfaces(&self) -> Vec<String> {
        self.registry
            .ready()
            .map(|s| s.name().to_string())
            .collect()
    }

    pub(crate) fn surface_error(&self, name: SurfaceName) -> ToolError {
        let why = match Registry::why_absent(name) {
            Availability::Unavailable { reason, fix } => format!("{reason}; {fix}"),
            Availability::Ready => String::new(),
        };
        ToolError::new(
            ErrorCode::Unavailable,
            format!("the {name} surface is not available here: {why}"),
        )
        .at("surface")
        .valid(self.ready_surfaces())
    }

    pub(crate) fn success_reply(
        &self,
        call_id: &str,
        budget: &Budget,
        mut outcome: Outcome,
    ) -> (CallToolResult, Value) {
        // Every cut names a file that holds all of the output, as the tool description says.
        let kept = budget.keep_whole_texts(
            &mut outcome.texts,
            &self.artifact_dir,
            call_id,
            self.registry.artifact_quota(),
        );
        outcome.artifacts.extend(kept);
        let visible = budget.apply(&outcome.fields, &outcome.texts);
        let outputs: Vec<Value> = outcome
            .texts
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "bytes": t.total_bytes,
                    "sha256": t.sha256,
                    "artifact": t.artifact,
                })
            })
            .collect();
        let mut body = json!({
            "ok": outcome.success,
            "fields": outcome.fields,
            "outputs": outputs,
            "artifacts": outcome.artifacts,
        });
        for (key, value) in &outcome.receipt {
            body[key] = value.clone();
        }
        let mut result = reply(Some(call_id), outcome.success, visible);
        if let Some(image) = outcome.inline_image {
            use base64::Engine;
            let data = base64::engine::general_purpose::STANDARD.encode(&image.bytes);
            result
                .content
                .push(ContentBlock::image(data, image.mime_type));
        }
        (result, body)
    }

    /// Ends a call that will not run: writes its intent and result together, then answers.
    pub(crate) async fn refuse(
        &self,
        call_id: &str,
        caller: &Caller,
        early: Early,
        error: ToolError,
        context: Value,
    ) -> CallToolResult {
        let rows = vec![
            NewRow {
                call_id: call_id.to_string(),
                kind: RowKind::Intent,
                surface: early.surface.clone(),
                command: early.command.clone(),
                body: {
                    let mut body = json!({
                        "caller": caller,
                        "args": receipt_value(&early.args),
                        "args_sha256": digest(&early.args),
                        "policy": context.get("policy"),
                        "approval": context.get("approval"),
                    });
                    if let Some((args, facts)) = &early.stated {
                        body["args"] = args.clone();
                        body["facts"] = facts.clone();
                    }
                    body
                },
            },
            NewRow {
                call_id: call_id.to_string(),
                kind: RowKind::Result,
                surface: early.surface,
                command: early.command,
                body: json!({"ok": false, "error": error}),
            },
        ];
        if let Err(err) = self.ledger.append(rows).await {
            tracing::error!(%call_id, error = %err, "receipt for a refused call failed");
            return unreceipted_error(&error);
        }
        error_result(call_id, &error)
    }
}

/// How long a cancelled action may take to end on its own (a shell run counts and kills what it
/// started, and reports) before it is dropped where it stands.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Runs `action` to its end, or, once `cancelled` fires, for at most [`CANCEL_GRACE`] more:
/// surfaces that watch the token end cleanly; the others are dropped at their next await.
pub(crate) async fn run_until_cancelled(
    action: Box<dyn computer_surfaces::PreparedAction>,
    ctx: CallContext,
    cancelled: &tokio_util::sync::CancellationToken,
) -> Result<Outcome, SurfaceError> {
    let run = action.run(ctx);
    tokio::pin!(run);
    tokio::select! {
        outcome = &mut run => outcome,
        _ = cancelled.cancelled() => match tokio::time::timeout(CANCEL_GRACE, &mut run).await {
            Ok(outcome) => outcome,
            Err(_) => Err(SurfaceError::Failed {
                message: "cancelled before it ended".into(),
            }),
        },
    }
}

fn early_from_raw(raw: &Value) -> Early {
    let text = |key: &str| {
        raw.get(key)
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64).collect())
            .unwrap_or_default()
    };
    Early {
        surface: text("surface"),
        command: text("command"),
        args: raw.clone(),
        stated: None,
    }
}

impl Gateway {
    pub(crate) fn unsupported_complications(
        &self,
        call: &ComputerCall,
        surface: &dyn Surface,
    ) -> Result<(), ToolError> {
        let wants_evidence = call
            .complications
            .evidence
            .is_some_and(|e| e != Evidence::None);
        if wants_evidence && self.registry.evidence().is_none() {
            return Err(ToolError::new(
                ErrorCode::Unavailable,
                "the `evidence` complication needs screenshots, which are unavailable here (see `computer doctor` for the gui surface)",
            )
            .at("complications.evidence"));
        }
        let supported = surface.complications();
        match complications_used(call)
            .into_iter()
            .find(|name| !supported.contains(name))
        {
            None => Ok(()),
            Some(name) => Err(ToolError::new(
                ErrorCode::Unavailable,
                format!(
                    "the `{name}` complication is not supported by the {} surface in this build",
                    call.surface
                ),
            )
            .at(format!("complications.{name}"))
            .valid(supported.iter().copied())),
        }
    }
}

/// The complications a call gives, by their JSON names.
fn complications_used(call: &ComputerCall) -> Vec<&'static str> {
    let c = &call.complications;
    [
        ("cwd", c.cwd.is_some()),
        ("env", !c.env.is_empty()),
        ("timeout_ms", c.timeout_ms.is_some()),
        ("evidence", c.evidence.is_some()),
        ("return", c.return_budget.is_some()),
        ("secrets", !c.secrets.is_empty()),
        ("detach", c.detach),
        ("sandbox", c.sandbox.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, used)| used.then_some(name))
    .collect()
}

/// The evidence part of a result: a compact reference to each shot (or why it failed). The shots'
/// files join the outcome's artifacts so the receipt records their hashes.
pub(crate) fn evidence_report(
    shots: &[(&str, Option<Result<EvidenceShot, String>>)],
    outcome: &mut Outcome,
) -> Option<Value> {
    let mut report = Map::new();
    for (label, shot) in shots {
        let Some(shot) = shot else { continue };
        let entry = match shot {
            Ok(shot) => {
                outcome.artifacts.push(shot.artifact.clone());
                let mut entry = json!({
                    "path": shot.artifact.path,
                    "sha256": shot.artifact.sha256,
                    "bytes": shot.artifact.bytes,
                    "width": shot.width,
                    "height": shot.height,
                });
                // How long the screen took to settle, for the shot taken after the action; that
                // it did not settle within the bound is the news, not that it did.
                if let Some(settle_ms) = shot.settle_ms {
                    entry["settle_ms"] = json!(settle_ms);
                }
                if !shot.settled {
                    entry["settled"] = json!(false);
                    entry["settle_bound_ms"] = json!(shot.settle_bound_ms);
                }
                entry
            }
            Err(message) => json!({"error": message}),
        };
        report.insert(label.to_string(), entry);
    }
    (!report.is_empty()).then_some(Value::Object(report))
}

/// Adds a field to a result's structured content and keeps its text rendering in step.
pub(crate) fn attach_field(result: &mut CallToolResult, key: &str, value: Value) {
    if let Some(Value::Object(map)) = result.structured_content.as_mut() {
        map.insert(key.to_string(), value);
        let text = model_text(map);
        if let Some(first) = result.content.first_mut() {
            *first = ContentBlock::text(text);
        }
    }
}

/// A reply in its three parts. The text block, which is what the model reads, carries the
/// fields alone (and `ok` only when it is false: `isError` and the fields say the rest). The
/// structured content adds `ok` and the receipt id for programs (`computer call --json` prints
/// it), and `_meta` holds the receipt id too, for revisions that predate structured content.
pub(crate) fn reply(receipt: Option<&str>, ok: bool, fields: Map<String, Value>) -> CallToolResult {
    let mut structured = Map::new();
    structured.insert("ok".into(), json!(ok));
    structured.insert("receipt".into(), json!(receipt));
    structured.extend(fields);
    let text = model_text(&structured);
    let meta = receipt
        .map(|id| rmcp::model::MetaObject(Map::from_iter([("receipt".to_string(), json!(id))])));
    let structured = Value::Object(structured);
    let mut result = if ok {
        CallToolResult::structured(structured)
    } else {
        CallToolResult::structured_error(structured)
    };
    result.content = vec![ContentBlock::text(text)];
    result.with_meta(meta)
}

/// The model's view of a structured reply: without the receipt id, and without `ok` when true.
fn model_text(structured: &Map<String, Value>) -> String {
    let mut shown = structured.clone();
    shown.remove("receipt");
    if shown.get("ok") == Some(&Value::Bool(true)) {
        shown.remove("ok");
    }
    Value::Object(shown).to_string()
}

/// An error whose receipt could not be written: no receipt id is handed out for rows that do
/// not exist.
pub(crate) fn unreceipted_error(error: &ToolError) -> CallToolResult {
    reply(None, false, error_fields(error))
}

pub(crate) fn error_result(call_id: &str, error: &ToolError) -> CallToolResult {
    reply(Some(call_id), false, error_fields(error))
}

fn error_fields(error: &ToolError) -> Map<String, Value> {
    Map::from_iter([("error".to_string(), json!(error))])
}

pub(crate) fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}
