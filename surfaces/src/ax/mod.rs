//! The ax surface: accessibility trees over AT-SPI (Linux). Apps, trees and searches come back as
//! compact outlines with refs that stay valid across calls; selectors and refs drive actions.
//!
//! # Layout
//! - this file: the `Surface` (commands, probe, args validation) and the prepared action.
//! - [`bus`]: the lazily opened, self-healing a11y bus connection and deadline-bound calls.
//! - [`cache`]: an app's own AT-SPI cache (`GetItems`), which seeds walks in one call.
//! - [`tree`]: concurrent, page-bounded tree walks, the ref table, outline and JSON lines.
//! - [`selector`]: the selector language.
//! - [`roles`]: AT-SPI roles mapped onto accesskit's `Role` names; state vocabulary.
//! - [`commands`]: what each command does once validated.

mod bus;
mod cache;
mod commands;
// The macOS vocabulary is pure: its tables are tested here too (the macOS backend is
// `macos.rs`, which lib.rs picks on macOS instead of this module).
#[cfg(test)]
mod macos_roles;
mod roles;
mod selector;
mod tree;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{
    Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface, SurfaceError,
    decode_args,
};

use bus::Bus;
use tree::Refs;

pub use selector::{ParseError, Selector, parse as parse_selector};

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
    "skipped",
];
const FIND_FIELDS: &[&str] = &[
    "matches",
    "revision",
    "nodes",
    "total",
    "cursor",
    "truncated",
    "unchanged",
    "skipped",
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
const ACT_FIELDS: &[&str] = &["ref", "action", "done", "via", "node", "value", "states"];
const WAIT_FIELDS: &[&str] = &["met", "waited_ms", "ref", "node"];

/// The overall deadline of a call when `complications.timeout_ms` does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(120);
const DEFAULT_WAIT: Duration = Duration::from_secs(5);
const MAX_WAIT: Duration = Duration::from_secs(60);
pub const DEFAULT_MAX_NODES: usize = 500;
const MAX_MAX_NODES: usize = 5000;
const DEFAULT_MAX_BYTES: usize = 4000;

/// The ax surface for this platform, if this build has one.
pub fn surface() -> Option<Arc<dyn Surface>> {
    // `COMPUTER_AX_APP_CACHE=off` walks every tree node by node (the benchmark compares both).
    let use_app_caches = std::env::var("COMPUTER_AX_APP_CACHE").map_or(true, |v| v != "off");
    tracing::info!(
        backend = "AT-SPI over D-Bus (zbus, accesskit roles)",
        use_app_caches,
        "ax backend chosen; the accessibility bus is opened on first use"
    );
    Some(Arc::new(AxSurface {
        ax: Arc::new(Ax {
            bus: Bus::new(use_app_caches),
            refs: Refs::default(),
        }),
    }))
}

/// State shared by every call: the bus connection and the ref table.
pub struct Ax {
    bus: Bus,
    refs: Refs,
}

pub struct AxSurface {
    ax: Arc<Ax>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AppArg {
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
pub enum Format {
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
pub enum ActName {
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
struct ReadArgs {
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

/// Which element a command is about.
#[derive(Debug, Clone)]
pub enum Target {
    Ref(u32),
    Selector(Selector),
}

/// What `wait` waits for.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    Appears,
    Disappears,
    State {
        query: roles::StateQuery,
        negated: bool,
    },
}

/// A validated ax command.
#[derive(Debug)]
pub enum Job {
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

/// How a listing is paged and shown.
#[derive(Debug, Clone)]
pub struct Page {
    pub offset: usize,
    pub max_nodes: usize,
    pub max_bytes: usize,
    pub include: tree::Include,
    pub format: Format,
    pub since: Option<String>,
    /// Ties a cursor to the request it continues.
    pub fingerprint: String,
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
        let has_bus = std::env::var_os("AT_SPI_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("XDG_RUNTIME_DIR")
                .is_some_and(|dir| std::path::Path::new(&dir).join("bus").exists());
        if !has_bus {
            return Availability::Unavailable {
                reason: "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset".into(),
                fix: "run the daemon inside the desktop session (systemd --user unit, or export DBUS_SESSION_BUS_ADDRESS and DISPLAY before `computer serve`)".into(),
            };
        }
        if let Some(why) = self.ax.bus.recent_failure() {
            return Availability::Unavailable {
                reason: format!("the accessibility bus is unreachable: {why}"),
                fix: "install at-spi2-core (at-spi-bus-launcher) and enable accessibility (gsettings set org.gnome.desktop.interface toolkit-accessibility true); the daemon retries after 5 s".into(),
            };
        }
        Availability::Ready
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
                let roles = a
                    .roles
                    .map(|roles| {
                        let known = roles::known_role_names();
                        roles
                            .iter()
                            .enumerate()
                            .map(|(i, r)| {
                                let folded = roles::fold(r);
                                if known.contains(&folded) {
                                    Ok(folded)
                                } else {
                                    Err(ToolError::invalid(format!(
                                        "unknown role `{r}`; use accesskit role names as `ax tree` prints them (button, checkBox, textInput, ...)"
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
                let a: ReadArgs = decode_args(args)?;
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
                                .valid(["appears", "disappears", "focused", "checked", "!checked", "enabled", "showing"]));
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
                // The wait's own bound must fit inside the call's deadline.
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
            ax: self.ax.clone(),
            job,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        }))
    }
}

fn parse_arg(source: &str, at: &str) -> Result<Selector, ToolError> {
    selector::parse(source)
        .map_err(|err| ToolError::invalid(format!("selector `{source}` {err}")).at(at.to_string()))
}

/// A ref (`12`, `"12"`, `"[12]"`) or a selector.
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
    let mut parts = tree::Include::default();
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
        Some(cursor) => {
            let parsed = cursor
                .split_once('.')
                .and_then(|(n, fp)| Some((n.parse::<usize>().ok()?, fp)));
            match parsed {
                Some((n, fp)) if fp == fingerprint => n,
                Some(_) => {
                    return Err(ToolError::invalid(
                        "this cursor belongs to a different request: repeat the same args (app, window, selector, depth, roles, include) with the cursor",
                    )
                    .at("args.cursor"));
                }
                None => {
                    return Err(ToolError::invalid(
                        "not a cursor: pass the `cursor` value of the previous page unchanged",
                    )
                    .at("args.cursor"));
                }
            }
        }
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

/// A validated ax call.
pub struct AxAction {
    ax: Arc<Ax>,
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
            Job::Find { selector, app, .. } => {
                format!("find `{}`{}", selector.source, scope(app))
            }
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
                ..
            } => format!(
                "wait up to {} ms until `{}` {until:?}{}",
                timeout.as_millis(),
                selector.source,
                scope(app)
            ),
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let deadline = Instant::now() + self.timeout;
        let conn = match self.ax.bus.connection(deadline).await {
            Ok(conn) => conn,
            Err(err) => return Err(commands::failure(&self.ax, err)),
        };
        if let Job::Act { target, app, .. } = &self.job
            && !ctx.protected.is_empty()
        {
            // No agent may press, type into or focus an approver's widgets (the approval window):
            // an app whose pid cannot be told is refused too while approvers are connected.
            let pid = commands::target_pid(&self.ax, &conn, deadline, target, app)
                .await
                .map_err(|failure| failure.into_surface_error(&self.ax))?;
            if pid.is_none_or(|pid| ctx.protected.contains(pid)) {
                return Err(SurfaceError::Refused {
                    message: format!(
                        "refused: the target's application ({}) is an approver (where a person \
                         answers approval requests); agents may not act on it",
                        pid.map_or("pid unknown".into(), |pid| format!("pid {pid}"))
                    ),
                });
            }
        }
        let result = commands::run(&self.ax, &conn, deadline, self.job).await;
        if let Err(commands::Failure::Bus(bus::BusError::Connect(_))) = &result {
            // The bus went away (session restarted): the next call reconnects.
            self.ax.bus.reset().await;
        }
        result.map_err(|failure| failure.into_surface_error(&self.ax))
    }
}
