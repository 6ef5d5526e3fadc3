//! What a run's environment holds: the limits every run is started under ([`ShellLimits`]), the
//! variables passed through from the daemon's (and, on a desktop of an agent's own, the
//! desktop's in place of the daemon's display and bus ones, and the limits that keep it to that
//! desktop's sockets), and the call's own working directory and variables, checked. Shared by
//! one-shot runs and terminal sessions.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use computer_ipc::{Complications, ToolError};

use crate::kit::capture::CaptureLimits;
use crate::kit::contain::{Containment, DesktopReach, RunLimits};

/// Limits of a run: those of the shell surface, from the daemon's `[shell]` config section.
#[derive(Debug, Clone)]
pub struct ShellLimits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub capture: CaptureLimits,
    /// What every run is started under; the default refuses runs until the daemon sets it up.
    pub containment: Arc<Containment>,
    /// The desktop of an agent's own that runs start their programs on (its display and bus
    /// variables, which replace the daemon's [`DESKTOP_ENV`]); `None` for the person's.
    pub desktop_env: Option<Arc<[(String, String)]>>,
    /// What runs on that desktop may reach of it (its sockets; [`ShellLimits::with_desktop`]).
    pub desktop_reach: Option<DesktopReach>,
}

impl Default for ShellLimits {
    fn default() -> Self {
        ShellLimits {
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            capture: CaptureLimits::default(),
            containment: Arc::new(Containment::default()),
            desktop_env: None,
            desktop_reach: None,
        }
    }
}

impl ShellLimits {
    /// The limits a run gets beyond its call's `sandbox`: on a desktop of an agent's own, that
    /// desktop alone (a desktop whose sockets were not given still hides the person's).
    pub(crate) fn with_desktop(&self, sandbox: RunLimits) -> RunLimits {
        let desktop = match (&self.desktop_reach, &self.desktop_env) {
            (Some(reach), _) => Some(reach.clone()),
            (None, Some(_)) => Some(DesktopReach::default()),
            (None, None) => None,
        };
        RunLimits { desktop, ..sandbox }
    }
}

/// Variables passed through from the daemon's environment; everything else is dropped, so no
/// daemon socket path, token or unrelated secret leaks into a child.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// The call's working directory (absolute, an existing directory) and added variables (names
/// that can be set, none reserved for the daemon, no NUL), checked for runs and sessions alike.
pub(crate) fn checked_cwd_and_env(
    complications: &Complications,
) -> Result<Option<PathBuf>, ToolError> {
    let cwd = match &complications.cwd {
        Some(cwd) => {
            let path = PathBuf::from(cwd);
            if !path.is_absolute() {
                return Err(
                    ToolError::invalid(format!("cwd `{cwd}` is not an absolute path"))
                        .at("complications.cwd"),
                );
            }
            if !path.is_dir() {
                return Err(
                    ToolError::invalid(format!("cwd `{cwd}` is not a directory"))
                        .at("complications.cwd"),
                );
            }
            Some(path)
        }
        None => None,
    };
    for (key, value) in &complications.env {
        let path = format!("complications.env.{key}");
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(
                ToolError::invalid(format!("`{key}` is not a valid variable name")).at(path),
            );
        }
        if key.starts_with("COMPUTER_") {
            return Err(ToolError::invalid(
                "COMPUTER_* variables are reserved for the daemon and never passed to runs",
            )
            .at(path));
        }
        if value.contains('\0') {
            return Err(ToolError::invalid("values cannot contain NUL bytes").at(path));
        }
    }
    Ok(cwd)
}

/// The variables that name the desktop a program shows on and the buses it talks to: on an
/// agent's own desktop none of the daemon's reach a run, only the desktop's own.
pub const DESKTOP_ENV: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS",
    "AT_SPI_BUS_ADDRESS",
    "SWAYSOCK",
    "XAUTHORITY",
];

/// What passes through from the daemon's environment to a run: [`PASSED_ENV`] and the locale;
/// on a desktop of an agent's own (`desktop_env`), its variables in place of the daemon's
/// [`DESKTOP_ENV`].
pub(crate) fn passed_env(desktop_env: Option<&[(String, String)]>) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    for key in PASSED_ENV {
        if let Some(value) = std::env::var_os(key) {
            env.insert(key.into(), value);
        }
    }
    for (key, value) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| k.starts_with("LC_")) {
            env.insert(key, value);
        }
    }
    if let Some(desktop) = desktop_env {
        env.retain(|key, _| !DESKTOP_ENV.iter().any(|name| key == *name));
        for (key, value) in desktop {
            env.insert(key.into(), value.into());
        }
    }
    env
}

/// The address of the person's accessibility bus, as the daemon's session bus gives it (`None`
/// when there is no session bus, or no accessibility bus runs on it, within a second): a run on
/// a desktop of an agent's own must not reach it, wherever at-spi put its socket. One that is
/// not running is not started by asking (one started later puts its socket in the runtime or
/// cache directory, which such runs find covered anyway).
#[cfg(target_os = "linux")]
pub(crate) fn person_accessibility_bus() -> Option<String> {
    let ask = async {
        let session = zbus::Connection::session().await.ok()?;
        let running = crate::accessibility::atspi::accessibility_bus_running(&session).await?;
        if !running {
            return None;
        }
        crate::accessibility::atspi::accessibility_bus_address(&session)
            .await
            .ok()
    };
    // On a thread and runtime of its own: the caller may be on the daemon's runtime.
    crate::kit::on_own_runtime(async {
        tokio::time::timeout(std::time::Duration::from_secs(1), ask)
            .await
            .ok()
            .flatten()
    })
    .filter(|address| !address.is_empty())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn person_accessibility_bus() -> Option<String> {
    None
}
