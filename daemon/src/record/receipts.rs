//! The receipts ledger: a hash-chained, append-only SQLite table with one writer at a time (the
//! caller itself when the writer is free, else a writer thread that commits concurrent appends
//! together: group commit); an intent is on disk before its caller is answered, a result right
//! after; every row marked with the ledger's key and the chain's head
//! recorded once its rows are on disk, so that a cut tail, a replaced database or rows written
//! by someone else show in `verify`.
//!
//! # Layout
//! - this file: the writer ([`Ledger`]), [`verify`], [`list`].
//! - [`seal`]: the key and the head files.

pub mod seal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use seal::{HeadFields, HeadRead, HeadWriter, LedgerKey, SealError};

/// The `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Most appends folded into one transaction.
pub const MAX_BATCH: usize = 1024;

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
    hash      TEXT    NOT NULL,
    mark      TEXT
);
CREATE INDEX IF NOT EXISTS receipts_call_id ON receipts (call_id);
CREATE INDEX IF NOT EXISTS receipts_at_ms ON receipts (at_ms);
CREATE TABLE IF NOT EXISTS open_calls (
    call_id TEXT PRIMARY KEY,
    seq     INTEGER NOT NULL,
    surface TEXT NOT NULL,
    command TEXT NOT NULL
) WITHOUT ROWID;
";

/// The calls whose intent has no result yet, found the slow way: every intent of the ledger
/// against its results. Run once, to fill `open_calls` in a store from before it.
const OPEN_CALLS_SCAN: &str = "
INSERT OR IGNORE INTO open_calls (call_id, seq, surface, command)
SELECT call_id, MIN(seq), surface, command FROM receipts i WHERE kind = 'intent'
AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.call_id = i.call_id AND r.kind = 'result')
GROUP BY call_id;
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

struct Append {
    rows: Vec<NewRow>,
    reply: tokio::sync::oneshot::Sender<Result<Vec<i64>, String>>,
}

