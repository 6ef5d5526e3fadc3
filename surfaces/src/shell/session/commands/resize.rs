//! `shell resize`: a session's terminal given a new size (the program is told, as by a
//! person's window).

use portable_pty::PtySize;

use super::*;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeArgs {
    session: u32,
    rows: u16,
    cols: u16,
}

/// A checked `shell resize`.
pub(super) struct Resize {
    session: Arc<Session>,
    rows: u16,
    cols: u16,
}

impl Command for Resize {
    const NAME: &'static str = "resize";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["rows", "cols"];
    type Args = ResizeArgs;

    fn prepare(
        args: ResizeArgs,
        call: Preparing<'_>,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        check_size(args.rows, args.cols)?;
        Ok(match call.session(args.session) {
            Ok(session) => Box::new(Resize {
                session,
                rows: args.rows,
                cols: args.cols,
            }),
            Err(gone) => Box::new(gone),
        })
    }
}

#[async_trait]
impl PreparedAction for Resize {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        format!(
            "resize terminal session {} to {}x{}",
            self.session.id, self.rows, self.cols
        )
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({"session": self.session.id, "rows": self.rows, "cols": self.cols})),
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let (session, rows, cols) = (&self.session, self.rows, self.cols);
        let _in_use = session.enter(&ctx)?;
        session
            .master
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|err| SurfaceError::Failed {
                message: format!("resizing session {}: {err}", session.id),
            })?;
        session.state().term.resize(rows, cols);
        let mut fields = Map::new();
        fields.insert("rows".into(), json!(rows));
        fields.insert("cols".into(), json!(cols));
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }
}
