//! The gui surface on any backend (X11, wlroots Wayland, macOS): command args and their validation, the prepared
//! actions that run on the platform's `Desktop`, screenshot scaling and encoding into artifacts,
//! and the evidence capturer.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use computer_ipc::{Complications, ErrorCode, SurfaceName, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::desktop::{Backend, Button, Desktop, DisplayError, Rect, Rgb, WindowInfo};
use super::keys::{self, Combo};
use super::person;
use super::read_back::{Aim, Before};
use super::seen::{self, GuiSnapshot};
use super::terminal::{self, LineTracker, TerminalApps};
use crate::accessibility::ElementReader;
use crate::command_line::{self, Effect, Line};
use crate::secret_store::SecretRef;
use crate::secrets::{SecretDestination, SecretUse};
use crate::snapshot::{Seen, Snapshots};
use crate::{
    ActionFacts, Artifact, Availability, CallContext, CommandSpec, EffectReport, EvidenceCapture,
    EvidenceShot, InlineImage, NoArgs, Outcome, PreparedAction, ProtectedProcesses, Risk,
    SETTLE_BOUND, SETTLE_POLL, SETTLE_QUIET, Surface, SurfaceError, TargetFacts, TerminalInput,
    decode_args, receipt_value,
};

const COMMANDS: &[CommandSpec] = &[
    CommandSpec::of::<ScreenshotArgs>("screenshot", Risk::Observe),
    CommandSpec::of::<NoArgs>("windows", Risk::Observe),
    CommandSpec::of::<NoArgs>("monitors", Risk::Observe),
    CommandSpec::of::<NoArgs>("cursor", Risk::Observe),
    CommandSpec::of::<MoveArgs>("move", Risk::Act),
    CommandSpec::of::<ClickArgs>("click", Risk::Act),
    CommandSpec::of::<DragArgs>("drag", Risk::Act),
    CommandSpec::of::<ScrollArgs>("scroll", Risk::Act),
    CommandSpec::of::<TypeArgs>("type", Risk::Act),
    CommandSpec::of::<KeyArgs>("key", Risk::Act),
    CommandSpec::of::<FocusArgs>("focus", Risk::Act),
];

const SCREENSHOT_FIELDS: &[&str] = &[
    "path", "sha256", "bytes", "format", "width", "height", "scale", "origin_x", "origin_y",
    "snapshot",
];
// A list's length is its count: no separate field repeats it. `snapshot`: the id an act names
// in `complications.seen`.
const WINDOWS_FIELDS: &[&str] = &["windows", "snapshot"];
const MONITORS_FIELDS: &[&str] = &["monitors"];
const POINT_FIELDS: &[&str] = &["x", "y"];
// Every act ends with what its read-back found (`effect`, `effect_evidence`).
const MOVE_FIELDS: &[&str] = &["x", "y", "effect", "effect_evidence"];
const CLICK_FIELDS: &[&str] = &["x", "y", "button", "count", "effect", "effect_evidence"];
const DRAG_FIELDS: &[&str] = &[
    "from_x",
    "from_y",
    "to_x",
    "to_y",
    "button",
    "effect",
    "effect_evidence",
];
const SCROLL_FIELDS: &[&str] = &["x", "y", "dx", "dy", "effect", "effect_evidence"];
// `window?`: the window the keys reached, when it can be told; `secret`: a secret was typed
// (neither its value nor its length is told).
const TYPE_FIELDS: &[&str] = &["chars?", "secret?", "window?", "effect", "effect_evidence"];
const KEY_FIELDS: &[&str] = &["combo", "window?", "effect", "effect_evidence"];
const FOCUS_FIELDS: &[&str] = &["window", "focused", "effect", "effect_evidence"];

/// Why keys are refused where the backend must know their window and cannot tell it, and what
/// gives a window the focus there.
fn no_known_focus<D: Desktop>(conn: &D) -> String {
    format!(
        "no window is focused, or the focus is on a surface that is no window (a panel, a lock \
         screen), so where keys would land cannot be confirmed; {}",
        conn.how_to_focus()
    )
}

/// The default long side of a screenshot: big enough to read, small enough for a model.
const DEFAULT_MAX_DIM: u32 = 1280;

pub struct GuiSurface<B: Backend> {
    backend: Arc<B>,
    terminals: Arc<Terminals>,
    /// What AT-SPI tells of the element under a click and of the focused field, for acts'
    /// read-back.
    reader: Arc<ElementReader>,
    /// Whether acts read back their effect (`[gui] read_back`, on by default).
    read_back: Arc<AtomicBool>,
    /// What screenshots and window listings saw, for acts bound to them.
    snapshots: Arc<Snapshots<GuiSnapshot>>,
}

/// The complications gui honours: the common ones and `seen`.
const GUI_COMPLICATIONS: &[&str] = &["timeout_ms", "evidence", "return", "seen"];

impl<B: Backend> GuiSurface<B> {
    /// The surface over `backend`, with the default list of terminal apps until `configure`.
    pub fn new(backend: Arc<B>) -> Self {
        GuiSurface {
            backend,
            terminals: Arc::new(Terminals {
                apps: std::sync::RwLock::new(TerminalApps::default()),
                lines: LineTracker::default(),
            }),
            reader: Arc::new(ElementReader::new()),
            read_back: Arc::new(AtomicBool::new(true)),
            snapshots: Arc::new(Snapshots::new("gui")),
        }
    }
}

/// The `[gui]` section of the daemon's config.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GuiSection {
    /// Applications whose windows are terminals (WM_CLASS instance or class, any case, `*`
    /// wildcards): keys that end a line there are decided as a shell run. Replaces the default.
    #[serde(default)]
    terminal_apps: Option<Vec<String>>,
    /// Whether acts read back what they achieved (`effect`); off, every act says
    /// `unverifiable` ("read-back off"). On by default.
    #[serde(default)]
    read_back: Option<bool>,
    /// Pause gui input while the person at the desk uses the mouse or keyboard (default true).
    #[serde(default)]
    yield_to_person: Option<bool>,
    /// How long gui input stays paused after the person's last input (default 1500).
    #[serde(default)]
    person_quiet_ms: Option<u64>,
}

/// Which windows are terminals, and the command line of each.
struct Terminals {
    apps: std::sync::RwLock<TerminalApps>,
    lines: LineTracker,
}

impl Terminals {
    fn is_terminal(&self, window: &WindowInfo) -> bool {
        self.apps
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .matches([window.app.as_str(), window.instance.as_str()])
    }
}

/// Keys of one call: typed text or one combo (named as the caller wrote it).
#[derive(Debug, Clone, Copy)]
enum Keys<'a> {
    Text(&'a str),
    Combo(&'a Combo, &'a str),
    /// A secret's value, not known until the call runs.
    Secret,
}

impl Keys<'_> {
    fn apply(self, line: &Line) -> Effect {
        match self {
            Keys::Text(text) => command_line::type_text(line, text),
            Keys::Combo(combo, name) => terminal::press(line, combo, name),
            // The value is resolved only at run time and must never land in facts or
            // receipts: the line goes on, opaque. (A value with a line break is refused when
            // typed, so the keys end no line.)
            Keys::Secret => {
                let mut after = line.clone();
                after.opaque.get_or_insert_with(|| {
                    "a secret was typed into it, and its characters are not followed".into()
                });
                Effect {
                    completed: Vec::new(),
                    after,
                }
            }
        }
    }
}

/// Where a call's keys go, decided at prepare time and checked again right before they are sent.
#[derive(Debug, Default)]
struct KeyPlan {
    /// The managed window the keys reach; None when it cannot be told.
    target: Option<u32>,
    /// Set when that window is a terminal, or when it cannot be told and a terminal is open.
    terminal: Option<TerminalPlan>,
}

#[derive(Debug)]
struct TerminalPlan {
    /// The terminal's application (None: the target is unknown).
    app: Option<String>,
    /// The generation of the line the call was decided on.
    generation: u64,
    /// The lines the keys end, and the line they leave.
    effect: Effect,
    /// With an unknown target: every terminal window, any of which the keys may reach.
    possible: Vec<u32>,
    /// The processes of the terminal windows the keys may reach (None: a window that names
    /// none), recorded as typed into before the keys go.
    processes: Vec<Option<u32>>,
}

