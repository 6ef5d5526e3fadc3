//! Desktops of agents' own (`gui desktop open|close|list`): which are open and whose each is,
//! the surfaces a call naming one (`complications.desktop`) reaches there, and their end — when
//! closed, when their agent's connection ends under a disconnect policy, or when the daemon stops.
//! An agent sees and reaches only its own: another's id reads exactly as one that does not exist.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use computer_ipc::control::DesktopFact;
use computer_ipc::{ErrorCode, SurfaceName, ToolError};
use computer_surfaces::desktops::{AgentDesktop, DesktopSpec, SIZE_RANGE};
use computer_surfaces::kit::one_shot::DESKTOP_ENV;
use computer_surfaces::shell::ShellSurface;
use computer_surfaces::{
    ActionFacts, CallContext, CommandSpec, EvidenceCapture, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, decode_args,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The command, on the gui surface, that opens, closes and lists an agent's desktops.
pub const DESKTOP_COMMAND: &str = "desktop";

/// The surfaces that act on a desktop of an agent's own when a call names it.
pub const ON_A_DESKTOP: &[SurfaceName] = &[SurfaceName::Gui, SurfaceName::Ax, SurfaceName::Shell];

/// How many desktops one agent may have open at once, and all agents together: each is an X
/// server, a window manager and two buses (tens of MB).
const MAX_PER_AGENT: usize = 4;
const MAX_OPEN: usize = 16;

/// The size a desktop gets when `open` names none.
const DEFAULT_SIZE: [u32; 2] = [1280, 800];

// `desktop`'s args. Doc comments here are the tool description's text (`schema.rs`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DesktopArgs {
    op: DesktopOp,
    /// close: the desktop's id
    #[serde(default)]
    id: Option<String>,
    /// open: [width, height] (default [1280, 800])
    #[serde(default)]
    size: Option<[u32; 2]>,
    /// open: shown as a window on the person's screen (default true; false or no display:
    /// a virtual one)
    #[serde(default)]
    visible: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum DesktopOp {
    Open,
    Close,
    List,
}

/// What a `desktop` reply may hold, for the tool description.
pub const DESKTOP_RESULT_FIELDS: &[&str] = &["desktop?", "kind?", "size?", "desktops?", "closed?"];

pub fn desktop_spec() -> CommandSpec {
    CommandSpec::of::<DesktopArgs>(DESKTOP_COMMAND, Risk::Act)
}

/// Whether `surface` takes `complications.desktop` (the daemon routes it, the surface does not
/// see it): where desktops of agents' own can be opened.
pub fn honoured_on(surface: SurfaceName) -> bool {
    cfg!(target_os = "linux") && ON_A_DESKTOP.contains(&surface)
}

/// Whether a call is the daemon's own `gui desktop`.
pub fn is_desktop_call(surface: SurfaceName, command: &str) -> bool {
    surface == SurfaceName::Gui && command == DESKTOP_COMMAND
}

/// `[agents.NAME]`: where the agent works.
///
/// ```toml
/// [agents.browser]
/// desktop = "own"       # every gui, ax and shell call on a desktop of its own
/// desktop_visible = false
/// desktops_on_disconnect = "close"   # its desktops end when its last connection does
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentDesk {
    /// `own`: every gui, ax and shell call of the agent goes to a desktop of its own, opened
    /// at its first such call; it cannot name the person's. `shared` (the default): the
    /// person's, unless a call names a desktop.
    pub desktop: DeskChoice,
    /// Whether that desktop is shown as a window on the person's display (where there is one).
    pub desktop_visible: bool,
    /// Its width and height.
    pub desktop_size: [u32; 2],
    /// What happens to the agent's desktops when its last connection to the daemon ends:
    /// `keep` (the default: an agent that connects per call, as `computer call` does, finds
    /// them again) or `close` (they end, with everything that ran on them).
    pub desktops_on_disconnect: OnDisconnect,
}

/// `[agents.NAME] desktops_on_disconnect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    #[default]
    Keep,
    Close,
}

