//! The MCP transport on the daemon's socket: newline-delimited JSON-RPC under hard limits. It
//! answers what it cannot take (parse errors, invalid requests, duplicate keys, batches), closes
//! a connection whose line is over the size cap, unfinished past the read timeout, or that never
//! sends a request, and tells a client that only stopped sending (its calls go on and are
//! answered) from one that is gone (its calls are cancelled at once).

use std::collections::HashSet;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::io::{Interest, unix::AsyncFd};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Frames queued for the writer task before `send` waits.
const WRITE_QUEUE: usize = 64;

/// JSON-RPC error code for a connection this daemon will not serve (bad token, nested call).
pub const REFUSED: i64 = -32001;
/// JSON-RPC error code for a connection closed by a limit (timeouts, connection cap).
pub const CLOSED_BY_LIMIT: i64 = -32000;
/// JSON-RPC's invalid request.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32700;

/// A count that can be waited on until it reaches zero.
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

/// The requests of one connection that still owe an answer, by id. Every open request is also
/// counted in the daemon-wide [`Unanswered`], which shutdown waits on. A request leaves when its
/// answer is written, when the client cancels it (no answer is sent for a cancelled request), or
/// when the connection ends.
struct OpenRequests {
    ids: Mutex<HashSet<String>>,
    /// Counts this connection's open requests; zero means every call has been answered.
    here: Unanswered,
    everywhere: Arc<Unanswered>,
}

impl OpenRequests {
    fn new(everywhere: Arc<Unanswered>) -> Self {
        OpenRequests {
            ids: Mutex::default(),
            here: Unanswered::default(),
            everywhere,
        }
    }

    fn opened(&self, id: String) {
        if self.ids.lock().unwrap().insert(id) {
            self.here.add(1);
            self.everywhere.add(1);
        }
    }

    fn closed(&self, id: &str) {
        if self.ids.lock().unwrap().remove(id) {
            self.here.sub(1);
            self.everywhere.sub(1);
        }
    }

    fn close_all(&self) {
        let n = {
            let mut ids = self.ids.lock().unwrap();
            let n = ids.len();
            ids.clear();
            n
        };
        self.here.sub(n);
        self.everywhere.sub(n);
    }
}

/// A request id as a set key: its JSON text (`7` or `"a"`).
fn id_key<T: serde::Serialize>(id: &T) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

struct Frame {
    bytes: Vec<u8>,
    /// The request this frame answers, if it is a response or error to one.
    answers: Option<String>,
    /// The last frame: after it the writer shuts the write side down.
    last: bool,
}

/// After refusing a request, how long the rest of the input is read and dropped before the
/// connection closes. Closing a socket with unread input makes the peer's kernel discard what we
/// sent (a reset), so the refusal would never be read.
const DISCARD_WINDOW: Duration = Duration::from_secs(2);

/// What a connection may do before it is closed.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request line, newline excluded.
    pub max_line: usize,
    /// A line begun and not finished within this long closes the connection.
    pub read_timeout: Duration,
    /// A connection with no request this long after connecting is closed.
    pub handshake_timeout: Duration,
}

/// Why a connection was closed by a clock.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    SlowLine,
    NoRequest,
}

enum LineRead {
    Line,
    TooLong,
    Eof,
    Expired(Expiry),
}

/// What the first line of a connection was.
pub enum FirstLine {
    /// `computer/authenticate`: the token (none: the `default` agent), whether the connection
    /// asks to be observe-only, and the id to answer when it was sent as a request.
    Authenticate {
        token: Option<String>,
        observe_only: bool,
        id: Option<Value>,
    },
    /// Anything else; it stays for [`Transport::receive`].
    Other,
}