enum Message {
    Append(Append),
    /// A caller committed results itself and answered before they reached the disk: sync them
    /// within [`RESULT_SYNC_WINDOW`], unless an intent's commit does first.
    SyncSoon,
    /// Checkpoint the WAL, record a closed head and stop.
    Close(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// A handle to the ledger's writer. Cloning is cheap; all clones share one writer.
#[derive(Clone)]
pub struct Ledger {
    messages: mpsc::Sender<Message>,
    path: PathBuf,
    /// The writer's state, once open; `None` after a close. Whoever holds it commits: the
    /// writer thread for what was queued, or a caller that finds it free.
    writer: Shared,
}

/// The writer's state, shared by the writer thread and the callers.
type Shared = Arc<Mutex<Option<WriterLoop>>>;

/// A ledger whose writer thread is still opening and checking the store: appends cannot be
/// made until [`Opening::opened`] says it holds.
pub struct Opening {
    ledger: Ledger,
    ready: tokio::sync::oneshot::Receiver<Result<usize, LedgerError>>,
}

impl Opening {
    /// Waits for the writer thread to have opened the store, checked it against the head the
    /// previous daemon recorded, and closed the calls that daemon left without a result; returns
    /// the ledger and how many calls it closed.
    pub async fn opened(self) -> Result<(Ledger, usize), LedgerError> {
        match self.ready.await {
            Ok(Ok(interrupted)) => Ok((self.ledger, interrupted)),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(LedgerError::WriterGone),
        }
    }
}

impl Ledger {
    /// Opens (creating if needed) the store at `path` on its writer thread. Refuses a store that
    /// does not match the head the daemon recorded (a cut tail, a replaced file, rows someone
    /// else wrote).
    pub async fn open(path: &Path) -> Result<Ledger, LedgerError> {
        Ledger::start(path, MAX_BATCH)
            .opened()
            .await
            .map(|(ledger, _)| ledger)
    }

    /// Starts the writer thread, which opens and checks the store while the caller goes on (the
    /// daemon builds its surfaces meanwhile). `max_batch` caps appends per commit; 1 turns group
    /// commit off (the benchmark's anchor).
    pub fn start(path: &Path, max_batch: usize) -> Opening {
        let (messages, incoming) = mpsc::channel::<Message>();
        let (ready, opened) = tokio::sync::oneshot::channel();
        let writer_path = path.to_path_buf();
        let shared: Shared = Arc::new(Mutex::new(None));
        let thread_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("receipts-writer".into())
            .spawn(move || {
                let opened = open_rw(&writer_path).and_then(|conn| {
                    let writer = take_over(&conn, &writer_path)?;
                    let mut writer = WriterLoop::new(conn, writer, writer_path);
                    let interrupted = writer.close_interrupted()?;
                    writer.release_memory();
                    Ok((writer, interrupted))
                });
                match opened {
                    Ok((writer, interrupted)) => {
                        *lock(&thread_shared) = Some(writer);
                        let _ = ready.send(Ok(interrupted));
                        WriterLoop::run(&thread_shared, incoming, max_batch.max(1));
                    }
                    Err(err) => {
                        let _ = ready.send(Err(err));
                    }
                }
            });
        let ledger = Ledger {
            messages,
            path: path.to_path_buf(),
            writer: shared,
        };
        let ready = match spawned {
            Ok(_) => opened,
            Err(err) => {
                let (failed, opened) = tokio::sync::oneshot::channel();
                let _ = failed.send(Err(LedgerError::Other {
                    path: path.to_path_buf(),
                    message: format!("cannot start the writer thread: {err}"),
                }));
                opened
            }
        };
        Opening { ledger, ready }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends rows as one unit, returning their seqs once they are committed. A unit holding an
    /// intent is answered only once it is on disk and the head covers it (the action waits for
    /// its intent); a unit of results only is answered once committed, and reaches the disk right
    /// after (see [`WriterLoop::run`]). Committed on the calling thread if the writer is free
    /// ([`Ledger::append_in_place`]), else by the writer thread.
    pub async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<i64>, LedgerError> {
        if let Some(committed) = self.append_in_place(&rows) {
            return committed;
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.messages
            .send(Message::Append(Append { rows, reply }))
            .map_err(|_| LedgerError::WriterGone)?;
        match answer.await {
            Ok(Ok(seqs)) => Ok(seqs),
            Ok(Err(message)) => Err(LedgerError::Write(message)),
            Err(_) => Err(LedgerError::WriterGone),
        }
    }

    /// Commits `rows` on the calling thread when the writer is free (nobody committing), instead
    /// of handing them to the writer thread: on a machine where waking a thread is dear, the
    /// hand-off and the answer were two wake-ups on every call's path. The worker first lends
    /// its other tasks to another thread (tokio's `block_in_place`), as the writer thread would
    /// have left them free. `None` when the writer is busy or closed, or the runtime has one
    /// thread: the writer thread takes the rows then.
    fn append_in_place(&self, rows: &[NewRow]) -> Option<Result<Vec<i64>, LedgerError>> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        if !Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread)
        {
            return None;
        }
        let mut guard = self.writer.try_lock().ok()?;
        let writer = guard.as_mut()?;
        let was_synced = writer.unsynced == 0;
        let committed = tokio::task::block_in_place(|| writer.commit_units(&[rows]));
        if was_synced && writer.unsynced > 0 {
            // The writer thread syncs them within the window, or the next intent does.
            let _ = self.messages.send(Message::SyncSoon);
        }
        Some(
            committed
                .map(|mut seqs| seqs.pop().unwrap_or_default())
                .map_err(LedgerError::Write),
        )
    }

    /// Stops the writer after what is queued: checkpoints the WAL into the database (TRUNCATE)
    /// and records the head as closed, so that no row may follow it. Appends after this fail.
    pub async fn close(&self) -> Result<(), LedgerError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.messages
            .send(Message::Close(reply))
            .map_err(|_| LedgerError::WriterGone)?;
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(LedgerError::Write(message)),
            Err(_) => Err(LedgerError::WriterGone),
        }
    }
}

/// WAL pages after which a commit checkpoints them into the store (SQLite's default is 1000).
/// Once checkpointed, the WAL is written again from its start, over blocks the file already
/// has; until then every commit lengthens it, and syncing a file that grew costs the disk a
/// metadata write on top of the frames (on the development VM, five pages and their sync took
/// 0.21 ms at the end of a file and 0.14 ms over blocks it had). An act's two commits write
/// about nine pages: at the default, a daemon's first hundred or so acts after every start paid
/// for a growing WAL; at this size, about the first thirty do. Smaller costs more checkpoints
/// (each syncs the store too): at 128 a run of shell calls lost what the clicks gained
/// (BENCHMARKS.md).
const WAL_CHECKPOINT_PAGES: i64 = 256;

