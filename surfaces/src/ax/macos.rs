//! The ax surface on macOS (this file is `crate::ax` there): applications from the window
//! server's list, their AXUIElement trees as the same compact outlines and refs as on Linux,
//! selectors, and actions (AXPress, AXConfirm, AXShowMenu, setting AXValue...), each call
//! bounded by a messaging timeout and the call's deadline.
//!
//! # Layout
//! - this file: the `Surface`, args validation, walks, paging and the commands.
//! - `element`: the owned AXUIElement and the Accessibility permission check.
//! - `macos_roles`: AXRole → accesskit role, AX attributes → state names, action choice.
//! - `selector`, `roles`: the selector language and state vocabulary shared with Linux.

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
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{
    Availability, CallContext, CapturedText, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, decode_args,
};
use element::{AxError, Element};
use roles::{all_states, fold, key_states, role_name};
use selector::{NodeFacts, Selector};

const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "apps",
        args: "",
        risk: Risk::Observe,
    },
    CommandSpec {
        name: "tree",
        args: "app?:name|pid, window?:selector|ref, depth?, max_nodes?=500, roles?, include?:[states|bounds|actions|value], format?:outline|json, cursor?, since?",
        risk: Risk::Observe,
    },
    CommandSpec {
        name: "find",
        args: "selector (role \"Name\"|~\"part\"|/re/ [state] :N, a > b), app?, max_nodes?, include?, format?, cursor?, since?",
        risk: Risk::Observe,
    },
    CommandSpec {
        name: "read",
        args: "selector|ref, app?",
        risk: Risk::Observe,
    },
    CommandSpec {
        name: "focused",
        args: "app?",
        risk: Risk::Observe,
    },
    CommandSpec {
        name: "act",
        args: "selector|ref, app?, action:press|activate|focus|set_value|toggle|select|expand|collapse|scroll_into_view, value?",
        risk: Risk::Act,
    },
    CommandSpec {
        name: "wait",
        args: "selector, app?, until?:appears|disappears|[!]state, timeout_ms?",
        risk: Risk::Observe,
    },
];

const TREE_FIELDS: &[&str] = &[
    "tree",
    "revision",
    "nodes",
    "cursor",
    "truncated",
    "unchanged",
];
const FIND_FIELDS: &[&str] = &[
    "matches",
    "revision",
    "nodes",
    "total",
    "cursor",
    "truncated",
    "unchanged",
];
const APPS_FIELDS: &[&str] = &["apps", "count"];
const READ_FIELDS: &[&str] = &[
    "ref",
    "node",
    "role",
    "name",
    "description",
    "states",
    "value",
    "bounds",
    "actions",
    "text",
];
const FOCUSED_FIELDS: &[&str] = &["ref", "node", "path"];
const ACT_FIELDS: &[&str] = &["ref", "action", "done", "node", "value", "states"];
const WAIT_FIELDS: &[&str] = &["met", "waited_ms", "ref", "node"];

/// The longest one accessibility call may wait for an app (AXUIElementSetMessagingTimeout).
const CALL_LIMIT: Duration = Duration::from_millis(1500);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(120);
const DEFAULT_WAIT: Duration = Duration::from_secs(5);
const MAX_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_NODES: usize = 500;
const MAX_MAX_NODES: usize = 5000;
const DEFAULT_MAX_BYTES: usize = 4000;
/// No walk reads more elements than this, whatever was asked.
const MAX_WALK: usize = 20_000;
const TEXT_LIMIT: usize = 120;
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

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum AppArg {
    Pid(u32),
    Name(String),
}

