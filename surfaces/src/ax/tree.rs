//! Walking accessible trees: a preorder-bounded, concurrent fetch (only as much of the tree as
//! the requested page needs), seeded from the apps' own caches where they have one, the
//! daemon-side ref table, and the outline and JSON renderings.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use accesskit::Role;
use atspi::{Role as AtspiRole, StateSet};
use futures::future::join_all;
use serde_json::Value;
use zbus::zvariant::OwnedValue;

use super::bus::{self, ACCESSIBLE, Bus, BusError};
use super::cache::{self, AppCache, CachedNode};
use super::call::{self, Include, Shown};
use super::roles::{fold, map_role, role_name};
use super::selector::NodeFacts;

/// No walk fetches more nodes than this, whatever was asked: a runaway tree (a browser with a
/// huge document) stays bounded in time and memory.
pub const MAX_WALK: usize = 20_000;
/// How many nodes are fetched concurrently in one round.
const BATCH: usize = 256;

// The optional parts of a node are fetched only when asked for.
impl Include {
    fn needs_interfaces(self) -> bool {
        self.bounds || self.actions || self.value
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub bus: String,
    pub path: String,
    pub parent: Option<usize>,
    pub depth: u32,
    pub fetched: bool,
    pub gone: bool,
    pub expanded: bool,
    pub children: Vec<usize>,
    pub atspi_role: AtspiRole,
    pub role: Role,
    pub name: String,
    pub description: String,
    pub id: String,
    pub states: StateSet,
    pub child_count: i32,
    pub interfaces: Vec<String>,
    pub bounds: Option<(i32, i32, i32, i32)>,
    pub actions: Vec<String>,
    pub value: Option<String>,
    pub attributes: HashMap<String, String>,
}

impl Node {
    fn pending(bus: String, path: String, parent: Option<usize>, depth: u32) -> Node {
        Node {
            bus,
            path,
            parent,
            depth,
            fetched: false,
            gone: false,
            expanded: false,
            children: Vec::new(),
            atspi_role: AtspiRole::Unknown,
            role: Role::Unknown,
            name: String::new(),
            description: String::new(),
            id: String::new(),
            states: StateSet::empty(),
            child_count: 0,
            interfaces: Vec::new(),
            bounds: None,
            actions: Vec::new(),
            value: None,
            attributes: HashMap::new(),
        }
    }

    pub fn has_interface(&self, short: &str) -> bool {
        let full = format!("org.a11y.atspi.{short}");
        self.interfaces.contains(&full)
    }

    pub fn role_name(&self) -> String {
        role_name(self.role)
    }
}

impl NodeFacts for Node {
    fn roles(&self) -> (String, String) {
        (fold(&role_name(self.role)), fold(self.atspi_role.name()))
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
            _ => self.attributes.get(key).cloned(),
        }
    }
}

/// A partially fetched forest of accessibles.
#[derive(Debug, Default)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub roots: Vec<usize>,
    /// Apps (by bus name) that did not answer, with the wait that ran out.
    pub unresponsive: HashMap<String, std::time::Duration>,
    /// True when the walk stopped at [`MAX_WALK`].
    pub capped: bool,
    /// The apps' own caches, by bus name, where [`Tree::seed`] found one.
    caches: HashMap<String, Arc<AppCache>>,
}

/// What a walk must fetch.
#[derive(Debug, Clone, Copy)]
pub struct WalkPlan {
    /// Deepest level (relative to the roots, which are 0) whose children are fetched+shown.
    pub max_depth: u32,
    pub include: Include,
}

impl Tree {
    pub fn new(roots: &[(String, String)]) -> Tree {
        let mut tree = Tree::default();
        for (bus, path) in roots {
            tree.roots.push(tree.nodes.len());
            tree.nodes
                .push(Node::pending(bus.clone(), path.clone(), None, 0));
        }
        tree
    }

