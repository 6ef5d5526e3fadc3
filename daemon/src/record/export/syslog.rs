//! The syslog sink: each row as an RFC 5424 message, octet-counted (RFC 6587) over TCP or over
//! TLS (`tcps://`, RFC 5425), counted delivered once the receiver's TCP stack has acknowledged
//! every byte that carried it.
//!
//! The bytes are counted below TLS, as they go to the socket, so that the kernel's count of the
//! bytes not yet acknowledged (TIOCOUTQ, SO_NWRITE) says which rows arrived. Over plain TCP a
//! row's message is its bytes on the wire, so each row is told apart; over TLS a batch's records
//! are, and its rows count as taken together. What TCP cannot tell is a receiver that dies
//! holding acknowledged bytes it had not yet read: those rows are lost to it, and the sequence
//! numbers show the gap.

use std::collections::VecDeque;
use std::fmt;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types::ServerName};

use super::{Row, Sink, hostname};

pub const NAME: &str = "syslog";

/// The structured-data id of a receipt in a syslog message (RFC 5424 section 7.2.2: a name, `@`,
/// a private enterprise number; 32473 is the number reserved for documentation, RFC 5612).
const SD_ID: &str = "computer@32473";
/// Facility `authpriv` (10), severity `info` (6): audit records, which syslog daemons commonly
/// keep apart from general logs.
const PRI: u8 = 10 * 8 + 6;

/// Where a syslog sink listens, and whether over TLS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SyslogTarget {
    /// `HOST:PORT`, as written.
    pub address: String,
    pub tls: bool,
}

impl fmt::Display for SyslogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "tcps" } else { "tcp" };
        write!(f, "{scheme}://{}", self.address)
    }
}

/// Written back as the address it was read from (the config reference renders the config).
impl serde::Serialize for SyslogTarget {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl TryFrom<String> for SyslogTarget {
    type Error = String;

    fn try_from(url: String) -> Result<Self, String> {
        let valid =
            "valid: \"tcp://HOST:PORT\" (RFC 5424 over TCP) or \"tcps://HOST:PORT\" (over TLS)";
        let (address, tls) = match (url.strip_prefix("tcp://"), url.strip_prefix("tcps://")) {
            (Some(address), _) => (address, false),
            (_, Some(address)) => (address, true),
            _ => return Err(format!("`{url}` is not a syslog address; {valid}")),
        };
        if host_and_port(address).is_none() {
            return Err(format!("`{url}` names no HOST:PORT; {valid}"));
        }
        Ok(SyslogTarget {
            address: address.to_string(),
            tls,
        })
    }
}

/// `HOST:PORT` split, the host without the brackets of an IPv6 address; `None` if either part
/// is missing or the port is not a port.
pub(super) fn host_and_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = port.parse().ok()?;
    (!host.is_empty()).then_some((host, port))
}

/// The syslog sink.
pub(super) struct Syslog {
    target: SyslogTarget,
    /// The TLS client and the name the server's certificate must carry (`tcps://`).
    tls: Option<(TlsConnector, ServerName<'static>)>,
    hostname: String,
    pid: u32,
}

impl Syslog {
    /// The sink for `target`; `tls` gives the client config when it is `tcps://`.
    pub fn new(
        target: &SyslogTarget,
        tls: impl FnOnce() -> Result<Arc<rustls::ClientConfig>, String>,
    ) -> Result<Syslog, String> {
        let tls = if target.tls {
            let (host, _) = host_and_port(&target.address).expect("checked when parsed");
            let name = ServerName::try_from(host.to_string())
                .map_err(|err| format!("`{host}` cannot name a TLS server: {err}"))?;
            Some((TlsConnector::from(tls()?), name))
        } else {
            None
        };
        Ok(Syslog {
            target: target.clone(),
            tls,
            hostname: hostname(),
            pid: std::process::id(),
        })
    }

    /// A row as an RFC 5424 message: its time, this host, `computer` and its pid, message id
    /// `receipt`, the row's place in the chain as structured data, and the row's stored text
    /// (what its hash covers) as the message.
    fn message(&self, row: &Row) -> String {
        let time = chrono::DateTime::from_timestamp_millis(row.at_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_else(|| "-".into());
        format!(
            "<{PRI}>1 {time} {host} computer {pid} receipt [{SD_ID} seq=\"{seq}\" kind=\"{kind}\" call=\"{call}\" surface=\"{surface}\" command=\"{command}\" prev=\"{prev}\" hash=\"{hash}\"] {text}",
            host = self.hostname,
            pid = self.pid,
            seq = row.seq,
            kind = sd_value(&row.kind),
            call = sd_value(&row.call_id),
            surface = sd_value(&row.surface),
            command = sd_value(&row.command),
            prev = row.prev_hash,
            hash = row.hash,
            text = row.text,
        )
    }
}

/// A TCP stream that counts the bytes written to it.
struct Counted {
    stream: TcpStream,
    written: u64,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written += n as u64;
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

enum Stream {
    Plain(Counted),
    Tls(Box<tokio_rustls::client::TlsStream<Counted>>),
}

/// A connection and what was written on it, for telling which rows the receiver acknowledged.
pub(super) struct Sending {
    stream: Stream,
    /// The socket, for asking the kernel what it has not had acknowledged.
    fd: RawFd,
    /// (sequence number, socket bytes written up to the end of its row), oldest first, for the
    /// rows written and not yet acknowledged.
    in_flight: VecDeque<(i64, u64)>,
}

impl Sending {
    fn written(&self) -> u64 {
        match &self.stream {
            Stream::Plain(counted) => counted.written,
            Stream::Tls(tls) => tls.get_ref().0.written,
        }
    }
}

impl Sink for Syslog {
    type Conn = Sending;

