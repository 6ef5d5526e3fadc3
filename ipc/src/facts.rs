//! The facts of an action: what a prepared call will do, typed, in the one shape that policy
//! decides on, receipts record and every approver is shown ([`crate::shown::WillRun`] presents
//! it). A surface states them; a new kind of fact or of target is added here, beside how it is
//! shown.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a prepared action will do, typed: policy, approvals, receipts and `policy explain` decide
/// on these rather than on a surface's raw args.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActionFacts {
    /// The argv of every command the action runs, in order. For a script, every simple command
    /// in it; a wrapper (`env`, `sudo`, `sh -c`, ...) and the command it runs both appear.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<Vec<String>>,
    /// The program and its arguments exactly as the call gives them, for a run of an argv
    /// (approvers are shown it word for word).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The script text, for a script run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Why not every command can be known before the run (`eval`, a computed command name, a
    /// parse error...). An opaque action is never covered by an allow rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opaque: Option<String>,
    /// Variables the call adds to the environment, with their values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Variables the script itself assigns (`X=1 cmd`, `export X=1`, `env X=1 cmd`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub script_env: Vec<String>,
    /// What is written to the action's standard input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<StdinFacts>,
    /// The working directory the action runs in, when the call names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Words that may name files (arguments, redirection targets, assigned values), as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<String>,
    /// What a gui, ax or keychain action acts on or reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetFacts>,
    /// The command's args as receipts record them and as policy's `glob` and `regex` read them
    /// for actions that run no program: the surface's own redaction (long values cut, ...).
    /// Not serialised with the rest: the intent receipt records it as its `args`.
    #[serde(skip)]
    pub args: Option<Value>,
    /// Keys that reach a terminal emulator and end command lines there: a shell run in disguise,
    /// decided as one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalInput>,
    /// The secrets the action references (name, reference, where the value goes); their values
    /// are resolved only when it runs. An action that references any is Secret risk.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretUse>,
    /// A question a person must answer before the action may run, whatever the rules say (the
    /// GNOME gui backend's consent to start its remote-desktop session): policy asks instead of
    /// allowing, and a refusal repeats the question's text, which says how to grant it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consent: Option<String>,
}

impl ActionFacts {
    /// Whether the action runs programs (a script or an argv): then the daemon's own paths are
    /// off limits to it.
    pub fn runs_programs(&self) -> bool {
        !self.programs.is_empty() || self.script.is_some()
    }

    /// Every variable name the action sets: the call's and the script's own.
    pub fn env_names(&self) -> impl Iterator<Item = &str> {
        self.env
            .keys()
            .map(String::as_str)
            .chain(self.script_env.iter().map(String::as_str))
    }

    /// The facts as an intent receipt records them: standard input as
    /// [`StdinFacts::for_receipt`] says.
    pub fn for_receipt(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let (Some(stdin), Some(slot)) = (&self.stdin, value.get_mut("stdin")) {
            *slot = stdin.for_receipt();
        }
        value
    }
}

/// The standard input an action is given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StdinFacts {
    pub bytes: usize,
    pub sha256: String,
    /// The whole text: policy's `stdin` matcher searches it and approvers are shown it (cut on
    /// their screens, saying so). Receipts keep `head` instead ([`ActionFacts::for_receipt`]).
    pub text: String,
    /// The first bytes, cut at a character boundary.
    pub head: String,
}

impl StdinFacts {
    /// How much of stdin `head` holds at most.
    pub const HEAD_BYTES: usize = 256;

    /// The facts of `text` given as standard input.
    pub fn of(text: &str) -> StdinFacts {
        use sha2::Digest;
        let mut end = text.len().min(Self::HEAD_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        StdinFacts {
            bytes: text.len(),
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
            text: text.to_string(),
            head: text[..end].to_string(),
        }
    }

    /// Standard input as receipts keep it: its size, digest and head, never its whole text.
    pub fn for_receipt(&self) -> Value {
        serde_json::json!({"bytes": self.bytes, "sha256": self.sha256, "head": self.head})
    }
}

/// Keys sent to a terminal window (or to a window that may be one) that end command lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalInput {
    /// The terminal's application, or `None` when the window the keys reach cannot be told.
    pub app: Option<String>,
    /// The window the keys reach, when known.
    pub window: Option<u32>,
    /// The command lines the keys end, in order, as far as they are known.
    pub lines: Vec<String>,
    /// Why the lines are not known exactly (a paste, history or cursor keys, an unknown window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<String>,
    /// What those lines run: the facts of a shell script made of them.
    pub run: Box<ActionFacts>,
}

