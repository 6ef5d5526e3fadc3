//! The gui surface on GNOME's compositor (Mutter) through its own D-Bus API: one
//! `org.gnome.Mutter.RemoteDesktop` session, kept for the backend's life, with a
//! `org.gnome.Mutter.ScreenCast` stream of the primary monitor joined to it. Screenshots are
//! the latest frame of that stream, read over PipeWire (`remote_desktop::frames`); the pointer moves
//! through `NotifyPointerMotionAbsolute` on the stream and clicks through
//! `NotifyPointerButton`; keys go through `NotifyKeyboardKeysym`. Mutter lists no windows to
//! clients (`org.gnome.Shell.Introspect` is gnome-shell's), so windows, their apps, pids and
//! which one is active come from AT-SPI through the ax surface's code; their places are unknown.
//!
//! Why Mutter's API and not the xdg-desktop-portal (`portal`), which also runs here: the
//! portal's RemoteDesktop on Debian 12 (version 1) cannot keep a grant, so its dialog would ask
//! at every daemon start; ARCHITECTURE.md argues it in full.
//!
//! Every D-Bus call runs on the small runtime `remote_desktop` keeps, so the blocking `Desktop`
//! methods can be called from any thread (the surface calls some from async tasks); the
//! gestures built from Mutter's input events and the AT-SPI windows live there too, and so do
//! the connection and backend themselves (`remote_desktop::conn`), which this module's
//! `Mutter` service completes.

mod consent;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

use super::remote_desktop::conn::{Service, SessionBackend, SessionConn};
use super::remote_desktop::frames::FrameStream;
use super::remote_desktop::session::{Cast, EndCall, OpenSession, monitor_of};
use super::remote_desktop::{self, InputSink};
use crate::Availability;
use crate::gui::desktop::{Capability, DisplayError, DisplayResult, MonitorInfo, Rect};
use crate::kit::secret_store::SecretStore;
use consent::Consent;

/// Mutter's remote-desktop service: its presence on the session bus picks this backend.
pub const REMOTE_DESKTOP: &str = "org.gnome.Mutter.RemoteDesktop";
const REMOTE_DESKTOP_PATH: &str = "/org/gnome/Mutter/RemoteDesktop";
const REMOTE_DESKTOP_SESSION: &str = "org.gnome.Mutter.RemoteDesktop.Session";
const SCREEN_CAST: &str = "org.gnome.Mutter.ScreenCast";
const SCREEN_CAST_PATH: &str = "/org/gnome/Mutter/ScreenCast";
const SCREEN_CAST_SESSION: &str = "org.gnome.Mutter.ScreenCast.Session";
const SCREEN_CAST_STREAM: &str = "org.gnome.Mutter.ScreenCast.Stream";
const DISPLAY_CONFIG: &str = "org.gnome.Mutter.DisplayConfig";
const DISPLAY_CONFIG_PATH: &str = "/org/gnome/Mutter/DisplayConfig";
/// Whether a command that needs `needs` needs the remote-desktop session (the screen or
/// input), and with it the person's consent; windows (AT-SPI) and monitors (DisplayConfig) do
/// not.
fn needs_session(needs: &[Capability]) -> bool {
    needs.iter().any(|need| {
        matches!(
            need,
            Capability::Capture | Capability::Pointer | Capability::Keyboard
        )
    })
}

/// How long one D-Bus call (or the wait for the stream's node) may take before the call fails.
const REPLY_BOUND: Duration = Duration::from_secs(3);
fn failed(what: impl std::fmt::Display) -> DisplayError {
    DisplayError(format!("gnome: {what}"))
}

/// Runs `work` on the gui backends' D-Bus runtime and waits for it, at most `bound`.
fn block_on<T: Send + 'static>(
    bound: Duration,
    what: &str,
    work: impl Future<Output = Result<T, DisplayError>> + Send + 'static,
) -> DisplayResult<T> {
    remote_desktop::block_on("gnome", bound, what, work)
}

