//! `shell close`: a session ended, with every process it started.

use super::*;

/// A checked `shell close`. Its risk is an observation: closing ends only what the caller itself
/// started, and asking a person to let an agent stop its own work would only teach people to
/// approve blindly.
pub(super) struct Close {
    sessions: Arc<Sessions>,
    session: Arc<Session>,
}

impl Command for Close {
    const NAME: &'static str = "close";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["closed", "killed_processes?"];
    type Args = SessionArgs;

    fn prepare(
        args: SessionArgs,
        call: Preparing<'_>,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        Ok(match call.session(args.session) {
            Ok(session) => Box::new(Close {
                sessions: call.sessions,
                session,
            }),
            Err(gone) => Box::new(gone),
        })
    }
}

#[async_trait]
impl PreparedAction for Close {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!(
            "close terminal session {}, ending its processes",
            self.session.id
        )
    }

    fn facts(&self) -> ActionFacts {
        session_facts(self.session.id)
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let session = &self.session;
        drop(session.enter(&ctx)?);
        let why = format!("closed by `shell close` (call {})", ctx.call_id);
        if self.sessions.forget(session.id, why).is_none() {
            return Err(SurfaceError::Failed {
                message: format!("session {} was closed already", session.id),
            });
        }
        session.closed.cancel();
        let killed = session.process.stop().await;
        let mut fields = Map::new();
        fields.insert("closed".into(), json!(session.id));
        fields.insert("killed_processes".into(), json!(killed));
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }
}
