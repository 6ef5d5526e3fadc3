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
//! - `selector`: the selector language.
//! - `roles`: the surface's own state set and role vocabulary (accesskit names).
//! - `shared_tests`: the shared commands over a scripted backend.
//! - `atspi` (Linux): AT-SPI over D-Bus with cache-seeded, concurrent walks.
//! - `macos` (macOS): AXUIElement.

mod backend;
mod call;
mod commands;
mod roles;
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
    Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface, SurfaceError,
};

use backend::{AxError, Backend, Failure};
use call::{COMMANDS, Job};
use commands::{Ax, Refs};

pub use selector::{ParseError, Selector};

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
}

impl<B: Backend> AxSurface<B> {
    fn new(backend: B) -> Self {
        AxSurface {
            ax: Arc::new(Ax {
                backend,
                refs: Refs::default(),
            }),
        }
    }
}

#[async_trait]
impl<B: Backend> Surface for AxSurface<B> {
    fn name(&self) -> SurfaceName {
        SurfaceName::Ax
    }

    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
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
        Ok(Box::new(AxAction {
            ax: self.ax.clone(),
            job,
            timeout,
        }))
    }
}

/// A validated ax call.
pub struct AxAction<B: Backend> {
    ax: Arc<Ax<B>>,
    job: Job,
    timeout: Duration,
}

#[async_trait]
impl<B: Backend> PreparedAction for AxAction<B> {
    fn risk(&self) -> Risk {
        self.job.risk()
    }

    fn describe(&self) -> String {
        self.job.describe()
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let deadline = Instant::now() + self.timeout;
        let result = commands::run(&self.ax, deadline, self.job, &ctx.protected).await;
        if let Err(Failure::Ax(AxError::Unavailable(_))) = &result {
            // The service went away (session restarted): the next call starts afresh.
            self.ax.backend.reset().await;
        }
        result.map_err(|failure| failure.into_surface_error(&self.ax))
    }
}
