//! The gui commands, one type per command and one file each: its args, the fields its result
//! may carry, the capabilities it needs of a backend, the check of its args into the act that
//! will run ([`Command::prepare`]) and that act's run on the [`Desktop`] ([`Act`]). The list in
//! `gui_commands!` below is the only place the commands are listed, and each names itself once
//! (`Command::NAME`): the list makes the [`TABLE`] the surface offers and dispatches calls by
//! name from ([`prepare`]).
//!
//! A backend never names a command: it says which [`Capability`] it has, and the surface offers
//! the commands whose needs it meets.

mod click;
mod cursor;
mod drag;
mod focus;
mod key;
pub mod keys;
mod monitors;
mod move_pointer;
mod pointer;
pub mod screenshot;
mod scroll;
mod typing;
mod windows;

use computer_ipc::{Complications, ToolError};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use super::desktop::Capability;
use super::desktop::{Desktop, DisplayError, DisplayResult, Rect, WindowInfo};
use super::read_back::Aim;
use super::seen::GuiSnapshot;
use super::terminal::{LineTracker, TerminalApps};
use crate::kit::secrets::SecretUse;
use crate::kit::snapshot::Snapshots;
use crate::{
    CallContext, CommandSpec, Outcome, Risk, SurfaceError, TargetFacts, TargetKind, TerminalInput,
    decode_args,
};

use click::Click;
use cursor::Cursor;
use drag::Drag;
use focus::Focus;
use key::Key;
use monitors::Monitors;
use move_pointer::Move;
use screenshot::Screenshot;
use scroll::Scroll;
use typing::Type;
use windows::Windows;

// The args types' doc comments are the tool description's text (`schema.rs`): keep them terse.

/// One gui command, implemented by the command checked and ready to run (its [`Act`]).
pub trait Command: Sized {
    /// How a call names it (`"command": "click"`).
    const NAME: &'static str;
    const RISK: Risk;
    /// Field names its result may carry; `?`: only when it applies (see
    /// `Surface::result_fields`).
    const FIELDS: &'static [&'static str];
    /// What the backend must have for it to be offered.
    const NEEDS: &'static [Capability];
    /// Its coordinate args as (x, y) pairs: bound to a screenshot (`complications.seen`), they
    /// are that image's pixels, mapped to the screen before validation.
    const POINTS: &'static [(&'static str, &'static str)] = &[];
    /// Its args, decoded with [`decode_args`]; their JSON Schema is its part of the tool's help.
    type Args: DeserializeOwned + schemars::JsonSchema;

    /// Checks the args as given, before they are decoded (for an error that says what a
    /// secret looks like where decoding would only say it does not fit).
    fn check_given(_args: &Map<String, Value>) -> Result<(), ToolError> {
        Ok(())
    }

    /// Checks the args against the desktop as it is, into the command ready to run.
    fn prepare<D: Desktop>(args: Self::Args, call: &Call<'_, D>) -> Result<Self, ToolError>;
}

/// A command as the table holds it: what the tool lists, what its result may carry, what it
/// needs of a backend and which of its args are points.
pub struct Entry {
    pub spec: CommandSpec,
    pub fields: &'static [&'static str],
    pub needs: &'static [Capability],
    pub points: &'static [(&'static str, &'static str)],
}

impl Entry {
    const fn of<C: Command>() -> Entry {
        Entry {
            spec: CommandSpec::of::<C::Args>(C::NAME, C::RISK),
            fields: C::FIELDS,
            needs: C::NEEDS,
            points: C::POINTS,
        }
    }

    /// Whether a backend that has what `has` says can run it.
    pub fn offered(&self, has: impl Fn(Capability) -> bool) -> bool {
        self.needs.iter().all(|need| has(*need))
    }
}

fn decode_and_prepare<D, C>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError>
where
    D: Desktop,
    C: Command + Act<D> + 'static,
{
    C::check_given(call.args)?;
    let args: C::Args = decode_args(call.args)?;
    Ok(Box::new(C::prepare(args, call)?))
}

/// Lists the gui commands once, in the order the tool offers them, and makes of the list the
/// command [`TABLE`] and the dispatch of a call to its command's type ([`prepare`]).
macro_rules! gui_commands {
    ($($command:ident),* $(,)?) => {
        /// Every gui command, by name, in the order the tool lists them.
        pub const TABLE: &[Entry] = &[$(Entry::of::<$command>()),*];

        /// Checks a call to `command` into the act that will run; None for a name no command
        /// has.
        pub fn prepare<D: Desktop>(
            command: &str,
            call: &Call<'_, D>,
        ) -> Option<Result<Box<dyn Act<D>>, ToolError>> {
            $(
                if command == $command::NAME {
                    return Some(decode_and_prepare::<D, $command>(call));
                }
            )*
            None
        }
    };
}

