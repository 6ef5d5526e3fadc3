//! `gui windows`: the managed windows, recorded as a snapshot acts can be aimed at.

use computer_ipc::ToolError;
use serde_json::{Value, json};

use super::{Act, Call, Capability, Command, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::seen::GuiSnapshot;
use crate::{NoArgs, Outcome, Risk, TargetFacts};

pub struct Windows;

impl Command for Windows {
    const NAME: &'static str = "windows";
    const RISK: Risk = Risk::Observe;
    // A list's length is its count: no separate field repeats it. `snapshot`: the id an act
    // names in `complications.seen`.
    const FIELDS: &'static [&'static str] = &["windows", "snapshot"];
    const NEEDS: &'static [Capability] = &[Capability::Windows];
    type Args = NoArgs;

    fn prepare<D: Desktop>(_args: NoArgs, _call: &Call<'_, D>) -> Result<Windows, ToolError> {
        Ok(Windows)
    }
}

impl<D: Desktop> Act<D> for Windows {
    fn describe(&self) -> String {
        "list windows".into()
    }

    fn reach(&self) -> Reach {
        Reach::Nothing
    }

    fn target(&self, _conn: &D, _window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        Ok(None)
    }

    fn perform(self: Box<Self>, conn: &D, running: &Running<'_>) -> Result<Outcome, Failure> {
        let windows = conn.windows()?;
        let list: Vec<Value> = windows
            .iter()
            .map(|w| {
                json!({
                    "id": w.id,
                    "title": w.title,
                    "app": w.app,
                    "pid": w.pid,
                    "x": w.rect.x,
                    "y": w.rect.y,
                    "width": w.rect.width,
                    "height": w.rect.height,
                    "focused": w.focused,
                    "monitor": w.monitor,
                })
            })
            .collect();
        let snapshot = running.snapshots.record(
            &running.ctx.agent,
            GuiSnapshot {
                windows: Some(windows),
                stacking: conn.stacking().ok().flatten(),
                image: None,
            },
        );
        Ok(done(json!({"windows": list, "snapshot": snapshot})))
    }
}
