//! Receipts leave the machine: every row of the ledger, exactly as the ledger holds it (secrets
//! already masked), sent in order to the sinks named under `[export]`, each from its own durable
//! cursor that runs behind the ledger.
//!
//! An action never waits for a sink: each exporter reads committed rows on its own task, so a
//! sink that is down or slow only lets its cursor fall behind. Every row goes with its sequence
//! number, its chain hash and the previous row's, so a receiver can tell a gap or a reordering
//! from a quiet hour and can check the chain itself.
//!
//! Delivery is at least once, in order. A sink says which rows its receiver has taken (a TCP
//! acknowledgement of every byte, a datagram in the journal's socket, a collector's 2xx), and only
//! then does the cursor (`export/SINK.cursor` in the state dir) move past them. After a failure,
//! a reconnect or a restart, sending resumes at the cursor, so rows the receiver may not have
//! taken are sent again. The sinks themselves are in `syslog.rs`, `journald.rs` and `otlp.rs`.

mod journald;
mod otlp;
mod syslog;
mod tls;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::record::receipts::{self, StoredText as Row};

pub use journald::JournaldTarget;
pub use otlp::OtlpTarget;
pub use syslog::SyslogTarget;

/// Rows read from the ledger and sent in one batch.
const BATCH: i64 = 256;
/// How often an idle exporter looks for new rows (and at whether its connection still holds).
const POLL: Duration = Duration::from_millis(200);
/// Backoff after a failure: from the first to the last, doubling.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The `[export]` config section.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExportConfig {
    /// `tcp://HOST:PORT` or `tcps://HOST:PORT`: RFC 5424 messages over TCP (TLS), octet-counted.
    pub syslog: Option<SyslogTarget>,
    /// `true`: the system journal; `"NAME"`: the journal namespace NAME.
    pub journald: Option<JournaldTarget>,
    /// `http://HOST:PORT/v1/logs` (or https): OpenTelemetry logs over OTLP/HTTP.
    pub otlp: Option<OtlpTarget>,
    /// PEM certificates trusted for `tcps://` and `https://` sinks, beside the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Rows not yet delivered past which the daemon logs a warning (and `doctor` says so).
    pub backlog_warn: u64,
    /// A sink that takes nothing of a send for this long is dropped and reconnected (a receiver
    /// that accepts but stopped reading would otherwise hold the export forever).
    pub write_timeout_ms: u64,
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            syslog: None,
            journald: None,
            otlp: None,
            ca_file: None,
            backlog_warn: 10_000,
            write_timeout_ms: 30_000,
        }
    }
}

