//! What the window shows: the state of the link to the daemon and the pending requests, kept by
//! the connection thread from the daemon's watch events and read by the window each frame.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use computer_ipc::control::{Answer, ControlEvent, HeldRequest};

/// The connection to the daemon's control socket.
#[derive(Debug, Clone, PartialEq)]
pub enum Link {
    Connecting,
    Connected,
    Lost { error: String, retry_at: Instant },
}

/// Where an answer the person gave stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    Sending(Answer),
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct Board {
    pub socket: PathBuf,
    pub link: Link,
    /// Counts connections. An answer is tagged with the connection its request was shown under
    /// and is never sent on another one; it also names the request's receipt id, which the
    /// daemon checks, so a click can only ever decide the request it was made on.
    pub session: u64,
    /// In the daemon's order (oldest first), each with its deadline on this side.
    pub pending: Vec<HeldRequest>,
    pub notes: HashMap<u64, Note>,
}

impl Board {
    pub fn new(socket: PathBuf) -> Board {
        Board {
            socket,
            link: Link::Connecting,
            session: 0,
            pending: Vec::new(),
            notes: HashMap::new(),
        }
    }

    /// A new connection whose watch began with `snapshot`; returns the session number.
    pub fn connected(&mut self, snapshot: ControlEvent) -> u64 {
        self.session += 1;
        self.link = Link::Connected;
        self.notes.clear();
        self.pending.clear();
        self.apply(snapshot);
        self.session
    }

    /// The connection is gone: nothing shown can be answered any more.
    pub fn lost(&mut self, error: String, retry_in: Duration) {
        self.link = Link::Lost {
            error,
            retry_at: Instant::now() + retry_in,
        };
        self.pending.clear();
        self.notes.clear();
    }

    /// Applies one watch event.
    pub fn apply(&mut self, event: ControlEvent) {
        match event {
            ControlEvent::Snapshot { mut pending } => {
                pending.sort_by_key(|r| r.id);
                self.pending = pending.into_iter().map(HeldRequest::new).collect();
                let ids: Vec<u64> = self.pending.iter().map(|r| r.request.id).collect();
                self.notes.retain(|id, _| ids.contains(id));
            }
            ControlEvent::Pending { request } => {
                if !self.pending.iter().any(|r| r.request.id == request.id) {
                    self.pending.push(HeldRequest::new(*request));
                }
            }
            ControlEvent::Resolved { id, .. } => self.remove(id),
        }
    }

    /// The person's answer reached the daemon (its `resolved` event may come before or after).
    pub fn remove(&mut self, id: u64) {
        self.pending.retain(|r| r.request.id != id);
        self.notes.remove(&id);
    }

    /// The answer could not be delivered; the request stays until the daemon resolves it.
    pub fn failed(&mut self, id: u64, why: String) {
        if self.pending.iter().any(|r| r.request.id == id) {
            self.notes.insert(id, Note::Failed(why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn event(value: Value) -> ControlEvent {
        serde_json::from_value(value).unwrap()
    }

    fn request(id: u64) -> Value {
        json!({
            "id": id, "receipt": format!("r{id}"), "agent": "default", "caller_pid": 7,
            "surface": "shell", "command": "run", "action": format!("run [\"touch\", \"f{id}\"]"),
            "cwd": null, "risk": "act", "rule": "defaults.act",
            "asked_at_ms": 1, "expires_in_ms": 60_000
        })
    }

    fn ids(board: &Board) -> Vec<u64> {
        board.pending.iter().map(|r| r.request.id).collect()
    }

    #[test]
    fn watch_events_keep_the_pending_list() {
        let mut board = Board::new("control.sock".into());
        let events = [
            (
                json!({"event": "snapshot", "pending": [request(3), request(1)]}),
                vec![1, 3],
            ),
            (
                json!({"event": "pending", "request": request(4)}),
                vec![1, 3, 4],
            ),
            // A repeated announcement does not show the request twice.
            (
                json!({"event": "pending", "request": request(4)}),
                vec![1, 3, 4],
            ),
            (
                json!({"event": "resolved", "id": 3, "why": "answered"}),
                vec![1, 4],
            ),
            (
                json!({"event": "resolved", "id": 99, "why": "timed_out"}),
                vec![1, 4],
            ),
            // A lagging watcher gets a fresh snapshot.
            (
                json!({"event": "snapshot", "pending": [request(4)]}),
                vec![4],
            ),
        ];
        for (value, want) in events {
            board.apply(event(value.clone()));
            assert_eq!(ids(&board), want, "after {value}");
        }
    }

    #[test]
    fn a_new_connection_starts_a_new_session_and_a_loss_clears_everything() {
        let mut board = Board::new("control.sock".into());
        let first = board.connected(event(json!({"event": "snapshot", "pending": [request(1)]})));
        board.notes.insert(1, Note::Sending(Answer::AllowOnce));
        board.lost(
            "the daemon closed the control connection".into(),
            Duration::ZERO,
        );
        assert!(board.pending.is_empty() && board.notes.is_empty());
        assert!(matches!(board.link, Link::Lost { .. }));
        let second = board.connected(event(json!({"event": "snapshot", "pending": [request(1)]})));
        assert!(
            second > first,
            "answers from the first session are recognisably stale"
        );
        assert_eq!(board.link, Link::Connected);
    }

    #[test]
    fn the_time_left_counts_from_when_the_daemon_said_it() {
        let mut board = Board::new("control.sock".into());
        board.connected(event(json!({"event": "snapshot", "pending": [request(1)]})));
        let shown = board.pending[0].now().expires_in_ms;
        assert!(shown <= 60_000 && shown > 50_000, "{shown}");
        // Later, the same request shows less time left.
        board.pending[0].deadline -= Duration::from_secs(30);
        let later = board.pending[0].now().expires_in_ms;
        assert!(later <= 30_000, "{later}");
    }

    #[test]
    fn a_failed_answer_is_noted_only_for_a_shown_request() {
        let mut board = Board::new("control.sock".into());
        board.connected(event(json!({"event": "snapshot", "pending": [request(1)]})));
        board.failed(1, "no pending request with id 1".into());
        board.failed(2, "no pending request with id 2".into());
        assert_eq!(
            board.notes.get(&1),
            Some(&Note::Failed("no pending request with id 1".into()))
        );
        assert!(!board.notes.contains_key(&2));
        board.remove(1);
        assert!(board.pending.is_empty() && board.notes.is_empty());
    }
}
