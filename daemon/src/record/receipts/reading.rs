//! Rows read back as stored: `list` for `computer receipts`, `rows_after` for `[export]`.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use super::store::{LedgerError, StoredRow};

/// Filters for [`list`].
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub since_ms: Option<i64>,
    pub surface: Option<String>,
    pub call_id: Option<String>,
    pub limit: Option<u64>,
}

/// The columns a [`StoredText`] is read from, in its order.
const ROW_COLUMNS: &str = "seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash";

/// A row as stored: its place in the chain and its canonical text, which its hash covers (what
/// `[export]` sends). [`StoredRow`] is the same row with its body parsed.
#[derive(Debug, Clone, Default)]
pub struct StoredText {
    pub seq: i64,
    pub call_id: String,
    pub kind: String,
    pub at_ms: i64,
    pub surface: String,
    pub command: String,
    pub text: String,
    pub prev_hash: String,
    pub hash: String,
}

impl StoredText {
    fn from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredText> {
        Ok(StoredText {
            seq: row.get(0)?,
            call_id: row.get(1)?,
            kind: row.get(2)?,
            at_ms: row.get(3)?,
            surface: row.get(4)?,
            command: row.get(5)?,
            text: row.get(6)?,
            prev_hash: row.get(7)?,
            hash: row.get(8)?,
        })
    }

    fn parsed(self) -> StoredRow {
        StoredRow {
            seq: self.seq,
            call_id: self.call_id,
            kind: self.kind,
            at_ms: self.at_ms,
            surface: self.surface,
            command: self.command,
            body: serde_json::from_str::<Value>(&self.text)
                .map(|mut v| v["body"].take())
                .unwrap_or(Value::Null),
            prev_hash: self.prev_hash,
            hash: self.hash,
        }
    }
}

/// Up to `limit` rows after `seq`, oldest first, as stored.
pub fn rows_after(
    conn: &Connection,
    path: &Path,
    seq: i64,
    limit: i64,
) -> Result<Vec<StoredText>, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {ROW_COLUMNS} FROM receipts WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([seq, limit], StoredText::from_sql)
        .map_err(sql_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql_err)
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
    let mut sql = format!("SELECT {ROW_COLUMNS} FROM receipts WHERE 1=1");
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
            StoredText::from_sql(row).map(StoredText::parsed)
        })
        .map_err(sql_err)?;
    let mut out = rows.collect::<Result<Vec<_>, _>>().map_err(sql_err)?;
    out.reverse();
    Ok(out)
}
