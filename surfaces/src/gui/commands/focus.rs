//! `gui focus`: gives a managed window the keyboard focus.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::{
    Act, Call, Capability, Command, Failure, Reach, Running, display_failed, fields, target_window,
    unknown_window,
};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FocusArgs {
    /// id
    window: u32,
}

#[derive(Debug)]
pub struct Focus {
    window: u32,
}

impl Command for Focus {
    const NAME: &'static str = "focus";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["window", "focused", "effect", "effect_evidence"];
    const NEEDS: &'static [Capability] = &[Capability::RaiseWindow];
    type Args = FocusArgs;

    fn prepare<D: Desktop>(a: FocusArgs, call: &Call<'_, D>) -> Result<Focus, ToolError> {
        let ids = call.conn.window_ids().map_err(display_failed)?;
        if !ids.contains(&a.window) {
            return Err(unknown_window(a.window, ids, "args.window"));
        }
        Ok(Focus { window: a.window })
    }
}

impl<D: Desktop> Act<D> for Focus {
    fn describe(&self) -> String {
        format!("focus window {}", self.window)
    }

    fn reach(&self) -> Reach {
        Reach::Window(self.window)
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, None, window)
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Focus(self.window))
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let window = self.window;
        let focused = conn.focus(window)?;
        Ok(Outcome {
            success: focused,
            fields: fields(json!({"window": window, "focused": focused})),
            ..Outcome::default()
        })
    }
}
