//! The receipts ledger: a hash-chained, append-only SQLite table written by one thread that
//! commits concurrent appends together (group commit), durable before any caller is answered.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Most appends folded into one transaction.
const MAX_BATCH: usize = 1024;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS receipts (
    seq       INTEGER PRIMARY KEY,
    call_id   TEXT    NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind IN ('intent', 'result')),
    at_ms     INTEGER NOT NULL,
    surface   TEXT    NOT NULL,
    command   TEXT    NOT NULL,
    row       TEXT    NOT NULL,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_call_id ON receipts (call_id);
CREATE INDEX IF NOT EXISTS receipts_at_ms ON receipts (at_ms);
";

/// Which half of a call a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// Written before the action runs.
    Intent,
    /// Written after it ends, before the reply.
    Result,
}

impl RowKind {
    fn as_str(self) -> &'static str {
        match self {
            RowKind::Intent => "intent",
            RowKind::Result => "result",
        }
    }
}

/// A row to append.
#[derive(Debug, Clone)]
pub struct NewRow {
    pub call_id: String,
    pub kind: RowKind,
    pub surface: String,
    pub command: String,
    pub body: Value,
}

/// A row as stored.
#[derive(Debug, Clone, Serialize)]
pub struct StoredRow {
    pub seq: i64,
    pub call_id: String,
    pub kind: String,
    pub at_ms: i64,
    pub surface: String,
    pub command: String,
    pub body: Value,
    pub prev_hash: String,
    pub hash: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("receipt store {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("receipt store {path}: {message}")]
    Other { path: PathBuf, message: String },
    #[error("the receipt writer has stopped")]
    WriterGone,
    #[error("writing receipts failed: {0}")]
    Write(String),
}

struct Append {
    rows: Vec<NewRow>,
    reply: tokio::sync::oneshot::Sender<Result<Vec<i64>, String>>,
}

/// A handle to the writer thread. Cloning is cheap; all clones feed one writer.
#[derive(Clone)]
pub struct Ledger {
    appends: mpsc::Sender<Append>,
    path: PathBuf,
}

impl Ledger {
    /// Opens (creating if needed) the store at `path` and starts its writer thread.
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        Ledger::open_with_max_batch(path, MAX_BATCH)
    }