impl Default for AgentDesk {
    fn default() -> Self {
        AgentDesk {
            desktop: DeskChoice::Shared,
            desktop_visible: true,
            desktop_size: DEFAULT_SIZE,
            desktops_on_disconnect: OnDisconnect::Keep,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeskChoice {
    Shared,
    Own,
}

/// An `[agents.NAME]` section the daemon refuses: its desktop's size is out of range.
#[derive(Debug, thiserror::Error)]
#[error(
    "[agents.{agent}] desktop_size = [{}, {}]: each side must be {} to {} pixels",
    size[0],
    size[1],
    SIZE_RANGE.start(),
    SIZE_RANGE.end()
)]
pub struct BadAgentDesk {
    agent: String,
    size: [u32; 2],
}

/// One open desktop: whose it is, and the surfaces bound to it.
struct Open {
    agent: String,
    desktop: AgentDesktop,
    surfaces: Vec<Arc<dyn Surface>>,
    evidence: Option<Arc<dyn EvidenceCapture>>,
}

impl Open {
    fn fact(&self, id: &str) -> DesktopFact {
        let (width, height) = self.desktop.size();
        DesktopFact {
            id: id.to_string(),
            agent: self.agent.clone(),
            kind: self.desktop.kind().as_str().to_string(),
            size: [width, height],
            resident_bytes: self.desktop.resident_bytes(),
        }
    }
}

/// The open desktops of every agent, by id (`d1`, `d2`, ...; never reused while the daemon runs).
pub struct Desktops {
    open: Mutex<BTreeMap<String, Open>>,
    next: AtomicU64,
    /// `[agents.NAME]`, of the moment (a SIGHUP swaps it).
    agents: RwLock<BTreeMap<String, AgentDesk>>,
    /// The desktop each agent confined to its own works on, once opened.
    own: Mutex<BTreeMap<String, String>>,
    /// Held while a confined agent's desktop is opened, so that its first calls open one.
    opening: tokio::sync::Mutex<()>,
    /// The person's shell, from which each desktop's shell is made (same limits and sessions).
    shell: Option<Arc<ShellSurface>>,
    /// How many connections each agent has open now (for `desktops_on_disconnect`).
    connections: Mutex<BTreeMap<String, usize>>,
}

/// One connection of an agent, counted while it lasts (see [`Desktops::presence`]).
pub struct Presence {
    desktops: Arc<Desktops>,
    agent: String,
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.desktops.left(&self.agent);
    }
}

impl Desktops {
    pub fn new(shell: Option<Arc<ShellSurface>>) -> Desktops {
        Desktops {
            open: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            agents: RwLock::default(),
            own: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            shell,
            connections: Mutex::default(),
        }
    }

    /// Takes `[agents.NAME]`; a size out of range is refused naming the agent.
    pub fn set_agents(&self, agents: BTreeMap<String, AgentDesk>) -> Result<(), BadAgentDesk> {
        for (name, desk) in &agents {
            let [width, height] = desk.desktop_size;
            if !SIZE_RANGE.contains(&width) || !SIZE_RANGE.contains(&height) {
                return Err(BadAgentDesk {
                    agent: name.clone(),
                    size: desk.desktop_size,
                });
            }
        }
        *self.agents.write().unwrap_or_else(|p| p.into_inner()) = agents;
        Ok(())
    }

