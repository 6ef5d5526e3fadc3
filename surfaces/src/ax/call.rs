//! The ax tool's commands and their validated form, shared by the AT-SPI and AX backends: the
//! command table, args decoding and checks (args → [`Job`]), paging and cursors, and the
//! rendering of one page of a listing. What differs by backend comes in through [`Dialect`].

use std::time::Duration;

use crate::accessibility::roles::{State, StateSet};
use accesskit::Role;
use computer_ipc::{Complications, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::selector::{self, Selector};
use crate::accessibility::backend::{ActName, Dialect, Include};
use crate::accessibility::read_back::quote;
use crate::accessibility::roles::{self, all_states, fold, key_states, role_name};
use crate::{CapturedText, CommandSpec, Outcome, Risk, TargetFacts, decode_args};

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::of::<AppsArgs>("apps", Risk::Observe),
    CommandSpec::of::<TreeArgs>("tree", Risk::Observe),
    CommandSpec::of::<FindArgs>("find", Risk::Observe),
    CommandSpec::of::<ReadArgs>("read", Risk::Observe),
    CommandSpec::of::<FocusedArgs>("focused", Risk::Observe),
    CommandSpec::of::<ActArgs>("act", Risk::Act),
    CommandSpec::of::<WaitArgs>("wait", Risk::Observe),
];

// Result fields; `?`: only when it applies (see `Surface::result_fields`).
const APPS_FIELDS: &[&str] = &["apps?", "count"];
const READ_FIELDS: &[&str] = &[
    "node",
    "description?",
    "states",
    "value?",
    "bounds?",
    "actions?",
    "text?",
    "snapshot",
];
const FOCUSED_FIELDS: &[&str] = &["ref", "node", "path", "snapshot"];
const WAIT_FIELDS: &[&str] = &[
    "met",
    "waited_ms",
    "ref?",
    "node?",
    "found?",
    "states?",
    "value?",
    "nearest?",
];

/// The overall deadline of a call when `complications.timeout_ms` does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(120);
const DEFAULT_WAIT: Duration = Duration::from_secs(5);
const MAX_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_NODES: usize = 500;
const MAX_MAX_NODES: usize = 5000;
const DEFAULT_MAX_BYTES: usize = 4000;

const TREE_FIELDS: &[&str] = &[
    "tree?",
    "revision",
    "nodes",
    "cursor?",
    "truncated?",
    "unchanged?",
    "skipped?",
    "snapshot",
];
const FIND_FIELDS: &[&str] = &[
    "matches?",
    "revision",
    "nodes",
    "total",
    "cursor?",
    "truncated?",
    "unchanged?",
    "skipped?",
    "snapshot",
];
const ACT_FIELDS: &[&str] = &[
    "done",
    "via?",
    "value?",
    "changed?",
    "node",
    "effect",
    "effect_evidence",
];

impl Dialect {
    /// Field names a command's result may carry.
    pub fn result_fields(&self, command: &str) -> &'static [&'static str] {
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
}

