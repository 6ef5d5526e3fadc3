//! Fuzzes the daemon's JSON-RPC line transport over a real socket pair: whatever a client sends,
//! every frame the daemon writes back is one JSON object or array per line, every request the
//! transport lets through is answered exactly once, a line over the size cap never becomes a
//! message, and the transport ends when the client stops sending.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use computer_daemon::transport::{FirstLine, Limits, LineTransport, Unanswered};
use libfuzzer_sys::fuzz_target;
use rmcp::model::{JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, ServerResult};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Small enough that the fuzzer reaches the cap with short inputs.
const MAX_LINE: usize = 512;

fuzz_target!(|input: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    runtime.block_on(exchange(input));
});

async fn exchange(input: &[u8]) {
    let (server, mut client) = UnixStream::pair().expect("a socket pair");
    let limits = Limits {
        max_line: MAX_LINE,
        // Long enough never to fire: the client sends everything at once, then shuts its side.
        read_timeout: Duration::from_secs(600),
        handshake_timeout: Duration::from_secs(600),
    };
    let (mut transport, writer) = LineTransport::new(
        server,
        limits,
        Arc::new(Unanswered::default()),
        CancellationToken::new(),
    );
    let input = input.to_vec();
    let sent = input.clone();
    let client_side = tokio::spawn(async move {
        // The socket buffer may be smaller than the input: send while the daemon reads.
        let (mut read, mut write) = client.split();
        let send = async {
            let _ = write.write_all(&sent).await;
            let _ = write.shutdown().await;
        };
        let mut answers = Vec::new();
        let receive = read.read_to_end(&mut answers);
        let (_, received) = tokio::join!(send, receive);
        let _ = received;
        answers
    });

    let mut requests = 0usize;
    let mut messages = 0usize;
    if let Ok(first) = transport.first_line().await {
        if let FirstLine::Authenticate { id: Some(id), .. } = first {
            transport.accept_authentication(id, "fuzz");
            requests += 1;
        }
        // An echo server: every request is answered at once, as the daemon's handler would.
        while let Some(message) = transport.receive().await {
            messages += 1;
            if let JsonRpcMessage::Request(request) = message {
                requests += 1;
                let answer = JsonRpcMessage::Response(JsonRpcResponse {
                    jsonrpc: JsonRpcVersion2_0,
                    id: request.id,
                    result: ServerResult::empty(()),
                });
                if transport.send(answer).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(transport);
    writer
        .await
        .expect("the writer task ends without panicking");
    let answers = client_side.await.expect("the client task ends");

    let lines_sent = input.split(|b| *b == b'\n').count();
    assert!(
        messages <= lines_sent,
        "{messages} messages out of {lines_sent} lines"
    );
    assert!(
        answers.is_empty() || answers.ends_with(b"\n"),
        "every frame ends its line"
    );
    let mut responses = 0usize;
    for frame in answers.split(|b| *b == b'\n').filter(|f| !f.is_empty()) {
        let value: Value = serde_json::from_slice(frame).unwrap_or_else(|err| {
            panic!(
                "frame is not JSON ({err}): {}",
                String::from_utf8_lossy(frame)
            )
        });
        assert!(
            value.is_object() || value.is_array(),
            "frame is a message or a batch answer"
        );
        if value.get("result").is_some() {
            responses += 1;
        }
    }
    assert_eq!(responses, requests, "each request answered once");
    if input.len() > MAX_LINE + 1 && !input.contains(&b'\n') {
        assert_eq!(messages, 0, "an over-long line never becomes a message");
    }
}
