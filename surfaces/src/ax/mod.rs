//! The ax surface: accessibility trees (AT-SPI on Linux, AXUIElement on macOS). Apps, trees and
//! searches come back as compact outlines with refs that stay valid across calls; selectors and
//! refs drive actions. The commands are written once over a narrow per-OS [`Backend`].
//!
//! # Layout
//! - this file: the `Surface` and its prepared action, and the factory that picks the backend.
//! - `call`: the command table, args validation into a `Job`, paging and outline rendering.
//! - `commands`: what each command does, over any backend: refs, selectors resolved to one
//!   element, the approver check, listings, actions and waits.
//! - `backend`: the `Backend` trait and the backend-neutral apps, nodes, forests and errors.
//! - `read_back`: whether an action on an element took effect, from the element read before
//!   and after it (also the gui surface's read-back of the element under a click).
//! - `selector`: the selector language.
//! - `seen`: acts bound to an observation (`complications.seen`): the refs it showed, and the
//!   `stale` check right before acting.
//! - `roles`: the surface's own state set and role vocabulary (accesskit names).
//! - `shared_tests`: the shared commands over a scripted backend.
//! - `atspi` (Linux): AT-SPI over D-Bus with cache-seeded, concurrent walks.
//! - `macos` (macOS): AXUIElement.

mod backend;
mod call;
mod commands;
pub(crate) mod read_back;
mod roles;
mod seen;
mod selector;
#[cfg(test)]
mod shared_tests;

#[cfg(target_os = "linux")]
mod atspi;
#[cfg(target_os = "macos")]
mod macos;
// The macOS vocabulary is pure: its tables are tested on Linux too.
#[cfg(all(test, target_os = "linux"))]
mod macos {
    pub mod roles;
}

#[cfg(target_os = "macos")]
pub(crate) use macos::element;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde_json::{Map, Value};

use crate::{
    ActionFacts, Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, TargetFacts, receipt_value,
};

use backend::{AxError, Backend, Failure};
use call::{AppArg, COMMANDS, Job};
use commands::{Ax, Refs};
use seen::AxSnapshot;

use crate::snapshot::{Seen, Snapshots};

/// The complications ax honours: the common ones and `seen`.
const AX_COMPLICATIONS: &[&str] = &["timeout_ms", "evidence", "return", "seen"];

pub use selector::{ParseError, Selector};

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

/// Reads top-level windows from AT-SPI with the ax surface's own bus code.
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
/// point and of the focused field, with the ax surface's own bus code. Elsewhere than Linux it
/// reads nothing (the read-back then rests on the window list).
pub(crate) struct ElementReader {
    #[cfg(target_os = "linux")]
    atspi: std::sync::OnceLock<atspi::Atspi>,
}

impl ElementReader {
    pub fn new() -> ElementReader {
        ElementReader {
            #[cfg(target_os = "linux")]
            atspi: std::sync::OnceLock::new(),
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
            let element = self.atspi().element_at(pid, at, deadline).await.ok()??;
            let view = self.atspi().view(&element, deadline).await.ok()??;
            Some((ElementHandle(element), view))
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

/// The ax surface for this platform, if this build has one.
pub fn surface() -> Option<Arc<dyn Surface>> {
    #[cfg(target_os = "linux")]
    return Some(Arc::new(AxSurface::new(atspi::Atspi::from_env())));
    #[cfg(target_os = "macos")]
    return Some(Arc::new(AxSurface::new(macos::MacAx::new())));
    #[allow(unreachable_code)]
    None
}

pub struct AxSurface<B: Backend> {
    ax: Arc<Ax<B>>,
    /// What observations showed, for the acts bound to them.
    snapshots: Arc<Snapshots<AxSnapshot>>,
}

impl<B: Backend> AxSurface<B> {
    fn new(backend: B) -> Self {
        AxSurface {
            ax: Arc::new(Ax {
                backend,
                refs: Refs::default(),
            }),
            snapshots: Arc::new(Snapshots::new("ax")),
        }
    }
}

#[async_trait]
impl<B: Backend> Surface for AxSurface<B> {
    fn name(&self) -> SurfaceName {
        SurfaceName::Ax
    }

    fn backend(&self) -> &'static str {
        B::NAME
    }

    fn needs_desktop(&self) -> bool {
        true
    }

    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
    }

    fn complications(&self) -> &'static [&'static str] {
        AX_COMPLICATIONS
    }

    fn probe(&self) -> Availability {
        self.ax.backend.probe()
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        B::DIALECT.result_fields(command)
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let (job, timeout) = call::prepare(&B::DIALECT, command, args, complications)?;
        let seen = match &complications.seen {
            Some(_) if !matches!(job, Job::Act { .. }) => {
                return Err(crate::snapshot::not_an_act("ax", command));
            }
            Some(id) => Some(self.snapshots.bind(id)?),
            None => None,
        };
        let target = resolve_target(&self.ax, &job);
        Ok(Box::new(AxAction {
            ax: self.ax.clone(),
            job,
            timeout,
            target,
            args: receipt_value(&Value::Object(args.clone())),
            seen,
            snapshots: self.snapshots.clone(),
        }))
    }
}

