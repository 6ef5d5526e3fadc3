//! The MCP transport on the daemon's socket: newline-delimited JSON-RPC with a hard cap on a
//! request's size. Unlike a plain line codec, it answers what it cannot parse (JSON-RPC's parse
//! and invalid-request errors) and closes the connection on an over-long line without buffering it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};

/// Frames queued for the writer task before `send` waits.
const WRITE_QUEUE: usize = 64;

/// Requests received and not yet answered on the wire, across all connections. Shutdown waits for
/// this to reach zero, so an in-flight call's reply is written before the daemon exits.
#[derive(Default)]
pub struct Unanswered {
    count: AtomicUsize,
    zero: Notify,
}

impl Unanswered {
    fn add(&self, n: usize) {
        self.count.fetch_add(n, Ordering::AcqRel);
    }

    fn sub(&self, n: usize) {
        if n > 0 && self.count.fetch_sub(n, Ordering::AcqRel) == n {
            self.zero.notify_waiters();
        }
    }

    pub fn get(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Resolves once every received request has been answered (or its connection is gone).
    pub async fn drained(&self) {
        loop {
            let notified = self.zero.notified();
            if self.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

struct Frame {
    bytes: Vec<u8>,
    /// True for a response or error to a request: writing it answers one request.
    answers: bool,
    /// The last frame: after it the writer shuts the write side down.
    last: bool,
}

/// After refusing an over-long request, how long the rest of it is read and dropped before the
/// connection closes. Closing a socket with unread input makes the peer's kernel discard what we
/// sent (a reset), so the refusal would never be read.
const DISCARD_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

pub struct LineTransport<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// Frames go to one writer task so that an error answered from `receive` (which rmcp may
    /// cancel at any await) never interleaves with a response being written.
    frames: mpsc::Sender<Frame>,
    closed: Arc<AtomicBool>,
    unanswered: Arc<Unanswered>,
    /// This connection's share of `unanswered`, settled by the writer when it ends.
    open_requests: Arc<AtomicUsize>,
    /// What the look for an authentication message found, when it was not one: a whole line
    /// already in `line`, or an over-long one. `receive` handles it first.
    early: Option<LineRead>,
}

/// The optional first message of a connection, naming the agent by its token:
/// `{"jsonrpc":"2.0","method":"computer/authenticate","params":{"token":"ct_..."}}`.
pub const AUTHENTICATE_METHOD: &str = "computer/authenticate";

enum LineRead {
    Line,
    TooLong,
    Eof,
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    /// Builds the transport and its writer task; the returned handle ends once every queued frame
    /// has been written (or the peer is gone).
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        write: W,
        max_line: usize,
        unanswered: Arc<Unanswered>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let open_requests = Arc::new(AtomicUsize::new(0));
        let writer = tokio::spawn(write_frames(
            write,
            queue,
            unanswered.clone(),
            open_requests.clone(),
        ));
        let transport = LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            frames,
            closed: Arc::new(AtomicBool::new(false)),
            unanswered,
            open_requests,
            early: None,
        };
        (transport, writer)
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

    /// Reads the connection's first line: an authentication message yields its token (and is
    /// consumed); anything else stays for [`Transport::receive`]. `Err` when the peer hung up.
    pub async fn first_line_token(&mut self) -> Result<Option<String>, ()> {
        match self.read_line().await {
            Ok(LineRead::Line) => {}
            Ok(LineRead::TooLong) => {
                self.early = Some(LineRead::TooLong);
                return Ok(None);
            }
            Ok(LineRead::Eof) | Err(_) => return Err(()),
        }
        let parsed: Option<Value> = serde_json::from_slice(trim_line(&self.line)).ok();
        match parsed {
            Some(message) if message["method"] == AUTHENTICATE_METHOD => {
                self.line.clear();
                Ok(Some(
                    message["params"]["token"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ))
            }
            _ => {
                self.early = Some(LineRead::Line);
                Ok(None)
            }
        }
    }

    /// Answers a refused authentication and closes.
    pub fn refuse(&self, message: String) {
        self.answer_error(Value::Null, -32001, message, true);
    }

    /// Reads and drops input until the peer closes, for at most [`DISCARD_WINDOW`], in fixed-size
    /// reads: nothing is buffered.
    async fn discard_input(&mut self) {
        let _ = tokio::time::timeout(DISCARD_WINDOW, async {
            loop {
                let len = match self.read.fill_buf().await {
                    Ok([]) | Err(_) => return,
                    Ok(bytes) => bytes.len(),
                };
                self.read.consume(len);
            }
        })
        .await;
    }

    /// Queues an error frame without waiting (so `receive` stays cancel-safe).
    fn answer_error(&self, id: Value, code: i64, message: String, last: bool) {
        let frame =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let _ = self.frames.try_send(Frame {
            bytes: frame_bytes(&frame),
            answers: false,
            last,
        });
    }
}

fn frame_bytes<T: serde::Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

async fn write_frames<W: AsyncWrite + Unpin>(
    mut write: W,
    mut queue: mpsc::Receiver<Frame>,
    unanswered: Arc<Unanswered>,
    open_requests: Arc<AtomicUsize>,
) {
    let settle = |n: usize| {
        open_requests.fetch_sub(n, Ordering::AcqRel);
        unanswered.sub(n);
    };
    'frames: while let Some(frame) = queue.recv().await {
        let mut answered = usize::from(frame.answers);
        if write.write_all(&frame.bytes).await.is_err() {
            break;
        }
        // Batch what is already queued into one flush.
        while let Ok(more) = queue.try_recv() {
            answered += usize::from(more.answers);
            if write.write_all(&more.bytes).await.is_err() {
                break 'frames;
            }
        }
        if write.flush().await.is_err() {
            break;
        }
        settle(answered);
        if frame.last {
            break;
        }
    }
    let _ = write.shutdown().await;
    // Requests that will never be answered on this connection no longer hold up a shutdown.
    settle(open_requests.load(Ordering::Acquire));
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let frames = self.frames.clone();
        let answers = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let frame = Frame {
            bytes: frame_bytes(&item),
            answers,
            last: false,
        };
        async move {
            frames.send(frame).await.map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "connection closed")
            })
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        loop {
            let read = match self.early.take() {
                Some(early) => Ok(early),
                None => self.read_line().await,
            };
            match read {
                Ok(LineRead::Line) => {}
                Ok(LineRead::Eof) => return None,
                Ok(LineRead::TooLong) => {
                    tracing::warn!(
                        limit = self.max_line,
                        "request over the size limit; closing the connection"
                    );
                    self.answer_error(
                        Value::Null,
                        -32600,
                        format!(
                            "request larger than this daemon's limit of {} bytes; the connection is closed",
                            self.max_line
                        ),
                        true,
                    );
                    self.closed.store(true, Ordering::Release);
                    self.discard_input().await;
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
                Ok(message) => {
                    if matches!(message, JsonRpcMessage::Request(_)) {
                        self.open_requests.fetch_add(1, Ordering::AcqRel);
                        self.unanswered.add(1);
                    }
                    return Some(message);
                }
                Err(err) => {
                    // Not a message we understand. Answer with the request's id when there is one,
                    // so a client waiting on it is not left hanging.
                    let parsed = serde_json::from_slice::<Value>(text);
                    let (id, code, message) = match parsed {
                        Err(syntax) => (
                            Value::Null,
                            -32700,
                            format!("parse error: not valid JSON: {syntax}"),
                        ),
                        Ok(value) => {
                            let id = value.get("id").cloned().unwrap_or(Value::Null);
                            (id, -32600, format!("invalid request: {err}"))
                        }
                    };
                    // A notification (no id) gets no answer, as JSON-RPC says.
                    if code == -32700 || !id.is_null() {
                        self.answer_error(id, code, message, false);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.store(true, Ordering::Release);
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
