//! The OTLP sink: rows as OpenTelemetry log records, POSTed as protobuf (OTLP/HTTP) to a
//! collector, a batch counted taken once the collector answers it with a 2xx.
//!
//! Each record's body is the row's stored text (what its hash covers); its attributes are the
//! row's place in the chain (`computer.seq`, `computer.prev`, `computer.hash`) and what it is of
//! (`computer.kind`, `computer.call`, `computer.surface`, `computer.command`); the resource
//! says whose desktop it came from (`host.name`, `user.name`). Any other answer, or none within
//! the write timeout, sends the batch again from the cursor after a backoff: a collector that
//! refuses a batch holds the export until it takes it, and `doctor` shows the rows waiting.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper::client::conn::http1::SendRequest;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types::ServerName};

use super::{Row, Sink, hostname};

pub const NAME: &str = "otlp";

/// The most row text one request carries: collectors bound request bodies (the OpenTelemetry
/// Collector at 20 MiB by default), and a smaller request is less to send again.
const REQUEST_BYTES: usize = 1 << 20;

/// Where a collector takes logs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct OtlpTarget {
    pub url: String,
    https: bool,
    host: String,
    port: u16,
    /// `HOST[:PORT]` as written, for the `Host` header.
    authority: String,
    path: String,
}

impl fmt::Display for OtlpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// Written back as the address it was read from (the config reference renders the config).
impl serde::Serialize for OtlpTarget {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl TryFrom<String> for OtlpTarget {
    type Error = String;

    fn try_from(url: String) -> Result<Self, String> {
        let valid = "valid: \"http://HOST:PORT/v1/logs\" or \"https://HOST:PORT/v1/logs\" \
                     (OpenTelemetry logs over OTLP/HTTP)";
        let uri: Uri = url
            .parse()
            .map_err(|err| format!("`{url}` is not a URL ({err}); {valid}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "`{url}` is not an http:// or https:// URL; {valid}"
                ));
            }
        };
        let Some(authority) = uri.authority() else {
            return Err(format!("`{url}` names no host; {valid}"));
        };
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(format!("`{url}` names no host; {valid}"));
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        if path == "/" {
            return Err(format!(
                "`{url}` names no path: collectors take logs at /v1/logs; {valid}"
            ));
        }
        Ok(OtlpTarget {
            https,
            host: host.to_string(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.to_string(),
            path: path.to_string(),
            url,
        })
    }
}

/// The OTLP sink.
pub(super) struct Otlp {
    target: OtlpTarget,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Who the records are of: `service.name`, `host.name`, `user.name`.
    resource: Resource,
}

impl Otlp {
    pub fn new(
        target: &OtlpTarget,
        tls: impl FnOnce() -> Result<Arc<rustls::ClientConfig>, String>,
    ) -> Result<Otlp, String> {
        let tls = if target.https {
            let name = ServerName::try_from(target.host.clone())
                .map_err(|err| format!("`{}` cannot name a TLS server: {err}", target.host))?;
            Some((TlsConnector::from(tls()?), name))
        } else {
            None
        };
        let resource = Resource {
            attributes: vec![
                text("service.name", "computer"),
                text("host.name", &hostname()),
                text("user.name", &user_name()),
            ],
            ..Default::default()
        };
        Ok(Otlp {
            target: target.clone(),
            tls,
            resource,
        })
    }