fn dbus_failed(what: &str) -> impl Fn(zbus::Error) -> DisplayError + '_ {
    move |err| failed(format!("{what}: {err}"))
}

/// Whether `org.gnome.Mutter.RemoteDesktop` has an owner on the session bus now.
pub fn offered() -> Result<bool, String> {
    block_on(REPLY_BOUND, "asking the session bus", async {
        let bus = zbus::Connection::session()
            .await
            .map_err(dbus_failed("the session bus"))?;
        name_has_owner(&bus, REMOTE_DESKTOP).await
    })
    .map_err(|err| err.0)
}

async fn name_has_owner(bus: &zbus::Connection, name: &str) -> DisplayResult<bool> {
    let proxy = zbus::fdo::DBusProxy::new(bus)
        .await
        .map_err(dbus_failed("the session bus"))?;
    let name = zbus::names::BusName::try_from(name.to_string()).map_err(failed)?;
    proxy
        .name_has_owner(name)
        .await
        .map_err(|err| failed(format!("NameHasOwner: {err}")))
}

async fn proxy(
    bus: &zbus::Connection,
    destination: &'static str,
    path: String,
    interface: &'static str,
) -> DisplayResult<zbus::Proxy<'static>> {
    zbus::Proxy::new(bus, destination, path, interface)
        .await
        .map_err(dbus_failed(interface))
}

/// The remote-desktop session and its screen-cast stream: made on the first call that needs
/// the screen or input, kept for the connection's life (a virtual keyboard and pointer that
/// last), stopped when dropped.
pub struct Session {
    remote_desktop: zbus::Proxy<'static>,
    /// The stream's object path: pointer positions are given relative to it.
    stream_path: OwnedObjectPath,
    /// The primary monitor's cast, closed when Mutter closes the session (it restarted, or
    /// stopped the session itself).
    cast: Cast,
}

impl Session {
    /// Starts a remote-desktop session with a screen cast of the primary monitor joined to it,
    /// and makes its virtual keyboard and pointer.
    async fn start(bus: zbus::Connection) -> DisplayResult<Session> {
        let remote_desktop = create_remote_desktop(&bus).await?;
        let screen_cast = join_screen_cast(&bus, &remote_desktop).await?;
        let (stream_path, stream) = record_primary_monitor(&bus, &screen_cast).await?;
        // Subscribed before Start, which is what makes Mutter announce the node.
        let mut added = stream
            .receive_signal("PipeWireStreamAdded")
            .await
            .map_err(dbus_failed("ScreenCast.Stream.PipeWireStreamAdded"))?;
        let closed_signal = remote_desktop
            .receive_signal("Closed")
            .await
            .map_err(dbus_failed("RemoteDesktop.Session.Closed"))?;
        remote_desktop
            .call::<_, _, ()>("Start", &())
            .await
            .map_err(dbus_failed("RemoteDesktop.Session.Start"))?;
        let node: u32 = tokio::time::timeout(REPLY_BOUND, added.next())
            .await
            .map_err(|_| failed("Mutter announced no PipeWire node for the screen cast"))?
            .ok_or_else(|| failed("the screen-cast stream ended before it started"))?
            .body()
            .deserialize()
            .map_err(|err| failed(format!("PipeWireStreamAdded: {err}")))?;
        let parameters: HashMap<String, OwnedValue> = stream
            .get_property("Parameters")
            .await
            .map_err(dbus_failed("ScreenCast.Stream.Parameters"))?;
        let monitor = monitor_of(&parameters, "the screen-cast stream").map_err(failed)?;
        let frames = FrameStream::connect(node, None).map_err(failed)?;
        let stop = EndCall {
            on: remote_desktop.clone(),
            method: "Stop",
        };
        let session = Session {
            remote_desktop,
            stream_path,
            cast: Cast::new(frames, monitor, closed_signal, stop),
        };
        remote_desktop::prime(&session).await?;
        Ok(session)
    }
}

