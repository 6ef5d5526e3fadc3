//! The ax surface on macOS (this file is `crate::ax` there): applications from the window
//! server's list, their AXUIElement trees as the same compact outlines and refs as on Linux,
//! selectors, and actions (AXPress, AXConfirm, AXShowMenu, setting AXValue...), each call
//! bounded by a messaging timeout and the call's deadline.
//!
//! # Layout
//! - this file: the `Surface`, walks and the commands.
//! - `element`: the owned AXUIElement and the Accessibility permission check.
//! - `macos_roles`: AXRole → accesskit role, AX attributes → state names, action choice.
//! - `call`: the commands, their validated form and paging, shared with Linux.
//! - `selector`, `roles`: the selector language and state vocabulary shared with Linux.

#[path = "call.rs"]
mod call;
#[path = "macos_element.rs"]
pub(crate) mod element;
#[path = "macos_roles.rs"]
mod macos_roles;
// Shared with the AT-SPI backend; its AT-SPI role table goes unused here.
#[allow(dead_code)]
#[path = "roles.rs"]
mod roles;
#[allow(dead_code)]
#[path = "selector.rs"]
mod selector;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use accesskit::Role;
use async_trait::async_trait;
use atspi::{State, StateSet};
use computer_ipc::{Complications, SurfaceName, ToolError};
use core_foundation::base::TCFType;
use core_foundation::boolean::CFBoolean;
use core_foundation::number::CFNumber;
use core_foundation::string::CFString;
use serde_json::{Map, Value, json};

use crate::{
    Availability, CallContext, CapturedText, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError,
};
use call::{
    ActName, AppArg, COMMANDS, Dialect, Format, Include, Job, Page, Shown, Target, Until, quote,
};
use element::{AxError, Element};
use roles::{all_states, fold, role_name};
use selector::{NodeFacts, Selector};

/// The AX side of the shared commands: its listings name no skipped apps and its actions no
/// `via`, and `roles` may also name an AXRole.
const DIALECT: Dialect = Dialect {
    tree_fields: &[
        "tree",
        "revision",
        "nodes",
        "cursor",
        "truncated",
        "unchanged",
    ],
    find_fields: &[
        "matches",
        "revision",
        "nodes",
        "total",
        "cursor",
        "truncated",
        "unchanged",
    ],
    act_fields: &["ref", "action", "done", "node", "value", "states"],
    knows_role: |folded| {
        folded.starts_with("ax")
            || roles::known_role_names()
                .iter()
                .any(|known| known == folded)
    },
    other_role_names: " or an AXRole",
    until_examples: &[
        "appears",
        "disappears",
        "focused",
        "checked",
        "!checked",
        "enabled",
    ],
};

/// The longest one accessibility call may wait for an app (AXUIElementSetMessagingTimeout).
const CALL_LIMIT: Duration = Duration::from_millis(1500);
/// No walk reads more elements than this, whatever was asked.
const MAX_WALK: usize = 20_000;
const MAX_REFS: usize = 1_000_000;

/// The ax surface for this platform.
pub fn surface() -> Option<Arc<dyn Surface>> {
    tracing::info!(
        backend = "macOS accessibility (AXUIElement, accesskit roles)",
        "ax backend chosen"
    );
    Some(Arc::new(AxSurface {
        refs: Arc::new(Refs::default()),
    }))
}

/// Short numeric refs for elements, stable while the daemon runs and the element exists.
#[derive(Default)]
struct Refs {
    inner: Mutex<RefsInner>,
}

#[derive(Default)]
struct RefsInner {
    entries: Vec<Element>,
    by_hash: HashMap<u64, Vec<u32>>,
}

impl Refs {
    fn get(&self, element: &Element) -> u32 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let hash = element.hash_code();
        if let Some(known) = inner.by_hash.get(&hash) {
            for r in known {
                if inner.entries[*r as usize - 1] == *element {
                    return *r;
                }
            }
        }
        if inner.entries.len() >= MAX_REFS {
            inner.entries.clear();
            inner.by_hash.clear();
        }
        inner.entries.push(element.clone());
        let r = inner.entries.len() as u32;
        inner.by_hash.entry(hash).or_default().push(r);
        r
    }

    fn resolve(&self, r: u32) -> Option<Element> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.entries.get((r as usize).checked_sub(1)?).cloned()
    }
}

pub struct AxSurface {
    refs: Arc<Refs>,
}