gui_commands![
    Screenshot, Windows, Monitors, Cursor, Move, Click, Drag, Scroll, Type, Key, Focus,
];

/// The entry of the command a call names, if there is one.
pub fn entry(command: &str) -> Option<&'static Entry> {
    TABLE.iter().find(|entry| entry.spec.name == command)
}

/// A call as a command's validation sees it.
pub struct Call<'a, D> {
    pub conn: &'a D,
    /// The args as the act reads them (a screenshot's pixels already mapped to the screen when
    /// the call is bound to one).
    pub args: &'a Map<String, Value>,
    pub complications: &'a Complications,
    /// Which windows are terminals: keys decide their lines at validation.
    pub terminals: &'a Terminals,
}

impl<D: Desktop> Call<'_, D> {
    /// The screen, read when a check needs it (not every command does).
    pub fn screen(&self) -> Result<Rect, ToolError> {
        self.conn.screen().map_err(display_failed)
    }
}

/// What an act reaches, for the checks right before it runs: an approver's windows, whether
/// the snapshot it was aimed at is stale, the person at the desk.
#[derive(Debug, Clone, Copy)]
pub enum Reach {
    /// It only reads the screen: no input is sent.
    Nothing,
    /// Pointer input at its landing points ([`Act::landing`]).
    Points,
    /// Keys, which reach the active window.
    Keys,
    /// Focusing this window.
    Window(u32),
}

/// What a running act is given besides the desktop.
pub struct Running<'a> {
    pub ctx: &'a CallContext,
    pub terminals: &'a Terminals,
    /// Where observations are kept for the acts that name them.
    pub snapshots: &'a Snapshots<GuiSnapshot>,
}

/// A validated gui call, ready to run on the desktop `D`.
pub trait Act<D: Desktop>: Send {
    /// What will happen, in words for approvers (never the text typed).
    fn describe(&self) -> String;

    /// What it reaches, for the checks right before it runs.
    fn reach(&self) -> Reach;

    /// Its risk, given the one its command is listed with.
    fn risk(&self, listed: Risk) -> Risk {
        listed
    }

    /// The window it acts on or reads (`window`: the call's `window` arg), as the display
    /// shows it now; None for the whole screen and for a point on no window.
    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>>;

    /// Where pointer input lands (where the pointer is, when it names no point); empty for the
    /// others. Read once per check, so that every check judges the same points.
    fn landing(&self, _conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(Vec::new())
    }

    /// Whether input at its landing points may edit a terminal's line (a middle click pastes,
    /// a click may move the cursor); a move only moves.
    fn may_edit_terminals(&self) -> bool {
        true
    }

    /// What its read-back looks for; None for what only reads.
    fn read_back(&self) -> Option<Aim> {
        None
    }

    /// The lines its keys run in a terminal, as facts a policy decides as a shell run.
    fn terminal_input(&self) -> Option<TerminalInput> {
        None
    }

    /// The secrets it uses (`app`: the target window's application).
    fn secrets(&self, _app: Option<String>) -> Vec<SecretUse> {
        Vec::new()
    }

    /// Runs it; the checks before it are done.
    fn perform(self: Box<Self>, conn: &D, running: &Running<'_>) -> Result<Outcome, Failure>;
}

/// Which windows are terminals, and the command line of each.
pub struct Terminals {
    pub apps: std::sync::RwLock<TerminalApps>,
    pub lines: LineTracker,
}

impl Terminals {
    /// A window is a terminal when its name is on `[gui] terminal_apps`, or (Linux) when its
    /// process or a descendant holds a pty master open (`terminal_pty`): what a terminal
    /// emulator is, whatever it is called.
    ///
    /// The pid is the backend's. On X11 it is the window's `_NET_WM_PID`, a property any client
    /// can write: a window made to name a terminal's process (or any process with a pty) only
    /// makes keys to it decided as a terminal's, stricter and harmless; a real terminal made to
    /// name a process without one (its own class renamed too) would read as ordinary typing,
    /// which is why the X11 backend takes the pid the server tells (XRes, from the client's
    /// socket) where there is one, and `_NET_WM_PID` only for a client it cannot tell (a remote
    /// one). The Wayland backends' pids come from the compositor (the client's socket) or the
    /// application's bus connection, not from the client's word.
    pub fn is_terminal(&self, window: &WindowInfo) -> bool {
        let named = self
            .apps
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .matches([window.app.as_str(), window.instance.as_str()]);
        named || self.holds_a_pty(window)
    }

