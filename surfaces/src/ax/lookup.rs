//! What the ax commands share once validated, over any [`Backend`]: the backend and the ref
//! table, resolving apps, windows, refs and selectors to elements, the approver check before any
//! action, paging walked nodes, and errors a model can act on. Written once for every OS.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::call::{self, AppArg, Page, Target, line};
use super::selector::{NodeFacts, Selector, TextMatch};
use crate::accessibility::backend::{
    AppInfo, AxError, Backend, Failure, ForestOf, Include, MAX_WALK, NodeOf, UNLIMITED_DEPTH,
    WalkPlan, said,
};
use crate::accessibility::read_back::quote;
use crate::{Outcome, ProtectedProcesses, SurfaceError};
use computer_ipc::{ErrorCode, ToolError};

/// Nothing matches what the call names; `message` shows what is there instead.
pub fn no_match(message: impl Into<String>) -> Failure {
    Failure::Coded(ErrorCode::NoMatch, message.into())
}

/// State shared by every call: the backend and the ref table.
pub struct Ax<B: Backend> {
    pub backend: B,
    pub refs: Refs<B::Element>,
}

/// Short numeric refs for elements, stable for as long as the daemon runs.
pub struct Refs<E> {
    inner: Mutex<RefsInner<E>>,
}

struct RefsInner<E> {
    by_element: HashMap<E, u32>,
    entries: Vec<E>,
}

impl<E> Default for Refs<E> {
    fn default() -> Self {
        Refs {
            inner: Mutex::new(RefsInner {
                by_element: HashMap::new(),
                entries: Vec::new(),
            }),
        }
    }
}

/// Past this many refs the table starts over; refs handed out before then stop resolving (and
/// say so) rather than the table growing without bound.
const MAX_REFS: usize = 1_000_000;

impl<E: Clone + Eq + Hash> Refs<E> {
    pub fn get(&self, element: &E) -> u32 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = inner.by_element.get(element) {
            return *r;
        }
        if inner.entries.len() >= MAX_REFS {
            inner.by_element.clear();
            inner.entries.clear();
        }
        inner.entries.push(element.clone());
        let r = inner.entries.len() as u32;
        inner.by_element.insert(element.clone(), r);
        r
    }

    pub fn resolve(&self, r: u32) -> Option<E> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.entries.get((r as usize).checked_sub(1)?).cloned()
    }
}

impl Failure {
    pub fn into_surface_error<B: Backend>(self, ax: &Ax<B>) -> SurfaceError {
        match self {
            Failure::Ax(err) => failure(ax, err),
            Failure::Said(message) | Failure::KeysOnly(message) => SurfaceError::Failed { message },
            Failure::Refused(message) => SurfaceError::Refused { message },
            Failure::Coded(code, message) => SurfaceError::Tool(ToolError::new(code, message)),
        }
    }
}

fn failure<B: Backend>(ax: &Ax<B>, err: AxError) -> SurfaceError {
    let message = match err {
        AxError::Unavailable(message) => message,
        AxError::Timeout { app, after } => unresponsive(ax, &app, after),
        // Nothing is there any more to act on: a miss, not a failed action.
        AxError::Gone => {
            return SurfaceError::Tool(ToolError::new(
                ErrorCode::NoMatch,
                "the element is gone (its window closed, or its app quit or crashed); look it up again with `ax find` or `ax tree`, or `ax apps` to see whether the app is still there",
            ));
        }
        AxError::Other(why) => format!("the accessibility call failed: {why}"),
    };
    SurfaceError::Failed { message }
}

pub fn unresponsive<B: Backend>(ax: &Ax<B>, app: &str, after: Duration) -> String {
    format!(
        "{} has not answered for {} ms: it is busy, frozen or stopped. Until it answers a ping again the daemon sends it nothing else, so a retry adds no load; other apps still work",
        ax.backend.describe_app(app),
        after.as_millis().max(1)
    )
}

