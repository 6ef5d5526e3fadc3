//! The gui surface on any backend (X11, wlroots Wayland, GNOME, the portal, macOS): the
//! commands a backend's capabilities offer (each lives in `commands/`), the run every act goes through (the person at the desk, an
//! approver's windows, the snapshot it was aimed at, terminals under the pointer, the read-back
//! of its effect), and the evidence capturer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use computer_ipc::{Complications, ErrorCode, SurfaceName, ToolError};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::commands::keys::mark_typed_into;
use super::commands::screenshot::{encode, write_artifact};
use super::commands::{
    self, Act, Call, Entry, Failure, Reach, Running, TABLE, Terminals, display_failed, refused_as,
};
use super::desktop::{Backend, Desktop, WindowInfo, blocking};
use super::person;
use super::read_back::Before;
use super::seen::{self, GuiSnapshot};
use super::terminal::{LineTracker, TerminalApps};
use crate::accessibility::ElementReader;
use crate::kit::snapshot::{Seen, Snapshots};
use crate::{
    ActionFacts, Availability, CallContext, CommandSpec, EffectReport, EvidenceCapture,
    EvidenceShot, Outcome, PreparedAction, ProtectedProcesses, Risk, SETTLE_BOUND, SETTLE_POLL,
    SETTLE_QUIET, Surface, SurfaceError, TargetFacts, receipt_value,
};

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
        GuiSurface::reading_with(backend, ElementReader::new())
    }

    /// The surface over `backend` whose acts' read-back reads elements through `reader` (an
    /// agent's own desktop reads them on its own accessibility bus).
    pub fn reading_with(backend: Arc<B>, reader: ElementReader) -> Self {
        GuiSurface {
            backend,
            terminals: Arc::new(Terminals {
                apps: std::sync::RwLock::new(TerminalApps::default()),
                lines: LineTracker::default(),
            }),
            reader: Arc::new(reader),
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
    /// On X11, whether gui input goes through the agent's own XInput2 pointer and keyboard
    /// (off by default; needs XInput 2.2), leaving the person's alone.
    #[serde(default)]
    own_pointer: Option<bool>,
}

fn unavailable(why: Availability) -> ToolError {
    match why {
        Availability::Unavailable { reason, fix } => {
            ToolError::new(ErrorCode::Unavailable, format!("{reason}; fix: {fix}")).at("surface")
        }
        Availability::Ready => ToolError::new(ErrorCode::Unavailable, "the display went away"),
    }
}

/// The gui commands whose needs `offered` says a backend meets, as one list per distinct
/// choice for the life of the process (the tool's command lists are `'static`; a process sees
/// one or two choices).
fn offered_commands(offered: impl Fn(&Entry) -> bool) -> &'static [CommandSpec] {
    static CHOSEN: std::sync::Mutex<Vec<&'static [CommandSpec]>> =
        std::sync::Mutex::new(Vec::new());
    let wanted: Vec<CommandSpec> = TABLE
        .iter()
        .filter(|entry| offered(entry))
        .map(|entry| entry.spec)
        .collect();
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
        #[cfg(target_os = "linux")]
        super::backends::x11::configure_own_pointer(settings.own_pointer);
        #[cfg(not(target_os = "linux"))]
        if settings.own_pointer == Some(true) {
            return Err(crate::SectionError {
                surface: SurfaceName::Gui,
                key: "own_pointer".into(),
                message: "is true, but the agent's own pointer is an X11 one (XInput2): this \
                          platform's gui backend has none; leave it out or set it false"
                    .into(),
            });
        }
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
        offered_commands(|entry| self.offers(entry))
    }

    fn probe(&self) -> Availability {
        self.backend.availability()
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        commands::entry(command).map_or(&[], |entry| entry.fields)
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
        let listed = commands::entry(command);
        // Observations are aimed at nothing: only acts are bound to what one saw.
        if listed.is_some_and(|c| c.spec.risk == Risk::Observe) {
            return Err(crate::kit::snapshot::not_an_act("gui", command));
        }
        let points = listed.map_or(&[][..], |c| c.points);
        let seen = self.snapshots.bind(id)?;
        // Any later error would tell whether another agent's snapshot exists (its image size,
        // its windows): it is given only to the snapshot's own agent, at the caller check.
        let prepared = seen::map_args(&seen, points, args).and_then(|mapped| {
            self.prepare_run(command, &mapped, args, complications, Some(seen.clone()))
        });
        Ok(match prepared {
            Ok(run) => Box::new(run),
            Err(error) => Box::new(seen::Refusal { seen, error }),
        })
    }
}

