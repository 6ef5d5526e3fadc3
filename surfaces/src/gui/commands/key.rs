//! `gui key`: one key combo pressed in the window that has the keyboard focus (checked, with a
//! terminal's line, right before the keys go).

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::keys::{self as delivery, KeyPlan, Keys, receiving_window, send_keys};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::keys::{self, Combo};
use crate::gui::read_back::Aim;
use crate::{Outcome, Risk, TargetFacts, TerminalInput};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyArgs {
    /// e.g. Return|ctrl+shift+t|alt+F4
    combo: String,
}

#[derive(Debug)]
pub struct Key {
    /// The combo as the caller wrote it.
    combo: String,
    parsed: Combo,
    keys: KeyPlan,
}

impl Command for Key {
    const NAME: &'static str = "key";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["combo", "window?", "effect", "effect_evidence"];
    // Keys go to the focused window, which must be known before they are sent.
    const NEEDS: &'static [Capability] = &[Capability::Keyboard, Capability::Windows];
    type Args = KeyArgs;

    fn prepare<D: Desktop>(a: KeyArgs, call: &Call<'_, D>) -> Result<Key, ToolError> {
        let parsed = keys::parse_combo(&a.combo).map_err(|err| {
            ToolError::invalid(err.message)
                .at("args.combo")
                .valid(err.valid)
        })?;
        let keys = delivery::plan(call.conn, call.terminals, Keys::Combo(&parsed, &a.combo))?;
        Ok(Key {
            combo: a.combo,
            parsed,
            keys,
        })
    }
}

impl<D: Desktop> Act<D> for Key {
    fn describe(&self) -> String {
        format!("press {}{}", self.combo, self.keys.describe())
    }

    fn reach(&self) -> Reach {
        Reach::Keys
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, None, window)
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Key)
    }

    fn terminal_input(&self) -> Option<TerminalInput> {
        self.keys.terminal_input()
    }

    fn perform(self: Box<Self>, conn: &D, running: &Running<'_>) -> Result<Outcome, Failure> {
        let Key {
            combo,
            parsed,
            keys,
        } = *self;
        send_keys(
            conn,
            &keys,
            running.terminals,
            &running.ctx.protected,
            |conn| conn.press_combo(&parsed),
        )?;
        let mut reply = json!({"combo": combo});
        if let Some(window) = receiving_window(conn, keys.target) {
            reply["window"] = window;
        }
        Ok(done(reply))
    }
}