    /// Loads the cache of every app the roots belong to (one call per app, concurrently), so
    /// that the walk asks each app only for what its cache lacks. An app without a usable cache
    /// is walked call by call; one that does not answer is marked unresponsive, as a walk would.
    /// `whole`: the walk will cover most of the tree (not one small page).
    pub async fn seed(
        &mut self,
        ax_bus: &Bus,
        conn: &zbus::Connection,
        deadline: Instant,
        whole: bool,
    ) {
        let mut buses: Vec<String> = self
            .roots
            .iter()
            .map(|&i| self.nodes[i].bus.clone())
            .filter(|b| !self.caches.contains_key(b))
            .collect();
        buses.sort();
        buses.dedup();
        let loads = buses
            .iter()
            .map(|b| cache::load(ax_bus, conn, deadline, b.as_str(), whole));
        for (bus_name, loaded) in buses.iter().zip(join_all(loads).await) {
            match loaded {
                Ok(Some(cache)) => {
                    self.caches.insert(bus_name.clone(), cache);
                }
                Ok(None) => {}
                Err(BusError::Timeout { bus, after }) => {
                    self.unresponsive.insert(bus, after);
                }
                // A broken connection shows again in the walk, which reports it.
                Err(_) => {}
            }
        }
    }

    /// Fetches until the first `need` nodes accepted by `emit` (in preorder) are known, or the
    /// whole tree when `need` is `None`.
    pub async fn walk(
        &mut self,
        conn: &zbus::Connection,
        deadline: Instant,
        plan: WalkPlan,
        need: Option<usize>,
        emit: &(dyn Fn(&Node) -> bool + Sync),
        emit_unknown: bool,
    ) -> Result<(), BusError> {
        loop {
            let batch = self.frontier(plan, need, emit, emit_unknown);
            if batch.is_empty() {
                return Ok(());
            }
            if self.nodes.len() >= MAX_WALK {
                self.capped = true;
                return Ok(());
            }
            let fetches = batch.iter().map(|&i| {
                let node = &self.nodes[i];
                let expand = node.depth < plan.max_depth;
                let known = self
                    .caches
                    .get(&node.bus)
                    .and_then(|cache| cache.get(&node.path));
                fetch(
                    conn,
                    deadline,
                    &node.bus,
                    &node.path,
                    expand,
                    plan.include,
                    known,
                )
            });
            let results = join_all(fetches).await;
            for (i, result) in batch.into_iter().zip(results) {
                match result {
                    Ok(fetched) => self.store(i, fetched),
                    Err(BusError::Gone) => {
                        self.nodes[i].gone = true;
                        self.nodes[i].fetched = true;
                    }
                    Err(BusError::Timeout { bus, after }) => {
                        self.nodes[i].gone = true;
                        self.nodes[i].fetched = true;
                        self.unresponsive.insert(bus, after);
                    }
                    Err(BusError::Other(why)) => {
                        // One odd object should not sink the tree; it is shown as gone.
                        tracing::debug!(path = %self.nodes[i].path, %why, "accessible skipped");
                        self.nodes[i].gone = true;
                        self.nodes[i].fetched = true;
                    }
                    Err(err @ BusError::Connect(_)) => return Err(err),
                }
            }
            if Instant::now() >= deadline {
                return Err(BusError::Timeout {
                    bus: self
                        .nodes
                        .first()
                        .map(|n| n.bus.clone())
                        .unwrap_or_default(),
                    after: std::time::Duration::ZERO,
                });
            }
        }
    }

    /// The next nodes to fetch: unfetched nodes met in preorder before `need` emitted nodes.
    fn frontier(
        &self,
        plan: WalkPlan,
        need: Option<usize>,
        emit: &(dyn Fn(&Node) -> bool + Sync),
        emit_unknown: bool,
    ) -> Vec<usize> {
        let mut batch = Vec::new();
        let mut counted = 0usize;
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        let dead: HashSet<&str> = self.unresponsive.keys().map(String::as_str).collect();
        while let Some(i) = stack.pop() {
            let node = &self.nodes[i];
            if node.gone || dead.contains(node.bus.as_str()) {
                continue;
            }
            if !node.fetched {
                batch.push(i);
                if emit_unknown {
                    counted += 1;
                }
                if batch.len() >= BATCH {
                    break;
                }
            } else {
                if emit(node) && node.depth <= plan.max_depth {
                    counted += 1;
                }
                stack.extend(node.children.iter().rev());
            }
            if need.is_some_and(|need| counted >= need) {
                break;
            }
        }
        batch
    }