/// Apps named (case-insensitively; exact before substring) or with the pid given.
fn pick_apps<B: Backend>(
    ax: &Ax<B>,
    apps: Vec<AppInfo<B::Element>>,
    which: &AppArg,
) -> Result<Vec<AppInfo<B::Element>>, Failure> {
    let picked: Vec<AppInfo<B::Element>> = match which {
        AppArg::Pid(pid) => {
            let listed: Vec<_> = apps
                .iter()
                .filter(|a| a.pid == Some(*pid))
                .cloned()
                .collect();
            if listed.is_empty() {
                ax.backend.app_by_pid(*pid).into_iter().collect()
            } else {
                listed
            }
        }
        AppArg::Name(name) => {
            let want = name.to_lowercase();
            let exact: Vec<_> = apps
                .iter()
                .filter(|a| a.name.to_lowercase() == want)
                .cloned()
                .collect();
            if exact.is_empty() {
                apps.iter()
                    .filter(|a| a.name.to_lowercase().contains(&want))
                    .cloned()
                    .collect()
            } else {
                exact
            }
        }
    };
    if picked.is_empty() {
        let names: Vec<String> = apps
            .iter()
            .filter(|a| a.unresponsive.is_none())
            .map(|a| match a.pid {
                Some(pid) => format!("{} (pid {pid})", a.name),
                None => a.name.clone(),
            })
            .collect();
        return Err(no_match(format!(
            "no accessible app matches {which}; apps on the bus: {}",
            if names.is_empty() {
                "none (is the app running on this desktop, with accessibility enabled?)".into()
            } else {
                names.join(", ")
            }
        )));
    }
    Ok(picked)
}

/// The apps a command is about: those named, or every app.
async fn scoped_apps<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    app: &Option<AppArg>,
    windows: bool,
) -> Result<Vec<AppInfo<B::Element>>, Failure> {
    let apps = ax.backend.apps(deadline, windows).await?;
    match app {
        Some(which) => pick_apps(ax, apps, which),
        None => Ok(apps),
    }
}

/// The roots a search starts from (the named apps, or every app), and the apps skipped because
/// they do not answer.
pub async fn scope_roots<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    app: &Option<AppArg>,
) -> Result<(Vec<B::Element>, Vec<String>), Failure> {
    let chosen = scoped_apps(ax, deadline, app, false).await?;
    if let (Some(_), [only]) = (app, chosen.as_slice())
        && let Some(after) = only.unresponsive
    {
        return Err(said(unresponsive(ax, &only.key, after)));
    }
    let skipped = chosen
        .iter()
        .filter(|a| a.unresponsive.is_some())
        .map(|a| a.name.clone())
        .collect();
    let roots = chosen
        .into_iter()
        .filter(|a| a.unresponsive.is_none())
        .map(|a| a.element)
        .collect();
    Ok((roots, skipped))
}

/// Walks the whole of `roots` (bounded by the backend's walk limit) for a selector search.
pub async fn walk_all<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    roots: &[B::Element],
    include: Include,
    selector: Option<&Selector>,
) -> Result<ForestOf<B>, AxError> {
    let plan = WalkPlan {
        max_depth: UNLIMITED_DEPTH,
        include,
        attribute_keys: selector.map(Selector::attribute_keys).unwrap_or_default(),
        need: None,
        roles: None,
        showing_only: false,
    };
    ax.backend.walk(roots, deadline, &plan).await
}

/// The nodes a selector picks, in document order.
pub fn evaluate<B: Backend>(forest: &ForestOf<B>, selector: &Selector) -> Vec<usize> {
    let order = forest.preorder(u32::MAX);
    let mut marked: Option<HashSet<usize>> = None;
    let mut hits = Vec::new();
    for step in &selector.steps {
        hits = order
            .iter()
            .copied()
            .filter(|&i| step.matches(&forest.nodes[i]))
            .filter(|&i| match &marked {
                None => true,
                Some(set) => forest.ancestors(i).iter().any(|a| set.contains(a)),
            })
            .collect();
        if let Some(n) = step.ordinal {
            hits = hits.get(n - 1).copied().into_iter().collect();
        }
        marked = Some(hits.iter().copied().collect());
    }
    hits
}

/// The nearest window or dialog above `i`, for telling candidates apart.
pub fn where_is<B: Backend>(forest: &ForestOf<B>, i: usize) -> String {
    let chain = forest.ancestors(i);
    let container = chain.iter().rev().find(|&&a| {
        matches!(
            forest.nodes[a].role,
            accesskit::Role::Window | accesskit::Role::Dialog | accesskit::Role::Application
        )
    });
    match container {
        Some(&a) if !forest.nodes[a].name.is_empty() => {
            format!(
                " in {} {}",
                forest.nodes[a].role_name(),
                quote(&forest.nodes[a].name)
            )
        }
        _ => String::new(),
    }
}

pub fn node_line<B: Backend>(ax: &Ax<B>, node: &NodeOf<B>, include: Include) -> String {
    line(&shown(node), shown_ref(ax, node), include, u32::MAX)
}

/// The ref of a node an output shows, noted for the observation's snapshot.
pub fn shown_ref<B: Backend>(ax: &Ax<B>, node: &NodeOf<B>) -> u32 {
    let r = ax.refs.get(&node.element);
    super::seen::note(r, || (node.role_name(), node.name.clone()));
    r
}

