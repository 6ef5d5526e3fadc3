//! `computer receipts verify`: the whole chain walked, every row since tail protection began
//! checked for the key's mark, and the database's end held against the head the daemon
//! recorded; what is wrong said in words a person understands.

use std::path::Path;

use rusqlite::Connection;
use serde::Serialize;
use serde_json::{Value, json};

use super::seal::{self, HeadFields, HeadRead, LedgerKey};
use super::store::{GENESIS_HASH, LedgerError, chain_hash, has_mark_column, has_table, open_ro};

/// What kind of thing `verify` found wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A row's content, hash, links or seq do not follow from the row before.
    BrokenLink,
    /// A row without the key's mark where the key marks every row.
    ForeignRow,
    /// The database ends before the head the daemon recorded.
    TailDeleted,
    /// The database holds another row where the head points.
    HeadMismatch,
    /// Rows follow the head a cleanly stopped daemon recorded.
    RowsAfterClose,
    HeadMissing,
    HeadInvalid,
    KeyMissing,
}

/// One thing `verify` found wrong, in words a person understands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The first seq concerned, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    pub message: String,
}

fn span(first: i64, last: i64) -> String {
    if first == last {
        format!("seq {first}")
    } else {
        format!("seq {first}\u{2013}{last}")
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

impl Problem {
    fn new(kind: ProblemKind, seq: Option<i64>, message: String) -> Problem {
        Problem { kind, seq, message }
    }

    /// How the database's end (`db_seq`, and the hash it holds at the head's seq) compares with
    /// the head the daemon recorded.
    pub(super) fn against_head(
        head: &HeadFields,
        db_seq: i64,
        hash_at_head: Option<&str>,
    ) -> Option<Problem> {
        if db_seq < head.seq {
            let first = db_seq + 1;
            let count = head.seq - db_seq;
            let message = if db_seq == 0 {
                match count {
                    1 => {
                        "the only receipt (seq 1) was deleted: the database holds none".to_string()
                    }
                    _ => format!(
                        "all {count} receipts ({}) were deleted: the database holds none",
                        span(1, head.seq)
                    ),
                }
            } else {
                let what = match count {
                    1 => format!("the last receipt ({}) was deleted", span(first, head.seq)),
                    _ => format!(
                        "the last {count} receipts ({}) were deleted",
                        span(first, head.seq)
                    ),
                };
                format!(
                    "{what}: the daemon recorded seq {} as the newest, the database ends at seq {db_seq}",
                    head.seq
                )
            };
            return Some(Problem::new(ProblemKind::TailDeleted, Some(first), message));
        }
        match hash_at_head {
            Some(hash) if hash == head.hash => None,
            found => Some(Problem::new(
                ProblemKind::HeadMismatch,
                Some(head.seq),
                format!(
                    "the database does not match the chain head the daemon recorded: at seq {} \
                     the daemon recorded hash {}\u{2026}, the database holds {} (the file was \
                     replaced, or its rows rewritten and the chain recomputed)",
                    head.seq,
                    short(&head.hash),
                    found
                        .map(|hash| format!("{}\u{2026}", short(hash)))
                        .unwrap_or_else(|| "no such row".into())
                ),
            )),
        }
    }

    pub(super) fn after_close(head: &HeadFields, db_seq: i64) -> Option<Problem> {
        (head.closed && db_seq > head.seq).then(|| {
            let count = db_seq - head.seq;
            Problem::new(
                ProblemKind::RowsAfterClose,
                Some(head.seq + 1),
                format!(
                    "{count} receipt{} ({}) follow{} the head the daemon recorded when it last \
                     stopped cleanly: the daemon did not write {}",
                    if count == 1 { "" } else { "s" },
                    span(head.seq + 1, db_seq),
                    if count == 1 { "s" } else { "" },
                    if count == 1 { "it" } else { "them" },
                ),
            )
        })
    }

    /// A row that should carry the key's mark and does not.
    pub(super) fn foreign(
        key: &LedgerKey,
        seq: i64,
        hash: &str,
        mark: Option<&str>,
    ) -> Option<Problem> {
        let why = match mark {
            None => "it has no key mark",
            Some(mark) if !key.row_mark_holds(hash, mark) => "its key mark does not match",
            Some(_) => return None,
        };
        Some(Problem::new(
            ProblemKind::ForeignRow,
            Some(seq),
            format!(
                "receipt seq {seq} was not written by the daemon: {why} (a row inserted or \
                 rewritten, or a chain recomputed, by someone without the key)"
            ),
        ))
    }

    pub(super) fn key_missing(path: &Path, first_marked: i64) -> Problem {
        Problem::new(
            ProblemKind::KeyMissing,
            Some(first_marked),
            format!(
                "the receipts key ({}) is missing, yet receipts from seq {first_marked} on carry \
                 its marks: it was deleted, and those receipts cannot be checked",
                path.display()
            ),
        )
    }

    pub(super) fn key_missing_beside_head(path: &Path) -> Problem {
        Problem::new(
            ProblemKind::KeyMissing,
            None,
            format!(
                "the receipts key ({}) is missing, yet the chain head it sealed is still there: \
                 it was deleted, and the head cannot be checked",
                path.display()
            ),
        )
    }

    pub(super) fn head_missing(path: &Path, first_marked: i64) -> Problem {
        Problem::new(
            ProblemKind::HeadMissing,
            Some(first_marked),
            format!(
                "the chain head ({}) is missing, yet receipts from seq {first_marked} on carry \
                 key marks: it was deleted, so a cut tail cannot be ruled out",
                path.display()
            ),
        )
    }

    pub(super) fn head_invalid(path: &Path) -> Problem {
        Problem::new(
            ProblemKind::HeadInvalid,
            None,
            format!(
                "the chain head ({}) does not carry the key's mark: it was altered or replaced",
                path.display()
            ),
        )
    }
}

/// What `verify` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Rows walked.
    pub rows: u64,
    /// Everything wrong, most telling first; empty when the ledger holds.
    pub problems: Vec<Problem>,
    /// What holds but is worth knowing (older rows without tail protection, rows newer than the
    /// head).
    pub notes: Vec<String>,
    /// The head the daemon recorded, when there is a valid one.
    pub head: Option<HeadFields>,
}

impl Verdict {
    pub fn holds(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the whole ledger at `path`: every link of the chain, the key's mark on every row
/// written since tail protection began, and the database's end against the head the daemon
/// recorded (the live daemon's, when one runs: it rewrites the head after every commit).
pub fn verify(path: &Path) -> Result<Verdict, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let key_file = seal::key_path(path);
    let head_file = seal::head_path(path);
    // The head is read before the database: the daemon records a head only after its rows are
    // committed, so a head read first never runs ahead of the snapshot read next.
    let key = LedgerKey::load(&key_file)?;
    let head = match &key {
        Some(key) => seal::read_head(&head_file, key)?,
        None => HeadRead::Missing,
    };
    let mut verdict = Verdict::default();
    // A store that is gone is "no store yet", unless a head says receipts were recorded: then
    // every one of them was deleted, which the head comparison below names.
    let conn = if path.exists() || !matches!(head, HeadRead::Found { .. }) {
        Some(open_ro(path)?)
    } else {
        None
    };
    let walk = match &conn {
        Some(conn) => {
            conn.execute_batch("BEGIN").map_err(sql_err)?;
            let walk = walk_chain(conn, path, key.as_ref(), &head);
            let _ = conn.execute_batch("COMMIT");
            walk?
        }
        None => Walk::default(),
    };
    verdict.rows = walk.rows;
    verdict.problems.extend(walk.broken);
    match (&key, &head, walk.first_marked) {
        (None, _, Some(first)) => verdict
            .problems
            .push(Problem::key_missing(&key_file, first)),
        (None, _, None) if head_file.exists() => verdict
            .problems
            .push(Problem::key_missing_beside_head(&key_file)),
        (None, _, None) => verdict.notes.push(
            "this ledger has no key or chain head yet (an older daemon wrote it): the chain \
             holds, but a cut tail would not show; tail protection starts the next time the \
             daemon starts"
                .into(),
        ),
        (Some(_), HeadRead::Invalid, _) => verdict.problems.push(Problem::head_invalid(&head_file)),
        (Some(_), HeadRead::Missing, Some(first)) => verdict
            .problems
            .push(Problem::head_missing(&head_file, first)),
        (Some(_), HeadRead::Missing, None) => verdict.notes.push(
            "no chain head yet (the daemon creates it at start, after the key): a cut tail \
             would not show until it does"
                .into(),
        ),
        (Some(_), HeadRead::Found { head, damaged }, _) => {
            if let Some(problem) =
                Problem::against_head(head, walk.last_seq, walk.hash_at_head.as_deref())
            {
                verdict.problems.insert(0, problem);
            } else if let Some(problem) = Problem::after_close(head, walk.last_seq) {
                verdict.problems.insert(0, problem);
            } else if walk.last_seq > head.seq {
                let count = walk.last_seq - head.seq;
                verdict.notes.push(format!(
                    "{count} receipt{} ({}) {} newer than the recorded head (written since it \
                     was read, or just before the daemon stopped without recording it); each \
                     carries the daemon's key mark",
                    if count == 1 { "" } else { "s" },
                    span(head.seq + 1, walk.last_seq),
                    if count == 1 { "is" } else { "are" },
                ));
            }
            if *damaged > 0 {
                verdict.notes.push(
                    "one of the head's two copies was damaged (a power cut during its write, or \
                     tampering); the other copy was used"
                        .into(),
                );
            }
            if head.keyed_since > 1 && walk.last_seq > 0 {
                verdict.notes.push(format!(
                    "receipts {} were written before tail protection began (by an older daemon); \
                     the key marks every receipt from seq {} on",
                    span(1, (head.keyed_since - 1).min(walk.last_seq)),
                    head.keyed_since
                ));
            }
            verdict.head = Some(head.clone());
        }
    }
    Ok(verdict)
}

/// What one pass over the rows found.
#[derive(Default)]
struct Walk {
    rows: u64,
    last_seq: i64,
    /// The hash of the row at the head's seq, if there is such a row.
    hash_at_head: Option<String>,
    first_marked: Option<i64>,
    /// The first broken link and the first foreign row.
    broken: Vec<Problem>,
}

fn walk_chain(
    conn: &Connection,
    path: &Path,
    key: Option<&LedgerKey>,
    head: &HeadRead,
) -> Result<Walk, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut walk = Walk::default();
    let (head_seq, keyed_since) = match head {
        HeadRead::Found { head, .. } => (head.seq, Some(head.keyed_since)),
        _ => (0, None),
    };
    if head_seq == 0 {
        walk.hash_at_head = Some(GENESIS_HASH.to_string());
    }
    // A file someone replaced with an empty database has no table: it holds no receipts.
    if !has_table(conn, "receipts").map_err(sql_err)? {
        return Ok(walk);
    }
    let mark = if has_mark_column(conn).map_err(sql_err)? {
        "mark"
    } else {
        "NULL"
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash, {mark}
             FROM receipts ORDER BY seq"
        ))
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut expected_prev = GENESIS_HASH.to_string();
    let mut expected_seq = 1i64;
    let mut chain_broken = false;
    let mut foreign_found = false;
    while let Some(row) = rows.next().map_err(sql_err)? {
        let seq: i64 = row.get(0).map_err(sql_err)?;
        let text: String = row.get(6).map_err(sql_err)?;
        let prev_hash: String = row.get(7).map_err(sql_err)?;
        let hash: String = row.get(8).map_err(sql_err)?;
        let row_mark: Option<String> = row.get(9).map_err(sql_err)?;
        walk.rows += 1;
        walk.last_seq = seq;
        if seq == head_seq {
            walk.hash_at_head = Some(hash.clone());
        }
        if row_mark.is_some() && walk.first_marked.is_none() {
            walk.first_marked = Some(seq);
        }
        if !chain_broken {
            let reason = if seq != expected_seq {
                Some(format!("expected seq {expected_seq}: rows are missing"))
            } else if prev_hash != expected_prev {
                Some("prev_hash does not match the previous row's hash".into())
            } else if chain_hash(&prev_hash, &text) != hash {
                Some("hash does not match the row's content".into())
            } else {
                match serde_json::from_str::<Value>(&text) {
                    Err(err) => Some(format!("row text is not JSON: {err}")),
                    Ok(parsed) => {
                        let columns_agree = parsed["seq"] == json!(seq)
                            && parsed["call_id"]
                                == json!(row.get::<_, String>(1).map_err(sql_err)?)
                            && parsed["kind"] == json!(row.get::<_, String>(2).map_err(sql_err)?)
                            && parsed["at_ms"] == json!(row.get::<_, i64>(3).map_err(sql_err)?)
                            && parsed["surface"]
                                == json!(row.get::<_, String>(4).map_err(sql_err)?)
                            && parsed["command"]
                                == json!(row.get::<_, String>(5).map_err(sql_err)?);
                        (!columns_agree)
                            .then(|| "indexed columns differ from the hashed row".into())
                    }
                }
            };
            if let Some(reason) = reason {
                chain_broken = true;
                walk.broken.push(Problem::new(
                    ProblemKind::BrokenLink,
                    Some(seq),
                    format!("the chain is broken at seq {seq}: {reason}"),
                ));
            }
        }
        if !foreign_found
            && let (Some(key), Some(keyed_since)) = (key, keyed_since)
            && seq >= keyed_since
            && let Some(problem) = Problem::foreign(key, seq, &hash, row_mark.as_deref())
        {
            foreign_found = true;
            walk.broken.push(problem);
        }
        expected_prev = hash;
        expected_seq = seq + 1;
    }
    Ok(walk)
}
