//! The stages of one call, each written once: admit → decide → approve → write intent →
//! execute → shape the outcome → finish. A single call (`gateway.rs`), a multi-step call
//! (`steps.rs`), a detached job (`jobs.rs`) and `policy explain` (`cli/mod.rs`) compose them and
//! redo none, so whoever sends a call gets the same error and the same decision.
//!
//! Every exit writes its receipts: a call refused before it runs gets its intent and result in
//! one append (`DaemonState::refuse`); a call that will run holds an `Open` from the moment its
//! intent is durable, and the only way to let go of one is `Open::close` (its result row) or,
//! when a future holding it is dropped, its `Drop`, which writes an `abandoned` result.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use computer_ipc::shown::WillRun;
use computer_ipc::{ComputerCall, ErrorCode, Evidence, SurfaceName, ToolError};
use computer_surfaces::kit::effect::EFFECT_FIELD;
use computer_surfaces::{
    ActionFacts, Availability, CallContext, Effect, Outcome, PreparedAction, Registry, Surface,
    SurfaceError, receipt_value,
};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::call::budget::Budget;
use crate::call::desktops::{Desktops, is_desktop_call};
use crate::call::evidence::{Shots, evidence_report};
use crate::call::replies::{
    Shaped, attach_field, error_result, failure_body, refused_before_acting, reply,
    unreceipted_error,
};
use crate::guard::approval::{Approvals, PendingRequest, Resolution};
use crate::guard::policy::{Caller, Decision, Policy, PolicyInput};
use crate::guard::ratelimit::RateLimiter;
use crate::record::receipts::{LedgerError, NewRow, RowKind};
use crate::record::secrets::SealedLedger;

/// The daemon's shared state, what every stage needs: its surfaces, rules, approvals, rate limit,
/// ledger, the tools runs may call and the desktops of agents' own.
pub struct DaemonState {
    pub(crate) registry: Registry,
    pub(crate) policy: RwLock<Arc<dyn Policy>>,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) limiter: RateLimiter,
    /// Every row is sealed on its way in: secret references as keyed digests, values masked.
    pub(crate) ledger: SealedLedger,
    pub(crate) artifact_dir: PathBuf,
    /// What runs given tools may call (`[tools]`, and the commands the daemon serves).
    pub(crate) tools: RwLock<Arc<crate::call::tools::ToolRules>>,
    /// Desktops of agents' own (`gui desktop`), which calls naming one act on.
    pub(crate) desktops: Arc<Desktops>,
    closing: AtomicBool,
}

/// Where a call stands when it ends early: what is known of it for its receipts.
#[derive(Clone)]
pub(crate) struct Early {
    pub(crate) surface: String,
    pub(crate) command: String,
    /// The request as received: its digest is receipted, and, cut, the request itself until a
    /// surface has stated its args.
    pub(crate) args: Value,
    /// Once the surface prepared the action: the request with the args as the surface redacts
    /// them, and the facts policy decides on.
    pub(crate) stated: Option<(Value, Value)>,
    /// Fields every row of the call carries (a step's `parent` and `step`).
    pub(crate) tags: Map<String, Value>,
}

impl Early {
    /// A call known only by its request (refused before a surface saw it): its surface and
    /// command as the request names them, cut.
    pub(crate) fn from_raw(raw: &Value) -> Early {
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
            tags: Map::new(),
        }
    }

    /// A decoded call.
    pub(crate) fn of(call: &ComputerCall, raw: &Value) -> Early {
        Early {
            surface: call.surface.to_string(),
            command: call.command.clone(),
            args: raw.clone(),
            stated: None,
            // Every row of a call on a desktop of an agent's own names the desktop.
            tags: match &call.complications.desktop {
                Some(id) => Map::from_iter([("desktop".to_string(), json!(id))]),
                None => Map::new(),
            },
        }
    }

    /// One receipt row of this call: its surface and command, and the call's tags on `body`.
    fn row(&self, call_id: &str, kind: RowKind, body: Value) -> NewRow {
        row(
            call_id,
            kind,
            &self.surface,
            &self.command,
            &self.tags,
            body,
        )
    }
}

