//! The accessibility backend on Linux (the ax surface's there, and what the gui surface reads
//! windows and elements with): AT-SPI over D-Bus with zbus. Apps come from the registry, walks are
//! seeded from the apps' own caches and fetched concurrently, and every call runs under a
//! per-call limit inside the call's deadline.
//!
//! # Layout
//! - this file: the [`Backend`] implementation.
//! - `bus`: the lazily opened, self-healing a11y bus connection and deadline-bound calls.
//! - `cache`: an app's own AT-SPI cache (`GetItems`), which seeds walks in one call.
//! - `walk`: concurrent, page-bounded tree walks and the reads of a node's optional parts.
//! - `children`: which children of an object are read, and how (never the whole list of one
//!   that manages its descendants or reports more than a bound).
//! - `act`: actions, selection, values and the wait for their effect.
//! - `events`: the change signals of one element, which wake read-backs between polls.
//! - `point`: the gui surface's read-back: the element at a screen point, one element's
//!   states, the focused element's text.
//! - `roles`: AT-SPI roles mapped onto accesskit's `Role`; AT-SPI state words.

mod act;
mod bus;
pub(crate) use bus::{accessibility_bus_address, accessibility_bus_running};
mod cache;
mod children;
mod events;
mod point;
mod roles;
mod walk;

use std::time::{Duration, Instant};

use ::atspi::Role as AtspiRole;
use async_trait::async_trait;
use futures::future::join_all;
use serde_json::{Value, json};

use crate::Availability;
use crate::accessibility::backend::{
    ActName, Acted, AppInfo, AxError, Backend, Contents, Dialect, Failure, Forest, Include,
    NativeFacts, Node, WalkPlan, Window,
};
use crate::accessibility::roles::{State, StateSet, accesskit_role_names};

use bus::{ACCESSIBLE, Bus, BusError, REGISTRY, ROOT_PATH};
pub use events::Watch;
use walk::Walker;

/// Which of `nodes` (index and states, in document order) has the keyboard focus: the last
/// focused one that can take the focus, else the last focused one. Qt 5 also marks a text
/// view's viewport and the current tab of a tab bar as focused, neither focusable; GTK, the
/// browsers and AccessKit mark only what can take the focus.
fn keyboard_focus(
    mut nodes: impl DoubleEndedIterator<Item = (usize, StateSet)> + Clone,
) -> Option<usize> {
    let focused = |states: &StateSet| states.contains(State::Focused);
    nodes
        .clone()
        .rfind(|(_, states)| focused(states) && states.contains(State::Focusable))
        .or_else(|| nodes.rfind(|(_, states)| focused(states)))
        .map(|(i, _)| i)
}

/// Up to this many nodes a page is filled faster by walking than by first completing the app
/// cache's missing child lists.
const SMALL_PAGE: usize = 100;

/// The path AT-SPI answers for "no object".
pub(crate) const NULL_PATH: &str = "/org/a11y/atspi/null";

/// An accessible object: the app's unique bus name and the object's path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Accessible {
    pub bus: String,
    pub path: String,
}

/// What AT-SPI adds to a node: its own role and the interfaces it implements.
#[derive(Debug, Clone)]
pub struct AtspiNative {
    pub role: AtspiRole,
    pub interfaces: Vec<String>,
}

impl Default for AtspiNative {
    fn default() -> Self {
        AtspiNative {
            role: AtspiRole::Unknown,
            interfaces: Vec::new(),
        }
    }
}

impl AtspiNative {
    pub fn has_interface(&self, short: &str) -> bool {
        let full = format!("org.a11y.atspi.{short}");
        self.interfaces.contains(&full)
    }
}

impl NativeFacts for AtspiNative {
    fn native_role(&self) -> &str {
        self.role.name()
    }
}

pub type AtspiForest = Forest<Accessible, AtspiNative>;
pub type AtspiNode = Node<Accessible, AtspiNative>;

impl From<BusError> for AxError {
    fn from(err: BusError) -> Self {
        match err {
            BusError::Connect(why) => AxError::Unavailable(format!(
                "the accessibility bus is unreachable ({why}); check that at-spi2-core runs in this session"
            )),
            BusError::Timeout { bus, after } => AxError::Timeout { app: bus, after },
            BusError::Gone => AxError::Gone,
            BusError::Other(why) => AxError::Other(why),
        }
    }
}

