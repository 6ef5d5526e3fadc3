//! Human approval of asked calls: pending requests, answers from approvers on the control socket,
//! session grants keyed to the exact action, and deny on every failure (timeout, the agent gone,
//! a dropped approver, an answer that is not understood).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use computer_surfaces::ProtectedProcesses;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

/// What an approver sees of a pending call, in plain words.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingRequest {
    pub id: u64,
    /// The receipt id the call will have.
    pub receipt: String,
    pub agent: String,
    pub caller_pid: Option<i32>,
    pub surface: String,
    pub command: String,
    /// What will happen, e.g. `run ["rm", "-rf", "build"] in /home/me/src`.
    pub action: String,
    pub cwd: Option<String>,
    pub risk: String,
    /// The rule (or default) that asked.
    pub rule: String,
    pub asked_at_ms: u64,
    pub expires_in_ms: u64,
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    AllowOnce,
    AllowSession,
    Deny,
}

/// Who answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Approver {
    pub uid: u32,
    pub pid: Option<i32>,
    /// `terminal`, `cli`, `window`.
    pub via: String,
}

/// How an asked call ended.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Resolution {
    Allowed {
        answer: Answer,
        by: Option<Approver>,
        at_ms: u64,
        /// `session grant` when an earlier allow-for-session covered it.
        via_grant: bool,
    },
    Denied {
        reason: String,
        by: Option<Approver>,
        at_ms: u64,
    },
}

/// Events for watching approvers.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Pending { request: Box<PendingRequest> },
    Resolved { id: u64 },
}

struct Waiting {
    request: PendingRequest,
    answer: oneshot::Sender<(Answer, Approver)>,
}

struct Grant {
    created: Instant,
    last_used: Instant,
}

