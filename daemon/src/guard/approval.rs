//! Human approval of asked calls: pending requests, answers from approvers on the control socket,
//! session grants keyed to the exact action, ids that are never reused (across restarts too), and
//! deny on every failure (timeout, the agent gone, a dropped approver, an answer meant for another
//! request).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use computer_surfaces::ProtectedProcesses;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

/// The wire types approvers share (`computer-ipc`); `Event` is what watchers are sent (the
/// control socket adds the snapshots).
pub use computer_ipc::control::{Answer, ControlEvent as Event, Gone, PendingRequest};

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

/// Why an answer was not delivered. Nothing is decided in any of these cases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefused {
    #[error(
        "no pending request with id {id} (already answered, timed out, or withdrawn because its agent went away); `computer approvals list` shows what is waiting"
    )]
    NoSuchRequest { id: u64 },
    #[error(
        "request {id} is not the one you were shown: it is for receipt {pending}, your answer was for receipt {shown}; nothing was decided (`computer approvals list` shows what is waiting)"
    )]
    NotTheRequestShown {
        id: u64,
        pending: String,
        shown: String,
    },
    #[error("request {id} was withdrawn before the answer arrived; nothing was decided")]
    Withdrawn { id: u64 },
}

struct Waiting {
    request: PendingRequest,
    deadline: tokio::time::Instant,
    /// The call's cancellation: once it fires the request is gone, whether or not the waiting
    /// task has noticed yet.
    cancelled: CancellationToken,
    answer: oneshot::Sender<(Answer, Approver)>,
}

impl Waiting {
    /// Whether an answer may still decide this request.
    fn open(&self, now: tokio::time::Instant) -> bool {
        !self.cancelled.is_cancelled() && now < self.deadline
    }
}

struct Grant {
    created: Instant,
    last_used: Instant,
}

/// Hands out request ids. With a file, the next id is written there before an id is used, so a
/// restarted daemon continues the count: a stale `computer approvals allow 7` can never meet a
/// different request 7.
struct Ids {
    next: u64,
    file: Option<PathBuf>,
}

impl Ids {
    fn take(&mut self) -> std::io::Result<u64> {
        let id = self.next;
        // Move on even when the write fails: that id is then never shown, hence never answered.
        self.next += 1;
        if let Some(file) = &self.file {
            write_durably(file, &format!("{}\n", self.next))?;
        }
        Ok(id)
    }
}

/// Replaces `path` with `text` so that a crash leaves the old content or the new, never a mix,
/// and the new content survives a power loss once this returns.
fn write_durably(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let staged = path.with_extension("new");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&staged)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&staged, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

