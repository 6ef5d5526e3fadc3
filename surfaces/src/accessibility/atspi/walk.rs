//! Walking AT-SPI trees: a preorder-bounded, concurrent fetch (only as much of the tree as the
//! requested page needs), seeded from the apps' own caches where they have one, and the reads of
//! one node's optional parts (bounds, actions, text, value).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use ::atspi::Role as AtspiRole;
use futures::future::join_all;
use zbus::zvariant::OwnedValue;

use super::bus::{self, ACCESSIBLE, Bus, BusError};
use super::cache::{self, AppCache, CachedNode};
use super::children::{self, Children};
use super::roles::{map_role, state_set};
use super::{Accessible, AtspiForest, AtspiNative};
use crate::accessibility::backend::{Include, MAX_WALK, WalkPlan};
use crate::accessibility::roles::{State, StateSet};

/// How many nodes are fetched concurrently in one round.
const BATCH: usize = 256;

/// The optional parts of a node are fetched only when asked for.
fn needs_interfaces(include: Include) -> bool {
    include.bounds || include.actions || include.value
}

/// A walk in progress: the forest fetched so far and the apps' caches that seed it.
pub struct Walker {
    pub forest: AtspiForest,
    /// The apps' own caches, by bus name, where [`Walker::seed`] found one.
    caches: HashMap<String, Arc<AppCache>>,
}

impl Walker {
    pub fn new(roots: &[Accessible]) -> Walker {
        Walker {
            forest: AtspiForest::new(roots),
            caches: HashMap::new(),
        }
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
        let forest = &self.forest;
        let mut buses: Vec<String> = forest
            .roots
            .iter()
            .map(|&i| forest.nodes[i].element.bus.clone())
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
                    self.forest.unresponsive.insert(bus, after);
                }
                // A broken connection shows again in the walk, which reports it.
                Err(_) => {}
            }
        }
    }

    /// Fetches until the first `plan.need` nodes that `plan` lists (in preorder) are known, or
    /// the whole tree when `need` is `None`.
    pub async fn walk(
        &mut self,
        conn: &zbus::Connection,
        deadline: Instant,
        plan: &WalkPlan,
    ) -> Result<(), BusError> {
        loop {
            let batch = self.frontier(plan);
            if batch.is_empty() {
                return Ok(());
            }
            if self.forest.nodes.len() >= MAX_WALK {
                self.forest.capped = true;
                return Ok(());
            }
            let fetches = batch.iter().map(|&i| {
                let node = &self.forest.nodes[i];
                let expand = node.depth < plan.max_depth;
                let known = self
                    .caches
                    .get(&node.element.bus)
                    .and_then(|cache| cache.get(&node.element.path));
                fetch(
                    conn,
                    deadline,
                    &node.element.bus,
                    &node.element.path,
                    expand,
                    plan.include,
                    known,
                )
            });
            let results = join_all(fetches).await;
            for (i, result) in batch.into_iter().zip(results) {
                match result {
                    Ok(fetched) => self.store(i, fetched),
                    Err(BusError::Gone) => self.lose(i),
                    Err(BusError::Timeout { bus, after }) => {
                        self.lose(i);
                        self.forest.unresponsive.insert(bus, after);
                    }
                    Err(BusError::Other(why)) => {
                        // One odd object should not sink the tree; it is shown as gone.
                        tracing::debug!(path = %self.forest.nodes[i].element.path, %why, "accessible skipped");
                        self.lose(i);
                    }
                    Err(err @ BusError::Connect(_)) => return Err(err),
                }
            }
            if Instant::now() >= deadline {
                return Err(BusError::Timeout {
                    bus: self
                        .forest
                        .nodes
                        .first()
                        .map(|n| n.element.bus.clone())
                        .unwrap_or_default(),
                    after: std::time::Duration::ZERO,
                });
            }
        }
    }

    fn lose(&mut self, i: usize) {
        self.forest.nodes[i].gone = true;
        self.forest.nodes[i].fetched = true;
    }

    /// The next nodes to fetch: unfetched nodes met in preorder before `need` listed nodes.
    fn frontier(&self, plan: &WalkPlan) -> Vec<usize> {
        let forest = &self.forest;
        // An unfetched node counts toward `need` only when every node is listed.
        let count_unknown = plan.roles.is_none();
        let mut batch = Vec::new();
        let mut counted = 0usize;
        let mut stack: Vec<usize> = forest.roots.iter().rev().copied().collect();
        let dead: HashSet<&str> = forest.unresponsive.keys().map(String::as_str).collect();
        while let Some(i) = stack.pop() {
            let node = &forest.nodes[i];
            if node.gone || dead.contains(node.element.bus.as_str()) {
                continue;
            }
            if !node.fetched {
                batch.push(i);
                if count_unknown {
                    counted += 1;
                }
                if batch.len() >= BATCH {
                    break;
                }
            } else {
                if plan.emits(node) && node.depth <= plan.max_depth {
                    counted += 1;
                }
                if !(plan.showing_only && hidden(forest, i)) {
                    stack.extend(node.children.iter().rev());
                }
            }
            if plan.need.is_some_and(|need| counted >= need) {
                break;
            }
        }
        batch
    }

    fn store(&mut self, i: usize, fetched: Fetched) {
        let nodes = &mut self.forest.nodes;
        let depth = nodes[i].depth;
        let mut children = Vec::new();
        if let Some(kids) = &fetched.children {
            for (bus, path) in &kids.list {
                children.push(nodes.len());
                nodes.push(crate::accessibility::backend::Node::pending(
                    Accessible {
                        bus: bus.clone(),
                        path: path.clone(),
                    },
                    Some(i),
                    depth + 1,
                ));
            }
        }
        let top_level = nodes[i]
            .parent
            .is_some_and(|p| nodes[p].native.role == AtspiRole::Application);
        let node = &mut nodes[i];
        node.fetched = true;
        node.children = children;
        node.role = dialog_as_such(
            map_role(fetched.atspi_role, fetched.states),
            fetched.atspi_role,
            fetched.states,
            top_level,
        );
        node.name = fetched.name;
        node.description = fetched.description;
        node.id = fetched.id;
        node.states = fetched.states;
        node.child_count = i64::from(fetched.child_count);
        node.children_partial = fetched.children.as_ref().is_some_and(|kids| kids.partial);
        node.bounds = fetched.bounds;
        node.actions = fetched.actions;
        node.value = fetched.value;
        node.attributes = fetched.attributes;
        node.native = AtspiNative {
            role: fetched.atspi_role,
            interfaces: fetched.interfaces,
        };
    }
}

