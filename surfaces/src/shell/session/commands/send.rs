//! `shell send`: text (or a stored secret, typed unseen) and named keys into a session; for a
//! shell, the command lines they end are the facts policy decides.

use super::super::keys;
use super::*;
use secrecy::ExposeSecret;
use tokio::sync::watch;

use crate::kit::secret_store::SecretRef;
use crate::kit::secrets::{SecretDestination, SecretUse};
use crate::{Effect, EffectReport, StdinFacts, TerminalInput, receipt_value};

/// Longest text one `send` takes.
const MAX_SEND_BYTES: usize = 64 * 1024;

// `shell send`'s args.
/// text first, then keys
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    session: u32,
    // The type's doc is what the description says of this field (an untagged enum is its doc).
    #[serde(default)]
    text: Option<SendText>,
    /// Enter Tab Escape Backspace Up Down Left Right Home End PageUp PageDown Delete F1-F12 C-x M-x
    #[serde(default)]
    keys: Option<Vec<String>>,
}

/// as typed (\n=Enter), or {secret:"keychain://svc/acct"}: typed unseen
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SendText {
    Text(String),
    Secret { secret: String },
}

/// A checked `shell send`: the bytes, and for a shell, the lines they end.
pub(super) struct SendInput {
    session: Arc<Session>,
    /// The text's bytes then the keys'; with a secret, the keys' alone (the value goes first
    /// when the call runs).
    bytes: Vec<u8>,
    text: Option<String>,
    secret: Option<SecretRef>,
    keys: Vec<String>,
    /// The shell's line this send was decided on, and what it does to it.
    generation: u64,
    effect: Option<crate::kit::command_line::Effect>,
}

impl Command for SendInput {
    const NAME: &'static str = "send";
    const RISK: Risk = Risk::Act;
    // `secret`: a secret was typed (its length is not told).
    const FIELDS: &'static [&'static str] =
        &["sent_bytes?", "secret?", "effect", "effect_evidence"];
    type Args = SendArgs;

    /// Checked first for an error that says what a secret looks like.
    fn check_raw(args: &Map<String, Value>) -> Result<(), ToolError> {
        if let Some(text) = args.get("text") {
            crate::kit::secrets::secret_in_place(text, "args.text")?;
        }
        Ok(())
    }

    fn prepare(args: SendArgs, call: Preparing<'_>) -> Result<Box<dyn PreparedAction>, ToolError> {
        check_send(&args)?;
        Ok(match call.session(args.session) {
            Ok(session) => Box::new(prepare_send(session, args)),
            Err(gone) => Box::new(gone),
        })
    }
}

/// Checks what a send's args say on their own, before its session is looked up: whether a
/// session exists never changes which error bad args get.
fn check_send(args: &SendArgs) -> Result<(), ToolError> {
    let text = match &args.text {
        Some(SendText::Text(text)) => text.as_str(),
        Some(SendText::Secret { secret }) => {
            crate::kit::secrets::parse_reference(secret, "args.text.secret")?;
            "-"
        }
        None => "",
    };
    let keys = args.keys.as_deref().unwrap_or_default();
    if text.is_empty() && keys.is_empty() {
        return Err(ToolError::invalid("send needs text or keys")
            .at("args")
            .valid(["text", "keys"]));
    }
    if text.len() > MAX_SEND_BYTES {
        return Err(ToolError::invalid(format!(
            "text of {} bytes is over the {MAX_SEND_BYTES} bytes one send takes",
            text.len()
        ))
        .at("args.text"));
    }
    for (i, key) in keys.iter().enumerate() {
        if keys::key_bytes(key, false).is_none() {
            return Err(ToolError::invalid(format!(
                "`{key}` is not a key name; valid: {}",
                keys::KEY_NAMES
            ))
            .at(format!("args.keys[{i}]")));
        }
    }
    Ok(())
}