fn not_trusted() -> Availability {
    Availability::Unavailable {
        reason: "this process lacks the Accessibility permission".into(),
        fix: element::grant_message("Accessibility"),
    }
}

#[async_trait]
impl Surface for AxSurface {
    fn name(&self) -> SurfaceName {
        SurfaceName::Ax
    }

    fn backend(&self) -> &'static str {
        "AXUIElement (macOS accessibility)"
    }

    fn needs_desktop(&self) -> bool {
        true
    }

    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
    }

    fn probe(&self) -> Availability {
        if element::trusted() {
            Availability::Ready
        } else {
            not_trusted()
        }
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        DIALECT.result_fields(command)
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let (job, timeout) = call::prepare(&DIALECT, command, args, complications)?;
        Ok(Box::new(AxAction {
            refs: self.refs.clone(),
            job,
            timeout,
            args: crate::receipt_value(&Value::Object(args.clone())),
        }))
    }
}

pub struct AxAction {
    refs: Arc<Refs>,
    job: Job,
    timeout: Duration,
    args: Value,
}

#[async_trait]
impl PreparedAction for AxAction {
    fn risk(&self) -> Risk {
        self.job.risk()
    }

    fn describe(&self) -> String {
        self.job.describe()
    }

    // The target is what the args spell: resolving it here would need the accessibility API,
    // which blocks.
    fn facts(&self) -> crate::ActionFacts {
        crate::ActionFacts {
            target: self.job.spelled_target(),
            args: Some(self.args.clone()),
            ..crate::ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        if !element::trusted() {
            return Err(SurfaceError::Failed {
                message: element::grant_message("Accessibility"),
            });
        }
        let deadline = Instant::now() + self.timeout;
        let AxAction { refs, job, .. } = *self;
        let protected = ctx.protected.clone();
        // The accessibility API blocks: run the whole command on a blocking thread.
        tokio::task::spawn_blocking(move || {
            let ax = Ax { refs, deadline };
            Element::system_wide().set_timeout(CALL_LIMIT.as_secs_f32());
            if let Job::Act { target, app, .. } = &job
                && !protected.is_empty()
            {
                // No agent may press, type into or focus an approver's widgets.
                let (_, pid) = ax
                    .locate(target, app)
                    .map_err(|message| SurfaceError::Failed { message })?;
                if u32::try_from(pid).map_or(true, |pid| protected.contains(pid)) {
                    return Err(SurfaceError::Refused {
                        message: format!(
                            "refused: the target's application (pid {pid}) is an approver (where \
                             a person answers approval requests); agents may not act on it"
                        ),
                    });
                }
            }
            ax.run(job)
                .map_err(|message| SurfaceError::Failed { message })
        })
        .await
        .map_err(|err| SurfaceError::Failed {
            message: format!("the ax command panicked: {err}"),
        })?
    }
}

/// One element as read for an outline.
struct Node {
    element: Element,
    pid: i32,
    depth: u32,
    parent: Option<usize>,
    ax_role: String,
    role: Role,
    name: String,
    description: String,
    id: String,
    states: StateSet,
    value: Option<String>,
    bounds: Option<(i32, i32, i32, i32)>,
    actions: Vec<String>,
    child_count: usize,
}

impl NodeFacts for Node {
    fn roles(&self) -> (String, String) {
        (fold(&role_name(self.role)), fold(&self.ax_role))
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn states(&self) -> StateSet {
        self.states
    }
    fn attr(&self, key: &str) -> Option<String> {
        match key {
            "description" => Some(self.description.clone()),
            "id" => Some(self.id.clone()),
            // Any other key is an AX attribute, read live: [AXSubrole="AXCloseButton"].
            other => self.element.value_text(other).ok().flatten(),
        }
    }
}

/// An app with windows on screen.
struct App {
    pid: i32,
    name: String,
    element: Element,
    frontmost: bool,
}

/// One command's context: the ref table and the call's deadline.
struct Ax {
    refs: Arc<Refs>,
    deadline: Instant,
}

type Said = String;

impl Node {
    /// What an outline line or JSON node shows of this node.
    fn shown(&self) -> Shown<'_> {
        Shown {
            depth: self.depth,
            role: self.role,
            name: &self.name,
            states: self.states,
            value: self.value.as_deref(),
            bounds: self.bounds,
            actions: &self.actions,
            child_count: i64::try_from(self.child_count).unwrap_or(i64::MAX),
        }
    }
}

fn line(node: &Node, r: u32, include: Include, max_depth: u32) -> String {
    call::line(&node.shown(), r, include, max_depth)
}

fn json_node(node: &Node, r: u32, include: Include) -> Value {
    call::json_node(&node.shown(), r, include)
}

/// The walked nodes as the shared pager renders them, each with its ref.
struct Listed<'a> {
    refs: &'a Refs,
    nodes: &'a [Node],
}

