//! Desktops of the agents' own: a display server, a window manager, a private D-Bus session bus
//! and an accessibility bus started for one agent, the environment that puts a program on it,
//! the gui and ax surfaces bound to it alone, and the end of everything that ran there.
//!
//! # Layout
//! - this file: the platform-neutral types ([`DesktopSpec`], [`DesktopKind`], [`AgentDesktop`],
//!   [`DesktopError`]).
//! - `linux`: starting the X11 kinds (Xvfb, Xephyr), the buses and the window manager.
//! - `sway`: starting the wlroots kinds (sway nested in the person's sway, or headless).
//! - `ending`: finding every process that ran on a desktop, and ending them.
//! - `tests`: the real components (Xvfb, Xephyr, openbox, dbus-daemon, AT-SPI, GTK apps); the
//!   sway kinds are tested in the integration suite `agent_desktops_wayland` (sway refuses
//!   root, and needs a person's sway to nest in).

use std::path::PathBuf;
use std::sync::Arc;

use crate::{EvidenceCapture, Surface};

#[cfg(target_os = "linux")]
mod ending;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod sway;
#[cfg(all(test, target_os = "linux"))]
mod tests;

/// What desktop to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesktopSpec {
    /// Width and height in pixels.
    pub size: (u32, u32),
    /// Shown to the person as a window on their display (Xephyr, a nested sway), where there is
    /// one; else (or false) a virtual one nobody sees (Xvfb, headless sway).
    pub visible: bool,
}

/// The smallest and largest width or height a desktop may have.
pub const SIZE_RANGE: std::ops::RangeInclusive<u32> = 64..=8192;

/// Which display server an agent's desktop runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DesktopKind {
    /// A virtual X server nobody sees.
    Xvfb,
    /// A nested X server shown as a window on the person's X display.
    Xephyr,
    /// sway nested as a window on the person's wlroots Wayland session.
    SwayNested,
    /// sway with no output anybody sees.
    SwayHeadless,
}

impl DesktopKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DesktopKind::Xvfb => "xvfb",
            DesktopKind::Xephyr => "xephyr",
            DesktopKind::SwayNested => "sway-nested",
            DesktopKind::SwayHeadless => "sway-headless",
        }
    }
}

impl std::fmt::Display for DesktopKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The person's session a visible desktop is shown in: what the daemon's environment names,
/// unless a caller (a test) names another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSession {
    /// The person's X display (`DISPLAY`).
    pub display: Option<String>,
    /// The person's Wayland socket (`WAYLAND_DISPLAY`).
    pub wayland_display: Option<String>,
    /// The person's sway IPC socket (`SWAYSOCK`): the session is a wlroots one.
    pub swaysock: Option<String>,
}

impl HostSession {
    /// The session the daemon's environment names (empty variables count as unset).
    pub fn from_env() -> HostSession {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        HostSession {
            display: var("DISPLAY"),
            wayland_display: var("WAYLAND_DISPLAY"),
            swaysock: var("SWAYSOCK"),
        }
    }
}

/// Why a desktop could not be opened: what failed, and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    #[error(
        "a desktop of {width}x{height} was asked for: each side must be {} to {} pixels",
        SIZE_RANGE.start(),
        SIZE_RANGE.end()
    )]
    InvalidSize { width: u32, height: u32 },
    #[error(
        "{program} is not installed, and an agent's {kind} desktop needs it: install the package \
         {package} (Debian/Ubuntu: `apt-get install {package}`)"
    )]
    MissingProgram {
        program: &'static str,
        package: &'static str,
        kind: DesktopKind,
    },
    #[error("{what} did not start: {why}{}", log_tail(.log))]
    Start {
        what: &'static str,
        why: String,
        log: String,
    },
    #[error("{what} did not become ready within {} ms{}", .after.as_millis(), log_tail(.log))]
    Timeout {
        what: &'static str,
        after: std::time::Duration,
        log: String,
    },
    #[error("cannot make the desktop's private directory {}: {why}", .path.display())]
    PrivateDir { path: PathBuf, why: String },
    #[error("{0}")]
    Unsupported(String),
}

fn log_tail(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("; its log ends: {}", log.trim())
    }
}

/// A desktop of an agent's own, open until [`AgentDesktop::close`] or drop.
pub struct AgentDesktop {
    kind: DesktopKind,
    size: (u32, u32),
    env: Vec<(String, String)>,
    gui: Arc<dyn Surface>,
    ax: Arc<dyn Surface>,
    evidence: Option<Arc<dyn EvidenceCapture>>,
    #[cfg(target_os = "linux")]
    running: ending::Running,
}

/// [`REMOVED_ENV`] and the X display's variable: a program on a sway desktop must not reach
/// the person's X display (Xwayland) either. `DISPLAY` last: the X kinds' list is the rest.
pub const REMOVED_ENV_WAYLAND: &[&str] = &[
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "SWAYSOCK",
    "XAUTHORITY",
    "DBUS_SYSTEM_BUS_ADDRESS_OVERRIDE",
    "GNOME_KEYRING_CONTROL",
    "SSH_AUTH_SOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "DISPLAY",
];

/// The variables a program started on a desktop must NOT keep from the daemon's environment:
/// they would put it on the person's session.
pub const REMOVED_ENV: &[&str] = match REMOVED_ENV_WAYLAND.split_last() {
    Some((_display, rest)) => rest,
    None => &[],
};