/// `body` with a call's tags (a step's `parent` and `step`, a run's `via`) on it.
fn tagged(tags: &Map<String, Value>, mut body: Value) -> Value {
    for (key, value) in tags {
        body[key] = value.clone();
    }
    body
}

/// A receipt row of a call; every row a call writes (intent, result, refusal, abandonment) is
/// made here, tagged.
fn row(
    call_id: &str,
    kind: RowKind,
    surface: &str,
    command: &str,
    tags: &Map<String, Value>,
    body: Value,
) -> NewRow {
    NewRow {
        call_id: call_id.to_string(),
        kind,
        surface: surface.to_string(),
        command: command.to_string(),
        body: tagged(tags, body),
    }
}

/// A call validated by its surface and decided by policy: the `decide` stage's answer.
pub(crate) struct Decided {
    pub(crate) surface: Arc<dyn Surface>,
    pub(crate) budget: Budget,
    pub(crate) action: Box<dyn PreparedAction>,
    pub(crate) described: String,
    pub(crate) facts: ActionFacts,
    /// The request as the surface redacts it, and the facts, as receipts record them.
    pub(crate) stated: (Value, Value),
    pub(crate) decision: Decision,
    /// What the run may call back, when the call gives it tools (`complications.tools`).
    pub(crate) callable: Option<Vec<crate::call::tools::Callable>>,
    /// Names this exact action for session grants: the same args may run another line (a
    /// Return in a terminal), so the facts are in it too.
    pub(crate) grant_key: String,
}

/// What the decide stage reads: the surfaces and the rules. The daemon's own for a call;
/// `policy explain` builds one from the config, the same way the daemon does.
pub struct Deciding<'a> {
    pub registry: &'a Registry,
    pub policy: &'a dyn Policy,
    /// What runs given tools may call.
    pub tools: Arc<crate::call::tools::ToolRules>,
    /// The desktops of agents' own open in the daemon (none for `policy explain`).
    pub desktops: Option<&'a Arc<Desktops>>,
}

