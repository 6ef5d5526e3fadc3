//! The narrow per-OS part of accessibility: the [`Backend`] trait (AT-SPI on Linux, AXUIElement
//! on macOS), the backend-neutral shapes it answers in (apps, walked forests of nodes in the
//! shared role and state vocabulary, and errors), and what it takes from a command: the action
//! to carry out, the optional parts of a node to read, a backend's own dialect.
//!
//! The trait is coarse on purpose: a backend fetches a whole subtree within a budget (so AT-SPI
//! keeps its cache-seeded, concurrent walks), reads one element, acts on one, finds the focused
//! one and names an element's pid. Refs, selectors, paging, outlines and the approver check are
//! the ax surface's (`ax::lookup`, `ax::call` and `ax::commands`), written once over any
//! backend.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

use accesskit::Role;
use async_trait::async_trait;
use serde_json::Value;

use serde::Deserialize;

use super::roles::{StateSet, fold, role_name};
use crate::Availability;

/// `max_depth` of a walk with no depth limit (roots are depth 0).
pub const UNLIMITED_DEPTH: u32 = u32::MAX - 1;
/// No walk fetches more nodes than this, whatever was asked: a runaway tree (a browser with a
/// huge document) stays bounded in time and memory.
pub const MAX_WALK: usize = 20_000;

/// What one backend adds to the shared commands: which roles it understands and the `until`
/// values it offers.
pub struct Dialect {
    /// Whether selectors and `tree`'s `roles` may name this (folded) role.
    pub knows_role: fn(&str) -> bool,
    /// Ends the "unknown role" message, after the accesskit names (e.g. " or an AXRole").
    pub other_role_names: &'static str,
    /// The `until` values offered when `wait` gets one it does not know.
    pub until_examples: &'static [&'static str],
}

// The actions `ax act` names and a backend carries out. A plain comment: a doc comment would
// join the tool description, which is made from the args' schema.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, schemars::JsonSchema)]
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

/// Optional parts of a node.
#[derive(Debug, Clone, Copy, Default)]
pub struct Include {
    pub states: bool,
    pub bounds: bool,
    pub actions: bool,
    pub value: bool,
    /// Object attributes and ids, which only selectors ask for: AT-SPI fetches them apart, the
    /// AX backend has no such split.
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    pub attributes: bool,
}

/// Why a backend call failed, in terms a caller can act on.
#[derive(Debug, Clone)]
pub enum AxError {
    /// The accessibility service cannot be used at all (no bus, no permission); the message says
    /// why and how to fix it.
    Unavailable(String),
    /// The app the backend knows as `app` (see [`Backend::describe_app`]) did not answer in time.
    Timeout { app: String, after: Duration },
    /// The element (or its whole app) is gone.
    Gone,
    /// Anything else, in words.
    Other(String),
}

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    Ax(AxError),
    /// A message for the model, complete as it is.
    Said(String),
    /// The action would have acted on an approver's application: refused, not attempted.
    Refused(String),
    /// Nothing matched what the call names (`NoMatch`) or several things did (`Ambiguous`): a
    /// message for the model under its own error code, so a miss never reads as a failed action.
    Coded(computer_ipc::ErrorCode, String),
    /// The element takes text only from keys (a web text field: its toolkit exposes no way to
    /// set its text, or ignores the one it exposes): `set_value` types it when a keyboard is
    /// at hand; the message says why, for when none is.
    KeysOnly(String),
}

impl From<AxError> for Failure {
    fn from(err: AxError) -> Self {
        Failure::Ax(err)
    }
}

/// A message for the model.
pub fn said(message: impl Into<String>) -> Failure {
    Failure::Said(message.into())
}

/// A top-level window of an app.
#[derive(Debug, Clone)]
pub struct Window<E> {
    pub element: E,
    pub name: String,
    pub active: bool,
}

/// An application the backend can reach.
#[derive(Debug, Clone)]
pub struct AppInfo<E> {
    /// The app's root element (its walks start here).
    pub element: E,
    /// What the backend calls the app in [`AxError::Timeout`] (the bus name on AT-SPI).
    pub key: String,
    pub name: String,
    pub pid: Option<u32>,
    /// Where the app is reached, shown by `apps` beside the pid (the bus name on AT-SPI).
    pub address: Option<String>,
    pub windows: Vec<Window<E>>,
    /// The app did not answer within this wait while being listed.
    pub unresponsive: Option<Duration>,
}

/// What a backend adds to a node beyond the shared fields (AT-SPI's interfaces, the AXRole).
pub trait NativeFacts {
    /// The platform's own name of the node's role (`push button`, `AXButton`).
    fn native_role(&self) -> &str;
}

