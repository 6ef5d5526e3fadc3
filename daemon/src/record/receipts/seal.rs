//! What keeps the ledger's tail honest: the secret key that marks every row the daemon writes, and
//! the chain head (seq, hash) the writer records after each commit, both beside the database.
//!
//! The key (`receipts.key`, 32 random bytes, 0600) is written once. Each row carries
//! `mac = HMAC-SHA256(key, hash)`, so a row inserted or recomputed by anyone without the key shows.
//! The head (`receipts.head`) pins the last committed (seq, hash) under the key, so a cut tail or a
//! replaced database shows too. It holds two fixed-size slots written in turn with one `pwrite`
//! each and no fsync: a torn slot (a power cut mid-write) fails its mark and the other, one commit
//! older, is read instead. A head older than the database is expected after a crash or power cut
//! (rows past it must still carry the key's mark); a database shorter than the head is not.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Bytes of one head slot; a record is ~250 bytes, so one slot sits in one disk sector.
const SLOT_BYTES: usize = 512;
const KEY_BYTES: usize = 32;

/// A failure reading or writing the key or the head.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SealError + '_ {
    move |source| SealError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where the key of the ledger at `db` lives.
pub fn key_path(db: &Path) -> PathBuf {
    db.with_extension("key")
}

/// Where the head of the ledger at `db` lives.
pub fn head_path(db: &Path) -> PathBuf {
    db.with_extension("head")
}

/// The ledger's secret key.
#[derive(Clone)]
pub struct LedgerKey([u8; KEY_BYTES]);

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LedgerKey(..)")
    }
}

impl LedgerKey {
    /// Reads the key at `path`; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<LedgerKey>, SealError> {
        let mut bytes = Vec::new();
        match File::open(path) {
            Ok(mut file) => file.read_to_end(&mut bytes).map_err(io_error(path))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(io_error(path)(err)),
        };
        let key: [u8; KEY_BYTES] =
            bytes
                .try_into()
                .map_err(|bytes: Vec<u8>| SealError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "the receipts key holds {} bytes, not {KEY_BYTES}: it was altered",
                        bytes.len()
                    ),
                })?;
        Ok(Some(LedgerKey(key)))
    }

    /// Makes a new random key at `path` (0600), durable before it marks any row: rows marked with
    /// a key that a power cut lost could never be told from forged ones.
    pub fn create(path: &Path) -> Result<LedgerKey, SealError> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(|err| SealError::Invalid {
            path: path.to_path_buf(),
            message: format!("no randomness for the receipts key: {err}"),
        })?;
        write_whole(path, &key, true)?;
        Ok(LedgerKey(key))
    }

    fn mac(&self, domain: &str, text: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(text.as_bytes());
        mac
    }

    /// The mark of a row, over its chain hash (which covers its content and every row before).
    pub fn mark_row(&self, hash: &str) -> String {
        hex::encode(
            self.mac("computer receipts row", hash)
                .finalize()
                .into_bytes(),
        )
    }

    pub fn row_mark_holds(&self, hash: &str, mark: &str) -> bool {
        hex::decode(mark).is_ok_and(|mark| {
            self.mac("computer receipts row", hash)
                .verify_slice(&mark)
                .is_ok()
        })
    }

    fn head_text(head: &HeadFields) -> String {
        format!(
            "{}\0{}\0{}\0{}",
            head.seq, head.hash, head.keyed_since, head.closed
        )
    }

    fn seal(&self, fields: HeadFields) -> Head {
        let mac = self.mac("computer receipts head", &Self::head_text(&fields));
        Head {
            mac: hex::encode(mac.finalize().into_bytes()),
            fields,
        }
    }

    fn head_holds(&self, head: &Head) -> bool {
        hex::decode(&head.mac).is_ok_and(|mark| {
            self.mac("computer receipts head", &Self::head_text(&head.fields))
                .verify_slice(&mark)
                .is_ok()
        })
    }
}

/// What a head records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadFields {
    /// The last committed row's seq (0: no rows).
    pub seq: i64,
    /// Its chain hash.
    pub hash: String,
    /// The first seq the key marks; rows before it were written by a daemon without tail
    /// protection.
    pub keyed_since: i64,
    /// True once the daemon stopped cleanly: no row may follow a closed head.
    pub closed: bool,
}

