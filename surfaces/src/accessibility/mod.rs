//! What any surface may read of the accessibility tree: the per-OS backends (AT-SPI on Linux,
//! AXUIElement on macOS) behind one [`backend::Backend`] trait, their backend-neutral nodes, role and
//! state vocabulary, top-level windows, single elements read around an act, and the judgement of
//! an act's effect from an element read before and after it. No surface owns it: the ax surface
//! builds its commands on the backends, and the gui surface reads windows and the element under
//! a click with them.
//!
//! # Layout
//! - this file: what the gui surface reads through AT-SPI ([`WindowReader`], [`ElementReader`]
//!   and the handles and watches they give).
//! - `backend`: the `Backend` trait and the backend-neutral apps, nodes, forests and errors, and
//!   what the backends take from a command (`ActName`, `Include`, `Dialect`).
//! - `read_back`: whether an action on an element took effect, from the element read before
//!   and after it (`ax act`'s and the gui surface's read-back of the element under a click).
//! - `roles`: the shared state set and role vocabulary (accesskit names).
//! - `atspi` (Linux): AT-SPI over D-Bus with cache-seeded, concurrent walks.
//! - `macos` (macOS): AXUIElement, and the window server's window list.

pub(crate) mod backend;
pub(crate) mod read_back;
pub(crate) mod roles;

#[cfg(target_os = "linux")]
pub(crate) mod atspi;
#[cfg(target_os = "macos")]
pub(crate) mod macos;
// The macOS vocabulary is pure: its tables are tested on Linux too.
#[cfg(all(test, target_os = "linux"))]
mod macos {
    pub mod roles;
}

use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use backend::{AxError, Backend};

/// A top-level window as AT-SPI lists it, for the gui surface on compositors that list no
/// windows to clients (GNOME's Mutter): which app, which process, its title, whether it is the
/// active one. AT-SPI gives no screen position on Wayland (extents are window-local).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone)]
pub(crate) struct AccessibleWindow {
    pub app: String,
    pub pid: Option<u32>,
    pub title: String,
    pub active: bool,
    /// The window's accessible (bus name and path): stable while the window lives.
    pub key: (String, String),
}

/// Reads top-level windows from AT-SPI with the AT-SPI backend's own bus code.
#[cfg(target_os = "linux")]
pub(crate) struct WindowReader(atspi::Atspi);

#[cfg(target_os = "linux")]
impl WindowReader {
    pub fn new() -> WindowReader {
        WindowReader(atspi::Atspi::from_env())
    }

    /// Every top-level window of every app on the accessibility bus. An app that does not
    /// answer in time is left out; a window whose state cannot be read is not active.
    pub async fn windows(&self, deadline: Instant) -> Result<Vec<AccessibleWindow>, String> {
        let apps = self.0.apps(deadline, true).await.map_err(|err| match err {
            AxError::Unavailable(why) | AxError::Other(why) => why,
            AxError::Timeout { app, after } => {
                format!("the accessibility registry ({app}) did not answer within {after:?}")
            }
            AxError::Gone => "the accessibility registry is gone".into(),
        })?;
        Ok(apps
            .into_iter()
            .filter(|app| app.unresponsive.is_none())
            .flat_map(|app| {
                let (name, pid) = (app.name.clone(), app.pid);
                app.windows.into_iter().map(move |w| AccessibleWindow {
                    app: name.clone(),
                    pid,
                    title: w.name,
                    active: w.active,
                    key: (w.element.bus, w.element.path),
                })
            })
            .collect())
    }
}

/// An element the gui surface read before an act, to read again after it.
#[derive(Debug, Clone, PartialEq, Eq)]
// Elsewhere than Linux nothing is read, so none is ever made.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct ElementHandle(#[cfg(target_os = "linux")] atspi::Accessible);

/// An element's change signals, subscribed to before an act (see [`ElementReader::watch`]).
// Elsewhere than Linux none is ever made.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct ElementWatch(#[cfg(target_os = "linux")] pub(crate) atspi::Watch);

impl ElementWatch {
    /// Waits up to `pause`, less when the element signals a change first.
    pub async fn changed_within(&mut self, pause: Duration) {
        #[cfg(target_os = "linux")]
        self.0.changed_within(pause).await;
        #[cfg(not(target_os = "linux"))]
        tokio::time::sleep(pause).await;
    }

    /// How many change signals the element sent since the watch began.
    pub fn signals(&mut self) -> usize {
        #[cfg(target_os = "linux")]
        return self.0.signals();
        #[cfg(not(target_os = "linux"))]
        0
    }
}

