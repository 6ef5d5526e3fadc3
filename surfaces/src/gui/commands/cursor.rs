//! `gui cursor`: where the pointer is.

use computer_ipc::ToolError;
use serde_json::json;

use super::{Act, Call, Capability, Command, Failure, Reach, Running, done};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::{NoArgs, Outcome, Risk, TargetFacts};

pub struct Cursor;

impl Command for Cursor {
    const NAME: &'static str = "cursor";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &["x", "y"];
    const NEEDS: &'static [Capability] = &[Capability::ReadPointer];
    type Args = NoArgs;

    fn prepare<D: Desktop>(_args: NoArgs, _call: &Call<'_, D>) -> Result<Cursor, ToolError> {
        Ok(Cursor)
    }
}

impl<D: Desktop> Act<D> for Cursor {
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