/// RemoteDesktop.CreateSession: the new session's object.
async fn create_remote_desktop(bus: &zbus::Connection) -> DisplayResult<zbus::Proxy<'static>> {
    let root = proxy(
        bus,
        REMOTE_DESKTOP,
        REMOTE_DESKTOP_PATH.into(),
        REMOTE_DESKTOP,
    )
    .await?;
    let session_path: OwnedObjectPath = root
        .call("CreateSession", &())
        .await
        .map_err(dbus_failed("RemoteDesktop.CreateSession"))?;
    proxy(
        bus,
        REMOTE_DESKTOP,
        session_path.to_string(),
        REMOTE_DESKTOP_SESSION,
    )
    .await
}

/// ScreenCast.CreateSession joined to the remote-desktop session (by its SessionId), so that
/// pointer positions can be given on its stream.
async fn join_screen_cast(
    bus: &zbus::Connection,
    remote_desktop: &zbus::Proxy<'static>,
) -> DisplayResult<zbus::Proxy<'static>> {
    let session_id: String = remote_desktop
        .get_property("SessionId")
        .await
        .map_err(dbus_failed("RemoteDesktop.Session.SessionId"))?;
    let root = proxy(bus, SCREEN_CAST, SCREEN_CAST_PATH.into(), SCREEN_CAST).await?;
    let options: HashMap<&str, Value<'_>> = HashMap::from([(
        "remote-desktop-session-id",
        Value::from(session_id.as_str()),
    )]);
    let cast_path: OwnedObjectPath = root
        .call("CreateSession", &(options,))
        .await
        .map_err(dbus_failed("ScreenCast.CreateSession"))?;
    proxy(bus, SCREEN_CAST, cast_path.to_string(), SCREEN_CAST_SESSION).await
}

/// ScreenCast.Session.RecordMonitor of the primary monitor: the stream's path and object.
async fn record_primary_monitor(
    bus: &zbus::Connection,
    screen_cast: &zbus::Proxy<'static>,
) -> DisplayResult<(OwnedObjectPath, zbus::Proxy<'static>)> {
    // "" is the primary monitor; the cursor is left out of frames, as X11 GetImage does.
    let record: HashMap<&str, Value<'_>> = HashMap::new();
    let stream_path: OwnedObjectPath = screen_cast
        .call("RecordMonitor", &("", record))
        .await
        .map_err(dbus_failed("ScreenCast.Session.RecordMonitor"))?;
    let stream = proxy(
        bus,
        SCREEN_CAST,
        stream_path.to_string(),
        SCREEN_CAST_STREAM,
    )
    .await?;
    Ok((stream_path, stream))
}

impl InputSink for Session {
    async fn motion(&self, x: i32, y: i32, wait: bool) -> DisplayResult<()> {
        // Stream coordinates: the monitor's own, in the stream's pixels.
        let monitor = self.cast.monitor;
        let (sx, sy) = self
            .cast
            .frames
            .size()
            .unwrap_or((monitor.width, monitor.height));
        let fx = f64::from(x - monitor.x) * f64::from(sx) / f64::from(monitor.width);
        let fy = f64::from(y - monitor.y) * f64::from(sy) / f64::from(monitor.height);
        let body = (self.stream_path.as_str(), fx, fy);
        self.notify("NotifyPointerMotionAbsolute", &body, wait)
            .await
    }

    async fn nudge(&self) -> DisplayResult<()> {
        self.remote_desktop
            .call::<_, _, ()>("NotifyPointerMotionRelative", &(0.0f64, 0.0f64))
            .await
            .map_err(dbus_failed("NotifyPointerMotionRelative"))
    }

    async fn button(&self, code: i32, pressed: bool, wait: bool) -> DisplayResult<()> {
        self.notify("NotifyPointerButton", &(code, pressed), wait)
            .await
    }

    async fn axis(&self, axis: u32, steps: i32) -> DisplayResult<()> {
        self.remote_desktop
            .call::<_, _, ()>("NotifyPointerAxisDiscrete", &(axis, steps))
            .await
            .map_err(dbus_failed("NotifyPointerAxisDiscrete"))
    }

