//! What each ax command does once validated: resolving apps, windows, refs and selectors to
//! accessibles, paging listings, performing actions and waiting, with errors a model can act on.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use atspi::State;
use futures::future::join_all;
use serde_json::{Map, Value, json};

use super::Ax;
use super::bus::{self, ACCESSIBLE, BusError, REGISTRY, ROOT_PATH};
use super::cache;
use super::call::{self, ActName, AppArg, Format, Include, Job, Page, Target, Until, quote};
use super::roles::all_states;
use super::selector::{NodeFacts, Selector, TextMatch};
use super::tree::{self, MAX_WALK, Tree, WalkPlan, line};
use crate::{CapturedText, Outcome, ProtectedProcesses, SurfaceError};

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    Bus(BusError),
    /// A message for the model, complete as it is.
    Said(String),
    /// The action would have acted on an approver's application: refused, not attempted.
    Refused(String),
}

impl From<BusError> for Failure {
    fn from(err: BusError) -> Self {
        Failure::Bus(err)
    }
}

impl Failure {
    pub fn into_surface_error(self, ax: &Ax) -> SurfaceError {
        match self {
            Failure::Bus(err) => failure(ax, err),
            Failure::Said(message) => SurfaceError::Failed { message },
            Failure::Refused(message) => SurfaceError::Refused { message },
        }
    }
}

pub fn failure(ax: &Ax, err: BusError) -> SurfaceError {
    let message = match err {
        BusError::Connect(why) => format!(
            "the accessibility bus is unreachable ({why}); check that at-spi2-core runs in this session"
        ),
        BusError::Timeout { bus, after } => unresponsive(ax, &bus, after),
        BusError::Gone => {
            "the element is gone (its window closed or its app quit); look it up again with `ax find` or `ax tree`".into()
        }
        BusError::Other(why) => format!("the accessibility call failed: {why}"),
    };
    SurfaceError::Failed { message }
}

fn unresponsive(ax: &Ax, bus: &str, after: Duration) -> String {
    format!(
        "{} did not answer within {} ms: it is busy, frozen or stopped; other apps still work, retry once it responds",
        ax.bus.describe_app(bus),
        after.as_millis().max(1)
    )
}

/// Up to this many nodes a page is filled faster by walking than by first completing the app
/// cache's missing child lists.
const SMALL_PAGE: usize = 100;

/// How long an action's effect may take to show in the element's states.
const SETTLE_LIMIT: Duration = Duration::from_millis(500);

fn said(message: impl Into<String>) -> Failure {
    Failure::Said(message.into())
}

pub async fn run(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    job: Job,
    protected: &ProtectedProcesses,
) -> Result<Outcome, Failure> {
    match job {
        Job::Apps { format } => apps_command(ax, conn, deadline, format).await,
        Job::Tree {
            app,
            window,
            page,
            roles,
            depth,
        } => tree_command(ax, conn, deadline, app, window, page, roles, depth).await,
        Job::Find {
            selector,
            app,
            page,
        } => find_command(ax, conn, deadline, selector, app, page).await,
        Job::Read { target, app } => read_command(ax, conn, deadline, target, app).await,
        Job::Focused { app } => focused_command(ax, conn, deadline, app).await,
        Job::Act {
            target,
            app,
            action,
            value,
        } => {
            let act = Act { action, value };
            act_command(ax, conn, deadline, target, app, act, protected).await
        }
        Job::Wait {
            selector,
            app,
            until,
            timeout,
        } => wait_command(ax, conn, deadline, selector, app, until, timeout).await,
    }
}

/// An application on the bus.
#[derive(Debug, Clone)]
pub struct AppInfo {
    pub bus: String,
    pub path: String,
    pub name: String,
    pub pid: Option<u32>,
    /// (bus, path, name, active)
    pub windows: Vec<(String, String, String, bool)>,
    pub unresponsive: Option<Duration>,
}