/// What an outline line or JSON node shows of a node.
pub fn shown<E, N>(node: &crate::accessibility::backend::Node<E, N>) -> call::Shown<'_> {
    call::Shown {
        depth: node.depth,
        role: node.role,
        name: &node.name,
        states: node.states,
        value: node.value.as_deref(),
        bounds: node.bounds,
        actions: &node.actions,
        child_count: node.child_count,
        listed: node.children_partial.then_some(node.children.len()),
    }
}

/// Resolves a selector to exactly one element, or says why not: ambiguity lists the candidates,
/// a miss shows what is there.
async fn resolve_one<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    selector: &Selector,
    app: &Option<AppArg>,
) -> Result<B::Element, Failure> {
    let (roots, skipped) = scope_roots(ax, deadline, app).await?;
    let include = Include {
        attributes: selector.needs_attributes(),
        ..Include::default()
    };
    let forest = walk_all(ax, deadline, &roots, include, Some(selector)).await?;
    let hits = evaluate::<B>(&forest, selector);
    match hits.as_slice() {
        [one] => Ok(forest.nodes[*one].element.clone()),
        [] => Err(no_match(missing_message(
            ax, &forest, selector, app, &skipped,
        ))),
        many => Err(Failure::Coded(
            ErrorCode::Ambiguous,
            ambiguous_message(ax, &forest, selector, many),
        )),
    }
}

fn ambiguous_message<B: Backend>(
    ax: &Ax<B>,
    forest: &ForestOf<B>,
    selector: &Selector,
    hits: &[usize],
) -> String {
    let mut text = format!(
        "selector `{}` matches {} elements; use a ref, an ordinal (`{}:2`) or an ancestor (`window \"...\" > {}`):",
        selector.source,
        hits.len(),
        selector.source,
        selector.source
    );
    for &i in hits.iter().take(10) {
        text.push('\n');
        text.push_str(&node_line(ax, &forest.nodes[i], Include::default()));
        text.push_str(&where_is::<B>(forest, i));
    }
    if hits.len() > 10 {
        text.push_str(&format!("\n... and {} more", hits.len() - 10));
    }
    text
}

fn missing_message<B: Backend>(
    ax: &Ax<B>,
    forest: &ForestOf<B>,
    selector: &Selector,
    app: &Option<AppArg>,
    skipped: &[String],
) -> String {
    let scope = match app {
        Some(app) => format!("app {app}"),
        None => "any app".into(),
    };
    let mut text = format!("no element matches `{}` in {scope}", selector.source);
    if forest.capped {
        text.push_str(&format!(
            " (searched the first {MAX_WALK} elements only; narrow with `app`)"
        ));
    }
    if !skipped.is_empty() {
        text.push_str(&format!(
            " (skipped, not answering: {})",
            skipped.join(", ")
        ));
    }
    let similar = similar_nodes::<B>(forest, selector, 8);
    if !similar.is_empty() {
        text.push_str("\nsimilar:");
        for i in similar {
            text.push('\n');
            text.push_str(&node_line(ax, &forest.nodes[i], Include::default()));
            text.push_str(&where_is::<B>(forest, i));
        }
    }
    // The top of the first window shows what the scope holds.
    let top: Vec<usize> = forest
        .preorder(u32::MAX)
        .iter()
        .copied()
        .filter(|&i| forest.nodes[i].depth >= 1)
        .take(12)
        .collect();
    if !top.is_empty() {
        text.push_str("\nthere is:");
        for i in top {
            let node = &forest.nodes[i];
            text.push('\n');
            text.push_str(&"  ".repeat(node.depth.saturating_sub(1) as usize));
            text.push_str(&node_line(ax, node, Include::default()));
        }
    }
    text
}

/// Up to `limit` elements whose names are near what the selector's last step asks for (a part
/// of it, or a typo away), in document order: what a miss shows instead.
pub fn similar_nodes<B: Backend>(
    forest: &ForestOf<B>,
    selector: &Selector,
    limit: usize,
) -> Vec<usize> {
    let last = selector.steps.last().cloned().unwrap_or_default();
    let wanted_name = match &last.name {
        Some(TextMatch::Exact(n)) | Some(TextMatch::Contains(n)) => Some(n.to_lowercase()),
        _ => None,
    };
    forest
        .preorder(u32::MAX)
        .into_iter()
        .filter(|&i| {
            let node = &forest.nodes[i];
            let name = node.name.to_lowercase();
            let role_ok = last.role.as_ref().is_none_or(|r| {
                let (ak, native) = node.roles();
                *r == ak || *r == native
            });
            match &wanted_name {
                Some(want) if !name.is_empty() => {
                    name.contains(want.as_str())
                        || want.contains(name.as_str())
                        || (role_ok && close(&name, want))
                }
                Some(_) => false,
                None => role_ok && !name.is_empty(),
            }
        })
        .take(limit)
        .collect()
}