    /// The desktop `agent` is confined to by `[agents.NAME] desktop = "own"`, if it is.
    fn confinement(&self, agent: &str) -> Option<AgentDesk> {
        self.agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent)
            .filter(|desk| desk.desktop == DeskChoice::Own)
            .cloned()
    }

    /// Places a call of an agent confined to its own desktop there: a gui, ax or shell call that
    /// names no desktop is made to name the agent's own (opened at its first such call), and
    /// variables that would name another display or bus are refused. Other agents' calls pass
    /// unchanged.
    pub async fn confine(
        self: &Arc<Self>,
        agent: &str,
        call: &mut computer_ipc::ComputerCall,
    ) -> Result<(), ToolError> {
        let Some(desk) = self.confinement(agent) else {
            return Ok(());
        };
        if !ON_A_DESKTOP.contains(&call.surface) || is_desktop_call(call.surface, &call.command) {
            return Ok(());
        }
        if let Some(name) = call
            .complications
            .env
            .keys()
            .find(|name| DESKTOP_ENV.contains(&name.as_str()))
        {
            return Err(ToolError::invalid(format!(
                "agent `{agent}` works on a desktop of its own ([agents.{agent}] desktop = \"own\"): its runs get that desktop's {name}, and a call may not name another"
            ))
            .at(format!("complications.env.{name}")));
        }
        if call.complications.desktop.is_some() {
            return Ok(());
        }
        let _opening = self.opening.lock().await;
        let open_now = self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent)
            .filter(|id| self.lock().contains_key(*id))
            .cloned();
        let id = match open_now {
            Some(id) => id,
            None => {
                let spec = DesktopSpec {
                    size: (desk.desktop_size[0], desk.desktop_size[1]),
                    visible: desk.desktop_visible,
                };
                let (me, agent_name) = (self.clone(), agent.to_string());
                let opened = tokio::task::spawn_blocking(move || me.open_for(&agent_name, &spec))
                    .await
                    .map_err(|err| SurfaceError::Failed {
                        message: err.to_string(),
                    })
                    .and_then(|opened| opened);
                let id = opened.map_err(|err| {
                    ToolError::new(
                        ErrorCode::Unavailable,
                        format!("agent `{agent}`'s own desktop could not be opened: {err}"),
                    )
                    .at("complications.desktop")
                })?["desktop"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.own
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(agent.to_string(), id.clone());
                id
            }
        };
        call.complications.desktop = Some(id);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Open>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The surface `name` on `agent`'s desktop `id`. Another agent's desktop is refused as one
    /// that does not exist, so that no agent learns of another's.
    pub fn surface(
        &self,
        agent: &str,
        id: &str,
        name: SurfaceName,
    ) -> Result<Arc<dyn Surface>, ToolError> {
        if !ON_A_DESKTOP.contains(&name) {
            return Err(ToolError::invalid(format!(
                "the {name} surface does not act on a desktop: `complications.desktop` applies to gui, ax and shell"
            ))
            .at("complications.desktop"));
        }
        let open = self.lock();
        let desktop = self.own(&open, agent, id)?;
        desktop
            .surfaces
            .iter()
            .find(|surface| surface.name() == name)
            .cloned()
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Unavailable,
                    format!("desktop `{id}` has no {name} surface"),
                )
                .at("complications.desktop")
            })
    }

    /// The screenshots of a desktop, for a call's evidence.
    pub fn evidence(&self, id: &str) -> Option<Arc<dyn EvidenceCapture>> {
        self.lock().get(id).and_then(|open| open.evidence.clone())
    }

    fn own<'a>(
        &self,
        open: &'a BTreeMap<String, Open>,
        agent: &str,
        id: &str,
    ) -> Result<&'a Open, ToolError> {
        match open.get(id) {
            Some(desktop) if desktop.agent == agent => Ok(desktop),
            _ => Err(
                ToolError::invalid(format!("no desktop `{id}` is open for agent `{agent}`"))
                    .at("complications.desktop")
                    .valid(self.ids_of(open, agent)),
            ),
        }
    }

    fn ids_of(&self, open: &BTreeMap<String, Open>, agent: &str) -> Vec<String> {
        open.iter()
            .filter(|(_, desktop)| desktop.agent == agent)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every open desktop, for `doctor` and approvers.
    pub fn facts(&self) -> Vec<DesktopFact> {
        self.lock().iter().map(|(id, open)| open.fact(id)).collect()
    }

    /// Opens a desktop for `agent` (blocking: it starts and waits for its servers).
    fn open_for(&self, agent: &str, spec: &DesktopSpec) -> Result<Value, SurfaceError> {
        {
            let open = self.lock();
            let mine = open.values().filter(|d| d.agent == agent).count();
            if mine >= MAX_PER_AGENT || open.len() >= MAX_OPEN {
                return Err(SurfaceError::Tool(
                    ToolError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "agent `{agent}` has {mine} desktops open (at most {MAX_PER_AGENT} each, {MAX_OPEN} in all, {} open now): close one first",
                            open.len()
                        ),
                    )
                    .at("args.op")
                    .valid(self.ids_of(&open, agent)),
                ));
            }
        }
        let desktop = AgentDesktop::open(spec).map_err(|err| SurfaceError::Failed {
            message: format!("could not open a desktop: {err}"),
        })?;
        let mut surfaces = desktop.surfaces();
        if let Some(shell) = &self.shell {
            surfaces.push(Arc::new(
                shell.on_desktop(desktop.env(), &desktop.sockets()),
            ));
        }
        let id = format!("d{}", self.next.fetch_add(1, Ordering::Relaxed));
        let open = Open {
            agent: agent.to_string(),
            evidence: desktop.evidence(),
            surfaces,
            desktop,
        };
        let fact = open.fact(&id);
        tracing::info!(desktop = %id, agent, kind = %fact.kind, "desktop opened");
        self.lock().insert(id.clone(), open);
        Ok(json!({
            "desktop": id,
            "kind": fact.kind,
            "size": fact.size,
        }))
    }

    /// Closes `agent`'s desktop `id`, ending everything that ran in it (blocking).
    fn close_for(&self, agent: &str, id: &str) -> Result<Value, SurfaceError> {
        let open = {
            let mut open = self.lock();
            self.own(&open, agent, id)
                .map_err(|err| SurfaceError::Tool(err.at("args.id")))?;
            open.remove(id)
        };
        if let Some(open) = open {
            open.desktop.close();
            tracing::info!(desktop = %id, agent, "desktop closed");
        }
        Ok(json!({ "closed": id }))
    }

    /// Counts a connection of `agent` until the returned presence is dropped, when the
    /// connection ends.
    pub fn presence(self: &Arc<Self>, agent: &str) -> Presence {
        *(self.connections.lock().unwrap_or_else(|p| p.into_inner()))
            .entry(agent.to_string())
            .or_default() += 1;
        Presence {
            desktops: self.clone(),
            agent: agent.to_string(),
        }
    }

    /// A connection of `agent` ended: when it was the last and the agent's
    /// `desktops_on_disconnect` is `close`, its desktops are closed (on a thread of their own:
    /// a close waits for processes to end).
    fn left(self: &Arc<Self>, agent: &str) {
        let last = {
            let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
            let count = connections.entry(agent.to_string()).or_default();
            *count = count.saturating_sub(1);
            let last = *count == 0;
            if last {
                connections.remove(agent);
            }
            last
        };
        let closes = (self.agents.read().unwrap_or_else(|p| p.into_inner()))
            .get(agent)
            .is_some_and(|desk| desk.desktops_on_disconnect == OnDisconnect::Close);
        if !last || !closes || self.ids_of(&self.lock(), agent).is_empty() {
            return;
        }
        let (desktops, agent) = (self.clone(), agent.to_string());
        std::thread::spawn(move || {
            tracing::info!(
                agent,
                "the agent's last connection ended: its desktops close ([agents.{agent}] desktops_on_disconnect = \"close\")"
            );
            desktops.close_all_of(&agent);
        });
    }

    /// Closes every desktop of `agent` (its last connection ended under a policy that says so).
    pub fn close_all_of(&self, agent: &str) {
        let ids: Vec<String> = self.ids_of(&self.lock(), agent);
        for id in ids {
            let _ = self.close_for(agent, &id);
        }
    }

    /// Closes every desktop (the daemon stops).
    pub fn close_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for (id, open) in all {
            open.desktop.close();
            tracing::info!(desktop = %id, "desktop closed as the daemon stops");
        }
    }

    fn list_for(&self, agent: &str) -> Value {
        let desktops: Vec<Value> = self
            .lock()
            .iter()
            .filter(|(_, open)| open.agent == agent)
            .map(|(id, open)| {
                let fact = open.fact(id);
                json!({"desktop": fact.id, "kind": fact.kind, "size": fact.size})
            })
            .collect();
        json!({ "desktops": desktops })
    }
}

