//! The accessibility backend on macOS (the ax surface's there): applications from the window
//! server's list, their AXUIElement trees read into the shared nodes, and actions (AXPress,
//! AXConfirm, AXShowMenu, setting AXValue...), each call bounded by a messaging timeout and the
//! call's deadline. The accessibility API blocks, so every operation runs on a blocking thread.
//!
//! # Layout
//! - this file: the [`Backend`] implementation: apps, walks, reads, focus and actions.
//! - `element`: the owned AXUIElement and the Accessibility permission check.
//! - `roles`: AXRole → accesskit role, AX attributes → states, action choice.
//! - `window_list`: the window server's list of on-screen windows (also the gui surface's).

pub(crate) mod element;
pub(crate) mod roles;
pub(crate) mod window_list;

use std::time::{Duration, Instant};

use accesskit::Role;
use async_trait::async_trait;
use core_foundation::base::TCFType;
use core_foundation::boolean::CFBoolean;
use core_foundation::number::CFNumber;
use core_foundation::string::CFString;
use serde_json::{Value, json};

use crate::Availability;
use crate::accessibility::backend::{
    ActName, Acted, AppInfo, AxError, Backend, Contents, Dialect, Failure, Forest, Include,
    MAX_WALK, NativeFacts, Node, WalkPlan, Window, said,
};
use crate::accessibility::roles::{State, accesskit_role_names};
use element::Element;

/// The longest one accessibility call may wait for an app (AXUIElementSetMessagingTimeout).
const CALL_LIMIT: Duration = Duration::from_millis(1500);

/// What the AX API adds to a node: its AXRole.
#[derive(Debug, Clone, Default)]
pub struct MacNative {
    pub ax_role: String,
}

impl NativeFacts for MacNative {
    fn native_role(&self) -> &str {
        &self.ax_role
    }
}

type MacForest = Forest<Element, MacNative>;
type MacNode = Node<Element, MacNative>;

/// The macOS accessibility API.
pub struct MacAx;

impl MacAx {
    pub fn new() -> MacAx {
        tracing::info!(
            backend = "macOS accessibility (AXUIElement, accesskit roles)",
            "ax backend chosen"
        );
        MacAx
    }
}

/// Runs blocking accessibility work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AxError> + Send + 'static,
) -> Result<T, AxError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| AxError::Other(format!("the accessibility work panicked: {err}")))?
}

/// The error for a failed call to an element of `pid`.
fn failed(err: element::AxError, pid: i32) -> AxError {
    match err {
        element::AxError::NotTrusted => {
            AxError::Unavailable(element::grant_message("Accessibility"))
        }
        element::AxError::Timeout => AxError::Timeout {
            app: pid.to_string(),
            after: CALL_LIMIT,
        },
        element::AxError::Gone => AxError::Gone,
        element::AxError::Unsupported => AxError::Other("the element does not support that".into()),
        element::AxError::Other(why) => AxError::Other(format!(
            "the call to {} (pid {pid}) failed: {why}",
            app_name(pid)
        )),
    }
}

/// An app's name for messages, from the window list (else "an app").
fn app_name(pid: i32) -> String {
    window_list::window_list()
        .ok()
        .and_then(|list| {
            list.into_iter()
                .find(|w| w.pid as i32 == pid)
                .map(|w| w.app)
        })
        .unwrap_or_else(|| "an app".into())
}

/// Whether a (folded) role name is an accesskit one or an AXRole (`axbutton`).
fn knows_role(folded: &str) -> bool {
    folded.starts_with("ax") || accesskit_role_names().iter().any(|known| known == folded)
}

/// Apps with windows on screen, front to back; with `windows`, each with its windows.
fn list_apps(windows: bool) -> Result<Vec<AppInfo<Element>>, AxError> {
    let listed = window_list::window_list().map_err(AxError::Other)?;
    let mut apps: Vec<AppInfo<Element>> = Vec::new();
    for window in listed {
        let pid = window.pid as i32;
        if apps.iter().any(|a| a.pid == Some(window.pid)) {
            continue;
        }
        let element = Element::application(pid);
        element.set_timeout(CALL_LIMIT.as_secs_f32());
        let name = element
            .string("AXTitle")
            .ok()
            .flatten()
            .filter(|n| !n.is_empty())
            .unwrap_or(window.app);
        let frontmost = apps.is_empty();
        let windows = if windows {
            element
                .elements("AXWindows")
                .unwrap_or_default()
                .into_iter()
                .map(|w| Window {
                    name: w.string("AXTitle").ok().flatten().unwrap_or_default(),
                    active: frontmost && w.boolean("AXMain").ok().flatten().unwrap_or(false),
                    element: w,
                })
                .collect()
        } else {
            Vec::new()
        };
        apps.push(AppInfo {
            element,
            key: pid.to_string(),
            name,
            pid: Some(window.pid),
            address: None,
            windows,
            unresponsive: None,
        });
    }
    Ok(apps)
}

