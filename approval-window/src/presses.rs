//! Which device the last press came from, so that synthetic input does not answer: on X11 a
//! program clicks or types into any window through XTEST (`xdotool` from an agent's run), and
//! such a click on *Allow once* would be taken as the person's. The window watches XInput2 raw
//! button and key presses (on the root window: they come whatever window has the focus and
//! whatever grabs there are) on a connection of its own, and a button that is activated while
//! the last press came from an XTEST device (any master's "… XTEST pointer/keyboard") answers
//! nothing. Accessible actions (a screen reader, or any program on the accessibility bus,
//! pressing the button over AT-SPI) bring no press at all: egui marks them, on every platform,
//! and here no press means the same (see `window.rs` for what the window takes from them). Without X (Wayland, macOS) nothing is watched
//! and nothing is ignored.

#[cfg(target_os = "linux")]
use std::collections::HashMap;
#[cfg(target_os = "linux")]
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
/// A press this recent (or newer) decides whether an activated button is the person's.
const PRESS_WINDOW: Duration = Duration::from_secs(2);

#[cfg(target_os = "linux")]
pub struct Presses {
    conn: Option<x11rb::rust_connection::RustConnection>,
    /// Whether each device seen is an XTEST one.
    xtest: HashMap<u16, bool>,
    /// The newest press: when it was read, and whether it was synthetic.
    last: Option<(Instant, bool)>,
}

#[cfg(target_os = "linux")]
impl Presses {
    /// Watches presses on the X display, if there is one that speaks XInput 2.1 or later.
    pub fn watch() -> Presses {
        let conn = match Presses::connect() {
            Ok(conn) => Some(conn),
            Err(why) => {
                tracing::info!(%why, "not watching where presses come from");
                None
            }
        };
        Presses {
            conn,
            xtest: HashMap::new(),
            last: None,
        }
    }

    fn connect() -> Result<x11rb::rust_connection::RustConnection, String> {
        use x11rb::connection::{Connection, RequestConnection};
        use x11rb::protocol::xinput::{self, ConnectionExt as _};
        if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
            return Err("no X display".into());
        }
        let (conn, screen) = x11rb::connect(None).map_err(|e| e.to_string())?;
        let has_xinput = conn
            .extension_information(xinput::X11_EXTENSION_NAME)
            .map_err(|e| e.to_string())?
            .is_some();
        if !has_xinput {
            return Err("the X server lacks XInput".into());
        }
        let version = conn
            .xinput_xi_query_version(2, 2)
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| e.to_string())?;
        if (version.major_version, version.minor_version) < (2, 1) {
            return Err("XInput older than 2.1".into());
        }
        let root = conn.setup().roots[screen].root;
        conn.xinput_xi_select_events(
            root,
            &[xinput::EventMask {
                deviceid: xinput::Device::ALL.into(),
                mask: vec![
                    xinput::XIEventMask::RAW_BUTTON_PRESS | xinput::XIEventMask::RAW_KEY_PRESS,
                ],
            }],
        )
        .map_err(|e| e.to_string())?
        .check()
        .map_err(|e| e.to_string())?;
        tracing::info!("watching where presses come from (XInput2 raw events)");
        Ok(conn)
    }

    /// Reads the presses that came so far.
    pub fn drain(&mut self) {
        use x11rb::connection::Connection;
        use x11rb::protocol::Event;
        let Some(conn) = &self.conn else { return };
        let mut sources = Vec::new();
        loop {
            match conn.poll_for_event() {
                Ok(Some(Event::XinputRawButtonPress(e))) => sources.push(e.sourceid),
                Ok(Some(Event::XinputRawKeyPress(e))) => sources.push(e.sourceid),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(why) => {
                    tracing::warn!(%why, "the X connection watching presses broke");
                    self.conn = None;
                    return;
                }
            }
        }
        for source in sources {
            let synthetic = self.is_xtest(source);
            self.last = Some((Instant::now(), synthetic));
        }
    }

    /// What activated a button now: the newest press, once every press the server had sent by
    /// now is read, if it is recent.
    pub fn last_press(&mut self) -> LastPress {
        use x11rb::protocol::xproto::ConnectionExt as _;
        // A round trip: the events the server sent before its reply are read with it.
        if let Some(conn) = &self.conn
            && conn
                .get_input_focus()
                .map_err(|e| e.to_string())
                .and_then(|c| c.reply().map_err(|e| e.to_string()))
                .is_err()
        {
            self.conn = None;
        }
        self.drain();
        if self.conn.is_none() {
            return LastPress::Unwatched;
        }
        match self.last {
            Some((at, synthetic)) if at.elapsed() < PRESS_WINDOW => match synthetic {
                true => LastPress::Synthetic,
                false => LastPress::Device,
            },
            _ => LastPress::NoneRecent,
        }
    }

    /// Whether `device` is an XTEST device: named "<master> XTEST pointer/keyboard" by the
    /// server (the suffix is not the creator's to choose), or marked `XTEST Device`.
    fn is_xtest(&mut self, device: u16) -> bool {
        if let Some(&known) = self.xtest.get(&device) {
            return known;
        }
        let Some(conn) = &self.conn else { return false };
        let judged = xtest_device(conn, device).unwrap_or_else(|why| {
            tracing::warn!(%why, device, "cannot read the input device; taken as synthetic");
            true
        });
        self.xtest.insert(device, judged);
        judged
    }
}