pub struct LineTransport {
    read: BufReader<OwnedReadHalf>,
    /// The socket's descriptor, kept open by `read`: polled to tell a client that only stopped
    /// sending from one that is gone.
    socket: RawFd,
    line: Vec<u8>,
    limits: Limits,
    /// When the line in `line` began, while one is being read.
    line_started: Option<Instant>,
    /// Until a first request arrives: when the connection is closed for sending none.
    first_request_by: Option<Instant>,
    /// Frames go to one writer task so that an error answered from `receive` (which rmcp may
    /// cancel at any await) never interleaves with a response being written.
    frames: mpsc::Sender<Frame>,
    closed: Arc<AtomicBool>,
    open: Arc<OpenRequests>,
    /// Fired when the client is gone (or the connection is closed on it): its calls stop.
    gone: CancellationToken,
    /// The client sent its last byte; from then on `receive` only waits for the calls in flight.
    input_ended: bool,
    /// What the look for an authentication message found, when it was not one: a whole line
    /// already in `line`, or an over-long one. `receive` handles it first.
    early: Option<LineRead>,
}

/// The optional first message of a connection, naming the agent by its token:
/// `{"jsonrpc":"2.0","method":"computer/authenticate","params":{"token":"ct_..."}}`. Sent with an
/// `id`, it is answered.
pub const AUTHENTICATE_METHOD: &str = computer_ipc::AUTHENTICATE_METHOD;

impl LineTransport {
    /// Builds the transport and its writer task; the returned handle ends once every queued frame
    /// has been written (or the peer is gone). `gone` fires when the client goes away.
    pub fn new(
        stream: UnixStream,
        limits: Limits,
        unanswered: Arc<Unanswered>,
        gone: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let socket = stream.as_raw_fd();
        let (read, write) = stream.into_split();
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let open = Arc::new(OpenRequests::new(unanswered));
        let writer = tokio::spawn(write_frames(write, queue, open.clone(), gone.clone()));
        let transport = LineTransport {
            read: BufReader::new(read),
            socket,
            line: Vec::new(),
            limits,
            line_started: None,
            first_request_by: Some(Instant::now() + limits.handshake_timeout),
            frames,
            closed: Arc::new(AtomicBool::new(false)),
            open,
            gone,
            input_ended: false,
            early: None,
        };
        (transport, writer)
    }

    /// The earliest clock this connection is under, and what it is for.
    fn deadline(&self) -> Option<(Instant, Expiry)> {
        let line = self
            .line_started
            .map(|at| (at + self.limits.read_timeout, Expiry::SlowLine));
        let first = self.first_request_by.map(|at| (at, Expiry::NoRequest));
        match (line, first) {
            (Some(line), Some(first)) => Some(if first.0 <= line.0 { first } else { line }),
            (line, first) => line.or(first),
        }
    }

