//! `gui type`: text, or a stored secret resolved only when the call runs, typed into the window
//! that has the keyboard focus (checked, with a terminal's line, right before the keys go).

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::keys::{self, KeyPlan, Keys, receiving_window, send_keys};
use super::{Act, Call, Capability, Command, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Desktop, DisplayResult};
use crate::gui::read_back::Aim;
use crate::kit::secret_store::SecretRef;
use crate::kit::secrets::{SecretDestination, SecretUse};
use crate::{Outcome, Risk, TargetFacts, TerminalInput};
use serde_json::{Map, Value};

/// Most characters per `type`: longer text belongs in a file or the clipboard.
const MAX_TYPE_CHARS: usize = 10_000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeArgs {
    /// any unicode, or {secret:"keychain://svc/acct"} to type a stored secret unseen
    text: TypeText,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum TypeText {
    Text(String),
    Secret { secret: String },
}

/// What `type` types: text given, or a secret resolved when the call runs.
#[derive(Debug)]
enum Typed {
    Text(String),
    Secret(SecretRef),
}

#[derive(Debug)]
pub struct Type {
    text: Typed,
    keys: KeyPlan,
}

impl Command for Type {
    const NAME: &'static str = "type";
    const RISK: Risk = Risk::Act;
    // `window?`: the window the keys reached, when it can be told; `secret`: a secret was
    // typed (neither its value nor its length is told).
    const FIELDS: &'static [&'static str] =
        &["chars?", "secret?", "window?", "effect", "effect_evidence"];
    // Keys go to the focused window, which must be known before they are sent.
    const NEEDS: &'static [Capability] = &[Capability::Keyboard, Capability::Windows];
    type Args = TypeArgs;

    fn check_given(args: &Map<String, Value>) -> Result<(), ToolError> {
        // Checked first for an error that says what a secret looks like.
        match args.get("text") {
            Some(value) => crate::kit::secrets::secret_in_place(value, "args.text").map(|_| ()),
            None => Ok(()),
        }
    }

    fn prepare<D: Desktop>(a: TypeArgs, call: &Call<'_, D>) -> Result<Type, ToolError> {
        let text = checked_text(a, call)?;
        let keys = match &text {
            Typed::Text(text) => keys::plan(
                call.conn,
                call.terminals,
                Keys::Text(&text.replace("\r\n", "\n")),
            ),
            Typed::Secret(_) => keys::plan(call.conn, call.terminals, Keys::Secret),
        }?;
        Ok(Type { text, keys })
    }
}

/// The text the args give, checked that keys can type it.
fn checked_text<D: Desktop>(a: TypeArgs, call: &Call<'_, D>) -> Result<Typed, ToolError> {
    let text = match a.text {
        TypeText::Text(text) => text,
        TypeText::Secret { secret } => {
            return Ok(Typed::Secret(crate::kit::secrets::parse_reference(
                &secret,
                "args.text.secret",
            )?));
        }
    };
    let chars = text.chars().count();
    if chars == 0 {
        return Err(ToolError::invalid("text is empty").at("args.text"));
    }
    if chars > MAX_TYPE_CHARS {
        return Err(ToolError::invalid(format!(
            "text has {chars} characters; type at most {MAX_TYPE_CHARS} per call"
        ))
        .at("args.text"));
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r' | '\u{8}'))
    {
        return Err(ToolError::invalid(format!(
            "text holds control character U+{:04X}, which no key types; use `key`",
            c as u32
        ))
        .at("args.text"));
    }
    if let Some(why) = call.conn.untypable(&text) {
        return Err(ToolError::invalid(why).at("args.text"));
    }
    Ok(Typed::Text(text))
}

impl<D: Desktop> Act<D> for Type {
    fn describe(&self) -> String {
        // The text may be private: say how much, not what. What a terminal runs is a
        // command, shown as a shell run's script is.
        match &self.text {
            Typed::Text(text) => format!(
                "type {} characters{}",
                text.chars().count(),
                self.keys.describe()
            ),
            Typed::Secret(_) => format!("type a stored secret{}", self.keys.describe()),
        }
    }

    fn reach(&self) -> Reach {
        Reach::Keys
    }

    fn risk(&self, listed: Risk) -> Risk {
        match self.text {
            Typed::Secret(_) => Risk::Secret,
            Typed::Text(_) => listed,
        }
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, None, window)
    }

    fn read_back(&self) -> Option<Aim> {
        Some(match &self.text {
            Typed::Text(text) => Aim::Text(Some(text.replace("\r\n", "\n"))),
            Typed::Secret(_) => Aim::Text(None),
        })
    }

    fn terminal_input(&self) -> Option<TerminalInput> {
        self.keys.terminal_input()
    }

    fn secrets(&self, app: Option<String>) -> Vec<SecretUse> {
        match &self.text {
            Typed::Secret(reference) => vec![SecretUse {
                name: crate::kit::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: SecretDestination::Typed {
                    window: self.keys.target,
                    app,
                    terminal: self.keys.terminal.is_some(),
                },
            }],
            Typed::Text(_) => Vec::new(),
        }
    }

    fn perform(self: Box<Self>, conn: &D, running: &Running<'_>) -> Result<Outcome, Failure> {
        let Type { text, keys } = *self;
        let protected = &running.ctx.protected;
        match text {
            Typed::Text(text) => {
                // "\r\n" is one line break, not two.
                let text = text.replace("\r\n", "\n");
                send_keys(conn, &keys, running.terminals, protected, |conn| {
                    conn.type_text(&text)
                })?;
                let mut reply = json!({"chars": text.chars().count()});
                if let Some(window) = receiving_window(conn, keys.target) {
                    reply["window"] = window;
                }
                Ok(done(reply))
            }
            Typed::Secret(reference) => {
                // Resolved only now, after policy and approval, and registered for masking
                // first.
                let value = running
                    .ctx
                    .secrets
                    .resolve(crate::kit::secrets::IN_PLACE, &reference)?;
                let text = secrecy::ExposeSecret::expose_secret(&value);
                crate::kit::secrets::check_typed_secret(text, MAX_TYPE_CHARS)?;
                send_keys(conn, &keys, running.terminals, protected, |conn| {
                    conn.type_text(text)
                })?;
                // Neither the value nor its length: the model learns that it was typed.
                let mut reply = json!({"secret": "typed"});
                if let Some(window) = receiving_window(conn, keys.target) {
                    reply["window"] = window;
                }
                Ok(done(reply))
            }
        }
    }
}