#[cfg(target_os = "linux")]
fn xtest_device(
    conn: &x11rb::rust_connection::RustConnection,
    device: u16,
) -> Result<bool, String> {
    use x11rb::protocol::xinput::{ConnectionExt as _, XIGetPropertyItems};
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
    let infos = conn
        .xinput_xi_query_device(device)
        .map_err(|e| e.to_string())?
        .reply()
        .map_err(|e| e.to_string())?
        .infos;
    let name = infos
        .first()
        .map(|d| String::from_utf8_lossy(&d.name).into_owned())
        .unwrap_or_default();
    if name.ends_with(" XTEST pointer") || name.ends_with(" XTEST keyboard") {
        return Ok(true);
    }
    let atom = conn
        .intern_atom(true, b"XTEST Device")
        .map_err(|e| e.to_string())?
        .reply()
        .map_err(|e| e.to_string())?
        .atom;
    if atom == x11rb::NONE {
        return Ok(false);
    }
    let reply = conn
        .xinput_xi_get_property(device, false, atom, AtomEnum::ANY.into(), 0, 1)
        .map_err(|e| e.to_string())?
        .reply()
        .map_err(|e| e.to_string())?;
    Ok(match reply.items {
        XIGetPropertyItems::Data8(v) => v.iter().any(|&b| b != 0),
        XIGetPropertyItems::Data16(v) => v.iter().any(|&b| b != 0),
        XIGetPropertyItems::Data32(v) => v.iter().any(|&b| b != 0),
        _ => false,
    })
}

/// What activated a button, as far as the window can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Where presses are not watched, only `Unwatched` is ever made.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub enum LastPress {
    /// A mouse or keyboard (not XTEST) pressed just before.
    Device,
    /// A program, through XTEST.
    Synthetic,
    /// No press at all: an accessible action (AT-SPI's `DoAction`).
    NoneRecent,
    /// Presses are not watched here (no X, or no XInput 2.1).
    Unwatched,
}

/// Elsewhere there is no XTEST to tell apart.
#[cfg(not(target_os = "linux"))]
pub struct Presses;

#[cfg(not(target_os = "linux"))]
impl Presses {
    pub fn watch() -> Presses {
        Presses
    }

    pub fn drain(&mut self) {}

    pub fn last_press(&mut self) -> LastPress {
        LastPress::Unwatched
    }
}
