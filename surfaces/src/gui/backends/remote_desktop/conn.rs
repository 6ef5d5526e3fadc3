//! A connection that works through a remote-desktop session, written once for the GNOME and
//! portal backends: the session bus, the AT-SPI windows and the slot the session is kept in,
//! and the `Desktop` and `Backend` they make (screenshots from the session's screen cast, input
//! through its events, windows from AT-SPI, no pointer position, no window raised). What differs
//! between the two (how they connect and start the session, what they keep for it, their
//! monitors, their words) is a [`Service`].

use std::sync::Arc;
use std::time::Duration;

use super::session::{OpenSession, SessionSlot};
use super::{AtspiWindows, InputSink, block_on};
use crate::Availability;
use crate::gui::backends::kept_conn::KeptConn;
use crate::gui::backends::rgb_frame::RgbFrame;
use crate::gui::desktop::{
    self, Button, Capability, DisplayError, DisplayResult, MonitorInfo, Rect, Rgb, WindowInfo,
};
use crate::gui::keys::Combo;
use crate::kit::secret_store::SecretStore;

/// How long the first frame of a new session's stream may take.
const FIRST_FRAME_BOUND: Duration = Duration::from_secs(5);

/// What differs between the backends that drive a remote-desktop session: one value per
/// connection (what it learnt connecting), and what the backend keeps across connections.
pub trait Service: Send + Sync + Sized + 'static {
    type Session: OpenSession;
    /// What the backend keeps in the keychain across connections (GNOME's consent, the
    /// portal's restore token).
    type Kept: Send + Sync + 'static;
    /// The backend, as its errors name it.
    const BACKEND: &'static str;
    /// How long one gesture may take.
    const INPUT_BOUND: Duration;
    /// Why the pointer's position cannot be read here.
    const NO_CURSOR: &'static str;
    /// Why no window can be raised here.
    const NO_FOCUS: &'static str;
    /// How an agent gives a window the focus here (`Desktop::how_to_focus`).
    const HOW_TO_FOCUS: &'static str;

    /// What the backend keeps, over the keychain `store`.
    fn kept(store: Arc<dyn SecretStore>) -> Self::Kept;
    /// Connects to the session bus and checks the service is there, or says why it is not.
    fn connect(kept: Arc<Self::Kept>) -> Result<(zbus::Connection, Self), Availability>;
    /// Starts the remote-desktop session (only with the person's consent or grant).
    fn start_session(&self, bus: &zbus::Connection) -> DisplayResult<Self::Session>;
    /// Whether the service still answers on `bus`.
    fn answers(&self, bus: &zbus::Connection) -> bool;
    /// The key events of `text`, or why it cannot be typed here.
    fn text_events(text: &str) -> DisplayResult<Vec<(u32, bool)>>;
    /// The screen: the monitor the session records.
    fn screen(conn: &SessionConn<Self>) -> DisplayResult<Rect>;
    fn monitors(conn: &SessionConn<Self>) -> DisplayResult<Vec<MonitorInfo>>;
    /// `Backend::consent_needed`, given the connection whose session runs, if one does.
    fn consent_needed(
        _kept: &Self::Kept,
        _running: Option<&SessionConn<Self>>,
        _needs: &[Capability],
    ) -> DisplayResult<Option<String>> {
        Ok(None)
    }
    /// `Backend::grant_consent`.
    fn grant_consent(_kept: &Self::Kept) -> DisplayResult<()> {
        Ok(())
    }
}

fn failed<S: Service>(what: impl std::fmt::Display) -> DisplayError {
    DisplayError(format!("{}: {what}", S::BACKEND))
}

/// One connection to the session bus, the AT-SPI window reader and (once a call needs the
/// screen or input) the remote-desktop session.
pub struct SessionConn<S: Service> {
    bus: zbus::Connection,
    service: S,
    windows: AtspiWindows,
    session: SessionSlot<S::Session>,
}

impl<S: Service> SessionConn<S> {
    fn connect(kept: Arc<S::Kept>) -> Result<SessionConn<S>, Availability> {
        let (bus, service) = S::connect(kept)?;
        Ok(SessionConn {
            bus,
            service,
            windows: AtspiWindows::new(),
            session: SessionSlot::new(),
        })
    }

    pub fn bus(&self) -> &zbus::Connection {
        &self.bus
    }

    /// The session, started on first use (and again after the other side closed it).
    pub fn session(&self) -> DisplayResult<Arc<S::Session>> {
        self.session.open_or_start(|| {
            let session = Arc::new(self.service.start_session(&self.bus)?);
            session
                .cast()
                .frames
                .wait_first(FIRST_FRAME_BOUND)
                .map_err(failed::<S>)?;
            Ok(session)
        })
    }

    /// The running session, if one is (it is not started here).
    pub fn running(&self) -> Option<Arc<S::Session>> {
        self.session.running()
    }

    /// Ends the session: the next call that needs it starts it again.
    pub fn end_session(&self) {
        self.session.end();
    }

