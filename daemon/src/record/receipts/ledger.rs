//! The ledger's writer: one at a time (the caller itself when the writer is free, else a writer
//! thread that commits concurrent appends together: group commit); an intent is on disk before
//! its caller is answered, a result right after; every row marked with the ledger's key and the
//! chain's head recorded once its rows are on disk. At start it takes over from the previous
//! daemon: the store checked against the key and head it left, its open calls closed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use super::seal::{self, HeadFields, HeadRead, HeadWriter, LedgerKey};
use super::store::{
    GENESIS_HASH, LedgerError, NewRow, RowKind, chain_hash, has_mark_column, has_table,
};
use super::verification::Problem;

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
    pub(super) writer: Shared,
}

/// The writer's state, shared by the writer thread and the callers.
pub(super) type Shared = Arc<Mutex<Option<WriterLoop>>>;

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
    pub(super) fn append_in_place(&self, rows: &[NewRow]) -> Option<Result<Vec<i64>, LedgerError>> {
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
pub(super) const WAL_CHECKPOINT_PAGES: i64 = 256;

/// The writer's state, even if a thread panicked holding it: every commit is one transaction,
/// so a panic cannot leave it half-written.
pub(super) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Option<WriterLoop>> {
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

pub(super) fn last_link(conn: &Connection) -> rusqlite::Result<(i64, String)> {
    Ok(conn
        .query_row(
            "SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, GENESIS_HASH.to_string())))
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
pub(super) struct WriterLoop {
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
pub(super) fn canonical_row(seq: i64, at_ms: i64, row: &NewRow) -> String {
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
