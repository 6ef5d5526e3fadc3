//! Which X display the backend drives: `$DISPLAY` (the person's) or an agent's own desktop
//! named to [`Backend::on_display`]; why none can be used; the kept connection to it.

use std::sync::Arc;

use super::{XConn, person_devices};
use crate::Availability;
use crate::gui::backends::kept_conn::KeptConn;
use crate::gui::desktop;

/// Why the display cannot be used, as `probe` reports it.
pub fn no_display() -> Option<Availability> {
    match std::env::var_os("DISPLAY").filter(|d| !d.is_empty()) {
        Some(_) => None,
        None => Some(match std::env::var("WAYLAND_DISPLAY") {
            Ok(wayland) if !wayland.is_empty() => Availability::Unavailable {
                reason: format!(
                    "this is a Wayland session (WAYLAND_DISPLAY={wayland}) without an X display; \
                     the gui surface drives X11 only for now"
                ),
                fix: "enable Xwayland and start the daemon with DISPLAY set (e.g. DISPLAY=:0), \
                      or log in to an X11 session"
                    .into(),
            },
            _ => Availability::Unavailable {
                reason: "no X display: DISPLAY is not set in the daemon's environment".into(),
                fix: "start the daemon from a desktop session or set DISPLAY (e.g. \
                      `DISPLAY=:0 computer serve`); headless: `Xvfb :99 & DISPLAY=:99 computer serve`"
                    .into(),
            },
        }),
    }
}

/// The process-wide connection to the X server (see [`KeptConn`]).
pub struct Backend {
    conn: KeptConn<XConn>,
    /// The display of an agent's own desktop; None: `$DISPLAY`, the person's.
    display: Option<String>,
}

impl Backend {
    pub fn new() -> Backend {
        Backend {
            conn: KeptConn::new(),
            display: None,
        }
    }

    /// The backend on an agent's own desktop at `display` (":5"), whatever `$DISPLAY` says:
    /// no person watch, no agent pointer pair (its core pointer is the agent's alone).
    pub fn on_display(display: &str) -> Backend {
        Backend {
            conn: KeptConn::new(),
            display: Some(display.to_string()),
        }
    }

    /// The connection, or why there is none.
    pub fn conn(&self) -> Result<Arc<XConn>, Availability> {
        let named = self.display.as_deref();
        self.conn.get(
            || XConn::connect_to(named),
            |_| {
                if named.is_none() && crate::gui::person::watch().enabled() {
                    person_devices::watch_person_once();
                }
            },
        )
    }

    /// The connection, if one is kept now (none is made).
    pub(super) fn current(&self) -> Option<Arc<XConn>> {
        self.conn.current()
    }

    /// Drops a connection that failed, so the next use reconnects.
    pub fn forget(&self, broken: &Arc<XConn>) {
        self.conn.forget(broken)
    }

    pub fn availability(&self) -> Availability {
        match self.conn() {
            Ok(_) => Availability::Ready,
            Err(why) => why,
        }
    }
}

impl desktop::Backend for Backend {
    type Conn = XConn;

    fn conn(&self) -> Result<Arc<XConn>, Availability> {
        Backend::conn(self)
    }
    fn forget(&self, broken: &Arc<XConn>) {
        Backend::forget(self, broken)
    }
    fn availability(&self) -> Availability {
        Backend::availability(self)
    }
}