impl Deciding<'_> {
    fn ready_surfaces(&self) -> Vec<String> {
        self.registry
            .ready()
            .map(|s| s.name().to_string())
            .collect()
    }

    /// Decodes a request into a call: an unknown surface names the ready ones; anything else
    /// the path and what serde expected.
    pub fn decode(&self, raw: &Value) -> Result<ComputerCall, ToolError> {
        if let Some(error) = self.unknown_surface(raw) {
            return Err(error);
        }
        serde_path_to_error::deserialize::<_, ComputerCall>(raw.clone()).map_err(|err| {
            let path = err.path().to_string();
            ToolError::from_serde(err.into_inner().to_string(), &path)
        })
    }

    /// A request naming a surface that does not exist: said so, with the ready ones (a step's
    /// decoding asks this too, so both read alike).
    pub fn unknown_surface(&self, raw: &Value) -> Option<ToolError> {
        let surface = raw.get("surface").and_then(Value::as_str)?;
        SurfaceName::parse(surface).is_none().then(|| {
            ToolError::invalid(format!("unknown surface `{surface}`"))
                .at("surface")
                .valid(self.ready_surfaces())
        })
    }

    /// The surface a call may reach: in the caller's scope, in this build, ready.
    pub fn reach(
        &self,
        caller: &Caller,
        call: &ComputerCall,
    ) -> Result<Arc<dyn Surface>, ToolError> {
        if !caller.may_use(call.surface) {
            let scope: Vec<String> = self
                .ready_surfaces()
                .into_iter()
                .filter(|s| SurfaceName::parse(s).is_some_and(|s| caller.may_use(s)))
                .collect();
            return Err(ToolError::new(
                ErrorCode::Denied,
                format!(
                    "agent `{}` may not use the {} surface",
                    caller.agent, call.surface
                ),
            )
            .at("surface")
            .valid(scope));
        }
        if let Some(id) = &call.complications.desktop {
            return match self.desktops {
                Some(desktops) if !is_desktop_call(call.surface, &call.command) => {
                    desktops.surface(&caller.agent, id, call.surface)
                }
                Some(_) => Err(ToolError::invalid(
                    "`gui desktop` opens, closes and lists desktops: it takes no `complications.desktop`",
                )
                .at("complications.desktop")),
                None => Err(ToolError::new(
                    ErrorCode::Unavailable,
                    "no desktops of agents' own are open outside the daemon",
                )
                .at("complications.desktop")),
            };
        }
        let Some(surface) = self.registry.get(call.surface) else {
            let why = match Registry::why_absent(call.surface) {
                Availability::Unavailable { reason, fix } => format!("{reason}; {fix}"),
                Availability::Ready => String::new(),
            };
            return Err(ToolError::new(
                ErrorCode::Unavailable,
                format!("the {} surface is not available here: {why}", call.surface),
            )
            .at("surface")
            .valid(self.ready_surfaces()));
        };
        // A desktop of an agent's own needs no display of the person's: with none, it is virtual.
        if is_desktop_call(call.surface, &call.command) {
            return Ok(surface.clone());
        }
        if let Availability::Unavailable { reason, fix } = surface.probe() {
            return Err(
                ToolError::new(ErrorCode::Unavailable, format!("{reason}; fix: {fix}"))
                    .at("surface")
                    .valid(self.ready_surfaces()),
            );
        }
        Ok(surface.clone())
    }

    /// Validates a reached call (complications, budget, the surface's own checks, the caller's
    /// right to what it names) and decides it by policy on its facts. A denial is a decision
    /// here, not an error: its receipt records the facts it was decided on.
    pub(crate) fn judge(
        &self,
        caller: &Caller,
        surface: Arc<dyn Surface>,
        call: &ComputerCall,
        raw: &Value,
    ) -> Result<Decided, ToolError> {
        self.unsupported_complications(call, surface.as_ref())?;
        let callable = match &call.complications.tools {
            Some(ask) if ask.wanted() => Some(self.tools.resolve(self.registry, caller, ask)?),
            _ => None,
        };
        let budget = Budget::from_request(
            call.complications.return_budget.as_ref(),
            crate::call::schema::result_fields_of(surface.as_ref(), &call.command),
        )?;
        // `help` is the daemon's, on every surface; everything else is the surface's own.
        let action = if call.command == crate::call::own::HELP_COMMAND {
            crate::call::help::prepare(self.registry, &surface, &call.args, caller.observe_only)?
        } else if is_desktop_call(call.surface, &call.command) {
            let desktops = self.desktops.ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Unavailable,
                    "desktops are opened by the running daemon only",
                )
            })?;
            crate::call::desktops::prepare(desktops, &caller.agent, &call.args)?
        } else {
            surface.prepare(&call.command, &call.args, &call.complications)?
        };
        action.check_caller(&caller.agent)?;
        // An observe-only connection observes and nothing else: what acts is refused here,
        // before policy, so nobody is asked (this holds for each step of a multi-step call and
        // for a detached one, which are judged here too).
        if caller.observe_only && action.risk() != computer_surfaces::Risk::Observe {
            return Err(observe_only_refusal(call));
        }
        let described = action.describe();
        let facts = action.facts();
        // The args as the surface redacts them (the digest covers the request whole).
        let stated_args = match &facts.args {
            Some(args) => json!({
                "surface": call.surface,
                "command": call.command,
                "args": args,
                "complications": receipt_value(&json!(call.complications)),
            }),
            None => receipt_value(raw),
        };
        let stated = (stated_args, receipt_value(&facts.for_receipt()));
        let decision = self.policy.decide(&PolicyInput::of(
            caller,
            call,
            &described,
            action.risk(),
            &facts,
        ));
        let grant_key = digest(&json!([
            caller.agent,
            call.surface,
            call.command,
            call.args,
            call.complications.cwd,
            call.complications.env,
            facts,
        ]));
        Ok(Decided {
            surface,
            budget,
            action,
            described,
            facts,
            stated,
            decision,
            callable,
            grant_key,
        })
    }

    /// The whole decide stage for a decoded call: reach, then judge.
    pub(crate) fn decide(
        &self,
        caller: &Caller,
        call: &ComputerCall,
        raw: &Value,
    ) -> Result<Decided, ToolError> {
        let surface = self.reach(caller, call)?;
        self.judge(caller, surface, call, raw)
    }
}

