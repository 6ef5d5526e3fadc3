//! The gateway: a single call, composed of the stages in `stages.rs` (admit → decide →
//! approve → write intent → execute → shape → finish); it hands a call carrying `steps` to
//! `steps.rs`, a `job` call and a detached one to `jobs.rs`. It also owns what a connection
//! asks of the daemon besides calls: the tool as a caller sees it and who a token names.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};

use computer_ipc::{ComputerCall, ErrorCode, SurfaceName, TOOL_NAME, ToolError};
use computer_surfaces::Registry;
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};

use crate::call::cancel::CallCancel;
use crate::call::jobs::Jobs;
use crate::call::replies::{Shaped, error_result, unreceipted_error};
use crate::call::stages::{
    Asking, CallScope, DaemonState, Deciding, Early, Refusal, approval_request,
    observe_only_refusal,
};
use crate::call::steps::StepLimits;
use crate::call::tools::{CallThrough, Callable, RunGrant, ToolRules, ToolsConfig};
use crate::guard::approval::Approvals;
use crate::guard::policy::{Caller, Policy};
use crate::guard::ratelimit::RateLimiter;
use crate::record::receipts::Ledger;

pub struct Gateway {
    /// What every stage of a call needs; shared with detached jobs, which outlive their call.
    state: Arc<DaemonState>,
    agents_path: PathBuf,
    tool: Tool,
    step_limits: RwLock<StepLimits>,
    /// The config file this daemon read (or would have: it may not exist), which it tells its
    /// clients so that they can say which one is in use.
    config_path: RwLock<Option<PathBuf>>,
    /// Detached calls and the `job` command (`jobs.rs`).
    jobs: Jobs,
    /// Itself, for the runs it gives tools: their calls come back here while it lives.
    me: Weak<Gateway>,
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
        let tool = crate::call::schema::tool(&registry, None);
        let agents_path = crate::guard::agents::store_path(
            artifact_dir.parent().unwrap_or(std::path::Path::new(".")),
        );
        let jobs = Jobs::new(ledger.path().to_path_buf());
        let ledger = crate::record::secrets::SealedLedger::new(ledger);
        let state = DaemonState::new(registry, policy, approvals, limiter, ledger, artifact_dir);
        *state.tools.write().unwrap() = Arc::new(ToolRules {
            config: ToolsConfig::default(),
            served: crate::call::own::served_commands(),
        });
        Arc::new_cyclic(|me| Gateway {
            state: Arc::new(state),
            agents_path,
            tool,
            step_limits: RwLock::new(Default::default()),
            config_path: RwLock::new(None),
            jobs,
            me: me.clone(),
        })
    }

    /// What runs given tools may call beyond the default set (`[tools]`); a name no surface
    /// offers is refused, naming the valid ones, and the rules in force stay.
    pub fn set_tools(&self, config: ToolsConfig) -> Result<(), String> {
        let rules = ToolRules {
            config,
            served: crate::call::own::served_commands(),
        };
        rules.check(&self.state.registry)?;
        *self.state.tools.write().unwrap() = Arc::new(rules);
        Ok(())
    }

    /// The capability of one run given tools: its calls come back to [`Gateway::handle_via`]
    /// as `caller`, tagged with the run's receipt id, within `callable`.
    fn grant(
        &self,
        caller: &Caller,
        via: &str,
        callable: Vec<Callable>,
        secrets: Arc<computer_surfaces::kit::secrets::CallSecrets>,
    ) -> RunGrant {
        let names: Arc<Vec<String>> = Arc::new(callable.iter().map(|c| c.name.clone()).collect());
        let (me, caller_of_run, via_run) = (self.me.clone(), caller.clone(), via.to_string());
        let call: CallThrough = Arc::new(move |arguments, cancel| {
            let (me, caller, via, names) = (
                me.clone(),
                caller_of_run.clone(),
                via_run.clone(),
                names.clone(),
            );
            Box::pin(async move {
                match me.upgrade() {
                    Some(gateway) => {
                        gateway
                            .handle_via(&caller, &via, &names, Some(arguments), cancel)
                            .await
                    }
                    None => unreceipted_error(&ToolError::new(
                        ErrorCode::ShuttingDown,
                        "the daemon is shutting down",
                    )),
                }
            })
        });
        RunGrant {
            via: via.to_string(),
            callable,
            call,
            secrets,
        }
    }

    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    /// The tool as this caller sees it: only the surfaces in its scope are listed.
    pub fn tool_for(&self, caller: &Caller) -> Tool {
        if caller.observe_only {
            return crate::call::schema::observe_only_tool(
                &self.state.registry,
                caller.surfaces.as_deref(),
            );
        }
        match &caller.surfaces {
            None => self.tool.clone(),
            Some(scope) => crate::call::schema::tool(&self.state.registry, Some(scope)),
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
        let store = crate::guard::agents::AgentStore::load(&self.agents_path)?;
        store
            .authenticate(token)
            .map(|agent| (agent.name.clone(), agent.surfaces.clone()))
            .ok_or_else(|| "unknown agent token; mint one with `computer agents add NAME`".into())
    }

    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.state.approvals
    }

    /// Swaps in new rules (SIGHUP); calls already decided keep their decision.
    pub fn set_policy(&self, policy: Arc<dyn Policy>, limiter: RateLimiter) {
        *self.state.policy.write().unwrap() = policy;
        self.state.limiter.replace(limiter);
    }

    /// Bounds on multi-step calls (from `[limits]`; calls already running keep theirs).
    pub fn set_step_limits(&self, limits: StepLimits) {
        *self.step_limits.write().unwrap() = limits;
    }

    pub fn set_config_path(&self, path: PathBuf) {
        *self.config_path.write().unwrap() = Some(path);
    }

    /// What the daemon tells a client of itself: the config file it read (and whether it was
    /// there, or the embedded defaults were used), its pid and version.
    pub fn daemon_facts(&self) -> computer_ipc::control::DaemonFacts {
        let config = self.config_path.read().unwrap().clone();
        computer_ipc::control::DaemonFacts {
            config_exists: config.as_ref().is_some_and(|path| path.exists()),
            config,
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            desktops: self.state.desktops.facts(),
        }
    }

    fn step_limits(&self) -> StepLimits {
        *self.step_limits.read().unwrap()
    }

    /// Refuses new calls from now on (calls already running finish).
    pub fn close(&self) {
        self.state.close();
    }

    /// Takes `[agents.NAME]` (which agents work on a desktop of their own).
    pub fn set_agents(
        &self,
        agents: std::collections::BTreeMap<String, crate::call::desktops::AgentDesk>,
    ) -> Result<(), crate::call::desktops::BadAgentDesk> {
        self.state.desktops.set_agents(agents)
    }

    /// Closes every desktop of agents' own, ending everything that ran in them (the daemon
    /// stops).
    /// Counts a connection of `agent` while the returned presence lives (see
    /// [`crate::call::desktops::Desktops::presence`]).
    pub fn desktop_presence(&self, agent: &str) -> crate::call::desktops::Presence {
        self.state.desktops.presence(agent)
    }

    pub async fn end_desktops(&self) {
        let desktops = self.state.desktops.clone();
        tokio::task::spawn_blocking(move || desktops.close_all())
            .await
            .ok();
    }

    /// Handles one `tools/call`: the stages of `stages.rs`, composed for a single call (a call
    /// carrying `steps` is handed to `steps.rs` once admitted). Always answers with a tool
    /// result, never a protocol error, and always leaves receipts.
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
        let scope = CallScope {
            id: &call_id,
            caller,
            cancelled: &cancelled,
            progress,
        };
        let raw = Value::Object(arguments.unwrap_or_default());
        let state = &self.state;
        let refuse =
            |early: Early, refusal: Refusal| state.refuse(&call_id, caller, early, refusal);

        if let Err(error) = state.admit(caller) {
            return refuse(Early::from_raw(&raw), error.into()).await;
        }
        if tool_name != TOOL_NAME {
            let error = ToolError::invalid(format!("unknown tool `{tool_name}`"))
                .at("name")
                .valid([TOOL_NAME]);
            return refuse(Early::from_raw(&raw), error.into()).await;
        }
        if raw.get("steps").is_some() {
            return crate::call::steps::handle(state, self.step_limits(), scope, &raw, &cancel)
                .await;
        }
        let policy = state.policy();
        let deciding = state.deciding(&policy);
        let call = match placed(state, &deciding, caller, &raw).await {
            Ok(call) => call,
            Err((early, error)) => return refuse(early, error.into()).await,
        };
        let mut early = Early::of(&call, &raw);
        let surface = match deciding.reach(caller, &call) {
            Ok(surface) => surface,
            Err(error) => return refuse(early, error.into()).await,
        };
        if crate::call::own::is_job_call(&call) {
            // Cancelling a job stops a run: not an observation.
            if caller.observe_only && call.args.get("op") == Some(&json!("cancel")) {
                return refuse(early, observe_only_refusal(&call).into()).await;
            }
            return self.jobs.command(state, scope, early, &call).await;
        }
        if let Err(error) = self.jobs.check_detach(&call, caller) {
            return refuse(early, error.into()).await;
        }
        let decided = match deciding.judge(caller, surface, &call, &raw) {
            Ok(decided) => decided,
            Err(error) => return refuse(early, error.into()).await,
        };
        early.stated = Some(decided.stated.clone());
        let request = approval_request(
            &call_id,
            caller,
            &early,
            &decided,
            &decided.decision.asked_because(),
            call.complications.cwd.clone(),
        );
        let asking = Asking::Person(Box::new(request));
        let approval = match state.approve(scope, &early, &decided, asking).await {
            Ok(approval) => approval,
            Err(refusal) => return refuse(early, refusal).await,
        };

        self.run(scope, &early, &call, decided, approval, &cancel)
            .await
    }

    /// A programmatic call: one sent from inside a run that was given tools, through the same
    /// stages as any call, decided for the run's agent (its rate limit, scope and rules), within
    /// what the run may call (`callable`, `surface.command` names), every row naming the run
    /// (`via`: its receipt id). What needs a person is refused at once, as nobody can be asked
    /// on a run's behalf; so is a multi-step or detached call.
    pub async fn handle_via(
        &self,
        caller: &Caller,
        via: &str,
        callable: &[String],
        arguments: Option<Map<String, Value>>,
        cancel: CallCancel,
    ) -> CallToolResult {
        let (cancelled, _watching) = cancel.watch();
        let call_id = uuid::Uuid::now_v7().to_string();
        // Nobody waits on a run's call with a progress bar: its progress goes nowhere.
        let scope = CallScope {
            id: &call_id,
            caller,
            cancelled: &cancelled,
            progress: &|_| {},
        };
        let raw = Value::Object(arguments.unwrap_or_default());
        let state = &self.state;
        let tagged = |mut early: Early| {
            early.tags.insert("via".into(), json!(via));
            early
        };
        let refuse =
            |early: Early, refusal: Refusal| state.refuse(&call_id, caller, tagged(early), refusal);
        if let Err(error) = state.admit(caller) {
            return refuse(Early::from_raw(&raw), error.into()).await;
        }
        if raw.get("steps").is_some() {
            let error = ToolError::invalid(
                "a run's calls are one call each; a script loops and chooses itself, so `steps` is refused here",
            )
            .at("steps");
            return refuse(Early::from_raw(&raw), error.into()).await;
        }
        let policy = state.policy();
        let deciding = state.deciding(&policy);
        let call = match placed(state, &deciding, caller, &raw).await {
            Ok(call) => call,
            Err((early, error)) => return refuse(early, error.into()).await,
        };
        let early = tagged(Early::of(&call, &raw));
        let name = format!("{}.{}", call.surface, call.command);
        if !callable.contains(&name) {
            let error = ToolError::new(
                ErrorCode::Denied,
                format!("`{name}` is not callable from this run; it may call what it was given"),
            )
            .at("command")
            .valid(callable.iter().cloned());
            return refuse(early, error.into()).await;
        }
        let surface = match deciding.reach(caller, &call) {
            Ok(surface) => surface,
            Err(error) => return refuse(early, error.into()).await,
        };
        if crate::call::own::is_job_call(&call) {
            return self.jobs.command(state, scope, early, &call).await;
        }
        if call.complications.detach {
            let error = ToolError::invalid("a run's calls end within the run; `detach` is refused")
                .at("complications.detach");
            return refuse(early, error.into()).await;
        }
        let mut early = early;
        let decided = match deciding.judge(caller, surface, &call, &raw) {
            Ok(decided) => decided,
            Err(error) => return refuse(early, error.into()).await,
        };
        early.stated = Some(decided.stated.clone());
        if call
            .complications
            .tools
            .as_ref()
            .is_some_and(|t| t.wanted())
        {
            let error = ToolError::new(
                ErrorCode::Denied,
                "a run cannot give tools to a run it starts: the capability is for the run it was minted for",
            )
            .at("complications.tools");
            return refuse(early, error.into()).await;
        }
        if decided.action.risk() == computer_surfaces::Risk::Secret {
            let error = ToolError::new(
                ErrorCode::Denied,
                "secret values never reach a run's calls (a reveal, or a secret put into a run); make the call yourself, outside the run",
            );
            return refuse(early, error.into()).await;
        }
        let asking = Asking::Nobody(
            "policy would ask a person for this call, and nobody is asked on a run's behalf; make the call yourself, outside the run",
        );
        if let Err(refusal) = state.approve(scope, &early, &decided, asking).await {
            return refuse(early, refusal).await;
        }
        self.run(scope, &early, &call, decided, Value::Null, &cancel)
            .await
    }

    /// Write intent → (a job, or) execute → finish, for a decided, approved call.
    async fn run(
        &self,
        scope: CallScope<'_>,
        early: &Early,
        call: &computer_ipc::ComputerCall,
        mut decided: crate::call::stages::Decided,
        approval: Value,
        cancel: &CallCancel,
    ) -> CallToolResult {
        let state = &self.state;
        let CallScope {
            caller, cancelled, ..
        } = scope;
        let call_id = scope.id.to_string();
        let intent = DaemonState::intent_body(caller, early, &decided, &approval);
        let open = match state
            .write_intent_looking(&call_id, early, intent, decided.action.as_mut())
            .await
        {
            Ok(open) => open,
            Err(error) => return unreceipted_error(&error),
        };
        let mut ctx = state.context(&call_id, caller, cancelled, &decided.decision);
        if let Some(callable) = decided.callable.clone() {
            let grant = self.grant(caller, &call_id, callable, ctx.secrets.clone());
            ctx.tools = Some(Arc::new(grant));
        }
        // A call a run made (tagged `via` it, by `handle_via`): its connection is the run's
        // tools channel, whose token fires when the run ends, and so ends what it opened.
        if early.tags.contains_key("via") {
            ctx.run_ended = Some(cancel.connection.clone());
        }
        if call.complications.detach {
            let fields = decided.surface.result_fields(&call.command);
            let asked = call.complications.return_budget.clone();
            return self
                .jobs
                .start(
                    self.state.clone(),
                    caller,
                    open,
                    early,
                    decided.action,
                    ctx,
                    asked,
                    fields,
                )
                .await;
        }
        if let Some(by) = cancel.by() {
            let error = ToolError::new(
                ErrorCode::Cancelled,
                format!("cancelled by the {by} before it ran"),
            );
            let body = json!({"ok": false, "error": error, "cancelled": {"by": by}});
            return open.finish(body, error_result(&call_id, &error)).await;
        }
        let Shaped { reply, mut body } = state
            .execute(
                &call_id,
                decided.action,
                ctx,
                &decided.budget,
                state.shots(call),
                cancelled,
            )
            .await;
        // A cancelled call is recorded as such; its client hears nothing more of it (rmcp drops
        // the reply of a cancelled request, and a gone client has nobody to read it).
        if let Some(by) = cancel.by() {
            body["ok"] = json!(false);
            body["cancelled"] = json!({"by": by});
            tracing::info!(%call_id, by, "call cancelled");
        }
        open.finish(body, reply).await
    }
}

/// The call `raw` asks for, decoded and placed on the desktop it acts on: an agent confined to a
/// desktop of its own has its gui, ax and shell calls made to name it. Refused: what is known of
/// the call, and why.
async fn placed(
    state: &DaemonState,
    deciding: &Deciding<'_>,
    caller: &Caller,
    raw: &Value,
) -> Result<ComputerCall, (Early, ToolError)> {
    let mut call = deciding
        .decode(raw)
        .map_err(|error| (Early::from_raw(raw), error))?;
    match state.desktops.confine(&caller.agent, &mut call).await {
        Ok(()) => Ok(call),
        Err(error) => Err((Early::of(&call, raw), error)),
    }
}