impl std::fmt::Display for AppArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppArg::Pid(pid) => write!(f, "pid {pid}"),
            AppArg::Name(name) => write!(f, "`{name}`"),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RefArg {
    Num(u32),
    Text(String),
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Outline,
    Json,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum IncludePart {
    States,
    Bounds,
    Actions,
    Value,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum ActName {
    Press,
    Activate,
    Focus,
    SetValue,
    Toggle,
    Select,
    Expand,
    Collapse,
    ScrollIntoView,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppsArgs {
    #[serde(default)]
    format: Option<Format>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeArgs {
    #[serde(default)]
    app: Option<AppArg>,
    #[serde(default)]
    window: Option<RefArg>,
    #[serde(default)]
    depth: Option<u32>,
    #[serde(default)]
    max_nodes: Option<usize>,
    #[serde(default)]
    roles: Option<Vec<String>>,
    #[serde(default)]
    include: Option<Vec<IncludePart>>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FindArgs {
    selector: String,
    #[serde(default)]
    app: Option<AppArg>,
    #[serde(default)]
    max_nodes: Option<usize>,
    #[serde(default)]
    include: Option<Vec<IncludePart>>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetArgs {
    #[serde(default)]
    selector: Option<String>,
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FocusedArgs {
    #[serde(default)]
    app: Option<AppArg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActArgs {
    #[serde(default)]
    selector: Option<String>,
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
    action: ActName,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitArgs {
    selector: String,
    #[serde(default)]
    app: Option<AppArg>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Debug, Clone)]
enum Target {
    Ref(u32),
    Selector(Selector),
}

#[derive(Debug, Clone, Copy)]
enum Until {
    Appears,
    Disappears,
    State {
        query: roles::StateQuery,
        negated: bool,
    },
}

/// Optional parts of a node.
#[derive(Debug, Clone, Copy, Default)]
struct Include {
    states: bool,
    bounds: bool,
    actions: bool,
    value: bool,
}

#[derive(Debug, Clone)]
struct Page {
    offset: usize,
    max_nodes: usize,
    max_bytes: usize,
    include: Include,
    format: Format,
    since: Option<String>,
    fingerprint: String,
}

#[derive(Debug)]
enum Job {
    Apps {
        format: Format,
    },
    Tree {
        app: Option<AppArg>,
        window: Option<Target>,
        page: Page,
        roles: Option<Vec<String>>,
        depth: Option<u32>,
    },
    Find {
        selector: Selector,
        app: Option<AppArg>,
        page: Page,
    },
    Read {
        target: Target,
        app: Option<AppArg>,
    },
    Focused {
        app: Option<AppArg>,
    },
    Act {
        target: Target,
        app: Option<AppArg>,
        action: ActName,
        value: Option<Value>,
    },
    Wait {
        selector: Selector,
        app: Option<AppArg>,
        until: Until,
        timeout: Duration,
    },
}

fn parse_arg(source: &str, at: &str) -> Result<Selector, ToolError> {
    selector::parse(source)
        .map_err(|err| ToolError::invalid(format!("selector `{source}` {err}")).at(at.to_string()))
}

fn target_of(
    reference: Option<RefArg>,
    selector: Option<String>,
    at: &str,
) -> Result<Target, ToolError> {
    let parse_ref = |text: &str| -> Option<u32> {
        let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
        inner.trim().parse().ok()
    };
    match (reference, selector) {
        (Some(RefArg::Num(r)), None) => Ok(Target::Ref(r)),
        (Some(RefArg::Text(text)), None) => {
            if let Some(r) = parse_ref(&text) {
                Ok(Target::Ref(r))
            } else if at == "args.window" {
                Ok(Target::Selector(parse_arg(&text, at)?))
            } else {
                Err(ToolError::invalid(format!(
                    "ref `{text}` is not a ref; refs are the numbers in brackets, e.g. 12 or \"[12]\""
                ))
                .at("args.ref"))
            }
        }
        (None, Some(selector)) => Ok(Target::Selector(parse_arg(&selector, "args.selector")?)),
        (Some(_), Some(_)) => Err(ToolError::invalid("give either selector or ref, not both")
            .at(at.to_string())
            .valid(["selector", "ref"])),
        (None, None) => Err(ToolError::invalid("this command needs a selector or a ref")
            .at(at.to_string())
            .valid(["selector", "ref"])),
    }
}

fn fingerprint(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..4])
}

fn page(
    max_nodes: Option<usize>,
    include: Option<Vec<IncludePart>>,
    format: Option<Format>,
    cursor: Option<String>,
    since: Option<String>,
    max_bytes: usize,
    fingerprint: String,
) -> Result<Page, ToolError> {
    let max_nodes = max_nodes.unwrap_or(DEFAULT_MAX_NODES);
    if max_nodes == 0 || max_nodes > MAX_MAX_NODES {
        return Err(
            ToolError::invalid(format!("max_nodes must be between 1 and {MAX_MAX_NODES}"))
                .at("args.max_nodes"),
        );
    }
    let mut parts = Include::default();
    for part in include.unwrap_or_default() {
        match part {
            IncludePart::States => parts.states = true,
            IncludePart::Bounds => parts.bounds = true,
            IncludePart::Actions => parts.actions = true,
            IncludePart::Value => parts.value = true,
        }
    }
    let offset = match cursor {
        None => 0,
        Some(cursor) => match cursor
            .split_once('.')
            .and_then(|(n, fp)| Some((n.parse::<usize>().ok()?, fp)))
        {
            Some((n, fp)) if fp == fingerprint => n,
            Some(_) => {
                return Err(ToolError::invalid(
                    "this cursor belongs to a different request: repeat the same args with the cursor",
                )
                .at("args.cursor"));
            }
            None => {
                return Err(ToolError::invalid(
                    "not a cursor: pass the `cursor` value of the previous page unchanged",
                )
                .at("args.cursor"));
            }
        },
    };
    Ok(Page {
        offset,
        max_nodes,
        max_bytes,
        include: parts,
        format: format.unwrap_or_default(),
        since,
        fingerprint,
    })
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
        match command {
            "apps" => APPS_FIELDS,
            "tree" => TREE_FIELDS,
            "find" => FIND_FIELDS,
            "read" => READ_FIELDS,
            "focused" => FOCUSED_FIELDS,
            "act" => ACT_FIELDS,
            "wait" => WAIT_FIELDS,
            _ => &[],
        }
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let max_bytes = complications
            .return_budget
            .as_ref()
            .and_then(|b| b.max_bytes)
            .unwrap_or(DEFAULT_MAX_BYTES);
        let mut timeout = match complications.timeout_ms {
            Some(0) => {
                return Err(ToolError::invalid("timeout_ms must be at least 1")
                    .at("complications.timeout_ms"));
            }
            Some(ms) if Duration::from_millis(ms) > MAX_TIMEOUT => {
                return Err(ToolError::invalid(format!(
                    "timeout_ms {ms} is over the ax surface's maximum of {} ms",
                    MAX_TIMEOUT.as_millis()
                ))
                .at("complications.timeout_ms"));
            }
            Some(ms) => Some(Duration::from_millis(ms)),
            None => None,
        };
        let job = match command {
            "apps" => {
                let a: AppsArgs = decode_args(args)?;
                Job::Apps {
                    format: a.format.unwrap_or_default(),
                }
            }
            "tree" => {
                let a: TreeArgs = decode_args(args)?;
                let window = a
                    .window
                    .map(|w| target_of(Some(w), None, "args.window"))
                    .transpose()?;
                let known = roles::known_role_names();
                let roles = a
                    .roles
                    .map(|roles| {
                        roles
                            .iter()
                            .enumerate()
                            .map(|(i, r)| {
                                let folded = fold(r);
                                if known.contains(&folded) || folded.starts_with("ax") {
                                    Ok(folded)
                                } else {
                                    Err(ToolError::invalid(format!(
                                        "unknown role `{r}`; use accesskit role names as `ax tree` prints them (button, checkBox, textInput, ...) or an AXRole"
                                    ))
                                    .at(format!("args.roles[{i}]")))
                                }
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .transpose()?;
                let fingerprint = fingerprint(&[
                    &format!("{:?}", a.app),
                    &format!("{window:?}"),
                    &format!("{:?}{roles:?}{:?}", a.depth, a.include),
                ]);
                let page = page(
                    a.max_nodes,
                    a.include,
                    a.format,
                    a.cursor,
                    a.since,
                    max_bytes,
                    fingerprint,
                )?;
                Job::Tree {
                    app: a.app,
                    window,
                    page,
                    roles,
                    depth: a.depth,
                }
            }
            "find" => {
                let a: FindArgs = decode_args(args)?;
                let selector = parse_arg(&a.selector, "args.selector")?;
                let fingerprint =
                    fingerprint(&[&a.selector, &format!("{:?}{:?}", a.app, a.include)]);
                let page = page(
                    a.max_nodes.or(Some(50)),
                    a.include,
                    a.format,
                    a.cursor,
                    a.since,
                    max_bytes,
                    fingerprint,
                )?;
                Job::Find {
                    selector,
                    app: a.app,
                    page,
                }
            }
            "read" => {
                let a: TargetArgs = decode_args(args)?;
                Job::Read {
                    target: target_of(a.reference, a.selector, "args")?,
                    app: a.app,
                }
            }
            "focused" => {
                let a: FocusedArgs = decode_args(args)?;
                Job::Focused { app: a.app }
            }
            "act" => {
                let a: ActArgs = decode_args(args)?;
                let target = target_of(a.reference, a.selector, "args")?;
                match (a.action, &a.value) {
                    (ActName::SetValue, None) => {
                        return Err(
                            ToolError::invalid("set_value needs `value` (text or number)")
                                .at("args.value"),
                        );
                    }
                    (ActName::SetValue, Some(Value::String(_) | Value::Number(_))) => {}
                    (ActName::SetValue, Some(_)) => {
                        return Err(ToolError::invalid("`value` must be a string or a number")
                            .at("args.value"));
                    }
                    (_, Some(_)) => {
                        return Err(ToolError::invalid("`value` is only for action set_value")
                            .at("args.value"));
                    }
                    _ => {}
                }
                Job::Act {
                    target,
                    app: a.app,
                    action: a.action,
                    value: a.value,
                }
            }
            "wait" => {
                let a: WaitArgs = decode_args(args)?;
                let selector = parse_arg(&a.selector, "args.selector")?;
                let until = match a.until.as_deref().unwrap_or("appears") {
                    "appears" => Until::Appears,
                    "disappears" => Until::Disappears,
                    other => {
                        let (negated, name) = match other.strip_prefix('!') {
                            Some(rest) => (true, rest),
                            None => (false, other),
                        };
                        match roles::parse_state(name) {
                            Some(query) => Until::State { query, negated },
                            None => {
                                return Err(ToolError::invalid(format!(
                                    "`until` is appears, disappears, a state (focused, checked, ...) or !state; got `{other}`"
                                ))
                                .at("args.until")
                                .valid(["appears", "disappears", "focused", "checked", "!checked", "enabled"]));
                            }
                        }
                    }
                };
                let wait = match a.timeout_ms {
                    Some(0) => {
                        return Err(ToolError::invalid("timeout_ms must be at least 1")
                            .at("args.timeout_ms"));
                    }
                    Some(ms) if Duration::from_millis(ms) > MAX_WAIT => {
                        return Err(ToolError::invalid(format!(
                            "timeout_ms is at most {} ms",
                            MAX_WAIT.as_millis()
                        ))
                        .at("args.timeout_ms"));
                    }
                    Some(ms) => Duration::from_millis(ms),
                    None => DEFAULT_WAIT,
                };
                let overall = timeout.unwrap_or(wait + Duration::from_secs(3));
                timeout = Some(overall);
                Job::Wait {
                    selector,
                    app: a.app,
                    until,
                    timeout: wait.min(overall),
                }
            }
            other => {
                return Err(ToolError::invalid(format!("unknown ax command `{other}`"))
                    .at("command")
                    .valid(COMMANDS.iter().map(|c| c.name)));
            }
        };
        Ok(Box::new(AxAction {
            refs: self.refs.clone(),
            job,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        }))
    }
}

pub struct AxAction {
    refs: Arc<Refs>,
    job: Job,
    timeout: Duration,
}

#[async_trait]
impl PreparedAction for AxAction {
    fn risk(&self) -> Risk {
        match self.job {
            Job::Act { .. } => Risk::Act,
            _ => Risk::Observe,
        }
    }

    fn describe(&self) -> String {
        let scope = |app: &Option<AppArg>| match app {
            Some(app) => format!(" in app {app}"),
            None => String::new(),
        };
        let target = |t: &Target| match t {
            Target::Ref(r) => format!("ref [{r}]"),
            Target::Selector(s) => format!("`{}`", s.source),
        };
        match &self.job {
            Job::Apps { .. } => "list the accessible applications".into(),
            Job::Tree { app, window, .. } => match window {
                Some(w) => format!(
                    "read the accessibility tree of window {}{}",
                    target(w),
                    scope(app)
                ),
                None if app.is_some() => format!("read the accessibility tree{}", scope(app)),
                None => "read the accessibility tree of the active window".into(),
            },
            Job::Find { selector, app, .. } => format!("find `{}`{}", selector.source, scope(app)),
            Job::Read { target: t, app } => format!("read {}{}", target(t), scope(app)),
            Job::Focused { app } => format!("read the focused element{}", scope(app)),
            Job::Act {
                target: t,
                app,
                action,
                value,
            } => {
                let action = format!("{action:?}").to_lowercase();
                match value {
                    Some(v) => format!("{action} {} to {v}{}", target(t), scope(app)),
                    None => format!("{action} {}{}", target(t), scope(app)),
                }
            }
            Job::Wait {
                selector,
                app,
                until,
                timeout,
            } => format!(
                "wait up to {} ms until `{}` {until:?}{}",
                timeout.as_millis(),
                selector.source,
                scope(app)
            ),
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

fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(TEXT_LIMIT) + 2);
    out.push('"');
    for (n, c) in text.chars().enumerate() {
        if n == TEXT_LIMIT {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn line(node: &Node, r: u32, include: Include, max_depth: u32) -> String {
    let mut out = format!("[{r}] {}", role_name(node.role));
    if !node.name.is_empty() {
        out.push(' ');
        out.push_str(&quote(&node.name));
    }
    if let Some(value) = &node.value
        && (!value.is_empty() || node.states.contains(State::Editable))
        && value != &node.name
    {
        out.push_str(" = ");
        out.push_str(&quote(value));
    }
    let states = if include.states {
        all_states(node.states)
    } else {
        key_states(node.states, node.role)
    };
    if !states.is_empty() {
        out.push_str(&format!(" ({})", states.join(", ")));
    }
    if include.bounds
        && let Some((x, y, w, h)) = node.bounds
    {
        out.push_str(&format!(" @{x},{y} {w}x{h}"));
    }
    if include.actions && !node.actions.is_empty() {
        out.push_str(&format!(" actions:{}", node.actions.join(",")));
    }
    if node.depth >= max_depth && node.child_count > 0 {
        out.push_str(&format!(" +{}", node.child_count));
    }
    out
}

fn json_node(node: &Node, r: u32, include: Include) -> Value {
    let states = if include.states {
        all_states(node.states)
    } else {
        key_states(node.states, node.role)
    };
    let mut v = json!({"ref": r, "depth": node.depth, "role": role_name(node.role),
        "name": node.name, "states": states});
    if node.child_count > 0 {
        v["children"] = json!(node.child_count);
    }
    if include.bounds {
        v["bounds"] = json!(node.bounds.map(|(x, y, w, h)| [x, y, w, h]));
    }
    if include.actions {
        v["actions"] = json!(node.actions);
    }
    if let Some(value) = &node.value {
        v["value"] = json!(value);
    }
    v
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
        Ok(self.paged(&nodes, &order, &page, max_depth, true, "tree", capped, None))
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
        Ok(self.paged(
            &nodes,
            &hits,
            &page,
            u32::MAX,
            false,
            "matches",
            capped,
            Some(total),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn paged(
        &self,
        nodes: &[Node],
        order: &[usize],
        page: &Page,
        max_depth: u32,
        indent: bool,
        text_name: &str,
        capped: bool,
        total: Option<usize>,
    ) -> Outcome {
        let mut text = String::new();
        let mut items = Vec::new();
        let mut shown = 0usize;
        let mut bytes = 2usize;
        for &i in order.iter().skip(page.offset) {
            if shown >= page.max_nodes {
                break;
            }
            let node = &nodes[i];
            let r = self.refs.get(&node.element);
            let rendered = match page.format {
                Format::Outline => {
                    let pad = if indent {
                        "  ".repeat(node.depth as usize)
                    } else {
                        String::new()
                    };
                    let mut l = format!("{pad}{}", line(node, r, page.include, max_depth));
                    if !indent {
                        l.push_str(&Self::where_is(nodes, i));
                    }
                    l
                }
                Format::Json => json_node(node, r, page.include).to_string(),
            };
            // Pages end on whole lines within the byte budget; the cursor picks up the rest.
            if shown > 0 && bytes + rendered.len() + 1 > page.max_bytes {
                break;
            }
            bytes += rendered.len() + 1;
            match page.format {
                Format::Outline => {
                    text.push_str(&rendered);
                    text.push('\n');
                }
                Format::Json => items.push(rendered),
            }
            shown += 1;
        }
        if page.format == Format::Json {
            text = format!("[{}]", items.join(","));
        }
        let next = page.offset + shown;
        let more = order.len() > next || capped;
        let cursor = more.then(|| format!("{next}.{}", page.fingerprint));
        let revision = fingerprint(&[&text, cursor.as_deref().unwrap_or("")]);
        let unchanged = page.since.as_deref() == Some(revision.as_str());
        let mut fields = Map::new();
        fields.insert("revision".into(), json!(revision));
        fields.insert("nodes".into(), json!(shown));
        if let Some(total) = total {
            fields.insert("total".into(), json!(total));
        }
        fields.insert("cursor".into(), json!(cursor));
        fields.insert("truncated".into(), json!(more));
        fields.insert("unchanged".into(), json!(unchanged));
        Outcome {
            success: true,
            fields,
            texts: if unchanged {
                Vec::new()
            } else {
                vec![CapturedText::from_bytes(text_name, text.into_bytes())]
            },
            ..Outcome::default()
        }
    }

    fn read_command(&self, target: &Target, app: &Option<AppArg>) -> Result<Outcome, Said> {
        let (element, pid) = self.locate(target, app)?;
        let node = self.read_one(element, pid)?;
        let r = self.refs.get(&node.element);
        let mut fields = Map::new();
        fields.insert("ref".into(), json!(r));
        fields.insert("role".into(), json!(role_name(node.role)));
        fields.insert("name".into(), json!(node.name));
        if !node.description.is_empty() {
            fields.insert("description".into(), json!(node.description));
        }
        fields.insert("states".into(), json!(all_states(node.states)));
        let mut texts = Vec::new();
        if macos_roles::is_text_input(&node.ax_role) {
            // The whole text goes through the runtime's byte budget.
            let text = node.value.clone().unwrap_or_default();
            texts.push(CapturedText::from_bytes("text", text.into_bytes()));
        } else if let Some(value) = &node.value {
            fields.insert("value".into(), json!(value));
        }
        if let Some((x, y, w, h)) = node.bounds {
            fields.insert("bounds".into(), json!([x, y, w, h]));
        }
        if !node.actions.is_empty() {
            fields.insert("actions".into(), json!(node.actions));
        }
        fields.insert(
            "node".into(),
            json!(line(&node, r, Include::default(), u32::MAX)),
        );
        Ok(Outcome {
            success: true,
            fields,
            texts,
            ..Outcome::default()
        })
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