/// The writer's state, even if a thread panicked holding it: every commit is one transaction,
/// so a panic cannot leave it half-written.
fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Option<WriterLoop>> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn open_rw(path: &Path) -> Result<Connection, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(sql_err)?;
    // WAL lets readers (the CLI) work beside the writer. synchronous=NORMAL: a commit is in the
    // WAL when it returns, and the writer syncs the WAL itself (`Durability`), before it answers
    // for an intent, right after for results only.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sql_err)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql_err)?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)
        .map_err(sql_err)?;
    let had_open_calls = has_table(&conn, "open_calls").map_err(sql_err)?;
    conn.execute_batch(SCHEMA).map_err(sql_err)?;
    // `open_calls` lists the calls without a result as rows are written, so that closing them at
    // start reads a handful of rows instead of the whole ledger; a store from before it is
    // scanned for them once.
    if !had_open_calls {
        conn.execute_batch(OPEN_CALLS_SCAN).map_err(sql_err)?;
    }
    // Stores from before the key have no `mark` column; their rows stay unmarked.
    if !has_mark_column(&conn).map_err(sql_err)? {
        conn.execute_batch("ALTER TABLE receipts ADD COLUMN mark TEXT")
            .map_err(sql_err)?;
    }
    Ok(conn)
}

fn has_mark_column(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('receipts') WHERE name = 'mark'",
        [],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
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

/// The writer's state: the chain's last link, kept in memory so that a row slipped into the
/// table by someone else is never chained onto (its seq collides with the writer's next one and
/// that commit fails), and the head it records once a commit is on disk.
struct Writer {
    seq: i64,
    hash: String,
    key: LedgerKey,
    head: HeadWriter,
}

/// Checks the store against the key and head a previous daemon left, and takes over as their
/// writer. A store without either (new, or written by an older daemon) gets a key now; tail
/// protection starts at its next seq.
fn take_over(conn: &Connection, path: &Path) -> Result<Writer, LedgerError> {
    let sql_err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let tampered = |findings: String| LedgerError::Tampered {
        path: path.to_path_buf(),
        dir: path
            .parent()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default(),
        findings,
    };
    let (seq, hash) = last_link(conn).map_err(sql_err)?;
    let first_marked: Option<i64> = conn
        .query_row(
            "SELECT MIN(seq) FROM receipts WHERE mark IS NOT NULL",
            [],
            |row| row.get(0),
        )
        .map_err(sql_err)?;
    let key_file = seal::key_path(path);
    let head_file = seal::head_path(path);
    let key = match (LedgerKey::load(&key_file)?, first_marked) {
        (Some(key), _) => key,
        (None, Some(first)) => {
            return Err(tampered(Problem::key_missing(&key_file, first).message));
        }
        (None, None) if head_file.exists() => {
            return Err(tampered(
                Problem::key_missing_beside_head(&key_file).message,
            ));
        }
        (None, None) => LedgerKey::create(&key_file)?,
    };
    let keyed_since = match (seal::read_head(&head_file, &key)?, first_marked) {
        (HeadRead::Found { head, damaged }, _) => {
            if damaged > 0 {
                tracing::warn!(head = %head_file.display(), "one copy of the receipts head was damaged (a power cut mid-write, or tampering); the other was used");
            }
            let hash_at_head = hash_at(conn, head.seq).map_err(sql_err)?;
            let mut problems: Vec<Problem> =
                Problem::against_head(&head, seq, hash_at_head.as_deref())
                    .into_iter()
                    .collect();
            let mut after = conn
                .prepare("SELECT seq, hash, mark FROM receipts WHERE seq > ?1 ORDER BY seq")
                .map_err(sql_err)?;
            let rows = after
                .query_map([head.seq], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                })
                .map_err(sql_err)?;
            for row in rows {
                let (row_seq, row_hash, mark) = row.map_err(sql_err)?;
                if let Some(problem) = Problem::foreign(&key, row_seq, &row_hash, mark.as_deref()) {
                    problems.push(problem);
                    break;
                }
            }
            if problems.is_empty()
                && let Some(problem) = Problem::after_close(&head, seq)
            {
                problems.push(problem);
            }
            if !problems.is_empty() {
                let findings: Vec<String> = problems.into_iter().map(|p| p.message).collect();
                return Err(tampered(findings.join("; ")));
            }
            head.keyed_since
        }
        (HeadRead::Invalid, _) => return Err(tampered(Problem::head_invalid(&head_file).message)),
        (HeadRead::Missing, Some(first)) => {
            return Err(tampered(Problem::head_missing(&head_file, first).message));
        }
        (HeadRead::Missing, None) => {
            if seq > 0 {
                tracing::info!(
                    rows = seq,
                    "receipts written by an older daemon: tail protection starts at seq {}",
                    seq + 1
                );
            }
            seq + 1
        }
    };
    let head = HeadWriter::open(
        &head_file,
        key.clone(),
        HeadFields {
            seq,
            hash: hash.clone(),
            keyed_since,
            closed: false,
        },
    )?;
    Ok(Writer {
        seq,
        hash,
        key,
        head,
    })
}