/// A call whose intent is durable and whose result is not yet written. `#[must_use]`: it is let
/// go of by [`Open::close`]; dropped unclosed (a future dropped mid-call), it writes an
/// `abandoned` result on its own, so no exit leaves an intent alone while the daemon lives.
#[must_use = "a call with a written intent must be closed with its result"]
pub(crate) struct Open {
    call_id: String,
    surface: String,
    command: String,
    tags: Map<String, Value>,
    ledger: Option<SealedLedger>,
}

impl Open {
    fn result_row(&self, body: Value) -> NewRow {
        let (surface, command) = (&self.surface, &self.command);
        row(
            &self.call_id,
            RowKind::Result,
            surface,
            command,
            &self.tags,
            body,
        )
    }

    /// Writes the result row (tagged like the intent) and lets go of the call.
    pub(crate) async fn close(mut self, body: Value) -> Result<(), LedgerError> {
        let ledger = self
            .ledger
            .take()
            .expect("an open call holds its ledger until closed");
        let row = self.result_row(body);
        ledger.append(vec![row]).await.map(|_| ())
    }

    /// Closes the call and hands back its reply, or, when the result cannot be written, an
    /// error saying the action ran without its result receipt.
    pub(crate) async fn finish(self, body: Value, reply: CallToolResult) -> CallToolResult {
        let call_id = self.call_id.clone();
        if let Err(err) = self.close(body).await {
            tracing::error!(%call_id, error = %err, "result receipt failed after the action ran");
            return unreceipted_error(&ToolError::new(
                ErrorCode::ReceiptFailed,
                format!("the action ran, but its result receipt could not be written: {err}"),
            ));
        }
        reply
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let Some(ledger) = self.ledger.take() else {
            return;
        };
        tracing::warn!(call_id = %self.call_id, "a call ended without its result; receipted as abandoned");
        let row = self.result_row(json!({
            "ok": false,
            "outcome": "abandoned",
            "error": {"code": "cancelled", "message": "the call was dropped before it finished"},
        }));
        // Without a runtime (the daemon ending) the next start closes it as interrupted.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = ledger.append(vec![row]).await;
            });
        }
    }
}

/// One call as the stages see it: its receipt id, who made it, when it is stopped, and where
/// its progress goes (a person's wait is reported there while it lasts). A step is its parent
/// call with its own id.
#[derive(Clone, Copy)]
pub(crate) struct CallScope<'a> {
    pub(crate) id: &'a str,
    pub(crate) caller: &'a Caller,
    pub(crate) cancelled: &'a CancellationToken,
    pub(crate) progress: &'a (dyn Fn(String) + Send + Sync),
}

/// Who can answer a call that policy asks about.
pub(crate) enum Asking {
    /// A person, through the approvers, shown this request.
    Person(Box<PendingRequest>),
    /// Nobody (a run's own calls): an ask is refused, saying why.
    Nobody(&'static str),
}

/// Why a call ends before it runs: the error its caller gets, and the policy and approval
/// context its receipt records.
pub(crate) struct Refusal {
    pub(crate) error: ToolError,
    pub(crate) context: Value,
}

impl From<ToolError> for Refusal {
    fn from(error: ToolError) -> Self {
        Refusal {
            error,
            context: Value::Null,
        }
    }
}

impl DaemonState {
    pub fn new(
        registry: Registry,
        policy: Arc<dyn Policy>,
        approvals: Arc<Approvals>,
        limiter: RateLimiter,
        ledger: SealedLedger,
        artifact_dir: PathBuf,
    ) -> DaemonState {
        DaemonState {
            desktops: Arc::new(Desktops::new(registry.shell().cloned())),
            registry,
            policy: RwLock::new(policy),
            approvals,
            limiter,
            ledger,
            artifact_dir,
            tools: RwLock::default(),
            closing: AtomicBool::new(false),
        }
    }

