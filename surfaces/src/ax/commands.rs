//! What each ax command does once validated, over any [`Backend`]: resolving apps, windows, refs
//! and selectors to elements, the approver check before any action, paging listings, actions
//! and waits, with errors a model can act on. Written once for every OS.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::call::{self, AppArg, Format, Job, Page, Target, Until, line};
use super::seen::AxSnapshot;
use super::selector::{NodeFacts, Selector, TextMatch};
use crate::accessibility::backend::{
    ActName, AppInfo, AxError, Backend, Failure, ForestOf, Include, MAX_WALK, NodeOf,
    UNLIMITED_DEPTH, WalkPlan, said,
};
use crate::accessibility::read_back::{ElementView, Intent, judge, quote};
use crate::accessibility::roles::{StateSet, all_states};
use crate::snapshot::Seen as Bound;
use crate::{CapturedText, Effect, EffectReport, Outcome, ProtectedProcesses, SurfaceError};
use computer_ipc::{ErrorCode, ToolError};

/// Nothing matches what the call names; `message` shows what is there instead.
fn no_match(message: impl Into<String>) -> Failure {
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
            Failure::Said(message) => SurfaceError::Failed { message },
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
                "the element is gone (its window closed or its app quit); look it up again with `ax find` or `ax tree`",
            ));
        }
        AxError::Other(why) => format!("the accessibility call failed: {why}"),
    };
    SurfaceError::Failed { message }
}

fn unresponsive<B: Backend>(ax: &Ax<B>, app: &str, after: Duration) -> String {
    format!(
        "{} did not answer within {} ms: it is busy, frozen or stopped; other apps still work, retry once it responds",
        ax.backend.describe_app(app),
        after.as_millis().max(1)
    )
}