/// Reads, for the gui surface's read-back of an act, what AT-SPI tells of the element under a
/// point and of the focused field, with the AT-SPI backend's own bus code. Elsewhere than Linux it
/// reads nothing (the read-back then rests on the window list).
pub(crate) struct ElementReader {
    #[cfg(target_os = "linux")]
    atspi: std::sync::OnceLock<atspi::Atspi>,
    /// The field the agent's keys last went to (or it last clicked), by window: where typing is
    /// read back when the app reports no focused field (see [`ElementReader::remembered_field`]).
    last_field: std::sync::Mutex<Option<(u32, ElementHandle)>>,
}

impl ElementReader {
    pub fn new() -> ElementReader {
        ElementReader {
            #[cfg(target_os = "linux")]
            atspi: std::sync::OnceLock::new(),
            last_field: std::sync::Mutex::new(None),
        }
    }

    /// The reader on the accessibility bus at `address` (an agent's own desktop's).
    #[cfg(target_os = "linux")]
    pub fn on_bus(address: &str) -> ElementReader {
        let atspi = std::sync::OnceLock::new();
        let _ = atspi.set(atspi::Atspi::on_bus(address));
        ElementReader {
            atspi,
            last_field: std::sync::Mutex::new(None),
        }
    }

    /// Keeps `element` as the field of `window` the agent's keys go to.
    pub fn remember_field(&self, window: u32, element: ElementHandle) {
        *self.last_field.lock().unwrap_or_else(|e| e.into_inner()) = Some((window, element));
    }

    /// The field kept for `window`, if the last one kept was of that window. An app whose
    /// window the person's keyboard does not focus (the agent types with its own keyboard)
    /// may report no focused field at all (GTK 4, Qt 5): its focus widget, which takes the
    /// agent's keys, is then most often the field the agent last typed into or clicked there.
    pub fn remembered_field(&self, window: u32) -> Option<ElementHandle> {
        match &*self.last_field.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((kept, element)) if *kept == window => Some(element.clone()),
            _ => None,
        }
    }

    #[cfg(target_os = "linux")]
    fn atspi(&self) -> &atspi::Atspi {
        self.atspi.get_or_init(atspi::Atspi::from_env)
    }

    /// The element of process `pid` under screen point `at`, and how it reads now; `None` when
    /// nothing there can be read.
    pub async fn element_at(
        &self,
        pid: u32,
        at: (i32, i32),
        deadline: Instant,
    ) -> Option<(ElementHandle, read_back::ElementView)> {
        #[cfg(target_os = "linux")]
        {
            let (element, view) = self.atspi().element_at(pid, at, deadline).await.ok()??;
            Some((ElementHandle(element), view?))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (pid, at, deadline);
            None
        }
    }

    /// `element`'s change signals from now on, to wake a read-back as soon as it changes;
    /// `None` where none can be had (then a read-back only polls).
    pub async fn watch(&self, element: &ElementHandle, deadline: Instant) -> Option<ElementWatch> {
        #[cfg(target_os = "linux")]
        {
            Backend::watch(self.atspi(), &element.0, deadline).await
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (element, deadline);
            None
        }
    }

    /// An element's states now (one call): `Some(None)` when it is gone, `None` when they
    /// cannot be read.
    pub async fn states(
        &self,
        element: &ElementHandle,
        deadline: Instant,
    ) -> Option<Option<roles::StateSet>> {
        #[cfg(target_os = "linux")]
        {
            self.atspi().states(&element.0, deadline).await.ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (element, deadline);
            None
        }
    }

    /// How an element reads now: `Some(None)` when it is gone, `None` when it cannot be read.
    pub async fn view(
        &self,
        element: &ElementHandle,
        deadline: Instant,
    ) -> Option<Option<read_back::ElementView>> {
        #[cfg(target_os = "linux")]
        {
            self.atspi().view(&element.0, deadline).await.ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (element, deadline);
            None
        }
    }

    /// The focused field of process `pid`'s active window and its text, when it has one.
    pub async fn focused_text(
        &self,
        pid: u32,
        deadline: Instant,
    ) -> Option<(ElementHandle, String)> {
        #[cfg(target_os = "linux")]
        {
            let (element, text) = self.atspi().focused_text(pid, deadline).await.ok()??;
            Some((ElementHandle(element), text))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (pid, deadline);
            None
        }
    }

    /// The text of a field read before.
    pub async fn text(&self, element: &ElementHandle, deadline: Instant) -> Option<String> {
        #[cfg(target_os = "linux")]
        {
            self.atspi().text(&element.0, deadline).await.ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (element, deadline);
            None
        }
    }
}