    /// [`Ledger::open`] with a cap on appends per commit; 1 turns group commit off (the
    /// benchmark's anchor).
    pub fn open_with_max_batch(path: &Path, max_batch: usize) -> Result<Ledger, LedgerError> {
        let conn = open_rw(path)?;
        let (appends, incoming) = mpsc::channel::<Append>();
        let writer_path = path.to_path_buf();
        std::thread::Builder::new()
            .name("receipts-writer".into())
            .spawn(move || writer_loop(conn, incoming, writer_path, max_batch.max(1)))
            .map_err(|err| LedgerError::Other {
                path: path.to_path_buf(),
                message: format!("cannot start the writer thread: {err}"),
            })?;
        Ok(Ledger {
            appends,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends rows as one unit, returning their seqs once they are durable.
    pub async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<i64>, LedgerError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.appends
            .send(Append { rows, reply })
            .map_err(|_| LedgerError::WriterGone)?;
        match answer.await {
            Ok(Ok(seqs)) => Ok(seqs),
            Ok(Err(message)) => Err(LedgerError::Write(message)),
            Err(_) => Err(LedgerError::WriterGone),
        }
    }

    /// Closes intents left without a result by a daemon that died, so every call has an ending.
    pub async fn close_interrupted(&self) -> Result<usize, LedgerError> {
        let conn = open_ro(&self.path)?;
        let open: Vec<(String, String, String)> = query_all(
            &conn,
            &self.path,
            "SELECT call_id, surface, command FROM receipts i WHERE kind = 'intent'
             AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.call_id = i.call_id AND r.kind = 'result')
             ORDER BY seq",
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        let count = open.len();
        if count > 0 {
            let rows = open
                .into_iter()
                .map(|(call_id, surface, command)| NewRow {
                    call_id,
                    kind: RowKind::Result,
                    surface,
                    command,
                    body: json!({
                        "ok": false,
                        "outcome": "interrupted",
                        "error": {"code": "interrupted", "message": "the daemon stopped before this call finished"},
                    }),
                })
                .collect();
            self.append(rows).await?;
        }
        Ok(count)
    }
}

fn open_rw(path: &Path) -> Result<Connection, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(sql_err)?;
    // WAL lets readers (the CLI) work beside the writer; synchronous=FULL makes each commit reach
    // the disk before any caller of that batch is answered.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sql_err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sql_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql_err)?;
    conn.execute_batch(SCHEMA).map_err(sql_err)?;
    Ok(conn)
}

/// Opens the store for reading (the CLI's `receipts` commands).
pub fn open_ro(path: &Path) -> Result<Connection, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    if !path.exists() {
        return Err(LedgerError::Other {
            path: path.to_path_buf(),
            message: "no receipt store here yet (the daemon creates it on its first start)".into(),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql_err)?;
    Ok(conn)
}

fn query_all<T>(
    conn: &Connection,
    path: &Path,
    sql: &str,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut stmt = conn.prepare(sql).map_err(sql_err)?;
    let rows = stmt.query_map([], map).map_err(sql_err)?;
    rows.collect::<Result<Vec<T>, _>>().map_err(sql_err)
}

fn last_link(conn: &Connection) -> rusqlite::Result<(i64, String)> {
    Ok(conn
        .query_row(
            "SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, GENESIS_HASH.to_string())))
}

/// The hash of a row: sha256 over the previous hash (hex) followed by the row's canonical text.
pub fn chain_hash(prev_hash: &str, row_text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(row_text.as_bytes());
    hex::encode(hasher.finalize())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn writer_loop(
    mut conn: Connection,
    incoming: mpsc::Receiver<Append>,
    path: PathBuf,
    max_batch: usize,
) {
    while let Ok(first) = incoming.recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match incoming.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        match write_batch(&mut conn, &batch) {
            Ok(seqs) => {
                for (append, seqs) in batch.into_iter().zip(seqs) {
                    let _ = append.reply.send(Ok(seqs));
                }
            }
            Err(err) => {
                tracing::error!(path = %path.display(), error = %err, "writing receipts failed");
                for append in batch {
                    let _ = append.reply.send(Err(err.to_string()));
                }
            }
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &[Append]) -> rusqlite::Result<Vec<Vec<i64>>> {
    let tx = conn.transaction()?;
    let (mut seq, mut prev_hash) = last_link(&tx)?;
    let mut all = Vec::with_capacity(batch.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO receipts (seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for append in batch {
            let mut seqs = Vec::with_capacity(append.rows.len());
            for row in &append.rows {
                seq += 1;
                let at_ms = now_ms();
                let text = canonical_row(seq, at_ms, row);
                let hash = chain_hash(&prev_hash, &text);
                insert.execute(params![
                    seq,
                    row.call_id,
                    row.kind.as_str(),
                    at_ms,
                    row.surface,
                    row.command,
                    text,
                    prev_hash,
                    hash
                ])?;
                prev_hash = hash;
                seqs.push(seq);
            }
            all.push(seqs);
        }
    }
    tx.commit()?;
    Ok(all)
}

/// The exact text that is hashed and stored. Everything a reader relies on is inside it, so the
/// indexed columns cannot be altered without breaking the chain.
fn canonical_row(seq: i64, at_ms: i64, row: &NewRow) -> String {
    json!({
        "seq": seq,
        "call_id": row.call_id,
        "kind": row.kind.as_str(),
        "at_ms": at_ms,
        "surface": row.surface,
        "command": row.command,
        "body": row.body,
    })
    .to_string()
}

/// The first place the chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenLink {
    pub seq: i64,
    pub reason: String,
}

/// Walks the whole chain. `Ok(rows)` when it holds, otherwise the first broken seq.
pub fn verify(conn: &Connection, path: &Path) -> Result<Result<u64, BrokenLink>, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut stmt = conn
        .prepare(
            "SELECT seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash
             FROM receipts ORDER BY seq",
        )
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut expected_prev = GENESIS_HASH.to_string();
    let mut expected_seq = 1i64;
    let mut count = 0u64;
    while let Some(row) = rows.next().map_err(sql_err)? {
        let seq: i64 = row.get(0).map_err(sql_err)?;
        let text: String = row.get(6).map_err(sql_err)?;
        let prev_hash: String = row.get(7).map_err(sql_err)?;
        let hash: String = row.get(8).map_err(sql_err)?;
        let broken = |reason: String| Ok(Err(BrokenLink { seq, reason }));
        if seq != expected_seq {
            return broken(format!("expected seq {expected_seq}: rows are missing"));
        }
        if prev_hash != expected_prev {
            return broken("prev_hash does not match the previous row's hash".into());
        }
        if chain_hash(&prev_hash, &text) != hash {
            return broken("hash does not match the row's content".into());
        }
        let parsed: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(err) => return broken(format!("row text is not JSON: {err}")),
        };
        let columns_agree = parsed["seq"] == json!(seq)
            && parsed["call_id"] == json!(row.get::<_, String>(1).map_err(sql_err)?)
            && parsed["kind"] == json!(row.get::<_, String>(2).map_err(sql_err)?)
            && parsed["at_ms"] == json!(row.get::<_, i64>(3).map_err(sql_err)?)
            && parsed["surface"] == json!(row.get::<_, String>(4).map_err(sql_err)?)
            && parsed["command"] == json!(row.get::<_, String>(5).map_err(sql_err)?);
        if !columns_agree {
            return broken("indexed columns differ from the hashed row".into());
        }
        expected_prev = hash;
        expected_seq += 1;
        count += 1;
    }
    Ok(Ok(count))
}

/// Filters for [`list`].
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub since_ms: Option<i64>,
    pub surface: Option<String>,
    pub call_id: Option<String>,
    pub limit: Option<u64>,
}

/// Rows matching `filter`, oldest first (the newest `limit` when a limit is given).
pub fn list(
    conn: &Connection,
    path: &Path,
    filter: &ListFilter,
) -> Result<Vec<StoredRow>, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut sql = String::from(
        "SELECT seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash FROM receipts WHERE 1=1",
    );
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(since) = filter.since_ms {
        sql.push_str(" AND at_ms >= ?");
        values.push(since.into());
    }
    if let Some(surface) = &filter.surface {
        sql.push_str(" AND surface = ?");
        values.push(surface.clone().into());
    }
    if let Some(call_id) = &filter.call_id {
        sql.push_str(" AND call_id = ?");
        values.push(call_id.clone().into());
    }
    sql.push_str(" ORDER BY seq DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let mut stmt = conn.prepare(&sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(values), |row| {
            let text: String = row.get(6)?;
            Ok(StoredRow {
                seq: row.get(0)?,
                call_id: row.get(1)?,
                kind: row.get(2)?,
                at_ms: row.get(3)?,
                surface: row.get(4)?,
                command: row.get(5)?,
                body: serde_json::from_str::<Value>(&text)
                    .map(|mut v| v["body"].take())
                    .unwrap_or(Value::Null),
                prev_hash: row.get(7)?,
                hash: row.get(8)?,
            })
        })
        .map_err(sql_err)?;
    let mut out = rows.collect::<Result<Vec<_>, _>>().map_err(sql_err)?;
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(call_id: &str, kind: RowKind) -> NewRow {
        NewRow {
            call_id: call_id.into(),
            kind,
            surface: "shell".into(),
            command: "run".into(),
            body: json!({"argv": ["true"]}),
        }
    }

    #[tokio::test]
    async fn concurrent_appends_chain_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        let mut tasks = Vec::new();
        for i in 0..64 {
            let ledger = ledger.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("c{i}");
                ledger
                    .append(vec![row(&id, RowKind::Intent)])
                    .await
                    .unwrap();
                ledger
                    .append(vec![row(&id, RowKind::Result)])
                    .await
                    .unwrap();
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let conn = open_ro(&path).unwrap();
        assert_eq!(verify(&conn, &path).unwrap(), Ok(128));
        let rows = list(
            &conn,
            &path,
            &ListFilter {
                call_id: Some("c7".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].kind, "intent");
        assert_eq!(rows[1].body["argv"][0], "true");
    }

    #[tokio::test]
    async fn tampering_names_the_first_broken_seq() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        for i in 0..5 {
            ledger
                .append(vec![row(&format!("c{i}"), RowKind::Intent)])
                .await
                .unwrap();
        }
        let rw = Connection::open(&path).unwrap();
        rw.execute(
            "UPDATE receipts SET row = replace(row, 'true', 'rm') WHERE seq = 3",
            [],
        )
        .unwrap();
        let conn = open_ro(&path).unwrap();
        let broken = verify(&conn, &path).unwrap().unwrap_err();
        assert_eq!(broken.seq, 3, "{broken:?}");

        rw.execute("DELETE FROM receipts WHERE seq = 3", [])
            .unwrap();
        let broken = verify(&conn, &path).unwrap().unwrap_err();
        assert_eq!(broken.seq, 4, "{broken:?}");
        assert!(broken.reason.contains("missing"), "{broken:?}");
    }

    #[tokio::test]
    async fn interrupted_intents_get_a_result() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        ledger
            .append(vec![
                row("done", RowKind::Intent),
                row("done", RowKind::Result),
            ])
            .await
            .unwrap();
        ledger
            .append(vec![row("open", RowKind::Intent)])
            .await
            .unwrap();
        assert_eq!(ledger.close_interrupted().await.unwrap(), 1);
        assert_eq!(ledger.close_interrupted().await.unwrap(), 0);
        let conn = open_ro(&path).unwrap();
        let rows = list(
            &conn,
            &path,
            &ListFilter {
                call_id: Some("open".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(rows[1].body["outcome"], "interrupted");
        assert_eq!(verify(&conn, &path).unwrap(), Ok(4));
    }
}