/// Reads one element; `None` when it vanished while being read.
fn read_node(
    element: Element,
    depth: u32,
    parent: Option<usize>,
    include: Include,
    attribute_keys: &[String],
) -> Result<Option<(MacNode, Vec<Element>)>, element::AxError> {
    let ax_role = match element.string("AXRole") {
        Ok(role) => role.unwrap_or_default(),
        Err(element::AxError::Gone) => return Ok(None),
        Err(err) => return Err(err),
    };
    let opt = |r: Result<Option<String>, element::AxError>| r.ok().flatten();
    let subrole = opt(element.string("AXSubrole"));
    let role = roles::map_role(&ax_role, subrole.as_deref());
    let title = opt(element.string("AXTitle")).filter(|t| !t.is_empty());
    let description = opt(element.string("AXDescription")).unwrap_or_default();
    let raw_value = opt(element.value_text("AXValue"));
    // Titles name most controls; an unlabelled button has its description, static text its
    // value.
    let name = title
        .or_else(|| (!description.is_empty()).then(|| description.clone()))
        .or_else(|| {
            (ax_role == "AXStaticText")
                .then(|| raw_value.clone())
                .flatten()
        })
        .unwrap_or_default();
    let checkable = roles::is_checkable(&ax_role);
    let text_input = roles::is_text_input(&ax_role);
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
    let facts = roles::Facts {
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
    let mut node = Node::pending(element, parent, depth);
    node.fetched = true;
    node.role = role;
    node.name = name;
    node.id = opt(node.element.string("AXIdentifier")).unwrap_or_default();
    node.description = opt(node.element.string("AXHelp")).unwrap_or(description);
    node.states = roles::states(facts);
    node.value = value;
    if include.bounds {
        node.bounds = node.element.frame().ok().flatten();
    }
    if include.actions {
        node.actions = node
            .element
            .action_names()
            .unwrap_or_default()
            .iter()
            .map(|a| roles::action_label(a))
            .collect();
    }
    // Any key a selector tests is an AX attribute, read live: [AXSubrole="AXCloseButton"].
    for key in attribute_keys {
        if let Some(v) = opt(node.element.value_text(key)) {
            node.attributes.insert(key.clone(), v);
        }
    }
    node.child_count = i64::try_from(children.len()).unwrap_or(i64::MAX);
    node.native = MacNative { ax_role };
    Ok(Some((node, children)))
}

/// Reads `roots` and their descendants in preorder as `plan` asks, bounded by [`MAX_WALK`], the
/// deadline (`capped`) and `plan.need`. An app that stops answering is left out and named.
fn walk(roots: Vec<Element>, deadline: Instant, plan: &WalkPlan) -> Result<MacForest, AxError> {
    let mut forest = MacForest::new(&[]);
    let mut stack: Vec<(Element, u32, Option<usize>)> =
        roots.into_iter().rev().map(|e| (e, 0, None)).collect();
    let mut listed = 0usize;
    while let Some((element, depth, parent)) = stack.pop() {
        if forest.nodes.len() >= MAX_WALK || Instant::now() >= deadline {
            forest.capped = true;
            break;
        }
        let pid = element.pid().unwrap_or(0);
        if forest.unresponsive.contains_key(&pid.to_string()) {
            continue;
        }
        let read = read_node(element, depth, parent, plan.include, &plan.attribute_keys);
        let (node, children) = match read {
            Ok(Some(read)) => read,
            Ok(None) => continue,
            Err(element::AxError::NotTrusted) => {
                return Err(AxError::Unavailable(element::grant_message(
                    "Accessibility",
                )));
            }
            Err(element::AxError::Timeout) => {
                forest.unresponsive.insert(pid.to_string(), CALL_LIMIT);
                continue;
            }
            // One odd element should not sink the tree.
            Err(_) => continue,
        };
        let index = forest.nodes.len();
        if plan.emits(&node) && depth <= plan.max_depth {
            listed += 1;
        }
        forest.nodes.push(node);
        match parent {
            Some(p) => forest.nodes[p].children.push(index),
            None => forest.roots.push(index),
        }
        if plan.need.is_some_and(|need| listed >= need) {
            break;
        }
        if depth < plan.max_depth {
            for child in children.into_iter().rev() {
                stack.push((child, depth + 1, Some(index)));
            }
        }
    }
    Ok(forest)
}

/// One element with everything an outline can show.
fn read_one(element: Element) -> Result<Option<MacNode>, AxError> {
    let all = Include {
        states: true,
        bounds: true,
        actions: true,
        value: true,
        ..Include::default()
    };
    let pid = element.pid().unwrap_or(0);
    match read_node(element, 0, None, all, &[]) {
        Ok(read) => Ok(read.map(|(node, _)| node)),
        Err(err) => Err(failed(err, pid)),
    }
}

/// The focused element of `window`'s app and its ancestors up to the window, as a forest.
fn focused(window: Element, deadline: Instant) -> Result<Option<(MacForest, usize)>, AxError> {
    let pid = window.pid().unwrap_or(0);
    let app = Element::application(pid);
    let Some(focused) = app
        .element("AXFocusedUIElement")
        .map_err(|e| failed(e, pid))?
    else {
        return Ok(None);
    };
    let mut chain = vec![focused];
    while chain.len() < 64 && Instant::now() < deadline {
        let last = chain
            .last()
            .expect("the chain starts with the focused element");
        if *last == window {
            break;
        }
        match last.element("AXParent").ok().flatten() {
            Some(parent) if parent != app => chain.push(parent),
            _ => break,
        }
    }
    chain.reverse();
    let mut forest = MacForest::new(&[]);
    let basic = Include::default();
    for (depth, element) in chain.into_iter().enumerate() {
        let parent = forest.nodes.len().checked_sub(1);
        let Some((node, _)) =
            read_node(element, depth as u32, parent, basic, &[]).map_err(|e| failed(e, pid))?
        else {
            return Ok(None);
        };
        let index = forest.nodes.len();
        forest.nodes.push(node);
        match parent {
            Some(p) => forest.nodes[p].children.push(index),
            None => forest.roots.push(index),
        }
    }
    let last = forest.nodes.len().checked_sub(1);
    Ok(last.map(|i| (forest, i)))
}

/// Carries out `action` on `node`.
fn act(
    node: &MacNode,
    action: ActName,
    value: Option<Value>,
    described: &str,
) -> Result<Acted, Failure> {
    let element = &node.element;
    let pid = element.pid().unwrap_or(0);
    let available = element.action_names().unwrap_or_default();
    let no_way = |what: &str| {
        said(format!(
            "{described} cannot {what}: its actions are [{}]",
            available.join(", ")
        ))
    };
    let perform_first = |wanted: &[&str], what: &str| -> Result<bool, Failure> {
        let name = wanted
            .iter()
            .find(|w| available.iter().any(|a| a == *w))
            .ok_or_else(|| no_way(what))?;
        element.perform(name).map_err(|err| failed(err, pid))?;
        Ok(true)
    };
    let set_bool = |attribute: &str, on: bool, what: &str| -> Result<bool, Failure> {
        if !element.settable(attribute) {
            return Err(no_way(what));
        }
        element
            .set(attribute, &CFBoolean::from(on).as_CFType())
            .map_err(|err| failed(err, pid))?;
        Ok(true)
    };
    let mut via = None;
    let mut read_back = None;
    let done = match action {
        ActName::Press => perform_first(roles::press_actions("press"), "press")?,
        ActName::Activate => perform_first(roles::press_actions("activate"), "activate")?,
        ActName::Toggle => perform_first(roles::press_actions("toggle"), "toggle")?,
        ActName::Focus => set_bool("AXFocused", true, "take focus")?,
        ActName::Select => set_bool("AXSelected", true, "be selected")?,
        ActName::ScrollIntoView => perform_first(&["AXScrollToVisible"], "scroll into view")?,
        ActName::Expand | ActName::Collapse => {
            let expand = action == ActName::Expand;
            if node.states.contains(State::Expanded) == expand
                && node.states.contains(State::Expandable)
            {
                via = Some("already");
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
                Value::Number(n) if !roles::is_text_input(&node.native.ax_role) => {
                    CFNumber::from(n.as_f64().unwrap_or(0.0)).as_CFType()
                }
                Value::String(s) => CFString::new(s).as_CFType(),
                other => CFString::new(&other.to_string()).as_CFType(),
            };
            element
                .set("AXValue", &cf)
                .map_err(|err| failed(err, pid))?;
            let now = element.value_text("AXValue").ok().flatten();
            read_back = Some(json!(now));
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
    Ok(Acted {
        done,
        via,
        value: read_back,
    })
}

#[async_trait]
impl Backend for MacAx {
    type Element = Element;
    type Native = MacNative;

    const NAME: &'static str = "AXUIElement (macOS accessibility)";
    const DIALECT: Dialect = Dialect {
        knows_role,
        other_role_names: " or an AXRole",
        until_examples: &[
            "appears",
            "disappears",
            "focused",
            "checked",
            "!checked",
            "enabled",
        ],
    };

    fn probe(&self) -> Availability {
        if element::trusted() {
            Availability::Ready
        } else {
            Availability::Unavailable {
                reason: "this process lacks the Accessibility permission".into(),
                fix: element::grant_message("Accessibility"),
            }
        }
    }

    async fn ready(&self, _deadline: Instant) -> Result<(), AxError> {
        if !element::trusted() {
            return Err(AxError::Unavailable(element::grant_message(
                "Accessibility",
            )));
        }
        Element::system_wide().set_timeout(CALL_LIMIT.as_secs_f32());
        Ok(())
    }

    async fn apps(
        &self,
        _deadline: Instant,
        windows: bool,
    ) -> Result<Vec<AppInfo<Element>>, AxError> {
        blocking(move || list_apps(windows)).await
    }

    fn app_by_pid(&self, pid: u32) -> Option<AppInfo<Element>> {
        // An app without windows on screen (a menu bar app) is still reachable.
        let pid = i32::try_from(pid).ok()?;
        Some(AppInfo {
            element: Element::application(pid),
            key: pid.to_string(),
            name: app_name(pid),
            pid: Some(pid as u32),
            address: None,
            windows: Vec::new(),
            unresponsive: None,
        })
    }

    async fn walk(
        &self,
        roots: &[Element],
        deadline: Instant,
        plan: &WalkPlan,
    ) -> Result<MacForest, AxError> {
        let (roots, plan) = (roots.to_vec(), plan.clone());
        blocking(move || walk(roots, deadline, &plan)).await
    }

    async fn read(
        &self,
        element: &Element,
        _deadline: Instant,
    ) -> Result<Option<MacNode>, AxError> {
        let element = element.clone();
        blocking(move || read_one(element)).await
    }

    async fn contents(&self, node: &MacNode, _deadline: Instant) -> Result<Contents, AxError> {
        // A text field's AXValue is its whole text; other values stay in the outline's preview.
        let text = roles::is_text_input(&node.native.ax_role)
            .then(|| node.value.clone().unwrap_or_default());
        Ok(Contents { text, value: None })
    }

    async fn focused(
        &self,
        window: &Element,
        deadline: Instant,
    ) -> Result<Option<(MacForest, usize)>, AxError> {
        let window = window.clone();
        blocking(move || focused(window, deadline)).await
    }

    async fn pid(&self, element: &Element, _deadline: Instant) -> Option<u32> {
        element.pid().and_then(|pid| u32::try_from(pid).ok())
    }

    async fn act(
        &self,
        node: &MacNode,
        action: ActName,
        value: Option<Value>,
        described: &str,
        _deadline: Instant,
    ) -> Result<Acted, Failure> {
        let (node, described) = (node.clone(), described.to_string());
        tokio::task::spawn_blocking(move || act(&node, action, value, &described))
            .await
            .map_err(|err| said(format!("the ax action panicked: {err}")))?
    }

    fn describe_app(&self, key: &str) -> String {
        match key.parse::<i32>() {
            Ok(pid) => format!("app `{}` (pid {pid})", app_name(pid)),
            Err(_) => format!("the app {key}"),
        }
    }
}
