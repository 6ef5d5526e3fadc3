//! The MCP face of a connection: `initialize`, `tools/list` (exactly one tool) and `tools/call`
//! handed to the gateway on behalf of the connection's caller; and the tasks extension's adapter
//! (a detached call answered as a task, `tasks/get` and `tasks/cancel` as `job` calls).

use std::borrow::Cow;
use std::sync::Arc;

use computer_ipc::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    DetailedTask, GetTaskParams, GetTaskResult, Implementation, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Task,
    TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use crate::call::cancel::CallCancel;
use crate::call::gateway::Gateway;
use crate::call::jobs::JobStatus;
use crate::call::own::{DETACHABLE, JOB_COMMAND};
use crate::guard::policy::Caller;

/// Negotiated protocol revisions; see `computer_ipc::MCP_PROTOCOL_VERSIONS`.
const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

pub struct Connection {
    pub gateway: Arc<Gateway>,
    pub caller: Caller,
    /// Fires when the client is gone (its socket closed, not merely shut for sending) or its
    /// connection is closed on it (a limit, an over-long line): every call still running on it
    /// stops at once.
    pub closed: CancellationToken,
}

impl ServerHandler for Connection {
    fn get_info(&self) -> ServerConfig {
        // The tasks extension: a detached call from a client that declares it is answered as a
        // task (`jobs.rs`), followed with `tasks/get` and `tasks/cancel`.
        // Resources: none, but listed as an empty list, which hosts that ask for them on every
        // connection (Codex) take quietly where "method not found" is logged as an error.
        let mut info = InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .enable_resources()
                .build(),
        );
        // Which config this daemon read, for clients to name (`computer doctor`, the relay).
        if let Ok(facts) = serde_json::to_value(self.gateway.daemon_facts()) {
            let mut meta = rmcp::model::MetaObject::new();
            meta.0
                .insert(computer_ipc::control::DAEMON_META_KEY.into(), facts);
            info.meta = Some(meta);
        }
        info.with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("computer", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "One tool, COMPUTER: act on this desktop through structured surfaces. \
             Every call leaves a receipt; its id comes back in the result's \
             `structuredContent.receipt` and `_meta.receipt`.",
            )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(Vec::new()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(Vec::new()))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = self.gateway.tool_for(&self.caller);
        Ok(ListToolsResult::with_all_items(vec![fit_tool_to_revision(
            tool,
            context.protocol_version().as_ref(),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let revision = context.protocol_version();
        // While a call waits (for approval), the client hears why through progress
        // notifications, when it asked for them with a progress token.
        let token = context.meta.get_progress_token();
        // 2024-11-05 progress has no message: the number alone is all it can carry.
        let progress_has_message = !predates(revision.as_ref(), PROGRESS_MESSAGE_SINCE);
        let peer = context.peer.clone();
        let step = std::sync::atomic::AtomicU32::new(0);
        let progress = move |message: String| {
            let Some(token) = token.clone() else { return };
            let n = step.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut param = ProgressNotificationParam::new(token, f64::from(n));
            if progress_has_message {
                param.message = Some(message);
            }
            let peer = peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_progress(param).await;
            });
        };
        let as_task = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks())
            && asks_detach(request.arguments.as_ref());
        let result = self
            .gateway
            .handle(
                &self.caller,
                &request.name,
                request.arguments,
                CallCancel {
                    request: context.ct.clone(),
                    connection: self.closed.clone(),
                },
                &progress,
            )
            .await;
        if as_task && let Some(task) = task_created(&result) {
            return Ok(CallToolResponse::Task(task));
        }
        Ok(fit_result_to_revision(result, revision.as_ref()).into())
    }

    /// `tasks/get`: the job's `result` through the one path (so receipted), as a task's state.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let result = self.job_call("result", &request.task_id, &context).await;
        task_state(&request.task_id, result).map(GetTaskResult::new)
    }

    /// `tasks/cancel`: the job's `cancel` through the one path.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let result = self.job_call("cancel", &request.task_id, &context).await;
        task_state(&request.task_id, result).map(|_| ())
    }
}

impl Connection {
    /// A `job` call made on the client's behalf for a tasks request.
    async fn job_call(
        &self,
        op: &str,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        self.gateway
            .handle(
                &self.caller,
                computer_ipc::TOOL_NAME,
                Some(job_arguments(op, id)),
                CallCancel {
                    request: context.ct.clone(),
                    connection: self.closed.clone(),
                },
                &|_| {},
            )
            .await
    }
}

/// First revision whose tools carry `title` and `outputSchema`, and whose results carry
/// `structuredContent`.
const STRUCTURED_CONTENT_SINCE: &str = "2025-06-18";
/// First revision whose tools carry `annotations`.
const TOOL_ANNOTATIONS_SINCE: &str = "2025-03-26";
/// First revision whose progress notifications carry a `message`.
const PROGRESS_MESSAGE_SINCE: &str = "2025-03-26";

