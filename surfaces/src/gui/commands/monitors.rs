//! `gui monitors`: the monitors and where each lies on the screen.

use computer_ipc::ToolError;
use serde_json::{Value, json};

use super::{Act, Call, Capability, Command, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::{NoArgs, Outcome, Risk, TargetFacts};

pub struct Monitors;

impl Command for Monitors {
    const NAME: &'static str = "monitors";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["monitors"];
    // Every backend tells its monitors.
    const NEEDS: &'static [Capability] = &[];
    type Args = NoArgs;

    fn prepare<D: Desktop>(_args: NoArgs, _call: &Call<'_, D>) -> Result<Monitors, ToolError> {
        Ok(Monitors)
    }
}

impl<D: Desktop> Act<D> for Monitors {
    fn describe(&self) -> String {
        "list monitors".into()
    }

    fn reach(&self) -> Reach {
        Reach::Nothing
    }

    fn target(&self, _conn: &D, _window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        Ok(None)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let monitors = conn.monitors()?;
        let list: Vec<Value> = monitors
            .iter()
            .map(|m| {
                json!({
                    "index": m.index,
                    "name": m.name,
                    "x": m.rect.x,
                    "y": m.rect.y,
                    "width": m.rect.width,
                    "height": m.rect.height,
                    "primary": m.primary,
                })
            })
            .collect();
        Ok(done(json!({"monitors": list})))
    }
}
