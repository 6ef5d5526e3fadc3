//! Detached jobs: calls with `complications.detach` that go on in the daemon after their intent
//! receipt, owned by the agent that started them, and the `job` command (`status`, `result`,
//! `cancel`, `list`) through which that agent follows them.
//!
//! A job's id is its start call's receipt id. A job ends by itself, at its deadline, by `job
//! cancel` or at daemon shutdown, never because its client cancelled or went away. Its result
//! receipt is written when it ends; a daemon that dies first leaves the intent for the next start
//! to close as `interrupted` (as the writer thread opens the store, `receipts.rs`), which `status` then reads back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use computer_ipc::{ComputerCall, ErrorCode, ReturnBudget, ToolError};
use computer_surfaces::{CallContext, Outcome, PreparedAction, Risk, decode_args, receipt_value};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::call::budget::Budget;
use crate::call::own::{DETACHABLE, JobArgs, JobOp, MAX_WAIT};
use crate::call::replies::{attach_field, error_result, failure_body, reply, unreceipted_error};
use crate::call::stages::{CallScope, DaemonState, Early, Open, digest, run_until_cancelled};
use crate::guard::policy::{Caller, Decision};

/// How long `job cancel` waits for the job to end (its processes killed and counted) before it
/// answers; the job still ends after that, only the reply no longer says how.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The most job ids an error lists as valid choices.
const LISTED_IDS: usize = 10;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    /// Ended and did what was asked (a run exiting 0).
    Done,
    /// Ended without doing it: a non-zero exit, its deadline, an error.
    Failed,
    /// Stopped by `job cancel` or the daemon's shutdown.
    Cancelled,
    /// The daemon died while it ran.
    Interrupted,
}

pub use crate::config::JobLimits;

/// The daemon's jobs, by id.
pub struct Jobs {
    /// Shared with each job's task, which records the job's end in it.
    table: Arc<Mutex<Table>>,
    /// Where the receipts are, for jobs no longer (or never, in this daemon's life) held here.
    ledger_path: PathBuf,
    /// Fires at shutdown; every job's own token is a child of it.
    stopping: CancellationToken,
    tasks: TaskTracker,
}

struct Table {
    jobs: BTreeMap<String, Job>,
    limits: JobLimits,
}

struct Job {
    agent: String,
    surface: String,
    command: String,
    started: Instant,
    cancel: CancellationToken,
    /// Who stopped it, once someone did (`job_cancel`, `shutdown`).
    cancelled_by: Option<&'static str>,
    output_bytes: Arc<AtomicU64>,
    /// The start call's `return`, for a `result` call that gives none.
    budget: Option<ReturnBudget>,
    result_fields: &'static [&'static str],
    end: Option<Ended>,
    /// Turns true when the job has ended and its result receipt is written.
    ended: watch::Receiver<bool>,
}

struct Ended {
    at: Instant,
    elapsed: Duration,
    status: JobStatus,
    outcome: Result<Outcome, ToolError>,
}

impl Job {
    fn status(&self) -> JobStatus {
        self.end
            .as_ref()
            .map_or(JobStatus::Running, |end| end.status)
    }

    fn view(&self, id: &str) -> Value {
        let elapsed = self
            .end
            .as_ref()
            .map_or_else(|| self.started.elapsed(), |end| end.elapsed);
        json!({
            "job": id,
            "surface": self.surface,
            "command": self.command,
            "status": self.status(),
            "elapsed_ms": elapsed.as_millis() as u64,
            "output_bytes": self.output_bytes.load(Ordering::Relaxed),
        })
    }
}

/// What the receipts say of a job this daemon no longer holds.
struct Recorded {
    surface: String,
    command: String,
    status: JobStatus,
}