    fn name(&self) -> &'static str {
        NAME
    }

    fn address(&self) -> String {
        self.target.to_string()
    }

    async fn connect(&self) -> std::io::Result<Sending> {
        let stream = TcpStream::connect(&self.target.address).await?;
        let _ = stream.set_nodelay(true);
        let fd = stream.as_raw_fd();
        let counted = Counted { stream, written: 0 };
        let stream = match &self.tls {
            None => Stream::Plain(counted),
            Some((connector, name)) => {
                Stream::Tls(Box::new(connector.connect(name.clone(), counted).await?))
            }
        };
        Ok(Sending {
            stream,
            fd,
            in_flight: VecDeque::new(),
        })
    }

    async fn send(&self, conn: &mut Sending, rows: &[Row]) -> std::io::Result<()> {
        let start = conn.written();
        let mut frames = Vec::new();
        let mut ends = Vec::with_capacity(rows.len());
        for row in rows {
            frame(&mut frames, &self.message(row));
            ends.push((row.seq, start + frames.len() as u64));
        }
        match &mut conn.stream {
            Stream::Plain(counted) => counted.write_all(&frames).await?,
            Stream::Tls(tls) => {
                tls.write_all(&frames).await?;
                tls.flush().await?;
            }
        }
        if matches!(conn.stream, Stream::Tls(_)) {
            // The batch went as TLS records: it is taken once the last of them is.
            let end = conn.written();
            ends = rows.last().map(|row| (row.seq, end)).into_iter().collect();
        }
        conn.in_flight.extend(ends);
        Ok(())
    }

    fn acknowledged(&self, conn: &mut Sending) -> Option<i64> {
        let queued = unacknowledged_bytes(conn.fd)?;
        let taken = conn.written().saturating_sub(queued);
        let mut last = None;
        while let Some(&(seq, end)) = conn.in_flight.front() {
            if end > taken {
                break;
            }
            last = Some(seq);
            conn.in_flight.pop_front();
        }
        last
    }

    /// A syslog receiver never sends anything of its own; an end of stream or an error is the
    /// connection gone (what TLS sends, such as session tickets, is read and dropped).
    async fn closed(&self, conn: &mut Sending) -> bool {
        use futures::FutureExt;
        let mut buf = [0u8; 512];
        let read = match &mut conn.stream {
            Stream::Plain(counted) => counted.read(&mut buf).now_or_never(),
            Stream::Tls(tls) => tls.read(&mut buf).now_or_never(),
        };
        matches!(read, Some(Ok(0)) | Some(Err(_)))
    }
}

/// Bytes written to the socket `fd` that its peer has not acknowledged yet.
#[cfg(target_os = "linux")]
fn unacknowledged_bytes(fd: RawFd) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer, which is valid.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    (rc == 0).then_some(queued.max(0) as u64)
}

/// Bytes written to the socket `fd` that its peer has not acknowledged yet.
#[cfg(target_os = "macos")]
fn unacknowledged_bytes(fd: RawFd) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_NWRITE writes one int through the pointer, whose size is passed.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_NWRITE,
            (&mut queued as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(queued.max(0) as u64)
}

/// Octet-counting framing (RFC 6587 section 3.4.1): the length, a space, the message.
fn frame(out: &mut Vec<u8>, message: &str) {
    out.extend_from_slice(message.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(message.as_bytes());
}

/// A structured-data parameter value, escaped as RFC 5424 section 6.3.3 asks.
fn sd_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_addresses_are_checked_with_what_would_be_valid() {
        let plain = SyslogTarget::try_from("tcp://logs.example:6514".to_string()).unwrap();
        assert_eq!(
            (plain.address.as_str(), plain.tls),
            ("logs.example:6514", false)
        );
        let tls = SyslogTarget::try_from("tcps://[::1]:6514".to_string()).unwrap();
        assert!(tls.tls);
        assert_eq!(host_and_port(&tls.address), Some(("::1", 6514)));
        assert_eq!(tls.to_string(), "tcps://[::1]:6514");
        for bad in [
            "udp://h:514",
            "tcp://h",
            "tcp://:514",
            "tcps://h:99999",
            "h:514",
        ] {
            let err = SyslogTarget::try_from(bad.to_string()).unwrap_err();
            assert!(err.contains(bad) && err.contains("valid:"), "{bad}: {err}");
        }
    }

    #[test]
    fn frames_count_octets_and_structured_values_are_escaped() {
        let mut out = Vec::new();
        frame(&mut out, "é]");
        assert_eq!(out, "3 é]".as_bytes());
        assert_eq!(sd_value(r#"a"b\c]d"#), r#"a\"b\\c\]d"#);
    }
}
