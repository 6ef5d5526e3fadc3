//! The control socket's wire, where people answer pending approvals: what approvers send
//! ([`ControlRequest`]), what the daemon replies ([`ControlReply`]) and announces to watchers
//! ([`ControlEvent`]), the pending request they are shown ([`PendingRequest`]) with its
//! plain-words rendering, and a small client ([`ControlClient`]) that the terminal approver and
//! the approval window share. One JSON object per line each way.

use std::path::Path;
use std::time::{Duration, Instant};

use interprocess::local_socket::tokio::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::shown::{Context, Row, Shown, Warning, WillRun, escape};

/// What an approver sees of a pending call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingRequest {
    /// Unique for this state dir: a restarted daemon never hands out an id again.
    pub id: u64,
    /// The receipt id the call will have. Approvers send it back with their answer, so an answer
    /// can only ever decide the request the person was shown.
    pub receipt: String,
    pub agent: String,
    pub caller_pid: Option<i32>,
    pub surface: String,
    pub command: String,
    /// What will happen in one line of plain words, e.g. `run ["rm", "-rf", "build"] in
    /// /home/me/src; sets GIT_DIR` (escaped; `will_run` has every value whole).
    pub action: String,
    /// Everything that takes part in the run, structured.
    #[serde(default)]
    pub will_run: WillRun,
    /// The values that hold characters a person could misread (escaped and flagged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    pub cwd: Option<String>,
    /// The desktop of the agent's own the call acts on (`gui desktop open` made it); `None`:
    /// the person's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desktop: Option<String>,
    pub risk: String,
    /// The rule (or default) that asked.
    pub rule: String,
    pub asked_at_ms: u64,
    /// Time left before the request is denied, as of when this copy was made.
    pub expires_in_ms: u64,
    /// A multi-step call's steps, every one of them, in order: one answer decides every step
    /// that asked. Empty for a single call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepRow>,
}

/// One step of a multi-step call as approvers are shown it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRow {
    /// The step's place in its call, from 1 (as the agent's `$1` refs count).
    pub index: usize,
    pub surface: String,
    pub command: String,
    /// What policy said of this step: `ask` (this answer decides it), `allow`, `wait`, or
    /// `later` (its args take values from earlier steps, so it is decided when they are known,
    /// and asked again then if policy asks).
    pub decision: String,
    /// Plain words, escaped, as [`PendingRequest::action`].
    pub action: String,
    /// Every value of what the step will run.
    #[serde(default)]
    pub will_run: WillRun,
}

impl PendingRequest {
    /// The request as every approver shows it: who asks and why, the warnings, and each value
    /// of what will run, escaped (and cut, saying so, when long).
    pub fn shown(&self) -> Shown {
        let pid = self
            .caller_pid
            .map(|p| format!(" (pid {p})"))
            .unwrap_or_default();
        let title = format!(
            "#{id}  agent `{agent}`{pid} asks for {surface}.{command}, risk {risk}; asked by {rule}; expires in {secs} s",
            id = self.id,
            agent = escape(&self.agent, Context::Line).text,
            surface = escape(&self.surface, Context::Line).text,
            command = escape(&self.command, Context::Line).text,
            risk = escape(&self.risk, Context::Line).text,
            rule = escape(&self.rule, Context::Line).text,
            secs = self.expires_in_ms / 1000,
        );
        let mut rows = self.will_run.rows();
        if rows.is_empty() {
            // A daemon that sent no structured view: its one line, escaped.
            rows.push(Row {
                label: "action".into(),
                value: escape(&self.action, Context::Line).text,
                cut: None,
            });
        }
        if let Some(desktop) = &self.desktop {
            rows.insert(
                0,
                Row {
                    label: "desktop".into(),
                    value: format!(
                        "{}, the agent's own (not yours)",
                        escape(desktop, Context::Line).text
                    ),
                    cut: None,
                },
            );
        }
        for step in &self.steps {
            rows.push(Row {
                label: format!("step {}", step.index),
                value: format!(
                    "{}.{} ({})",
                    escape(&step.surface, Context::Line).text,
                    escape(&step.command, Context::Line).text,
                    escape(&step.decision, Context::Line).text,
                ),
                cut: None,
            });
            let mut step_rows = step.will_run.rows();
            if step_rows.is_empty() {
                step_rows.push(Row {
                    label: "action".into(),
                    value: escape(&step.action, Context::Line).text,
                    cut: None,
                });
            }
            rows.extend(step_rows.into_iter().map(|row| Row {
                label: format!("  {}", row.label),
                ..row
            }));
        }
        Shown {
            title,
            rows,
            warnings: self.all_warnings(),
        }
    }