pub struct Approvals {
    pending: Mutex<HashMap<u64, Waiting>>,
    grants: Mutex<HashMap<String, Grant>>,
    next_id: AtomicU64,
    events: broadcast::Sender<Event>,
    timeout: Duration,
    session_idle: Duration,
    session_max: Duration,
    /// The approvers' processes, which gui and ax actions may not target.
    approvers: Arc<ProtectedProcesses>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Approvals {
    pub fn new(timeout: Duration, session_idle: Duration, session_max: Duration) -> Approvals {
        Approvals {
            pending: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            events: broadcast::channel(256).0,
            timeout,
            session_idle,
            session_max,
            approvers: Arc::default(),
        }
    }

    /// The processes of connected approvers (the control socket registers them).
    pub fn approvers(&self) -> &Arc<ProtectedProcesses> {
        &self.approvers
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    pub fn list(&self) -> Vec<PendingRequest> {
        let mut list: Vec<PendingRequest> = self
            .pending
            .lock()
            .unwrap()
            .values()
            .map(|w| w.request.clone())
            .collect();
        list.sort_by_key(|r| r.id);
        list
    }

    /// Delivers an approver's answer. Errors say why it could not be delivered.
    pub fn decide(&self, id: u64, answer: Answer, approver: Approver) -> Result<(), String> {
        let waiting = self.pending.lock().unwrap().remove(&id).ok_or_else(|| {
            format!("no pending request with id {id} (already decided, timed out or withdrawn)")
        })?;
        let _ = self.events.send(Event::Resolved { id });
        waiting
            .answer
            .send((answer, approver))
            .map_err(|_| format!("request {id} was withdrawn before the answer arrived"))
    }

    /// A live session grant for `key`, refreshed on use.
    fn grant_covers(&self, key: &str) -> bool {
        let mut grants = self.grants.lock().unwrap();
        let now = Instant::now();
        grants.retain(|_, g| {
            now.duration_since(g.created) < self.session_max
                && now.duration_since(g.last_used) < self.session_idle
        });
        match grants.get_mut(key) {
            Some(grant) => {
                grant.last_used = now;
                true
            }
            None => false,
        }
    }

    /// Parks a call until a person answers, the deadline passes, or `cancelled` fires (the agent
    /// disconnected). `grant_key` names the exact action (digest of args, cwd and agent): an
    /// allow-for-session grant covers that key and nothing else. `progress` is called while
    /// waiting, so the agent can be told what is going on.
    pub async fn ask(
        &self,
        mut request: PendingRequest,
        grant_key: &str,
        cancelled: CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Resolution {
        if self.grant_covers(grant_key) {
            return Resolution::Allowed {
                answer: Answer::AllowSession,
                by: None,
                at_ms: now_ms(),
                via_grant: true,
            };
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request.id = id;
        request.asked_at_ms = now_ms();
        request.expires_in_ms = self.timeout.as_millis() as u64;
        let (answer_tx, answer_rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(
            id,
            Waiting {
                request: request.clone(),
                answer: answer_tx,
            },
        );
        let _ = self.events.send(Event::Pending {
            request: Box::new(request.clone()),
        });
        tracing::info!(id, agent = %request.agent, action = %request.action, "waiting for approval");
        progress(format!(
            "waiting for approval (request {id}): run `computer approve` to answer"
        ));

        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        tokio::pin!(answer_rx);
        let mut ticker = tokio::time::interval(Duration::from_secs(5));
        ticker.tick().await;
        let denied = |reason: String| Resolution::Denied {
            reason,
            by: None,
            at_ms: now_ms(),
        };
        let resolution = loop {
            tokio::select! {
                answer = &mut answer_rx => break match answer {
                    Ok((Answer::Deny, by)) => Resolution::Denied {
                        reason: "a person denied it".into(),
                        by: Some(by),
                        at_ms: now_ms(),
                    },
                    Ok((answer, by)) => {
                        if answer == Answer::AllowSession {
                            let now = Instant::now();
                            self.grants.lock().unwrap().insert(
                                grant_key.to_string(),
                                Grant { created: now, last_used: now },
                            );
                        }
                        Resolution::Allowed { answer, by: Some(by), at_ms: now_ms(), via_grant: false }
                    }
                    Err(_) => denied("the approval was dropped".into()),
                },
                _ = &mut deadline => break denied(format!(
                    "nobody answered within {} s", self.timeout.as_secs()
                )),
                _ = cancelled.cancelled() => break denied("the agent went away while waiting".into()),
                _ = ticker.tick() => progress(format!("still waiting for approval (request {id})")),
            }
        };
        if self.pending.lock().unwrap().remove(&id).is_some() {
            let _ = self.events.send(Event::Resolved { id });
        }
        resolution
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn request() -> PendingRequest {
        PendingRequest {
            id: 0,
            receipt: "r".into(),
            agent: "default".into(),
            caller_pid: None,
            surface: "shell".into(),
            command: "run".into(),
            action: "run [\"touch\", \"x\"]".into(),
            cwd: None,
            risk: "act".into(),
            rule: "defaults.act".into(),
            asked_at_ms: 0,
            expires_in_ms: 0,
        }
    }

    fn approver() -> Approver {
        Approver {
            uid: 0,
            pid: None,
            via: "test".into(),
        }
    }

    fn approvals(timeout_ms: u64) -> Arc<Approvals> {
        Arc::new(Approvals::new(
            Duration::from_millis(timeout_ms),
            Duration::from_secs(60),
            Duration::from_secs(600),
        ))
    }

    async fn answer_next(approvals: Arc<Approvals>, answer: Answer) {
        let mut events = approvals.subscribe();
        loop {
            if let Some(pending) = approvals.list().first() {
                approvals.decide(pending.id, answer, approver()).unwrap();
                return;
            }
            let _ = events.recv().await;
        }
    }

    #[tokio::test]
    async fn allow_deny_timeout_and_cancel() {
        let a = approvals(60_000);
        let asked = a.ask(request(), "k1", CancellationToken::new(), &|_| {});
        let (resolution, ()) = tokio::join!(asked, answer_next(a.clone(), Answer::AllowOnce));
        assert!(matches!(
            resolution,
            Resolution::Allowed {
                answer: Answer::AllowOnce,
                ..
            }
        ));

        let asked = a.ask(request(), "k1", CancellationToken::new(), &|_| {});
        let (resolution, ()) = tokio::join!(asked, answer_next(a.clone(), Answer::Deny));
        assert!(matches!(resolution, Resolution::Denied { by: Some(_), .. }));

        tokio::time::pause();
        let resolution = approvals(1000)
            .ask(request(), "k", CancellationToken::new(), &|_| {})
            .await;
        assert!(
            matches!(resolution, Resolution::Denied { ref reason, .. } if reason.contains("nobody answered"))
        );
        tokio::time::resume();

        let cancel = CancellationToken::new();
        cancel.cancel();
        let resolution = a.ask(request(), "k", cancel, &|_| {}).await;
        assert!(
            matches!(resolution, Resolution::Denied { ref reason, .. } if reason.contains("went away"))
        );
        assert!(a.list().is_empty(), "no request is left pending");
    }

    #[tokio::test]
    async fn a_session_grant_covers_only_its_exact_key() {
        let a = approvals(60_000);
        let asked = a.ask(request(), "git status", CancellationToken::new(), &|_| {});
        let (resolution, ()) = tokio::join!(asked, answer_next(a.clone(), Answer::AllowSession));
        assert!(matches!(
            resolution,
            Resolution::Allowed {
                via_grant: false,
                ..
            }
        ));
        let again = a
            .ask(request(), "git status", CancellationToken::new(), &|_| {})
            .await;
        assert!(matches!(
            again,
            Resolution::Allowed {
                via_grant: true,
                ..
            }
        ));

        tokio::time::pause();
        let other = a.ask(
            request(),
            "git status; rm -rf ~",
            CancellationToken::new(),
            &|_| {},
        );
        let other = tokio::time::timeout(Duration::from_secs(120), other)
            .await
            .unwrap();
        assert!(
            matches!(other, Resolution::Denied { .. }),
            "a different action is asked again"
        );
    }

    #[tokio::test]
    async fn unknown_ids_are_refused() {
        let a = approvals(1000);
        let err = a.decide(42, Answer::AllowOnce, approver()).unwrap_err();
        assert!(err.contains("no pending request with id 42"), "{err}");
    }
}
