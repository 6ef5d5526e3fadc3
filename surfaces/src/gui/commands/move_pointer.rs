//! `gui move`: moves the pointer to a point on the screen.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::pointer::{POINT, on_screen};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts};

/// screen px
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveArgs {
    x: i32,
    y: i32,
}

#[derive(Debug)]
pub struct Move {
    x: i32,
    y: i32,
}

impl Command for Move {
    const NAME: &'static str = "move";
    const RISK: Risk = Risk::Act;
    // Every act ends with what its read-back found (`effect`, `effect_evidence`).
    const FIELDS: &'static [&'static str] = &["x", "y", "effect", "effect_evidence"];
    const NEEDS: &'static [Capability] = &[Capability::Pointer];
    const POINTS: &'static [(&'static str, &'static str)] = POINT;
    type Args = MoveArgs;

    fn prepare<D: Desktop>(a: MoveArgs, call: &Call<'_, D>) -> Result<Move, ToolError> {
        on_screen(call.screen()?, a.x, a.y, "args.x", "args.y")?;
        Ok(Move { x: a.x, y: a.y })
    }
}

impl<D: Desktop> Act<D> for Move {
    fn describe(&self) -> String {
        let Move { x, y } = self;
        format!("move the pointer to ({x},{y})")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some((self.x, self.y)), window)
    }

    fn landing(&self, _conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![(self.x, self.y)])
    }

    fn may_edit_terminals(&self) -> bool {
        false
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Pointer(self.x, self.y))
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Move { x, y } = *self;
        conn.move_to(x, y)?;
        Ok(done(json!({"x": x, "y": y})))
    }
}