/// One element as read, in the shared role and state vocabulary.
#[derive(Debug, Clone)]
pub struct Node<E, N> {
    pub element: E,
    pub parent: Option<usize>,
    pub depth: u32,
    pub children: Vec<usize>,
    /// Read (a pending node is known only by its element).
    pub fetched: bool,
    /// It vanished (or its app stopped answering) while being read.
    pub gone: bool,
    pub role: Role,
    pub name: String,
    pub description: String,
    pub id: String,
    pub states: StateSet,
    /// How many children the element says it has (shown as `+N` at the depth limit).
    pub child_count: i64,
    /// Only some of its children were read (it manages its descendants, or reports more than
    /// a walk may list): `children` is a page of `child_count`.
    pub children_partial: bool,
    /// `i32::MIN` for x or y: the element is off screen.
    pub bounds: Option<(i32, i32, i32, i32)>,
    pub actions: Vec<String>,
    pub value: Option<String>,
    /// Attributes a selector asked for (`[key="v"]`).
    pub attributes: HashMap<String, String>,
    pub native: N,
}

impl<E, N: Default> Node<E, N> {
    /// A node known only by its element, to be read.
    pub fn pending(element: E, parent: Option<usize>, depth: u32) -> Self {
        Node {
            element,
            parent,
            depth,
            children: Vec::new(),
            fetched: false,
            gone: false,
            role: Role::Unknown,
            name: String::new(),
            description: String::new(),
            id: String::new(),
            states: StateSet::empty(),
            child_count: 0,
            children_partial: false,
            bounds: None,
            actions: Vec::new(),
            value: None,
            attributes: HashMap::new(),
            native: N::default(),
        }
    }
}

impl<E, N> Node<E, N> {
    pub fn role_name(&self) -> String {
        role_name(self.role)
    }
}

impl<E, N: NativeFacts> Node<E, N> {
    /// Its role's accesskit name and its platform name, both folded (what selectors and
    /// `tree`'s `roles` compare).
    pub fn folded_roles(&self) -> (String, String) {
        (fold(&role_name(self.role)), fold(self.native.native_role()))
    }
}

/// A walked (possibly partly walked) forest of elements.
#[derive(Debug)]
pub struct Forest<E, N> {
    pub nodes: Vec<Node<E, N>>,
    pub roots: Vec<usize>,
    /// Apps (by [`AppInfo::key`]) that did not answer, with the wait that ran out.
    pub unresponsive: HashMap<String, Duration>,
    /// The walk stopped at [`MAX_WALK`] nodes (or its deadline) before the tree's end.
    pub capped: bool,
}

impl<E: Clone, N: Default> Forest<E, N> {
    /// A forest of unread roots.
    pub fn new(roots: &[E]) -> Self {
        let mut forest = Forest {
            nodes: Vec::new(),
            roots: Vec::new(),
            unresponsive: HashMap::new(),
            capped: false,
        };
        for root in roots {
            forest.roots.push(forest.nodes.len());
            forest.nodes.push(Node::pending(root.clone(), None, 0));
        }
        forest
    }
}

impl<E, N> Forest<E, N> {
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

/// What a walk must fetch, and when it may stop.
#[derive(Debug, Clone, Default)]
pub struct WalkPlan {
    /// Deepest level (the roots are 0) whose children are fetched and shown.
    pub max_depth: u32,
    pub include: Include,
    /// The attribute keys selectors test (`[key="v"]`), for backends that read them one by one.
    pub attribute_keys: Vec<String>,
    /// Stop once this many nodes that [`WalkPlan::emits`] are known in preorder; `None`: the
    /// whole tree.
    pub need: Option<usize>,
    /// Only nodes of these (folded) roles count toward `need`; `None`: every node.
    pub roles: Option<HashSet<String>>,
    /// Only the children of showing nodes are walked: what looks for the focused element needs
    /// no hidden menu, closed tab or paragraph scrolled out of view.
    pub showing_only: bool,
}

impl WalkPlan {
    /// Whether `node` is listed (and so counts toward [`WalkPlan::need`]).
    pub fn emits<E, N: NativeFacts>(&self, node: &Node<E, N>) -> bool {
        match &self.roles {
            None => true,
            Some(set) => {
                let (ak, native) = node.folded_roles();
                set.contains(&ak) || set.contains(&native)
            }
        }
    }