/// A dialog whatever role its toolkit gives it: GTK3's file chooser is a modal "file chooser"
/// pane, GTK4's a generic container, both windows of their own. A top-level window of an app
/// that is neither a frame nor a window, or a modal pane, is what an agent calls a `dialog`.
fn dialog_as_such(
    role: accesskit::Role,
    native: AtspiRole,
    states: StateSet,
    top_level: bool,
) -> accesskit::Role {
    use accesskit::Role;
    let modal = states.contains(State::Modal);
    match role {
        Role::Pane | Role::GenericContainer | Role::Unknown if top_level => Role::Dialog,
        Role::Pane if modal || native == AtspiRole::FileChooser && top_level => Role::Dialog,
        role => role,
    }
}

/// Whether node `i` is known not to show: it is not showing while its parent, below the walk's
/// root, is. A toolkit that marks no showing at all (GTK4 marks only its windows) hides nothing
/// this way; one that does (GTK3, LibreOffice, browsers) hides closed menus and what is
/// scrolled out of view.
fn hidden(forest: &AtspiForest, i: usize) -> bool {
    let node = &forest.nodes[i];
    let Some(parent) = node.parent.map(|p| &forest.nodes[p]) else {
        return false;
    };
    !node.states.contains(State::Showing)
        && parent.states.contains(State::Showing)
        && parent.parent.is_some()
}