impl From<BusError> for Failure {
    fn from(err: BusError) -> Self {
        Failure::Ax(err.into())
    }
}

/// AT-SPI over the accessibility bus.
pub struct Atspi {
    bus: Bus,
    /// The path of the last hit test in each window, tried all at once by the next one.
    hit_paths: point::HitPaths,
}

impl Atspi {
    /// The backend as the environment configures it: `COMPUTER_AX_APP_CACHE=off` walks every
    /// tree node by node (the benchmark compares both).
    pub fn from_env() -> Atspi {
        let use_app_caches = std::env::var("COMPUTER_AX_APP_CACHE").map_or(true, |v| v != "off");
        tracing::info!(
            backend = "AT-SPI over D-Bus (zbus, accesskit roles)",
            use_app_caches,
            "ax backend chosen; the accessibility bus is opened on first use"
        );
        Atspi {
            hit_paths: point::HitPaths::default(),
            bus: Bus::new(use_app_caches),
        }
    }

    /// The backend on the accessibility bus at `address` (an agent's own desktop's), whatever
    /// the process environment names.
    pub fn on_bus(address: &str) -> Atspi {
        let mut atspi = Atspi::from_env();
        atspi.bus.address = Some(address.to_string());
        atspi
    }

    async fn conn(&self, deadline: Instant) -> Result<zbus::Connection, BusError> {
        self.bus.connection(deadline).await
    }

    /// Walks `roots` as `plan` asks, seeded from the apps' caches.
    async fn walked(
        &self,
        conn: &zbus::Connection,
        roots: &[Accessible],
        deadline: Instant,
        plan: &WalkPlan,
    ) -> Result<AtspiForest, BusError> {
        let mut walker = Walker::new(roots);
        walker
            .seed(&self.bus, conn, deadline, plan.whole(SMALL_PAGE))
            .await;
        walker.walk(conn, deadline, plan).await?;
        Ok(walker.forest)
    }

    /// Every application registered on the accessibility bus. An app that does not answer is
    /// listed as such after at most one call limit instead of failing the listing.
    async fn list_apps(
        &self,
        conn: &zbus::Connection,
        deadline: Instant,
    ) -> Result<Vec<AppInfo<Accessible>>, BusError> {
        let apps = bus::children(conn, deadline, REGISTRY, ROOT_PATH).await?;
        let infos = apps.into_iter().map(|(app_bus, path)| async move {
            self.bus.remember_root(&app_bus, &path);
            let app_deadline = deadline.min(Instant::now() + self.bus.listing_limit(&app_bus));
            let pid = bus::pid_of(conn, app_deadline, &app_bus);
            let about = async {
                let name = bus::property::<String>(
                    conn,
                    app_deadline,
                    &app_bus,
                    &path,
                    ACCESSIBLE,
                    "Name",
                );
                let windows = bus::children(conn, app_deadline, &app_bus, &path);
                let (name, windows) = futures::join!(name, windows);
                let windows = windows?;
                let details = join_all(windows.into_iter().map(|(wbus, wpath)| async move {
                    let name = bus::property::<String>(
                        conn,
                        app_deadline,
                        &wbus,
                        &wpath,
                        ACCESSIBLE,
                        "Name",
                    );
                    let state = bus::states(conn, app_deadline, &wbus, &wpath);
                    let (name, state) = futures::join!(name, state);
                    let active = state.is_ok_and(|s| s.contains(State::Active));
                    Window {
                        element: Accessible {
                            bus: wbus,
                            path: wpath,
                        },
                        name: name.unwrap_or_default(),
                        active,
                    }
                }))
                .await;
                Ok::<_, BusError>((name?, details))
            };
            let (pid, about) = futures::join!(pid, about);
            let element = Accessible {
                bus: app_bus.clone(),
                path,
            };
            match about {
                Ok((name, windows)) => {
                    self.bus.remember_app(&app_bus, &name, pid);
                    self.bus.mark_stuck(&app_bus, false);
                    Some(AppInfo {
                        element,
                        key: app_bus.clone(),
                        name,
                        pid,
                        address: Some(app_bus),
                        windows,
                        unresponsive: None,
                    })
                }
                // It left the bus while being listed.
                Err(BusError::Gone) => None,
                Err(err) => {
                    let wait = match err {
                        BusError::Timeout { after, .. } => {
                            self.bus.mark_stuck(&app_bus, true);
                            Some(after)
                        }
                        _ => None,
                    };
                    self.bus.remember_pid(&app_bus, pid);
                    Some(AppInfo {
                        element,
                        key: app_bus.clone(),
                        name: self.bus.describe_app(&app_bus),
                        pid,
                        address: Some(app_bus),
                        windows: Vec::new(),
                        unresponsive: wait.or(Some(Duration::ZERO)),
                    })
                }
            }
        });
        Ok(join_all(infos).await.into_iter().flatten().collect())
    }
}

