//! What the writer, the verifier and the readers of the ledger share: the rows, the chain's
//! hash, the store's errors, and the store opened to read.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::seal::SealError;

/// The `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

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
    pub(super) fn as_str(self) -> &'static str {
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
    #[error("receipt store: {0}")]
    Seal(#[from] SealError),
    /// The store does not match what the daemon recorded; the daemon will not write on top of it
    /// (its next head would erase the evidence).
    #[error(
        "receipt store {path} does not match what the daemon recorded: {findings}; \
         `computer receipts verify` shows the details; to start a new ledger, move \
         receipts.sqlite, receipts.head and receipts.key out of {dir} (keep them as evidence)"
    )]
    Tampered {
        path: PathBuf,
        dir: String,
        findings: String,
    },
    #[error("the receipt writer has stopped")]
    WriterGone,
    #[error("writing receipts failed: {0}")]
    Write(String),
}

pub(super) fn has_mark_column(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('receipts') WHERE name = 'mark'",
        [],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

pub(super) fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
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

/// The hash of a row: sha256 over the previous hash (hex) followed by the row's canonical text.
pub fn chain_hash(prev_hash: &str, row_text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(row_text.as_bytes());
    hex::encode(hasher.finalize())
}