    /// The warnings of what will run, the steps' included (each field named with its step).
    pub fn all_warnings(&self) -> Vec<Warning> {
        let mut warnings = self.will_run.warnings();
        for step in &self.steps {
            warnings.extend(step.will_run.warnings().into_iter().map(|w| Warning {
                field: format!("step {} {}", step.index, w.field),
                ..w
            }));
        }
        warnings
    }
}

/// A pending call in plain words, for a terminal: [`PendingRequest::shown`] as text.
pub fn describe(request: &PendingRequest) -> String {
    request.shown().to_string()
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    AllowOnce,
    AllowSession,
    Deny,
}

/// Why a request left the pending list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gone {
    Answered,
    TimedOut,
    /// Its agent went away (disconnected or cancelled the call).
    Withdrawn,
}

impl Gone {
    /// What a watcher is told when a request leaves the list, in plain words.
    pub fn text(self) -> &'static str {
        match self {
            Gone::Answered => "answered",
            Gone::TimedOut => "timed out: denied",
            Gone::Withdrawn => "withdrawn: its agent went away",
        }
    }
}

/// A request on the control socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlRequest {
    /// The pending requests.
    List,
    /// The pending requests now (a [`ControlEvent::Snapshot`]), then an event line for each
    /// change.
    Watch,
    /// Answer one request.
    Decide {
        id: u64,
        answer: Answer,
        /// How the person answered: `terminal`, `cli`, `window`.
        via: String,
        /// The receipt id of the request the person was shown. The terminal approver and the
        /// window always send it; when it is not the pending request's, nothing is decided.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<String>,
    },
}

/// What the running daemon says of itself (in its `list` reply, and in the `_meta` of its MCP
/// `initialize` result under [`DAEMON_META_KEY`]): which config file it read, so that every
/// client names the file actually in use, whatever its own environment would resolve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonFacts {
    /// The config path the daemon resolved at start (`None` from a daemon that does not say).
    pub config: Option<std::path::PathBuf>,
    /// Whether that file exists now; when it did not at start, the embedded defaults apply.
    pub config_exists: bool,
    pub pid: u32,
    pub version: String,
    /// The desktops of agents' own open in the daemon now (`gui desktop open`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desktops: Vec<DesktopFact>,
}

/// One open desktop of an agent's own, as `doctor` and approvers list it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesktopFact {
    /// Its id (`d1`), as calls name it in `complications.desktop`.
    pub id: String,
    /// The agent it belongs to.
    pub agent: String,
    /// What runs it: `xvfb`, `xephyr`, `sway-nested` or `sway-headless`.
    pub kind: String,
    pub size: [u32; 2],
    /// Resident memory of every process it started, in bytes.
    pub resident_bytes: u64,
}

impl DaemonFacts {
    /// "the running daemon (pid N) read its config from PATH", or that it runs on its embedded
    /// defaults because nothing is there.
    pub fn config_sentence(&self) -> String {
        match &self.config {
            Some(path) if self.config_exists => format!(
                "the running daemon (pid {}) read its config from {}",
                self.pid,
                path.display()
            ),
            Some(path) => format!(
                "the running daemon (pid {}) runs on its embedded defaults: no config file at {}",
                self.pid,
                path.display()
            ),
            None => format!(
                "the running daemon (pid {}) does not say which config it read",
                self.pid
            ),
        }
    }
}

/// The key of [`DaemonFacts`] in the `_meta` of the daemon's `initialize` result.
pub const DAEMON_META_KEY: &str = "computer/daemon";

/// The daemon's reply to `list` and `decide`, and its refusal of a peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Vec<PendingRequest>>,
    /// The daemon's facts (with `list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ControlReply {
    pub fn done() -> ControlReply {
        ControlReply {
            ok: true,
            pending: None,
            daemon: None,
            error: None,
        }
    }

    pub fn pending(pending: Vec<PendingRequest>) -> ControlReply {
        ControlReply {
            pending: Some(pending),
            ..ControlReply::done()
        }
    }

    pub fn refused(error: impl Into<String>) -> ControlReply {
        ControlReply {
            ok: false,
            pending: None,
            daemon: None,
            error: Some(error.into()),
        }
    }
}