fn hash_at(conn: &Connection, seq: i64) -> rusqlite::Result<Option<String>> {
    if seq == 0 {
        return Ok(Some(GENESIS_HASH.to_string()));
    }
    conn.query_row("SELECT hash FROM receipts WHERE seq = ?1", [seq], |row| {
        row.get(0)
    })
    .optional()
}

/// Commits whose rows are on disk before the head may name them: a head past what the disk
/// holds would read, after a power cut, as a cut tail. The connection commits with `synchronous
/// = NORMAL` (the commit is in the WAL: safe from a killed daemon, not yet from a power cut);
/// the writer syncs the WAL itself, so that the mode is never switched between commits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// The WAL is synced before the commit's callers are answered.
    OnCommit,
    /// The WAL is synced right after its callers are answered (within
    /// [`RESULT_SYNC_WINDOW`]).
    AfterReply,
}

/// Results-only commits left unsynced while more appends keep arriving, at most.
const MAX_UNSYNCED_COMMITS: usize = 16;

/// How long a committed, answered result waits for the next append before the writer syncs it
/// alone. An agent's next call follows its reply within a fraction of a millisecond; its intent's
/// synced commit then covers the result too, instead of queueing behind a sync of its own (one
/// wait for the disk per action, not two). A result with no call after it reaches the disk this
/// much later than its reply, at most.
const RESULT_SYNC_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);

/// The writer thread: one connection, the chain's last link, and what of it is on disk.
struct WriterLoop {
    conn: Connection,
    writer: Writer,
    path: PathBuf,
    /// Commits made in [`Durability::AfterReply`] mode and not yet synced.
    unsynced: usize,
    /// The WAL (SQLite's `-wal` file beside the store), opened on first need, to sync it.
    wal_path: PathBuf,
    wal: Option<std::fs::File>,
}

impl WriterLoop {
    fn new(conn: Connection, writer: Writer, path: PathBuf) -> WriterLoop {
        WriterLoop {
            conn,
            writer,
            unsynced: 0,
            wal_path: PathBuf::from(format!("{}-wal", path.display())),
            wal: None,
            path,
        }
    }