    async fn keysym(&self, keysym: u32, pressed: bool, wait: bool) -> DisplayResult<()> {
        self.notify("NotifyKeyboardKeysym", &(keysym, pressed), wait)
            .await
    }
}

impl Session {
    /// One call on the remote-desktop session; with `wait`, until Mutter has handled it (it
    /// handles a connection's calls in order, so a later awaited call covers earlier ones).
    async fn notify<B>(&self, method: &'static str, body: &B, wait: bool) -> DisplayResult<()>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        let sent = if wait {
            self.remote_desktop.call::<_, _, ()>(method, body).await
        } else {
            self.remote_desktop.call_noreply(method, body).await
        };
        sent.map_err(dbus_failed(method))
    }
}

impl OpenSession for Session {
    fn cast(&self) -> &Cast {
        &self.cast
    }
}

/// The GNOME backend: the process-wide connection to Mutter, with the person's consent.
pub type Backend = SessionBackend<Mutter>;

/// What the GNOME backend adds to a connection that works through a remote-desktop session:
/// Mutter's own API, behind the person's consent.
pub struct Mutter {
    consent: Arc<Consent>,
}

impl Service for Mutter {
    type Session = Session;
    type Kept = Consent;
    const BACKEND: &'static str = "gnome";
    const INPUT_BOUND: Duration = REPLY_BOUND.saturating_mul(4);
    const NO_CURSOR: &'static str =
        "Mutter tells clients no pointer position: give the point (x, y) explicitly";
    const NO_FOCUS: &'static str =
        "Mutter offers clients no way to raise or focus a window (that is gnome-shell's)";
    const HOW_TO_FOCUS: &'static str = "GNOME lets clients raise no window (there is no `gui \
         focus` here): click into the window first (`gui click` at a point in it, read off a \
         screenshot), or ask the person to bring it to the front";

    fn kept(store: Arc<dyn SecretStore>) -> Consent {
        Consent::new(store)
    }

    fn connect(consent: Arc<Consent>) -> Result<(zbus::Connection, Mutter), Availability> {
        let unavailable = |reason: String| Availability::Unavailable {
            reason,
            fix: "run the daemon inside the GNOME session (its WAYLAND_DISPLAY and \
                  DBUS_SESSION_BUS_ADDRESS), with Mutter running"
                .into(),
        };
        let bus = block_on(REPLY_BOUND, "connecting to the session bus", async {
            let bus = zbus::Connection::session()
                .await
                .map_err(dbus_failed("the session bus"))?;
            if !name_has_owner(&bus, REMOTE_DESKTOP).await? {
                return Err(failed(format!(
                    "{REMOTE_DESKTOP} is not on the session bus (Mutter is not running, or \
                     this is not its session)"
                )));
            }
            Ok(bus)
        })
        .map_err(|err| unavailable(err.0))?;
        Ok((bus, Mutter { consent }))
    }

    /// Starts the remote-desktop session, never without the person's consent, whichever call
    /// (or evidence shot) gets here first.
    fn start_session(&self, bus: &zbus::Connection) -> DisplayResult<Session> {
        if !self
            .consent
            .granted(consent::RECHECK_AFTER)
            .map_err(failed)?
        {
            return Err(failed(consent::question()));
        }
        block_on(
            REPLY_BOUND * 3,
            "starting the remote-desktop session",
            Session::start(bus.clone()),
        )
    }

    /// Whether Mutter still answers on this connection.
    fn answers(&self, bus: &zbus::Connection) -> bool {
        let bus = bus.clone();
        block_on(REPLY_BOUND, "asking the session bus", async move {
            name_has_owner(&bus, REMOTE_DESKTOP).await
        })
        .unwrap_or(false)
    }

    fn text_events(text: &str) -> DisplayResult<Vec<(u32, bool)>> {
        remote_desktop::text_events(text, "GNOME", "Mutter's NotifyKeyboardKeysym")
    }