impl ExportConfig {
    /// What parsing cannot see: that `ca_file` reads as certificates (checked when the config is
    /// loaded, so `computer config check` and a reload refuse it, not only the sink at start).
    pub fn check(&self) -> Result<(), String> {
        match &self.ca_file {
            Some(path) => tls::ca_certificates(path).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Each sink named: its name (the cursor's) and its address as `doctor` shows it.
    fn sinks(&self) -> Vec<(&'static str, String)> {
        let mut sinks = Vec::new();
        if let Some(target) = &self.syslog {
            sinks.push((syslog::NAME, target.to_string()));
        }
        if let Some(target) = &self.journald {
            sinks.push((journald::NAME, target.to_string()));
        }
        if let Some(target) = &self.otlp {
            sinks.push((otlp::NAME, target.to_string()));
        }
        sinks
    }
}

/// A place receipts go. A sink connects, sends batches of rows in order on a connection, and
/// says which of them its receiver has taken; the exporter's loop does the rest.
trait Sink: Send + Sync + 'static {
    type Conn: Send;

    /// The sink's name in logs, `doctor` and its cursor's file name.
    fn name(&self) -> &'static str;

    /// Where it sends, for logs.
    fn address(&self) -> String;

    fn connect(&self) -> impl Future<Output = std::io::Result<Self::Conn>> + Send;

    /// Sends `rows` (oldest first, after every row sent before on `conn`). Returns once they are
    /// handed over; which ones the receiver took is for [`Sink::acknowledged`] to say.
    fn send(
        &self,
        conn: &mut Self::Conn,
        rows: &[Row],
    ) -> impl Future<Output = std::io::Result<()>> + Send;

    /// The last row the receiver has taken, if one since the last time this was asked.
    fn acknowledged(&self, conn: &mut Self::Conn) -> Option<i64>;

    /// Whether the receiver went away while nothing was being sent.
    fn closed(&self, conn: &mut Self::Conn) -> impl Future<Output = bool> + Send;
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

/// Starts the exporter of each sink `config` names, each on its own task.
pub fn start(config: &ExportConfig, ledger: PathBuf, state_dir: &Path) {
    if config.sinks().is_empty() {
        return;
    }
    let dir = state_dir.join("export");
    if let Err(err) = std::fs::create_dir_all(&dir) {
        tracing::error!(dir = %dir.display(), error = %err, "receipts are not exported: no place for the cursors");
        return;
    }
    let exporter = |name| Exporter {
        ledger: ledger.clone(),
        cursor: cursor_path(state_dir, name),
        backlog_warn: config.backlog_warn,
        write_timeout: Duration::from_millis(config.write_timeout_ms.max(1)),
    };
    // Built once (the system's roots are read from disk) for whichever sinks speak TLS.
    let client = std::cell::OnceCell::new();
    let tls = || {
        client
            .get_or_init(|| tls::client_config(config.ca_file.as_deref()))
            .clone()
    };
    if let Some(target) = &config.syslog {
        spawn(exporter(syslog::NAME), syslog::Syslog::new(target, tls));
    }
    if let Some(target) = &config.journald {
        spawn(
            exporter(journald::NAME),
            Ok(journald::Journald::new(target)),
        );
    }
    if let Some(target) = &config.otlp {
        spawn(exporter(otlp::NAME), otlp::Otlp::new(target, tls));
    }
}

/// Runs `exporter` for `sink` on a task of its own, or logs why that sink gets nothing.
fn spawn<S: Sink>(exporter: Exporter, sink: Result<S, String>) {
    match sink {
        Ok(sink) => {
            tokio::spawn(exporter.run(sink));
        }
        Err(error) => {
            tracing::error!(cursor = %exporter.cursor.display(), %error, "receipts are not exported to this sink");
        }
    }
}

/// One sink's exporter: its cursor and the bounds it keeps.
struct Exporter {
    ledger: PathBuf,
    cursor: PathBuf,
    backlog_warn: u64,
    write_timeout: Duration,
}

impl Exporter {
    async fn run<S: Sink>(self, sink: S) {
        let name = sink.name();
        let address = sink.address();
        let mut delivered = read_cursor(&self.cursor);
        let mut conn: Option<S::Conn> = None;
        // Rows after `delivered` already sent on the current connection.
        let mut sent = delivered;
        let mut backoff = BACKOFF_FIRST;
        let mut behind_warned = false;
        let mut down_since: Option<Instant> = None;
        tracing::info!(sink = name, address = %address, from = delivered + 1, "exporting receipts");
        loop {
            if let Some(open) = conn.as_mut() {
                self.take_acknowledged(&sink, open, &mut delivered);
            }
            if conn.is_none() {
                let failure = match tokio::time::timeout(self.write_timeout, sink.connect()).await {
                    Ok(Ok(open)) => {
                        conn = Some(open);
                        sent = delivered;
                        None
                    }
                    Ok(Err(err)) => Some(err.to_string()),
                    Err(_) => Some(format!(
                        "no connection within the write timeout ({} ms)",
                        self.write_timeout.as_millis()
                    )),
                };
                if let Some(error) = failure {
                    if down_since.is_none() {
                        down_since = Some(Instant::now());
                        tracing::warn!(sink = name, address = %address, error = %error, "export sink unreachable; retrying with backoff, receipts wait in the ledger");
                    }
                    if let Some(behind) = self.backlog(delivered).await {
                        behind_warned = self.note_backlog(name, behind, behind_warned);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
            let rows = self.rows_after(sent).await;
            let Some(open) = conn.as_mut() else {
                continue;
            };
            if rows.is_empty() {
                if sink.closed(open).await {
                    conn = None;
                    continue;
                }
                // Every row is sent: once the receiver has taken them all, nothing is behind,
                // which needs no read of the ledger to know.
                if behind_warned && delivered == sent {
                    behind_warned = self.note_backlog(name, 0, behind_warned);
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
            let failure =
                match tokio::time::timeout(self.write_timeout, sink.send(open, &rows)).await {
                    Ok(Ok(())) => None,
                    Ok(Err(err)) => Some(format!("export write failed: {err}")),
                    Err(_) => Some(format!(
                        "export sink took nothing for the write timeout ({} ms)",
                        self.write_timeout.as_millis()
                    )),
                };
            self.take_acknowledged(&sink, open, &mut delivered);
            match failure {
                None => {
                    sent = rows.last().map_or(sent, |row| row.seq);
                    backoff = BACKOFF_FIRST;
                    if let Some(since) = down_since.take() {
                        tracing::info!(sink = name, address = %address, down_ms = since.elapsed().as_millis() as u64, "export sink reachable again");
                    }
                }
                Some(error) => {
                    tracing::warn!(sink = name, address = %address, resume_at = delivered + 1, "{error}; reconnecting");
                    down_since.get_or_insert_with(Instant::now);
                    conn = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Moves the cursor to the last row the receiver has taken, if that moved.
    fn take_acknowledged<S: Sink>(&self, sink: &S, conn: &mut S::Conn, delivered: &mut i64) {
        if let Some(seq) = sink.acknowledged(conn) {
            *delivered = seq;
            if let Err(err) = write_cursor(&self.cursor, seq) {
                tracing::warn!(sink = sink.name(), error = %err, "the export cursor could not be written; rows will be sent again after a restart");
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
    fn note_backlog(&self, sink: &str, behind: u64, warned: bool) -> bool {
        match (behind > self.backlog_warn, warned) {
            (true, false) => {
                tracing::warn!(
                    sink,
                    behind,
                    bound = self.backlog_warn,
                    "receipts export is behind: the sink has not taken this many rows (they wait in the ledger and are sent in order once it does)"
                );
                true
            }
            (false, true) => {
                tracing::info!(sink, behind, "receipts export caught up under its bound");
                false
            }
            _ => warned,
        }
    }
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

/// This machine's host name, as receivers are told it (`-`, syslog's nil value, when unknown).
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

/// What `doctor` says of the sinks, keyed by sink: each one's address, the rows it has taken
/// and how far it is behind the ledger; `Null` when nothing is exported.
pub fn doctor_report(config: &ExportConfig, state_dir: &Path) -> serde_json::Value {
    let sinks = config.sinks();
    if sinks.is_empty() {
        return serde_json::Value::Null;
    }
    let last = last_seq(&state_dir.join("receipts.sqlite")).ok();
    let mut report = serde_json::Map::new();
    for (sink, address) in sinks {
        let delivered = read_cursor(&cursor_path(state_dir, sink));
        let behind = last.map(|last| last.saturating_sub(delivered).max(0));
        report.insert(
            sink.to_string(),
            serde_json::json!({
                "sink": sink,
                "address": address,
                "delivered_through": delivered,
                "behind": behind,
                "falling_behind": behind.is_some_and(|b| b as u64 > config.backlog_warn),
            }),
        );
    }
    serde_json::Value::Object(report)
}

/// `doctor`'s lines for [`doctor_report`], one a sink.
pub fn doctor_lines(report: &serde_json::Value) -> Vec<String> {
    let Some(sinks) = report.as_object() else {
        return Vec::new();
    };
    sinks
        .values()
        .map(|sink| {
            let behind = match sink["behind"].as_i64() {
                Some(0) => "up to date".to_string(),
                Some(n) if sink["falling_behind"] == true => {
                    format!("{n} rows behind, past its warning bound: is the sink up?")
                }
                Some(n) => format!("{n} rows behind"),
                None => "the ledger could not be read".to_string(),
            };
            format!(
                "export   {} to {}: rows through {} delivered, {behind}",
                sink["sink"].as_str().unwrap_or_default(),
                sink["address"].as_str().unwrap_or_default(),
                sink["delivered_through"]
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_config_names_every_sink_with_its_address() {
        let config: ExportConfig = toml::from_str(
            "syslog = \"tcps://logs.example:6514\"\njournald = \"audit\"\notlp = \"http://127.0.0.1:4318/v1/logs\"\n",
        )
        .unwrap();
        let names: Vec<_> = config.sinks().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["syslog", "journald", "otlp"]);
        assert_eq!(
            config.sinks()[0].1,
            "tcps://logs.example:6514",
            "{config:?}"
        );
    }
}
