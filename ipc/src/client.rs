//! The Rust client: MCP over the daemon's local socket, the same path every other caller takes.

use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, Implementation, Tool};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
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
    service: RunningService<RoleClient, ClientConfig>,
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
        let service = info
            .serve(stream)
            .await
            .map_err(|err| ClientError::Handshake(err.to_string()))?;
        Ok(Client { service })
    }

    /// Connects to the socket named by the environment (see [`crate::paths::socket_path`]).
    pub async fn connect_default() -> Result<Client, ClientError> {
        Client::connect(&crate::paths::socket_path()).await
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
        let arguments = match arguments {
            Value::Object(map) => map,
            other => serde_json::Map::from_iter([("_".to_string(), other)]),
        };
        self.service
            .call_tool(CallToolRequestParams::new(TOOL_NAME).with_arguments(arguments))
            .await
            .map_err(|err| ClientError::Request(err.to_string()))
    }

    /// Closes the connection politely.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The first line a client sends to present an agent token (before any MCP message).
pub fn authenticate_line(token: &str) -> Vec<u8> {
    let message = serde_json::json!({
        "jsonrpc": "2.0",
        "method": crate::AUTHENTICATE_METHOD,
        "params": {"token": token},
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