/// A send whose args [`check_send`] passed, on its session.
fn prepare_send(session: Arc<Session>, args: SendArgs) -> SendInput {
    let keys = args.keys.unwrap_or_default();
    let (text, secret) = match args.text {
        None => (None, None),
        Some(SendText::Text(text)) => (Some(text), None),
        // Parsed by `check_send` already.
        Some(SendText::Secret { secret }) => (None, SecretRef::parse(&secret).ok()),
    };
    let mut bytes = text.clone().unwrap_or_default().into_bytes();
    let state = session.state();
    let application_cursor = state.term.screen().application_cursor();
    for key in &keys {
        // Named by `check_send`: every one has its bytes.
        bytes.extend(keys::key_bytes(key, application_cursor).unwrap_or_default());
    }
    let effect = session.shell.then(|| {
        let mut line = state.line.clone();
        if secret.is_some() {
            // The value is known only when the call runs and must never land in facts or
            // receipts: the line goes on, opaque. (A value with a line break is refused when
            // typed, so the secret itself ends no line.)
            line.opaque.get_or_insert_with(|| {
                "a secret was typed into it, and its characters are not followed".into()
            });
        }
        keys::input_effect(&line, &bytes)
    });
    let generation = state.generation;
    drop(state);
    SendInput {
        session,
        bytes,
        text,
        secret,
        keys,
        generation,
        effect,
    }
}

impl SendInput {
    fn input_text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

#[async_trait]
impl PreparedAction for SendInput {
    fn risk(&self) -> Risk {
        if self.secret.is_some() {
            Risk::Secret
        } else {
            Risk::Act
        }
    }

    fn describe(&self) -> String {
        let sent = match (&self.secret, self.keys.is_empty()) {
            (Some(_), true) => "a stored secret".to_string(),
            (Some(_), false) => format!("a stored secret, then the keys {:?},", self.keys),
            (None, _) => format!("{:?}", self.input_text()),
        };
        let mut what = format!(
            "send {sent} to terminal session {} ({})",
            self.session.id,
            self.session.describe_program()
        );
        if let Some(effect) = &self.effect {
            let lines: Vec<String> = effect
                .completed
                .iter()
                .map(|l| match &l.opaque {
                    None => format!("{:?}", l.text),
                    Some(why) => format!("{:?} (not known exactly: {why})", l.text),
                })
                .collect();
            if !lines.is_empty() {
                what.push_str(&format!(", running the shell line(s) {}", lines.join(", ")));
            }
        }
        what
    }