    fn store(&mut self, i: usize, fetched: Fetched) {
        let depth = self.nodes[i].depth;
        let mut children = Vec::new();
        if let Some(kids) = &fetched.children {
            for (bus, path) in kids {
                children.push(self.nodes.len());
                self.nodes
                    .push(Node::pending(bus.clone(), path.clone(), Some(i), depth + 1));
            }
        }
        let node = &mut self.nodes[i];
        node.fetched = true;
        node.expanded = fetched.children.is_some();
        node.children = children;
        node.atspi_role = fetched.atspi_role;
        node.role = map_role(fetched.atspi_role, fetched.states);
        node.name = fetched.name;
        node.description = fetched.description;
        node.id = fetched.id;
        node.states = fetched.states;
        node.child_count = fetched.child_count;
        node.interfaces = fetched.interfaces;
        node.bounds = fetched.bounds;
        node.actions = fetched.actions;
        node.value = fetched.value;
        node.attributes = fetched.attributes;
    }

    /// Live nodes in preorder, down to `max_depth`.
    pub fn preorder(&self, max_depth: u32) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            let node = &self.nodes[i];
            if node.gone || !node.fetched || node.depth > max_depth {
                continue;
            }
            out.push(i);
            stack.extend(node.children.iter().rev());
        }
        out
    }

    /// The ancestors of `i`, outermost first.
    pub fn ancestors(&self, i: usize) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut at = self.nodes[i].parent;
        while let Some(p) = at {
            chain.push(p);
            at = self.nodes[p].parent;
        }
        chain.reverse();
        chain
    }
}

/// What one round fetches of one node.
#[derive(Debug)]
pub struct Fetched {
    atspi_role: AtspiRole,
    name: String,
    description: String,
    id: String,
    states: StateSet,
    child_count: i32,
    children: Option<Vec<(String, String)>>,
    interfaces: Vec<String>,
    bounds: Option<(i32, i32, i32, i32)>,
    actions: Vec<String>,
    value: Option<String>,
    attributes: HashMap<String, String>,
}

fn string_of(props: &HashMap<String, OwnedValue>, key: &str) -> String {
    props
        .get(key)
        .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
        .unwrap_or_default()
}

/// Fetches one node: from its app's cache when `known`, asking only for what the cache lacks,
/// else its properties, role and states (and children when `expand`) at once; then the optional
/// parts its interfaces allow.
pub async fn fetch(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    expand: bool,
    include: Include,
    known: Option<&CachedNode>,
) -> Result<Fetched, BusError> {
    let mut fetched = match known {
        Some(node) => from_cache(conn, deadline, dest, path, expand, include, node).await?,
        None => fetch_basics(conn, deadline, dest, path, expand, include).await?,
    };
    if include.needs_interfaces() {
        fetch_parts(conn, deadline, dest, path, include, &mut fetched).await?;
    }
    Ok(fetched)
}