/// What a watching approver hears.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ControlEvent {
    /// Everything pending now: first, and again whenever the watcher fell behind.
    Snapshot {
        pending: Vec<PendingRequest>,
    },
    Pending {
        request: Box<PendingRequest>,
    },
    Resolved {
        id: u64,
        why: Gone,
    },
}

/// What can go wrong on the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Connect(#[from] crate::ClientError),
    #[error("the control connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon closed the control connection")]
    Closed,
    /// The daemon refused the peer or the request, and said why.
    #[error("{0}")]
    Refused(String),
    #[error("the daemon sent a line this approver does not understand: {0}")]
    Garbled(String),
}

/// A client of the control socket.
pub struct ControlClient {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<Stream>>>,
    write: tokio::io::WriteHalf<Stream>,
}

impl ControlClient {
    pub async fn connect(path: &Path) -> Result<ControlClient, ControlError> {
        let stream = crate::client::connect_stream(path).await?;
        let (read, write) = tokio::io::split(stream);
        Ok(ControlClient {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    pub async fn send(&mut self, request: &ControlRequest) -> Result<(), ControlError> {
        let mut line =
            serde_json::to_vec(request).map_err(|err| ControlError::Garbled(err.to_string()))?;
        line.push(b'\n');
        self.write.write_all(&line).await?;
        Ok(())
    }

    /// The next line from the daemon; an error when it refused or hung up.
    async fn next_line(&mut self) -> Result<Value, ControlError> {
        let line = self.lines.next_line().await?.ok_or(ControlError::Closed)?;
        let value: Value =
            serde_json::from_str(&line).map_err(|err| ControlError::Garbled(err.to_string()))?;
        if value["ok"] == Value::Bool(false) {
            return Err(ControlError::Refused(
                value["error"].as_str().unwrap_or("refused").to_string(),
            ));
        }
        Ok(value)
    }

    /// The next event of a watch. Events a newer daemon adds are skipped.
    pub async fn next_event(&mut self) -> Result<ControlEvent, ControlError> {
        loop {
            let value = self.next_line().await?;
            match serde_json::from_value::<ControlEvent>(value.clone()) {
                Ok(event) => return Ok(event),
                Err(_)
                    if value.get("event").is_some_and(|e| {
                        !matches!(e.as_str(), Some("snapshot" | "pending" | "resolved"))
                    }) => {}
                Err(err) => return Err(ControlError::Garbled(format!("{err}: {value}"))),
            }
        }
    }

    /// Sends `request` and reads its reply.
    pub async fn request(
        &mut self,
        request: &ControlRequest,
    ) -> Result<ControlReply, ControlError> {
        if let Err(err) = self.send(request).await {
            // A refused peer may find the connection closed; the refusal says why.
            return match self.next_line().await {
                Err(refusal @ ControlError::Refused(_)) => Err(refusal),
                _ => Err(err),
            };
        }
        let value = self.next_line().await?;
        serde_json::from_value(value.clone())
            .map_err(|err| ControlError::Garbled(format!("{err}: {value}")))
    }
}

/// A pending request as an approver holds it: what the daemon said, and the moment its time runs
/// out on this side (the daemon's `expires_in_ms` is the time left when it sent the request).
#[derive(Debug, Clone, PartialEq)]
pub struct HeldRequest {
    pub request: PendingRequest,
    pub deadline: Instant,
}

impl HeldRequest {
    pub fn new(request: PendingRequest) -> HeldRequest {
        HeldRequest {
            deadline: Instant::now() + Duration::from_millis(request.expires_in_ms),
            request,
        }
    }

    /// The request with its time left counted from now.
    pub fn now(&self) -> PendingRequest {
        PendingRequest {
            expires_in_ms: self
                .deadline
                .saturating_duration_since(Instant::now())
                .as_millis() as u64,
            ..self.request.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{ActionFacts, StdinFacts};
    use std::collections::BTreeMap;

    fn request() -> PendingRequest {
        PendingRequest {
            id: 7,
            receipt: "r7".into(),
            agent: "ci-bot".into(),
            caller_pid: Some(42),
            surface: "shell".into(),
            command: "run".into(),
            action: "run [\"sh\"]".into(),
            will_run: WillRun::new(
                "run [\"sh\"]",
                ActionFacts {
                    argv: Some(vec!["sh".into()]),
                    env: BTreeMap::from([("GIT_CONFIG_KEY_0".into(), "core.pager".into())]),
                    stdin: Some(StdinFacts::of("rm -rf $HOME")),
                    ..ActionFacts::default()
                },
            ),
            warnings: Vec::new(),
            cwd: None,
            desktop: None,
            risk: "act".into(),
            rule: "defaults.act".into(),
            asked_at_ms: 1,
            expires_in_ms: 60_000,
            steps: Vec::new(),
        }
    }

    /// Each wire type survives a trip through its JSON.
    #[test]
    fn every_message_round_trips() {
        for message in [
            ControlRequest::List,
            ControlRequest::Watch,
            ControlRequest::Decide {
                id: 3,
                answer: Answer::AllowSession,
                via: "window".into(),
                expect: Some("r3".into()),
            },
        ] {
            let line = serde_json::to_string(&message).unwrap();
            assert_eq!(
                serde_json::from_str::<ControlRequest>(&line).unwrap(),
                message
            );
        }
        for event in [
            ControlEvent::Snapshot {
                pending: vec![request()],
            },
            ControlEvent::Pending {
                request: Box::new(request()),
            },
            ControlEvent::Resolved {
                id: 7,
                why: Gone::TimedOut,
            },
        ] {
            let line = serde_json::to_string(&event).unwrap();
            assert_eq!(serde_json::from_str::<ControlEvent>(&line).unwrap(), event);
        }
        for reply in [
            ControlReply::done(),
            ControlReply::pending(vec![request()]),
            ControlReply::refused("no"),
        ] {
            let line = serde_json::to_string(&reply).unwrap();
            assert_eq!(serde_json::from_str::<ControlReply>(&line).unwrap(), reply);
        }
        // The shapes approvers and scripts already parse.
        assert_eq!(
            serde_json::to_value(ControlRequest::Decide {
                id: 1,
                answer: Answer::Deny,
                via: "cli".into(),
                expect: None
            })
            .unwrap(),
            serde_json::json!({"op": "decide", "id": 1, "answer": "deny", "via": "cli"})
        );
        assert_eq!(
            serde_json::to_value(ControlEvent::Resolved {
                id: 1,
                why: Gone::Withdrawn
            })
            .unwrap(),
            serde_json::json!({"event": "resolved", "id": 1, "why": "withdrawn"})
        );
    }

    #[test]
    fn the_terminal_form_shows_every_value_on_its_own_line() {
        let text = describe(&request());
        for want in [
            "#7  agent `ci-bot` (pid 42) asks for shell.run, risk act; asked by defaults.act; expires in 60 s",
            "argv[0]    | sh",
            "env GIT_CONFIG_KEY_0 | core.pager",
            "stdin (12 bytes, sha256 814da602e61dede19a7e0c2f97d438263f7f098d2b37c80fbd455912f6ac7032) | rm -rf $HOME",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        assert!(!text.contains("WARNING"), "{text}");
    }

    fn multi_step() -> PendingRequest {
        let step = |index: usize, decision: &str, argv: &[&str]| StepRow {
            index,
            surface: "shell".into(),
            command: "run".into(),
            decision: decision.into(),
            action: format!("run {argv:?}"),
            will_run: WillRun::new(
                format!("run {argv:?}"),
                ActionFacts {
                    argv: Some(argv.iter().map(|a| a.to_string()).collect()),
                    ..ActionFacts::default()
                },
            ),
        };
        PendingRequest {
            surface: "steps".into(),
            command: "call".into(),
            action: "2 steps in one call; this answer decides step 2".into(),
            will_run: WillRun::default(),
            steps: vec![
                step(1, "allow", &["ls"]),
                step(2, "ask", &["echo", "invoice\u{202e}fdp.exe"]),
            ],
            ..request()
        }
    }

    #[test]
    fn a_multi_step_request_shows_every_step_escaped_and_round_trips() {
        let multi = multi_step();
        let line = serde_json::to_string(&multi).unwrap();
        assert_eq!(
            serde_json::from_str::<PendingRequest>(&line).unwrap(),
            multi
        );
        let text = describe(&multi);
        for want in [
            "step 1     | shell.run (allow)",
            "  argv[0]  | ls",
            "step 2     | shell.run (ask)",
            "  argv[1]  | invoice\\u{202e}fdp.exe",
            "WARNING step 2 argv[1]",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        assert!(!text.contains('\u{202e}'), "{text}");
        // A single call's request carries no steps on the wire (older approvers read it as before).
        assert!(
            serde_json::to_value(request())
                .unwrap()
                .get("steps")
                .is_none()
        );
    }
}
