//! The MCP transport on the daemon's socket: newline-delimited JSON-RPC with a hard cap on a
//! request's size. Unlike a plain line codec, it answers what it cannot parse (JSON-RPC's parse
//! and invalid-request errors) and closes the connection on an over-long line without buffering it.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Frames queued for the writer task before `send` waits.
const WRITE_QUEUE: usize = 64;

pub struct LineTransport<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// Frames go to one writer task so that an error answered from `receive` (which rmcp may
    /// cancel at any await) never interleaves with a response being written.
    frames: mpsc::Sender<Vec<u8>>,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W, max_line: usize) -> Self {
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_frames(write, queue));
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            frames,
            closed: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// Reads one line into `self.line` without letting it grow past `max_line`. Cancel-safe: a
    /// partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(LineRead::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.line.len() + take > self.max_line + 1 {
                return Ok(LineRead::TooLong);
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return Ok(LineRead::Line);
            }
        }
    }

    /// Queues an error frame without waiting (so `receive` stays cancel-safe).
    fn answer_error(&self, id: Value, code: i64, message: String) {
        let frame = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let _ = self.frames.try_send(frame_bytes(&frame));
    }
}

fn frame_bytes<T: serde::Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

async fn write_frames<W: AsyncWrite + Unpin>(mut write: W, mut queue: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = queue.recv().await {
        if write.write_all(&frame).await.is_err() {
            return;
        }
        // Batch what is already queued into one flush.
        while let Ok(more) = queue.try_recv() {
            if write.write_all(&more).await.is_err() {
                return;
            }
        }
        if write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let frames = self.frames.clone();
        let frame = frame_bytes(&item);
        async move {
            frames.send(frame).await.map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "connection closed")
            })
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        loop {
            match self.read_line().await {
                Ok(LineRead::Line) => {}
                Ok(LineRead::Eof) => return None,
                Ok(LineRead::TooLong) => {
                    tracing::warn!(limit = self.max_line, "request over the size limit; closing the connection");
                    self.answer_error(
                        Value::Null,
                        -32600,
                        format!(
                            "request larger than this daemon's limit of {} bytes; the connection is closed",
                            self.max_line
                        ),
                    );
                    self.closed.store(true, std::sync::atomic::Ordering::Release);
                    return None;
                }
                Err(err) => {
                    tracing::debug!(error = %err, "connection read failed");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = trim_line(&line);
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
                Ok(message) => return Some(message),
                Err(err) => {
                    // Not a message we understand. Answer with the request's id when there is one,
                    // so a client waiting on it is not left hanging.
                    let parsed = serde_json::from_slice::<Value>(text);
                    let (id, code, message) = match parsed {
                        Err(syntax) => (Value::Null, -32700, format!("parse error: not valid JSON: {syntax}")),
                        Ok(value) => {
                            let id = value.get("id").cloned().unwrap_or(Value::Null);
                            (id, -32600, format!("invalid request: {err}"))
                        }
                    };
                    // A notification (no id) gets no answer, as JSON-RPC says.
                    if code == -32700 || !id.is_null() {
                        self.answer_error(id, code, message);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    let mut start = 0;
    while start < end && matches!(line[start], b' ' | b'\t') {
        start += 1;
    }
    &line[start..end]
}
