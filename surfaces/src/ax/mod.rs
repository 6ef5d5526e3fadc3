//! The ax surface: accessibility trees (AT-SPI on Linux, AXUIElement on macOS). Apps, trees and
//! searches come back as compact outlines with refs that stay valid across calls; selectors and
//! refs drive actions. The commands are written once over the narrow per-OS [`Backend`] of the
//! shared [`crate::accessibility`] module, which also holds the backends themselves, the role and
//! state vocabulary and the read-back of an act.
//!
//! # Layout
//! - this file: the `Surface` and its prepared action, and the factory that picks the backend.
//! - `commands`: the commands, one type and file each (its args, result fields, checks and
//!   run), and the one table of them the surface offers and dispatches by name.
//! - `call`: what the commands share in args and output: targets, paging and cursors, and
//!   outline rendering.
//! - `keyboard`: the gui keyboard `set_value` types with into a field that takes text only
//!   from keys (web text fields), with the checks that keep the keys in that field.
//! - `lookup`: what the commands share over any backend: the ref table, apps, windows, refs and
//!   selectors resolved to elements, the approver check, paged listings.
//! - `selector`: the selector language (and what of a backend's node it tests).
//! - `seen`: acts bound to an observation (`complications.seen`): the refs it showed, and the
//!   `stale` check right before acting.
//! - `shared_tests`: the shared commands over a scripted backend.

mod call;
mod commands;
mod keyboard;
mod lookup;
mod seen;
mod selector;
#[cfg(test)]
mod shared_tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde_json::{Map, Value};

use crate::{
    ActionFacts, Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, TargetFacts, receipt_value,
};

use crate::accessibility::backend::{AxError, Backend, Failure};
use call::AppArg;
use commands::{COMMANDS, Job, Running, Typing};
pub use keyboard::Keyboard;
use lookup::{Ax, Refs};
use seen::AxSnapshot;

use crate::kit::snapshot::{Seen, Snapshots};

/// The complications ax honours: the common ones and `seen`.
const AX_COMPLICATIONS: &[&str] = &["timeout_ms", "evidence", "return", "seen"];

pub use selector::{ParseError, Selector};

/// The ax surface for this platform, if this build has one; `keyboard` types what a field
/// takes only from keys.
pub fn surface(keyboard: Option<Keyboard>) -> Option<Arc<dyn Surface>> {
    #[cfg(target_os = "linux")]
    return Some(Arc::new(AxSurface::new(
        crate::accessibility::atspi::Atspi::from_env(),
        keyboard,
    )));
    #[cfg(target_os = "macos")]
    return Some(Arc::new(AxSurface::new(
        crate::accessibility::macos::MacAx::new(),
        keyboard,
    )));
    #[allow(unreachable_code)]
    None
}

/// The ax surface on the accessibility bus at `address` (an agent's own desktop's), whatever the
/// process environment names; `keyboard` types what a field takes only from keys.
#[cfg(target_os = "linux")]
pub fn surface_on_bus(address: &str, keyboard: Option<Keyboard>) -> Arc<dyn Surface> {
    Arc::new(AxSurface::new(
        crate::accessibility::atspi::Atspi::on_bus(address),
        keyboard,
    ))
}

pub struct AxSurface<B: Backend> {
    ax: Arc<Ax<B>>,
    /// What observations showed, for the acts bound to them.
    snapshots: Arc<Snapshots<AxSnapshot>>,
    /// What types into a field that takes text only from keys.
    keyboard: Option<Arc<Keyboard>>,
}

impl<B: Backend> AxSurface<B> {
    fn new(backend: B, keyboard: Option<Keyboard>) -> Self {
        AxSurface {
            ax: Arc::new(Ax {
                backend,
                refs: Refs::default(),
            }),
            snapshots: Arc::new(Snapshots::new("ax")),
            keyboard: keyboard.map(Arc::new),
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
        &COMMANDS
    }

    fn complications(&self) -> &'static [&'static str] {
        AX_COMPLICATIONS
    }

    fn probe(&self) -> Availability {
        self.ax.backend.probe()
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        commands::result_fields(command)
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let (job, timeout) = commands::prepare(&B::DIALECT, command, args, complications)?;
        let seen = match &complications.seen {
            Some(_) if !matches!(job, Job::Act(_)) => {
                return Err(crate::kit::snapshot::not_an_act("ax", command));
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
            keyboard: self.keyboard.clone(),
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
    keyboard: Option<Arc<Keyboard>>,
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
            .map(|reference| crate::kit::secrets::SecretUse {
                name: crate::kit::secrets::IN_PLACE.into(),
                reference: reference.uri(),
                to: crate::kit::secrets::SecretDestination::ElementValue {
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
                .resolve_blocking(crate::kit::secrets::IN_PLACE, &reference)
                .await?;
            if let Job::Act(act) = &mut job {
                act.value = Some(Value::String(
                    secrecy::ExposeSecret::expose_secret(&value).to_string(),
                ));
            }
        }
        let observes = job.observes();
        let call = Running {
            deadline,
            protected: &ctx.protected,
            seen: self.seen.as_ref(),
            keys: self.keyboard.as_deref().map(|keyboard| Typing {
                keyboard,
                ctx: &ctx,
            }),
        };
        let work = job.run(&self.ax, &call);
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