/// name|pid
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum RefArg {
    Num(u32),
    Text(String),
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Outline,
    Json,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum IncludePart {
    States,
    Bounds,
    Actions,
    Value,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppsArgs {
    #[serde(default)]
    format: Option<Format>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TreeArgs {
    #[serde(default)]
    app: Option<AppArg>,
    /// selector|ref
    #[serde(default)]
    window: Option<RefArg>,
    #[serde(default)]
    depth: Option<u32>,
    /// =500
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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct FindArgs {
    /// (role "Name"|~"part"|/re/ [state] :N, a > b)
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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    #[serde(default)]
    selector: Option<String>,
    /// [n] or selector
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct FocusedArgs {
    #[serde(default)]
    app: Option<AppArg>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActArgs {
    #[serde(default)]
    selector: Option<String>,
    /// [n] or selector
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
    action: ActName,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct WaitArgs {
    selector: String,
    #[serde(default)]
    app: Option<AppArg>,
    /// appears|disappears|[!]state
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
    pub include: Include,
    pub format: Format,
    pub since: Option<String>,
    /// Ties a cursor to the request it continues.
    pub fingerprint: String,
}

/// Checks a command's args into a [`Job`] and the call's overall deadline.
pub fn prepare(
    dialect: &Dialect,
    command: &str,
    args: &Map<String, Value>,
    complications: &Complications,
) -> Result<(Job, Duration), ToolError> {
    let max_bytes = complications
        .return_budget
        .as_ref()
        .and_then(|b| b.max_bytes)
        .unwrap_or(DEFAULT_MAX_BYTES);
    let mut timeout = match complications.timeout_ms {
        Some(0) => {
            return Err(
                ToolError::invalid("timeout_ms must be at least 1").at("complications.timeout_ms")
            );
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
                .map(|w| target_of(dialect, Some(w), None, "args.window"))
                .transpose()?;
            let roles = a
                .roles
                .map(|roles| {
                    roles
                        .iter()
                        .enumerate()
                        .map(|(i, r)| {
                            let folded = fold(r);
                            if (dialect.knows_role)(&folded) {
                                Ok(folded)
                            } else {
                                Err(ToolError::invalid(format!(
                                    "unknown role `{r}`; use accesskit role names as `ax tree` prints them (button, checkBox, textInput, ...){}",
                                    dialect.other_role_names
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
            let selector = parse_arg(dialect, &a.selector, "args.selector")?;
            let fingerprint = fingerprint(&[&a.selector, &format!("{:?}{:?}", a.app, a.include)]);
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
                target: target_of(dialect, a.reference, a.selector, "args")?,
                app: a.app,
            }
        }
        "focused" => {
            let a: FocusedArgs = decode_args(args)?;
            Job::Focused { app: a.app }
        }
        "act" => {
            let a: ActArgs = decode_args(args)?;
            let target = target_of(dialect, a.reference, a.selector, "args")?;
            match (a.action, &a.value) {
                (ActName::SetValue, None) => {
                    return Err(
                        ToolError::invalid("set_value needs `value` (text or number)")
                            .at("args.value"),
                    );
                }
                (ActName::SetValue, Some(Value::String(_) | Value::Number(_))) => {}
                (ActName::SetValue, Some(secret @ Value::Object(_))) => {
                    crate::secrets::secret_in_place(secret, "args.value")?;
                }
                (ActName::SetValue, Some(_)) => {
                    return Err(ToolError::invalid(
                        "`value` must be a string, a number or {\"secret\": \"keychain://…\"}",
                    )
                    .at("args.value"));
                }
                (_, Some(_)) => {
                    return Err(
                        ToolError::invalid("`value` is only for action set_value").at("args.value")
                    );
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
            let selector = parse_arg(dialect, &a.selector, "args.selector")?;
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
                            .valid(dialect.until_examples.iter().copied()));
                        }
                    }
                }
            };
            let wait = match a.timeout_ms {
                Some(0) => {
                    return Err(
                        ToolError::invalid("timeout_ms must be at least 1").at("args.timeout_ms")
                    );
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
    Ok((job, timeout.unwrap_or(DEFAULT_TIMEOUT)))
}

impl Job {
    /// The app the args name, if any.
    pub fn app(&self) -> Option<&AppArg> {
        match self {
            Job::Apps { .. } => None,
            Job::Tree { app, .. }
            | Job::Find { app, .. }
            | Job::Read { app, .. }
            | Job::Focused { app }
            | Job::Act { app, .. }
            | Job::Wait { app, .. } => app.as_ref(),
        }
    }

    /// The ref the command acts on or reads, if it names one.
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    pub fn element_ref(&self) -> Option<u32> {
        match self {
            Job::Read { target, .. } | Job::Act { target, .. } => match target {
                Target::Ref(r) => Some(*r),
                Target::Selector(_) => None,
            },
            Job::Tree {
                window: Some(Target::Ref(r)),
                ..
            } => Some(*r),
            _ => None,
        }
    }

    /// The target as the args spell it (unresolved): the app by name or pid, the window by
    /// selector or ref. None for `apps`, which is about no app.
    pub fn spelled_target(&self) -> Option<TargetFacts> {
        if let Job::Apps { .. } = self {
            return None;
        }
        let window_id = match self {
            Job::Tree {
                window: Some(Target::Ref(r)),
                ..
            } => Some(format!("[{r}]")),
            Job::Tree {
                window: Some(Target::Selector(selector)),
                ..
            } => Some(selector.source.clone()),
            _ => None,
        };
        let (app, pid) = match self.app() {
            Some(AppArg::Name(name)) => (Some(name.clone()), None),
            Some(AppArg::Pid(pid)) => (None, Some(*pid)),
            None => (None, None),
        };
        Some(TargetFacts {
            app,
            pid,
            window: None,
            window_id,
            resolved: false,
        })
    }

    pub fn risk(&self) -> Risk {
        match self {
            Job::Act { .. } if self.secret().is_some() => Risk::Secret,
            Job::Act { .. } => Risk::Act,
            _ => Risk::Observe,
        }
    }

    /// The stored secret `set_value` sets, when its value is `{"secret": "keychain://…"}`
    /// (checked at prepare); resolved only when the call runs.
    pub fn secret(&self) -> Option<crate::secret_store::SecretRef> {
        match self {
            Job::Act {
                value: Some(value @ Value::Object(_)),
                ..
            } => crate::secrets::secret_in_place(value, "args.value")
                .ok()
                .flatten(),
            _ => None,
        }
    }

    /// The element an act acts on, as the call names it (a ref or a selector).
    pub fn element_named(&self) -> Option<String> {
        match self {
            Job::Act {
                target: Target::Ref(r),
                ..
            } => Some(format!("[{r}]")),
            Job::Act {
                target: Target::Selector(selector),
                ..
            } => Some(format!("`{}`", selector.source)),
            _ => None,
        }
    }

    /// What the call will do, in words, for receipts and approval prompts.
    pub fn describe(&self) -> String {
        let scope = |app: &Option<AppArg>| match app {
            Some(app) => format!(" in app {app}"),
            None => String::new(),
        };
        let target = |t: &Target| match t {
            Target::Ref(r) => format!("ref [{r}]"),
            Target::Selector(s) => format!("`{}`", s.source),
        };
        match self {
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
                    Some(Value::Object(_)) => {
                        format!("{action} {} to a stored secret{}", target(t), scope(app))
                    }
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
}

fn parse_arg(dialect: &Dialect, source: &str, at: &str) -> Result<Selector, ToolError> {
    selector::parse(source, dialect.knows_role)
        .map_err(|err| ToolError::invalid(format!("selector `{source}` {err}")).at(at.to_string()))
}

/// A ref (`12`, `"12"`, `"[12]"`) or a selector.
fn target_of(
    dialect: &Dialect,
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
                Ok(Target::Selector(parse_arg(dialect, &text, at)?))
            } else {
                Err(ToolError::invalid(format!(
                    "ref `{text}` is not a ref; refs are the numbers in brackets, e.g. 12 or \"[12]\""
                ))
                .at("args.ref"))
            }
        }
        (None, Some(selector)) => Ok(Target::Selector(parse_arg(
            dialect,
            &selector,
            "args.selector",
        )?)),
        (Some(_), Some(_)) => Err(ToolError::invalid("give either selector or ref, not both")
            .at(at.to_string())
            .valid(["selector", "ref"])),
        (None, None) => Err(ToolError::invalid("this command needs a selector or a ref")
            .at(at.to_string())
            .valid(["selector", "ref"])),
    }
}

/// A short hash of `parts`, each kept apart from the next.
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

/// What an outline line or JSON node shows of one element, whichever backend read it.
pub struct Shown<'a> {
    pub depth: u32,
    pub role: Role,
    pub name: &'a str,
    pub states: StateSet,
    pub value: Option<&'a str>,
    /// `i32::MIN` for x or y: the element is off screen.
    pub bounds: Option<(i32, i32, i32, i32)>,
    pub actions: &'a [String],
    pub child_count: i64,
}

/// One outline line (without indentation): `[12] button "Save" (focusable)`.
pub fn line(node: &Shown, r: u32, include: Include, max_depth: u32) -> String {
    let mut out = format!("[{r}] {}", role_name(node.role));
    if !node.name.is_empty() {
        out.push(' ');
        out.push_str(&quote(node.name));
    }
    if let Some(value) = node.value
        && (!value.is_empty() || node.states.contains(State::Editable))
        && value != node.name
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
        if x == i32::MIN || y == i32::MIN {
            out.push_str(" @offscreen");
        } else {
            out.push_str(&format!(" @{x},{y} {w}x{h}"));
        }
    }
    if include.actions && !node.actions.is_empty() {
        out.push_str(&format!(" actions:{}", node.actions.join(",")));
    }
    if node.depth >= max_depth && node.child_count > 0 {
        out.push_str(&format!(" +{}", node.child_count));
    }
    out
}

/// A node as JSON for programs.
pub fn json_node(node: &Shown, r: u32, include: Include) -> Value {
    let mut v =
        json!({"ref": r, "depth": node.depth, "role": role_name(node.role), "name": node.name});
    let states = if include.states {
        all_states(node.states)
    } else {
        key_states(node.states, node.role)
    };
    v["states"] = json!(states);
    if node.child_count > 0 {
        v["children"] = json!(node.child_count);
    }
    if include.bounds
        && let Some((x, y, w, h)) = node.bounds
    {
        v["bounds"] = if x == i32::MIN || y == i32::MIN {
            Value::Null
        } else {
            json!([x, y, w, h])
        };
    }
    if include.actions {
        v["actions"] = json!(node.actions);
    }
    if let Some(value) = node.value {
        v["value"] = json!(value);
    }
    v
}

/// The first fields `read` reports of a node: its description and all its states (its value or
/// text follow, read as each backend can). Its ref, role and name are on its outline line
/// (`node`), which [`read_outcome`] adds.
pub fn read_fields(node: &Shown, description: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    if !description.is_empty() {
        fields.insert("description".into(), json!(description));
    }
    fields.insert("states".into(), json!(all_states(node.states)));
    fields
}

/// `read`'s result: `fields` and `texts` with the node's bounds, actions and outline line.
pub fn read_outcome(
    node: &Shown,
    r: u32,
    mut fields: Map<String, Value>,
    texts: Vec<CapturedText>,
) -> Outcome {
    if let Some((x, y, w, h)) = node.bounds
        && x != i32::MIN
    {
        fields.insert("bounds".into(), json!([x, y, w, h]));
    }
    if !node.actions.is_empty() {
        fields.insert("actions".into(), json!(node.actions));
    }
    fields.insert(
        "node".into(),
        json!(line(node, r, Include::default(), u32::MAX)),
    );
    Outcome {
        success: true,
        fields,
        texts,
        ..Outcome::default()
    }
}

/// The nodes of one walk as a backend renders them, for [`paged`].
pub trait Listing {
    /// How deep node `i` sits below the walk's roots.
    fn depth(&self, i: usize) -> u32;
    /// Node `i` as an outline line (with its ref, without indentation).
    fn line(&self, i: usize, include: Include, max_depth: u32) -> String;
    /// Node `i` as a JSON object (with its ref).
    fn json(&self, i: usize, include: Include) -> Value;
    /// Where node `i` sits (its window and parents), for flat lists of matches.
    fn where_is(&self, i: usize) -> String;
}

/// Renders one page of `order` (indices into `nodes`) as the command's text and fields: whole
/// lines within the node and byte budgets, a cursor when more follow (`capped`: the walk itself
/// stopped short), and a revision that lets `since` skip an unchanged page.
#[allow(clippy::too_many_arguments)]
pub fn paged(
    nodes: &impl Listing,
    order: &[usize],
    page: &Page,
    max_depth: u32,
    indent: bool,
    text_name: &str,
    capped: bool,
    total: Option<usize>,
) -> Outcome {
    let mut text = String::new();
    let mut items: Vec<String> = Vec::new();
    let mut shown = 0usize;
    let mut bytes = 2usize;
    for &i in order.iter().skip(page.offset) {
        if shown >= page.max_nodes {
            break;
        }
        let rendered = match page.format {
            Format::Outline => {
                let pad = if indent {
                    "  ".repeat(nodes.depth(i) as usize)
                } else {
                    String::new()
                };
                let mut l = format!("{pad}{}", nodes.line(i, page.include, max_depth));
                if !indent {
                    l.push_str(&nodes.where_is(i));
                }
                l
            }
            Format::Json => nodes.json(i, page.include).to_string(),
        };
        // Pages end on whole lines within the caller's byte budget, so the runtime never has to
        // cut a tree mid-line; the cursor picks up the rest.
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
    let revision = {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(text.as_bytes());
        hasher.update(cursor.as_deref().unwrap_or("").as_bytes());
        hex::encode(&hasher.finalize()[..6])
    };
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
    let texts = if unchanged {
        Vec::new()
    } else {
        vec![CapturedText::from_bytes(text_name, text.into_bytes())]
    };
    Outcome {
        success: true,
        fields,
        texts,
        ..Outcome::default()
    }
}