impl Drop for Desktops {
    fn drop(&mut self) {
        self.close_all();
    }
}

/// A `gui desktop` call, checked, for `agent`.
pub fn prepare(
    desktops: &Arc<Desktops>,
    agent: &str,
    args: &Map<String, Value>,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    let args: DesktopArgs = decode_args(args)?;
    let misplaced = |name: &str, op: &str| {
        ToolError::invalid(format!("`{name}` is not an argument of op `{op}`"))
            .at(format!("args.{name}"))
    };
    let op = match args.op {
        DesktopOp::Open => {
            if args.id.is_some() {
                return Err(misplaced("id", "open"));
            }
            let [width, height] = args.size.unwrap_or(DEFAULT_SIZE);
            if !SIZE_RANGE.contains(&width) || !SIZE_RANGE.contains(&height) {
                return Err(ToolError::invalid(format!(
                    "a desktop of {width}x{height} was asked for: each side must be {} to {} pixels",
                    SIZE_RANGE.start(),
                    SIZE_RANGE.end()
                ))
                .at("args.size"));
            }
            Op::Open(DesktopSpec {
                size: (width, height),
                visible: args.visible.unwrap_or(true),
            })
        }
        DesktopOp::Close => {
            if args.size.is_some() {
                return Err(misplaced("size", "close"));
            }
            if args.visible.is_some() {
                return Err(misplaced("visible", "close"));
            }
            match args.id {
                Some(id) => Op::Close(id),
                None => {
                    return Err(ToolError::invalid("op `close` needs the desktop's `id`")
                        .at("args.id")
                        .valid(desktops.ids_of(&desktops.lock(), agent)));
                }
            }
        }
        DesktopOp::List => {
            for (name, given) in [
                ("id", args.id.is_some()),
                ("size", args.size.is_some()),
                ("visible", args.visible.is_some()),
            ] {
                if given {
                    return Err(misplaced(name, "list"));
                }
            }
            Op::List
        }
    };
    Ok(Box::new(DesktopAction {
        op,
        agent: agent.to_string(),
        desktops: desktops.clone(),
    }))
}