impl call::Listing for Listed<'_> {
    fn depth(&self, i: usize) -> u32 {
        self.nodes[i].depth
    }

    fn line(&self, i: usize, include: Include, max_depth: u32) -> String {
        let node = &self.nodes[i];
        line(node, self.refs.get(&node.element), include, max_depth)
    }

    fn json(&self, i: usize, include: Include) -> Value {
        let node = &self.nodes[i];
        json_node(node, self.refs.get(&node.element), include)
    }

    fn where_is(&self, i: usize) -> String {
        Ax::where_is(self.nodes, i)
    }
}

impl Ax {
    fn run(&self, job: Job) -> Result<Outcome, Said> {
        match job {
            Job::Apps { format } => self.apps_command(format),
            Job::Tree {
                app,
                window,
                page,
                roles,
                depth,
            } => self.tree_command(app, window, page, roles, depth),
            Job::Find {
                selector,
                app,
                page,
            } => self.find_command(&selector, app, page),
            Job::Read { target, app } => self.read_command(&target, &app),
            Job::Focused { app } => self.focused_command(&app),
            Job::Act {
                target,
                app,
                action,
                value,
            } => self.act_command(&target, &app, action, value),
            Job::Wait {
                selector,
                app,
                until,
                timeout,
            } => self.wait_command(&selector, &app, until, timeout),
        }
    }