/// A head as stored: its fields and the key's mark over them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Head {
    #[serde(flatten)]
    fields: HeadFields,
    mac: String,
}

/// The head as read back.
#[derive(Debug, Clone)]
pub enum HeadRead {
    /// No head file.
    Missing,
    /// The newest slot whose mark holds; `damaged` counts the slots that did not.
    Found { head: HeadFields, damaged: usize },
    /// No slot holds a valid mark: the file was altered (or written with another key).
    Invalid,
}

/// Reads the head at `path`, checking each slot's mark with `key`.
pub fn read_head(path: &Path, key: &LedgerKey) -> Result<HeadRead, SealError> {
    // The daemon may be writing a slot right now; a torn read of the slot being written is retried
    // (the other slot is whole in any case, since the writer alternates).
    let mut last = HeadRead::Invalid;
    for _ in 0..3 {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(HeadRead::Missing),
            Err(err) => return Err(io_error(path)(err)),
        };
        let mut newest: Option<HeadFields> = None;
        let mut damaged = 0;
        for slot in bytes.chunks(SLOT_BYTES).take(2) {
            let text = slot.split(|b| *b == 0).next().unwrap_or_default();
            match serde_json::from_slice::<Head>(text) {
                Ok(head) if key.head_holds(&head) => {
                    if newest.as_ref().is_none_or(|n| head.fields.seq >= n.seq) {
                        newest = Some(head.fields);
                    }
                }
                _ => damaged += 1,
            }
        }
        last = match newest {
            Some(head) => HeadRead::Found { head, damaged },
            None => HeadRead::Invalid,
        };
        if matches!(last, HeadRead::Found { damaged: 0, .. }) {
            break;
        }
    }
    Ok(last)
}

/// The writer's handle on the head file: it writes the two slots in turn.
pub struct HeadWriter {
    path: PathBuf,
    file: File,
    key: LedgerKey,
    next_slot: u64,
    pub fields: HeadFields,
}

impl HeadWriter {
    /// Opens the head file and writes `fields` into both slots; a new one is made whole before it
    /// is given its name (see [`write_whole`]).
    pub fn open(path: &Path, key: LedgerKey, fields: HeadFields) -> Result<HeadWriter, SealError> {
        let existing = OpenOptions::new().read(true).write(true).open(path);
        let (file, written) = match existing {
            Ok(file) => (file, false),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let slot = Self::slot_bytes(&key, &fields, path)?;
                let both = [slot.as_slice(), slot.as_slice()].concat();
                (write_whole(path, &both, false)?, true)
            }
            Err(err) => return Err(io_error(path)(err)),
        };
        let mut writer = HeadWriter {
            path: path.to_path_buf(),
            file,
            key,
            next_slot: 0,
            fields,
        };
        if !written {
            // Rewritten in place one slot at a time: whichever write a kill or power cut stops,
            // the other slot still holds a whole head.
            writer.write_slot()?;
            writer.write_slot()?;
        }
        Ok(writer)
    }

    /// Records a new head.
    pub fn record(&mut self, seq: i64, hash: &str) -> Result<(), SealError> {
        self.fields.seq = seq;
        self.fields.hash = hash.to_string();
        self.write_slot()
    }

    /// Records that the daemon stopped cleanly, durably: no row may follow this head.
    pub fn close(&mut self) -> Result<(), SealError> {
        self.fields.closed = true;
        self.write_slot()?;
        self.write_slot()?;
        self.file.sync_data().map_err(io_error(&self.path))
    }

    fn slot_bytes(key: &LedgerKey, fields: &HeadFields, path: &Path) -> Result<Vec<u8>, SealError> {
        let head = key.seal(fields.clone());
        let mut slot = serde_json::to_vec(&head).map_err(|err| SealError::Invalid {
            path: path.to_path_buf(),
            message: err.to_string(),
        })?;
        slot.resize(SLOT_BYTES, 0);
        Ok(slot)
    }

    fn write_slot(&mut self) -> Result<(), SealError> {
        let slot = Self::slot_bytes(&self.key, &self.fields, &self.path)?;
        let offset = self.next_slot * SLOT_BYTES as u64;
        self.file
            .write_all_at(&slot, offset)
            .map_err(io_error(&self.path))?;
        self.next_slot = 1 - self.next_slot;
        Ok(())
    }
}