impl AgentDesktop {
    /// Opens a desktop in the session the daemon's environment names. See
    /// [`AgentDesktop::open_in`].
    pub fn open(spec: &DesktopSpec) -> Result<AgentDesktop, DesktopError> {
        AgentDesktop::open_in(spec, &HostSession::from_env())
    }

    /// Opens a desktop: on a wlroots (sway) session, a sway nested as a window in the person's
    /// sway when `visible`, else a headless sway (see `sway.rs` for whom it runs as when the
    /// daemon is root); otherwise an X server (Xephyr shown as a window on the person's X
    /// display when `visible` and there is one; else Xvfb) with a window manager (openbox);
    /// then a private D-Bus session bus and an accessibility bus on it, so GTK and Qt apps
    /// started with [`AgentDesktop::env`] are reachable over AT-SPI. It returns once all of
    /// them answer.
    pub fn open_in(spec: &DesktopSpec, host: &HostSession) -> Result<AgentDesktop, DesktopError> {
        let (width, height) = spec.size;
        if !SIZE_RANGE.contains(&width) || !SIZE_RANGE.contains(&height) {
            return Err(DesktopError::InvalidSize { width, height });
        }
        #[cfg(target_os = "linux")]
        {
            // A sway of its own on a sway session, else an X server.
            match sway::kind_for(spec, host) {
                Some(kind) => sway::open(spec, host, kind),
                None => linux::open(spec, host),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = host;
            Err(DesktopError::Unsupported(
                "desktops of an agent's own exist on Linux only (X11: Xvfb or Xephyr; wlroots: \
                 sway); on this platform the agent works on the person's desktop"
                    .into(),
            ))
        }
    }

    pub fn kind(&self) -> DesktopKind {
        self.kind
    }

    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// What a program started on it must get: `DISPLAY` (X11 kinds) or `WAYLAND_DISPLAY` (an
    /// absolute path) and `SWAYSOCK` (sway kinds), `DBUS_SESSION_BUS_ADDRESS`,
    /// `AT_SPI_BUS_ADDRESS`, `XDG_RUNTIME_DIR` (the desktop's private directory), the toolkit
    /// choices (`GDK_BACKEND=x11`, `QT_QPA_PLATFORM=xcb`, or `wayland`), accessibility on
    /// (`NO_AT_BRIDGE=0`, `QT_ACCESSIBILITY=1`) and `COMPUTER_DESKTOP` (its id, by which its
    /// processes are found at close). Remove [`Self::removed_env`] as well.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The variables to remove from a program's environment besides setting [`Self::env`].
    pub fn removed_env(&self) -> &'static [&'static str] {
        match self.kind {
            DesktopKind::SwayNested | DesktopKind::SwayHeadless => REMOVED_ENV_WAYLAND,
            DesktopKind::Xvfb | DesktopKind::Xephyr => REMOVED_ENV,
        }
    }

    /// What a contained run on it must be allowed to reach: the X server's socket (X11 kinds)
    /// or sway's Wayland and IPC sockets (sway kinds, inside the private directory), and the
    /// desktop's private directory (its `XDG_RUNTIME_DIR`, holding the session bus's and the
    /// accessibility bus's sockets). The X server listens on no abstract socket and no TCP
    /// port, sway and the buses only on these paths: nothing else reaches them.
    pub fn sockets(&self) -> Vec<PathBuf> {
        #[cfg(target_os = "linux")]
        {
            self.running.sockets()
        }
        #[cfg(not(target_os = "linux"))]
        Vec::new()
    }

    /// The gui and ax surfaces bound to this desktop only (never the person's display or bus).
    pub fn surfaces(&self) -> Vec<Arc<dyn Surface>> {
        vec![self.gui.clone(), self.ax.clone()]
    }

    /// The evidence capturer of this desktop's screen.
    pub fn evidence(&self) -> Option<Arc<dyn EvidenceCapture>> {
        self.evidence.clone()
    }

    /// Resident memory (VmRSS) of every process it started and every process running on it,
    /// in bytes.
    pub fn resident_bytes(&self) -> u64 {
        #[cfg(target_os = "linux")]
        {
            self.pids().into_iter().map(ending::resident_bytes).sum()
        }
        #[cfg(not(target_os = "linux"))]
        0
    }

    /// Its servers' pids and those of every process found on it now (see
    /// [`AgentDesktop::close`] for how they are found).
    pub fn pids(&self) -> Vec<u32> {
        #[cfg(target_os = "linux")]
        {
            self.running.pids()
        }
        #[cfg(not(target_os = "linux"))]
        Vec::new()
    }

    /// Ends everything that ran on it, and waits for it: every process whose environment names
    /// its display, its buses or its id, every client of its X server (by the X-Resource
    /// extension's client pids, which a program cannot clear as it can its environment), and
    /// their descendants get SIGTERM, then SIGKILL after 2 s; then its servers, the X server
    /// last; then its private directory is removed. Drop does the same.
    pub fn close(self) {
        drop(self)
    }
}

#[cfg(target_os = "linux")]
impl Drop for AgentDesktop {
    fn drop(&mut self) {
        self.running.end();
    }
}