/// A node the cache knows: children only when the cache cannot vouch for its child list, the
/// id and attributes only when asked for.
async fn from_cache(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    expand: bool,
    include: Include,
    node: &CachedNode,
) -> Result<Fetched, BusError> {
    let children = async {
        match (&node.children, expand) {
            (_, false) => Ok(None),
            (Some(paths), true) => Ok(Some(
                paths
                    .iter()
                    .map(|p| (dest.to_string(), p.clone()))
                    .collect::<Vec<_>>(),
            )),
            (None, true) => bus::children(conn, deadline, dest, path).await.map(Some),
        }
    };
    // Shown as "+N" on a node at the depth limit.
    let count = async {
        match (node.child_count, expand) {
            (Some(n), _) => Ok(n),
            (None, true) => Ok(0),
            (None, false) => {
                bus::property::<i32>(conn, deadline, dest, path, ACCESSIBLE, "ChildCount")
                    .await
                    .or_else(|err| match err {
                        BusError::Timeout { .. } | BusError::Connect(_) => Err(err),
                        _ => Ok(0),
                    })
            }
        }
    };
    let extra = async {
        if include.attributes {
            let id =
                bus::property::<String>(conn, deadline, dest, path, ACCESSIBLE, "AccessibleId");
            let (id, attributes) = futures::join!(id, attributes_of(conn, deadline, dest, path));
            Ok((tolerate(id)?.unwrap_or_default(), attributes?))
        } else {
            Ok((String::new(), HashMap::new()))
        }
    };
    let (children, count, extra) = futures::join!(children, count, extra);
    let children = children?;
    let child_count = match (&children, node.child_count) {
        (Some(kids), None) => kids.len() as i32,
        _ => count?,
    };
    let (id, attributes) = extra?;
    Ok(Fetched {
        atspi_role: node.atspi_role,
        name: node.name.clone(),
        description: node.description.clone(),
        id,
        states: node.states,
        child_count,
        children,
        interfaces: node.interfaces.clone(),
        bounds: None,
        actions: Vec::new(),
        value: None,
        attributes,
    })
}

async fn attributes_of(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<HashMap<String, String>, BusError> {
    bus::call::<_, HashMap<String, String>>(
        conn,
        deadline,
        dest,
        path,
        ACCESSIBLE,
        "GetAttributes",
        &(),
    )
    .await
    .or_else(|err| match err {
        BusError::Timeout { .. } => Err(err),
        _ => Ok(HashMap::new()),
    })
}

/// A node the cache does not know: its properties, role and states (and children when
/// `expand`), all at once.
async fn fetch_basics(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    expand: bool,
    include: Include,
) -> Result<Fetched, BusError> {
    let props = bus::properties(conn, deadline, dest, path, ACCESSIBLE);
    let role = bus::call::<_, u32>(conn, deadline, dest, path, ACCESSIBLE, "GetRole", &());
    let state = bus::call::<_, Vec<u32>>(conn, deadline, dest, path, ACCESSIBLE, "GetState", &());
    let children = async {
        if expand {
            bus::children(conn, deadline, dest, path).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let interfaces = async {
        if include.needs_interfaces() {
            bus::call::<_, Vec<String>>(
                conn,
                deadline,
                dest,
                path,
                ACCESSIBLE,
                "GetInterfaces",
                &(),
            )
            .await
        } else {
            Ok(Vec::new())
        }
    };
    let attributes = async {
        if include.attributes {
            attributes_of(conn, deadline, dest, path).await
        } else {
            Ok(HashMap::new())
        }
    };
    let (props, role, state, children, interfaces, attributes) =
        futures::join!(props, role, state, children, interfaces, attributes);
    let props = props?;
    Ok(Fetched {
        atspi_role: AtspiRole::try_from(role?).unwrap_or(AtspiRole::Unknown),
        name: string_of(&props, "Name"),
        description: string_of(&props, "Description"),
        id: string_of(&props, "AccessibleId"),
        states: cache::state_set(&state?),
        child_count: props
            .get("ChildCount")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0),
        children: children?,
        interfaces: interfaces?,
        attributes: attributes?,
        bounds: None,
        actions: Vec::new(),
        value: None,
    })
}

/// Bounds, actions and value, as far as `include` asks and the node's interfaces allow.
async fn fetch_parts(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    include: Include,
    fetched: &mut Fetched,
) -> Result<(), BusError> {
    let has = |short: &str| {
        let full = format!("org.a11y.atspi.{short}");
        fetched.interfaces.contains(&full)
    };
    let (want_bounds, want_actions, want_text, want_value) = (
        include.bounds && has("Component"),
        include.actions && has("Action"),
        include.value && has("Text"),
        include.value && has("Value"),
    );
    let bounds = async {
        if want_bounds {
            bus::call::<_, (i32, i32, i32, i32)>(
                conn,
                deadline,
                dest,
                path,
                "org.a11y.atspi.Component",
                "GetExtents",
                &(0u32,),
            )
            .await
            .map(Some)
        } else {
            Ok(None)
        }
    };
    let actions = async {
        if want_actions {
            action_names(conn, deadline, dest, path).await
        } else {
            Ok(Vec::new())
        }
    };
    let value = async {
        if want_text {
            text_of(conn, deadline, dest, path, Some(4096))
                .await
                .map(Some)
        } else if want_value {
            bus::property::<f64>(
                conn,
                deadline,
                dest,
                path,
                "org.a11y.atspi.Value",
                "CurrentValue",
            )
            .await
            .map(|v| Some(format_number(v)))
        } else {
            Ok(None)
        }
    };
    let (bounds, actions, value) = futures::join!(bounds, actions, value);
    fetched.bounds = tolerate(bounds)?.flatten();
    fetched.actions = tolerate(actions)?.unwrap_or_default();
    fetched.value = tolerate(value)?.flatten();
    Ok(())
}

/// Optional parts may fail on odd objects; only a timeout (the app is stuck) is fatal.
fn tolerate<T>(result: Result<T, BusError>) -> Result<Option<T>, BusError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(err @ BusError::Timeout { .. }) | Err(err @ BusError::Connect(_)) => Err(err),
        Err(_) => Ok(None),
    }
}