impl Jobs {
    pub fn new(ledger_path: PathBuf) -> Jobs {
        Jobs {
            table: Arc::new(Mutex::new(Table {
                jobs: BTreeMap::new(),
                limits: JobLimits::default(),
            })),
            ledger_path,
            stopping: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    pub fn set_limits(&self, limits: JobLimits) {
        let mut table = self.lock();
        table.limits = limits;
        table.prune();
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        lock(&self.table)
    }

    fn table_handle(&self) -> Arc<Mutex<Table>> {
        self.table.clone()
    }

    /// Refuses `detach` where it is not honoured (saying where it is), and past the agent's
    /// `[jobs] max_running`.
    pub fn check_detach(&self, call: &ComputerCall, caller: &Caller) -> Result<(), ToolError> {
        if !call.complications.detach {
            return Ok(());
        }
        detach_honoured(call)?;
        let mut table = self.lock();
        table.prune();
        table.refuse_over_limit(&caller.agent)
    }

    /// Starts a detached action whose intent receipt is written, and answers at once with the
    /// job's id. The job gets its own cancellation (the call's is left behind) and its own
    /// output meter.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start(
        &self,
        state: Arc<DaemonState>,
        caller: &Caller,
        open: Open,
        early: &Early,
        action: Box<dyn PreparedAction>,
        mut ctx: CallContext,
        budget: Option<ReturnBudget>,
        result_fields: &'static [&'static str],
    ) -> CallToolResult {
        let id = ctx.call_id.clone();
        let cancel = self.stopping.child_token();
        let meter = Arc::new(AtomicU64::new(0));
        ctx.cancel = cancel.clone();
        ctx.output_bytes = meter.clone();
        let (ended_tx, ended) = watch::channel(false);
        let refused = {
            let mut table = self.lock();
            table.prune();
            // Checked again here, under the same lock as the insert: calls that passed
            // `check_detach` together must not run past the limit together.
            let over = table.refuse_over_limit(&caller.agent);
            if over.is_ok() {
                table.jobs.insert(
                    id.clone(),
                    Job {
                        agent: caller.agent.clone(),
                        surface: early.surface.clone(),
                        command: early.command.clone(),
                        started: Instant::now(),
                        cancel: cancel.clone(),
                        cancelled_by: None,
                        output_bytes: meter,
                        budget,
                        result_fields,
                        end: None,
                        ended,
                    },
                );
            }
            over.err()
        };
        if let Some(error) = refused {
            let body = json!({"ok": false, "error": error});
            return open.finish(body, error_result(&id, &error)).await;
        }
        tracing::info!(job = %id, agent = %caller.agent, surface = %early.surface, command = %early.command, "job started");
        let job_id = id.clone();
        let stopping = self.stopping.clone();
        let table = self.table_handle();
        self.tasks.spawn(async move {
            let started = Instant::now();
            let secrets = ctx.secrets.clone();
            let outcome = run_until_cancelled(action, ctx, &cancel).await;
            let outcome = crate::record::secrets::mask_outcome(&secrets, outcome);
            let cancelled_by = {
                let table = lock(&table);
                table.jobs.get(&job_id).and_then(|job| job.cancelled_by)
            }
            .or_else(|| stopping.is_cancelled().then_some("shutdown"));
            let (status, mut body, kept) = match outcome {
                Ok(outcome) => {
                    let status = match (cancelled_by, outcome.success) {
                        (Some(_), _) => JobStatus::Cancelled,
                        (None, true) => JobStatus::Done,
                        (None, false) => JobStatus::Failed,
                    };
                    let budget = Budget::from_request(None, result_fields)
                        .expect("the default budget is valid");
                    let (_, body) = state.success_reply(&job_id, &budget, outcome.clone());
                    (status, body, Ok(outcome))
                }
                Err(err) => {
                    // Mapped as every call's failure is.
                    let reports_effect = crate::call::budget::reports_effect(result_fields);
                    let (error, body) = failure_body(&job_id, err, reports_effect);
                    let status = if cancelled_by.is_some() {
                        JobStatus::Cancelled
                    } else {
                        JobStatus::Failed
                    };
                    (status, body, Err(error))
                }
            };
            let elapsed = started.elapsed();
            body["job"] = json!({"status": status, "elapsed_ms": elapsed.as_millis() as u64});
            if let Some(by) = cancelled_by {
                body["ok"] = json!(false);
                body["cancelled"] = json!({"by": by});
            }
            // The result receipt first: once `status` says the job ended, its receipt exists.
            if let Err(err) = open.close(body).await {
                tracing::error!(job = %job_id, error = %err, "the job's result receipt could not be written");
            }
            {
                let mut table = lock(&table);
                if let Some(job) = table.jobs.get_mut(&job_id) {
                    job.end = Some(Ended {
                        at: Instant::now(),
                        elapsed,
                        status,
                        outcome: kept,
                    });
                }
                table.prune();
            }
            let _ = ended_tx.send(true);
            tracing::info!(job = %job_id, ?status, "job ended");
        });
        reply(
            Some(&id),
            true,
            Map::from_iter([
                ("job".to_string(), json!(id)),
                ("status".to_string(), json!(JobStatus::Running)),
            ]),
        )
    }