pub struct Approvals {
    pending: Mutex<HashMap<u64, Waiting>>,
    grants: Mutex<HashMap<String, Grant>>,
    ids: Mutex<Ids>,
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

/// How often a waiting call tells its client it still waits. Many hosts reset their request
/// timeout on each progress notification, so this must stay well under the shortest of them
/// (60 s is common); short approval timeouts get proportionally more frequent reminders.
pub fn progress_period(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

impl Approvals {
    /// Approvals whose ids live in memory only (they restart at 1 with the process); the daemon
    /// uses [`Approvals::keep_ids_in`].
    pub fn new(timeout: Duration, session_idle: Duration, session_max: Duration) -> Approvals {
        Approvals {
            pending: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            ids: Mutex::new(Ids {
                next: 1,
                file: None,
            }),
            events: broadcast::channel(256).0,
            timeout,
            session_idle,
            session_max,
            approvers: Arc::default(),
        }
    }

    /// Continues the id count kept in `file` (the state dir's), and keeps it there from now on;
    /// called once, before the first request.
    /// A missing file starts at 1 (a fresh state dir). An unreadable or damaged one cannot say
    /// where the count stood, so the count resumes from the clock in seconds: above any count a
    /// person could have reached, hence still never a reused id.
    pub fn keep_ids_in(&self, file: &Path) {
        let next = match std::fs::read_to_string(file) {
            Ok(text) => text.trim().parse::<u64>().ok().filter(|n| *n > 0),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(1),
            Err(err) => {
                tracing::warn!(file = %file.display(), error = %err, "approval id counter unreadable");
                None
            }
        };
        let next = next.unwrap_or_else(|| {
            let resumed = now_ms() / 1000;
            tracing::warn!(
                file = %file.display(),
                resumed,
                "approval id counter missing its count; resuming from the clock so no id is reused"
            );
            resumed
        });
        *self.ids.lock().unwrap() = Ids {
            next,
            file: Some(file.to_path_buf()),
        };
    }

    /// The processes of connected approvers (the control socket registers them).
    pub fn approvers(&self) -> &Arc<ProtectedProcesses> {
        &self.approvers
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// The requests that can still be answered, oldest first, each with the time it has left.
    pub fn list(&self) -> Vec<PendingRequest> {
        let now = tokio::time::Instant::now();
        let mut list: Vec<PendingRequest> = self
            .pending
            .lock()
            .unwrap()
            .values()
            .filter(|w| w.open(now))
            .map(|w| PendingRequest {
                expires_in_ms: w.deadline.saturating_duration_since(now).as_millis() as u64,
                ..w.request.clone()
            })
            .collect();
        list.sort_by_key(|r| r.id);
        list
    }

    /// Delivers an approver's answer to request `id`. `shown` is the receipt id of the request
    /// the approver showed the person: an answer meant for another request decides nothing.
    pub fn decide(
        &self,
        id: u64,
        answer: Answer,
        approver: Approver,
        shown: Option<&str>,
    ) -> Result<(), AnswerRefused> {
        let waiting = {
            let mut pending = self.pending.lock().unwrap();
            let now = tokio::time::Instant::now();
            let open = pending
                .get(&id)
                .filter(|w| w.open(now))
                .ok_or(AnswerRefused::NoSuchRequest { id })?;
            if let Some(shown) = shown
                && shown != open.request.receipt
            {
                return Err(AnswerRefused::NotTheRequestShown {
                    id,
                    pending: open.request.receipt.clone(),
                    shown: shown.to_string(),
                });
            }
            pending
                .remove(&id)
                .ok_or(AnswerRefused::NoSuchRequest { id })?
        };
        let _ = self.events.send(Event::Resolved {
            id,
            why: Gone::Answered,
        });
        waiting
            .answer
            .send((answer, approver))
            .map_err(|_| AnswerRefused::Withdrawn { id })
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
    /// disconnected or cancelled). `grant_key` names the exact action (digest of args, cwd and
    /// agent): an allow-for-session grant covers that key and nothing else. `progress` is called
    /// when the wait begins and then every [`progress_period`] until it ends, with the time left.
    pub async fn ask(
        &self,
        request: PendingRequest,
        grant_key: &str,
        cancelled: CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Resolution {
        self.ask_recorded(request, grant_key, cancelled, progress, |_| async {
            Ok(())
        })
        .await
    }

    /// [`Approvals::ask`], with `record` run once the request has its id and before anyone can
    /// see it (the call's intent made durable): a request that is shown always has its row, and
    /// one whose row cannot be written is denied without being shown.
    pub async fn ask_recorded<R, Recorded>(
        &self,
        mut request: PendingRequest,
        grant_key: &str,
        cancelled: CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
        record: R,
    ) -> Resolution
    where
        R: FnOnce(u64) -> Recorded,
        Recorded: std::future::Future<Output = Result<(), String>>,
    {
        if self.grant_covers(grant_key) {
            return Resolution::Allowed {
                answer: Answer::AllowSession,
                by: None,
                at_ms: now_ms(),
                via_grant: true,
            };
        }
        let denied = |reason: String| Resolution::Denied {
            reason,
            by: None,
            at_ms: now_ms(),
        };
        let id = match self.ids.lock().unwrap().take() {
            Ok(id) => id,
            Err(err) => {
                tracing::error!(error = %err, "cannot record the approval id counter; denied");
                return denied(format!(
                    "the request could not be given an id that is never reused (writing the id counter in the state dir failed: {err})"
                ));
            }
        };
        if let Err(err) = record(id).await {
            tracing::error!(id, error = %err, "the asked call's intent could not be written; denied");
            return denied(format!(
                "the request was not shown because its intent receipt could not be written: {err}"
            ));
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        request.id = id;
        request.asked_at_ms = now_ms();
        request.expires_in_ms = self.timeout.as_millis() as u64;
        request.warnings = request.all_warnings();
        let (answer_tx, answer_rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(
            id,
            Waiting {
                request: request.clone(),
                deadline,
                cancelled: cancelled.clone(),
                answer: answer_tx,
            },
        );
        // From here on, however this future ends (even dropped), the request leaves the list and
        // watchers hear of it.
        let mut parked = Parked {
            approvals: self,
            id,
            why: Gone::Withdrawn,
        };
        let _ = self.events.send(Event::Pending {
            request: Box::new(request.clone()),
        });
        tracing::info!(id, agent = %request.agent, action = %request.action, "waiting for approval");
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        progress(format!(
            "waiting for approval (request {id}, {} s left): answer with `computer approve`, or `computer approvals allow {id}` / `computer approvals deny {id}`",
            left().as_secs()
        ));

        tokio::pin!(answer_rx);
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        let period = progress_period(self.timeout);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let resolution = loop {
            // Biased: when the agent went away at the same moment as an answer arrived, the
            // agent's departure wins and nothing runs.
            tokio::select! {
                biased;
                _ = cancelled.cancelled() => {
                    parked.why = Gone::Withdrawn;
                    break denied("the agent went away while waiting".into());
                }
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
                _ = &mut expiry => {
                    parked.why = Gone::TimedOut;
                    break denied(format!(
                        "nobody answered within {} s", self.timeout.as_secs()
                    ));
                }
                _ = ticker.tick() => progress(format!(
                    "still waiting for approval (request {id}, {} s left)",
                    left().as_secs()
                )),
            }
        };
        drop(parked);
        resolution
    }
}

/// A request on the pending list; dropping it takes the request off and tells the watchers why.
struct Parked<'a> {
    approvals: &'a Approvals,
    id: u64,
    why: Gone,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let removed = match self.approvals.pending.lock() {
            Ok(mut pending) => pending.remove(&self.id).is_some(),
            Err(_) => false,
        };
        // An answered request was taken off (and announced) by `decide`.
        if removed {
            let _ = self.approvals.events.send(Event::Resolved {
                id: self.id,
                why: self.why,
            });
        }
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
            will_run: Default::default(),
            warnings: Vec::new(),
            cwd: None,
            desktop: None,
            risk: "act".into(),
            rule: "defaults.act".into(),
            asked_at_ms: 0,
            expires_in_ms: 0,
            steps: Vec::new(),
        }
    }

    fn request_for(receipt: &str) -> PendingRequest {
        PendingRequest {
            receipt: receipt.into(),
            ..request()
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

    /// The first pending request, once there is one.
    async fn next_pending(approvals: &Approvals) -> PendingRequest {
        let mut events = approvals.subscribe();
        loop {
            if let Some(pending) = approvals.list().into_iter().next() {
                return pending;
            }
            let _ = events.recv().await;
        }
    }

    async fn answer_next(approvals: Arc<Approvals>, answer: Answer) {
        let pending = next_pending(&approvals).await;
        approvals
            .decide(pending.id, answer, approver(), Some(&pending.receipt))
            .unwrap();
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
    async fn a_cancelled_call_is_withdrawn_at_once_and_a_late_allow_decides_nothing() {
        let a = approvals(60_000);
        let mut watcher = a.subscribe();
        let cancel = CancellationToken::new();
        let asked = a.ask(request(), "k", cancel.clone(), &|_| {});
        let late_allow = async {
            let pending = next_pending(&a).await;
            cancel.cancel();
            // No await between the token firing and these: the waiting task has not run yet.
            assert!(a.list().is_empty(), "withdrawn from the list at once");
            let late = a.decide(
                pending.id,
                Answer::AllowOnce,
                approver(),
                Some(&pending.receipt),
            );
            assert_eq!(late, Err(AnswerRefused::NoSuchRequest { id: pending.id }));
            assert!(
                late.unwrap_err()
                    .to_string()
                    .contains(&format!("no pending request with id {}", pending.id))
            );
            pending.id
        };
        let (resolution, id) = tokio::join!(asked, late_allow);
        assert!(
            matches!(resolution, Resolution::Denied { ref reason, by: None, .. } if reason.contains("went away")),
            "{resolution:?}"
        );
        let mut events = Vec::new();
        while let Ok(event) = watcher.try_recv() {
            events.push(event);
        }
        assert!(
            matches!(events.as_slice(), [Event::Pending { .. }, Event::Resolved { id: gone, why: Gone::Withdrawn }] if *gone == id),
            "watchers were told it is gone: {events:?}"
        );
    }

    #[tokio::test]
    async fn a_wait_that_is_dropped_takes_its_request_along() {
        let a = approvals(60_000);
        let mut watcher = a.subscribe();
        let asked = a.ask(request(), "k", CancellationToken::new(), &|_| {});
        tokio::select! {
            _ = asked => panic!("nobody answered, yet the wait ended"),
            pending = next_pending(&a) => assert_eq!(pending.id, 1),
        }
        assert!(a.list().is_empty());
        assert!(a.decide(1, Answer::AllowOnce, approver(), None).is_err());
        assert!(matches!(watcher.try_recv(), Ok(Event::Pending { .. })));
        assert!(matches!(
            watcher.try_recv(),
            Ok(Event::Resolved {
                id: 1,
                why: Gone::Withdrawn
            })
        ));
    }

    #[tokio::test]
    async fn an_answer_for_another_request_decides_nothing() {
        let a = approvals(60_000);
        let asked = a.ask(
            request_for("receipt-b"),
            "k",
            CancellationToken::new(),
            &|_| {},
        );
        let answer = async {
            let pending = next_pending(&a).await;
            let stale = a
                .decide(pending.id, Answer::AllowOnce, approver(), Some("receipt-a"))
                .unwrap_err();
            assert_eq!(
                stale,
                AnswerRefused::NotTheRequestShown {
                    id: pending.id,
                    pending: "receipt-b".into(),
                    shown: "receipt-a".into(),
                }
            );
            assert!(stale.to_string().contains("not the one you were shown"));
            assert_eq!(
                a.list().len(),
                1,
                "the request still waits for its own answer"
            );
            a.decide(pending.id, Answer::Deny, approver(), Some("receipt-b"))
                .unwrap();
        };
        let (resolution, ()) = tokio::join!(asked, answer);
        assert!(matches!(resolution, Resolution::Denied { by: Some(_), .. }));
    }

    #[tokio::test]
    async fn ids_continue_across_restarts_and_survive_a_damaged_counter() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("approval-ids");
        let ask_once = |a: Approvals| async move {
            let cancel = CancellationToken::new();
            let asked = a.ask(request(), "k", cancel.clone(), &|_| {});
            let seen = async {
                let id = next_pending(&a).await.id;
                cancel.cancel();
                id
            };
            tokio::join!(asked, seen).1
        };
        let daemon = || {
            let approvals = Approvals::new(
                Duration::from_secs(60),
                Duration::from_secs(60),
                Duration::from_secs(60),
            );
            approvals.keep_ids_in(&file);
            approvals
        };
        assert_eq!(ask_once(daemon()).await, 1, "a fresh state dir starts at 1");
        assert_eq!(ask_once(daemon()).await, 2, "a restart continues the count");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "3\n");

        std::fs::write(&file, "garbage").unwrap();
        let resumed = ask_once(daemon()).await;
        assert!(resumed > 1_000_000_000, "resumed from the clock: {resumed}");
        assert_eq!(ask_once(daemon()).await, resumed + 1);
    }

    #[tokio::test]
    async fn an_unrecordable_id_denies() {
        let dir = tempfile::tempdir().unwrap();
        // The counter's directory is gone: nothing can be written there.
        let file = dir.path().join("missing/approval-ids");
        let a = Approvals::new(
            Duration::from_secs(60),
            Duration::from_secs(60),
            Duration::from_secs(60),
        );
        a.keep_ids_in(&file);
        let resolution = a
            .ask(request(), "k", CancellationToken::new(), &|_| {})
            .await;
        assert!(
            matches!(resolution, Resolution::Denied { ref reason, .. } if reason.contains("never reused")),
            "{resolution:?}"
        );
        assert!(a.list().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn time_left_counts_down_and_progress_keeps_coming() {
        let a = approvals(10_000);
        let said = Mutex::new(Vec::new());
        let progress = |message: String| said.lock().unwrap().push(message);
        let asked = a.ask(request(), "k", CancellationToken::new(), &progress);
        let watch = async {
            let first = next_pending(&a).await.expires_in_ms;
            tokio::time::sleep(Duration::from_millis(2500)).await;
            let later = a.list()[0].expires_in_ms;
            (first, later)
        };
        let (resolution, (first, later)) = tokio::join!(asked, watch);
        assert_eq!(first, 10_000);
        assert_eq!(later, 7_500, "expires_in_ms is the time left now");
        assert!(matches!(resolution, Resolution::Denied { .. }));
        let said = said.into_inner().unwrap();
        // One when the wait begins, then one a second (timeout / 10) until the deadline.
        assert!(said.len() >= 10, "{said:#?}");
        assert!(said[0].contains("10 s left"), "{}", said[0]);
        assert!(
            said[1].starts_with("still waiting") && said[1].contains("9 s left"),
            "{said:#?}"
        );
    }

    #[test]
    fn the_progress_period_suits_hosts_that_reset_their_timeout() {
        for (timeout, period) in [
            (120_000, 5_000),
            (600_000, 5_000),
            (30_000, 3_000),
            (400, 100),
        ] {
            assert_eq!(
                progress_period(Duration::from_millis(timeout)),
                Duration::from_millis(period),
                "timeout {timeout} ms"
            );
        }
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
        let err = a
            .decide(42, Answer::AllowOnce, approver(), None)
            .unwrap_err();
        assert!(
            err.to_string().contains("no pending request with id 42"),
            "{err}"
        );
    }
}
