//! `shell read`: a session's new output since a cursor, waiting (bounded) for a regex, the
//! program's end or a quiet spell.

use super::*;
use crate::kit::capture::CapturedText;

/// After the program ended, output still in the pty is read for at most this long.
const EXIT_DRAIN: Duration = Duration::from_millis(300);

// `shell read`'s args.
/// new output; waits ≤ timeout_ms (=10000)
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    session: u32,
    /// =the last read's end
    #[serde(default)]
    cursor: Option<u64>,
    /// regex
    #[serde(default)]
    until: Option<String>,
    /// wait for the end
    #[serde(default)]
    exit: bool,
    /// wait for this much silence
    #[serde(default)]
    quiet_ms: Option<u64>,
}

/// A checked `shell read`.
pub(super) struct ReadOutput {
    session: Arc<Session>,
    args: ReadArgs,
    until: Option<regex::Regex>,
    wait: Duration,
}

impl Command for ReadOutput {
    const NAME: &'static str = "read";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "output?",
        "cursor",
        "dropped?",
        "met?",
        "timed_out?",
        "exited?",
        "exit_code?",
        "signal?",
    ];
    type Args = ReadArgs;

    fn prepare(args: ReadArgs, call: Preparing<'_>) -> Result<Box<dyn PreparedAction>, ToolError> {
        let until = match &args.until {
            Some(pattern) => Some(regex::Regex::new(pattern).map_err(|err| {
                ToolError::invalid(format!("`until` is not a valid regex: {err}")).at("args.until")
            })?),
            None => None,
        };
        Ok(match call.session(args.session) {
            Ok(session) => Box::new(ReadOutput {
                session,
                args,
                until,
                wait: call.wait,
            }),
            Err(gone) => Box::new(gone),
        })
    }
}

#[async_trait]
impl PreparedAction for ReadOutput {
    fn risk(&self) -> Risk {
        Risk::Observe
    }

    fn describe(&self) -> String {
        format!("read the output of terminal session {}", self.session.id)
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({
                "session": self.args.session,
                "cursor": self.args.cursor,
                "until": self.args.until,
                "exit": self.args.exit,
                "quiet_ms": self.args.quiet_ms,
            })),
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let session = &self.session;
        let _in_use = session.enter(&ctx)?;
        let cursor = match self.args.cursor {
            Some(cursor) => cursor,
            None => session.state().read_cursor,
        };
        let end = session.state().term.log().end();
        if cursor > end {
            return Err(SurfaceError::Failed {
                message: format!(
                    "cursor {cursor} is past the end of session {}'s output ({end}); use a \
                     cursor a read returned",
                    session.id
                ),
            });
        }
        let waits = self.until.is_some() || self.args.exit || self.args.quiet_ms.is_some();
        let deadline = tokio::time::Instant::now() + self.wait;
        let met = self.wait_until_met(cursor, waits, deadline, &ctx).await?;
        let since = {
            let mut state = session.state();
            let since = state.term.log().since(cursor);
            state.read_cursor = since.end;
            since
        };
        let mut fields = Map::new();
        fields.insert("cursor".into(), json!(since.end));
        if since.dropped > 0 {
            fields.insert("dropped".into(), json!(since.dropped));
        }
        if waits {
            fields.insert("met".into(), json!(met));
            if !met && tokio::time::Instant::now() >= deadline {
                fields.insert("timed_out".into(), json!(true));
            }
        }
        insert_exit(&mut fields, session.exit());
        Ok(Outcome {
            success: met,
            fields,
            texts: vec![CapturedText::from_bytes("output", since.text)],
            ..Outcome::default()
        })
    }
}

impl ReadOutput {
    /// Waits (until `deadline`) for what the read asks to wait for: the `until` regex in the
    /// output since `cursor`, the program's end, or a quiet spell. Whether it was met; at once
    /// `true` when the read waits for nothing.
    async fn wait_until_met(
        &self,
        cursor: u64,
        waits: bool,
        deadline: tokio::time::Instant,
        ctx: &CallContext,
    ) -> Result<bool, SurfaceError> {
        let session = &self.session;
        let quiet = self.args.quiet_ms.map(Duration::from_millis);
        let mut changes = session.changed.subscribe();
        let mut last_change = tokio::time::Instant::now();
        let mut exited_at: Option<tokio::time::Instant> = None;
        loop {
            let (matched, eof, exited) = {
                let state = session.state();
                let since = state.term.log().since(cursor);
                let matched = self
                    .until
                    .as_ref()
                    .map(|re| re.is_match(&String::from_utf8_lossy(&since.text)));
                (matched, state.eof, session.exit().is_some())
            };
            if exited && exited_at.is_none() {
                exited_at = Some(tokio::time::Instant::now());
            }
            let now = tokio::time::Instant::now();
            // The program's end counts once its output is read to the end (or after a short
            // drain, when something it left keeps the terminal open).
            let ended = exited && (eof || exited_at.is_some_and(|at| now >= at + EXIT_DRAIN));
            let quiet_met = quiet.is_some_and(|q| now >= last_change + q);
            let met = !waits
                || matched == Some(true)
                || (self.args.exit && ended)
                || quiet_met
                // Nothing more can come: an unmet regex or quiet wait ends with the program.
                || (ended && eof);
            if met {
                return Ok(!waits
                    || matched == Some(true)
                    || (self.args.exit && ended)
                    || quiet_met);
            }
            if now >= deadline {
                return Ok(false);
            }
            let mut next = deadline;
            if let Some(q) = quiet {
                next = next.min(last_change + q);
            }
            if let Some(at) = exited_at {
                next = next.min(at + EXIT_DRAIN);
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(false);
                    }
                    last_change = tokio::time::Instant::now();
                }
                _ = tokio::time::sleep_until(next) => {}
                _ = ctx.cancel.cancelled() => {
                    return Err(SurfaceError::Failed { message: "cancelled while waiting".into() });
                }
            }
        }
    }
}