    /// Stops every job (daemon shutdown) and waits, at most `grace`, for their result receipts.
    pub async fn stop_all(&self, grace: Duration) {
        self.stopping.cancel();
        self.tasks.close();
        let running = self.tasks.len();
        if running == 0 {
            return;
        }
        tracing::info!(running, "stopping detached jobs");
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.tasks.len(),
                "jobs did not end within the grace period (their receipts will read interrupted)"
            );
        }
    }

    /// Serves one `job` call: decodes it, writes its intent, does the op, writes its result.
    pub(crate) async fn command(
        &self,
        state: &DaemonState,
        scope: CallScope<'_>,
        early: Early,
        call: &ComputerCall,
    ) -> CallToolResult {
        let (call_id, caller) = (scope.id, scope.caller);
        let args: JobArgs = match decode_args(&call.args) {
            Ok(args) => args,
            Err(error) => return state.refuse(call_id, caller, early, error.into()).await,
        };
        if let Err(error) = check_job_call(call, &args) {
            return state.refuse(call_id, caller, early, error.into()).await;
        }
        let intent = json!({
            "caller": caller,
            "args": receipt_value(&early.args),
            "args_sha256": digest(&early.args),
            "action": format!("job {}", args.op.as_str()),
            "risk": Risk::Observe,
            "policy": decision(),
        });
        let open = match state.write_intent(call_id, &early, intent).await {
            Ok(open) => open,
            Err(error) => return unreceipted_error(&error),
        };
        let (reply, body) = match self.serve(state, scope, call, &args).await {
            Ok((reply, body)) => (reply, body),
            Err(error) => (
                error_result(call_id, &error),
                json!({"ok": false, "error": error}),
            ),
        };
        open.finish(body, reply).await
    }

    /// The op itself: the reply and the result receipt's body.
    async fn serve(
        &self,
        state: &DaemonState,
        scope: CallScope<'_>,
        call: &ComputerCall,
        args: &JobArgs,
    ) -> Result<(CallToolResult, Value), ToolError> {
        let call_id = scope.id;
        let agent = scope.caller.agent.as_str();
        let id = match (args.op, args.id.as_deref()) {
            (JobOp::List, _) => {
                let jobs = self.list(agent);
                let body = json!({"ok": true, "op": "list", "jobs": jobs.len()});
                let fields = Map::from_iter([("jobs".to_string(), json!(jobs))]);
                return Ok((reply(Some(call_id), true, fields), body));
            }
            (_, Some(id)) => id,
            (op, None) => {
                return Err(ToolError::invalid(format!(
                    "job {} needs the job's id (the receipt its detached call answered with)",
                    op.as_str()
                ))
                .at("args.id")
                .valid(self.ids_of(agent)));
            }
        };
        match args.op {
            JobOp::List => unreachable!("answered above"),
            JobOp::Status => {
                let view = self.status_of(id, agent).await?;
                Ok(view_reply(call_id, "status", view))
            }
            JobOp::Cancel => self.cancel(call_id, id, agent).await,
            JobOp::Result => {
                let wait = Duration::from_millis(args.wait_ms.unwrap_or(0));
                self.wait_for_end(id, agent, wait, scope.cancelled, scope.progress)
                    .await?;
                self.result(state, call_id, id, agent, call).await
            }
        }
    }

    /// The agent's jobs held here, newest first.
    fn list(&self, agent: &str) -> Vec<Value> {
        let mut table = self.lock();
        table.prune();
        table
            .jobs
            .iter()
            .rev()
            .filter(|(_, job)| job.agent == agent)
            .map(|(id, job)| job.view(id))
            .collect()
    }

    /// The ids of the agent's jobs held here, newest first (for errors' valid choices).
    fn ids_of(&self, agent: &str) -> Vec<String> {
        let table = self.lock();
        table
            .jobs
            .iter()
            .rev()
            .filter(|(_, job)| job.agent == agent)
            .map(|(id, _)| id.clone())
            .take(LISTED_IDS)
            .collect()
    }

    /// A job of `agent` that is neither held here nor in the receipts: not found, with the ids
    /// that would be found and how to list them. Another agent's job reads the same.
    fn not_found(&self, id: &str, agent: &str) -> ToolError {
        let shown: String = id.chars().take(64).collect();
        ToolError::invalid(format!(
            "no job `{shown}` of agent `{agent}`; job ids are the receipts detached calls answered with; list yours with {{\"command\": \"job\", \"args\": {{\"op\": \"list\"}}}}"
        ))
        .at("args.id")
        .valid(self.ids_of(agent))
    }

    async fn status_of(&self, id: &str, agent: &str) -> Result<Value, ToolError> {
        {
            let mut table = self.lock();
            table.prune();
            if let Some(job) = table.jobs.get(id).filter(|job| job.agent == agent) {
                return Ok(job.view(id));
            }
        }
        let recorded = self.recorded(id, agent).await?;
        Ok(json!({
            "job": id,
            "surface": recorded.surface,
            "command": recorded.command,
            "status": recorded.status,
            "kept": false,
        }))
    }

    /// What the receipts say of a job no longer held here (ended and expired, or from a daemon
    /// that died): found only if `agent` started it with `detach`.
    async fn recorded(&self, id: &str, agent: &str) -> Result<Recorded, ToolError> {
        let path = self.ledger_path.clone();
        let call_id = id.to_string();
        let rows = tokio::task::spawn_blocking(move || {
            let conn = crate::record::receipts::open_ro(&path)?;
            crate::record::receipts::list(
                &conn,
                &path,
                &crate::record::receipts::ListFilter {
                    call_id: Some(call_id),
                    ..Default::default()
                },
            )
        })
        .await
        .map_err(|err| ToolError::new(ErrorCode::ActionFailed, err.to_string()))?
        .map_err(|err| {
            ToolError::new(
                ErrorCode::ActionFailed,
                format!("reading the job's receipts failed: {err}"),
            )
        })?;
        let intent = rows.iter().find(|row| {
            row.kind == "intent"
                && row.body["caller"]["agent"] == agent
                && row.body["args"]["complications"]["detach"] == true
        });
        let Some(intent) = intent else {
            return Err(self.not_found(id, agent));
        };
        let result = rows.iter().find(|row| row.kind == "result");
        let status = match result {
            // An intent without a result belongs to a job still starting or ending right now.
            None => JobStatus::Running,
            Some(row) if row.body["outcome"] == "interrupted" => JobStatus::Interrupted,
            // A job's own result says how it ended; a result without it is a detached call
            // refused before it started (over `max_running`), which never was a job.
            Some(row) => serde_json::from_value(row.body["job"]["status"].clone())
                .map_err(|_| self.not_found(id, agent))?,
        };
        Ok(Recorded {
            surface: intent.surface.clone(),
            command: intent.command.clone(),
            status,
        })
    }

    async fn cancel(
        &self,
        call_id: &str,
        id: &str,
        agent: &str,
    ) -> Result<(CallToolResult, Value), ToolError> {
        let held = {
            let mut table = self.lock();
            match table.jobs.get_mut(id).filter(|job| job.agent == agent) {
                Some(job) if job.end.is_none() => {
                    job.cancelled_by.get_or_insert("job_cancel");
                    job.cancel.cancel();
                    Some(Ok(job.ended.clone()))
                }
                Some(job) => Some(Err(job.status())),
                None => None,
            }
        };
        let status = match held {
            Some(Ok(ended)) => Ok(ended),
            Some(Err(status)) => Err(status),
            None => Err(self.recorded(id, agent).await?.status),
        };
        let mut ended = status.map_err(|status| {
            ToolError::invalid(format!(
                "job `{id}` is not running ({}); nothing to cancel; read it with op result",
                json!(status).as_str().unwrap_or_default()
            ))
            .at("args.id")
        })?;
        // Answer once the job has ended, so the reply can say what was stopped.
        let _ = tokio::time::timeout(CANCEL_WAIT, ended.wait_for(|done| *done)).await;
        let mut view = self.status_of(id, agent).await?;
        let killed = {
            let table = self.lock();
            table
                .jobs
                .get(id)
                .and_then(|job| job.end.as_ref())
                .and_then(|end| end.outcome.as_ref().ok())
                .and_then(|outcome| outcome.receipt.get("killed_processes").cloned())
        };
        if let Some(killed) = killed {
            view["killed_processes"] = killed;
        }
        Ok(view_reply(call_id, "cancel", view))
    }

    /// Waits, at most `wait`, for a running job to end, telling the client how it goes.
    async fn wait_for_end(
        &self,
        id: &str,
        agent: &str,
        wait: Duration,
        cancelled: &CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<(), ToolError> {
        if wait.is_zero() {
            return Ok(());
        }
        let mut ended = {
            let table = self.lock();
            match table.jobs.get(id).filter(|job| job.agent == agent) {
                Some(job) if job.end.is_none() => job.ended.clone(),
                _ => return Ok(()),
            }
        };
        let deadline = tokio::time::Instant::now() + wait;
        // Often enough that hosts whose timeout progress resets keep waiting.
        let every = (wait / 10).clamp(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            if let Some(view) = self.view_of(id) {
                progress(format!(
                    "job {id} running: {} s, {} bytes of output",
                    view["elapsed_ms"].as_u64().unwrap_or(0) / 1000,
                    view["output_bytes"]
                ));
            }
            let next = (tokio::time::Instant::now() + every).min(deadline);
            tokio::select! {
                _ = ended.wait_for(|done| *done) => return Ok(()),
                _ = cancelled.cancelled() => return Ok(()),
                _ = tokio::time::sleep_until(next) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(());
            }
        }
    }

    fn view_of(&self, id: &str) -> Option<Value> {
        let table = self.lock();
        table.jobs.get(id).map(|job| job.view(id))
    }

    /// A finished job's result through this call's budget (else the start call's), like the
    /// reply the call would have had; a running job's status; an expired one's why.
    async fn result(
        &self,
        state: &DaemonState,
        call_id: &str,
        id: &str,
        agent: &str,
        call: &ComputerCall,
    ) -> Result<(CallToolResult, Value), ToolError> {
        let held = {
            let mut table = self.lock();
            table.prune();
            table
                .jobs
                .get(id)
                .filter(|job| job.agent == agent)
                .map(|job| {
                    let end = job
                        .end
                        .as_ref()
                        .map(|end| (end.status, end.outcome.clone()));
                    (job.view(id), end, job.budget.clone(), job.result_fields)
                })
        };
        let Some((view, end, start_budget, fields)) = held else {
            let recorded = self.recorded(id, agent).await?;
            let limits = self.lock().limits;
            let why = match recorded.status {
                JobStatus::Interrupted => {
                    "it was interrupted: the daemon stopped while it ran, so it has no result"
                        .to_string()
                }
                _ => format!(
                    "its result expired (finished results are kept {} s, the newest {}); its result receipt `{id}` still records its outcome",
                    limits.keep_for.as_secs(),
                    limits.keep
                ),
            };
            return Err(ToolError::new(
                ErrorCode::Unavailable,
                format!(
                    "job `{id}` ({}): {why}",
                    json!(recorded.status).as_str().unwrap_or_default()
                ),
            )
            .at("args.id"));
        };
        let Some((status, outcome)) = end else {
            return Ok(view_reply(call_id, "result", view));
        };
        let request = call
            .complications
            .return_budget
            .as_ref()
            .or(start_budget.as_ref());
        let budget = Budget::from_request(request, fields)?;
        let body_of = |ok: bool| json!({"ok": ok, "op": "result", "job": id, "status": status});
        match outcome {
            Ok(outcome) => {
                let success = outcome.success && status == JobStatus::Done;
                let (mut reply, _) = state.success_reply(call_id, &budget, outcome);
                add_fields(&mut reply, &[("job", json!(id)), ("status", json!(status))]);
                Ok((reply, body_of(success)))
            }
            Err(error) => {
                let mut reply = error_result(call_id, &error);
                add_fields(&mut reply, &[("job", json!(id)), ("status", json!(status))]);
                Ok((reply, body_of(false)))
            }
        }
    }
}

