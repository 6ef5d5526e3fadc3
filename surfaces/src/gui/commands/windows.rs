//! `gui windows`: the managed windows, recorded as a snapshot acts can be aimed at.

use computer_ipc::ToolError;
use serde_json::{Value, json};

use super::{Act, Call, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::seen::GuiSnapshot;
use crate::{CommandSpec, NoArgs, Outcome, Risk, TargetFacts, decode_args};

pub const SPEC: CommandSpec = CommandSpec::of::<NoArgs>("windows", Risk::Observe);

// A list's length is its count: no separate field repeats it. `snapshot`: the id an act names
// in `complications.seen`.
pub const FIELDS: &[&str] = &["windows", "snapshot"];

struct ListWindows;

pub fn validate<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let _: NoArgs = decode_args(call.args)?;
    Ok(Box::new(ListWindows))
}

impl<D: Desktop> Act<D> for ListWindows {
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
