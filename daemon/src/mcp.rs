//! The MCP face of a connection: `initialize`, `tools/list` (exactly one tool) and `tools/call`
//! handed to the gateway on behalf of the connection's caller.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use tokio_util::sync::CancellationToken;

use crate::cancel::CallCancel;
use crate::gateway::Gateway;
use crate::policy::Caller;

/// Negotiated protocol revisions; see `computer_ipc::MCP_PROTOCOL_VERSIONS`.
const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
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
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("computer", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "One tool, COMPUTER: act on this desktop through structured surfaces. \
                 Every call leaves a receipt; its id comes back in `receipt`.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            self.gateway.tool_for(&self.caller),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // While a call waits (for approval), the client hears why through progress
        // notifications, when it asked for them with a progress token.
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let step = std::sync::atomic::AtomicU32::new(0);
        let progress = move |message: String| {
            let Some(token) = token.clone() else { return };
            let n = step.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut param = ProgressNotificationParam::new(token, f64::from(n));
            param.message = Some(message);
            let peer = peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_progress(param).await;
            });
        };
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
        Ok(result.into())
    }
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