/// Refuses `detach` where it is not honoured, saying where it is (what needs no job table:
/// `policy explain` says it too).
pub fn detach_honoured(call: &ComputerCall) -> Result<(), ToolError> {
    if !call.complications.detach {
        return Ok(());
    }
    let valid = DETACHABLE.iter().map(|(s, c)| format!("{s} {c}"));
    if !DETACHABLE.contains(&(call.surface, call.command.as_str())) {
        return Err(ToolError::new(
            ErrorCode::Unavailable,
            format!(
                "`detach` is not honoured by {} {}: it runs within the call; detach works for {}",
                call.surface,
                call.command,
                valid.clone().collect::<Vec<_>>().join(", ")
            ),
        )
        .at("complications.detach")
        .valid(valid));
    }
    if call.complications.evidence.is_some() {
        return Err(ToolError::invalid(
            "`evidence` cannot be combined with `detach`: nobody is there to see the screen when the job ends; take a gui screenshot after `job result`",
        )
        .at("complications.evidence"));
    }
    Ok(())
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // Every update of the table is a single step; a panicked holder leaves it consistent.
    table
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a `job` call's intent records as its decision: it decides nothing new.
pub fn decision() -> Decision {
    Decision::Allow {
        rule: "job: the caller's own jobs".into(),
    }
}

impl Table {
    /// Refuses a new job of `agent` when it has `max_running` running already.
    fn refuse_over_limit(&self, agent: &str) -> Result<(), ToolError> {
        let running: Vec<&String> = self
            .jobs
            .iter()
            .filter(|(_, job)| job.agent == agent && job.end.is_none())
            .map(|(id, _)| id)
            .collect();
        if running.len() < self.limits.max_running {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::RateLimited,
            format!(
                "agent `{agent}` has {} detached jobs running, the most `[jobs] max_running` allows; wait for one to end or cancel one",
                running.len()
            ),
        )
        .at("complications.detach")
        .valid(running.into_iter().rev().take(LISTED_IDS).cloned()))
    }

    /// Drops finished jobs past their time, then the oldest past the count.
    fn prune(&mut self) {
        let keep_for = self.limits.keep_for;
        self.jobs.retain(|_, job| {
            job.end
                .as_ref()
                .is_none_or(|end| end.at.elapsed() < keep_for)
        });
        let finished: Vec<(Instant, String)> = self
            .jobs
            .iter()
            .filter_map(|(id, job)| job.end.as_ref().map(|end| (end.at, id.clone())))
            .collect();
        if finished.len() > self.limits.keep {
            let mut finished = finished;
            finished.sort();
            let over = finished.len() - self.limits.keep;
            for (_, id) in finished.into_iter().take(over) {
                self.jobs.remove(&id);
            }
        }
    }
}