    /// `rows` as one export request.
    fn request(&self, rows: &[Row]) -> ExportLogsServiceRequest {
        let observed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let log_records = rows
            .iter()
            .map(|row| LogRecord {
                time_unix_nano: (row.at_ms.max(0) as u64) * 1_000_000,
                observed_time_unix_nano: observed,
                severity_number: SeverityNumber::Info as i32,
                severity_text: "INFO".into(),
                body: Some(AnyValue {
                    value: Some(Value::StringValue(row.text.clone())),
                }),
                attributes: vec![
                    KeyValue {
                        key: "computer.seq".into(),
                        value: Some(AnyValue {
                            value: Some(Value::IntValue(row.seq)),
                        }),
                        ..Default::default()
                    },
                    text("computer.kind", &row.kind),
                    text("computer.call", &row.call_id),
                    text("computer.surface", &row.surface),
                    text("computer.command", &row.command),
                    text("computer.prev", &row.prev_hash),
                    text("computer.hash", &row.hash),
                ],
                ..Default::default()
            })
            .collect();
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(self.resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "computer.receipts".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    log_records,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// The name of the user the daemon runs as (its uid when it has no name).
fn user_name() -> String {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut buf = vec![0u8; 1024];
    // SAFETY: passwd is plain data, filled by getpwuid_r from `buf`, which outlives its use.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and the buffer's length is passed.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return uid.to_string();
    }
    // SAFETY: on success pw_name points at a NUL-terminated string inside `buf`.
    unsafe { std::ffi::CStr::from_ptr(entry.pw_name) }
        .to_string_lossy()
        .into_owned()
}

/// An HTTP/1.1 connection to the collector, and the last row it took.
pub(super) struct Collector {
    sender: SendRequest<Full<Bytes>>,
    taken: Option<i64>,
}

impl Sink for Otlp {
    type Conn = Collector;

    fn name(&self) -> &'static str {
        NAME
    }

    fn address(&self) -> String {
        self.target.url.clone()
    }

    async fn connect(&self) -> std::io::Result<Collector> {
        let stream = TcpStream::connect((self.target.host.as_str(), self.target.port)).await?;
        let _ = stream.set_nodelay(true);
        let sender = match &self.tls {
            None => handshake(stream).await?,
            Some((connector, name)) => {
                handshake(connector.connect(name.clone(), stream).await?).await?
            }
        };
        Ok(Collector {
            sender,
            taken: None,
        })
    }

    async fn send(&self, conn: &mut Collector, rows: &[Row]) -> std::io::Result<()> {
        for chunk in chunks(rows) {
            conn.sender.ready().await.map_err(std::io::Error::other)?;
            let body = self.request(chunk).encode_to_vec();
            let request = hyper::Request::post(self.target.path.as_str())
                .header(hyper::header::HOST, self.target.authority.as_str())
                .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
                .body(Full::new(Bytes::from(body)))
                .map_err(std::io::Error::other)?;
            let response = conn
                .sender
                .send_request(request)
                .await
                .map_err(std::io::Error::other)?;
            let status = response.status();
            let answer = response
                .into_body()
                .collect()
                .await
                .map_err(std::io::Error::other)?
                .to_bytes();
            if !status.is_success() {
                let said = String::from_utf8_lossy(&answer[..answer.len().min(200)]).into_owned();
                return Err(std::io::Error::other(format!(
                    "the collector answered {status}: {said}"
                )));
            }
            // A 2xx may still refuse some records (a partial success); they are not sent again,
            // which would not change the answer, but the log says so.
            if let Some(partial) = ExportLogsServiceResponse::decode(answer.as_ref())
                .ok()
                .and_then(|response| response.partial_success)
                && partial.rejected_log_records > 0
            {
                tracing::warn!(sink = NAME, rejected = partial.rejected_log_records, message = %partial.error_message, "the collector refused some receipts of a batch it otherwise took");
            }
            conn.taken = chunk.last().map(|row| row.seq);
        }
        Ok(())
    }

    fn acknowledged(&self, conn: &mut Collector) -> Option<i64> {
        conn.taken.take()
    }

    async fn closed(&self, conn: &mut Collector) -> bool {
        conn.sender.is_closed()
    }
}

/// An HTTP/1.1 client connection over `io`, driven on its own task until it closes.
async fn handshake<T>(io: T) -> std::io::Result<SendRequest<Full<Bytes>>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(sink = NAME, error = %err, "the collector connection ended");
        }
    });
    Ok(sender)
}

/// `rows` cut into requests of at most [`REQUEST_BYTES`] of text (a row larger than that goes
/// alone).
fn chunks(rows: &[Row]) -> Vec<&[Row]> {
    let mut chunks = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, row) in rows.iter().enumerate() {
        if i > start && size + row.text.len() > REQUEST_BYTES {
            chunks.push(&rows[start..i]);
            (start, size) = (i, 0);
        }
        size += row.text.len();
    }
    if start < rows.len() {
        chunks.push(&rows[start..]);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collector_urls_are_checked_with_what_would_be_valid() {
        let target = OtlpTarget::try_from("http://127.0.0.1:4318/v1/logs".to_string()).unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 4318, "/v1/logs")
        );
        let tls = OtlpTarget::try_from("https://otel.example/v1/logs".to_string()).unwrap();
        assert_eq!((tls.port, tls.https), (443, true));
        for bad in [
            "ftp://h/v1/logs",
            "http://h:4318",
            "h:4318/v1/logs",
            "http:///v1/logs",
        ] {
            let err = OtlpTarget::try_from(bad.to_string()).unwrap_err();
            assert!(err.contains(bad) && err.contains("valid:"), "{bad}: {err}");
        }
    }

    #[test]
    fn large_batches_are_cut_and_a_huge_row_goes_alone() {
        let row = |seq, len| Row {
            seq,
            text: "x".repeat(len),
            ..Default::default()
        };
        let rows = vec![
            row(1, 10),
            row(2, REQUEST_BYTES),
            row(3, 10),
            row(4, REQUEST_BYTES / 2),
        ];
        let cut: Vec<Vec<i64>> = chunks(&rows)
            .iter()
            .map(|c| c.iter().map(|r| r.seq).collect())
            .collect();
        assert_eq!(cut, [vec![1], vec![2], vec![3, 4]]);
    }
}