    /// Whether the walk covers the whole tree (no depth limit, no small page).
    pub fn whole(&self, small_page: usize) -> bool {
        self.max_depth == UNLIMITED_DEPTH && self.need.is_none_or(|need| need > small_page)
    }
}

/// What `read` reports of an element's content beyond its outline.
#[derive(Debug, Default)]
pub struct Contents {
    /// Its whole text (text fields, documents), which goes through the runtime's byte budget.
    pub text: Option<String>,
    /// Its numeric value (sliders, spin buttons), reported over the text preview.
    pub value: Option<Value>,
}

/// What an action did.
#[derive(Debug)]
pub struct Acted {
    /// The toolkit took the action and, where it can be checked, its effect shows.
    pub done: bool,
    /// How it was done when not the obvious way (`already`, `focus`, `scroll_to`).
    pub via: Option<&'static str>,
    /// The value read back after `set_value`.
    pub value: Option<Value>,
}

/// A walked forest of one backend.
pub type ForestOf<B> = Forest<<B as Backend>::Element, <B as Backend>::Native>;
/// A node of one backend.
pub type NodeOf<B> = Node<<B as Backend>::Element, <B as Backend>::Native>;

/// One platform's accessibility API. Every call is bounded by `deadline`; an app that does not
/// answer ends in [`AxError::Timeout`] naming it, never a stuck call.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// An element's identity: equal for the same element, so refs stay stable across calls.
    type Element: Clone + Eq + Hash + Debug + Send + Sync + 'static;
    /// What the backend keeps of a node beyond the shared fields.
    type Native: NativeFacts + Default + Clone + Debug + Send + Sync + 'static;

    /// The fields, roles and states this backend's commands speak.
    const DIALECT: Dialect;
    /// What the logs and `computer doctor` call this backend.
    const NAME: &'static str;

    /// Whether the accessibility service can be used now, and if not how to fix it.
    fn probe(&self) -> Availability;

    /// Checks, at the start of a call, that the service can be used (connects; checks the
    /// permission).
    async fn ready(&self, deadline: Instant) -> Result<(), AxError>;

    /// Called after a call failed with [`AxError::Unavailable`]: the next call starts afresh.
    async fn reset(&self) {}

    /// Every reachable application; with `windows`, each with its top-level windows.
    async fn apps(
        &self,
        deadline: Instant,
        windows: bool,
    ) -> Result<Vec<AppInfo<Self::Element>>, AxError>;

    /// An app that `apps` does not list but that can be reached by pid (macOS: an app with no
    /// window on screen, such as a menu bar app).
    fn app_by_pid(&self, _pid: u32) -> Option<AppInfo<Self::Element>> {
        None
    }

    /// Reads `roots` and their descendants as `plan` asks, in preorder, stopping at `plan.need`
    /// listed nodes, [`MAX_WALK`] nodes or the deadline (`capped`). An app that stops answering
    /// lands in `unresponsive`, its nodes as gone.
    async fn walk(
        &self,
        roots: &[Self::Element],
        deadline: Instant,
        plan: &WalkPlan,
    ) -> Result<ForestOf<Self>, AxError>;

    /// One element with everything an outline can show (states, bounds, actions, value);
    /// `None` when it is gone.
    async fn read(
        &self,
        element: &Self::Element,
        deadline: Instant,
    ) -> Result<Option<NodeOf<Self>>, AxError>;

    /// The element's whole text and numeric value, as far as it has them.
    async fn contents(&self, node: &NodeOf<Self>, deadline: Instant) -> Result<Contents, AxError>;

    /// The element with keyboard focus in `window`'s app, in a forest holding its ancestors up to
    /// the window (for the path shown), and its index; `None` when nothing has focus.
    async fn focused(
        &self,
        window: &Self::Element,
        deadline: Instant,
    ) -> Result<Option<(ForestOf<Self>, usize)>, AxError>;

    /// The pid of the process the element belongs to, if the platform says.
    async fn pid(&self, element: &Self::Element, deadline: Instant) -> Option<u32>;

    /// Carries out `action` on `node` (read just before). `described` is its outline line, for
    /// messages saying why it cannot.
    async fn act(
        &self,
        node: &NodeOf<Self>,
        action: ActName,
        value: Option<Value>,
        described: &str,
        deadline: Instant,
    ) -> Result<Acted, Failure>;

    /// The element's change signals from now on, which wake a read-back as soon as it changes;
    /// `None` where the platform gives none (the read-back then only polls).
    async fn watch(
        &self,
        _element: &Self::Element,
        _deadline: Instant,
    ) -> Option<super::ElementWatch> {
        None
    }

    /// An app for messages, by its [`AppInfo::key`]: "app `gedit` (pid 12, :1.40)".
    fn describe_app(&self, key: &str) -> String;

    /// The apps seen so far, as ([`AppInfo::key`], name, pid), without asking anyone: what an
    /// action's facts resolve its target against when it is prepared.
    fn known_apps(&self) -> Vec<(String, String, Option<u32>)> {
        Vec::new()
    }

    /// The [`AppInfo::key`] of the app an element belongs to, when the element itself says so
    /// (no round trip).
    fn app_key_of(&self, _element: &Self::Element) -> Option<String> {
        None
    }
}