    /// Refuses new calls from now on (calls already running finish).
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Admit: the daemon is not closing and the agent is within its rate limit. A call counts
    /// once here; a multi-step call counts its other call steps with [`DaemonState::admit_more`].
    pub(crate) fn admit(&self, caller: &Caller) -> Result<(), ToolError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(ToolError::new(
                ErrorCode::ShuttingDown,
                "the daemon is shutting down; retry once it is back",
            ));
        }
        self.limiter.admit(&caller.agent, 1).map_err(|retry_after| {
            ToolError::new(
                ErrorCode::RateLimited,
                format!(
                    "agent `{}` is over its rate limit; retry in {} ms",
                    caller.agent,
                    retry_after.as_millis()
                ),
            )
        })
    }

    /// Admits `more` calls on top of one already admitted, all or none; when refused, the one
    /// already admitted is given back too, so a refused call uses none of the window.
    pub(crate) fn admit_more(&self, caller: &Caller, more: u32) -> Result<(), std::time::Duration> {
        if more == 0 {
            return Ok(());
        }
        self.limiter.admit(&caller.agent, more).inspect_err(|_| {
            self.limiter.give_back(&caller.agent, 1);
        })
    }

    /// The decide stage as the daemon runs it: its surfaces and its rules of the moment.
    pub(crate) fn deciding<'a>(&'a self, policy: &'a Arc<dyn Policy>) -> Deciding<'a> {
        Deciding {
            registry: &self.registry,
            policy: policy.as_ref(),
            tools: self.tool_rules(),
            desktops: Some(&self.desktops),
        }
    }

    /// What runs given tools may call, of the moment (a SIGHUP swaps it).
    pub(crate) fn tool_rules(&self) -> Arc<crate::call::tools::ToolRules> {
        self.tools.read().unwrap().clone()
    }

    /// The rules of the moment (a SIGHUP swaps them; a call keeps those it was decided on).
    pub(crate) fn policy(&self) -> Arc<dyn Policy> {
        self.policy.read().unwrap().clone()
    }

    /// Approve: the decision carried out. An allowed call passes with no record (`Null`); a
    /// denied one is refused with the rule's reason; one that asks is asked of a person (its
    /// answer recorded, a no refused with what was asked and, for a backend's consent, how to
    /// grant it), or refused where nobody can be asked. Every caller composes this, so a call
    /// is approved the same way whoever sent it.
    pub(crate) fn approve<'a>(
        &'a self,
        scope: CallScope<'a>,
        early: &'a Early,
        decided: &Decided,
        asking: Asking,
    ) -> impl Future<Output = Result<Value, Refusal>> + Send + 'a {
        // What the approval needs of the decided call, taken now: the call's action is not
        // `Sync`, so the future holds no reference to it.
        let decision = decided.decision.clone();
        let consent = decided.facts.consent.clone();
        let grant_key = decided.grant_key.clone();
        let intent = matches!(decision, Decision::Ask { .. })
            .then(|| DaemonState::intent_body(scope.caller, early, decided, &Value::Null));
        async move {
            let refusal = |message: String, approval: Option<Value>| {
                let mut context = json!({"policy": decision});
                if let Some(approval) = approval {
                    context["approval"] = approval;
                }
                Refusal {
                    error: ToolError::new(ErrorCode::Denied, message),
                    context,
                }
            };
            let request = match (&decision, asking) {
                (Decision::Allow { .. }, _) => return Ok(Value::Null),
                (Decision::Deny { reason, .. }, _) => return Err(refusal(reason.clone(), None)),
                (Decision::Ask { .. }, Asking::Nobody(why)) => {
                    return Err(refusal(why.into(), None));
                }
                (Decision::Ask { .. }, Asking::Person(request)) => request,
            };
            let intent = intent.unwrap_or_default();
            let resolution = self.ask(scope, early, intent, *request, &grant_key).await;
            let recorded = serde_json::to_value(&resolution).unwrap_or_default();
            match &resolution {
                Resolution::Denied { reason, .. } => {
                    let message = match &consent {
                        Some(question) => format!("not approved: {reason}; {question}"),
                        None => format!("not approved: {reason}"),
                    };
                    Err(refusal(message, Some(recorded)))
                }
                _ => Ok(recorded),
            }
        }
    }

    /// Approve: asks a person (unless a session grant covers the action). The call's intent,
    /// with `approval: pending` and the request's id, is made durable before anyone is asked,
    /// so a daemon that dies while the person thinks leaves an intent the next start closes as
    /// interrupted. A request whose intent cannot be written is denied, never shown.
    pub(crate) async fn ask(
        &self,
        scope: CallScope<'_>,
        early: &Early,
        intent: Value,
        request: PendingRequest,
        grant_key: &str,
    ) -> Resolution {
        let CallScope {
            id: call_id,
            cancelled,
            progress,
            ..
        } = scope;
        let record = |id: u64| {
            let mut body = intent;
            body["approval"] = json!({"outcome": "pending", "request": id});
            let row = early.row(call_id, RowKind::Intent, body);
            async move {
                self.ledger
                    .append(vec![row])
                    .await
                    .map(|_| ())
                    .map_err(|err| err.to_string())
            }
        };
        self.approvals
            .ask_recorded(request, grant_key, cancelled.clone(), progress, record)
            .await
    }

    /// Write intent: the row that says what will run and why it may, durable before it runs.
    pub(crate) async fn write_intent(
        &self,
        call_id: &str,
        early: &Early,
        body: Value,
    ) -> Result<Open, ToolError> {
        let row = early.row(call_id, RowKind::Intent, body);
        let call_id = call_id.to_string();
        match self.ledger.append(vec![row]).await {
            Ok(_) => Ok(Open {
                call_id,
                surface: early.surface.clone(),
                command: early.command.clone(),
                tags: early.tags.clone(),
                ledger: Some(self.ledger.clone()),
            }),
            Err(err) => {
                tracing::error!(%call_id, error = %err, "intent receipt failed; action refused");
                Err(ToolError::new(
                    ErrorCode::ReceiptFailed,
                    format!(
                        "the action was refused because its receipt could not be written: {err}"
                    ),
                ))
            }
        }
    }

    /// Write intent for an action about to run, while the action reads what its effect will be
    /// judged against (`PreparedAction::look_before`): the read overlaps the wait for the disk.
    pub(crate) async fn write_intent_looking(
        &self,
        call_id: &str,
        early: &Early,
        body: Value,
        action: &mut dyn PreparedAction,
    ) -> Result<Open, ToolError> {
        let (open, ()) = tokio::join!(
            self.write_intent(call_id, early, body),
            action.look_before()
        );
        open
    }

    /// The intent of a decided call, as every caller writes it.
    pub(crate) fn intent_body(
        caller: &Caller,
        early: &Early,
        decided: &Decided,
        approval: &Value,
    ) -> Value {
        let (args, facts) = decided.stated.clone();
        json!({
            "caller": caller,
            "args": args,
            "args_sha256": digest(&early.args),
            "facts": facts,
            "action": decided.described,
            "risk": decided.action.risk(),
            "policy": decided.decision,
            "approval": approval,
        })
    }

    /// Ends a call that will not run: writes its intent and result together, then answers.
    pub(crate) async fn refuse(
        &self,
        call_id: &str,
        caller: &Caller,
        early: Early,
        refusal: Refusal,
    ) -> CallToolResult {
        let Refusal { error, context } = refusal;
        let refused_act = self.refused_act(&early, &error);
        match self
            .record_refusal(call_id, caller, &early, &error, &context)
            .await
        {
            Ok(()) => {
                let mut reply = error_result(call_id, &error);
                if refused_act {
                    attach_field(&mut reply, EFFECT_FIELD, json!(Effect::Refused));
                }
                reply
            }
            Err(()) => unreceipted_error(&error),
        }
    }

    /// Whether a call that will not run is an act refused before anything was sent: prepared
    /// (a surface stated it), refused under a code that means it was never attempted, and of a
    /// command that reads back its effect. Its reply and result then say `effect: refused`.
    fn refused_act(&self, early: &Early, error: &ToolError) -> bool {
        early.stated.is_some() && self.says_refused(&early.surface, &early.command, error)
    }

    /// Whether `error`, ending a call of `surface`'s `command` before anything was sent, makes
    /// it say `effect: refused`: the command reads back its effect, and the error is a refusal.
    pub(crate) fn says_refused(&self, surface: &str, command: &str, error: &ToolError) -> bool {
        refused_before_acting(error)
            && SurfaceName::parse(surface)
                .and_then(|name| self.registry.get(name))
                .is_some_and(|surface| {
                    crate::call::budget::reports_effect(crate::call::schema::result_fields_of(
                        surface.as_ref(),
                        command,
                    ))
                })
    }

    /// The rows of a call that will not run (intent and result in one append).
    pub(crate) async fn record_refusal(
        &self,
        call_id: &str,
        caller: &Caller,
        early: &Early,
        error: &ToolError,
        context: &Value,
    ) -> Result<(), ()> {
        let mut intent = json!({
            "caller": caller,
            "args": receipt_value(&early.args),
            "args_sha256": digest(&early.args),
            "policy": context.get("policy"),
            "approval": context.get("approval"),
        });
        if let Some((args, facts)) = &early.stated {
            intent["args"] = args.clone();
            intent["facts"] = facts.clone();
        }
        let result = if self.refused_act(early, error) {
            json!({"ok": false, "error": error, EFFECT_FIELD: Effect::Refused})
        } else {
            json!({"ok": false, "error": error})
        };
        let rows = vec![
            early.row(call_id, RowKind::Intent, intent),
            early.row(call_id, RowKind::Result, result),
        ];
        self.ledger.append(rows).await.map(|_| ()).map_err(|err| {
            tracing::error!(%call_id, error = %err, "receipt for a refused call failed");
        })
    }

    /// The context an action runs in, once `decision` let it run (allowed, or asked and
    /// approved: the login files an approved ask named are then writable in its run).
    pub(crate) fn context(
        &self,
        call_id: &str,
        caller: &Caller,
        cancelled: &CancellationToken,
        decision: &Decision,
    ) -> CallContext {
        CallContext {
            call_id: call_id.to_string(),
            artifact_dir: self.artifact_dir.clone(),
            protected: self.approvals.approvers().clone(),
            cancel: cancelled.clone(),
            artifact_quota: self.registry.artifact_quota().clone(),
            output_bytes: Arc::default(),
            secrets: Default::default(),
            agent: caller.agent.clone(),
            tools: None,
            run_ended: None,
            login_files_writable: match decision {
                Decision::Ask { login_files, .. } => login_files.clone(),
                _ => Vec::new(),
            },
        }
    }

    /// Execute and shape: runs the action (with evidence when asked), masks what it returned
    /// with the call's secrets, maps a failure to its error and cuts the result to its budget.
    pub(crate) async fn execute(
        &self,
        call_id: &str,
        action: Box<dyn PreparedAction>,
        ctx: CallContext,
        budget: &Budget,
        shots: Shots,
        cancelled: &CancellationToken,
    ) -> Shaped {
        let evidence = shots.asked;
        let before = match evidence {
            Evidence::Full => Some(shots.capture(&ctx, "before", false).await),
            _ => None,
        };
        let outcome = run_until_cancelled(action, ctx.clone(), cancelled).await;
        let outcome = crate::record::secrets::mask_outcome(&ctx.secrets, outcome);
        let after = match evidence {
            Evidence::None => None,
            _ if cancelled.is_cancelled() => None,
            _ => Some(shots.capture(&ctx, "after", true).await),
        };
        let mut shaped = match outcome {
            Ok(mut outcome) => {
                let shots = [("before", before), ("after", after)];
                let evidence = evidence_report(&shots, &mut outcome);
                let (mut reply, mut body) = self.success_reply(call_id, budget, outcome);
                if let Some(report) = evidence {
                    attach_field(&mut reply, "evidence", report.clone());
                    body["evidence"] = report;
                }
                Shaped { reply, body }
            }
            Err(err) => self.failure(call_id, err, budget.reports_effect),
        };
        crate::record::secrets::mask_reply(&ctx.secrets, &mut shaped.reply, &mut shaped.body);
        shaped
    }

    /// A failed action's reply and result body. An act that reads back its effect
    /// (`reports_effect`) and failed before anything was sent says `effect: refused` in both.
    pub(crate) fn failure(&self, call_id: &str, err: SurfaceError, reports_effect: bool) -> Shaped {
        let (error, body) = failure_body(call_id, err, reports_effect);
        let mut reply = error_result(call_id, &error);
        if let Some(effect) = body.get(EFFECT_FIELD) {
            attach_field(&mut reply, EFFECT_FIELD, effect.clone());
        }
        Shaped { reply, body }
    }

    /// The screenshots a call asked for, of the desktop it acts on.
    pub(crate) fn shots(&self, call: &ComputerCall) -> Shots {
        Shots::for_call(call, &self.registry, &self.desktops)
    }

    /// A successful outcome cut to its budget: the reply, and the result receipt's body.
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
}