/// Checks what a `job` call may carry: `wait_ms` only on result, within [`MAX_WAIT`]; of the
/// complications only `return`.
fn check_job_call(call: &ComputerCall, args: &JobArgs) -> Result<(), ToolError> {
    if let Some(wait) = args.wait_ms {
        if args.op != JobOp::Result {
            return Err(ToolError::invalid("wait_ms applies to op result only")
                .at("args.wait_ms")
                .valid(["result"]));
        }
        if Duration::from_millis(wait) > MAX_WAIT {
            return Err(ToolError::invalid(format!(
                "wait_ms {wait} is over the maximum of {} ms; call again to wait longer",
                MAX_WAIT.as_millis()
            ))
            .at("args.wait_ms"));
        }
    }
    let mut given = call.clone();
    given.complications.return_budget = None;
    if given.complications != computer_ipc::Complications::default() {
        return Err(ToolError::invalid(
            "the job command takes no complications but `return` (for op result)",
        )
        .at("complications")
        .valid(["return"]));
    }
    Ok(())
}

fn view_reply(call_id: &str, op: &str, view: Value) -> (CallToolResult, Value) {
    let mut body = json!({"ok": true, "op": op});
    for key in ["job", "status"] {
        body[key] = view[key].clone();
    }
    let fields = match view {
        Value::Object(fields) => fields,
        other => Map::from_iter([("view".to_string(), other)]),
    };
    (reply(Some(call_id), true, fields), body)
}