/// What a gui, ax or keychain action acts on: resolved when the action is prepared where that is
/// cheap and sound (the window under a point, the app behind a ref), else what the args name.
/// Policy's `app` and `window` matchers read `app`, and `window` or `window_id`, of every kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TargetFacts {
    /// What is acted on; it says what `app`, `window` and `window_id` name.
    pub kind: TargetKind,
    /// The application's name (the X11 class or the accessibility name); a keychain item's
    /// service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The window's title; a keychain item's account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// The window's id (gui), the selector or ref that names the element (ax), the item's
    /// reference (keychain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// False when the target is only what the args spell (the app has not been seen yet, no
    /// window lies under the point): at run time it may turn out to be another one.
    pub resolved: bool,
}

/// The kinds of thing an action can act on. A new kind is added here and in
/// [`TargetFacts::parts`], which is how every approver names its fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A window on the desktop (gui).
    #[default]
    Window,
    /// An accessible element of an application (ax).
    Element,
    /// An item in the secret store (keychain).
    SecretItem,
}

impl TargetFacts {
    /// The target's fields in the words of its kind, each as (what it is, its value): the
    /// presenter shows them in this order.
    pub fn parts(&self) -> Vec<(&'static str, String)> {
        let (app, window, id) = match self.kind {
            TargetKind::Window => ("app", "window", None),
            TargetKind::Element => ("app", "window", Some("element")),
            TargetKind::SecretItem => ("service", "account", None),
        };
        let mut parts = Vec::new();
        if let Some(name) = &self.app {
            parts.push((app, name.clone()));
        }
        match (&self.window, id) {
            (Some(title), _) => parts.push((window, title.clone())),
            (None, None) => {
                if let Some(id) = &self.window_id {
                    parts.push((window, id.clone()));
                }
            }
            (None, Some(_)) => {}
        }
        if let (Some(label), Some(value)) = (id, &self.window_id) {
            parts.push((label, value.clone()));
        }
        if let Some(pid) = self.pid {
            parts.push(("pid", pid.to_string()));
        }
        parts
    }
}

/// One secret a call references, as facts state it: policy, approvers and receipts see this,
/// never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretUse {
    /// The name the call gives it (the variable name for a shell run, `secret` for gui and ax).
    pub name: String,
    /// The reference as the call wrote it (receipts keep a keyed digest of it instead).
    pub reference: String,
    /// Where its value goes.
    pub to: SecretDestination,
}

impl SecretUse {
    /// One line for approvers: which secret, from where, going where.
    pub fn shown(&self) -> String {
        format!("{} ({}) → {}", self.name, self.reference, self.to)
    }
}

/// Where a secret's value goes when the call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SecretDestination {
    /// The environment variable `var` of the run (and of every process it starts).
    Env { var: String },
    /// Typed as keys into a window.
    Typed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app: Option<String>,
        /// The window is (or may be) a terminal: what is typed there goes to its command line.
        terminal: bool,
    },
    /// Typed into a terminal session's program (`shell send`).
    SessionInput {
        session: u32,
        program: String,
        /// The program is a shell: what is typed there goes to its command line.
        shell: bool,
    },
    /// Set as the value of an accessibility element.
    ElementValue {
        element: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app: Option<String>,
    },
}

impl fmt::Display for SecretDestination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretDestination::Env { var } => {
                write!(f, "the environment variable {var} of the run")
            }
            SecretDestination::Typed {
                window,
                app,
                terminal,
            } => {
                let kind = if *terminal { "terminal " } else { "" };
                match (window, app) {
                    (Some(w), Some(app)) => write!(f, "typed into the {kind}window {w} ({app})"),
                    (Some(w), None) => write!(f, "typed into the {kind}window {w}"),
                    _ => write!(f, "typed into the window that has the keyboard"),
                }
            }
            SecretDestination::SessionInput {
                session,
                program,
                shell,
            } => {
                let kind = if *shell { "the shell of " } else { "" };
                write!(f, "typed into {kind}terminal session {session} ({program})")
            }
            SecretDestination::ElementValue { element, app } => match app {
                Some(app) => write!(f, "the value of the element {element} in {app}"),
                None => write!(f, "the value of the element {element}"),
            },
        }
    }
}
