//! The Rust client: MCP over the daemon's local socket, the same path every other caller takes.

use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    Implementation, ProgressNotificationParam, ProgressToken, ServerResult, Tool,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RoleClient, RunningService, ServiceExt,
};
use serde_json::Value;

use crate::{ComputerCall, TOOL_NAME};

/// What can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "no daemon is listening on {path}: {source} (start one with `computer serve`, or set COMPUTER_SOCKET)"
    )]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the MCP handshake with the daemon failed: {0}")]
    Handshake(String),
    #[error("the daemon did not answer the request: {0}")]
    Request(String),
}

/// A connected client. Calls may be issued concurrently from clones of the inner peer.
pub struct Client {
    service: RunningService<RoleClient, Listener>,
}

/// What is told, in words, about a call while it runs (its wait for a person, for one).
type Progress = Box<dyn Fn(String) + Send + Sync>;

/// The client's side of the connection: its info, and whom to tell of a call's progress
/// notifications (by the call's progress token).
struct Listener {
    info: ClientConfig,
    listening: Arc<Mutex<Listening>>,
}

/// Who hears which call's progress, and what came for a call before anyone listened (the token
/// is known only once the request is sent; a few are kept for the listener that comes next).
#[derive(Default)]
struct Listening {
    by_token: HashMap<ProgressToken, Progress>,
    unclaimed: std::collections::VecDeque<(ProgressToken, String)>,
}

/// The most progress messages kept for a call nobody listens to (yet).
const UNCLAIMED_PROGRESS: usize = 16;

impl rmcp::ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(message) = params.message else {
            return;
        };
        let mut listening = self.listening.lock().unwrap_or_else(|p| p.into_inner());
        match listening.by_token.get(&params.progress_token) {
            Some(tell) => tell(message),
            None => {
                if listening.unclaimed.len() == UNCLAIMED_PROGRESS {
                    listening.unclaimed.pop_front();
                }
                listening
                    .unclaimed
                    .push_back((params.progress_token, message));
            }
        }
    }
}

impl Client {
    /// Connects to the daemon's socket and performs the MCP handshake, as the agent named by
    /// `$COMPUTER_TOKEN` when it is set (else as the `default` agent).
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let token = std::env::var("COMPUTER_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        Client::connect_as(path, token.as_deref()).await
    }

    /// Connects presenting `token` (an agent's), or none.
    pub async fn connect_as(path: &Path, token: Option<&str>) -> Result<Client, ClientError> {
        let mut stream = connect_stream(path).await?;
        if let Some(token) = token {
            use tokio::io::AsyncWriteExt;
            stream
                .write_all(&authenticate_line(token))
                .await
                .map_err(|err| ClientError::Handshake(err.to_string()))?;
        }
        let info = ClientConfig::new(
            Default::default(),
            Implementation::new("computer-client", env!("CARGO_PKG_VERSION")),
        );
        let listener = Listener {
            info,
            listening: Arc::default(),
        };
        let service = listener
            .serve(stream)
            .await
            .map_err(|err| ClientError::Handshake(err.to_string()))?;
        Ok(Client { service })
    }

    /// Connects to the socket named by the environment (see [`crate::paths::socket_path`]).
    pub async fn connect_default() -> Result<Client, ClientError> {
        Client::connect(&crate::paths::socket_path()).await
    }

    /// What the daemon said of itself when it answered the handshake (which config file it
    /// read, its pid); `None` from a daemon that does not say.
    pub fn daemon_facts(&self) -> Option<crate::control::DaemonFacts> {
        let info = self.service.peer_info()?;
        let facts = info.meta.as_ref()?.0.get(crate::control::DAEMON_META_KEY)?;
        serde_json::from_value(facts.clone()).ok()
    }

    /// The tools the daemon lists for this caller: exactly one, `COMPUTER`.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        self.service
            .list_all_tools()
            .await
            .map_err(|err| ClientError::Request(err.to_string()))
    }

    /// Runs one `COMPUTER` call and returns the MCP tool result as sent.
    pub async fn call(&self, call: &ComputerCall) -> Result<CallToolResult, ClientError> {
        self.call_raw(call.to_arguments().into()).await
    }

    /// Sends arbitrary JSON as the tool's arguments, for callers that build calls by hand (and for
    /// tests of the daemon's validation). A non-object is sent as an empty object with the value
    /// under `_`, so the daemon's own validation answers it.
    pub async fn call_raw(&self, arguments: Value) -> Result<CallToolResult, ClientError> {
        self.service
            .call_tool(params(arguments))
            .await
            .map_err(|err| ClientError::Request(err.to_string()))
    }

    /// [`Client::call_raw`], telling `progress` what the daemon says of the call while it runs
    /// (that it waits for a person, with the request's id and how to answer it).
    pub async fn call_raw_with_progress(
        &self,
        arguments: Value,
        progress: impl Fn(String) + Send + Sync + 'static,
    ) -> Result<CallToolResult, ClientError> {
        let failed = |err: rmcp::ServiceError| ClientError::Request(err.to_string());
        // rmcp gives every request a progress token of its own: the one to listen for is known
        // once the request is sent.
        let sent = self
            .service
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params(arguments))),
                PeerRequestOptions::no_options(),
            )
            .await
            .map_err(failed)?;
        let token = sent.progress_token.clone();
        let listening = self.service.service().listening.clone();
        {
            let mut listening = listening.lock().unwrap_or_else(|p| p.into_inner());
            let (early, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut listening.unclaimed)
                .into_iter()
                .partition(|(of, _)| *of == token);
            listening.unclaimed = kept.into();
            for (_, message) in early {
                progress(message);
            }
            listening.by_token.insert(token.clone(), Box::new(progress));
        }
        let result = sent.await_response().await;
        listening
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_token
            .remove(&token);
        match result.map_err(failed)? {
            ServerResult::CallToolResult(result) => Ok(result),
            other => Err(ClientError::Request(format!(
                "the daemon answered a call with something else: {other:?}"
            ))),
        }
    }

    /// Closes the connection politely.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// A `COMPUTER` call's params. A non-object is sent as an empty object with the value under
/// `_`, so the daemon's own validation answers it.
fn params(arguments: Value) -> CallToolRequestParams {
    let arguments = match arguments {
        Value::Object(map) => map,
        other => serde_json::Map::from_iter([("_".to_string(), other)]),
    };
    CallToolRequestParams::new(TOOL_NAME).with_arguments(arguments)
}

/// The first line a client sends to present an agent token (before any MCP message).
pub fn authenticate_line(token: &str) -> Vec<u8> {
    hello_line(Some(token), false)
}

/// The first line of a connection (before any MCP message): the agent's token, if any, and
/// whether the connection is to be observe-only.
pub fn hello_line(token: Option<&str>, observe_only: bool) -> Vec<u8> {
    let mut params = serde_json::Map::new();
    if let Some(token) = token {
        params.insert("token".into(), token.into());
    }
    if observe_only {
        params.insert(crate::OBSERVE_ONLY_PARAM.into(), true.into());
    }
    let message = serde_json::json!({
        "jsonrpc": "2.0",
        "method": crate::AUTHENTICATE_METHOD,
        "params": params,
    });
    let mut line = serde_json::to_vec(&message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Opens the raw local-socket stream to the daemon.
pub async fn connect_stream(path: &Path) -> Result<Stream, ClientError> {
    let connect_err = |source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    };
    let name = path.to_fs_name::<GenericFilePath>().map_err(connect_err)?;
    Stream::connect(name).await.map_err(connect_err)
}