    /// Reads one line into `self.line` without letting it grow past `max_line`, within the
    /// connection's clocks. Cancel-safe: a partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        let max = self.limits.max_line;
        loop {
            let deadline = self.deadline();
            let available = match deadline {
                None => self.read.fill_buf().await?,
                Some((at, why)) => match tokio::time::timeout_at(at, self.read.fill_buf()).await {
                    Ok(read) => read?,
                    Err(_) => return Ok(LineRead::Expired(why)),
                },
            };
            if available.is_empty() {
                return Ok(LineRead::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let needed = self.line.len() + take;
            if needed > max + 1 {
                return Ok(LineRead::TooLong);
            }
            if self.line_started.is_none() {
                self.line_started = Some(Instant::now());
            }
            // Grow by doubling, but never past the cap: what one connection holds stays bounded
            // by max_request_bytes, not twice that.
            if needed > self.line.capacity() {
                let target = (self.line.capacity() * 2).clamp(needed, max + 1);
                self.line.reserve_exact(target - self.line.len());
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                self.line_started = None;
                return Ok(LineRead::Line);
            }
        }
    }

    /// Reads the connection's first line: an authentication message is consumed and yields its
    /// token; anything else stays for [`Transport::receive`]. `Err` when the connection is over
    /// (the peer hung up, or a limit closed it and said why).
    pub async fn first_line(&mut self) -> Result<FirstLine, ()> {
        match self.read_line().await {
            Ok(LineRead::Line) => {}
            Ok(LineRead::TooLong) => {
                self.early = Some(LineRead::TooLong);
                return Ok(FirstLine::Other);
            }
            Ok(LineRead::Expired(why)) => {
                self.expire(why);
                return Err(());
            }
            Ok(LineRead::Eof) | Err(_) => return Err(()),
        }
        let text = trim_line(&self.line);
        let parsed: Option<Value> = serde_json::from_slice(text).ok();
        match parsed {
            Some(message) if message["method"] == AUTHENTICATE_METHOD => {
                let id = message.get("id").filter(|id| !id.is_null()).cloned();
                // Two tokens in one message must not let either through (nor two flags).
                let params = &message["params"];
                let token = match duplicate_key(text) {
                    Some(_) => Some(String::new()),
                    None if params.get("token").is_none() => None,
                    None => Some(params["token"].as_str().unwrap_or("").to_string()),
                };
                // Only a plain `true` narrows; the flag can only ever narrow, never widen.
                let observe_only = params[computer_ipc::OBSERVE_ONLY_PARAM] == json!(true);
                self.line.clear();
                Ok(FirstLine::Authenticate {
                    token,
                    observe_only,
                    id,
                })
            }
            _ => {
                self.early = Some(LineRead::Line);
                Ok(FirstLine::Other)
            }
        }
    }

    /// Answers a successful authentication sent with an id.
    pub fn accept_authentication(&self, id: Value, agent: &str) {
        let frame = json!({"jsonrpc": "2.0", "id": id, "result": {"agent": agent}});
        let _ = self.frames.try_send(Frame {
            bytes: frame_bytes(&frame),
            answers: None,
            last: false,
        });
    }

    /// Refuses the connection: answers the first request (found in the first line or two, within
    /// the connection's clocks) with `message`, or answers without an id when none comes, then
    /// closes once the client has read it. `id` is the request already known to be refused.
    pub async fn refuse(mut self, id: Option<Value>, message: String) {
        let id = match id {
            Some(id) => id,
            None => self.first_request_id().await.unwrap_or(Value::Null),
        };
        self.answer_error(id, REFUSED, message, true);
        self.closed.store(true, Ordering::Release);
        self.discard_input().await;
    }

    /// The id of the first request among the next lines (an authentication is skipped), if one
    /// comes before the connection's clocks run out.
    async fn first_request_id(&mut self) -> Option<Value> {
        for _ in 0..2 {
            let read = match self.early.take() {
                Some(early) => early,
                None => self.read_line().await.ok()?,
            };
            if !matches!(read, LineRead::Line) {
                return None;
            }
            let line = std::mem::take(&mut self.line);
            let id = serde_json::from_slice::<Value>(trim_line(&line))
                .ok()
                .and_then(|message| message.get("id").cloned())
                .filter(|id| !id.is_null());
            if id.is_some() {
                return id;
            }
        }
        None
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
        self.queue_unanswering(frame_bytes(&frame), last);
    }

    fn queue_unanswering(&self, bytes: Vec<u8>, last: bool) {
        let _ = self.frames.try_send(Frame {
            bytes,
            answers: None,
            last,
        });
    }

    /// Closes the connection because one of its clocks ran out, saying which, and stops the
    /// calls still running on it (nobody could read their answers).
    fn expire(&mut self, why: Expiry) {
        let message = match why {
            Expiry::SlowLine => {
                // Debug, not info: the client is told, and a flood of these must not flood the log.
                tracing::debug!(
                    limit_ms = self.limits.read_timeout.as_millis() as u64,
                    "closed a connection whose request line was not finished in time"
                );
                format!(
                    "request line not finished within {} ms (server.read_timeout_ms); the connection is closed",
                    self.limits.read_timeout.as_millis()
                )
            }
            Expiry::NoRequest => {
                // Debug, not info: the client is told, and a flood of these must not flood the log.
                tracing::debug!(
                    limit_ms = self.limits.handshake_timeout.as_millis() as u64,
                    "closed a connection that sent no request in time"
                );
                format!(
                    "no request within {} ms of connecting (server.handshake_timeout_ms): send `initialize` first; the connection is closed",
                    self.limits.handshake_timeout.as_millis()
                )
            }
        };
        self.answer_error(Value::Null, CLOSED_BY_LIMIT, message, true);
        self.closed.store(true, Ordering::Release);
        self.gone.cancel();
    }

    /// The client sent its last byte. If it is gone altogether, its calls are cancelled now. If
    /// it only shut its sending side (it still reads), the calls it made run on and are answered;
    /// the connection ends when the last is, or as soon as the client goes away after all.
    async fn input_ended(&mut self) {
        self.input_ended = true;
        let gone = if peer_hung_up(self.socket) {
            true
        } else {
            tokio::select! {
                () = self.open.here.drained() => false,
                () = wait_hung_up(self.socket) => true,
            }
        };
        if gone && !self.gone.is_cancelled() {
            tracing::debug!(
                open = self.open.here.get(),
                "client gone; cancelling its calls"
            );
            self.gone.cancel();
        }
    }

    /// Decodes one non-empty line; answers (and drops) what is not a message we serve.
    fn decode(&mut self, text: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        // Last-one-wins on a repeated key would let a request mean two things to two readers
        // (a logger, a policy, the handler): refuse it, naming the key.
        if let Some(duplicate) = duplicate_key(text) {
            let id = if duplicate.path.is_empty() && duplicate.key == "id" {
                Value::Null
            } else {
                request_id(text)
            };
            self.answer_error(
                id,
                INVALID_REQUEST,
                format!("invalid request: {duplicate}; each key may appear once in an object"),
                false,
            );
            return None;
        }
        if text.first() == Some(&b'[') {
            self.answer_batch(text);
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
            Ok(message) => {
                match &message {
                    JsonRpcMessage::Request(request) => {
                        self.first_request_by = None;
                        self.open.opened(id_key(&request.id));
                    }
                    JsonRpcMessage::Notification(_) => {
                        // A cancelled request gets no answer: it no longer holds anything up.
                        if let Some(id) = cancelled_request(text) {
                            self.open.closed(&id);
                        }
                    }
                    _ => {}
                }
                Some(message)
            }
            Err(err) => {
                // Not a message we understand. Answer with the request's id when there is one,
                // so a client waiting on it is not left hanging.
                let (id, code, message) = match serde_json::from_slice::<Value>(text) {
                    Err(syntax) => (
                        Value::Null,
                        PARSE_ERROR,
                        format!("parse error: not valid JSON: {syntax}"),
                    ),
                    Ok(value) => {
                        let id = value.get("id").cloned().unwrap_or(Value::Null);
                        (id, INVALID_REQUEST, format!("invalid request: {err}"))
                    }
                };
                // A notification (no id) gets no answer, as JSON-RPC says.
                if code == PARSE_ERROR || !id.is_null() {
                    self.answer_error(id, code, message, false);
                }
                None
            }
        }
    }

    /// A JSON-RPC batch (a top-level array) is not served: each request in it gets an error with
    /// its id, in one array as JSON-RPC answers a batch; a batch with no request gets one error.
    fn answer_batch(&self, text: &[u8]) {
        let message = "invalid request: JSON-RPC batches are not supported; send each request as its own line";
        let error = |id: Value| {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": INVALID_REQUEST, "message": message}})
        };
        let answers: Vec<Value> = match serde_json::from_slice::<Value>(text) {
            Ok(Value::Array(items)) => items
                .iter()
                .filter_map(|item| item.get("id").filter(|id| !id.is_null()).cloned())
                .map(error)
                .collect(),
            _ => Vec::new(),
        };
        let frame = if answers.is_empty() {
            error(Value::Null)
        } else {
            Value::Array(answers)
        };
        self.queue_unanswering(frame_bytes(&frame), false);
    }
}

/// The id of a request as best read (last key wins), or null.
fn request_id(text: &[u8]) -> Value {
    serde_json::from_slice::<Value>(text)
        .ok()
        .and_then(|message| message.get("id").cloned())
        .unwrap_or(Value::Null)
}

/// The request a `notifications/cancelled` names, as an id key.
fn cancelled_request(text: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(text).ok()?;
    if message["method"] != "notifications/cancelled" {
        return None;
    }
    message["params"].get("requestId").map(id_key)
}

/// Whether the peer has closed its end altogether (not just shut its sending side): the socket
/// reports a hang-up or an error. Never blocks.
fn peer_hung_up(socket: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd: socket,
        events: 0,
        revents: 0,
    };
    // SAFETY: one pollfd for a descriptor the transport keeps open; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR) != 0
}