/// Whether a (folded) role name is an accesskit or an AT-SPI one.
fn knows_role(folded: &str) -> bool {
    accesskit_role_names().iter().any(|known| known == folded)
        || roles::native_role_names()
            .iter()
            .any(|known| known == folded)
}

#[async_trait]
impl Backend for Atspi {
    type Element = Accessible;
    type Native = AtspiNative;

    const NAME: &'static str = "AT-SPI over D-Bus";
    const DIALECT: Dialect = Dialect {
        knows_role,
        other_role_names: "",
        until_examples: &[
            "appears",
            "disappears",
            "focused",
            "checked",
            "!checked",
            "enabled",
            "showing",
        ],
    };

    fn probe(&self) -> Availability {
        let has_bus = self.bus.address.is_some()
            || std::env::var_os("AT_SPI_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("XDG_RUNTIME_DIR")
                .is_some_and(|dir| std::path::Path::new(&dir).join("bus").exists());
        if !has_bus {
            return Availability::Unavailable {
                reason: "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset".into(),
                fix: "run the daemon inside the desktop session (systemd --user unit, or export DBUS_SESSION_BUS_ADDRESS and DISPLAY before `computer serve`)".into(),
            };
        }
        if let Some(why) = self.bus.recent_failure() {
            return Availability::Unavailable {
                reason: format!("the accessibility bus is unreachable: {why}"),
                fix: "install at-spi2-core (at-spi-bus-launcher) and enable accessibility (gsettings set org.gnome.desktop.interface toolkit-accessibility true); the daemon retries after 5 s".into(),
            };
        }
        Availability::Ready
    }

    async fn ready(&self, deadline: Instant) -> Result<(), AxError> {
        // A clone of the shared connection; dropping it leaves the connection open.
        let _connected = self.conn(deadline).await?;
        Ok(())
    }

    async fn reset(&self) {
        self.bus.reset().await;
    }

    async fn watch(
        &self,
        element: &Accessible,
        deadline: Instant,
    ) -> Option<crate::accessibility::ElementWatch> {
        let conn = self.conn(deadline).await.ok()?;
        Watch::start(&conn, element)
            .await
            .map(crate::accessibility::ElementWatch)
    }

    async fn apps(
        &self,
        deadline: Instant,
        _windows: bool,
    ) -> Result<Vec<AppInfo<Accessible>>, AxError> {
        // The windows come in the same round trips as the names: always listed.
        let conn = self.conn(deadline).await?;
        Ok(self.list_apps(&conn, deadline).await?)
    }

    async fn walk(
        &self,
        roots: &[Accessible],
        deadline: Instant,
        plan: &WalkPlan,
    ) -> Result<AtspiForest, AxError> {
        let conn = self.conn(deadline).await?;
        Ok(self.walked(&conn, roots, deadline, plan).await?)
    }

    async fn read(
        &self,
        element: &Accessible,
        deadline: Instant,
    ) -> Result<Option<AtspiNode>, AxError> {
        let conn = self.conn(deadline).await?;
        let mut walker = Walker::new(std::slice::from_ref(element));
        let plan = WalkPlan {
            max_depth: 0,
            include: Include {
                states: true,
                bounds: true,
                actions: true,
                value: true,
                attributes: true,
            },
            ..WalkPlan::default()
        };
        walker.walk(&conn, deadline, &plan).await?;
        let mut forest = walker.forest;
        if let Some((bus, after)) = forest.unresponsive.iter().next() {
            return Err(AxError::Timeout {
                app: bus.clone(),
                after: *after,
            });
        }
        let node = forest.nodes.swap_remove(0);
        Ok((!node.gone).then_some(node))
    }

    async fn contents(&self, node: &AtspiNode, deadline: Instant) -> Result<Contents, AxError> {
        let conn = self.conn(deadline).await?;
        let at = &node.element;
        let mut contents = Contents::default();
        if node.native.has_interface("Text") {
            let text = walk::text_of(&conn, deadline, &at.bus, &at.path, Some(1 << 20)).await?;
            contents.text = walk::without_embedded_objects(text);
        }
        if node.native.has_interface("Value") {
            let value = bus::property::<f64>(
                &conn,
                deadline,
                &at.bus,
                &at.path,
                "org.a11y.atspi.Value",
                "CurrentValue",
            )
            .await
            .ok();
            contents.value = value.map(|v| json!(v));
        }
        Ok(contents)
    }

    async fn focused(
        &self,
        window: &Accessible,
        deadline: Instant,
    ) -> Result<Option<(AtspiForest, usize)>, AxError> {
        let conn = self.conn(deadline).await?;
        // AT-SPI has no "focused element" query that every toolkit answers: the window is walked
        // and the last focused node in document order is the one. Only what shows is walked:
        // the focus is never in a closed menu or a paragraph out of view.
        let plan = WalkPlan {
            max_depth: crate::accessibility::backend::UNLIMITED_DEPTH,
            showing_only: true,
            ..WalkPlan::default()
        };
        let forest = self
            .walked(&conn, std::slice::from_ref(window), deadline, &plan)
            .await?;
        if let Some((bus, after)) = forest.unresponsive.iter().next() {
            return Err(AxError::Timeout {
                app: bus.clone(),
                after: *after,
            });
        }
        let order = forest.preorder(u32::MAX);
        let focused = keyboard_focus(order.iter().map(|&i| (i, forest.nodes[i].states)));
        Ok(focused.map(|i| (forest, i)))
    }

    async fn pid(&self, element: &Accessible, deadline: Instant) -> Option<u32> {
        let conn = self.conn(deadline).await.ok()?;
        bus::pid_of(&conn, deadline, &element.bus).await
    }

    async fn act(
        &self,
        node: &AtspiNode,
        action: ActName,
        value: Option<Value>,
        described: &str,
        deadline: Instant,
    ) -> Result<Acted, Failure> {
        let conn = self.conn(deadline).await?;
        act::act(&conn, deadline, node, action, value, described).await
    }

    fn known_apps(&self) -> Vec<(String, String, Option<u32>)> {
        self.bus.known_apps()
    }

    fn app_key_of(&self, element: &Accessible) -> Option<String> {
        Some(element.bus.clone())
    }

    fn describe_app(&self, key: &str) -> String {
        self.bus.describe_app(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(list: &[State]) -> StateSet {
        list.iter().copied().collect()
    }

    #[test]
    fn the_keyboard_focus_is_the_last_focused_node_that_can_take_it() {
        let field = states(&[State::Focused, State::Focusable, State::Editable]);
        let marked = states(&[State::Focused]);
        let plain = states(&[State::Focusable]);
        // FeatherPad (Qt 5): the text view, its viewport, a button, the current tab.
        let qt = [(0, field), (1, marked), (2, plain), (3, marked)];
        assert_eq!(keyboard_focus(qt.into_iter()), Some(0));
        // GTK: one focused node, focusable.
        let gtk = [(0, plain), (1, field), (2, plain)];
        assert_eq!(keyboard_focus(gtk.into_iter()), Some(1));
        // Focused nodes none of which says it is focusable: the last of them, as before.
        let odd = [(0, marked), (1, plain), (2, marked)];
        assert_eq!(keyboard_focus(odd.into_iter()), Some(2));
        assert_eq!(keyboard_focus([(0, plain)].into_iter()), None);
    }
}