    /// The primary monitor: the one recorded and driven.
    fn screen(conn: &SessionConn<Mutter>) -> DisplayResult<Rect> {
        if let Some(session) = conn.running() {
            return Ok(session.cast.monitor);
        }
        Mutter::monitors(conn)?
            .into_iter()
            .find(|m| m.primary)
            .map(|m| m.rect)
            .ok_or_else(|| failed("Mutter's DisplayConfig names no primary monitor"))
    }

    /// The monitors as Mutter's DisplayConfig tells them, without a remote-desktop session.
    fn monitors(conn: &SessionConn<Mutter>) -> DisplayResult<Vec<MonitorInfo>> {
        let bus = conn.bus().clone();
        block_on(REPLY_BOUND, "reading Mutter's DisplayConfig", async move {
            let config = proxy(
                &bus,
                DISPLAY_CONFIG,
                DISPLAY_CONFIG_PATH.into(),
                DISPLAY_CONFIG,
            )
            .await?;
            let state: CurrentState = config
                .call("GetCurrentState", &())
                .await
                .map_err(dbus_failed("DisplayConfig.GetCurrentState"))?;
            Ok(logical_monitors(&state))
        })
    }

    fn consent_needed(
        consent: &Consent,
        running: Option<&SessionConn<Mutter>>,
        needs: &[Capability],
    ) -> DisplayResult<Option<String>> {
        if !needs_session(needs) {
            return Ok(None);
        }
        let fresh = if running.is_some() {
            consent::RECHECK_AFTER
        } else {
            Duration::ZERO
        };
        if consent.granted(fresh).map_err(failed)? {
            return Ok(None);
        }
        // Revoked while the session ran: it ends now, and this call asks again.
        if let Some(conn) = running {
            conn.end_session();
        }
        Ok(Some(consent::question()))
    }

    fn grant_consent(consent: &Consent) -> DisplayResult<()> {
        consent.grant().map_err(failed)
    }
}

/// `org.gnome.Mutter.DisplayConfig.GetCurrentState`: serial, physical monitors (connector
/// spec, modes, properties), logical monitors (x, y, scale, transform, primary, the physical
/// monitors in it, properties), properties.
type MonitorSpec = (String, String, String, String);
type Mode = (
    String,
    i32,
    i32,
    f64,
    f64,
    Vec<f64>,
    HashMap<String, OwnedValue>,
);
type CurrentState = (
    u32,
    Vec<(MonitorSpec, Vec<Mode>, HashMap<String, OwnedValue>)>,
    Vec<(
        i32,
        i32,
        f64,
        u32,
        bool,
        Vec<MonitorSpec>,
        HashMap<String, OwnedValue>,
    )>,
    HashMap<String, OwnedValue>,
);

/// The logical monitors in layout coordinates: each one's size is its first monitor's current
/// mode, rotated by its transform and, in the logical layout mode, divided by its scale.
fn logical_monitors(state: &CurrentState) -> Vec<MonitorInfo> {
    let (_, physical, logical, properties) = state;
    // 1 = logical (sizes in logical pixels), 2 = physical; Mutter's default is logical.
    let logical_layout = properties
        .get("layout-mode")
        .and_then(|v| u32::try_from(v).ok())
        .is_none_or(|mode| mode == 1);
    logical
        .iter()
        .enumerate()
        .filter_map(|(index, (x, y, scale, transform, primary, specs, _))| {
            let spec = specs.first()?;
            let (_, modes, _) = physical.iter().find(|(s, _, _)| s == spec)?;
            let current = modes.iter().find(|m| {
                m.6.get("is-current")
                    .and_then(|v| bool::try_from(v).ok())
                    .unwrap_or(false)
            })?;
            let (mut width, mut height) = (f64::from(current.1), f64::from(current.2));
            if transform % 2 == 1 {
                std::mem::swap(&mut width, &mut height);
            }
            if logical_layout && *scale > 0.0 {
                width /= scale;
                height /= scale;
            }
            Some(MonitorInfo {
                index,
                name: spec.0.clone(),
                rect: Rect {
                    x: *x,
                    y: *y,
                    width: width.round() as u32,
                    height: height.round() as u32,
                },
                primary: *primary,
            })
        })
        .collect()
}