    /// Words for a failed call to an element of `pid`.
    fn failed(&self, err: AxError, pid: i32) -> Said {
        let app = app_name(pid);
        match err {
            AxError::NotTrusted => element::grant_message("Accessibility"),
            AxError::Timeout => format!(
                "{app} (pid {pid}) did not answer within {} ms: it is busy, frozen or stopped; other apps still work, retry once it responds",
                CALL_LIMIT.as_millis()
            ),
            AxError::Gone => "the element is gone (its window closed or its app quit); look it up again with `ax find` or `ax tree`".into(),
            AxError::Unsupported => "the element does not support that".into(),
            AxError::Other(why) => format!("the accessibility call to {app} (pid {pid}) failed: {why}"),
        }
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Apps with windows on screen, front to back.
    fn apps(&self) -> Result<Vec<App>, Said> {
        let windows = crate::gui::macos::window_list().map_err(|e| e.0)?;
        let mut seen = Vec::new();
        let mut apps = Vec::new();
        for window in windows {
            let pid = window.pid as i32;
            let owner = window.app;
            if seen.contains(&pid) {
                continue;
            }
            seen.push(pid);
            let element = Element::application(pid);
            element.set_timeout(CALL_LIMIT.as_secs_f32());
            let name = element
                .string("AXTitle")
                .ok()
                .flatten()
                .filter(|n| !n.is_empty())
                .unwrap_or(owner);
            apps.push(App {
                pid,
                name,
                element,
                frontmost: apps.is_empty(),
            });
        }
        Ok(apps)
    }

    fn pick_apps(&self, which: &Option<AppArg>) -> Result<Vec<App>, Said> {
        let apps = self.apps()?;
        let Some(which) = which else {
            return Ok(apps);
        };
        let names: Vec<String> = apps
            .iter()
            .map(|a| format!("{} (pid {})", a.name, a.pid))
            .collect();
        let picked: Vec<App> = match which {
            AppArg::Pid(pid) => {
                let pid = *pid as i32;
                let listed: Vec<App> = apps.into_iter().filter(|a| a.pid == pid).collect();
                if listed.is_empty() {
                    // An app without windows on screen (a menu bar app) is still reachable.
                    vec![App {
                        pid,
                        name: app_name(pid),
                        element: Element::application(pid),
                        frontmost: false,
                    }]
                } else {
                    listed
                }
            }
            AppArg::Name(name) => {
                let want = name.to_lowercase();
                let (exact, rest): (Vec<App>, Vec<App>) = apps
                    .into_iter()
                    .partition(|a| a.name.to_lowercase() == want);
                if exact.is_empty() {
                    rest.into_iter()
                        .filter(|a| a.name.to_lowercase().contains(&want))
                        .collect()
                } else {
                    exact
                }
            }
        };
        if picked.is_empty() {
            return Err(format!(
                "no app with windows on screen matches {which}; apps: {}",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ));
        }
        Ok(picked)
    }

    /// Reads one element; None when it vanished while being read.
    fn read_node(
        &self,
        element: Element,
        pid: i32,
        depth: u32,
        parent: Option<usize>,
        include: Include,
    ) -> Result<Option<(Node, Vec<Element>)>, Said> {
        let ax_role = match element.string("AXRole") {
            Ok(role) => role.unwrap_or_default(),
            Err(AxError::Gone) => return Ok(None),
            Err(err) => return Err(self.failed(err, pid)),
        };
        let opt = |r: Result<Option<String>, AxError>| r.ok().flatten();
        let subrole = opt(element.string("AXSubrole"));
        let role = macos_roles::map_role(&ax_role, subrole.as_deref());
        let title = opt(element.string("AXTitle")).filter(|t| !t.is_empty());
        let description = opt(element.string("AXDescription")).unwrap_or_default();
        let raw_value = opt(element.value_text("AXValue"));
        // Titles name most controls; an unlabelled button has its description, static text
        // its value.
        let name = title
            .or_else(|| (!description.is_empty()).then(|| description.clone()))
            .or_else(|| {
                (ax_role == "AXStaticText")
                    .then(|| raw_value.clone())
                    .flatten()
            })
            .unwrap_or_default();
        let checkable = macos_roles::is_checkable(&ax_role);
        let text_input = macos_roles::is_text_input(&ax_role);
        let check = if checkable {
            raw_value.as_deref().and_then(|v| v.parse::<i64>().ok())
        } else {
            None
        };
        let expanded = element
            .boolean("AXExpanded")
            .ok()
            .flatten()
            .or_else(|| element.boolean("AXDisclosing").ok().flatten());
        let is_window = matches!(role, Role::Window | Role::Dialog);
        let facts = macos_roles::Facts {
            enabled: element.boolean("AXEnabled").ok().flatten(),
            focused: element.boolean("AXFocused").ok().flatten().unwrap_or(false),
            focusable: element.settable("AXFocused"),
            check,
            selected: element
                .boolean("AXSelected")
                .ok()
                .flatten()
                .unwrap_or(false),
            expanded,
            active: is_window && element.boolean("AXMain").ok().flatten().unwrap_or(false),
            modal: is_window && element.boolean("AXModal").ok().flatten().unwrap_or(false),
            editable: text_input,
            multiline: ax_role == "AXTextArea",
        };
        let children = element.elements("AXChildren").unwrap_or_default();
        let value = if (include.value || text_input) && !checkable && ax_role != "AXStaticText" {
            raw_value
        } else {
            None
        };
        let node = Node {
            pid,
            depth,
            parent,
            role,
            name,
            id: opt(element.string("AXIdentifier")).unwrap_or_default(),
            description: opt(element.string("AXHelp")).unwrap_or(description),
            states: macos_roles::states(facts),
            value,
            bounds: if include.bounds {
                element.frame().ok().flatten()
            } else {
                None
            },
            actions: if include.actions {
                element
                    .action_names()
                    .unwrap_or_default()
                    .iter()
                    .map(|a| macos_roles::action_label(a))
                    .collect()
            } else {
                Vec::new()
            },
            child_count: children.len(),
            ax_role,
            element,
        };
        Ok(Some((node, children)))
    }

    /// Reads `roots` and their descendants down to `max_depth`, in preorder, bounded by
    /// `MAX_WALK` and the deadline; `capped` when it stopped early.
    fn walk(
        &self,
        roots: Vec<(Element, i32)>,
        max_depth: u32,
        include: Include,
    ) -> Result<(Vec<Node>, bool), Said> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut stack: Vec<(Element, i32, u32, Option<usize>)> = roots
            .into_iter()
            .rev()
            .map(|(e, pid)| (e, pid, 0, None))
            .collect();
        while let Some((element, pid, depth, parent)) = stack.pop() {
            if nodes.len() >= MAX_WALK || self.past_deadline() {
                return Ok((nodes, true));
            }
            let Some((node, children)) = self.read_node(element, pid, depth, parent, include)?
            else {
                continue;
            };
            let index = nodes.len();
            nodes.push(node);
            if depth < max_depth {
                for child in children.into_iter().rev() {
                    stack.push((child, pid, depth + 1, Some(index)));
                }
            }
        }
        Ok((nodes, false))
    }