    fn facts(&self) -> ActionFacts {
        let text = self.input_text();
        let sent_text = match &self.secret {
            Some(reference) => json!({"secret": reference.uri()}),
            None => json!(self.text.as_ref().map(|t| receipt_value(&json!(t)))),
        };
        let args = Some(json!({
            "session": self.session.id,
            "text": sent_text,
            "keys": self.keys,
        }));
        let secrets: Vec<SecretUse> = self
            .secret
            .iter()
            .map(|reference| SecretUse {
                name: crate::kit::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: SecretDestination::SessionInput {
                    session: self.session.id,
                    program: self.session.describe_program(),
                    shell: self.session.shell,
                },
            })
            .collect();
        // The input as far as it is known: never the secret's value, which nobody knows yet.
        let stdin = self.secret.is_none().then(|| StdinFacts::of(&text));
        match &self.effect {
            // A shell's lines: decided as the shell run they are, as keys typed into a
            // terminal window are (policy's shell-in-disguise rule).
            Some(effect) => {
                let terminal = (!effect.completed.is_empty()).then(|| {
                    let lines: Vec<String> =
                        effect.completed.iter().map(|l| l.text.clone()).collect();
                    let opaque = effect.completed.iter().find_map(|l| l.opaque.clone());
                    let script = lines.join("\n");
                    let found = crate::kit::script::script_commands(&script);
                    TerminalInput {
                        app: Some(format!("session {}", self.session.id)),
                        window: None,
                        lines,
                        opaque: opaque.clone(),
                        run: Box::new(ActionFacts {
                            programs: found.programs,
                            opaque: opaque
                                .map(|why| {
                                    format!("the session's line is not known exactly: {why}")
                                })
                                .or(found.opaque),
                            script: Some(script),
                            script_env: found.assigned,
                            words: found.words,
                            ..ActionFacts::default()
                        }),
                    }
                });
                ActionFacts {
                    stdin,
                    terminal,
                    args,
                    secrets,
                    ..ActionFacts::default()
                }
            }
            // Any other program: the input is its standard input, decided as a run of the
            // session's program with that input.
            None => {
                let found = crate::kit::script::argv_commands(&self.session.argv, Some(&text));
                let opaque = match &self.secret {
                    // What the program makes of a value nobody has seen is not known.
                    Some(_) => {
                        Some("a stored secret is typed as the program's input, unseen".to_string())
                    }
                    None => found.opaque,
                };
                ActionFacts {
                    programs: found.programs,
                    argv: Some(self.session.argv.clone()),
                    opaque,
                    script_env: found.assigned,
                    stdin,
                    words: found.words,
                    args,
                    secrets,
                    ..ActionFacts::default()
                }
            }
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.session.check_owner(agent)
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let _in_use = self.session.enter(&ctx)?;
        if self.session.closed.is_cancelled() {
            return Err(SurfaceError::Failed {
                message: format!("session {} was closed", self.session.id),
            });
        }
        // Resolved only now, after policy and approval, and held by the session (masking its
        // output) before a byte of it is written.
        let mut input = zeroize::Zeroizing::new(Vec::new());
        if let Some(reference) = &self.secret {
            let value = ctx
                .secrets
                .resolve_blocking(crate::kit::secrets::IN_PLACE, reference)
                .await?;
            crate::kit::secrets::check_typed_secret(value.expose_secret(), MAX_SEND_BYTES)?;
            input.extend_from_slice(value.expose_secret().as_bytes());
            self.session
                .hold_secrets([(crate::kit::secrets::IN_PLACE.to_string(), value)]);
        }
        input.extend_from_slice(&self.bytes);
        // The line is checked and moved on as the bytes go, under the state lock, so that two
        // sends decided on the same line cannot both go through, and a query answer the
        // emulator gave meanwhile is not missed.
        let (id, decided) = (self.session.id, self.generation);
        let effect = self.effect;
        let sent = input.len();
        // What the input is read back against: the screen before it, and every change after.
        let mut changes = self.session.changed.subscribe();
        let screen_before = self.session.state().term.screen_text();
        self.session
            .write(input, move |state| {
                let Some(effect) = effect else {
                    return Ok(());
                };
                if state.generation != decided {
                    return Err(SurfaceError::Refused {
                        message: format!(
                            "session {id}'s command line changed since this send was decided \
                             (another send went first, or the terminal answered a query of the \
                             program into its input); read the screen and send again"
                        ),
                    });
                }
                state.line = effect.after;
                state.generation += 1;
                Ok(())
            })
            .await?;
        let mut fields = Map::new();
        match self.secret {
            // Neither the value nor its length: the model learns that it was typed.
            Some(_) => fields.insert("secret".into(), json!("typed")),
            None => fields.insert("sent_bytes".into(), json!(sent)),
        };
        let mut outcome = Outcome {
            success: true,
            fields,
            ..Outcome::default()
        };
        screen_read_back(&self.session, &screen_before, &mut changes)
            .await
            .record(&mut outcome);
        Ok(outcome)
    }
}

/// Whether a send took effect: the session's screen changed after the input (an echo, the
/// program's answer) = confirmed; no change once its output has been quiet for the settle
/// wait = suspected_noop. Woken by each change of the session, never polled.
async fn screen_read_back(
    session: &Session,
    before: &str,
    changes: &mut watch::Receiver<u64>,
) -> EffectReport {
    let started = tokio::time::Instant::now();
    let bound = started + crate::kit::effect::READ_BACK_BOUND;
    let mut quiet_until = started + crate::kit::effect::READ_BACK_QUIET;
    loop {
        if session.state().term.screen_text() != before {
            return EffectReport::new(
                Effect::Confirmed,
                format!(
                    "session {}'s screen changed within {} ms of the input",
                    session.id,
                    started.elapsed().as_millis()
                ),
            );
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                quiet_until = (tokio::time::Instant::now() + crate::kit::effect::READ_BACK_QUIET)
                    .min(bound);
            }
            _ = tokio::time::sleep_until(quiet_until) => break,
        }
    }
    EffectReport::new(
        Effect::SuspectedNoop,
        format!(
            "session {}'s screen did not change within {} ms of the input",
            session.id,
            started.elapsed().as_millis()
        ),
    )
}
