//! The ax surface: accessibility trees over AT-SPI (Linux). Apps, trees and searches come back as
//! compact outlines with refs that stay valid across calls; selectors and refs drive actions.
//!
//! # Layout
//! - this file: the `Surface` (probe, AT-SPI's dialect of the commands) and the prepared action.
//! - `call`: the commands and their validated form, shared with the macOS backend.
//! - `bus`: the lazily opened, self-healing a11y bus connection and deadline-bound calls.
//! - `cache`: an app's own AT-SPI cache (`GetItems`), which seeds walks in one call.
//! - `tree`: concurrent, page-bounded tree walks, the ref table, outline and JSON lines.
//! - `selector`: the selector language.
//! - `roles`: AT-SPI roles mapped onto accesskit's `Role` names; state vocabulary.
//! - `commands`: what each command does once validated.

mod bus;
mod cache;
mod call;
mod commands;
// The macOS vocabulary is pure: its tables are tested here too (the macOS backend is
// `macos.rs`, which lib.rs picks on macOS instead of this module).
#[cfg(test)]
mod macos_roles;
mod roles;
mod selector;
mod tree;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde_json::{Map, Value};

use crate::{
    ActionFacts, Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, TargetFacts, receipt_value,
};

use bus::Bus;
use call::{AppArg, COMMANDS, Dialect, Job};
use tree::Refs;

pub use selector::{ParseError, Selector, parse as parse_selector};

/// The AT-SPI side of the shared commands.
const DIALECT: Dialect = Dialect {
    tree_fields: &[
        "tree",
        "revision",
        "nodes",
        "cursor",
        "truncated",
        "unchanged",
        "skipped",
    ],
    find_fields: &[
        "matches",
        "revision",
        "nodes",
        "total",
        "cursor",
        "truncated",
        "unchanged",
        "skipped",
    ],
    act_fields: &["ref", "action", "done", "via", "node", "value", "states"],
    knows_role: |folded| {
        roles::known_role_names()
            .iter()
            .any(|known| known == folded)
    },
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

/// The ax surface for this platform, if this build has one.
pub fn surface() -> Option<Arc<dyn Surface>> {
    // `COMPUTER_AX_APP_CACHE=off` walks every tree node by node (the benchmark compares both).
    let use_app_caches = std::env::var("COMPUTER_AX_APP_CACHE").map_or(true, |v| v != "off");
    tracing::info!(
        backend = "AT-SPI over D-Bus (zbus, accesskit roles)",
        use_app_caches,
        "ax backend chosen; the accessibility bus is opened on first use"
    );
    Some(Arc::new(AxSurface {
        ax: Arc::new(Ax {
            bus: Bus::new(use_app_caches),
            refs: Refs::default(),
        }),
    }))
}

/// State shared by every call: the bus connection and the ref table.
pub struct Ax {
    bus: Bus,
    refs: Refs,
}

pub struct AxSurface {
    ax: Arc<Ax>,
}

#[async_trait]
impl Surface for AxSurface {
    fn name(&self) -> SurfaceName {
        SurfaceName::Ax
    }

    fn backend(&self) -> &'static str {
        "AT-SPI over D-Bus"
    }

    fn needs_desktop(&self) -> bool {
        true
    }

    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
    }

    fn probe(&self) -> Availability {
        let has_bus = std::env::var_os("AT_SPI_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
            || std::env::var_os("XDG_RUNTIME_DIR")
                .is_some_and(|dir| std::path::Path::new(&dir).join("bus").exists());
        if !has_bus {
            return Availability::Unavailable {
                reason: "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset".into(),
                fix: "run the daemon inside the desktop session (systemd --user unit, or export DBUS_SESSION_BUS_ADDRESS and DISPLAY before `computer serve`)".into(),
            };
        }
        if let Some(why) = self.ax.bus.recent_failure() {
            return Availability::Unavailable {
                reason: format!("the accessibility bus is unreachable: {why}"),
                fix: "install at-spi2-core (at-spi-bus-launcher) and enable accessibility (gsettings set org.gnome.desktop.interface toolkit-accessibility true); the daemon retries after 5 s".into(),
            };
        }
        Availability::Ready
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        DIALECT.result_fields(command)
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let (job, timeout) = call::prepare(&DIALECT, command, args, complications)?;
        let target = resolve_target(&self.ax, &job);
        Ok(Box::new(AxAction {
            ax: self.ax.clone(),
            job,
            timeout,
            target,
            args: receipt_value(&Value::Object(args.clone())),
        }))
    }
}

/// A validated ax call.
pub struct AxAction {
    ax: Arc<Ax>,
    job: Job,
    timeout: Duration,
    target: Option<TargetFacts>,
    args: Value,
}

/// The app an ax action is about, resolved against the apps the bus has already shown (no round
/// trip): the app behind a ref, the app with the pid given, or the one app the given name picks
/// (the same rule as the run: an exact name, else a part of one). Unresolved, it is what the args
/// spell.
fn resolve_target(ax: &Ax, job: &Job) -> Option<TargetFacts> {
    let mut target = job.spelled_target()?;
    let known = ax.bus.known_apps();
    let found: Vec<&(String, String, Option<u32>)> = match (job.element_ref(), job.app()) {
        (Some(r), _) => match ax.refs.resolve(r) {
            Some((bus, _)) => known.iter().filter(|(b, _, _)| *b == bus).collect(),
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
impl PreparedAction for AxAction {
    fn risk(&self) -> Risk {
        self.job.risk()
    }

    fn describe(&self) -> String {
        self.job.describe()
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts {
            target: self.target.clone(),
            args: Some(self.args.clone()),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let deadline = Instant::now() + self.timeout;
        let conn = match self.ax.bus.connection(deadline).await {
            Ok(conn) => conn,
            Err(err) => return Err(commands::failure(&self.ax, err)),
        };
        let result = commands::run(&self.ax, &conn, deadline, self.job, &ctx.protected).await;
        if let Err(commands::Failure::Bus(bus::BusError::Connect(_))) = &result {
            // The bus went away (session restarted): the next call reconnects.
            self.ax.bus.reset().await;
        }
        result.map_err(|failure| failure.into_surface_error(&self.ax))
    }
}