/// Every application registered on the accessibility bus. An app that does not answer is listed
/// as such after at most one call limit instead of failing the listing.
pub async fn list_apps(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
) -> Result<Vec<AppInfo>, BusError> {
    let apps = bus::children(conn, deadline, REGISTRY, ROOT_PATH).await?;
    let infos = apps.into_iter().map(|(app_bus, path)| async move {
        let app_deadline = deadline.min(Instant::now() + ax.bus.listing_limit(&app_bus));
        let pid = bus::pid_of(conn, app_deadline, &app_bus);
        let about = async {
            let name =
                bus::property::<String>(conn, app_deadline, &app_bus, &path, ACCESSIBLE, "Name");
            let windows = bus::children(conn, app_deadline, &app_bus, &path);
            let (name, windows) = futures::join!(name, windows);
            let windows = windows?;
            let details = join_all(windows.iter().map(|(wbus, wpath)| async move {
                let name =
                    bus::property::<String>(conn, app_deadline, wbus, wpath, ACCESSIBLE, "Name");
                let state = bus::call::<_, Vec<u32>>(
                    conn,
                    app_deadline,
                    wbus,
                    wpath,
                    ACCESSIBLE,
                    "GetState",
                    &(),
                );
                let (name, state) = futures::join!(name, state);
                let active = state
                    .map(|s| s.first().copied().unwrap_or(0) & (1 << State::Active as u32) != 0)
                    .unwrap_or(false);
                (
                    wbus.clone(),
                    wpath.clone(),
                    name.unwrap_or_default(),
                    active,
                )
            }))
            .await;
            Ok::<_, BusError>((name?, details))
        };
        let (pid, about) = futures::join!(pid, about);
        match about {
            Ok((name, windows)) => {
                ax.bus.remember_app(&app_bus, &name, pid);
                ax.bus.mark_stuck(&app_bus, false);
                Some(AppInfo {
                    bus: app_bus,
                    path,
                    name,
                    pid,
                    windows,
                    unresponsive: None,
                })
            }
            // It left the bus while being listed.
            Err(BusError::Gone) => None,
            Err(err) => {
                let wait = match err {
                    BusError::Timeout { after, .. } => {
                        ax.bus.mark_stuck(&app_bus, true);
                        Some(after)
                    }
                    _ => None,
                };
                ax.bus.remember_pid(&app_bus, pid);
                Some(AppInfo {
                    name: ax.bus.describe_app(&app_bus),
                    bus: app_bus,
                    path,
                    pid,
                    windows: Vec::new(),
                    unresponsive: wait.or(Some(Duration::ZERO)),
                })
            }
        }
    });
    Ok(join_all(infos).await.into_iter().flatten().collect())
}