/// Whether the negotiated revision predates `since` (dated revisions compare as strings). A
/// connection that negotiated nothing is served as the newest.
fn predates(revision: Option<&ProtocolVersion>, since: &str) -> bool {
    revision.is_some_and(|v| v.as_str() < since)
}

/// The tool as the negotiated revision defines it: fields a revision does not know are left
/// out rather than sent for the client to trip on.
fn fit_tool_to_revision(mut tool: Tool, revision: Option<&ProtocolVersion>) -> Tool {
    if predates(revision, STRUCTURED_CONTENT_SINCE) {
        tool.title = None;
        tool.output_schema = None;
    }
    if predates(revision, TOOL_ANNOTATIONS_SINCE) {
        tool.annotations = None;
    }
    tool
}

/// A result as the negotiated revision defines it: before `structuredContent` existed, the
/// text content (which always carries the same JSON) is the whole answer.
fn fit_result_to_revision(
    mut result: CallToolResult,
    revision: Option<&ProtocolVersion>,
) -> CallToolResult {
    if predates(revision, STRUCTURED_CONTENT_SINCE) {
        result.structured_content = None;
    }
    result
}

/// Whether a call's arguments ask for `detach` (a tasks client then gets a task).
fn asks_detach(arguments: Option<&serde_json::Map<String, Value>>) -> bool {
    arguments.is_some_and(|args| {
        args.get("complications").and_then(|c| c.get("detach")) == Some(&json!(true))
    })
}

/// The arguments of a `job` call for a tasks request (`op` on job `id`).
fn job_arguments(op: &str, id: &str) -> serde_json::Map<String, Value> {
    let call = json!({
        "surface": DETACHABLE[0].0,
        "command": JOB_COMMAND,
        "args": {"op": op, "id": id},
    });
    match call {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// The task a started job is, for a client that declared the tasks extension; `None` when the
/// call did not start a job (refused, denied...): that reply goes back as it is.
fn task_created(result: &CallToolResult) -> Option<CreateTaskResult> {
    let reply = result.structured_content.as_ref()?;
    let id = reply.get("job")?.as_str()?;
    (reply["status"] == json!(JobStatus::Running)).then(|| {
        let now = rmcp::task_manager::current_timestamp();
        let task = Task::new(id, TaskStatus::Working, now.clone(), now)
            .with_poll_interval_ms(rmcp::task_manager::DEFAULT_POLL_INTERVAL_MS);
        CreateTaskResult::new(task)
    })
}

/// A `job result` (or `cancel`) reply as a task's state: running is working, done and failed are
/// completed with the run's reply, cancelled is cancelled, an interrupted or expired job failed;
/// a job the caller has not is an invalid-params error, as for any unknown task.
fn task_state(id: &str, result: CallToolResult) -> Result<DetailedTask, ErrorData> {
    let reply = result.structured_content.clone().unwrap_or_default();
    let elapsed = chrono::Duration::milliseconds(reply["elapsed_ms"].as_i64().unwrap_or(0));
    let created = (chrono::Utc::now() - elapsed).to_rfc3339();
    let now = rmcp::task_manager::current_timestamp();
    let task = Task::new(id, TaskStatus::Working, created, now)
        .with_poll_interval_ms(rmcp::task_manager::DEFAULT_POLL_INTERVAL_MS);
    let status = serde_json::from_value::<JobStatus>(reply["status"].clone()).ok();
    let payload = match status {
        Some(JobStatus::Running) => {
            let message = format!(
                "running: {} s, {} bytes of output",
                reply["elapsed_ms"].as_u64().unwrap_or(0) / 1000,
                reply["output_bytes"]
            );
            return Ok(DetailedTask::new(
                task.with_status_message(message),
                TaskPayload::Working,
            ));
        }
        Some(JobStatus::Done | JobStatus::Failed) => match serde_json::to_value(&result) {
            Ok(Value::Object(result)) => TaskPayload::Completed { result },
            _ => {
                return Err(ErrorData::internal_error(
                    "the job's result would not serialise",
                    None,
                ));
            }
        },
        Some(JobStatus::Cancelled) => TaskPayload::Cancelled,
        Some(JobStatus::Interrupted) | None => {
            let error = &reply["error"];
            let message = error["message"].as_str().unwrap_or("the job has no result");
            if error["code"] == json!(ErrorCode::InvalidCall) {
                return Err(ErrorData::invalid_params(message.to_string(), None));
            }
            let mut failure = serde_json::Map::new();
            failure.insert(
                "code".into(),
                json!(ErrorData::internal_error("", None).code),
            );
            failure.insert("message".into(), json!(message));
            TaskPayload::Failed { error: failure }
        }
    };
    Ok(DetailedTask::new(task, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_versions_match_the_ipc_contract() {
        let ours: Vec<&str> = PROTOCOL_VERSIONS.iter().map(|v| v.as_str()).collect();
        assert_eq!(ours, computer_ipc::MCP_PROTOCOL_VERSIONS);
    }
}