    /// Closes intents left without a result by a daemon that died, so every call has an ending.
    fn close_interrupted(&mut self) -> Result<usize, LedgerError> {
        let open: Vec<(String, String, String)> = query_all(
            &self.conn,
            &self.path,
            "SELECT call_id, surface, command FROM open_calls ORDER BY seq",
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        let count = open.len();
        if count > 0 {
            let rows: Vec<NewRow> = open
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
            self.commit(&[rows.as_slice()], Durability::OnCommit)
                .map_err(|source| LedgerError::Sqlite {
                    path: self.path.clone(),
                    source,
                })?;
            self.record_head();
            tracing::warn!(
                interrupted = count,
                "closed calls left unfinished by a previous daemon"
            );
        }
        Ok(count)
    }

    /// Gives back the page cache that checking the store filled, and keeps it small from then
    /// on: an append touches the right edge of the table and its two indexes (a few dozen
    /// pages even for a large ledger), so a bigger cache only holds rows already written, and a
    /// daemon should not grow by its ledger's recent pages (SQLite's default is 2 MiB).
    fn release_memory(&self) {
        if let Err(err) = self
            .conn
            .execute_batch("PRAGMA shrink_memory; PRAGMA cache_size = -128")
        {
            tracing::debug!(error = %err, "the receipts store kept its cache");
        }
    }

    /// Serves the appends callers could not commit themselves (the writer was busy), until
    /// closed or every handle is gone. Appends waiting together are committed together (group
    /// commit). A commit holding an intent is synced before anyone is answered: an action runs
    /// only once its intent is on disk. A commit of results only is answered once committed and
    /// synced right after, unless more appends arrive within [`RESULT_SYNC_WINDOW`] (their
    /// commit, or the sync after it, covers it): one wait for the disk per action. Results a
    /// caller committed itself are synced the same way ([`Message::SyncSoon`]).
    fn run(shared: &Shared, incoming: mpsc::Receiver<Message>, max_batch: usize) {
        let mut closing = None;
        let mut waiting: Option<Message> = None;
        while closing.is_none() {
            let first = match waiting.take() {
                Some(message) => message,
                None => match incoming.recv() {
                    Ok(message) => message,
                    Err(_) => break,
                },
            };
            let mut batch = Vec::new();
            let take = |message, batch: &mut Vec<Append>, closing: &mut Option<_>| match message {
                Message::Append(append) => batch.push(append),
                Message::SyncSoon => {}
                Message::Close(reply) => *closing = Some(reply),
            };
            take(first, &mut batch, &mut closing);
            while closing.is_none() && batch.len() < max_batch {
                match incoming.try_recv() {
                    Ok(message) => take(message, &mut batch, &mut closing),
                    Err(_) => break,
                }
            }
            let mut guard = lock(shared);
            let Some(writer) = guard.as_mut() else { break };
            if !batch.is_empty() {
                let units: Vec<&[NewRow]> =
                    batch.iter().map(|append| append.rows.as_slice()).collect();
                match writer.commit_units(&units) {
                    Ok(seqs) => {
                        for (append, seqs) in batch.into_iter().zip(seqs) {
                            let _ = append.reply.send(Ok(seqs));
                        }
                    }
                    Err(message) => {
                        for append in batch {
                            let _ = append.reply.send(Err(message.clone()));
                        }
                    }
                }
            }
            if writer.unsynced == 0 || closing.is_some() {
                continue;
            }
            if writer.unsynced >= MAX_UNSYNCED_COMMITS {
                writer.sync_wal();
                continue;
            }
            // Callers may commit while this waits: the writer is not held.
            drop(guard);
            match incoming.recv_timeout(RESULT_SYNC_WINDOW) {
                Ok(message) => waiting = Some(message),
                Err(_) => {
                    if let Some(writer) = lock(shared).as_mut()
                        && writer.unsynced > 0
                    {
                        writer.sync_wal();
                    }
                }
            }
        }
        let Some(mut writer) = lock(shared).take() else {
            return;
        };
        match closing {
            Some(reply) => {
                let _ = reply.send(writer.close());
            }
            // Every handle is gone without a close: what was answered still reaches the disk.
            None if writer.unsynced > 0 => writer.sync_wal(),
            None => {}
        }
    }

    /// Commits `units` (each appended as one) in one transaction: synced first if it holds an
    /// intent (and the head recorded), else left for a later sync.
    fn commit_units(&mut self, units: &[&[NewRow]]) -> Result<Vec<Vec<i64>>, String> {
        let durability = if units
            .iter()
            .flat_map(|rows| rows.iter())
            .any(|row| row.kind == RowKind::Intent)
        {
            Durability::OnCommit
        } else {
            Durability::AfterReply
        };
        match self.commit(units, durability) {
            Ok(seqs) => {
                if durability == Durability::OnCommit {
                    // On disk, with every earlier commit: the head covers them before anyone
                    // learns their ids.
                    self.record_head();
                } else {
                    self.unsynced += 1;
                }
                Ok(seqs)
            }
            Err(err) => {
                let message = match &err {
                    rusqlite::Error::SqliteFailure(code, _)
                        if code.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        format!(
                            "{err} (seq {} is taken: someone other than the daemon wrote to the ledger)",
                            self.writer.seq + 1
                        )
                    }
                    _ => err.to_string(),
                };
                tracing::error!(path = %self.path.display(), error = %message, "writing receipts failed");
                Err(message)
            }
        }
    }

    /// Commits `units` (each appended as one) in one transaction, with `durability`.
    fn commit(
        &mut self,
        units: &[&[NewRow]],
        durability: Durability,
    ) -> rusqlite::Result<Vec<Vec<i64>>> {
        let seqs = write_batch(&mut self.conn, &mut self.writer, units)?;
        if durability == Durability::OnCommit {
            self.sync_data().map_err(|err| {
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_FSYNC),
                    Some(format!(
                        "syncing the WAL ({}): {err}",
                        self.wal_path.display()
                    )),
                )
            })?;
            self.unsynced = 0;
        }
        Ok(seqs)
    }

    /// Syncs the WAL (SQLite's `-wal` file beside the store), which holds every commit made
    /// since the last sync.
    fn sync_data(&mut self) -> std::io::Result<()> {
        let wal = match &self.wal {
            Some(wal) => wal,
            None => self.wal.insert(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&self.wal_path)?,
            ),
        };
        wal.sync_data()
    }

    /// Syncs the commits answered before they reached the disk, and records the head.
    fn sync_wal(&mut self) {
        if let Err(err) = self.sync_data() {
            tracing::error!(path = %self.wal_path.display(), error = %err, "syncing the WAL failed; the head waits for the next synced commit");
            return;
        }
        self.unsynced = 0;
        self.record_head();
    }

    /// Records the chain's last link in the head: only once it is on disk.
    fn record_head(&mut self) {
        if let Err(err) = self.writer.head.record(self.writer.seq, &self.writer.hash) {
            tracing::error!(error = %err, "recording the receipts head failed; a cut tail may go unnoticed");
        }
    }

    /// Syncs what is left, checkpoints the WAL and records the head as closed.
    fn close(mut self) -> Result<(), String> {
        if self.unsynced > 0 {
            self.sync_wal();
        }
        // A reader (a `receipts verify` running now) can hold the WAL past the busy timeout; the
        // rows are durable in the WAL either way, so that only leaves the WAL for the next start.
        match self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            }) {
            Ok(0) => {}
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "the WAL was not checkpointed at shutdown: a reader held it")
            }
            Err(err) => {
                tracing::warn!(path = %self.path.display(), error = %err, "the WAL was not checkpointed at shutdown")
            }
        }
        // A head closed short of rows that are not on disk would make them foreign at the next
        // start; left open, it is only older than the database, which a start accepts.
        let closed = if self.unsynced > 0 {
            Err("the last receipts could not be synced; the head is left open".to_string())
        } else {
            self.writer
                .head
                .close()
                .map_err(|err| format!("recording the closed head failed: {err}"))
        };
        if let Err(message) = &closed {
            tracing::error!(path = %self.path.display(), error = %message, "closing the receipts ledger");
        }
        closed
    }
}