/// Adds fields to a result's structured content, keeping its text rendering in step.
fn add_fields(result: &mut CallToolResult, fields: &[(&str, Value)]) {
    for (key, value) in fields {
        attach_field(result, key, value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computer_ipc::SurfaceName;

    fn finished(table: &mut Table, id: &str, ago: Duration) {
        let (_, ended) = watch::channel(true);
        table.jobs.insert(
            id.into(),
            Job {
                agent: "a".into(),
                surface: "shell".into(),
                command: "run".into(),
                started: Instant::now(),
                cancel: CancellationToken::new(),
                cancelled_by: None,
                output_bytes: Arc::default(),
                budget: None,
                result_fields: &[],
                end: Some(Ended {
                    at: Instant::now() - ago,
                    elapsed: Duration::ZERO,
                    status: JobStatus::Done,
                    outcome: Ok(Outcome::default()),
                }),
                ended,
            },
        );
    }

    #[test]
    fn finished_jobs_are_kept_for_a_time_and_a_count() {
        let mut table = Table {
            jobs: BTreeMap::new(),
            limits: JobLimits {
                max_running: 1,
                keep: 2,
                keep_for: Duration::from_secs(60),
            },
        };
        finished(&mut table, "old", Duration::from_secs(120));
        finished(&mut table, "a", Duration::from_secs(30));
        finished(&mut table, "b", Duration::from_secs(20));
        finished(&mut table, "c", Duration::from_secs(10));
        table.prune();
        let kept: Vec<&str> = table.jobs.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            ["b", "c"],
            "past its time, then the oldest over the count"
        );
    }

    #[test]
    fn detach_is_refused_where_it_is_not_honoured() {
        let mut call = ComputerCall::new(SurfaceName::Gui, "click");
        call.complications.detach = true;
        let jobs = Jobs::new(PathBuf::from("/nonexistent"));
        let caller = Caller {
            uid: 0,
            pid: None,
            agent: "a".into(),
            surfaces: None,
            observe_only: false,
        };
        let error = jobs.check_detach(&call, &caller).unwrap_err();
        assert_eq!(error.path.as_deref(), Some("complications.detach"));
        assert_eq!(error.valid, ["shell run"]);
        let mut call = ComputerCall::new(SurfaceName::Shell, "run");
        call.complications.detach = true;
        assert!(jobs.check_detach(&call, &caller).is_ok());
    }
}
