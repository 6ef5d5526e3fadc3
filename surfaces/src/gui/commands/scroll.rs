//! `gui scroll`: scrolls by notches, at a point or where the pointer is.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::pointer::{POINT, at_or_cursor, pointer_point};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts};

/// Most notches per scroll: more is a mistake, not a request.
const MAX_NOTCHES: i32 = 100;

/// dx,dy notches (+right/down)
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScrollArgs {
    #[serde(default)]
    dx: i32,
    #[serde(default)]
    dy: i32,
    #[serde(default)]
    x: Option<i32>,
    #[serde(default)]
    y: Option<i32>,
}

#[derive(Debug)]
pub struct Scroll {
    at: Option<(i32, i32)>,
    dx: i32,
    dy: i32,
}

impl Command for Scroll {
    const NAME: &'static str = "scroll";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["x", "y", "dx", "dy", "effect", "effect_evidence"];
    const NEEDS: &'static [Capability] = &[Capability::Pointer];
    const POINTS: &'static [(&'static str, &'static str)] = POINT;
    type Args = ScrollArgs;

    fn prepare<D: Desktop>(a: ScrollArgs, call: &Call<'_, D>) -> Result<Scroll, ToolError> {
        for (value, path) in [(a.dx, "args.dx"), (a.dy, "args.dy")] {
            if value.abs() > MAX_NOTCHES {
                return Err(ToolError::invalid(format!(
                    "scroll at most {MAX_NOTCHES} notches per call"
                ))
                .at(path));
            }
        }
        if a.dx == 0 && a.dy == 0 {
            return Err(
                ToolError::invalid("give dy (down +, up -) or dx (right +, left -)")
                    .at("args")
                    .valid(["dx", "dy"]),
            );
        }
        Ok(Scroll {
            at: pointer_point(call.conn, a.x, a.y, call.screen()?)?,
            dx: a.dx,
            dy: a.dy,
        })
    }
}

impl<D: Desktop> Act<D> for Scroll {
    fn describe(&self) -> String {
        let Scroll { dx, dy, .. } = self;
        format!("scroll dx={dx} dy={dy}")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some(at_or_cursor(conn, self.at)?), window)
    }

    fn landing(&self, conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![at_or_cursor(conn, self.at)?])
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Windows)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Scroll { at, dx, dy } = *self;
        conn.scroll(at, dx, dy)?;
        let (x, y) = at_or_cursor(conn, at)?;
        Ok(done(json!({"x": x, "y": y, "dx": dx, "dy": dy})))
    }
}
