//! `shell screen`: a session's terminal as text, as the person would see it, with its cursor
//! and size.

use super::*;
use crate::kit::capture::CapturedText;

/// A checked `shell screen`.
pub(super) struct Screen {
    session: Arc<Session>,
}

impl Command for Screen {
    const NAME: &'static str = "screen";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "screen",
        "cursor",
        "rows",
        "cols",
        "alternate_screen?",
        "exited?",
    ];
    type Args = SessionArgs;

    fn prepare(
        args: SessionArgs,
        call: Preparing<'_>,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        Ok(match call.session(args.session) {
            Ok(session) => Box::new(Screen { session }),
            Err(gone) => Box::new(gone),
        })
    }
}

#[async_trait]
impl PreparedAction for Screen {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!("read the screen of terminal session {}", self.session.id)
    }

    fn facts(&self) -> ActionFacts {
        session_facts(self.session.id)
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let session = &self.session;
        let _in_use = session.enter(&ctx)?;
        let mut fields = Map::new();
        let state = session.state();
        let screen = state.term.screen();
        let (row, col) = screen.cursor_position();
        let (rows, cols) = screen.size();
        fields.insert("cursor".into(), json!({"row": row, "col": col}));
        fields.insert("rows".into(), json!(rows.get()));
        fields.insert("cols".into(), json!(cols.get()));
        if screen.alternate_screen() {
            fields.insert("alternate_screen".into(), json!(true));
        }
        let texts = vec![CapturedText::from_bytes(
            "screen",
            state.term.screen_text().into_bytes(),
        )];
        drop(state);
        insert_exit(&mut fields, session.exit());
        Ok(Outcome {
            success: true,
            fields,
            texts,
            ..Outcome::default()
        })
    }
}