/// Makes the file at `path` (0600) holding `bytes`, whole or not at all: they are written to a
/// fresh file beside it, made durable, and only then given the name. A daemon killed part-way
/// leaves at most a stray temporary file, never an empty key or head that would read as tampering
/// and keep the next daemon from starting. With `exclusive`, an existing file is never replaced.
fn write_whole(path: &Path, bytes: &[u8], exclusive: bool) -> Result<File, SealError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // tempfile makes its files 0600.
    let mut staged = tempfile::Builder::new()
        .prefix(".receipts-")
        .tempfile_in(dir)
        .map_err(io_error(dir))?;
    staged.write_all(bytes).map_err(io_error(path))?;
    staged.as_file().sync_all().map_err(io_error(path))?;
    let file = if exclusive {
        staged.persist_noclobber(path)
    } else {
        staged.persist(path)
    }
    .map_err(|err| io_error(path)(err.error))?;
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(io_error(dir))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(seq: i64) -> HeadFields {
        HeadFields {
            seq,
            hash: format!("{seq:064}"),
            keyed_since: 1,
            closed: false,
        }
    }

    #[test]
    fn the_newest_whole_slot_wins_and_a_torn_one_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let key = LedgerKey::create(&dir.path().join("k")).unwrap();
        let path = dir.path().join("h");
        let mut writer = HeadWriter::open(&path, key.clone(), fields(0)).unwrap();
        writer.record(5, &format!("{:064}", 5)).unwrap();
        writer.record(6, &format!("{:064}", 6)).unwrap();
        let HeadRead::Found { head, damaged } = read_head(&path, &key).unwrap() else {
            panic!("no head")
        };
        assert_eq!((head.seq, damaged), (6, 0));

        // A power cut tore the slot holding seq 6 (slot 1): seq 5 is read, one slot damaged.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"{\"seq\":6,\"ha", SLOT_BYTES as u64)
            .unwrap();
        file.write_all_at(&[0u8; 100], SLOT_BYTES as u64 + 12)
            .unwrap();
        let HeadRead::Found { head, damaged } = read_head(&path, &key).unwrap() else {
            panic!("no head")
        };
        assert_eq!((head.seq, damaged), (5, 1));
    }

    #[test]
    fn a_head_sealed_with_another_key_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let key = LedgerKey::create(&dir.path().join("k")).unwrap();
        let other = LedgerKey::create(&dir.path().join("k2")).unwrap();
        let path = dir.path().join("h");
        HeadWriter::open(&path, other, fields(3)).unwrap();
        assert!(matches!(read_head(&path, &key).unwrap(), HeadRead::Invalid));
        assert!(
            LedgerKey::create(&dir.path().join("k")).is_err(),
            "never replaced"
        );
        let mark = key.mark_row("abc");
        assert!(key.row_mark_holds("abc", &mark));
        assert!(!key.row_mark_holds("abd", &mark));
    }

    #[test]
    fn a_key_or_head_is_never_seen_half_made() {
        // A daemon killed while it makes its ledger must be able to start again: at no moment may
        // the key or the head exist at its path without its whole content. A reader spins on the
        // paths while a writer makes them, fresh, many times over.
        let dir = tempfile::tempdir().unwrap();
        let rounds = 300;
        let root = dir.path().to_path_buf();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (root, done) = (root.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for round in 0..rounds {
                        let key_path = root.join(format!("k{round}"));
                        let key = match LedgerKey::load(&key_path) {
                            Ok(Some(key)) => key,
                            Ok(None) => continue,
                            Err(err) => panic!("round {round}: a half-made key: {err}"),
                        };
                        seen += 1;
                        match read_head(&root.join(format!("h{round}")), &key).unwrap() {
                            HeadRead::Missing | HeadRead::Found { damaged: 0, .. } => {}
                            other => panic!("round {round}: a half-made head read as {other:?}"),
                        }
                    }
                }
                seen
            })
        };
        for round in 0..rounds {
            let key = LedgerKey::create(&root.join(format!("k{round}"))).unwrap();
            HeadWriter::open(&root.join(format!("h{round}")), key, fields(0)).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let seen = reader.join().expect("no key or head was seen half made");
        assert!(seen > 0, "the reader looked while the ledgers were made");
    }
}
