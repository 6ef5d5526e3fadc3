//! What the ax commands share in their args and their output, for the AT-SPI and AX backends
//! alike: the app, ref and paging args and their checks (targets, selectors, cursors), and the
//! rendering of nodes and of one page of a listing. What differs by backend comes in through
//! [`Dialect`].

use crate::accessibility::roles::{State, StateSet};
use accesskit::Role;
use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::selector::{self, Selector};
use crate::accessibility::backend::{Dialect, Include};
use crate::accessibility::read_back::quote;
use crate::accessibility::roles::{all_states, key_states, role_name};
use crate::{CapturedText, Outcome};

const DEFAULT_MAX_NODES: usize = 500;
const MAX_MAX_NODES: usize = 5000;

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
pub enum RefArg {
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
pub enum IncludePart {
    States,
    Bounds,
    Actions,
    Value,
}

/// Which element a command is about.
#[derive(Debug, Clone)]
pub enum Target {
    Ref(u32),
    Selector(Selector),
}

impl Target {
    /// The target in words, for a command's description.
    pub fn describe(&self) -> String {
        match self {
            Target::Ref(r) => format!("ref [{r}]"),
            Target::Selector(s) => format!("`{}`", s.source),
        }
    }
}

/// ` in app …` when the args name one, for a command's description.
pub fn in_app(app: &Option<AppArg>) -> String {
    match app {
        Some(app) => format!(" in app {app}"),
        None => String::new(),
    }
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

pub fn parse_arg(dialect: &Dialect, source: &str, at: &str) -> Result<Selector, ToolError> {
    selector::parse(source, dialect.knows_role)
        .map_err(|err| ToolError::invalid(format!("selector `{source}` {err}")).at(at.to_string()))
}

/// A ref (`12`, `"12"`, `"[12]"`) or a selector.
pub fn target_of(
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
pub fn fingerprint(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..4])
}

pub fn page(
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
    /// Only this many of `child_count` children were read (a sheet, a long list that manages
    /// its descendants): the rest are not walked, so the app is not made to build them all.
    pub listed: Option<usize>,
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
    } else if let Some(listed) = node.listed {
        out.push_str(&format!(
            " [{listed} of {} children read]",
            node.child_count
        ));
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
    if let Some(listed) = node.listed {
        v["children_read"] = json!(listed);
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