impl KeyPlan {
    /// The lines the keys run, as facts a policy decides as a shell run.
    fn terminal_input(&self) -> Option<TerminalInput> {
        let plan = self.terminal.as_ref()?;
        if plan.effect.completed.is_empty() {
            return None;
        }
        let lines: Vec<String> = plan
            .effect
            .completed
            .iter()
            .map(|l| l.text.clone())
            .collect();
        let opaque = plan.effect.completed.iter().find_map(|l| l.opaque.clone());
        // One script, as a shell reading the lines one after another would join them (a quote
        // opened on one line goes on on the next).
        let script = lines.join("\n");
        let found = crate::script::script_commands(&script);
        let run = ActionFacts {
            programs: found.programs,
            opaque: opaque
                .as_ref()
                .map(|why| format!("the terminal line is not known exactly: {why}"))
                .or(found.opaque),
            script: Some(script),
            script_env: found.assigned,
            words: found.words,
            ..ActionFacts::default()
        };
        Some(TerminalInput {
            app: plan.app.clone(),
            window: self.target,
            lines,
            opaque,
            run: Box::new(run),
        })
    }

    /// Where the keys go, in words for approvers: empty for a window that is no terminal.
    fn describe(&self) -> String {
        let Some(plan) = &self.terminal else {
            return String::new();
        };
        let place = match (&plan.app, self.target) {
            (Some(app), Some(window)) => format!(" in the terminal {app} (window {window})"),
            _ => " in a window that cannot be told (a terminal is open)".to_string(),
        };
        let lines: Vec<String> = plan
            .effect
            .completed
            .iter()
            .map(|l| match &l.opaque {
                None => format!("{:?}", l.text),
                Some(why) => format!("{:?} (not known exactly: {why})", l.text),
            })
            .collect();
        match lines.len() {
            0 => place,
            1 => format!("{place}, running the line {}", lines[0]),
            _ => format!("{place}, running the lines {}", lines.join(", ")),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Region {
    x: i32,
    y: i32,
    width: u32,
    height: u32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    Png,
    Jpeg,
}

// The args types' doc comments are the tool description's text (`schema.rs`): keep them terse.
/// one of monitor|window|region; image px*scale+origin = screen px
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScreenshotArgs {
    #[serde(default)]
    monitor: Option<usize>,
    /// id
    #[serde(default)]
    window: Option<u32>,
    #[serde(default)]
    region: Option<Region>,
    /// =1280
    #[serde(default)]
    max_dim: Option<u32>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    quality: Option<u8>,
}

/// screen px
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MoveArgs {
    x: i32,
    y: i32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClickArgs {
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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct DragArgs {
    from_x: i32,
    from_y: i32,
    to_x: i32,
    to_y: i32,
    #[serde(default)]
    button: Option<Button>,
}

/// dx,dy notches (+right/down)
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScrollArgs {
    #[serde(default)]
    dx: i32,
    #[serde(default)]
    dy: i32,
    #[serde(default)]
    x: Option<i32>,
    #[serde(default)]
    y: Option<i32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TypeArgs {
    /// any unicode, or {secret:"keychain://svc/acct"} to type a stored secret unseen
    text: TypeText,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum TypeText {
    Text(String),
    Secret { secret: String },
}

/// What `type` types: text given, or a secret resolved when the call runs.
#[derive(Debug)]
enum Typed {
    Text(String),
    Secret(SecretRef),
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    /// e.g. Return|ctrl+shift+t|alt+F4
    combo: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct FocusArgs {
    /// id
    window: u32,
}

/// Most notches per scroll and clicks per click: more is a mistake, not a request.
const MAX_NOTCHES: i32 = 100;
const MAX_CLICKS: u32 = 10;
/// Most characters per `type`: longer text belongs in a file or the clipboard.
const MAX_TYPE_CHARS: usize = 10_000;

#[derive(Debug)]
enum Action {
    Screenshot {
        area: Rect,
        max_dim: u32,
        jpeg_quality: Option<u8>,
        inline: bool,
    },
    Windows,
    Monitors,
    Cursor,
    Move {
        x: i32,
        y: i32,
    },
    Click {
        at: Option<(i32, i32)>,
        button: Button,
        count: u32,
    },
    Drag {
        from: (i32, i32),
        to: (i32, i32),
        button: Button,
    },
    Scroll {
        at: Option<(i32, i32)>,
        dx: i32,
        dy: i32,
    },
    Type {
        text: Typed,
        keys: KeyPlan,
    },
    Key {
        combo: String,
        parsed: Combo,
        keys: KeyPlan,
    },
    Focus {
        window: u32,
    },
}

fn unavailable(why: Availability) -> ToolError {
    match why {
        Availability::Unavailable { reason, fix } => {
            ToolError::new(ErrorCode::Unavailable, format!("{reason}; fix: {fix}")).at("surface")
        }
        Availability::Ready => ToolError::new(ErrorCode::Unavailable, "the display went away"),
    }
}

fn x_failed(err: DisplayError) -> ToolError {
    ToolError::new(ErrorCode::ActionFailed, err.0)
}

/// Checks that a point lies on the screen, naming the field and the valid range.
fn on_screen(screen: Rect, x: i32, y: i32, x_path: &str, y_path: &str) -> Result<(), ToolError> {
    // The screen starts at 0,0 on X11; on macOS a display left of or above the main one has
    // negative coordinates.
    let check = |value: i32, start: i32, size: u32, path: &str, axis: &str| {
        let end = i64::from(start) + i64::from(size) - 1;
        if i64::from(value) < i64::from(start) || i64::from(value) > end {
            Err(ToolError::invalid(format!(
                "{axis}={value} is off the screen: valid {axis} is {start}..={end} on this {}x{} screen",
                screen.width, screen.height
            ))
            .at(path))
        } else {
            Ok(())
        }
    };
    check(x, screen.x, screen.width, x_path, "x")?;
    check(y, screen.y, screen.height, y_path, "y")
}

fn point(x: Option<i32>, y: Option<i32>, screen: Rect) -> Result<Option<(i32, i32)>, ToolError> {
    match (x, y) {
        (Some(x), Some(y)) => {
            on_screen(screen, x, y, "args.x", "args.y")?;
            Ok(Some((x, y)))
        }
        (None, None) => Ok(None),
        (Some(_), None) => Err(ToolError::invalid("give y with x").at("args.y")),
        (None, Some(_)) => Err(ToolError::invalid("give x with y").at("args.x")),
    }
}

impl<B: Backend> GuiSurface<B> {
    fn validate(
        &self,
        conn: &B::Conn,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Action, ToolError> {
        let screen = || conn.screen().map_err(x_failed);
        Ok(match command {
            "screenshot" => {
                let a: ScreenshotArgs = decode_args(args)?;
                let chosen = [a.monitor.is_some(), a.window.is_some(), a.region.is_some()];
                if chosen.iter().filter(|c| **c).count() > 1 {
                    return Err(ToolError::invalid(
                        "give at most one of monitor, window and region (none: the whole screen)",
                    )
                    .at("args")
                    .valid(["monitor", "window", "region"]));
                }
                let screen = screen()?;
                let area = if let Some(index) = a.monitor {
                    let monitors = conn.monitors().map_err(x_failed)?;
                    monitors.get(index).map(|m| m.rect).ok_or_else(|| {
                        ToolError::invalid(format!(
                            "no monitor {index}: this screen has {}",
                            monitors.len()
                        ))
                        .at("args.monitor")
                        .valid((0..monitors.len()).map(|i| i.to_string()))
                    })?
                } else if let Some(id) = a.window {
                    let windows = conn.windows().map_err(x_failed)?;
                    let window = windows.iter().find(|w| w.id == id).ok_or_else(|| {
                        unknown_window(id, windows.iter().map(|w| w.id), "args.window")
                    })?;
                    window.rect
                } else if let Some(r) = &a.region {
                    if r.width == 0 || r.height == 0 {
                        return Err(ToolError::invalid(
                            "region width and height must be at least 1",
                        )
                        .at("args.region"));
                    }
                    Rect {
                        x: r.x,
                        y: r.y,
                        width: r.width,
                        height: r.height,
                    }
                } else {
                    screen
                };
                let area = screen.intersect(&area).ok_or_else(|| {
                    ToolError::invalid(format!(
                        "the area {}x{} at ({},{}) is off the {}x{} screen",
                        area.width, area.height, area.x, area.y, screen.width, screen.height
                    ))
                    .at(if a.window.is_some() {
                        "args.window"
                    } else {
                        "args.region"
                    })
                })?;
                let max_dim = a.max_dim.unwrap_or(DEFAULT_MAX_DIM);
                if max_dim < 16 {
                    return Err(
                        ToolError::invalid("max_dim must be at least 16").at("args.max_dim")
                    );
                }
                let jpeg_quality = match (a.format.unwrap_or(Format::Png), a.quality) {
                    (Format::Png, Some(_)) => {
                        return Err(
                            ToolError::invalid("quality applies to jpeg only").at("args.quality")
                        );
                    }
                    (Format::Png, None) => None,
                    (Format::Jpeg, Some(q)) if !(1..=100).contains(&q) => {
                        return Err(
                            ToolError::invalid("quality must be 1..=100").at("args.quality")
                        );
                    }
                    (Format::Jpeg, q) => Some(q.unwrap_or(80)),
                };
                let inline = complications
                    .return_budget
                    .as_ref()
                    .and_then(|r| r.image)
                    .unwrap_or(false);
                Action::Screenshot {
                    area,
                    max_dim,
                    jpeg_quality,
                    inline,
                }
            }
            "windows" | "monitors" | "cursor" => {
                let _: NoArgs = decode_args(args)?;
                match command {
                    "windows" => Action::Windows,
                    "monitors" => Action::Monitors,
                    _ => Action::Cursor,
                }
            }
            "move" => {
                let a: MoveArgs = decode_args(args)?;
                on_screen(screen()?, a.x, a.y, "args.x", "args.y")?;
                Action::Move { x: a.x, y: a.y }
            }
            "click" => {
                let a: ClickArgs = decode_args(args)?;
                let count = a.count.unwrap_or(1);
                if !(1..=MAX_CLICKS).contains(&count) {
                    return Err(
                        ToolError::invalid(format!("count must be 1..={MAX_CLICKS}"))
                            .at("args.count"),
                    );
                }
                Action::Click {
                    at: pointer_point(conn, a.x, a.y, screen()?)?,
                    button: a.button.unwrap_or(Button::Left),
                    count,
                }
            }
            "drag" => {
                let a: DragArgs = decode_args(args)?;
                let screen = screen()?;
                on_screen(screen, a.from_x, a.from_y, "args.from_x", "args.from_y")?;
                on_screen(screen, a.to_x, a.to_y, "args.to_x", "args.to_y")?;
                Action::Drag {
                    from: (a.from_x, a.from_y),
                    to: (a.to_x, a.to_y),
                    button: a.button.unwrap_or(Button::Left),
                }
            }
            "scroll" => {
                let a: ScrollArgs = decode_args(args)?;
                for (value, path) in [(a.dx, "args.dx"), (a.dy, "args.dy")] {
                    if value.abs() > MAX_NOTCHES {
                        return Err(ToolError::invalid(format!(
                            "scroll at most {MAX_NOTCHES} notches per call"
                        ))
                        .at(path));
                    }
                }
                if a.dx == 0 && a.dy == 0 {
                    return Err(ToolError::invalid(
                        "give dy (down +, up -) or dx (right +, left -)",
                    )
                    .at("args")
                    .valid(["dx", "dy"]));
                }
                Action::Scroll {
                    at: pointer_point(conn, a.x, a.y, screen()?)?,
                    dx: a.dx,
                    dy: a.dy,
                }
            }
            "type" => {
                // Checked first for an error that says what a secret looks like.
                if let Some(value) = args.get("text") {
                    crate::secrets::secret_in_place(value, "args.text")?;
                }
                let a: TypeArgs = decode_args(args)?;
                let text = match a.text {
                    TypeText::Text(text) => text,
                    TypeText::Secret { secret } => {
                        return Ok(Action::Type {
                            text: Typed::Secret(crate::secrets::parse_reference(
                                &secret,
                                "args.text.secret",
                            )?),
                            keys: KeyPlan::default(),
                        });
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
                if let Some(why) = conn.untypable(&text) {
                    return Err(ToolError::invalid(why).at("args.text"));
                }
                Action::Type {
                    text: Typed::Text(text),
                    keys: KeyPlan::default(),
                }
            }
            "key" => {
                let a: KeyArgs = decode_args(args)?;
                let parsed = keys::parse_combo(&a.combo).map_err(|err| {
                    ToolError::invalid(err.message)
                        .at("args.combo")
                        .valid(err.valid)
                })?;
                Action::Key {
                    combo: a.combo,
                    parsed,
                    keys: KeyPlan::default(),
                }
            }
            "focus" => {
                let a: FocusArgs = decode_args(args)?;
                let ids = conn.window_ids().map_err(x_failed)?;
                if !ids.contains(&a.window) {
                    return Err(unknown_window(a.window, ids, "args.window"));
                }
                Action::Focus { window: a.window }
            }
            other => {
                return Err(ToolError::invalid(format!("unknown gui command `{other}`"))
                    .at("command")
                    .valid(COMMANDS.iter().map(|c| c.name)));
            }
        })
    }
}

/// The point of a pointer action; required where the backend cannot read the pointer.
fn pointer_point<D: Desktop>(
    conn: &D,
    x: Option<i32>,
    y: Option<i32>,
    screen: Rect,
) -> Result<Option<(i32, i32)>, ToolError> {
    let at = point(x, y, screen)?;
    if at.is_none() && !conn.reads_cursor() {
        return Err(ToolError::invalid(
            "give x and y: where the pointer is cannot be read on this backend (Wayland tells no \
             client)",
        )
        .at("args")
        .valid(["x", "y"]));
    }
    Ok(at)
}

/// The gui commands `offers` keeps, as one list per distinct choice for the life of the
/// process (the tool's command lists are `'static`; a process sees one or two choices).
fn offered_commands(offers: impl Fn(&str) -> bool) -> &'static [CommandSpec] {
    static CHOSEN: std::sync::Mutex<Vec<&'static [CommandSpec]>> =
        std::sync::Mutex::new(Vec::new());
    let wanted: Vec<CommandSpec> = COMMANDS
        .iter()
        .filter(|c| offers(c.name))
        .copied()
        .collect();
    if wanted.len() == COMMANDS.len() {
        return COMMANDS;
    }
    let mut chosen = CHOSEN.lock().unwrap_or_else(|e| e.into_inner());
    let same = |list: &&&'static [CommandSpec]| {
        list.len() == wanted.len() && list.iter().zip(&wanted).all(|(a, b)| a.name == b.name)
    };
    if let Some(list) = chosen.iter().find(same) {
        return list;
    }
    let list: &'static [CommandSpec] = Box::leak(wanted.into_boxed_slice());
    chosen.push(list);
    list
}

fn unknown_window(id: u32, known: impl IntoIterator<Item = u32>, path: &str) -> ToolError {
    ToolError::invalid(format!(
        "no managed window has id {id}; `gui windows` lists them"
    ))
    .at(path)
    .valid(known.into_iter().take(32).map(|id| id.to_string()))
}

#[async_trait]
impl<B: Backend> Surface for GuiSurface<B> {
    fn name(&self) -> SurfaceName {
        SurfaceName::Gui
    }

    fn configure(&self, section: &toml::Table) -> Result<(), crate::SectionError> {
        let settings: GuiSection = crate::SectionError::decode(SurfaceName::Gui, section)?;
        self.read_back
            .store(settings.read_back.unwrap_or(true), Ordering::Relaxed);
        let quiet_ms = settings.person_quiet_ms.unwrap_or(person::DEFAULT_QUIET_MS);
        if quiet_ms > 60_000 {
            return Err(crate::SectionError {
                surface: SurfaceName::Gui,
                key: "person_quiet_ms".into(),
                message: format!(
                    "is {quiet_ms}: give at most 60000 (a minute), or set yield_to_person = \
                     false to never pause"
                ),
            });
        }
        person::watch().configure(settings.yield_to_person.unwrap_or(true), quiet_ms);
        if let Some(apps) = settings.terminal_apps {
            if let Some(index) = apps.iter().position(|app| app.trim().is_empty()) {
                return Err(crate::SectionError {
                    surface: SurfaceName::Gui,
                    key: format!("terminal_apps[{index}]"),
                    message: "is empty: give an application name such as \"xterm\" (the \
                              window's WM_CLASS), or leave the key out for the default list"
                        .into(),
                });
            }
            *self
                .terminals
                .apps
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = TerminalApps::new(&apps);
        }
        Ok(())
    }

    fn backend(&self) -> &'static str {
        super::backend_name()
    }

    fn needs_desktop(&self) -> bool {
        true
    }

    fn complications(&self) -> &'static [&'static str] {
        GUI_COMPLICATIONS
    }

    fn commands(&self) -> &'static [CommandSpec] {
        offered_commands(|command| self.backend.offers(command))
    }

    fn probe(&self) -> Availability {
        self.backend.availability()
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        match command {
            "screenshot" => SCREENSHOT_FIELDS,
            "windows" => WINDOWS_FIELDS,
            "monitors" => MONITORS_FIELDS,
            "cursor" => POINT_FIELDS,
            "move" => MOVE_FIELDS,
            "click" => CLICK_FIELDS,
            "drag" => DRAG_FIELDS,
            "scroll" => SCROLL_FIELDS,
            "type" => TYPE_FIELDS,
            "key" => KEY_FIELDS,
            "focus" => FOCUS_FIELDS,
            _ => &[],
        }
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let Some(id) = &complications.seen else {
            return Ok(Box::new(self.prepare_run(
                command,
                args,
                args,
                complications,
                None,
            )?));
        };
        if matches!(command, "screenshot" | "windows" | "monitors" | "cursor") {
            return Err(crate::snapshot::not_an_act("gui", command));
        }
        let seen = self.snapshots.bind(id)?;
        // Any later error would tell whether another agent's snapshot exists (its image size,
        // its windows): it is given only to the snapshot's own agent, at the caller check.
        let prepared = seen::map_args(&seen, command, args).and_then(|mapped| {
            self.prepare_run(command, &mapped, args, complications, Some(seen.clone()))
        });
        Ok(match prepared {
            Ok(run) => Box::new(run),
            Err(error) => Box::new(seen::Refusal { seen, error }),
        })
    }
}

impl<B: Backend> GuiSurface<B> {
    /// Validates a call into its run: `args` as the action reads them (screenshot pixels
    /// already mapped to the screen when bound to a screenshot), `given` as the call gave them
    /// (for receipts and policy).
    fn prepare_run(
        &self,
        command: &str,
        args: &Map<String, Value>,
        given: &Map<String, Value>,
        complications: &Complications,
        seen: Option<Seen<GuiSnapshot>>,
    ) -> Result<GuiRun<B>, ToolError> {
        let conn = self.backend.conn().map_err(unavailable)?;
        if COMMANDS.iter().any(|c| c.name == command) && !self.backend.offers(command) {
            return Err(ToolError::new(
                ErrorCode::Unavailable,
                format!(
                    "gui {command} does not work with this backend ({}); `computer doctor` \
                     says what the session lacks",
                    super::backend_name()
                ),
            )
            .at("command")
            .valid(self.commands().iter().map(|c| c.name)));
        }
        let mut action = self.validate(&conn, command, args, complications)?;
        match &mut action {
            Action::Type { text, keys } => {
                *keys = match text {
                    Typed::Text(text) => {
                        self.plan_keys(&*conn, Keys::Text(&text.replace("\r\n", "\n")))
                    }
                    Typed::Secret(_) => self.plan_keys(&*conn, Keys::Secret),
                }
                .map_err(x_failed)?;
            }
            Action::Key {
                combo,
                parsed,
                keys,
            } => {
                *keys = self
                    .plan_keys(&*conn, Keys::Combo(parsed, combo))
                    .map_err(x_failed)?
            }
            _ => {}
        }
        let risk = match &action {
            Action::Type {
                text: Typed::Secret(_),
                ..
            } => Risk::Secret,
            _ => COMMANDS
                .iter()
                .find(|c| c.name == command)
                .map_or(Risk::Act, |c| c.risk),
        };
        let window = args.get("window").and_then(Value::as_u64);
        let target = target_of(&*conn, &action, window).map_err(x_failed)?;
        let consent = self.backend.consent_needed(command).map_err(x_failed)?;
        Ok(GuiRun {
            backend: self.backend.clone(),
            conn,
            action,
            risk,
            target,
            args: receipt_value(&Value::Object(given.clone())),
            terminals: self.terminals.clone(),
            consent,
            reader: self.reader.clone(),
            read_back: self.read_back.load(Ordering::Relaxed),
            seen,
            snapshots: self.snapshots.clone(),
            before: None,
        })
    }

    /// Resolves the window the keys will reach and, for a terminal, the lines they end.
    fn plan_keys<D: Desktop>(&self, conn: &D, keys: Keys<'_>) -> Result<KeyPlan, DisplayError> {
        let windows = conn.windows()?;
        let live: Vec<u32> = windows.iter().map(|w| w.id).collect();
        self.terminals.lines.retain(&live);
        let target = conn.keyboard_target()?;
        if target.is_none() && conn.focus_must_be_known() {
            return Err(DisplayError(no_known_focus(conn)));
        }
        match target.and_then(|id| windows.iter().find(|w| w.id == id)) {
            Some(window) if self.terminals.is_terminal(window) => {
                let (line, generation) = self.terminals.lines.line(window.id);
                Ok(KeyPlan {
                    target: Some(window.id),
                    terminal: Some(TerminalPlan {
                        app: Some(window.app.clone()),
                        generation,
                        effect: keys.apply(&line),
                        possible: Vec::new(),
                        processes: vec![window.pid],
                    }),
                })
            }
            Some(window) => Ok(KeyPlan {
                target: Some(window.id),
                terminal: None,
            }),
            None => {
                // Deny when in doubt: keys whose window cannot be told may reach any open
                // terminal, whose line is then not known.
                let terminals: Vec<&WindowInfo> = windows
                    .iter()
                    .filter(|w| self.terminals.is_terminal(w))
                    .collect();
                let possible: Vec<u32> = terminals.iter().map(|w| w.id).collect();
                let processes = terminals.iter().map(|w| w.pid).collect();
                let terminal = (!possible.is_empty()).then(|| {
                    let unknown = Line {
                        text: String::new(),
                        opaque: Some(
                            "the window the keys reach cannot be told, and a terminal is open"
                                .into(),
                        ),
                    };
                    TerminalPlan {
                        app: None,
                        generation: 0,
                        effect: keys.apply(&unknown),
                        possible,
                        processes,
                    }
                });
                Ok(KeyPlan {
                    target: None,
                    terminal,
                })
            }
        }
    }
}

struct GuiRun<B: Backend> {
    backend: Arc<B>,
    conn: Arc<B::Conn>,
    action: Action,
    risk: Risk,
    /// The window the action acts on or reads, as the display showed it at prepare time.
    target: Option<TargetFacts>,
    args: Value,
    terminals: Arc<Terminals>,
    /// The question a person must answer first (the backend's consent), asked whatever the
    /// rules say; its answer is kept when this runs.
    consent: Option<String>,
    reader: Arc<ElementReader>,
    /// Whether the act reads back its effect.
    read_back: bool,
    /// The observation the act was aimed at (`complications.seen`), checked right before input.
    seen: Option<Seen<GuiSnapshot>>,
    /// Where observations are kept for the acts that name them.
    snapshots: Arc<Snapshots<GuiSnapshot>>,
    /// What the act's effect is judged against, once `look_before` read it.
    before: Option<Before>,
}

/// The window an action acts on or reads: the one it names, the active one for keyboard input,
/// the one under the point for the pointer. Where windows overlap the active one counts if it
/// is under the point (it is on top in practice), else the last mapped. None for actions on the
/// whole screen and for a point on no window.
fn target_of<D: Desktop>(
    conn: &D,
    action: &Action,
    window: Option<u64>,
) -> Result<Option<TargetFacts>, DisplayError> {
    let point = match action {
        Action::Screenshot { .. } if window.is_none() => return Ok(None),
        Action::Windows | Action::Monitors | Action::Cursor => return Ok(None),
        Action::Move { x, y } => Some((*x, *y)),
        Action::Drag { from, .. } => Some(*from),
        Action::Click { at, .. } | Action::Scroll { at, .. } => Some(match at {
            Some(point) => *point,
            None => conn.cursor()?,
        }),
        Action::Screenshot { .. }
        | Action::Focus { .. }
        | Action::Type { .. }
        | Action::Key { .. } => None,
    };
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
        app: Some(w.app.clone()).filter(|app| !app.is_empty()),
        pid: w.pid,
        window: Some(w.title.clone()),
        window_id: Some(w.id.to_string()),
        resolved: true,
    }))
}

#[async_trait]
impl<B: Backend> PreparedAction for GuiRun<B> {
    fn risk(&self) -> Risk {
        self.risk
    }

    fn describe(&self) -> String {
        let mut what = self.describe_action();
        if let Some(seen) = &self.seen {
            // The person sees screen points (a screenshot's pixels are mapped already) and
            // that the act holds only while its target is as that observation saw it.
            what.push_str(&format!(
                ", only if its target is as snapshot {} saw it",
                seen.id
            ));
        }
        match &self.consent {
            Some(question) => format!("{what}; {question}"),
            None => what,
        }
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            consent: self.consent.clone(),
            ..self.action_facts()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        match &self.seen {
            Some(seen) => seen.check_caller(agent),
            None => Ok(()),
        }
    }

    async fn look_before(&mut self) {
        if self.read_back
            && let Some(aim) = aim_of(&self.action)
        {
            self.before = Some(Before::read(&self.conn, &self.reader, aim).await);
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let GuiRun {
            backend,
            conn,
            action,
            terminals,
            consent,
            reader,
            read_back,
            seen,
            snapshots,
            before,
            ..
        } = *self;
        if consent.is_some() {
            // A person approved this call, and with it the backend's question.
            let granting = backend.clone();
            tokio::task::spawn_blocking(move || granting.grant_consent())
                .await
                .map_err(|err| SurfaceError::Failed {
                    message: format!("keeping the consent stopped: {err}"),
                })?
                .map_err(|err| SurfaceError::Failed { message: err.0 })?;
        }
        // What the act is read back against, read before it (acts only).
        let aim = aim_of(&action);
        let acts = aim.is_some();
        let before = match (before, aim) {
            (Some(before), _) => Some(before),
            (None, Some(aim)) if read_back => Some(Before::read(&conn, &reader, aim).await),
            _ => None,
        };
        let worker = conn.clone();
        let bound = Bound {
            seen,
            store: snapshots,
        };
        // The first read after the act is made on the thread that acted, before it returns.
        let (result, before, first_read) = tokio::task::spawn_blocking(move || {
            let result = execute(&*worker, action, &ctx, &terminals, &bound);
            let first_read = match (&result, &before) {
                (Ok(_), Some(before)) => Some(before.display_after(&*worker)),
                _ => None,
            };
            (result, before, first_read)
        })
        .await
        .map_err(|err| SurfaceError::Failed {
            message: format!("the gui action panicked: {err}"),
        })?;
        match result {
            Ok(mut outcome) => {
                match before {
                    Some(mut before) => before
                        .judge_after(&conn, &reader, first_read)
                        .await
                        .record(&mut outcome),
                    None if acts => EffectReport::read_back_off().record(&mut outcome),
                    None => {}
                }
                Ok(outcome)
            }
            Err(Failure::X(err)) => {
                // The connection may be broken: the next call reconnects.
                backend.forget(&conn);
                Err(SurfaceError::Failed { message: err.0 })
            }
            Err(Failure::Surface(err)) => Err(err),
        }
    }
}

impl<B: Backend> GuiRun<B> {
    fn describe_action(&self) -> String {
        match &self.action {
            Action::Screenshot { area, .. } => format!(
                "screenshot of {}x{} at ({},{})",
                area.width, area.height, area.x, area.y
            ),
            Action::Windows => "list windows".into(),
            Action::Monitors => "list monitors".into(),
            Action::Cursor => "read the pointer position".into(),
            Action::Move { x, y } => format!("move the pointer to ({x},{y})"),
            Action::Click { at, button, count } => match at {
                Some((x, y)) => format!("{button:?} click x{count} at ({x},{y})"),
                None => format!("{button:?} click x{count} where the pointer is"),
            },
            Action::Drag { from, to, button } => {
                format!("{button:?} drag from {from:?} to {to:?}")
            }
            Action::Scroll { dx, dy, .. } => format!("scroll dx={dx} dy={dy}"),
            // The text may be private: say how much, not what. What a terminal runs is a
            // command, shown as a shell run's script is.
            Action::Type {
                text: Typed::Text(text),
                keys,
            } => {
                format!(
                    "type {} characters{}",
                    text.chars().count(),
                    keys.describe()
                )
            }
            Action::Type {
                text: Typed::Secret(_),
                keys,
            } => format!("type a stored secret{}", keys.describe()),
            Action::Key { combo, keys, .. } => format!("press {combo}{}", keys.describe()),
            Action::Focus { window } => format!("focus window {window}"),
        }
    }

    fn action_facts(&self) -> ActionFacts {
        let terminal = match &self.action {
            Action::Type { keys, .. } | Action::Key { keys, .. } => keys.terminal_input(),
            _ => None,
        };
        let secrets = match &self.action {
            Action::Type {
                text: Typed::Secret(reference),
                keys,
            } => vec![SecretUse {
                name: crate::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: SecretDestination::Typed {
                    window: keys.target,
                    app: self.target.as_ref().and_then(|t| t.app.clone()),
                    terminal: keys.terminal.is_some(),
                },
            }],
            _ => Vec::new(),
        };
        ActionFacts {
            target: self.target.clone(),
            args: Some(self.args.clone()),
            terminal,
            secrets,
            ..ActionFacts::default()
        }
    }
}

/// What an act's read-back looks for; `None` for what only reads.
fn aim_of(action: &Action) -> Option<Aim> {
    Some(match action {
        Action::Move { x, y } => Aim::Pointer(*x, *y),
        Action::Click { at, .. } => Aim::Click(*at),
        Action::Drag { .. } | Action::Scroll { .. } => Aim::Windows,
        Action::Type {
            text: Typed::Text(text),
            ..
        } => Aim::Text(Some(text.replace("\r\n", "\n"))),
        Action::Type {
            text: Typed::Secret(_),
            ..
        } => Aim::Text(None),
        Action::Key { .. } => Aim::Key,
        Action::Focus { window } => Aim::Focus(*window),
        Action::Screenshot { .. } | Action::Windows | Action::Monitors | Action::Cursor => {
            return None;
        }
    })
}

enum Failure {
    X(DisplayError),
    Surface(SurfaceError),
}

impl From<DisplayError> for Failure {
    fn from(err: DisplayError) -> Self {
        Failure::X(err)
    }
}

impl From<SurfaceError> for Failure {
    fn from(err: SurfaceError) -> Self {
        Failure::Surface(err)
    }
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The window keys were sent to (checked right before sending), by id, title and app, so the
/// caller sees where its text went; None when it cannot be told.
fn receiving_window<D: Desktop>(conn: &D, target: Option<u32>) -> Option<Value> {
    let id = target?;
    let windows = conn.windows().ok()?;
    let window = windows.iter().find(|w| w.id == id)?;
    Some(json!({"id": window.id, "title": window.title, "app": window.app}))
}

fn done(value: Value) -> Outcome {
    Outcome {
        success: true,
        fields: fields(value),
        ..Outcome::default()
    }
}

/// An act's snapshot, and where observations are kept.
struct Bound {
    seen: Option<Seen<GuiSnapshot>>,
    store: Arc<Snapshots<GuiSnapshot>>,
}

fn refused_as(error: ToolError) -> Failure {
    Failure::Surface(SurfaceError::Tool(error))
}

/// Where a pointer action lands (where the pointer is, when it names no point); empty for
/// the others. Read once per act, so that every check before it judges the same points.
fn landing_points<D: Desktop>(conn: &D, action: &Action) -> Result<Vec<(i32, i32)>, DisplayError> {
    Ok(match action {
        Action::Move { x, y } => vec![(*x, *y)],
        Action::Click { at, .. } | Action::Scroll { at, .. } => vec![match at {
            Some(point) => *point,
            None => conn.cursor()?,
        }],
        Action::Drag { from, to, .. } => vec![*from, *to],
        _ => Vec::new(),
    })
}

/// What an act's snapshot check looks at (`points`: where it lands); None for observations.
fn seen_aim_of(action: &Action, points: &[(i32, i32)]) -> Option<seen::Aim> {
    Some(match action {
        Action::Move { .. }
        | Action::Click { .. }
        | Action::Scroll { .. }
        | Action::Drag { .. } => seen::Aim::Points(points.to_vec()),
        Action::Type { .. } | Action::Key { .. } => seen::Aim::Keys,
        Action::Focus { window } => seen::Aim::Window(*window),
        Action::Screenshot { .. } | Action::Windows | Action::Monitors | Action::Cursor => {
            return None;
        }
    })
}

fn execute<D: Desktop>(
    conn: &D,
    action: Action,
    ctx: &CallContext,
    terminals: &Terminals,
    bound: &Bound,
) -> Result<Outcome, Failure> {
    let input = !matches!(
        action,
        Action::Screenshot { .. } | Action::Windows | Action::Monitors | Action::Cursor
    );
    if input {
        // The person at the desk goes first: nothing is sent while they use it.
        person::watch().check().map_err(refused_as)?;
    }
    if !ctx.protected.is_empty() {
        refuse_if_targets_protected(conn, &action, &ctx.protected)?;
    }
    let landing = landing_points(conn, &action)?;
    if let Some(seen) = &bound.seen
        && let Some(aim) = seen_aim_of(&action, &landing)
    {
        seen::check(conn, seen, &aim)?.map_err(refused_as)?;
    }
    // Pointer actions may edit a terminal's line (a middle click pastes, a click may move the
    // cursor): the lines of terminals under them become opaque. A move only moves.
    let pointed = match &action {
        Action::Move { .. } => Vec::new(),
        _ => landing,
    };
    let pointer_hold = (!pointed.is_empty()).then(|| terminals.lines.hold());
    // Where no window's place is known, no terminal can be told to lie under the point (the
    // list would be read for nothing); the lines are all made opaque after the action instead.
    if !pointed.is_empty() && conn.places_known() {
        // A middle click pastes into a terminal, which may run what it pastes.
        let reached: Vec<Option<u32>> = conn
            .windows()?
            .into_iter()
            .filter(|w| {
                terminals.is_terminal(w) && pointed.iter().any(|(x, y)| w.rect.contains(*x, *y))
            })
            .map(|w| w.pid)
            .collect();
        mark_typed_into(&ctx.protected, &reached)?;
    }
    let outcome = match perform(conn, action, ctx, terminals, &bound.store) {
        // Input the person's own cut short: theirs, not a broken display.
        Err(Failure::X(_)) if input && person::watch().paused() => {
            Err(refused_as(person::watch().refusal()))
        }
        other => other,
    };
    if let Some(mut held) = pointer_hold {
        if !conn.places_known() {
            held.make_all_opaque("a pointer action landed where no window's place is known");
            return outcome;
        }
        let windows = conn.windows().inspect_err(|_| {
            // Which terminals lie under the pointer cannot be told: none of the lines is known.
            held.make_all_opaque("a pointer action landed where it could not be told");
        })?;
        for window in windows {
            if terminals.is_terminal(&window)
                && pointed.iter().any(|(x, y)| window.rect.contains(*x, *y))
            {
                held.make_opaque(
                    window.id,
                    "a pointer action on the terminal (a paste, a moved cursor) may have changed it",
                );
            }
        }
    }
    outcome
}

/// Records the terminals an agent's input is about to reach (by their processes), so that the
/// control socket refuses answers from what runs in them. A terminal whose process cannot be
/// told refuses the input: what it starts could not be told from a person's approver.
fn mark_typed_into(
    protected: &ProtectedProcesses,
    processes: &[Option<u32>],
) -> Result<(), Failure> {
    if processes.iter().any(Option::is_none) {
        return Err(Failure::Surface(SurfaceError::NothingSent {
            message: "refused: the input would reach a terminal window that names no process \
                      (no _NET_WM_PID), so what it starts there could not be kept from answering \
                      approvals; nothing was sent"
                .into(),
        }));
    }
    for pid in processes.iter().flatten() {
        protected.typed_into(*pid);
    }
    Ok(())
}

/// Sends a call's keys if they still reach the window they were decided for, and the line there
/// is still the one decided on; then keeps the line they leave.
fn send_keys<D: Desktop>(
    conn: &D,
    plan: &KeyPlan,
    terminals: &Terminals,
    protected: &ProtectedProcesses,
    send: impl FnOnce(&D) -> Result<(), DisplayError>,
) -> Result<(), Failure> {
    // Not `Refused`, which says the target is an approver: the call failed before it acted.
    let refused = |message: String| Failure::Surface(SurfaceError::NothingSent { message });
    let mut held = terminals.lines.hold();
    let now = conn.keyboard_target()?;
    if now.is_none() && conn.focus_must_be_known() {
        return Err(refused(format!(
            "{}; nothing was sent",
            no_known_focus(conn)
        )));
    }
    if now != plan.target || now.is_none() {
        let windows = conn.windows()?;
        let now_terminal = match now {
            Some(id) => windows
                .iter()
                .any(|w| w.id == id && terminals.is_terminal(w)),
            None => windows.iter().any(|w| terminals.is_terminal(w)),
        };
        // Keys decided for a terminal go to that terminal only; keys decided for another
        // window never reach a terminal (or what may be one).
        if (plan.terminal.is_some() && now != plan.target)
            || (plan.terminal.is_none() && now_terminal)
        {
            let name = |w: Option<u32>| {
                w.map_or("a window that cannot be told".to_string(), |w| {
                    format!("window {w}")
                })
            };
            return Err(refused(format!(
                "the keys were decided for {} but would now reach {}, and one of them is (or may \
                 be) a terminal; nothing was sent. Focus the window again and retry",
                name(plan.target),
                name(now)
            )));
        }
    }
    if let (Some(terminal), Some(window)) = (&plan.terminal, plan.target)
        && held.generation(window) != terminal.generation
    {
        return Err(refused(format!(
            "the command line in terminal window {window} changed since this call was decided \
             (another call sent it keys); nothing was sent. Retry"
        )));
    }
    if let Some(terminal) = &plan.terminal {
        mark_typed_into(protected, &terminal.processes)?;
    }
    let sent = send(conn);
    match (&plan.terminal, plan.target) {
        (Some(terminal), Some(window)) => match &sent {
            Ok(()) => held.set(window, terminal.effect.after.clone()),
            Err(_) => held.make_opaque(window, "sending keys to it failed part way"),
        },
        (Some(terminal), None) => {
            for window in &terminal.possible {
                held.make_opaque(*window, "keys went to a window that could not be told");
            }
        }
        (None, _) => {}
    }
    sent.map_err(Failure::from)
}

fn perform<D: Desktop>(
    conn: &D,
    action: Action,
    ctx: &CallContext,
    terminals: &Terminals,
    snapshots: &Snapshots<GuiSnapshot>,
) -> Result<Outcome, Failure> {
    Ok(match action {
        Action::Screenshot {
            area,
            max_dim,
            jpeg_quality,
            inline,
        } => {
            let rgb = conn.to_rgb(&conn.grab(area)?);
            // The windows as the shot shows them, for acts aimed at it. A listing that fails
            // does not fail the shot; acts bound to it are then refused.
            let windows = conn.windows().ok();
            let stacking = conn.stacking().ok().flatten();
            let (rgb, _) = downscale(rgb, max_dim);
            // Screen units per image pixel along the long side: the downscale factor on X11;
            // on a Retina display the capture has two pixels per point to begin with.
            let scale = f64::from(area.width.max(area.height))
                / f64::from(rgb.width.max(rgb.height).max(1));
            let (bytes, mime, ext) = encode(&rgb, jpeg_quality)?;
            let artifact = write_artifact(
                ctx,
                &format!("{}.screenshot.{ext}", ctx.call_id),
                "screenshot",
                &bytes,
            )?;
            let value = json!({
                "path": artifact.path,
                "sha256": artifact.sha256,
                "bytes": artifact.bytes,
                "format": ext,
                "width": rgb.width,
                "height": rgb.height,
                "scale": (scale * 1e4).round() / 1e4,
                "origin_x": area.x,
                "origin_y": area.y,
                "snapshot": snapshots.record(&ctx.agent, GuiSnapshot {
                    windows,
                    stacking,
                    image: Some(seen::Image {
                        area,
                        width: rgb.width,
                        height: rgb.height,
                    }),
                }),
            });
            Outcome {
                success: true,
                fields: fields(value),
                inline_image: inline.then(|| InlineImage {
                    mime_type: mime.into(),
                    bytes,
                }),
                artifacts: vec![artifact],
                ..Outcome::default()
            }
        }
        Action::Windows => {
            let windows = conn.windows()?;
            let list: Vec<Value> = windows
                .iter()
                .map(|w| {
                    json!({
                        "id": w.id,
                        "title": w.title,
                        "app": w.app,
                        "pid": w.pid,
                        "x": w.rect.x,
                        "y": w.rect.y,
                        "width": w.rect.width,
                        "height": w.rect.height,
                        "focused": w.focused,
                        "monitor": w.monitor,
                    })
                })
                .collect();
            let snapshot = snapshots.record(
                &ctx.agent,
                GuiSnapshot {
                    windows: Some(windows),
                    stacking: conn.stacking().ok().flatten(),
                    image: None,
                },
            );
            done(json!({"windows": list, "snapshot": snapshot}))
        }
        Action::Monitors => {
            let monitors = conn.monitors()?;
            let list: Vec<Value> = monitors
                .iter()
                .map(|m| {
                    json!({
                        "index": m.index,
                        "name": m.name,
                        "x": m.rect.x,
                        "y": m.rect.y,
                        "width": m.rect.width,
                        "height": m.rect.height,
                        "primary": m.primary,
                    })
                })
                .collect();
            done(json!({"monitors": list}))
        }
        Action::Cursor => {
            let (x, y) = conn.cursor()?;
            done(json!({"x": x, "y": y}))
        }
        Action::Move { x, y } => {
            conn.move_to(x, y)?;
            done(json!({"x": x, "y": y}))
        }
        Action::Click { at, button, count } => {
            conn.click(at, button, count)?;
            let (x, y) = match at {
                Some(point) => point,
                None => conn.cursor()?,
            };
            done(json!({"x": x, "y": y, "button": button_name(button), "count": count}))
        }
        Action::Drag { from, to, button } => {
            conn.drag(from, to, button)?;
            done(json!({
                "from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1,
                "button": button_name(button),
            }))
        }
        Action::Scroll { at, dx, dy } => {
            conn.scroll(at, dx, dy)?;
            let (x, y) = match at {
                Some(point) => point,
                None => conn.cursor()?,
            };
            done(json!({"x": x, "y": y, "dx": dx, "dy": dy}))
        }
        Action::Type {
            text: Typed::Text(text),
            keys,
        } => {
            // "\r\n" is one line break, not two.
            let text = text.replace("\r\n", "\n");
            send_keys(conn, &keys, terminals, &ctx.protected, |conn| {
                conn.type_text(&text)
            })?;
            let mut reply = json!({"chars": text.chars().count()});
            if let Some(window) = receiving_window(conn, keys.target) {
                reply["window"] = window;
            }
            done(reply)
        }
        Action::Type {
            text: Typed::Secret(reference),
            keys,
        } => {
            // Resolved only now, after policy and approval, and registered for masking first.
            let value = ctx.secrets.resolve(crate::secrets::IN_PLACE, &reference)?;
            let text = secrecy::ExposeSecret::expose_secret(&value);
            crate::secrets::check_typed_secret(text, MAX_TYPE_CHARS)?;
            send_keys(conn, &keys, terminals, &ctx.protected, |conn| {
                conn.type_text(text)
            })?;
            // Neither the value nor its length: the model learns that it was typed.
            let mut reply = json!({"secret": "typed"});
            if let Some(window) = receiving_window(conn, keys.target) {
                reply["window"] = window;
            }
            done(reply)
        }
        Action::Key {
            combo,
            parsed,
            keys,
        } => {
            send_keys(conn, &keys, terminals, &ctx.protected, |conn| {
                conn.press_combo(&parsed)
            })?;
            let mut reply = json!({"combo": combo});
            if let Some(window) = receiving_window(conn, keys.target) {
                reply["window"] = window;
            }
            done(reply)
        }
        Action::Focus { window } => {
            let focused = conn.focus(window)?;
            Outcome {
                success: focused,
                fields: fields(json!({"window": window, "focused": focused})),
                ..Outcome::default()
            }
        }
    })
}

/// Refuses an input action whose target belongs to a protected process (an approver): a pointer
/// action at a point inside one of its windows, keys and text while one of its windows is active,
/// focusing one of its windows. Reading the screen stays allowed. What cannot be told (the active
/// window unknown) is refused while approvers are connected: deny when in doubt.
fn refuse_if_targets_protected<D: Desktop>(
    conn: &D,
    action: &Action,
    protected: &ProtectedProcesses,
) -> Result<(), Failure> {
    // A window whose process the backend cannot tell may be an approver's: deny when in doubt.
    let is_protected =
        |w: &WindowInfo| w.pid.is_some_and(|pid| protected.contains(pid)) || !conn.knows_owner(w);
    let refused = |what: String| {
        Failure::Surface(SurfaceError::Refused {
            message: format!(
                "refused: {what} belongs to an approver (the window where a person answers \
                 approval requests); agents may not act on it"
            ),
        })
    };
    let points: Vec<(i32, i32)> = match action {
        Action::Move { x, y } => vec![(*x, *y)],
        Action::Click { at, .. } | Action::Scroll { at, .. } => {
            vec![match at {
                Some(point) => *point,
                None => conn.cursor()?,
            }]
        }
        Action::Drag { from, to, .. } => vec![*from, *to],
        Action::Type { .. } | Action::Key { .. } => {
            let windows = conn.windows()?;
            return match windows.iter().find(|w| w.focused) {
                Some(w) if is_protected(w) => Err(refused(format!(
                    "the active window {} \"{}\"",
                    w.id, w.title
                ))),
                Some(_) => Ok(()),
                None => Err(refused(
                    "the active window is unknown, so it may be one that".into(),
                )),
            };
        }
        Action::Focus { window } => {
            let windows = conn.windows()?;
            return match windows.iter().find(|w| w.id == *window) {
                Some(w) if is_protected(w) => {
                    Err(refused(format!("window {} \"{}\"", w.id, w.title)))
                }
                _ => Ok(()),
            };
        }
        Action::Screenshot { .. } | Action::Windows | Action::Monitors | Action::Cursor => {
            return Ok(());
        }
    };
    if !conn.places_known() {
        return Err(refused(
            "the point may lie on a window whose place this backend cannot tell (GNOME: Mutter \
             tells no window positions), and so may be one that"
                .into(),
        ));
    }
    // Any protected window containing the point refuses, whatever lies above it: stacking can
    // change between this check and the event, and a refusal is the safe side of that race.
    for w in conn.windows()?.iter().filter(|w| is_protected(w)) {
        if !conn.knows_owner(w) {
            return Err(refused(format!(
                "window {} \"{}\" (whose process and place this backend cannot tell) may lie \
                 under the point and may be one that",
                w.id, w.title
            )));
        }
        if let Some((x, y)) = points.iter().find(|(x, y)| w.rect.contains(*x, *y)) {
            return Err(refused(format!(
                "the point ({x},{y}) lies on window {} \"{}\", which",
                w.id, w.title
            )));
        }
    }
    Ok(())
}

fn button_name(button: Button) -> &'static str {
    match button {
        Button::Left => "left",
        Button::Middle => "middle",
        Button::Right => "right",
    }
}

/// Scales `rgb` so its long side is at most `max_dim`. Returns the image and the scale (screen
/// pixels per image pixel, 1 when unscaled).
fn downscale(rgb: Rgb, max_dim: u32) -> (Rgb, f64) {
    let long = rgb.width.max(rgb.height);
    if long <= max_dim {
        return (rgb, 1.0);
    }
    let scale = f64::from(long) / f64::from(max_dim);
    let width = ((f64::from(rgb.width) / scale).round() as u32).max(1);
    let height = ((f64::from(rgb.height) / scale).round() as u32).max(1);
    // Area averaging: each image pixel is the mean of the screen pixels it covers. Cheaper than
    // a filtered resize and as legible for screen content at these ratios.
    let span = |out: u32, size: u32, src: u32| -> Vec<(usize, usize)> {
        (0..out)
            .map(|i| {
                let start = (u64::from(i) * u64::from(src) / u64::from(size)) as usize;
                let end = ((u64::from(i) + 1) * u64::from(src) / u64::from(size)) as usize;
                (start, end.max(start + 1).min(src as usize))
            })
            .collect()
    };
    let xs = span(width, width, rgb.width);
    let ys = span(height, height, rgb.height);
    let stride = rgb.width as usize * 3;
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    let mut sums = vec![0u32; width as usize * 3];
    for &(y0, y1) in &ys {
        sums.iter_mut().for_each(|s| *s = 0);
        for row in rgb.pixels[y0 * stride..y1 * stride].chunks_exact(stride) {
            for (ox, &(x0, x1)) in xs.iter().enumerate() {
                let sum = &mut sums[ox * 3..ox * 3 + 3];
                for px in row[x0 * 3..x1 * 3].chunks_exact(3) {
                    sum[0] += u32::from(px[0]);
                    sum[1] += u32::from(px[1]);
                    sum[2] += u32::from(px[2]);
                }
            }
        }
        for (ox, &(x0, x1)) in xs.iter().enumerate() {
            let n = ((x1 - x0) * (y1 - y0)) as u32;
            for c in 0..3 {
                pixels.push(((sums[ox * 3 + c] + n / 2) / n) as u8);
            }
        }
    }
    (
        Rgb {
            width,
            height,
            pixels,
        },
        scale,
    )
}

/// Encodes as PNG (fast compression) or JPEG; returns the bytes, MIME type and extension.
fn encode(
    rgb: &Rgb,
    jpeg_quality: Option<u8>,
) -> Result<(Vec<u8>, &'static str, &'static str), SurfaceError> {
    use image::ImageEncoder;
    let mut bytes = Vec::with_capacity(rgb.pixels.len() / 8);
    let failed = |err: image::ImageError| SurfaceError::Failed {
        message: format!("could not encode the screenshot: {err}"),
    };
    match jpeg_quality {
        None => {
            image::codecs::png::PngEncoder::new_with_quality(
                &mut bytes,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            )
            .write_image(
                &rgb.pixels,
                rgb.width,
                rgb.height,
                image::ExtendedColorType::Rgb8,
            )
            .map_err(failed)?;
            Ok((bytes, "image/png", "png"))
        }
        Some(quality) => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality)
                .write_image(
                    &rgb.pixels,
                    rgb.width,
                    rgb.height,
                    image::ExtendedColorType::Rgb8,
                )
                .map_err(failed)?;
            Ok((bytes, "image/jpeg", "jpeg"))
        }
    }
}

/// Writes `bytes` to `file_name` in the call's artifact directory (mode 0600), within the
/// artifacts quota, and describes it as an artifact.
fn write_artifact(
    ctx: &CallContext,
    file_name: &str,
    name: &str,
    bytes: &[u8],
) -> Result<Artifact, SurfaceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = &ctx.artifact_dir;
    ctx.artifact_quota
        .reserve(bytes.len() as u64)
        .map_err(|full| SurfaceError::Failed {
            message: format!("{name} not written: {full}"),
        })?;
    std::fs::create_dir_all(dir)
        .map_err(|e| SurfaceError::io(format!("create artifact dir {}", dir.display()), e))?;
    let path: PathBuf = dir.join(file_name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| SurfaceError::io(format!("create {}", path.display()), e))?;
    file.write_all(bytes)
        .map_err(|e| SurfaceError::io(format!("write {}", path.display()), e))?;
    Ok(Artifact {
        name: name.into(),
        sha256: hex::encode(Sha256::digest(bytes)),
        bytes: bytes.len() as u64,
        path,
        truncated: false,
        cut: None,
    })
}

/// Full-screen evidence shots.
pub struct Evidence<B: Backend> {
    backend: Arc<B>,
}

impl<B: Backend> Evidence<B> {
    pub fn new(backend: Arc<B>) -> Self {
        Evidence { backend }
    }
}

#[async_trait]
impl<B: Backend> EvidenceCapture for Evidence<B> {
    async fn capture(
        &self,
        ctx: &CallContext,
        label: &str,
        settle: bool,
    ) -> Result<EvidenceShot, SurfaceError> {
        let conn = self.backend.conn().map_err(|why| SurfaceError::Failed {
            message: match why {
                Availability::Unavailable { reason, .. } => reason,
                Availability::Ready => "the display went away".into(),
            },
        })?;
        let ctx = ctx.clone();
        let label = label.to_string();
        let worker = conn.clone();
        let shot =
            tokio::task::spawn_blocking(move || evidence_shot(&*worker, &ctx, &label, settle))
                .await
                .map_err(|err| SurfaceError::Failed {
                    message: format!("the evidence capture panicked: {err}"),
                })?;
        match shot {
            Ok(shot) => Ok(shot),
            Err(Failure::X(err)) => {
                self.backend.forget(&conn);
                Err(SurfaceError::Failed { message: err.0 })
            }
            Err(Failure::Surface(err)) => Err(err),
        }
    }
}

fn evidence_shot<D: Desktop>(
    conn: &D,
    ctx: &CallContext,
    label: &str,
    settle: bool,
) -> Result<EvidenceShot, Failure> {
    let screen = conn.screen()?;
    let started = Instant::now();
    let mut frame = conn.grab(screen)?;
    let mut settle_ms = None;
    let mut settled = true;
    if settle {
        // Poll cheap raw grabs until the screen has not changed for SETTLE_QUIET, within
        // SETTLE_BOUND. Raw frames are compared whole (memcmp), which is cheaper than hashing.
        let mut last_change = started;
        loop {
            if last_change.elapsed() >= SETTLE_QUIET {
                break;
            }
            if started.elapsed() >= SETTLE_BOUND {
                settled = false;
                break;
            }
            std::thread::sleep(SETTLE_POLL);
            let next = conn.grab(screen)?;
            if !D::same_frame(&next, &frame) {
                last_change = Instant::now();
                frame = next;
            }
        }
        settle_ms = Some((last_change - started).as_millis() as u64);
    }
    let rgb = conn.to_rgb(&frame);
    let (bytes, _, _) = encode(&rgb, None)?;
    let artifact = write_artifact(
        ctx,
        &format!("{}.evidence-{label}.png", ctx.call_id),
        &format!("evidence-{label}"),
        &bytes,
    )?;
    Ok(EvidenceShot {
        artifact,
        width: rgb.width,
        height: rgb.height,
        settle_ms,
        settle_bound_ms: SETTLE_BOUND.as_millis() as u64,
        settled,
    })
}

/// See [`super::capture_screen_png`].
pub fn capture_screen_png<B: Backend>(backend: &B) -> Result<(Vec<u8>, u32, u32, String), String> {
    let conn = backend.conn().map_err(|why| format!("{why:?}"))?;
    let screen = conn.screen().map_err(|e| e.0)?;
    let rgb = conn.to_rgb(&conn.grab(screen).map_err(|e| e.0)?);
    let (bytes, _, _) = encode(&rgb, None).map_err(|e| e.to_string())?;
    let sha = hex::encode(Sha256::digest(&bytes));
    Ok((bytes, rgb.width, rgb.height, sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscale_keeps_the_long_side_within_max_dim() {
        let rgb = Rgb {
            width: 1920,
            height: 1080,
            pixels: vec![7; 1920 * 1080 * 3],
        };
        let (scaled, scale) = downscale(rgb, 1280);
        assert_eq!((scaled.width, scaled.height), (1280, 720));
        assert!((scale - 1.5).abs() < 1e-9);
        assert_eq!(scaled.pixels.len(), 1280 * 720 * 3);
    }

    #[test]
    fn downscale_averages_the_covered_pixels() {
        // Left half red, right half blue, 40x20 down to 20x10: no colour bleeds across.
        let mut pixels = Vec::new();
        for _y in 0..20 {
            for x in 0..40 {
                pixels.extend_from_slice(if x < 20 { &[255, 0, 0] } else { &[0, 0, 255] });
            }
        }
        let (scaled, scale) = downscale(
            Rgb {
                width: 40,
                height: 20,
                pixels,
            },
            20,
        );
        assert_eq!((scaled.width, scaled.height, scale), (20, 10, 2.0));
        assert_eq!(&scaled.pixels[..3], &[255, 0, 0]);
        assert_eq!(&scaled.pixels[57..60], &[0, 0, 255]);
    }

    #[test]
    fn small_images_are_not_scaled() {
        let rgb = Rgb {
            width: 10,
            height: 20,
            pixels: vec![0; 600],
        };
        let (same, scale) = downscale(rgb, 1280);
        assert_eq!((same.width, same.height, scale), (10, 20, 1.0));
    }

    #[test]
    fn points_off_the_screen_name_the_field_and_range() {
        let screen = Rect {
            x: 0,
            y: 0,
            width: 100,
            height: 50,
        };
        let err = on_screen(screen, 100, 0, "args.x", "args.y").unwrap_err();
        assert_eq!(err.path.as_deref(), Some("args.x"));
        assert!(err.message.contains("0..=99"), "{}", err.message);
        let err = on_screen(screen, 5, -1, "args.x", "args.y").unwrap_err();
        assert_eq!(err.path.as_deref(), Some("args.y"));
        assert!(on_screen(screen, 99, 49, "args.x", "args.y").is_ok());
    }
}