    #[cfg(target_os = "linux")]
    fn holds_a_pty(&self, window: &WindowInfo) -> bool {
        window
            .pid
            .is_some_and(super::terminal_pty::holds_pty_master)
    }

    #[cfg(not(target_os = "linux"))]
    fn holds_a_pty(&self, _window: &WindowInfo) -> bool {
        false
    }
}

/// Why a run failed: the display, whatever the backend (its connection may be broken), or the
/// surface's own refusal.
pub enum Failure {
    Display(DisplayError),
    Surface(SurfaceError),
}

impl From<DisplayError> for Failure {
    fn from(err: DisplayError) -> Self {
        Failure::Display(err)
    }
}

impl From<SurfaceError> for Failure {
    fn from(err: SurfaceError) -> Self {
        Failure::Surface(err)
    }
}

pub fn refused_as(error: ToolError) -> Failure {
    Failure::Surface(SurfaceError::Tool(error))
}

/// A display's failure as the call's error.
pub fn display_failed(err: DisplayError) -> ToolError {
    ToolError::new(computer_ipc::ErrorCode::ActionFailed, err.0)
}

pub fn unknown_window(id: u32, known: impl IntoIterator<Item = u32>, path: &str) -> ToolError {
    ToolError::invalid(format!(
        "no managed window has id {id}; `gui windows` lists them"
    ))
    .at(path)
    .valid(known.into_iter().take(32).map(|id| id.to_string()))
}

pub fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub fn done(value: Value) -> Outcome {
    Outcome {
        success: true,
        fields: fields(value),
        ..Outcome::default()
    }
}

/// The window an act acts on or reads: the one under `point` for the pointer, else the one
/// `window` names, else the active one (keyboard input). Where windows overlap the active one
/// counts if it is under the point (it is on top in practice), else the last mapped. None for a
/// point on no window.
pub fn target_window<D: Desktop>(
    conn: &D,
    point: Option<(i32, i32)>,
    window: Option<u64>,
) -> DisplayResult<Option<TargetFacts>> {
    if point.is_some() && !conn.places_known() {
        // No window's place is known (GNOME): which one is under the point cannot be told, and
        // listing them (a round of calls to every accessible app) would tell nothing.
        return Ok(None);
    }
    let windows = conn.windows()?;
    let chosen = match (point, window) {
        (Some((x, y)), _) => {
            let under: Vec<&WindowInfo> =
                windows.iter().filter(|w| w.rect.contains(x, y)).collect();
            under.iter().find(|w| w.focused).or(under.last()).copied()
        }
        (None, Some(id)) => windows.iter().find(|w| u64::from(w.id) == id),
        (None, None) => windows.iter().find(|w| w.focused),
    };
    Ok(chosen.map(|w| TargetFacts {
        kind: TargetKind::Window,
        app: Some(w.app.clone()).filter(|app| !app.is_empty()),
        pid: w.pid,
        window: Some(w.title.clone()),
        window_id: Some(w.id.to_string()),
        resolved: true,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_is_listed_once_by_its_own_name() {
        let names: Vec<&str> = TABLE.iter().map(|entry| entry.spec.name).collect();
        for (i, name) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(name), "{name} is listed twice");
            assert_eq!(entry(name).map(|e| e.spec.name), Some(*name));
        }
        assert!(entry("teleport").is_none());
    }

    #[test]
    fn keys_are_offered_only_where_their_window_can_be_confirmed() {
        // Keys go to the focused window, which must be known before they are sent.
        let keyboard_only = |c: Capability| c == Capability::Keyboard;
        for name in ["type", "key"] {
            let keys = entry(name).unwrap();
            assert!(!keys.offered(keyboard_only), "{name}");
            assert!(keys.offered(|c| matches!(c, Capability::Keyboard | Capability::Windows)));
        }
        // Pointer input needs no window list.
        assert!(
            entry("click")
                .unwrap()
                .offered(|c| c == Capability::Pointer)
        );
        // Every backend can list its monitors.
        assert!(entry("monitors").unwrap().offered(|_| false));
    }
}