/// Apps named (case-insensitively; exact before substring) or with the pid given.
fn pick_apps(apps: &[AppInfo], which: &AppArg) -> Result<Vec<AppInfo>, Failure> {
    let picked: Vec<AppInfo> = match which {
        AppArg::Pid(pid) => apps
            .iter()
            .filter(|a| a.pid == Some(*pid))
            .cloned()
            .collect(),
        AppArg::Name(name) => {
            let want = name.to_lowercase();
            let exact: Vec<AppInfo> = apps
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
        return Err(said(format!(
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

/// The roots a search starts from: the named apps, or every app.
async fn scope_roots(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    app: &Option<AppArg>,
) -> Result<(Vec<(String, String)>, Vec<String>), Failure> {
    let apps = list_apps(ax, conn, deadline).await?;
    let chosen = match app {
        Some(which) => pick_apps(&apps, which)?,
        None => apps,
    };
    if let (Some(_), [only]) = (app, chosen.as_slice())
        && let Some(after) = only.unresponsive
    {
        return Err(said(unresponsive(ax, &only.bus, after)));
    }
    let skipped = chosen
        .iter()
        .filter(|a| a.unresponsive.is_some())
        .map(|a| a.name.clone())
        .collect();
    let roots = chosen
        .into_iter()
        .filter(|a| a.unresponsive.is_none())
        .map(|a| (a.bus, a.path))
        .collect();
    Ok((roots, skipped))
}

/// Walks the whole of `roots` (bounded by [`MAX_WALK`]) for a selector search.
async fn walk_all(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    roots: &[(String, String)],
    include: Include,
) -> Result<Tree, BusError> {
    let mut tree = Tree::new(roots);
    tree.seed(&ax.bus, conn, deadline, true).await;
    let plan = WalkPlan {
        max_depth: u32::MAX - 1,
        include,
    };
    tree.walk(conn, deadline, plan, None, &|_| true, true)
        .await?;
    Ok(tree)
}

/// The nodes a selector picks, in document order.
pub fn evaluate(tree: &Tree, selector: &Selector) -> Vec<usize> {
    let order = tree.preorder(u32::MAX);
    let mut marked: Option<HashSet<usize>> = None;
    let mut hits = Vec::new();
    for step in &selector.steps {
        hits = order
            .iter()
            .copied()
            .filter(|&i| step.matches(&tree.nodes[i]))
            .filter(|&i| match &marked {
                None => true,
                Some(set) => tree.ancestors(i).iter().any(|a| set.contains(a)),
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
fn where_is(tree: &Tree, i: usize) -> String {
    let chain = tree.ancestors(i);
    let container = chain.iter().rev().find(|&&a| {
        matches!(
            tree.nodes[a].role,
            accesskit::Role::Window | accesskit::Role::Dialog | accesskit::Role::Application
        )
    });
    match container {
        Some(&a) if !tree.nodes[a].name.is_empty() => {
            format!(
                " in {} {}",
                tree.nodes[a].role_name(),
                quote(&tree.nodes[a].name)
            )
        }
        _ => String::new(),
    }
}

fn node_line(ax: &Ax, tree: &Tree, i: usize, include: Include) -> String {
    let node = &tree.nodes[i];
    line(node, ax.refs.get(&node.bus, &node.path), include, u32::MAX)
}

/// Resolves a selector to exactly one node, or says why not: ambiguity lists the candidates,
/// a miss shows what is there.
async fn resolve_one(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    selector: &Selector,
    app: &Option<AppArg>,
) -> Result<(String, String), Failure> {
    let (roots, skipped) = scope_roots(ax, conn, deadline, app).await?;
    let include = Include {
        attributes: selector.needs_attributes(),
        ..Include::default()
    };
    let tree = walk_all(ax, conn, deadline, &roots, include).await?;
    let hits = evaluate(&tree, selector);
    match hits.as_slice() {
        [one] => {
            let node = &tree.nodes[*one];
            Ok((node.bus.clone(), node.path.clone()))
        }
        [] => Err(said(missing_message(ax, &tree, selector, app, &skipped))),
        many => Err(said(ambiguous_message(ax, &tree, selector, many))),
    }
}

fn ambiguous_message(ax: &Ax, tree: &Tree, selector: &Selector, hits: &[usize]) -> String {
    let mut text = format!(
        "selector `{}` matches {} elements; use a ref, an ordinal (`{}:2`) or an ancestor (`window \"...\" > {}`):",
        selector.source,
        hits.len(),
        selector.source,
        selector.source
    );
    for &i in hits.iter().take(10) {
        text.push('\n');
        text.push_str(&node_line(ax, tree, i, Include::default()));
        text.push_str(&where_is(tree, i));
    }
    if hits.len() > 10 {
        text.push_str(&format!("\n... and {} more", hits.len() - 10));
    }
    text
}

fn missing_message(
    ax: &Ax,
    tree: &Tree,
    selector: &Selector,
    app: &Option<AppArg>,
    skipped: &[String],
) -> String {
    let scope = match app {
        Some(app) => format!("app {app}"),
        None => "any app".into(),
    };
    let mut text = format!("no element matches `{}` in {scope}", selector.source);
    if tree.capped {
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
    let last = selector.steps.last().cloned().unwrap_or_default();
    let wanted_name = match &last.name {
        Some(TextMatch::Exact(n)) | Some(TextMatch::Contains(n)) => Some(n.to_lowercase()),
        _ => None,
    };
    let order = tree.preorder(u32::MAX);
    let similar: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| {
            let node = &tree.nodes[i];
            let name = node.name.to_lowercase();
            let role_ok = last.role.as_ref().is_none_or(|r| {
                let (ak, atspi) = node.roles();
                *r == ak || *r == atspi
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
        .take(8)
        .collect();
    if !similar.is_empty() {
        text.push_str("\nsimilar:");
        for i in similar {
            text.push('\n');
            text.push_str(&node_line(ax, tree, i, Include::default()));
            text.push_str(&where_is(tree, i));
        }
    }
    // The top of the first window shows what the scope holds.
    let top: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| tree.nodes[i].depth >= 1)
        .take(12)
        .collect();
    if !top.is_empty() {
        text.push_str("\nthere is:");
        for i in top {
            let node = &tree.nodes[i];
            text.push('\n');
            text.push_str(&"  ".repeat(node.depth.saturating_sub(1) as usize));
            text.push_str(&node_line(ax, tree, i, Include::default()));
        }
    }
    text
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

/// A target as (bus, path): refs through the table, selectors through a search.
async fn locate(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    target: &Target,
    app: &Option<AppArg>,
) -> Result<(String, String), Failure> {
    match target {
        Target::Ref(r) => ax.refs.resolve(*r).ok_or_else(|| {
            said(format!(
                "ref [{r}] is unknown to this daemon; refs come from `ax tree`/`ax find` output"
            ))
        }),
        Target::Selector(selector) => resolve_one(ax, conn, deadline, selector, app).await,
    }
}

/// Fetches one node with everything (or says it is gone).
async fn fetch_one(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &(String, String),
    r: Option<u32>,
) -> Result<tree::Node, Failure> {
    let mut tree = Tree::new(std::slice::from_ref(at));
    let plan = WalkPlan {
        max_depth: 0,
        include: Include {
            states: true,
            bounds: true,
            actions: true,
            value: true,
            attributes: true,
        },
    };
    tree.walk(conn, deadline, plan, None, &|_| true, true)
        .await?;
    if let Some((bus, after)) = tree.unresponsive.iter().next() {
        return Err(Failure::Bus(BusError::Timeout {
            bus: bus.clone(),
            after: *after,
        }));
    }
    let node = tree.nodes.swap_remove(0);
    if node.gone {
        return Err(said(match r {
            Some(r) => format!(
                "ref [{r}] is gone: the element no longer exists (its window closed or its app quit); find it again with `ax find`"
            ),
            None => "the element is gone: it vanished while being read; try again".into(),
        }));
    }
    Ok(node)
}

async fn apps_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    format: Format,
) -> Result<Outcome, Failure> {
    let apps = list_apps(ax, conn, deadline).await?;
    let text = match format {
        Format::Outline => {
            let mut text = String::new();
            for app in &apps {
                let pid = app.pid.map(|p| format!("pid {p}, ")).unwrap_or_default();
                text.push_str(&format!("{} ({pid}{})", app.name, app.bus));
                if let Some(after) = app.unresponsive {
                    text.push_str(&format!(": not answering within {} ms", after.as_millis()));
                } else {
                    let windows: Vec<String> = app
                        .windows
                        .iter()
                        .map(|(b, p, name, active)| {
                            let r = ax.refs.get(b, p);
                            format!(
                                "[{r}] {}{}",
                                quote(name),
                                if *active { " (active)" } else { "" }
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
                    json!({
                        "name": app.name, "pid": app.pid, "bus": app.bus,
                        "responsive": app.unresponsive.is_none(),
                        "windows": app.windows.iter().map(|(b, p, name, active)| json!({
                            "ref": ax.refs.get(b, p), "name": name, "active": active
                        })).collect::<Vec<_>>(),
                    })
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

/// The window a bare `tree` shows: the active one, else the only one there is.
async fn active_window(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    app: &Option<AppArg>,
) -> Result<(String, String), Failure> {
    let apps = list_apps(ax, conn, deadline).await?;
    let apps = match app {
        Some(which) => pick_apps(&apps, which)?,
        None => apps,
    };
    let windows: Vec<&(String, String, String, bool)> =
        apps.iter().flat_map(|a| a.windows.iter()).collect();
    if let Some((b, p, _, _)) = windows.iter().find(|w| w.3) {
        return Ok((b.clone(), p.clone()));
    }
    if let [(b, p, _, _)] = windows.as_slice() {
        return Ok((b.clone(), p.clone()));
    }
    Err(said(format!(
        "no window is active; pass `app` (one of: {}) or `window`",
        apps.iter()
            .filter(|a| !a.windows.is_empty())
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[allow(clippy::too_many_arguments)]
async fn tree_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    app: Option<AppArg>,
    window: Option<Target>,
    page: Page,
    roles: Option<Vec<String>>,
    depth: Option<u32>,
) -> Result<Outcome, Failure> {
    let (roots, skipped) = match (&window, &app) {
        (Some(target), _) => (
            vec![locate(ax, conn, deadline, target, &app).await?],
            vec![],
        ),
        (None, Some(_)) => scope_roots(ax, conn, deadline, &app).await?,
        (None, None) => (vec![active_window(ax, conn, deadline, &app).await?], vec![]),
    };
    let max_depth = depth.unwrap_or(u32::MAX - 1);
    let roles: Option<HashSet<String>> = roles.map(|r| r.into_iter().collect());
    let emit = |node: &tree::Node| match &roles {
        None => true,
        Some(set) => {
            let (ak, atspi) = node.roles();
            set.contains(&ak) || set.contains(&atspi)
        }
    };
    // One node past the page tells whether there is more.
    let need = page.offset + page.max_nodes + 1;
    let mut tree = Tree::new(&roots);
    tree.seed(
        &ax.bus,
        conn,
        deadline,
        need > SMALL_PAGE && depth.is_none(),
    )
    .await;
    let plan = WalkPlan {
        max_depth,
        include: page.include,
    };
    tree.walk(conn, deadline, plan, Some(need), &emit, roles.is_none())
        .await?;
    if roots.len() == 1
        && let Some((bus, after)) = tree.unresponsive.iter().next()
    {
        return Err(said(unresponsive(ax, bus, *after)));
    }
    let order: Vec<usize> = tree
        .preorder(max_depth)
        .into_iter()
        .filter(|&i| emit(&tree.nodes[i]))
        .collect();
    let skipped = skipped
        .into_iter()
        .chain(tree.unresponsive.keys().map(|b| ax.bus.describe_app(b)))
        .collect();
    Ok(paged(
        ax, &tree, &order, &page, max_depth, true, "tree", skipped, None,
    ))
}

/// The walked nodes as the shared pager renders them, each with its ref.
struct Listed<'a> {
    ax: &'a Ax,
    tree: &'a Tree,
}

impl call::Listing for Listed<'_> {
    fn depth(&self, i: usize) -> u32 {
        self.tree.nodes[i].depth
    }

    fn line(&self, i: usize, include: Include, max_depth: u32) -> String {
        let node = &self.tree.nodes[i];
        line(
            node,
            self.ax.refs.get(&node.bus, &node.path),
            include,
            max_depth,
        )
    }

    fn json(&self, i: usize, include: Include) -> Value {
        let node = &self.tree.nodes[i];
        tree::json_node(node, self.ax.refs.get(&node.bus, &node.path), include)
    }

    fn where_is(&self, i: usize) -> String {
        where_is(self.tree, i)
    }
}

/// Renders one page of `order` as the command's text and fields, naming the apps left out.
#[allow(clippy::too_many_arguments)]
fn paged(
    ax: &Ax,
    tree: &Tree,
    order: &[usize],
    page: &Page,
    max_depth: u32,
    indent: bool,
    text_name: &str,
    skipped: Vec<String>,
    total: Option<usize>,
) -> Outcome {
    let mut outcome = call::paged(
        &Listed { ax, tree },
        order,
        page,
        max_depth,
        indent,
        text_name,
        tree.capped,
        total,
    );
    if !skipped.is_empty() {
        outcome.fields.insert("skipped".into(), json!(skipped));
    }
    outcome
}

async fn find_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    selector: Selector,
    app: Option<AppArg>,
    page: Page,
) -> Result<Outcome, Failure> {
    let (roots, mut skipped) = scope_roots(ax, conn, deadline, &app).await?;
    let include = Include {
        attributes: selector.needs_attributes(),
        ..page.include
    };
    let tree = walk_all(ax, conn, deadline, &roots, include).await?;
    if app.is_some()
        && roots.len() == 1
        && let Some((bus, after)) = tree.unresponsive.iter().next()
    {
        return Err(said(unresponsive(ax, bus, *after)));
    }
    skipped.extend(tree.unresponsive.keys().map(|b| ax.bus.describe_app(b)));
    let hits = evaluate(&tree, &selector);
    let total = hits.len();
    Ok(paged(
        ax,
        &tree,
        &hits,
        &page,
        u32::MAX,
        false,
        "matches",
        skipped,
        Some(total),
    ))
}

async fn read_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    target: Target,
    app: Option<AppArg>,
) -> Result<Outcome, Failure> {
    let (at, r, node) = located(ax, conn, deadline, &target, &app).await?;
    let mut fields = call::read_fields(&node.shown(), r, &node.description);
    let mut texts = Vec::new();
    if node.has_interface("Text") {
        // The whole text goes through the runtime's byte budget (the preview in `value` is short).
        let text = tree::text_of(conn, deadline, &at.0, &at.1, Some(1 << 20)).await?;
        texts.push(CapturedText::from_bytes("text", text.into_bytes()));
    } else if let Some(value) = &node.value {
        fields.insert("value".into(), json!(value));
    }
    if node.has_interface("Value") {
        let v = bus::property::<f64>(
            conn,
            deadline,
            &at.0,
            &at.1,
            "org.a11y.atspi.Value",
            "CurrentValue",
        )
        .await
        .ok();
        if let Some(v) = v {
            fields.insert("value".into(), json!(v));
        }
    }
    Ok(call::read_outcome(&node.shown(), r, fields, texts))
}

async fn focused_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    app: Option<AppArg>,
) -> Result<Outcome, Failure> {
    let window = active_window(ax, conn, deadline, &app).await?;
    let tree = walk_all(
        ax,
        conn,
        deadline,
        std::slice::from_ref(&window),
        Include::default(),
    )
    .await?;
    if let Some((bus, after)) = tree.unresponsive.iter().next() {
        return Err(said(unresponsive(ax, bus, *after)));
    }
    let focused = tree
        .preorder(u32::MAX)
        .into_iter()
        .rfind(|&i| tree.nodes[i].states.contains(State::Focused));
    let Some(i) = focused else {
        return Err(said(
            "nothing in the active window has keyboard focus; `ax act` with action focus gives it",
        ));
    };
    let path: Vec<String> = tree
        .ancestors(i)
        .into_iter()
        .filter(|&a| !tree.nodes[a].name.is_empty())
        .map(|a| {
            format!(
                "{} {}",
                tree.nodes[a].role_name(),
                quote(&tree.nodes[a].name)
            )
        })
        .collect();
    let node = &tree.nodes[i];
    let r = ax.refs.get(&node.bus, &node.path);
    let mut fields = Map::new();
    fields.insert("ref".into(), json!(r));
    fields.insert(
        "node".into(),
        json!(line(node, r, Include::default(), u32::MAX)),
    );
    fields.insert("path".into(), json!(path.join(" > ")));
    Ok(Outcome {
        success: true,
        fields,
        ..Outcome::default()
    })
}

/// The first of `wanted` (case-insensitive) among an object's action names.
fn pick_action(actions: &[String], wanted: &[&str]) -> Option<i32> {
    wanted.iter().find_map(|w| {
        actions
            .iter()
            .position(|a| a.eq_ignore_ascii_case(w))
            .map(|p| p as i32)
    })
}

/// Whether the element's states come to satisfy `holds` soon after an action: toolkits apply
/// most changes before answering the action, some (AccessKit) on their next frame.
async fn settles(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &(String, String),
    holds: impl Fn(atspi::StateSet) -> bool,
) -> bool {
    let give_up = (Instant::now() + SETTLE_LIMIT).min(deadline);
    let mut pause = Duration::from_millis(10);
    loop {
        let states =
            bus::call::<_, Vec<u32>>(conn, deadline, &at.0, &at.1, ACCESSIBLE, "GetState", &())
                .await;
        match states {
            Ok(words) if holds(cache::state_set(&words)) => return true,
            Ok(_) if Instant::now() + pause < give_up => {}
            _ => return false,
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

#[allow(clippy::too_many_arguments)]
async fn act_command(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    target: Target,
    app: Option<AppArg>,
    Act { action, value }: Act,
    protected: &ProtectedProcesses,
) -> Result<Outcome, Failure> {
    let (at, r, node) = located(ax, conn, deadline, &target, &app).await?;
    if !protected.is_empty() {
        // No agent may press, type into or focus an approver's widgets (the approval window); an
        // app whose pid the bus will not give is refused too while approvers are connected.
        let pid = bus::pid_of(conn, deadline, &at.0).await;
        if pid.is_none_or(|pid| protected.contains(pid)) {
            return Err(Failure::Refused(format!(
                "refused: the target's application ({}) is an approver (where a person answers \
                 approval requests); agents may not act on it",
                pid.map_or("pid unknown".into(), |pid| format!("pid {pid}"))
            )));
        }
    }
    let described = line(&node, r, Include::default(), u32::MAX);
    let (dest, path) = (&at.0, &at.1);
    let no_way = |what: &str| {
        said(format!(
            "{described} cannot {what}: its actions are [{}] and its interfaces [{}]",
            node.actions.join(", "),
            node.interfaces
                .iter()
                .map(|i| i.trim_start_matches("org.a11y.atspi."))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let do_action = |index: i32| async move {
        bus::call::<_, bool>(
            conn,
            deadline,
            dest,
            path,
            "org.a11y.atspi.Action",
            "DoAction",
            &(index,),
        )
        .await
    };
    let mut fields = Map::new();
    let done: bool = match action {
        ActName::Press | ActName::Activate | ActName::Toggle => {
            let wanted: &[&str] = match action {
                ActName::Press => &["click", "press", "activate", "jump", "open"],
                ActName::Activate => &["activate", "click", "press", "jump", "open"],
                _ => &["toggle", "click", "press", "activate"],
            };
            let index = pick_action(&node.actions, wanted)
                .ok_or_else(|| no_way(&format!("{action:?}").to_lowercase()))?;
            do_action(index).await?
        }
        ActName::Expand | ActName::Collapse => {
            let want = action == ActName::Expand;
            let expandable = node.states.contains(State::Expandable);
            let specific =
                pick_action(&node.actions, &["expand", "collapse", "expand or contract"]);
            // GTK3 combo boxes open their list on "press" without saying they expand.
            let combo = matches!(
                node.role,
                accesskit::Role::ComboBox | accesskit::Role::EditableComboBox
            );
            if !expandable && specific.is_none() && !combo {
                return Err(no_way(&format!(
                    "{} (it is not expandable)",
                    format!("{action:?}").to_lowercase()
                )));
            }
            if node.states.contains(State::Expanded) == want {
                fields.insert("via".into(), json!("already"));
                true
            } else {
                // The specific actions first; expanders (GTK's GtkExpander) only "activate".
                let wanted: &[&str] = if want {
                    &[
                        "expand",
                        "expand or contract",
                        "open",
                        "activate",
                        "toggle",
                        "press",
                        "click",
                    ]
                } else {
                    &[
                        "collapse",
                        "expand or contract",
                        "close",
                        "activate",
                        "toggle",
                        "press",
                        "click",
                    ]
                };
                let index = pick_action(&node.actions, wanted)
                    .ok_or_else(|| no_way(&format!("{action:?}").to_lowercase()))?;
                do_action(index).await?
                    && (!expandable
                        || settles(conn, deadline, &at, |s| s.contains(State::Expanded) == want)
                            .await)
            }
        }
        ActName::Focus => {
            if !node.has_interface("Component") {
                return Err(no_way("take focus"));
            }
            bus::call::<_, bool>(
                conn,
                deadline,
                dest,
                path,
                "org.a11y.atspi.Component",
                "GrabFocus",
                &(),
            )
            .await?
        }
        ActName::ScrollIntoView => {
            if !node.has_interface("Component") {
                return Err(no_way("scroll into view"));
            }
            // ATSPI_SCROLL_ANYWHERE. GTK3 does not implement ScrollTo (it answers false); its
            // scrolled windows follow the focus, so a focusable element is focused instead.
            let scrolled = bus::call::<_, bool>(
                conn,
                deadline,
                dest,
                path,
                "org.a11y.atspi.Component",
                "ScrollTo",
                &(6u32,),
            )
            .await
            .or_else(|err| match err {
                BusError::Timeout { .. } | BusError::Connect(_) => Err(err),
                _ => Ok(false),
            })?;
            if scrolled {
                fields.insert("via".into(), json!("scroll_to"));
                true
            } else if node.states.contains(State::Focusable) {
                fields.insert("via".into(), json!("focus"));
                bus::call::<_, bool>(
                    conn,
                    deadline,
                    dest,
                    path,
                    "org.a11y.atspi.Component",
                    "GrabFocus",
                    &(),
                )
                .await?
                    && settles(conn, deadline, &at, |s| s.contains(State::Showing)).await
            } else {
                return Err(said(format!(
                    "{described} cannot be scrolled into view: the app does not implement ScrollTo and the element cannot take focus; scroll its container instead (gui scroll)"
                )));
            }
        }
        ActName::Select => {
            if node.states.contains(State::Selected) {
                fields.insert("via".into(), json!("already"));
                true
            } else {
                select(conn, deadline, &at, &node)
                    .await?
                    .ok_or_else(|| no_way("be selected"))?
                    && (!node.states.contains(State::Selectable)
                        || settles(conn, deadline, &at, |s| s.contains(State::Selected)).await)
            }
        }
        ActName::SetValue => {
            let value = value.unwrap_or(Value::Null);
            let number = match &value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            // A spin button is both text and value: a number set as text would only show,
            // not change the value until the field loses focus.
            let as_value = node.has_interface("Value")
                && (number.is_some() || !node.has_interface("EditableText"));
            if !as_value && node.has_interface("EditableText") {
                let text = match &value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let ok = bus::call::<_, bool>(
                    conn,
                    deadline,
                    dest,
                    path,
                    "org.a11y.atspi.EditableText",
                    "SetTextContents",
                    &(text.as_str(),),
                )
                .await?;
                let now = tree::text_of(conn, deadline, dest, path, Some(4096)).await?;
                fields.insert("value".into(), json!(now));
                ok && now == text
            } else if as_value {
                let number = number.ok_or_else(|| {
                    said(format!(
                        "{described} takes a number; `value` {value} is not one"
                    ))
                })?;
                let _: () = bus::call(
                    conn,
                    deadline,
                    dest,
                    path,
                    "org.freedesktop.DBus.Properties",
                    "Set",
                    &(
                        "org.a11y.atspi.Value",
                        "CurrentValue",
                        zbus::zvariant::Value::from(number),
                    ),
                )
                .await?;
                let now: f64 = bus::property(
                    conn,
                    deadline,
                    dest,
                    path,
                    "org.a11y.atspi.Value",
                    "CurrentValue",
                )
                .await?;
                fields.insert("value".into(), json!(now));
                (now - number).abs() < 1e-9
            } else {
                return Err(no_way(
                    "take a value (it is neither editable text nor a value)",
                ));
            }
        }
    };
    fields.insert("ref".into(), json!(r));
    fields.insert("action".into(), json!(format!("{action:?}")));
    fields.insert("done".into(), json!(done));
    // The element as it is now (it may be gone: a button that closes its window).
    let after = fetch_one(conn, deadline, &at, None).await.ok();
    match after {
        Some(node) => {
            fields.insert("states".into(), json!(all_states(node.states)));
            fields.insert(
                "node".into(),
                json!(line(&node, r, Include::default(), u32::MAX)),
            );
        }
        None => {
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

/// Selects a node through its parent's Selection interface, else its own select/click action.
async fn select(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &(String, String),
    node: &tree::Node,
) -> Result<Option<bool>, BusError> {
    let parent: (String, zbus::zvariant::OwnedObjectPath) =
        bus::property(conn, deadline, &at.0, &at.1, ACCESSIBLE, "Parent").await?;
    let index: i32 = bus::call(
        conn,
        deadline,
        &at.0,
        &at.1,
        ACCESSIBLE,
        "GetIndexInParent",
        &(),
    )
    .await?;
    let interfaces: Vec<String> = bus::call(
        conn,
        deadline,
        &parent.0,
        parent.1.as_str(),
        ACCESSIBLE,
        "GetInterfaces",
        &(),
    )
    .await
    .unwrap_or_default();
    if interfaces.iter().any(|i| i == "org.a11y.atspi.Selection") && index >= 0 {
        let ok: bool = bus::call(
            conn,
            deadline,
            &parent.0,
            parent.1.as_str(),
            "org.a11y.atspi.Selection",
            "SelectChild",
            &(index,),
        )
        .await?;
        return Ok(Some(ok));
    }
    match pick_action(&node.actions, &["select", "click", "activate", "press"]) {
        Some(i) => Ok(Some(
            bus::call(
                conn,
                deadline,
                &at.0,
                &at.1,
                "org.a11y.atspi.Action",
                "DoAction",
                &(i,),
            )
            .await?,
        )),
        None => Ok(None),
    }
}

#[allow(clippy::too_many_arguments)]
async fn wait_command(
    ax: &Ax,
    conn: &zbus::Connection,
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
        let found = match scope_roots(ax, conn, poll_deadline, &app).await {
            Ok((roots, _)) => {
                let tree = walk_all(ax, conn, poll_deadline, &roots, include).await?;
                let hits = evaluate(&tree, &selector);
                let first = hits
                    .first()
                    .map(|&i| node_line(ax, &tree, i, Include::default()));
                let met = match until {
                    Until::Appears => !hits.is_empty(),
                    Until::Disappears => hits.is_empty(),
                    Until::State { query, negated } => hits
                        .first()
                        .is_some_and(|&i| query.holds(tree.nodes[i].states) != negated),
                };
                let r = hits
                    .first()
                    .map(|&i| ax.refs.get(&tree.nodes[i].bus, &tree.nodes[i].path));
                Some((met, r, first))
            }
            // An app that is not there yet is what `appears` waits for.
            Err(Failure::Said(_)) if app.is_some() => {
                Some((matches!(until, Until::Disappears), None, None))
            }
            Err(err) => return Err(err),
        };
        if let Some((met, r, first)) = found
            && (met || Instant::now() + pause >= give_up)
        {
            let mut fields = Map::new();
            fields.insert("met".into(), json!(met));
            fields.insert(
                "waited_ms".into(),
                json!(started.elapsed().as_millis() as u64),
            );
            if let Some(r) = r {
                fields.insert("ref".into(), json!(r));
            }
            if let Some(first) = first {
                fields.insert("node".into(), json!(first));
            }
            return Ok(Outcome {
                success: met,
                fields,
                ..Outcome::default()
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(250));
    }
}

/// What `act` does: the action and, for `set_value`, the value.
pub struct Act {
    pub action: ActName,
    pub value: Option<Value>,
}

/// The element a target names: its (bus, path), its ref and its facts. A ref is read as the ref
/// table remembers it; a selector is resolved afresh.
async fn located(
    ax: &Ax,
    conn: &zbus::Connection,
    deadline: Instant,
    target: &Target,
    app: &Option<AppArg>,
) -> Result<((String, String), u32, tree::Node), Failure> {
    let at = locate(ax, conn, deadline, target, app).await?;
    let r = ax.refs.get(&at.0, &at.1);
    let node = fetch_one(
        conn,
        deadline,
        &at,
        matches!(target, Target::Ref(_)).then_some(r),
    )
    .await?;
    Ok((at, r, node))
}
