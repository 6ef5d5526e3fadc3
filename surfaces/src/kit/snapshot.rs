//! Observations remembered for the acts aimed at them (`complications.seen`): each gui or ax
//! observation gets a short id (`snapshot`), kept per agent in a bounded least-recently-used
//! store of its surface, so an act can be refused as `stale` when what it was aimed at changed.
//!
//! A snapshot holds what identifies the targets an observation showed (windows and their
//! places, elements and their names), never a secret or a pixel.

use std::io::Read;
use std::sync::{Arc, Mutex};

use computer_ipc::{ErrorCode, ToolError};
use sha2::{Digest, Sha256};

/// Snapshots kept per agent on each surface; older ones expire.
pub const PER_AGENT: usize = 64;
/// Snapshots kept on each surface across agents (so many agents cannot grow it without bound).
const PER_SURFACE: usize = PER_AGENT * 16;

/// The JSON path every `seen` error names.
pub const SEEN_PATH: &str = "complications.seen";

struct Entry<T> {
    id: String,
    agent: String,
    value: Arc<T>,
    /// When it was last recorded or used, in the store's own count (for least-recently-used).
    used: u64,
}

/// One surface's snapshots.
pub struct Snapshots<T> {
    surface: &'static str,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    entries: Vec<Entry<T>>,
    clock: u64,
}

impl<T> Snapshots<T> {
    pub fn new(surface: &'static str) -> Self {
        Snapshots {
            surface,
            inner: Mutex::new(Inner {
                entries: Vec::new(),
                clock: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        // Every update is a single step: the store stays whole if a holder panicked.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `value` as a new snapshot of `agent`'s and returns its id.
    pub fn record(&self, agent: &str, value: T) -> String {
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        let mut id = new_id();
        while inner.entries.iter().any(|e| e.id == id) {
            id = new_id();
        }
        let evict = |entries: &mut Vec<Entry<T>>, mine: Option<&str>| {
            let oldest = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| mine.is_none_or(|agent| e.agent == agent))
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i);
            if let Some(i) = oldest {
                entries.swap_remove(i);
            }
        };
        if inner.entries.iter().filter(|e| e.agent == agent).count() >= PER_AGENT {
            evict(&mut inner.entries, Some(agent));
        }
        if inner.entries.len() >= PER_SURFACE {
            evict(&mut inner.entries, None);
        }
        inner.entries.push(Entry {
            id: id.clone(),
            agent: agent.to_string(),
            value: Arc::new(value),
            used,
        });
        id
    }

    /// The snapshot `id` with the agent it belongs to, whoever asks: the caller check
    /// ([`Seen::check_caller`]) makes another agent's read as unknown.
    pub fn find(&self, id: &str) -> Option<Seen<T>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.entries.iter_mut().find(|e| e.id == id)?;
        entry.used = now;
        Some(Seen {
            id: entry.id.clone(),
            owner: entry.agent.clone(),
            surface: self.surface,
            value: entry.value.clone(),
        })
    }

    /// The snapshot `complications.seen` names, or the error for an unknown or expired id.
    pub fn bind(&self, id: &str) -> Result<Seen<T>, ToolError> {
        self.find(id).ok_or_else(|| unknown(self.surface, id))
    }
}

/// The error for an id this agent has no snapshot under on `surface`: never seen, expired, or
/// another agent's (the very same words, so no agent learns of another's snapshots).
pub fn unknown(surface: &str, id: &str) -> ToolError {
    ToolError::invalid(format!(
        "no snapshot {id:?} of yours on the {surface} surface (unknown, expired, or taken by \
         another agent; the last {PER_AGENT} are kept): observe again (a screenshot, `windows`, \
         or an ax tree/find/read) and use the `snapshot` it returns"
    ))
    .at(SEEN_PATH)
}

/// An act's binding to a snapshot.
pub struct Seen<T> {
    pub id: String,
    owner: String,
    surface: &'static str,
    pub value: Arc<T>,
}

impl<T> Clone for Seen<T> {
    fn clone(&self) -> Self {
        Seen {
            id: self.id.clone(),
            owner: self.owner.clone(),
            surface: self.surface,
            value: self.value.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Seen<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen")
            .field("id", &self.id)
            .field("surface", &self.surface)
            .finish()
    }
}

impl<T> Seen<T> {
    /// Refuses an agent the snapshot is not of, exactly as an unknown id is refused.
    pub fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        if self.owner == agent {
            Ok(())
        } else {
            Err(unknown(self.surface, &self.id))
        }
    }
}

/// A refusal of an act whose snapshot no longer holds: `what` says what changed.
pub fn stale(what: String) -> ToolError {
    ToolError::new(ErrorCode::Stale, what).at(SEEN_PATH)
}

/// The error for `seen` on a command that is no act.
pub fn not_an_act(surface: &str, command: &str) -> ToolError {
    ToolError::invalid(format!(
        "`seen` binds an act to the observation it was aimed at; {surface} {command} acts on \
         nothing: leave it out"
    ))
    .at(SEEN_PATH)
}

/// A short id: `s` and six hex digits, from a per-process random key and a counter (ids are
/// unguessable enough not to be tried; ownership is what keeps them apart).
fn new_id() -> String {
    static KEY: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let key = KEY.get_or_init(|| {
        let mut key = [0u8; 16];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key));
        if read.is_err() {
            // No random device: the time and pid still make ids differ between runs.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            key[..8].copy_from_slice(&(now as u64).to_le_bytes());
            key[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        }
        key
    });
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let digest = Sha256::new()
        .chain_update(key)
        .chain_update(n.to_le_bytes())
        .finalize();
    format!("s{}", &hex::encode(&digest[..3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_distinct() {
        let store = Snapshots::new("gui");
        let a = store.record("one", 1);
        let b = store.record("one", 2);
        assert_ne!(a, b);
        assert_eq!(a.len(), 7, "{a}");
        assert!(a.starts_with('s'));
        assert_eq!(*store.bind(&a).unwrap().value, 1);
    }

    #[test]
    fn another_agents_snapshot_reads_as_unknown() {
        let store = Snapshots::new("gui");
        let id = store.record("alice", ());
        let seen = store.bind(&id).unwrap();
        assert!(seen.check_caller("alice").is_ok());
        let theirs = seen.check_caller("mallory").unwrap_err();
        let made_up = store.bind("s000000").unwrap_err();
        assert_eq!(theirs.code, ErrorCode::InvalidCall);
        assert_eq!(theirs.path.as_deref(), Some(SEEN_PATH));
        assert_eq!(
            theirs.message.replace(&id, "ID"),
            made_up.message.replace("s000000", "ID")
        );
    }

    #[test]
    fn each_agent_keeps_its_last_snapshots_only() {
        let store = Snapshots::new("ax");
        let first = store.record("a", 0);
        let other = store.record("b", 0);
        let mut last = String::new();
        for n in 0..PER_AGENT {
            last = store.record("a", n);
        }
        assert!(store.find(&first).is_none(), "the oldest of a's expired");
        assert!(store.find(&other).is_some(), "b's are not a's to push out");
        assert!(store.find(&last).is_some());
    }
}