pub fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The names of an object's actions (GTK3 says "click", AccessKit "click").
pub async fn action_names(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<Vec<String>, BusError> {
    let actions: Vec<(String, String, String)> = bus::call(
        conn,
        deadline,
        dest,
        path,
        "org.a11y.atspi.Action",
        "GetActions",
        &(),
    )
    .await?;
    Ok(actions.into_iter().map(|(name, _, _)| name).collect())
}

/// The text of a Text object, up to `limit` characters.
pub async fn text_of(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    limit: Option<i32>,
) -> Result<String, BusError> {
    bus::call(
        conn,
        deadline,
        dest,
        path,
        "org.a11y.atspi.Text",
        "GetText",
        &(0i32, limit.unwrap_or(-1)),
    )
    .await
}

/// Short numeric refs for (bus name, path) pairs, stable for as long as the daemon runs.
#[derive(Debug, Default)]
pub struct Refs {
    inner: Mutex<RefsInner>,
}

#[derive(Debug, Default)]
struct RefsInner {
    by_key: HashMap<(String, String), u32>,
    entries: Vec<(String, String)>,
}

/// Past this many refs the table starts over; refs handed out before then stop resolving (and
/// say so) rather than the table growing without bound.
const MAX_REFS: usize = 1_000_000;

impl Refs {
    pub fn get(&self, bus: &str, path: &str) -> u32 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = (bus.to_string(), path.to_string());
        if let Some(r) = inner.by_key.get(&key) {
            return *r;
        }
        if inner.entries.len() >= MAX_REFS {
            inner.by_key.clear();
            inner.entries.clear();
        }
        inner.entries.push(key.clone());
        let r = inner.entries.len() as u32;
        inner.by_key.insert(key, r);
        r
    }

    pub fn resolve(&self, r: u32) -> Option<(String, String)> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.entries.get((r as usize).checked_sub(1)?).cloned()
    }
}

impl Node {
    /// What an outline line or JSON node shows of this node.
    pub fn shown(&self) -> Shown<'_> {
        Shown {
            depth: self.depth,
            role: self.role,
            name: &self.name,
            states: self.states,
            value: self.value.as_deref(),
            bounds: self.bounds,
            actions: &self.actions,
            child_count: i64::from(self.child_count),
        }
    }
}

/// One outline line (without indentation): `[12] button "Save" (focusable)`.
pub fn line(node: &Node, r: u32, include: Include, max_depth: u32) -> String {
    call::line(&node.shown(), r, include, max_depth)
}

/// A node as JSON for programs.
pub fn json_node(node: &Node, r: u32, include: Include) -> Value {
    call::json_node(&node.shown(), r, include)
}