impl<B: Backend> GuiSurface<B> {
    /// Whether the backend has what `entry`'s command needs.
    fn offers(&self, entry: &Entry) -> bool {
        entry.offered(|capability| self.backend.has(capability))
    }

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
        let listed = commands::entry(command);
        if listed.is_some_and(|entry| !self.offers(entry)) {
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
        let unknown = || {
            ToolError::invalid(format!("unknown gui command `{command}`"))
                .at("command")
                .valid(TABLE.iter().map(|c| c.spec.name))
        };
        let Some(listed) = listed else {
            return Err(unknown());
        };
        let call = Call {
            conn: &*conn,
            args,
            complications,
            terminals: &self.terminals,
        };
        let act = commands::prepare(command, &call).ok_or_else(unknown)??;
        let risk = act.risk(listed.spec.risk);
        let window = args.get("window").and_then(Value::as_u64);
        let target = act.target(&*conn, window).map_err(display_failed)?;
        let consent = self
            .backend
            .consent_needed(listed.needs)
            .map_err(display_failed)?;
        Ok(GuiRun {
            backend: self.backend.clone(),
            conn,
            act,
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
}

struct GuiRun<B: Backend> {
    backend: Arc<B>,
    conn: Arc<B::Conn>,
    act: Box<dyn Act<B::Conn>>,
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
            && let Some(aim) = self.act.read_back()
        {
            self.before = Some(Before::read(&self.conn, &self.reader, aim).await);
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let GuiRun {
            backend,
            conn,
            act,
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
        let aim = act.read_back();
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
        let (result, before, first_read) = blocking(move || {
            let result = execute(&*worker, act, &ctx, &terminals, &bound);
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
            Err(Failure::Display(err)) => {
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
        self.act.describe()
    }

    fn action_facts(&self) -> ActionFacts {
        let app = self.target.as_ref().and_then(|t| t.app.clone());
        ActionFacts {
            target: self.target.clone(),
            args: Some(self.args.clone()),
            terminal: self.act.terminal_input(),
            secrets: self.act.secrets(app),
            ..ActionFacts::default()
        }
    }
}

/// An act's snapshot, and where observations are kept.
struct Bound {
    seen: Option<Seen<GuiSnapshot>>,
    store: Arc<Snapshots<GuiSnapshot>>,
}

/// What an act's snapshot check looks at (`points`: where it lands); None for observations.
fn seen_aim_of(reach: Reach, points: &[(i32, i32)]) -> Option<seen::Aim> {
    Some(match reach {
        Reach::Points => seen::Aim::Points(points.to_vec()),
        Reach::Keys => seen::Aim::Keys,
        Reach::Window(window) => seen::Aim::Window(window),
        Reach::Nothing => return None,
    })
}

/// Runs an act on the calling thread, after the checks every act goes through, and keeps the
/// lines of the terminals its pointer input may have edited.
fn execute<D: Desktop>(
    conn: &D,
    act: Box<dyn Act<D>>,
    ctx: &CallContext,
    terminals: &Terminals,
    bound: &Bound,
) -> Result<Outcome, Failure> {
    let reach = act.reach();
    let input = !matches!(reach, Reach::Nothing);
    if input && conn.yields_to_person() {
        // The person at the desk goes first: nothing is sent while they use it.
        person::watch().check().map_err(refused_as)?;
    }
    if !ctx.protected.is_empty() {
        refuse_if_targets_protected(conn, &*act, reach, &ctx.protected)?;
    }
    let landing = act.landing(conn)?;
    if let Some(seen) = &bound.seen
        && let Some(aim) = seen_aim_of(reach, &landing)
    {
        seen::check(conn, seen, &aim)?.map_err(refused_as)?;
    }
    // Pointer actions may edit a terminal's line (a middle click pastes, a click may move the
    // cursor): the lines of terminals under them become opaque. A move only moves.
    let pointed = if act.may_edit_terminals() {
        landing
    } else {
        Vec::new()
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
    let running = Running {
        ctx,
        terminals,
        snapshots: &bound.store,
    };
    let outcome = match act.perform(conn, &running) {
        // Input the person's own cut short: theirs, not a broken display.
        Err(Failure::Display(_))
            if input && conn.yields_to_person() && person::watch().paused() =>
        {
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

/// Refuses an input action whose target belongs to a protected process (an approver): a pointer
/// action at a point inside one of its windows, keys and text while one of its windows is active,
/// focusing one of its windows. Reading the screen stays allowed. What cannot be told (the active
/// window unknown) is refused while approvers are connected: deny when in doubt.
fn refuse_if_targets_protected<D: Desktop>(
    conn: &D,
    act: &dyn Act<D>,
    reach: Reach,
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
    let points: Vec<(i32, i32)> = match reach {
        Reach::Points => act.landing(conn)?,
        Reach::Keys => {
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
        Reach::Window(window) => {
            let windows = conn.windows()?;
            return match windows.iter().find(|w| w.id == window) {
                Some(w) if is_protected(w) => {
                    Err(refused(format!("window {} \"{}\"", w.id, w.title)))
                }
                _ => Ok(()),
            };
        }
        Reach::Nothing => return Ok(()),
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
            Err(Failure::Display(err)) => {
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