enum Op {
    Open(DesktopSpec),
    Close(String),
    List,
}

struct DesktopAction {
    op: Op,
    agent: String,
    desktops: Arc<Desktops>,
}

#[async_trait::async_trait]
impl PreparedAction for DesktopAction {
    fn risk(&self) -> Risk {
        match self.op {
            Op::List => Risk::Observe,
            Op::Open(_) | Op::Close(_) => Risk::Act,
        }
    }

    fn describe(&self) -> String {
        match &self.op {
            Op::Open(spec) => format!(
                "open a desktop of {}x{} of agent `{}`'s own ({})",
                spec.size.0,
                spec.size.1,
                self.agent,
                if spec.visible {
                    "shown as a window where there is a display"
                } else {
                    "virtual, not shown"
                }
            ),
            Op::Close(id) => format!(
                "close agent `{}`'s desktop `{id}`, ending everything that runs in it",
                self.agent
            ),
            Op::List => format!("list agent `{}`'s desktops", self.agent),
        }
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts::default()
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let DesktopAction {
            op,
            agent,
            desktops,
        } = *self;
        let fields = match op {
            Op::List => desktops.list_for(&agent),
            Op::Open(spec) => tokio::task::spawn_blocking(move || desktops.open_for(&agent, &spec))
                .await
                .map_err(|err| SurfaceError::Failed {
                    message: format!("opening the desktop failed: {err}"),
                })??,
            Op::Close(id) => tokio::task::spawn_blocking(move || desktops.close_for(&agent, &id))
                .await
                .map_err(|err| SurfaceError::Failed {
                    message: format!("closing the desktop failed: {err}"),
                })??,
        };
        let fields = match fields {
            Value::Object(fields) => fields,
            other => Map::from_iter([("desktops".to_string(), other)]),
        };
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }
}