    fn ancestors(nodes: &[Node], i: usize) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut at = nodes[i].parent;
        while let Some(p) = at {
            chain.push(p);
            at = nodes[p].parent;
        }
        chain.reverse();
        chain
    }

    fn evaluate(nodes: &[Node], selector: &Selector) -> Vec<usize> {
        let mut marked: Option<Vec<bool>> = None;
        let mut hits = Vec::new();
        for step in &selector.steps {
            hits = (0..nodes.len())
                .filter(|&i| step.matches(&nodes[i]))
                .filter(|&i| match &marked {
                    None => true,
                    Some(set) => Self::ancestors(nodes, i).iter().any(|a| set[*a]),
                })
                .collect();
            if let Some(n) = step.ordinal {
                hits = hits.get(n - 1).copied().into_iter().collect();
            }
            let mut set = vec![false; nodes.len()];
            for &i in &hits {
                set[i] = true;
            }
            marked = Some(set);
        }
        hits
    }

    fn where_is(nodes: &[Node], i: usize) -> String {
        Self::ancestors(nodes, i)
            .iter()
            .rev()
            .find(|&&a| matches!(nodes[a].role, Role::Window | Role::Dialog))
            .filter(|&&a| !nodes[a].name.is_empty())
            .map(|&a| format!(" in {} {}", role_name(nodes[a].role), quote(&nodes[a].name)))
            .unwrap_or_default()
    }

    fn app_roots(&self, which: &Option<AppArg>) -> Result<Vec<(Element, i32)>, Said> {
        Ok(self
            .pick_apps(which)?
            .into_iter()
            .map(|a| (a.element, a.pid))
            .collect())
    }

    fn resolve_one(
        &self,
        selector: &Selector,
        app: &Option<AppArg>,
    ) -> Result<(Element, i32), Said> {
        let (nodes, capped) = self.walk(self.app_roots(app)?, u32::MAX - 1, Include::default())?;
        let hits = Self::evaluate(&nodes, selector);
        match hits.as_slice() {
            [one] => Ok((nodes[*one].element.clone(), nodes[*one].pid)),
            [] => {
                let mut text = format!("no element matches `{}`", selector.source);
                if capped {
                    text.push_str(" (the search stopped early: narrow it with `app`)");
                }
                let names: Vec<String> = nodes
                    .iter()
                    .filter(|n| n.depth >= 1 && !n.name.is_empty())
                    .take(12)
                    .map(|n| line(n, self.refs.get(&n.element), Include::default(), u32::MAX))
                    .collect();
                if !names.is_empty() {
                    text.push_str("\nthere is:\n");
                    text.push_str(&names.join("\n"));
                }
                Err(text)
            }
            many => {
                let mut text = format!(
                    "selector `{}` matches {} elements; use a ref, an ordinal (`{}:2`) or an ancestor:",
                    selector.source,
                    many.len(),
                    selector.source
                );
                for &i in many.iter().take(10) {
                    text.push('\n');
                    text.push_str(&line(
                        &nodes[i],
                        self.refs.get(&nodes[i].element),
                        Include::default(),
                        u32::MAX,
                    ));
                    text.push_str(&Self::where_is(&nodes, i));
                }
                Err(text)
            }
        }
    }

    fn locate(&self, target: &Target, app: &Option<AppArg>) -> Result<(Element, i32), Said> {
        match target {
            Target::Ref(r) => {
                let element = self.refs.resolve(*r).ok_or_else(|| {
                    format!("ref [{r}] is unknown to this daemon; refs come from `ax tree`/`ax find` output")
                })?;
                let pid = element.pid().unwrap_or(0);
                Ok((element, pid))
            }
            Target::Selector(selector) => self.resolve_one(selector, app),
        }
    }

    fn read_one(&self, element: Element, pid: i32) -> Result<Node, Said> {
        let all = Include {
            states: true,
            bounds: true,
            actions: true,
            value: true,
            ..Include::default()
        };
        self.read_node(element, pid, 0, None, all)?
            .map(|(node, _)| node)
            .ok_or_else(|| {
                "the element is gone: it no longer exists; find it again with `ax find`".to_string()
            })
    }

    fn apps_command(&self, format: Format) -> Result<Outcome, Said> {
        let apps = self.apps()?;
        let mut lines = Vec::new();
        let mut list = Vec::new();
        for app in &apps {
            let windows: Vec<(u32, String, bool)> = app
                .element
                .elements("AXWindows")
                .unwrap_or_default()
                .into_iter()
                .map(|w| {
                    let title = w.string("AXTitle").ok().flatten().unwrap_or_default();
                    let main = w.boolean("AXMain").ok().flatten().unwrap_or(false);
                    (self.refs.get(&w), title, app.frontmost && main)
                })
                .collect();
            let shown: Vec<String> = windows
                .iter()
                .map(|(r, t, active)| {
                    format!(
                        "[{r}] {}{}",
                        quote(t),
                        if *active { " (active)" } else { "" }
                    )
                })
                .collect();
            lines.push(format!(
                "{} (pid {}){}{}",
                app.name,
                app.pid,
                if shown.is_empty() { "" } else { ": " },
                shown.join(", ")
            ));
            list.push(json!({"name": app.name, "pid": app.pid, "responsive": true,
                "windows": windows.iter().map(|(r, t, a)| json!({"ref": r, "name": t, "active": a})).collect::<Vec<_>>()}));
        }
        let text = match format {
            Format::Outline => lines.join("\n") + "\n",
            Format::Json => serde_json::to_string(&list).unwrap_or_default(),
        };
        let mut fields = Map::new();
        fields.insert("count".into(), json!(apps.len()));
        Ok(Outcome {
            success: true,
            fields,
            texts: vec![CapturedText::from_bytes("apps", text.into_bytes())],
            ..Outcome::default()
        })
    }

    /// The window a bare `tree` shows: the frontmost app's focused (else main) window.
    fn active_window(&self, app: &Option<AppArg>) -> Result<(Element, i32), Said> {
        let apps = self.pick_apps(app)?;
        for app in &apps {
            let window = app
                .element
                .element("AXFocusedWindow")
                .ok()
                .flatten()
                .or_else(|| app.element.element("AXMainWindow").ok().flatten());
            if let Some(window) = window {
                return Ok((window, app.pid));
            }
        }
        Err(format!(
            "no window is active; pass `app` (one of: {}) or `window`",
            apps.iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    fn tree_command(
        &self,
        app: Option<AppArg>,
        window: Option<Target>,
        page: Page,
        roles: Option<Vec<String>>,
        depth: Option<u32>,
    ) -> Result<Outcome, Said> {
        let roots = match (&window, &app) {
            (Some(target), _) => vec![self.locate(target, &app)?],
            (None, Some(_)) => self.app_roots(&app)?,
            (None, None) => vec![self.active_window(&app)?],
        };
        let max_depth = depth.unwrap_or(u32::MAX - 1);
        let (nodes, capped) = self.walk(roots, max_depth, page.include)?;
        let order: Vec<usize> = (0..nodes.len())
            .filter(|&i| match &roles {
                None => true,
                Some(set) => {
                    let (ak, ax) = nodes[i].roles();
                    set.contains(&ak) || set.contains(&ax)
                }
            })
            .collect();
        Ok(call::paged(
            &self.listed(&nodes),
            &order,
            &page,
            max_depth,
            true,
            "tree",
            capped,
            None,
        ))
    }

    fn find_command(
        &self,
        selector: &Selector,
        app: Option<AppArg>,
        page: Page,
    ) -> Result<Outcome, Said> {
        let (nodes, capped) = self.walk(self.app_roots(&app)?, u32::MAX - 1, page.include)?;
        let hits = Self::evaluate(&nodes, selector);
        let total = hits.len();
        Ok(call::paged(
            &self.listed(&nodes),
            &hits,
            &page,
            u32::MAX,
            false,
            "matches",
            capped,
            Some(total),
        ))
    }

    /// `nodes` with this call's refs, for the shared pager.
    fn listed<'a>(&'a self, nodes: &'a [Node]) -> Listed<'a> {
        Listed {
            refs: &self.refs,
            nodes,
        }
    }

    fn read_command(&self, target: &Target, app: &Option<AppArg>) -> Result<Outcome, Said> {
        let (element, pid) = self.locate(target, app)?;
        let node = self.read_one(element, pid)?;
        let r = self.refs.get(&node.element);
        let mut fields = call::read_fields(&node.shown(), r, &node.description);
        let mut texts = Vec::new();
        if macos_roles::is_text_input(&node.ax_role) {
            // The whole text goes through the runtime's byte budget.
            let text = node.value.clone().unwrap_or_default();
            texts.push(CapturedText::from_bytes("text", text.into_bytes()));
        } else if let Some(value) = &node.value {
            fields.insert("value".into(), json!(value));
        }
        Ok(call::read_outcome(&node.shown(), r, fields, texts))
    }

    fn focused_command(&self, app: &Option<AppArg>) -> Result<Outcome, Said> {
        let (source, pid) = match app {
            Some(_) => {
                let app = self
                    .pick_apps(app)?
                    .into_iter()
                    .next()
                    .ok_or("no such app")?;
                (app.element, app.pid)
            }
            None => (Element::system_wide(), 0),
        };
        let focused = source
            .element("AXFocusedUIElement")
            .map_err(|err| self.failed(err, pid))?
            .ok_or_else(|| {
                "nothing has keyboard focus; `ax act` with action focus gives it".to_string()
            })?;
        let pid = focused.pid().unwrap_or(pid);
        let mut path = Vec::new();
        let mut at = focused.element("AXParent").ok().flatten();
        while let Some(parent) = at {
            if path.len() > 64 || self.past_deadline() {
                break;
            }
            let role = parent.string("AXRole").ok().flatten().unwrap_or_default();
            let subrole = parent.string("AXSubrole").ok().flatten();
            let title = parent.string("AXTitle").ok().flatten().unwrap_or_default();
            if !title.is_empty() && role != "AXApplication" {
                path.push(format!(
                    "{} {}",
                    role_name(macos_roles::map_role(&role, subrole.as_deref())),
                    quote(&title)
                ));
            }
            at = parent.element("AXParent").ok().flatten();
        }
        path.reverse();
        let node = self.read_one(focused, pid)?;
        let r = self.refs.get(&node.element);
        let mut fields = Map::new();
        fields.insert("ref".into(), json!(r));
        fields.insert(
            "node".into(),
            json!(line(&node, r, Include::default(), u32::MAX)),
        );
        fields.insert("path".into(), json!(path.join(" > ")));
        Ok(Outcome {
            success: true,
            fields,
            ..Outcome::default()
        })
    }

    fn act_command(
        &self,
        target: &Target,
        app: &Option<AppArg>,
        action: ActName,
        value: Option<Value>,
    ) -> Result<Outcome, Said> {
        let (element, pid) = self.locate(target, app)?;
        let node = self.read_one(element.clone(), pid)?;
        let r = self.refs.get(&element);
        let described = line(&node, r, Include::default(), u32::MAX);
        let available = element.action_names().unwrap_or_default();
        let no_way = |what: &str| {
            format!(
                "{described} cannot {what}: its actions are [{}]",
                available.join(", ")
            )
        };
        let perform_first = |wanted: &[&str], what: &str| -> Result<bool, Said> {
            let name = wanted
                .iter()
                .find(|w| available.iter().any(|a| a == *w))
                .ok_or_else(|| no_way(what))?;
            element.perform(name).map_err(|err| self.failed(err, pid))?;
            Ok(true)
        };
        let set_bool = |attribute: &str, on: bool, what: &str| -> Result<bool, Said> {
            if !element.settable(attribute) {
                return Err(no_way(what));
            }
            element
                .set(attribute, &CFBoolean::from(on).as_CFType())
                .map_err(|err| self.failed(err, pid))?;
            Ok(true)
        };
        let mut fields = Map::new();
        let done = match action {
            ActName::Press => perform_first(macos_roles::press_actions("press"), "press")?,
            ActName::Activate => perform_first(macos_roles::press_actions("activate"), "activate")?,
            ActName::Toggle => perform_first(macos_roles::press_actions("toggle"), "toggle")?,
            ActName::Focus => set_bool("AXFocused", true, "take focus")?,
            ActName::Select => set_bool("AXSelected", true, "be selected")?,
            ActName::ScrollIntoView => perform_first(&["AXScrollToVisible"], "scroll into view")?,
            ActName::Expand | ActName::Collapse => {
                let expand = action == ActName::Expand;
                if node.states.contains(State::Expanded) == expand
                    && node.states.contains(State::Expandable)
                {
                    true
                } else if element.settable("AXExpanded") {
                    set_bool("AXExpanded", expand, "expand")?
                } else if element.settable("AXDisclosing") {
                    set_bool("AXDisclosing", expand, "expand")?
                } else if expand {
                    // Pop-up buttons and menus open through their menu.
                    perform_first(&["AXShowMenu", "AXPress"], "expand")?
                } else {
                    perform_first(&["AXCancel", "AXPress"], "collapse")?
                }
            }
            ActName::SetValue => {
                let value = value.unwrap_or(Value::Null);
                if !element.settable("AXValue") {
                    return Err(no_way("take a value (its AXValue is not settable)"));
                }
                let cf = match &value {
                    Value::Number(n) if !macos_roles::is_text_input(&node.ax_role) => {
                        CFNumber::from(n.as_f64().unwrap_or(0.0)).as_CFType()
                    }
                    Value::String(s) => CFString::new(s).as_CFType(),
                    other => CFString::new(&other.to_string()).as_CFType(),
                };
                element
                    .set("AXValue", &cf)
                    .map_err(|err| self.failed(err, pid))?;
                let now = element.value_text("AXValue").ok().flatten();
                fields.insert("value".into(), json!(now));
                let wanted = match &value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                match (&now, value.as_f64()) {
                    (Some(now), Some(number)) => now
                        .parse::<f64>()
                        .map(|n| (n - number).abs() < 1e-9)
                        .unwrap_or(*now == wanted),
                    (Some(now), None) => *now == wanted,
                    (None, _) => false,
                }
            }
        };
        fields.insert("ref".into(), json!(r));
        fields.insert("action".into(), json!(format!("{action:?}")));
        fields.insert("done".into(), json!(done));
        // The element as it is now (it may be gone: a button that closes its window).
        match self.read_one(element, pid) {
            Ok(after) => {
                fields.insert("states".into(), json!(all_states(after.states)));
                fields.insert(
                    "node".into(),
                    json!(line(&after, r, Include::default(), u32::MAX)),
                );
            }
            Err(_) => {
                fields.insert(
                    "node".into(),
                    json!(format!("{described} (gone after the action)")),
                );
            }
        }
        Ok(Outcome {
            success: done,
            fields,
            ..Outcome::default()
        })
    }

    fn wait_command(
        &self,
        selector: &Selector,
        app: &Option<AppArg>,
        until: Until,
        timeout: Duration,
    ) -> Result<Outcome, Said> {
        let started = Instant::now();
        let give_up = (started + timeout).min(self.deadline);
        let mut pause = Duration::from_millis(40);
        loop {
            let found = match self.app_roots(app) {
                Ok(roots) => {
                    let (nodes, _) = self.walk(roots, u32::MAX - 1, Include::default())?;
                    let hits = Self::evaluate(&nodes, selector);
                    let met = match until {
                        Until::Appears => !hits.is_empty(),
                        Until::Disappears => hits.is_empty(),
                        Until::State { query, negated } => hits
                            .first()
                            .is_some_and(|&i| query.holds(nodes[i].states) != negated),
                    };
                    let first = hits.first().map(|&i| {
                        let r = self.refs.get(&nodes[i].element);
                        (r, line(&nodes[i], r, Include::default(), u32::MAX))
                    });
                    (met, first)
                }
                // An app that is not there yet is what `appears` waits for.
                Err(_) if app.is_some() => (matches!(until, Until::Disappears), None),
                Err(err) => return Err(err),
            };
            if found.0 || Instant::now() + pause >= give_up {
                let mut fields = Map::new();
                fields.insert("met".into(), json!(found.0));
                fields.insert(
                    "waited_ms".into(),
                    json!(started.elapsed().as_millis() as u64),
                );
                if let Some((r, node)) = found.1 {
                    fields.insert("ref".into(), json!(r));
                    fields.insert("node".into(), json!(node));
                }
                return Ok(Outcome {
                    success: found.0,
                    fields,
                    ..Outcome::default()
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 3 / 2).min(Duration::from_millis(250));
        }
    }
}

/// An app's name for messages, from the window list (else "an app").
fn app_name(pid: i32) -> String {
    crate::gui::macos::window_list()
        .ok()
        .and_then(|list| {
            list.into_iter()
                .find(|w| w.pid as i32 == pid)
                .map(|w| w.app)
        })
        .unwrap_or_else(|| "an app".into())
}
