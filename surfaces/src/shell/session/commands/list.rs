//! `shell list`: the caller's own open sessions, each with its program, size and idle time.

use super::*;
use crate::NoArgs;

/// A checked `shell list`.
pub(super) struct List {
    sessions: Arc<Sessions>,
}

impl Command for List {
    const NAME: &'static str = "list";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["sessions"];
    type Args = NoArgs;

    fn prepare(_: NoArgs, call: Preparing<'_>) -> Result<Box<dyn PreparedAction>, ToolError> {
        Ok(Box::new(List {
            sessions: call.sessions,
        }))
    }
}

#[async_trait]
impl PreparedAction for List {
    fn risk(&self) -> Risk {
        Self::RISK
    }

    fn describe(&self) -> String {
        "list this agent's terminal sessions".into()
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            args: Some(json!({})),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let mine: Vec<Arc<Session>> = self
            .sessions
            .table()
            .open
            .values()
            .filter(|s| s.owner == ctx.agent)
            .cloned()
            .collect();
        let listed: Vec<Value> = mine
            .iter()
            .map(|s| {
                let idle_ms = s
                    .last_used
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .elapsed()
                    .as_millis() as u64;
                let (rows, cols) = s.state().term.screen().size();
                let mut entry = json!({
                    "session": s.id,
                    "program": s.argv,
                    "rows": rows.get(),
                    "cols": cols.get(),
                    "idle_ms": idle_ms,
                });
                if let Some(exit) = s.exit() {
                    entry["exited"] = json!(true);
                    if let Some(code) = exit.code {
                        entry["exit_code"] = json!(code);
                    }
                }
                entry
            })
            .collect();
        let mut fields = Map::new();
        fields.insert("sessions".into(), json!(listed));
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }
}