pub struct Fetched {
    atspi_role: AtspiRole,
    name: String,
    description: String,
    id: String,
    states: StateSet,
    child_count: i32,
    children: Option<Children>,
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
    if needs_interfaces(include) {
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
    // The count first where the cache lacks it: it decides how the children may be read.
    let count = async {
        match node.child_count {
            Some(n) => Ok(n),
            None => bus::property::<i32>(conn, deadline, dest, path, ACCESSIBLE, "ChildCount")
                .await
                .or_else(|err| match err {
                    BusError::Timeout { .. } | BusError::Connect(_) => Err(err),
                    _ => Ok(0),
                }),
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
    let (count, extra) = futures::join!(count, extra);
    let child_count = count?;
    let children = match (&node.children, expand) {
        (_, false) => None,
        (Some(paths), true) => Some(Children {
            list: paths
                .iter()
                .map(|p| (dest.to_string(), p.clone()))
                .collect(),
            partial: false,
        }),
        (None, true) => {
            Some(children::read(conn, deadline, dest, path, node.states, child_count).await?)
        }
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

/// The properties of a node [`fetch_basics`] reads.
const BASIC_PROPERTIES: &[&str] = &["Name", "Description", "AccessibleId", "ChildCount"];

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
    let props = bus::properties(conn, deadline, dest, path, ACCESSIBLE, BASIC_PROPERTIES);
    let role = bus::call::<_, u32>(conn, deadline, dest, path, ACCESSIBLE, "GetRole", &());
    let state = bus::call::<_, Vec<u32>>(conn, deadline, dest, path, ACCESSIBLE, "GetState", &());
    let interfaces = async {
        if needs_interfaces(include) {
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
    let (props, role, state, interfaces, attributes) =
        futures::join!(props, role, state, interfaces, attributes);
    let props = props?;
    let states = state_set(&state?);
    let child_count = props
        .get("ChildCount")
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(0);
    // The children only once the count and states are known: how they may be read depends on
    // them (never the whole list of an object that manages its descendants).
    let children = if expand {
        Some(children::read(conn, deadline, dest, path, states, child_count).await?)
    } else {
        None
    };
    Ok(Fetched {
        atspi_role: AtspiRole::try_from(role?).unwrap_or(AtspiRole::Unknown),
        name: string_of(&props, "Name"),
        description: string_of(&props, "Description"),
        id: string_of(&props, "AccessibleId"),
        states,
        child_count,
        children,
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
    fetched.value = tolerate(value)?
        .flatten()
        .and_then(without_embedded_objects);
    if include.value && fetched.value.is_none() && fetched.atspi_role == AtspiRole::ComboBox {
        fetched.value = tolerate(chosen_option(conn, deadline, dest, path).await)?.flatten();
    }
    Ok(())
}

/// The name of the option a combo box shows as chosen, where its text does not say (a web
/// `<select>` reads as one embedded-object character): the selected child of the combo box
/// itself (GTK), else of its first child, the popup list (Chromium, Firefox).
async fn chosen_option(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<Option<String>, BusError> {
    const SELECTION: &str = "org.a11y.atspi.Selection";
    let selected_of = |holder: String| async move {
        let chosen = bus::call::<_, (String, zbus::zvariant::OwnedObjectPath)>(
            conn,
            deadline,
            dest,
            &holder,
            SELECTION,
            "GetSelectedChild",
            &(0i32,),
        )
        .await;
        match chosen {
            Ok((_, chosen)) if chosen.as_str() != super::NULL_PATH => Ok(Some(chosen)),
            Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => Err(err),
            _ => Ok(None),
        }
    };
    let mut chosen = selected_of(path.to_string()).await?;
    if chosen.is_none() {
        let list = children::child_at(conn, deadline, dest, path, 0).await;
        if let Ok((_, list)) = list
            && list.as_str() != super::NULL_PATH
        {
            chosen = selected_of(list.as_str().to_string()).await?;
        }
    }
    let Some(chosen) = chosen else {
        return Ok(None);
    };
    let name =
        bus::property::<String>(conn, deadline, dest, chosen.as_str(), ACCESSIBLE, "Name").await?;
    Ok((!name.is_empty()).then_some(name))
}

/// Optional parts may fail on odd objects; only a timeout (the app is stuck) is fatal.
fn tolerate<T>(result: Result<T, BusError>) -> Result<Option<T>, BusError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(err @ BusError::Timeout { .. }) | Err(err @ BusError::Connect(_)) => Err(err),
        Err(_) => Ok(None),
    }
}

/// A text with the object replacement characters (U+FFFC) that stand for embedded children
/// left out: a web combo box's text is one such character; `None` when nothing else is left.
pub fn without_embedded_objects(text: String) -> Option<String> {
    if !text.contains('\u{fffc}') {
        return Some(text);
    }
    let left: String = text.chars().filter(|&c| c != '\u{fffc}').collect();
    (!left.trim().is_empty()).then_some(left)
}

pub fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Actions an object may report before the rest are not read (a toolkit's count is untrusted).
const MAX_ACTIONS: i32 = 32;

/// The names of an object's actions (GTK3 says "click", AccessKit "click", Chromium "press",
/// "check", "open"). `GetActions` answers empty names in Chromium and `;;` in Firefox, where
/// `GetName(i)` answers the real ones: those are asked for whenever a name from `GetActions`
/// is not a word.
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
    let mut names: Vec<String> = actions
        .into_iter()
        .take(MAX_ACTIONS as usize)
        .map(|(name, _, _)| name)
        .collect();
    if names.iter().all(|name| is_action_word(name)) {
        return Ok(names);
    }
    let asked = join_all((0..names.len() as i32).map(|i| async move {
        bus::call::<_, String>(
            conn,
            deadline,
            dest,
            path,
            "org.a11y.atspi.Action",
            "GetName",
            &(i,),
        )
        .await
    }))
    .await;
    for (name, answer) in names.iter_mut().zip(asked) {
        match answer {
            Ok(real) if is_action_word(&real) => *name = real,
            Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => return Err(err),
            _ => {}
        }
    }
    Ok(names)
}

/// Whether a toolkit's action name is a usable word (not empty, not punctuation).
fn is_action_word(name: &str) -> bool {
    name.chars().any(char::is_alphanumeric)
}

/// The text of a Text object, up to `limit` characters. Its length is asked first: toolkits
/// differ on an end offset past the end (LibreOffice answers an empty text), and an empty field
/// needs no second call.
pub async fn text_of(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    limit: Option<i32>,
) -> Result<String, BusError> {
    const TEXT: &str = "org.a11y.atspi.Text";
    let end = match bus::property::<i32>(conn, deadline, dest, path, TEXT, "CharacterCount").await {
        Ok(count) if count <= 0 => return Ok(String::new()),
        Ok(count) => limit.map_or(count, |limit| count.min(limit)),
        Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => return Err(err),
        // No count to be had: the limit itself (or the whole text), and GetText says whether
        // there is a text at all.
        Err(_) => limit.unwrap_or(-1),
    };
    bus::call(conn, deadline, dest, path, TEXT, "GetText", &(0i32, end)).await
}
