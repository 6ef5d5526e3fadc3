//! `gui monitors`: the monitors and where each lies on the screen.

use computer_ipc::ToolError;
use serde_json::{Value, json};

use super::{Act, Call, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::{CommandSpec, NoArgs, Outcome, Risk, TargetFacts, decode_args};

pub const SPEC: CommandSpec = CommandSpec::of::<NoArgs>("monitors", Risk::Observe);

pub const FIELDS: &[&str] = &["monitors"];

struct ListMonitors;

pub fn validate<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let _: NoArgs = decode_args(call.args)?;
    Ok(Box::new(ListMonitors))
}

impl<D: Desktop> Act<D> for ListMonitors {
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