fn write_batch(
    conn: &mut Connection,
    writer: &mut Writer,
    units: &[&[NewRow]],
) -> rusqlite::Result<Vec<Vec<i64>>> {
    let tx = conn.transaction()?;
    let (mut seq, mut prev_hash) = (writer.seq, writer.hash.clone());
    let mut all = Vec::with_capacity(units.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO receipts (seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash, mark)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?;
        let mut opened = tx.prepare_cached(
            "INSERT OR IGNORE INTO open_calls (call_id, seq, surface, command) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut closed = tx.prepare_cached("DELETE FROM open_calls WHERE call_id = ?1")?;
        for rows in units {
            let mut seqs = Vec::with_capacity(rows.len());
            for row in rows.iter() {
                seq += 1;
                let at_ms = now_ms();
                let text = canonical_row(seq, at_ms, row);
                let hash = chain_hash(&prev_hash, &text);
                let mark = writer.key.mark_row(&hash);
                insert.execute(params![
                    seq,
                    row.call_id,
                    row.kind.as_str(),
                    at_ms,
                    row.surface,
                    row.command,
                    text,
                    prev_hash,
                    hash,
                    mark
                ])?;
                // A call asked for approval has two intents (asked, then decided): the first
                // opens it, one result closes it.
                match row.kind {
                    RowKind::Intent => {
                        opened.execute(params![row.call_id, seq, row.surface, row.command])?
                    }
                    RowKind::Result => closed.execute(params![row.call_id])?,
                };
                prev_hash = hash;
                seqs.push(seq);
            }
            all.push(seqs);
        }
    }
    tx.commit()?;
    writer.seq = seq;
    writer.hash = prev_hash;
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
    fn against_head(head: &HeadFields, db_seq: i64, hash_at_head: Option<&str>) -> Option<Problem> {
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

    fn after_close(head: &HeadFields, db_seq: i64) -> Option<Problem> {
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
    fn foreign(key: &LedgerKey, seq: i64, hash: &str, mark: Option<&str>) -> Option<Problem> {
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

    fn key_missing(path: &Path, first_marked: i64) -> Problem {
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

    fn key_missing_beside_head(path: &Path) -> Problem {
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

    fn head_missing(path: &Path, first_marked: i64) -> Problem {
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

    fn head_invalid(path: &Path) -> Problem {
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

    /// One act's receipts: its intent, then its result.
    async fn act(ledger: &Ledger, call_id: &str) {
        for kind in [RowKind::Intent, RowKind::Result] {
            ledger.append(vec![row(call_id, kind)]).await.unwrap();
        }
    }

    /// On one thread every append goes through the writer thread.
    #[tokio::test]
    async fn concurrent_appends_chain_and_verify() {
        concurrent_acts_chain_and_verify().await;
    }

    /// On workers, some callers commit themselves and the rest queue for the writer thread,
    /// whichever holds the writer: one chain either way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_on_workers_chain_and_verify() {
        concurrent_acts_chain_and_verify().await;
    }

    async fn concurrent_acts_chain_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..64 {
            let ledger = ledger.clone();
            tasks.push(tokio::spawn(async move {
                act(&ledger, &format!("c{i}")).await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.rows, 128);
        let conn = open_ro(&path).unwrap();
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

    /// The seq the ledger's head names: the last row known to be on disk.
    fn head_seq(path: &Path) -> i64 {
        let key = LedgerKey::load(&seal::key_path(path)).unwrap().unwrap();
        match seal::read_head(&seal::head_path(path), &key).unwrap() {
            HeadRead::Found { head, .. } => head.seq,
            other => panic!("no head: {other:?}"),
        }
    }

    /// An intent for `call_id`, appended in place if the writer lets the caller.
    fn intent_in_place(ledger: &Ledger, call_id: &str) -> Option<Result<Vec<i64>, LedgerError>> {
        ledger.append_in_place(&[row(call_id, RowKind::Intent)])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_commits_itself_when_the_writer_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).await.unwrap();

        // An intent is on disk, and named by the head, before its caller hears of it.
        let intent = intent_in_place(&ledger, "a");
        assert_eq!(intent.expect("the writer was free").unwrap(), vec![1]);
        assert_eq!(head_seq(&path), 1);

        // A result is answered once committed; with no call after it, the writer thread still
        // syncs it, and the head then names it.
        let result = ledger.append_in_place(&[row("a", RowKind::Result)]);
        assert_eq!(result.expect("the writer was free").unwrap(), vec![2]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while head_seq(&path) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the result committed in place never reached the disk"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }

        // A caller that finds the writer busy does not wait for it: its rows go to the thread.
        let held = lock(&ledger.writer);
        assert!(intent_in_place(&ledger, "b").is_none());
        drop(held);
        let queued = ledger.append(vec![row("b", RowKind::Intent)]).await;
        assert_eq!(queued.unwrap(), vec![3]);

        ledger.close().await.unwrap();
        assert!(intent_in_place(&ledger, "c").is_none());
        assert!(
            ledger
                .append(vec![row("c", RowKind::Intent)])
                .await
                .is_err()
        );
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.rows, 3);
    }

    /// On a runtime of one thread, lending the worker is not possible: the writer thread commits.
    #[tokio::test]
    async fn on_one_thread_the_writer_thread_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).await.unwrap();
        assert!(intent_in_place(&ledger, "a").is_none());
        act(&ledger, "a").await;
        assert_eq!(head_seq(&path), 1);
    }

    /// Acts one after another, as an agent makes them: the WAL is checkpointed every
    /// [`WAL_CHECKPOINT_PAGES`] and written again from its start, so it stops growing long
    /// before SQLite's default would have checkpointed it, and every row is kept.
    #[tokio::test]
    async fn the_wal_is_reused_from_its_start_after_a_few_acts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let wal = dir.path().join("receipts.sqlite-wal");
        let ledger = Ledger::open(&path).await.unwrap();
        for i in 0..100 {
            act(&ledger, &format!("c{i}")).await;
        }
        let after_100 = std::fs::metadata(&wal).unwrap().len();
        for i in 100..300 {
            act(&ledger, &format!("c{i}")).await;
        }
        let after_300 = std::fs::metadata(&wal).unwrap().len();
        // A WAL frame is a page and its 24-byte header; the checkpoint runs in the commit that
        // crosses the mark, so the file ends at most one commit (a few pages) past it.
        // The 200 acts after the first hundred wrote some 2 MB of frames; written over the
        // same blocks, they leave the file where it was, give or take the longest commit.
        let frame = 4096 + 24;
        let bound = (WAL_CHECKPOINT_PAGES as u64 + 16) * frame + 32;
        assert!(
            after_300 <= bound,
            "the WAL grew to {after_300} B (bound {bound} B)"
        );
        assert!(
            after_300 <= after_100 + 8 * frame,
            "the WAL kept growing ({after_100} B after 100 acts, {after_300} B after 300)"
        );
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.rows, 600);
    }

    #[tokio::test]
    async fn tampering_names_the_first_broken_seq() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = Ledger::open(&path).await.unwrap();
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
        let broken = verify(&path).unwrap().problems.remove(0);
        assert_eq!(broken.seq, Some(3), "{broken:?}");
        assert_eq!(broken.kind, ProblemKind::BrokenLink, "{broken:?}");

        rw.execute("DELETE FROM receipts WHERE seq = 3", [])
            .unwrap();
        let broken = verify(&path).unwrap().problems.remove(0);
        assert_eq!(broken.seq, Some(4), "{broken:?}");
        assert!(broken.message.contains("missing"), "{broken:?}");
    }

    /// A ledger with one call ended ("done") and one left open ("open").
    async fn with_an_open_call(path: &Path) -> Ledger {
        let ledger = Ledger::open(path).await.unwrap();
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
        ledger
    }

    #[tokio::test]
    async fn interrupted_intents_get_a_result() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = with_an_open_call(&path).await;
        // A call asked for approval and allowed: its intent as asked, then as decided.
        ledger
            .append(vec![
                row("asked", RowKind::Intent),
                row("asked", RowKind::Intent),
            ])
            .await
            .unwrap();
        // The next daemon closes them as it opens the store, once.
        ledger.close().await.unwrap();
        let (ledger, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
        assert_eq!(interrupted, 2, "one result a call");
        ledger.close().await.unwrap();
        let (_, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
        assert_eq!(interrupted, 0);
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
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds() && verdict.rows == 7, "{verdict:?}");
    }

    #[tokio::test]
    async fn a_store_from_before_open_calls_is_scanned_once_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = with_an_open_call(&path).await;
        ledger.close().await.unwrap();
        // What an older daemon left: the same rows, no list of open calls.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE open_calls")
            .unwrap();
        let (ledger, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
        assert_eq!(interrupted, 1, "the open call found by the scan");
        ledger.close().await.unwrap();
        let open: i64 = open_ro(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM open_calls", [], |row| row.get(0))
            .unwrap();
        assert_eq!(open, 0, "closed, and kept up since");
        assert!(verify(&path).unwrap().holds());
    }

    async fn ledger_of(path: &Path, calls: usize) -> Ledger {
        let ledger = Ledger::open(path).await.unwrap();
        for i in 0..calls {
            let id = format!("c{i}");
            ledger
                .append(vec![row(&id, RowKind::Intent), row(&id, RowKind::Result)])
                .await
                .unwrap();
        }
        ledger
    }

    #[tokio::test]
    async fn a_cut_tail_is_named_and_the_writer_refuses_to_build_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = ledger_of(&path, 5).await;
        ledger.close().await.unwrap();
        assert!(
            ledger
                .append(vec![row("late", RowKind::Intent)])
                .await
                .is_err()
        );
        assert!(verify(&path).unwrap().holds());

        let rw = Connection::open(&path).unwrap();
        rw.execute("DELETE FROM receipts WHERE seq > 7", [])
            .unwrap();
        let verdict = verify(&path).unwrap();
        let problem = &verdict.problems[0];
        assert_eq!(problem.kind, ProblemKind::TailDeleted, "{verdict:?}");
        assert!(
            problem
                .message
                .starts_with("the last 3 receipts (seq 8\u{2013}10) were deleted"),
            "{problem:?}"
        );
        let refused = Ledger::open(&path)
            .await
            .err()
            .expect("opened a cut ledger");
        assert!(refused.to_string().contains("were deleted"), "{refused}");
    }

    #[tokio::test]
    async fn rows_after_a_clean_close_or_without_the_key_are_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        let ledger = ledger_of(&path, 2).await;
        ledger.close().await.unwrap();
        drop(ledger);
        let rw = Connection::open(&path).unwrap();
        let (seq, hash) = last_link(&rw).unwrap();
        let text = canonical_row(seq + 1, 0, &row("forged", RowKind::Intent));
        rw.execute(
            "INSERT INTO receipts (seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash)
             VALUES (?1, 'forged', 'intent', 0, 'shell', 'run', ?2, ?3, ?4)",
            params![seq + 1, text, hash, chain_hash(&hash, &text)],
        )
        .unwrap();
        let verdict = verify(&path).unwrap();
        let kinds: Vec<ProblemKind> = verdict.problems.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [ProblemKind::RowsAfterClose, ProblemKind::ForeignRow],
            "{verdict:?}"
        );
        assert!(Ledger::open(&path).await.is_err());
    }

    #[tokio::test]
    async fn a_store_from_an_older_daemon_verifies_and_is_keyed_from_its_next_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.sqlite");
        ledger_of(&path, 2).await.close().await.unwrap();
        // An older daemon had no key, no head and no mark column.
        std::fs::remove_file(seal::key_path(&path)).unwrap();
        std::fs::remove_file(seal::head_path(&path)).unwrap();
        let rw = Connection::open(&path).unwrap();
        rw.execute_batch("ALTER TABLE receipts DROP COLUMN mark")
            .unwrap();
        drop(rw);
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds(), "{verdict:?}");
        assert!(
            verdict.notes[0].contains("tail protection starts"),
            "{verdict:?}"
        );

        ledger_of(&path, 1).await.close().await.unwrap();
        let verdict = verify(&path).unwrap();
        assert!(verdict.holds() && verdict.rows == 6, "{verdict:?}");
        assert_eq!(verdict.head.as_ref().unwrap().keyed_since, 5);
        assert!(
            verdict
                .notes
                .iter()
                .any(|n| n.contains("before tail protection")),
            "{verdict:?}"
        );
    }
}