/// A pending request for a decided call: what the person is shown of it.
pub(crate) fn approval_request(
    call_id: &str,
    caller: &Caller,
    early: &Early,
    decided: &Decided,
    rule: &str,
    cwd: Option<String>,
) -> PendingRequest {
    let will_run = WillRun::new(&decided.described, decided.facts.clone());
    PendingRequest {
        id: 0,
        receipt: call_id.to_string(),
        agent: caller.agent.clone(),
        caller_pid: caller.pid,
        surface: early.surface.clone(),
        command: early.command.clone(),
        action: will_run.one_line(),
        will_run,
        warnings: Vec::new(),
        cwd,
        desktop: early
            .tags
            .get("desktop")
            .and_then(Value::as_str)
            .map(str::to_string),
        risk: decided.action.risk().name().to_string(),
        rule: rule.to_string(),
        asked_at_ms: 0,
        expires_in_ms: 0,
        steps: Vec::new(),
    }
}

/// The refusal of anything but an observation on an observe-only connection: refused, not
/// asked, and the way to act named.
pub fn observe_only_refusal(call: &ComputerCall) -> ToolError {
    ToolError::new(
        ErrorCode::Denied,
        format!(
            "refused: this connection is observe-only (`computer mcp --observe-only`), and {}.{} \
             acts; use the host's full `computer` server to act",
            call.surface, call.command
        ),
    )
}

/// How long a cancelled action may take to end on its own (a shell run counts and kills what it
/// started, and reports) before it is dropped where it stands.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Runs `action` to its end, or, once `cancelled` fires, for at most [`CANCEL_GRACE`] more:
/// surfaces that watch the token end cleanly; the others are dropped at their next await.
pub(crate) async fn run_until_cancelled(
    action: Box<dyn PreparedAction>,
    ctx: CallContext,
    cancelled: &CancellationToken,
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

pub(crate) fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}
