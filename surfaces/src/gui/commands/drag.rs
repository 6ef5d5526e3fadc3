//! `gui drag`: presses a button at one point and releases it at another.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::pointer::{button_name, on_screen};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Button, Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DragArgs {
    from_x: i32,
    from_y: i32,
    to_x: i32,
    to_y: i32,
    #[serde(default)]
    button: Option<Button>,
}

#[derive(Debug)]
pub struct Drag {
    from: (i32, i32),
    to: (i32, i32),
    button: Button,
}

impl Command for Drag {
    const NAME: &'static str = "drag";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &[
        "from_x",
        "from_y",
        "to_x",
        "to_y",
        "button",
        "effect",
        "effect_evidence",
    ];
    const NEEDS: &'static [Capability] = &[Capability::Pointer];
    const POINTS: &'static [(&'static str, &'static str)] =
        &[("from_x", "from_y"), ("to_x", "to_y")];
    type Args = DragArgs;

    fn prepare<D: Desktop>(a: DragArgs, call: &Call<'_, D>) -> Result<Drag, ToolError> {
        let screen = call.screen()?;
        on_screen(screen, a.from_x, a.from_y, "args.from_x", "args.from_y")?;
        on_screen(screen, a.to_x, a.to_y, "args.to_x", "args.to_y")?;
        Ok(Drag {
            from: (a.from_x, a.from_y),
            to: (a.to_x, a.to_y),
            button: a.button.unwrap_or(Button::Left),
        })
    }
}

impl<D: Desktop> Act<D> for Drag {
    fn describe(&self) -> String {
        let Drag { from, to, button } = self;
        format!("{button:?} drag from {from:?} to {to:?}")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some(self.from), window)
    }

    fn landing(&self, _conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![self.from, self.to])
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Windows)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Drag { from, to, button } = *self;
        conn.drag(from, to, button)?;
        Ok(done(json!({
            "from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1,
            "button": button_name(button),
        })))
    }
}