/// Names within a small edit distance (typos, a changed letter).
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 || b.len() > 64 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row.push((prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()] <= 2
}

/// A target as an element: refs through the table, selectors through a search.
pub async fn locate<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    target: &Target,
    app: &Option<AppArg>,
) -> Result<B::Element, Failure> {
    match target {
        Target::Ref(r) => ax.refs.resolve(*r).ok_or_else(|| {
            no_match(format!(
                "ref [{r}] is unknown to this daemon; refs come from `ax tree`/`ax find` output"
            ))
        }),
        Target::Selector(selector) => resolve_one(ax, deadline, selector, app).await,
    }
}

/// The element a target names, its ref and everything about it, read once. A ref is read as the
/// ref table remembers it; a selector is resolved afresh. With approvers connected, an element
/// of an approver's process (or of one whose pid the platform will not give) is refused here,
/// before anything is done to it: no agent may press, type into or focus an approver's widgets.
pub async fn located<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    target: &Target,
    app: &Option<AppArg>,
    protected: Option<&ProtectedProcesses>,
) -> Result<(u32, NodeOf<B>), Failure> {
    let element = locate(ax, deadline, target, app).await?;
    if let Some(protected) = protected
        && !protected.is_empty()
    {
        let pid = ax.backend.pid(&element, deadline).await;
        if pid.is_none_or(|pid| protected.contains(pid)) {
            return Err(Failure::Refused(format!(
                "refused: the target's application ({}) is an approver (where a person answers \
                 approval requests); agents may not act on it",
                pid.map_or("pid unknown".into(), |pid| format!("pid {pid}"))
            )));
        }
    }
    let r = ax.refs.get(&element);
    match ax.backend.read(&element, deadline).await? {
        Some(node) => Ok((r, node)),
        None => Err(no_match(match target {
            Target::Ref(r) => format!(
                "ref [{r}] is gone: the element no longer exists (its window closed or its app quit); find it again with `ax find`"
            ),
            Target::Selector(_) => {
                "the element is gone: it vanished while being read; try again".into()
            }
        })),
    }
}

/// The window a bare `tree` (or `focused`) is about: the active one, else the only one there is.
pub async fn active_window<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    app: &Option<AppArg>,
) -> Result<B::Element, Failure> {
    let apps = scoped_apps(ax, deadline, app, true).await?;
    let windows: Vec<_> = apps.iter().flat_map(|a| a.windows.iter()).collect();
    if let Some(w) = windows.iter().find(|w| w.active) {
        return Ok(w.element.clone());
    }
    if let [w] = windows.as_slice() {
        return Ok(w.element.clone());
    }
    Err(no_match(format!(
        "no window is active; pass `app` (one of: {}) or `window`",
        apps.iter()
            .filter(|a| !a.windows.is_empty())
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The walked nodes as the shared pager renders them, each with its ref.
struct Listed<'a, B: Backend> {
    ax: &'a Ax<B>,
    forest: &'a ForestOf<B>,
}

impl<B: Backend> call::Listing for Listed<'_, B> {
    fn depth(&self, i: usize) -> u32 {
        self.forest.nodes[i].depth
    }

    fn line(&self, i: usize, include: Include, max_depth: u32) -> String {
        let node = &self.forest.nodes[i];
        line(&shown(node), shown_ref(self.ax, node), include, max_depth)
    }

    fn json(&self, i: usize, include: Include) -> Value {
        let node = &self.forest.nodes[i];
        call::json_node(&shown(node), shown_ref(self.ax, node), include)
    }

    fn where_is(&self, i: usize) -> String {
        where_is::<B>(self.forest, i)
    }
}

/// Renders one page of `order` as the command's text and fields, naming the apps left out.
#[allow(clippy::too_many_arguments)]
pub fn paged<B: Backend>(
    ax: &Ax<B>,
    forest: &ForestOf<B>,
    order: &[usize],
    page: &Page,
    max_depth: u32,
    indent: bool,
    text_name: &str,
    skipped: Vec<String>,
    total: Option<usize>,
) -> Outcome {
    let mut outcome = call::paged(
        &Listed { ax, forest },
        order,
        page,
        max_depth,
        indent,
        text_name,
        forest.capped,
        total,
    );
    if !skipped.is_empty() {
        outcome.fields.insert("skipped".into(), json!(skipped));
    }
    outcome
}