/// Runs one validated command.
pub async fn run<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    job: Job,
    protected: &ProtectedProcesses,
    seen: Option<&Bound<AxSnapshot>>,
) -> Result<Outcome, Failure> {
    ax.backend.ready(deadline).await?;
    match job {
        Job::Apps { format } => apps_command(ax, deadline, format).await,
        Job::Tree {
            app,
            window,
            page,
            roles,
            depth,
        } => tree_command(ax, deadline, app, window, page, roles, depth).await,
        Job::Find {
            selector,
            app,
            page,
        } => find_command(ax, deadline, selector, app, page).await,
        Job::Read { target, app } => read_command(ax, deadline, target, app).await,
        Job::Focused { app } => focused_command(ax, deadline, app).await,
        Job::Act {
            target,
            app,
            action,
            value,
        } => act_command(ax, deadline, target, app, action, value, protected, seen).await,
        Job::Wait {
            selector,
            app,
            until,
            timeout,
        } => wait_command(ax, deadline, selector, app, until, timeout).await,
    }
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
async fn scope_roots<B: Backend>(
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
async fn walk_all<B: Backend>(
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
fn where_is<B: Backend>(forest: &ForestOf<B>, i: usize) -> String {
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

fn node_line<B: Backend>(ax: &Ax<B>, node: &NodeOf<B>, include: Include) -> String {
    line(&shown(node), shown_ref(ax, node), include, u32::MAX)
}

/// The ref of a node an output shows, noted for the observation's snapshot.
fn shown_ref<B: Backend>(ax: &Ax<B>, node: &NodeOf<B>) -> u32 {
    let r = ax.refs.get(&node.element);
    super::seen::note(r, || (node.role_name(), node.name.clone()));
    r
}

/// What an outline line or JSON node shows of a node.
fn shown<E, N>(node: &crate::accessibility::backend::Node<E, N>) -> call::Shown<'_> {
    call::Shown {
        depth: node.depth,
        role: node.role,
        name: &node.name,
        states: node.states,
        value: node.value.as_deref(),
        bounds: node.bounds,
        actions: &node.actions,
        child_count: node.child_count,
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
fn similar_nodes<B: Backend>(
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
async fn locate<B: Backend>(
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
async fn located<B: Backend>(
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

async fn apps_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    format: Format,
) -> Result<Outcome, Failure> {
    let apps = ax.backend.apps(deadline, true).await?;
    let about = |app: &AppInfo<B::Element>| {
        let mut parts = Vec::new();
        if let Some(pid) = app.pid {
            parts.push(format!("pid {pid}"));
        }
        if let Some(address) = &app.address {
            parts.push(address.clone());
        }
        parts.join(", ")
    };
    let text = match format {
        Format::Outline => {
            let mut text = String::new();
            for app in &apps {
                text.push_str(&format!("{} ({})", app.name, about(app)));
                if let Some(after) = app.unresponsive {
                    text.push_str(&format!(": not answering within {} ms", after.as_millis()));
                } else {
                    let windows: Vec<String> = app
                        .windows
                        .iter()
                        .map(|w| {
                            format!(
                                "[{}] {}{}",
                                ax.refs.get(&w.element),
                                quote(&w.name),
                                if w.active { " (active)" } else { "" }
                            )
                        })
                        .collect();
                    if !windows.is_empty() {
                        text.push_str(": ");
                        text.push_str(&windows.join(", "));
                    }
                }
                text.push('\n');
            }
            text
        }
        Format::Json => {
            let list: Vec<Value> = apps
                .iter()
                .map(|app| {
                    let mut entry = json!({
                        "name": app.name, "pid": app.pid,
                        "responsive": app.unresponsive.is_none(),
                        "windows": app.windows.iter().map(|w| json!({
                            "ref": ax.refs.get(&w.element), "name": w.name, "active": w.active
                        })).collect::<Vec<_>>(),
                    });
                    if let Some(address) = &app.address {
                        entry["bus"] = json!(address);
                    }
                    entry
                })
                .collect();
            serde_json::to_string(&list).unwrap_or_default()
        }
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

/// The window a bare `tree` (or `focused`) is about: the active one, else the only one there is.
async fn active_window<B: Backend>(
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

async fn tree_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    app: Option<AppArg>,
    window: Option<Target>,
    page: Page,
    roles: Option<Vec<String>>,
    depth: Option<u32>,
) -> Result<Outcome, Failure> {
    let (roots, skipped) = match (&window, &app) {
        (Some(target), _) => (vec![locate(ax, deadline, target, &app).await?], vec![]),
        (None, Some(_)) => scope_roots(ax, deadline, &app).await?,
        (None, None) => (vec![active_window(ax, deadline, &app).await?], vec![]),
    };
    let plan = WalkPlan {
        max_depth: depth.unwrap_or(UNLIMITED_DEPTH),
        include: page.include,
        attribute_keys: Vec::new(),
        // One node past the page tells whether there is more.
        need: Some(page.offset + page.max_nodes + 1),
        roles: roles.map(|r| r.into_iter().collect()),
    };
    let forest = ax.backend.walk(&roots, deadline, &plan).await?;
    if roots.len() == 1
        && let Some((app, after)) = forest.unresponsive.iter().next()
    {
        return Err(said(unresponsive(ax, app, *after)));
    }
    let order: Vec<usize> = forest
        .preorder(plan.max_depth)
        .into_iter()
        .filter(|&i| plan.emits(&forest.nodes[i]))
        .collect();
    let skipped = skipped
        .into_iter()
        .chain(
            forest
                .unresponsive
                .keys()
                .map(|app| ax.backend.describe_app(app)),
        )
        .collect();
    Ok(paged(
        ax,
        &forest,
        &order,
        &page,
        plan.max_depth,
        true,
        "tree",
        skipped,
        None,
    ))
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
fn paged<B: Backend>(
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

async fn find_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    selector: Selector,
    app: Option<AppArg>,
    page: Page,
) -> Result<Outcome, Failure> {
    let (roots, mut skipped) = scope_roots(ax, deadline, &app).await?;
    let include = Include {
        attributes: selector.needs_attributes(),
        ..page.include
    };
    let forest = walk_all(ax, deadline, &roots, include, Some(&selector)).await?;
    if app.is_some()
        && roots.len() == 1
        && let Some((key, after)) = forest.unresponsive.iter().next()
    {
        return Err(said(unresponsive(ax, key, *after)));
    }
    skipped.extend(
        forest
            .unresponsive
            .keys()
            .map(|key| ax.backend.describe_app(key)),
    );
    let hits = evaluate::<B>(&forest, &selector);
    let total = hits.len();
    Ok(paged(
        ax,
        &forest,
        &hits,
        &page,
        u32::MAX,
        false,
        "matches",
        skipped,
        Some(total),
    ))
}

async fn read_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    target: Target,
    app: Option<AppArg>,
) -> Result<Outcome, Failure> {
    let (r, node) = located(ax, deadline, &target, &app, None).await?;
    super::seen::note(r, || (node.role_name(), node.name.clone()));
    let mut fields = call::read_fields(&shown(&node), &node.description);
    let contents = ax.backend.contents(&node, deadline).await?;
    let mut texts = Vec::new();
    if let Some(text) = contents.text {
        texts.push(CapturedText::from_bytes("text", text.into_bytes()));
    } else if let Some(value) = &node.value {
        fields.insert("value".into(), json!(value));
    }
    if let Some(value) = contents.value {
        fields.insert("value".into(), value);
    }
    Ok(call::read_outcome(&shown(&node), r, fields, texts))
}

async fn focused_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    app: Option<AppArg>,
) -> Result<Outcome, Failure> {
    let window = active_window(ax, deadline, &app).await?;
    let Some((forest, i)) = ax.backend.focused(&window, deadline).await? else {
        return Err(no_match(
            "nothing in the active window has keyboard focus; `ax act` with action focus gives it",
        ));
    };
    let path: Vec<String> = forest
        .ancestors(i)
        .into_iter()
        .filter(|&a| !forest.nodes[a].name.is_empty())
        .map(|a| {
            format!(
                "{} {}",
                forest.nodes[a].role_name(),
                quote(&forest.nodes[a].name)
            )
        })
        .collect();
    let node = &forest.nodes[i];
    let r = shown_ref(ax, node);
    let mut fields = Map::new();
    fields.insert("ref".into(), json!(r));
    fields.insert(
        "node".into(),
        json!(line(&shown(node), r, Include::default(), u32::MAX)),
    );
    fields.insert("path".into(), json!(path.join(" > ")));
    Ok(Outcome {
        success: true,
        fields,
        ..Outcome::default()
    })
}

#[allow(clippy::too_many_arguments)]
async fn act_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    target: Target,
    app: Option<AppArg>,
    action: ActName,
    value: Option<Value>,
    protected: &ProtectedProcesses,
    seen: Option<&Bound<AxSnapshot>>,
) -> Result<Outcome, Failure> {
    if let Some(seen) = seen {
        super::seen::check_named(seen, &target)?;
    }
    let found = located(ax, deadline, &target, &app, Some(protected)).await;
    let (r, node) = match (found, seen) {
        (Err(failure), Some(seen)) => {
            return Err(super::seen::lookup_failed(seen, &target, failure));
        }
        (found, _) => found?,
    };
    if let Some(seen) = seen {
        // Right before acting: the element is the one the observation showed, as it showed it.
        let now = super::seen::Shown {
            role: node.role_name(),
            name: node.name.clone(),
        };
        super::seen::check_found(seen, &target, r, &now)?;
    }
    let described = line(&shown(&node), r, Include::default(), u32::MAX);
    let setting_value = action == ActName::SetValue;
    // What the act is judged on, read before it; where a change may be waited for, the
    // element's change signals are subscribed to before it, so none is missed.
    let intent = match action {
        ActName::Press | ActName::Activate => Intent::Press,
        ActName::Toggle => Intent::Toggle,
        ActName::Focus => Intent::Focus,
        _ => Intent::State,
    };
    let before = element_view(&node);
    let may_wait = intent != Intent::State && before.shows(intent);
    // An insensitive element is waited on for the quiet time, with no signal to expect.
    let mut watch = match may_wait && !before.insensitive() {
        true => ax.backend.watch(&node.element, deadline).await,
        false => None,
    };
    let acted = ax
        .backend
        .act(&node, action, value, &described, deadline)
        .await?;
    // The reply says what happened and what changed; the ref and the action asked for are the
    // caller's own words, and unchanged states would only repeat them.
    let mut fields = Map::new();
    fields.insert("done".into(), json!(acted.done));
    if let Some(via) = acted.via {
        fields.insert("via".into(), json!(via));
    }
    if let Some(value) = acted.value {
        fields.insert("value".into(), value);
    }
    // The element as it is now (it may be gone: a button that closes its window), read until
    // the intended change shows where one is expected, within the settle wait.
    let waits = acted.done && may_wait;
    let started = Instant::now();
    let mut pause = crate::effect::READ_BACK_FIRST_POLL;
    // A sensitive element signals its change when the toolkit applies it: waiting for that
    // first spares the read that would most often find it not changed yet.
    if let Some(watch) = watch.as_mut()
        && waits
    {
        watch.changed_within(crate::effect::READ_BACK_POLL).await;
    }
    let after = loop {
        let after = ax
            .backend
            .read(&node.element, deadline)
            .await
            .ok()
            .flatten();
        let report = judge(
            intent,
            &before,
            after.as_ref().map(element_view).as_ref(),
            acted.done,
        );
        if !waits
            || report.effect == Effect::Confirmed
            || started.elapsed() >= crate::effect::READ_BACK_QUIET
            || Instant::now() + pause >= deadline
        {
            break after;
        }
        match watch.as_mut() {
            Some(watch) => watch.changed_within(pause).await,
            None => tokio::time::sleep(pause).await,
        }
        pause = (pause * 2).min(crate::effect::READ_BACK_POLL);
    };
    let report = if setting_value {
        // The value read back against the one asked for (never quoted: it may be a secret).
        let changed = after.as_ref().map(element_view) != Some(before.clone());
        match (acted.done, changed) {
            (true, _) => EffectReport::new(
                Effect::Confirmed,
                format!("{} reads back the value set", before.label()),
            ),
            (false, true) => EffectReport::new(
                Effect::Partial,
                format!(
                    "{} changed but does not read back the value set",
                    before.label()
                ),
            ),
            (false, false) => EffectReport::new(
                Effect::SuspectedNoop,
                format!("{} did not change", before.label()),
            ),
        }
    } else {
        judge(
            intent,
            &before,
            after.as_ref().map(element_view).as_ref(),
            acted.done,
        )
    };
    match after {
        Some(after) => {
            let changed = changed_states(node.states, after.states);
            if !changed.is_empty() {
                fields.insert("changed".into(), json!(changed));
            }
            fields.insert(
                "node".into(),
                json!(line(&shown(&after), r, Include::default(), u32::MAX)),
            );
        }
        None => {
            fields.insert(
                "node".into(),
                json!(format!("{described} (gone after the action)")),
            );
        }
    }
    let mut outcome = Outcome {
        success: acted.done,
        fields,
        ..Outcome::default()
    };
    report.record(&mut outcome);
    Ok(outcome)
}

/// What a read-back compares of a node.
fn element_view<E, N>(node: &crate::accessibility::backend::Node<E, N>) -> ElementView {
    ElementView {
        role: node.role,
        name: node.name.clone(),
        states: node.states,
        value: node.value.clone(),
    }
}

/// The states an action changed: `+checked` for one it gained, `-focused` for one it lost.
fn changed_states(before: StateSet, after: StateSet) -> Vec<String> {
    let (before, after) = (all_states(before), all_states(after));
    let gained = after
        .iter()
        .filter(|s| !before.contains(s))
        .map(|s| format!("+{s}"));
    let lost = before
        .iter()
        .filter(|s| !after.contains(s))
        .map(|s| format!("-{s}"));
    gained.chain(lost).collect()
}

async fn wait_command<B: Backend>(
    ax: &Ax<B>,
    deadline: Instant,
    selector: Selector,
    app: Option<AppArg>,
    until: Until,
    timeout: Duration,
) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let give_up = (started + timeout).min(deadline);
    let include = Include {
        attributes: selector.needs_attributes(),
        ..Include::default()
    };
    let mut pause = Duration::from_millis(40);
    loop {
        // Each poll is bounded by what is left of the wait (an app stuck mid-poll ends it).
        let poll_deadline = give_up
            .max(Instant::now() + Duration::from_millis(200))
            .min(deadline);
        let seen = match scope_roots(ax, poll_deadline, &app).await {
            Ok((roots, _)) => {
                let forest = walk_all(ax, poll_deadline, &roots, include, Some(&selector)).await?;
                let hits = evaluate::<B>(&forest, &selector);
                let met = match until {
                    Until::Appears => !hits.is_empty(),
                    Until::Disappears => hits.is_empty(),
                    Until::State { query, negated } => hits
                        .first()
                        .is_some_and(|&i| query.holds(forest.nodes[i].states) != negated),
                };
                Seen::Walked { met, forest, hits }
            }
            // An app that is not there yet is what `appears` waits for.
            Err(Failure::Said(why)) | Err(Failure::Coded(ErrorCode::NoMatch, why))
                if app.is_some() =>
            {
                Seen::NoApp {
                    met: matches!(until, Until::Disappears),
                    why,
                }
            }
            Err(err) => return Err(err),
        };
        let met = match &seen {
            Seen::Walked { met, .. } | Seen::NoApp { met, .. } => *met,
        };
        if met || Instant::now() + pause >= give_up {
            let waited_ms = started.elapsed().as_millis() as u64;
            return Ok(wait_outcome(ax, &selector, until, seen, waited_ms));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(250));
    }
}

/// What the last poll of a wait saw.
enum Seen<B: Backend> {
    Walked {
        met: bool,
        forest: ForestOf<B>,
        hits: Vec<usize>,
    },
    /// The app named is not on the bus (or not answering): why, in words.
    NoApp { met: bool, why: String },
}

/// A wait's reply. Met: the element, if there is one. Timed out: what was found instead, so the
/// caller can tell a wrong selector from a slow app: the element as it is now (its states and
/// value) when it is there in another state, how many still match when it did not go, the nearest
/// names when nothing matches, or that the app is not there.
fn wait_outcome<B: Backend>(
    ax: &Ax<B>,
    selector: &Selector,
    until: Until,
    seen: Seen<B>,
    waited_ms: u64,
) -> Outcome {
    let mut fields = Map::new();
    let met = match seen {
        Seen::NoApp { met, why } => {
            if !met {
                fields.insert("found".into(), json!(why));
            }
            met
        }
        Seen::Walked { met, forest, hits } => {
            let first = hits.first().map(|&i| &forest.nodes[i]);
            if let Some(node) = first {
                // The ref is what the next call (or step) acts on.
                fields.insert("ref".into(), json!(ax.refs.get(&node.element)));
                fields.insert(
                    "node".into(),
                    json!(node_line(ax, node, Include::default())),
                );
            }
            if !met {
                let found = match (until, first) {
                    (Until::State { .. }, Some(node)) => {
                        fields.insert("states".into(), json!(all_states(node.states)));
                        if let Some(value) = &node.value {
                            fields.insert("value".into(), json!(value));
                        }
                        format!(
                            "`{}` is there, in another state ({})",
                            selector.source,
                            all_states(node.states).join(", ")
                        )
                    }
                    (Until::Disappears, Some(_)) => {
                        format!(
                            "`{}` still matches {} element(s)",
                            selector.source,
                            hits.len()
                        )
                    }
                    _ => {
                        let nearest: Vec<String> = similar_nodes::<B>(&forest, selector, 5)
                            .into_iter()
                            .map(|i| {
                                node_line(ax, &forest.nodes[i], Include::default())
                                    + &where_is::<B>(&forest, i)
                            })
                            .collect();
                        let found = if nearest.is_empty() {
                            format!(
                                "nothing matches `{}`, nor any similar name ({} elements searched)",
                                selector.source,
                                forest.nodes.len()
                            )
                        } else {
                            format!("nothing matches `{}`; nearest names below", selector.source)
                        };
                        if !nearest.is_empty() {
                            fields.insert("nearest".into(), json!(nearest));
                        }
                        found
                    }
                };
                fields.insert("found".into(), json!(found));
            }
            met
        }
    };
    fields.insert("met".into(), json!(met));
    fields.insert("waited_ms".into(), json!(waited_ms));
    Outcome {
        success: met,
        fields,
        ..Outcome::default()
    }
}