/// Resolves when the peer closes its end altogether. Watches a duplicate of the descriptor with
/// its own readiness, so clearing that readiness never stalls the connection's writer. If the
/// watch cannot be set up, it never resolves (the calls then run to their answers).
async fn wait_hung_up(socket: RawFd) {
    // SAFETY: the transport keeps `socket` open while it is borrowed here.
    let borrowed = unsafe { BorrowedFd::borrow_raw(socket) };
    let watch = borrowed
        .try_clone_to_owned()
        // SAFETY: the AsyncFd owns this duplicate and nothing else closes or replaces it.
        .and_then(|fd| unsafe { Ok(AsyncFd::register_with_interest(fd, Interest::WRITABLE)?) });
    let watch = match watch {
        Ok(watch) => watch,
        Err(err) => {
            tracing::debug!(error = %err, "cannot watch a half-closed connection for its end");
            return std::future::pending().await;
        }
    };
    loop {
        let Ok(mut ready) = watch.writable().await else {
            return std::future::pending().await;
        };
        if ready.ready().is_write_closed() || peer_hung_up(socket) {
            return;
        }
        // Writable is the socket's usual state; wait for the next change of it.
        ready.clear_ready();
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
    open: Arc<OpenRequests>,
    gone: CancellationToken,
) {
    'frames: while let Some(frame) = queue.recv().await {
        let mut answered: Vec<String> = frame.answers.into_iter().collect();
        if write.write_all(&frame.bytes).await.is_err() {
            gone.cancel();
            break;
        }
        // Batch what is already queued into one flush.
        while let Ok(more) = queue.try_recv() {
            answered.extend(more.answers);
            if write.write_all(&more.bytes).await.is_err() {
                gone.cancel();
                break 'frames;
            }
        }
        if write.flush().await.is_err() {
            gone.cancel();
            break;
        }
        for id in &answered {
            open.closed(id);
        }
        if frame.last {
            break;
        }
    }
    let _ = write.shutdown().await;
    // Requests that will never be answered on this connection no longer hold up a shutdown.
    open.close_all();
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let frames = self.frames.clone();
        let answers = match &item {
            JsonRpcMessage::Response(response) => Some(id_key(&response.id)),
            JsonRpcMessage::Error(error) => error.id.as_ref().map(id_key),
            _ => None,
        };
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
        if self.input_ended {
            self.input_ended().await;
            return None;
        }
        loop {
            let read = match self.early.take() {
                Some(early) => Ok(early),
                None => self.read_line().await,
            };
            match read {
                Ok(LineRead::Line) => {}
                Ok(LineRead::Eof) => {
                    self.input_ended().await;
                    return None;
                }
                Ok(LineRead::Expired(why)) => {
                    self.expire(why);
                    return None;
                }
                Ok(LineRead::TooLong) => {
                    tracing::warn!(
                        limit = self.limits.max_line,
                        "request over the size limit; closing the connection"
                    );
                    self.answer_error(
                        Value::Null,
                        INVALID_REQUEST,
                        format!(
                            "request larger than this daemon's limit of {} bytes; the connection is closed",
                            self.limits.max_line
                        ),
                        true,
                    );
                    self.closed.store(true, Ordering::Release);
                    // Nobody can read the answers of calls still running: stop them.
                    self.gone.cancel();
                    self.discard_input().await;
                    return None;
                }
                Err(err) => {
                    tracing::debug!(error = %err, "connection read failed; cancelling its calls");
                    self.gone.cancel();
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = trim_line(&line);
            if text.is_empty() {
                continue;
            }
            if let Some(message) = self.decode(text) {
                return Some(message);
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

/// A key that appears twice in one object, and where.
#[derive(Debug, PartialEq)]
pub struct DuplicateKey {
    /// The path of the object holding it (`params.arguments`), empty at the top level.
    pub path: String,
    pub key: String,
}

impl std::fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "duplicate key `{}` at the top level", self.key)
        } else {
            write!(f, "duplicate key `{}` in `{}`", self.key, self.path)
        }
    }
}

/// The first key repeated within one object anywhere in `text`, if any. Text that is not JSON
/// has none (the parse that follows reports it).
pub fn duplicate_key(text: &[u8]) -> Option<DuplicateKey> {
    let mut found = None;
    let mut path = Vec::new();
    let mut reader = serde_json::Deserializer::from_slice(text);
    let _ = KeyCheck {
        path: &mut path,
        found: &mut found,
    }
    .deserialize(&mut reader);
    found
}

/// Walks a JSON value without building it, stopping at the first repeated key.
struct KeyCheck<'a> {
    path: &'a mut Vec<String>,
    found: &'a mut Option<DuplicateKey>,
}