    /// Whether the service still answers on this connection and the session (if any) is open.
    fn healthy(&self) -> bool {
        !self.session.closed() && self.service.answers(&self.bus)
    }

    /// Runs input calls on the session, in order, as one task on the backends' runtime.
    fn input<F, Fut>(&self, what: &str, work: F) -> DisplayResult<()>
    where
        F: FnOnce(Arc<S::Session>) -> Fut,
        Fut: Future<Output = DisplayResult<()>> + Send + 'static,
    {
        let session = self.session()?;
        block_on(S::BACKEND, S::INPUT_BOUND, what, work(session))
    }
}

impl<S: Service> desktop::Desktop for SessionConn<S> {
    type Frame = RgbFrame;

    fn screen(&self) -> DisplayResult<Rect> {
        S::screen(self)
    }
    fn grab(&self, area: Rect) -> DisplayResult<RgbFrame> {
        let session = self.session()?;
        let cast = session.cast();
        let frame = cast.frames.latest().map_err(failed::<S>)?;
        frame.crop(cast.monitor, area).map_err(failed::<S>)
    }
    fn same_frame(a: &RgbFrame, b: &RgbFrame) -> bool {
        a == b
    }
    fn to_rgb(&self, frame: &RgbFrame) -> Rgb {
        frame.to_rgb()
    }
    fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        S::monitors(self)
    }
    fn window_ids(&self) -> DisplayResult<Vec<u32>> {
        Ok(self.windows()?.iter().map(|w| w.id).collect())
    }
    /// The windows AT-SPI lists (apps that expose no accessibility tree are not seen).
    fn windows(&self) -> DisplayResult<Vec<WindowInfo>> {
        self.windows.windows(S::BACKEND)
    }
    fn keyboard_target(&self) -> DisplayResult<Option<u32>> {
        self.windows.keyboard_target(S::BACKEND)
    }
    fn focus_must_be_known(&self) -> bool {
        true
    }
    fn how_to_focus(&self) -> &'static str {
        S::HOW_TO_FOCUS
    }
    fn reads_cursor(&self) -> bool {
        false
    }
    fn knows_owner(&self, window: &WindowInfo) -> bool {
        window.pid.is_some()
    }
    fn places_known(&self) -> bool {
        false
    }
    fn cursor(&self) -> DisplayResult<(i32, i32)> {
        Err(failed::<S>(S::NO_CURSOR))
    }
    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        self.input("a pointer move", move |s| async move {
            s.motion(x, y, true).await
        })
    }
    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        self.input("a click", move |s| async move {
            super::click(&*s, at, button, count).await
        })
    }
    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        self.input("a drag", move |s| async move {
            super::drag(&*s, from, to, button).await
        })
    }
    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        self.input("a scroll", move |s| async move {
            super::scroll(&*s, at, dx, dy).await
        })
    }
    fn untypable(&self, text: &str) -> Option<String> {
        S::text_events(text).err().map(|err| err.0)
    }
    fn type_text(&self, text: &str) -> DisplayResult<()> {
        let events = S::text_events(text)?;
        self.input(
            "typing",
            move |s| async move { super::keys(&*s, &events).await },
        )
    }
    fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        let events = super::combo_events(combo);
        self.input("a key combination", move |s| async move {
            super::keys(&*s, &events).await
        })
    }
    fn focus(&self, _window: u32) -> DisplayResult<bool> {
        Err(failed::<S>(S::NO_FOCUS))
    }
}

/// The process-wide connection to the service (see [`KeptConn`]) and what the backend keeps
/// for its sessions.
pub struct SessionBackend<S: Service> {
    conn: KeptConn<SessionConn<S>>,
    kept: Arc<S::Kept>,
}

impl<S: Service> SessionBackend<S> {
    pub fn new() -> SessionBackend<S> {
        SessionBackend {
            conn: KeptConn::new(),
            kept: Arc::new(S::kept(crate::kit::secret_store::system_store())),
        }
    }
}

impl<S: Service> desktop::Backend for SessionBackend<S> {
    type Conn = SessionConn<S>;

    fn conn(&self) -> Result<Arc<SessionConn<S>>, Availability> {
        self.conn
            .get(|| SessionConn::connect(self.kept.clone()), |_| {})
    }

    /// Drops a connection after a failed call only if it is broken: the session (and with it
    /// the person's grant and the devices clients have bound) is kept across calls that
    /// failed for their own reasons.
    fn forget(&self, broken: &Arc<SessionConn<S>>) {
        if !broken.healthy() {
            self.conn.forget(broken)
        }
    }

    fn has(&self, capability: Capability) -> bool {
        // No window can be raised, and the pointer's position cannot be read.
        !matches!(
            capability,
            Capability::RaiseWindow | Capability::ReadPointer
        )
    }

    fn consent_needed(&self, needs: &[Capability]) -> DisplayResult<Option<String>> {
        let running = self.conn.current().filter(|c| c.running().is_some());
        S::consent_needed(&self.kept, running.as_deref(), needs)
    }

    fn grant_consent(&self) -> DisplayResult<()> {
        S::grant_consent(&self.kept)
    }
}
