//! Receipts leave the machine: every row of the ledger, exactly as the ledger holds it (secrets
//! already masked), sent in order to the sinks named under `[export]`, from a durable cursor
//! that runs behind the ledger.
//!
//! An action never waits for a sink: the exporter reads committed rows on its own task, so a
//! sink that is down or slow only lets the cursor fall behind. It sends each row with its
//! sequence number, its chain hash and the previous row's, so a receiver can tell a gap or a
//! reordering from a quiet hour and can check the chain itself.
//!
//! Delivery is at least once, in order. A row counts as delivered once the receiver's TCP stack
//! has acknowledged every byte of it (the socket's send queue has drained past it); only then
//! does the cursor (`export/syslog.cursor` in the state dir) move past it. After a failed write,
//! a reconnect or a restart, sending resumes at the cursor, so rows the receiver may not have
//! taken are sent again. What plain TCP cannot tell is a receiver that dies holding acknowledged
//! bytes it had not yet read: those rows are lost to it, and the sequence numbers show the gap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::receipts::{self, StoredText as Row};

/// Rows read from the ledger and sent in one write.
const BATCH: i64 = 256;
/// How often an idle exporter looks for new rows (and at whether its connection still holds).
const POLL: Duration = Duration::from_millis(200);
/// Reconnect backoff: from the first to the last, doubling.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The structured-data id of a receipt in a syslog message (RFC 5424 section 7.2.2: a name, `@`,
/// a private enterprise number; 32473 is the number reserved for documentation, RFC 5612).
const SD_ID: &str = "computer@32473";
/// Facility `authpriv` (10), severity `info` (6): audit records, which syslog daemons commonly
/// keep apart from general logs.
const PRI: u8 = 10 * 8 + 6;

/// The `[export]` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExportConfig {
    /// `tcp://HOST:PORT`: RFC 5424 messages over TCP, octet-counted (RFC 6587).
    pub syslog: Option<SyslogTarget>,
    /// Rows not yet delivered past which the daemon logs a warning (and `doctor` says so).
    pub backlog_warn: u64,
    /// A sink that takes no bytes of a write for this long is dropped and reconnected (a
    /// receiver that accepts but stopped reading would otherwise hold the export forever).
    pub write_timeout_ms: u64,
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            syslog: None,
            backlog_warn: 10_000,
            write_timeout_ms: 30_000,
        }
    }
}

/// Where a syslog sink listens.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SyslogTarget {
    /// `HOST:PORT`, as written.
    pub address: String,
}

impl TryFrom<String> for SyslogTarget {
    type Error = String;

    fn try_from(url: String) -> Result<Self, String> {
        let valid = "valid: \"tcp://HOST:PORT\" (RFC 5424 over TCP)";
        if url.starts_with("tcps://") {
            return Err(format!(
                "`{url}`: TLS (tcps://) is not supported yet; {valid}, e.g. to a local rsyslog \
                 that forwards over TLS"
            ));
        }
        let Some(address) = url.strip_prefix("tcp://") else {
            return Err(format!("`{url}` is not a syslog address; {valid}"));
        };
        let port_ok = address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(format!("`{url}` names no HOST:PORT; {valid}"));
        }
        Ok(SyslogTarget {
            address: address.to_string(),
        })
    }
}

/// The file that holds a sink's cursor: the last sequence number it delivered.
pub fn cursor_path(state_dir: &Path, sink: &str) -> PathBuf {
    state_dir.join("export").join(format!("{sink}.cursor"))
}

/// The cursor as last written; 0 (nothing delivered) when there is none.
pub fn read_cursor(path: &Path) -> i64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Writes the cursor beside its old value and renames it over: a reader sees one or the other.
/// Not synced: a cursor lost to a crash only sends rows again.
fn write_cursor(path: &Path, seq: i64) -> std::io::Result<()> {
    let fresh = path.with_extension("cursor.new");
    std::fs::write(&fresh, format!("{seq}\n"))?;
    std::fs::rename(&fresh, path)
}

/// Starts the exporter of each sink `config` names, on its own task.
pub fn start(config: &ExportConfig, ledger: PathBuf, state_dir: &Path) {
    if let Some(target) = &config.syslog {
        let cursor = cursor_path(state_dir, "syslog");
        if let Some(dir) = cursor.parent()
            && let Err(err) = std::fs::create_dir_all(dir)
        {
            tracing::error!(dir = %dir.display(), error = %err, "receipts are not exported: no place for the cursor");
            return;
        }
        let exporter = Syslog {
            address: target.address.clone(),
            ledger,
            cursor,
            backlog_warn: config.backlog_warn,
            write_timeout: Duration::from_millis(config.write_timeout_ms.max(1)),
            hostname: hostname(),
            pid: std::process::id(),
        };
        tokio::spawn(exporter.run());
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if ok && !name.is_empty() => name.to_string(),
        _ => "-".to_string(),
    }
}

