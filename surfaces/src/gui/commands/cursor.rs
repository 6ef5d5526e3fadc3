//! `gui cursor`: where the pointer is.

use computer_ipc::ToolError;
use serde_json::json;

use super::{Act, Call, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::{CommandSpec, NoArgs, Outcome, Risk, TargetFacts, decode_args};

pub const SPEC: CommandSpec = CommandSpec::of::<NoArgs>("cursor", Risk::Observe);

pub const FIELDS: &[&str] = &["x", "y"];

struct ReadCursor;

pub fn validate<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let _: NoArgs = decode_args(call.args)?;
    Ok(Box::new(ReadCursor))
}

impl<D: Desktop> Act<D> for ReadCursor {
    fn describe(&self) -> String {
        "read the pointer position".into()
    }

    fn reach(&self) -> Reach {
        Reach::Nothing
    }

    fn target(&self, _conn: &D, _window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        Ok(None)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let (x, y) = conn.cursor()?;
        Ok(done(json!({"x": x, "y": y})))
    }
}