/// A validated ax call.
pub struct AxAction<B: Backend> {
    ax: Arc<Ax<B>>,
    job: Job,
    timeout: Duration,
    target: Option<TargetFacts>,
    args: Value,
    /// The observation an act was aimed at (`complications.seen`).
    seen: Option<Seen<AxSnapshot>>,
    snapshots: Arc<Snapshots<AxSnapshot>>,
}

/// The app an ax action is about, resolved against the apps the bus has already shown (no round
/// trip): the app behind a ref, the app with the pid given, or the one app the given name picks
/// (the same rule as the run: an exact name, else a part of one). Unresolved, it is what the args
/// spell.
fn resolve_target<B: Backend>(ax: &Ax<B>, job: &Job) -> Option<TargetFacts> {
    let mut target = job.spelled_target()?;
    let known = ax.backend.known_apps();
    let found: Vec<&(String, String, Option<u32>)> = match (job.element_ref(), job.app()) {
        (Some(r), _) => match ax.refs.resolve(r).and_then(|e| ax.backend.app_key_of(&e)) {
            Some(key) => known.iter().filter(|(k, _, _)| *k == key).collect(),
            None => Vec::new(),
        },
        (None, Some(AppArg::Pid(pid))) => {
            known.iter().filter(|(_, _, p)| *p == Some(*pid)).collect()
        }
        (None, Some(AppArg::Name(name))) => {
            let want = name.to_lowercase();
            let exact: Vec<_> = known
                .iter()
                .filter(|(_, n, _)| n.to_lowercase() == want)
                .collect();
            if exact.is_empty() {
                known
                    .iter()
                    .filter(|(_, n, _)| n.to_lowercase().contains(&want))
                    .collect()
            } else {
                exact
            }
        }
        (None, None) => Vec::new(),
    };
    if let [(_, name, pid), rest @ ..] = found.as_slice()
        && rest.iter().all(|(_, other, _)| other == name)
    {
        target.app = Some(name.clone());
        target.pid = if rest.is_empty() { *pid } else { None };
        target.resolved = true;
    }
    Some(target)
}

#[async_trait]
impl<B: Backend> PreparedAction for AxAction<B> {
    fn risk(&self) -> Risk {
        self.job.risk()
    }

    fn describe(&self) -> String {
        match &self.seen {
            Some(seen) => format!(
                "{}, only if its element is as snapshot {} showed it",
                self.job.describe(),
                seen.id
            ),
            None => self.job.describe(),
        }
    }

    fn facts(&self) -> ActionFacts {
        let secrets = self
            .job
            .secret()
            .map(|reference| crate::secrets::SecretUse {
                name: crate::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: crate::secrets::SecretDestination::ElementValue {
                    element: self.job.element_named().unwrap_or_default(),
                    app: self.target.as_ref().and_then(|t| t.app.clone()),
                },
            })
            .into_iter()
            .collect();
        ActionFacts {
            target: self.target.clone(),
            args: Some(self.args.clone()),
            secrets,
            ..ActionFacts::default()
        }
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        match &self.seen {
            Some(seen) => seen.check_caller(agent),
            None => Ok(()),
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let deadline = Instant::now() + self.timeout;
        let mut job = self.job;
        if let Some(reference) = job.secret() {
            // Resolved only now, after policy and approval, and registered for masking first.
            let value = ctx
                .secrets
                .resolve_blocking(crate::secrets::IN_PLACE, &reference)
                .await?;
            if let Job::Act { value: slot, .. } = &mut job {
                *slot = Some(Value::String(
                    secrecy::ExposeSecret::expose_secret(&value).to_string(),
                ));
            }
        }
        let observes = matches!(
            job,
            Job::Tree { .. } | Job::Find { .. } | Job::Read { .. } | Job::Focused { .. }
        );
        let work = commands::run(&self.ax, deadline, job, &ctx.protected, self.seen.as_ref());
        let result = if observes {
            // The refs it shows become a snapshot an act can name.
            match seen::collecting(work).await {
                (Ok(mut outcome), shown) => {
                    let id = self.snapshots.record(&ctx.agent, shown);
                    outcome.fields.insert("snapshot".into(), Value::String(id));
                    Ok(outcome)
                }
                (failed, _) => failed,
            }
        } else {
            work.await
        };
        if let Err(Failure::Ax(AxError::Unavailable(_))) = &result {
            // The service went away (session restarted): the next call starts afresh.
            self.ax.backend.reset().await;
        }
        result.map_err(|failure| failure.into_surface_error(&self.ax))
    }
}
