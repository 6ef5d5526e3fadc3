//! `gui click`: clicks a button once or more, at a point or where the pointer is.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::pointer::{POINT, at_or_cursor, button_name, pointer_point};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Button, Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts};

/// Most clicks per click: more is a mistake, not a request.
const MAX_CLICKS: u32 = 10;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClickArgs {
    #[serde(default)]
    x: Option<i32>,
    #[serde(default)]
    y: Option<i32>,
    #[serde(default)]
    button: Option<Button>,
    /// =1
    #[serde(default)]
    count: Option<u32>,
}

#[derive(Debug)]
pub struct Click {
    at: Option<(i32, i32)>,
    button: Button,
    count: u32,
}

impl Command for Click {
    const NAME: &'static str = "click";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] =
        &["x", "y", "button", "count", "effect", "effect_evidence"];
    const NEEDS: &'static [Capability] = &[Capability::Pointer];
    const POINTS: &'static [(&'static str, &'static str)] = POINT;
    type Args = ClickArgs;

    fn prepare<D: Desktop>(a: ClickArgs, call: &Call<'_, D>) -> Result<Click, ToolError> {
        let count = a.count.unwrap_or(1);
        if !(1..=MAX_CLICKS).contains(&count) {
            return Err(
                ToolError::invalid(format!("count must be 1..={MAX_CLICKS}")).at("args.count"),
            );
        }
        Ok(Click {
            at: pointer_point(call.conn, a.x, a.y, call.screen()?)?,
            button: a.button.unwrap_or(Button::Left),
            count,
        })
    }
}

impl<D: Desktop> Act<D> for Click {
    fn describe(&self) -> String {
        let Click { at, button, count } = self;
        match at {
            Some((x, y)) => format!("{button:?} click x{count} at ({x},{y})"),
            None => format!("{button:?} click x{count} where the pointer is"),
        }
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
        Some(Aim::Click(self.at))
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Click { at, button, count } = *self;
        conn.click(at, button, count)?;
        let (x, y) = at_or_cursor(conn, at)?;
        Ok(done(
            json!({"x": x, "y": y, "button": button_name(button), "count": count}),
        ))
    }
}