impl<'de> DeserializeSeed<'de> for KeyCheck<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyCheck<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            self.path.push(format!("[{index}]"));
            let more = items.next_element_seed(KeyCheck {
                path: self.path,
                found: self.found,
            });
            self.path.pop();
            if more?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = entries.next_key::<String>()? {
            if seen.contains(&key) {
                *self.found = Some(DuplicateKey {
                    path: render_path(self.path),
                    key,
                });
                return Err(serde::de::Error::custom("duplicate key"));
            }
            self.path.push(key.clone());
            let value = entries.next_value_seed(KeyCheck {
                path: self.path,
                found: self.found,
            });
            self.path.pop();
            value?;
            seen.insert(key);
        }
        Ok(())
    }
}

fn render_path(path: &[String]) -> String {
    let mut out = String::new();
    for part in path {
        if !out.is_empty() && !part.starts_with('[') {
            out.push('.');
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: Option<(&str, &str)>) {
        let found = duplicate_key(text.as_bytes());
        let found = found.as_ref().map(|d| (d.path.as_str(), d.key.as_str()));
        assert_eq!(found, expect, "{text}");
    }

    #[test]
    fn repeated_keys_are_found_with_their_object_path() {
        check(r#"{"a":1,"b":2}"#, None);
        check(r#"{"a":1,"a":2}"#, Some(("", "a")));
        check(
            r#"{"params":{"arguments":{"args":{"argv":["x"],"argv":["y"]}}}}"#,
            Some(("params.arguments.args", "argv")),
        );
        check(r#"{"p":[{"k":1},{"k":1,"k":2}]}"#, Some(("p[1]", "k")));
        // The same key in sibling objects is no repeat; escapes are compared decoded.
        check(r#"{"x":{"k":1},"y":{"k":1}}"#, None);
        check(r#"{"k":1,"\u006b":2}"#, Some(("", "k")));
        check("not json", None);
    }
}