/// One syslog sink's exporter.
struct Syslog {
    address: String,
    ledger: PathBuf,
    cursor: PathBuf,
    backlog_warn: u64,
    write_timeout: Duration,
    hostname: String,
    pid: u32,
}

/// A connection and what was written on it, for telling which rows the receiver acknowledged.
struct Sending {
    stream: TcpStream,
    /// Bytes written on this connection so far.
    written: u64,
    /// (sequence number, bytes written up to and including its row), oldest first, for the rows
    /// written and not yet acknowledged.
    in_flight: std::collections::VecDeque<(i64, u64)>,
}

impl Sending {
    /// The last row the receiver's TCP stack has acknowledged in full, if a new one.
    fn acknowledged(&mut self) -> Option<i64> {
        let queued = unacknowledged_bytes(&self.stream)?;
        let taken = self.written.saturating_sub(queued);
        let mut last = None;
        while let Some(&(seq, end)) = self.in_flight.front() {
            if end > taken {
                break;
            }
            last = Some(seq);
            self.in_flight.pop_front();
        }
        last
    }

    /// Whether the receiver closed or reset the connection (it never sends anything).
    fn closed(&self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.try_read(&mut byte) {
            Ok(_) => true,
            Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

/// Bytes written to `stream` that its peer has not acknowledged yet.
#[cfg(target_os = "linux")]
fn unacknowledged_bytes(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer, which is valid.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (rc == 0).then_some(queued.max(0) as u64)
}

/// Bytes written to `stream` that its peer has not acknowledged yet.
#[cfg(target_os = "macos")]
fn unacknowledged_bytes(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_NWRITE writes one int through the pointer, whose size is passed.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NWRITE,
            (&mut queued as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(queued.max(0) as u64)
}

impl Syslog {
    async fn run(self) {
        let mut delivered = read_cursor(&self.cursor);
        let mut sending: Option<Sending> = None;
        // Rows after `delivered` already written on the current connection.
        let mut sent = delivered;
        let mut backoff = BACKOFF_FIRST;
        let mut behind_warned = false;
        let mut down_since: Option<std::time::Instant> = None;
        tracing::info!(sink = "syslog", address = %self.address, from = delivered + 1, "exporting receipts");
        loop {
            if let Some(conn) = sending.as_mut()
                && let Some(seq) = conn.acknowledged()
            {
                delivered = seq;
                if let Err(err) = write_cursor(&self.cursor, delivered) {
                    tracing::warn!(error = %err, "the export cursor could not be written; rows will be sent again after a restart");
                }
            }
            if sending.is_none() {
                match TcpStream::connect(&self.address).await {
                    Ok(stream) => {
                        let _ = stream.set_nodelay(true);
                        if let Some(since) = down_since.take() {
                            tracing::info!(sink = "syslog", address = %self.address, down_ms = since.elapsed().as_millis() as u64, resume_at = delivered + 1, "export sink reachable again");
                        }
                        sending = Some(Sending {
                            stream,
                            written: 0,
                            in_flight: Default::default(),
                        });
                        sent = delivered;
                        backoff = BACKOFF_FIRST;
                    }
                    Err(err) => {
                        if down_since.is_none() {
                            down_since = Some(std::time::Instant::now());
                            tracing::warn!(sink = "syslog", address = %self.address, error = %err, "export sink unreachable; retrying with backoff, receipts wait in the ledger");
                        }
                        if let Some(behind) = self.backlog(delivered).await {
                            behind_warned = self.note_backlog(behind, behind_warned);
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                        continue;
                    }
                }
            }
            let rows = self.rows_after(sent).await;
            let Some(conn) = sending.as_mut() else {
                continue;
            };
            if rows.is_empty() {
                if conn.closed() {
                    sending = None;
                    continue;
                }
                // Every row is written: once the receiver has acknowledged them all, nothing is
                // behind, which needs no read of the ledger to know.
                if behind_warned && conn.in_flight.is_empty() {
                    behind_warned = self.note_backlog(0, behind_warned);
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
            let mut frames = Vec::new();
            let mut ends = Vec::with_capacity(rows.len());
            for row in &rows {
                frame(&mut frames, &self.message(row));
                ends.push((row.seq, conn.written + frames.len() as u64));
            }
            match tokio::time::timeout(self.write_timeout, conn.stream.write_all(&frames)).await {
                Ok(Ok(())) => {
                    conn.written += frames.len() as u64;
                    conn.in_flight.extend(ends);
                    sent = rows.last().map_or(sent, |row| row.seq);
                }
                Ok(Err(err)) => {
                    tracing::warn!(sink = "syslog", address = %self.address, error = %err, resume_at = delivered + 1, "export write failed; reconnecting");
                    down_since.get_or_insert_with(std::time::Instant::now);
                    sending = None;
                }
                Err(_) => {
                    tracing::warn!(sink = "syslog", address = %self.address, timeout_ms = self.write_timeout.as_millis() as u64, resume_at = delivered + 1, "export sink took nothing for the write timeout; reconnecting");
                    down_since.get_or_insert_with(std::time::Instant::now);
                    sending = None;
                }
            }
        }
    }

    /// Up to [`BATCH`] committed rows after `seq`, oldest first; none when the ledger cannot be
    /// read now (tried again at the next poll).
    async fn rows_after(&self, seq: i64) -> Vec<Row> {
        let path = self.ledger.clone();
        tokio::task::spawn_blocking(move || rows_after(&path, seq))
            .await
            .ok()
            .and_then(|read| {
                read.map_err(|err| tracing::warn!(error = %err, "export could not read the ledger"))
                    .ok()
            })
            .unwrap_or_default()
    }

    /// The rows of the ledger after `delivered` (one read of the ledger); `None` when it cannot
    /// be read now.
    async fn backlog(&self, delivered: i64) -> Option<u64> {
        let path = self.ledger.clone();
        let last = tokio::task::spawn_blocking(move || last_seq(&path))
            .await
            .ok()?
            .ok()?;
        Some(last.saturating_sub(delivered).max(0) as u64)
    }

    /// Logs once when the rows not yet delivered (`behind`) pass the bound, and once when they
    /// are back under it; whether the warning stands.
    fn note_backlog(&self, behind: u64, warned: bool) -> bool {
        match (behind > self.backlog_warn, warned) {
            (true, false) => {
                tracing::warn!(
                    sink = "syslog",
                    behind,
                    bound = self.backlog_warn,
                    "receipts export is behind: the sink has not taken this many rows (they wait in the ledger and are sent in order once it does)"
                );
                true
            }
            (false, true) => {
                tracing::info!(
                    sink = "syslog",
                    behind,
                    "receipts export caught up under its bound"
                );
                false
            }
            _ => warned,
        }
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

fn rows_after(path: &Path, seq: i64) -> Result<Vec<Row>, receipts::LedgerError> {
    let conn = receipts::open_ro(path)?;
    receipts::rows_after(&conn, path, seq, BATCH)
}

/// The ledger's last sequence number (0 when empty).
pub fn last_seq(path: &Path) -> Result<i64, receipts::LedgerError> {
    let conn = receipts::open_ro(path)?;
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM receipts", [], |row| {
        row.get(0)
    })
    .map_err(|source| receipts::LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    })
}

/// What `doctor` says of the sinks: each one's address, the rows it has taken and how far it is
/// behind the ledger; `Null` when nothing is exported.
pub fn doctor_report(config: &ExportConfig, state_dir: &Path) -> serde_json::Value {
    let Some(target) = &config.syslog else {
        return serde_json::Value::Null;
    };
    let delivered = read_cursor(&cursor_path(state_dir, "syslog"));
    let last = last_seq(&state_dir.join("receipts.sqlite")).ok();
    let behind = last.map(|last| last.saturating_sub(delivered).max(0));
    serde_json::json!({
        "sink": "syslog",
        "address": target.address,
        "delivered_through": delivered,
        "behind": behind,
        "falling_behind": behind.is_some_and(|b| b as u64 > config.backlog_warn),
    })
}

/// `doctor`'s line for [`doctor_report`].
pub fn doctor_line(report: &serde_json::Value) -> Option<String> {
    if report.is_null() {
        return None;
    }
    let behind = match report["behind"].as_i64() {
        Some(0) => "up to date".to_string(),
        Some(n) if report["falling_behind"] == true => {
            format!("{n} rows behind, past its warning bound: is the sink up?")
        }
        Some(n) => format!("{n} rows behind"),
        None => "the ledger could not be read".to_string(),
    };
    Some(format!(
        "export   syslog to {}: rows through {} delivered, {behind}",
        report["address"].as_str().unwrap_or_default(),
        report["delivered_through"]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_addresses_are_checked_with_what_would_be_valid() {
        let ok = SyslogTarget::try_from("tcp://logs.example:6514".to_string()).unwrap();
        assert_eq!(ok.address, "logs.example:6514");
        let tls = SyslogTarget::try_from("tcps://logs.example:6514".to_string()).unwrap_err();
        assert!(
            tls.contains("not supported yet") && tls.contains("tcp://HOST:PORT"),
            "{tls}"
        );
        for bad in [
            "udp://h:514",
            "tcp://h",
            "tcp://:514",
            "tcp://h:99999",
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

    #[test]
    fn a_missing_or_torn_cursor_starts_from_the_first_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = cursor_path(dir.path(), "syslog");
        assert_eq!(read_cursor(&path), 0);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_cursor(&path, 42).unwrap();
        assert_eq!(read_cursor(&path), 42);
        std::fs::write(&path, "4x").unwrap();
        assert_eq!(read_cursor(&path), 0);
    }
}
