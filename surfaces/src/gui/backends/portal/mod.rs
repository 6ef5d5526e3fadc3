//! The gui surface through xdg-desktop-portal (`org.freedesktop.portal.RemoteDesktop` with
//! `org.freedesktop.portal.ScreenCast`): the route for Wayland compositors that neither offer
//! the wlroots protocols nor Mutter's own API to this daemon, KDE's KWin above all (served by
//! xdg-desktop-portal-kde). One remote-desktop session, kept for the backend's life:
//! CreateSession, SelectDevices (keyboard and pointer; persisted until revoked, with the stored
//! restore token, where the portal's RemoteDesktop is version 2 or later), SelectSources (one
//! monitor), Start, which shows the portal's own dialog to the person unless the token restores
//! the grant; then OpenPipeWireRemote gives the PipeWire connection the frames come over
//! (`remote_desktop::frames`), and input goes through the Notify* calls. Every request answers through an
//! `org.freedesktop.portal.Request::Response` signal, subscribed to before the call.
//!
//! The portal lists no windows and tells no pointer position: windows, their apps, pids and
//! which one is active come from AT-SPI (`remote_desktop::AtspiWindows`); keys are refused
//! while AT-SPI names no single active window; no window can be raised. The connection and
//! backend are `remote_desktop::conn`'s, which this module's `PortalService` completes.
//!
//! # Layout
//! - `request`: the portal's requests and how their answers are read.
//! - `start`: how a session starts (CreateSession, SelectDevices, SelectSources, Start, the
//!   PipeWire remote) and what a start that failed says about the restore token.
//! - `token`: the restore token, kept in the keychain.

mod request;
mod start;
mod token;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

use super::remote_desktop::conn::{Service, SessionBackend, SessionConn};
use super::remote_desktop::frames::FrameStream;
use super::remote_desktop::session::{Cast, EndCall, OpenSession, monitor_of};
use super::remote_desktop::{self, InputSink};
use crate::Availability;
use crate::gui::desktop::{DisplayError, DisplayResult, MonitorInfo, Rect};
use crate::kit::secret_store::SecretStore;
use token::RestoreToken;

/// The portal's bus name and object.
pub const PORTAL: &str = "org.freedesktop.portal.Desktop";
const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
pub const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
const SCREEN_CAST: &str = "org.freedesktop.portal.ScreenCast";
const REQUEST: &str = "org.freedesktop.portal.Request";
const SESSION: &str = "org.freedesktop.portal.Session";
/// The RemoteDesktop version from which a grant can be persisted (`persist_mode` and
/// `restore_token` in SelectDevices): xdg-desktop-portal 1.17 and later.
pub const RESTORABLE_FROM: u32 = 2;
/// SelectDevices' device types and SelectSources' source type.
const KEYBOARD: u32 = 1;
const POINTER: u32 = 2;
const MONITOR: u32 = 1;
/// SelectDevices' `persist_mode`: until the person revokes it.
const PERSIST_UNTIL_REVOKED: u32 = 2;
/// How long one D-Bus call, or a request the portal answers without asking, may take.
const REPLY_BOUND: Duration = Duration::from_secs(5);
/// How long the person has to answer the portal's dialog.
pub const ANSWER_BOUND: Duration = Duration::from_secs(120);
/// How long the portal may take to be started by the bus (it is activated on first use).
const ACTIVATION_BOUND: Duration = Duration::from_secs(10);

fn failed(what: impl std::fmt::Display) -> DisplayError {
    DisplayError(format!("portal: {what}"))
}

fn dbus_failed(what: &str) -> impl Fn(zbus::Error) -> DisplayError + '_ {
    move |err| failed(format!("{what}: {err}"))
}

fn block_on<T: Send + 'static>(
    bound: Duration,
    what: &str,
    work: impl Future<Output = DisplayResult<T>> + Send + 'static,
) -> DisplayResult<T> {
    remote_desktop::block_on("portal", bound, what, work)
}

/// What the portal offers: its RemoteDesktop and ScreenCast interface versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub remote_desktop: u32,
    pub screen_cast: u32,
}

impl Offer {
    /// Whether the person's grant can be kept across sessions (a restore token).
    pub fn restorable(&self) -> bool {
        self.remote_desktop >= RESTORABLE_FROM
    }

    /// What `doctor` says is missing because of the portal's version.
    pub fn missing(&self) -> Option<String> {
        (!self.restorable()).then(|| {
            format!(
                "a kept grant: the portal's RemoteDesktop is version {} and persistence needs \
                 version {RESTORABLE_FROM} (xdg-desktop-portal 1.17 or later), so the person is \
                 asked at every daemon start",
                self.remote_desktop
            )
        })
    }
}

/// What the portal on the session bus offers, or why it offers nothing usable (in words for
/// `doctor`). Starts the portal if the bus can activate it.
pub fn offered() -> Result<Offer, String> {
    block_on(ACTIVATION_BOUND, "asking xdg-desktop-portal", async {
        let bus = zbus::Connection::session()
            .await
            .map_err(dbus_failed("the session bus"))?;
        read_offer(&bus).await
    })
    .map_err(|err| err.0)
}

async fn read_offer(bus: &zbus::Connection) -> DisplayResult<Offer> {
    let properties = zbus::fdo::PropertiesProxy::builder(bus)
        .destination(PORTAL)
        .and_then(|b| b.path(PORTAL_PATH))
        .map_err(dbus_failed(PORTAL))?
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(dbus_failed(PORTAL))?;
    let version = |interface: &'static str| {
        let properties = properties.clone();
        async move {
            let name = zbus::names::InterfaceName::from_static_str_unchecked(interface);
            let value = properties
                .get(name, "version")
                .await
                .map_err(|err| match err {
                    zbus::fdo::Error::ServiceUnknown(_) | zbus::fdo::Error::NameHasNoOwner(_) => {
                        failed(format!(
                            "{PORTAL} is not on the session bus and cannot be started (install \
                             xdg-desktop-portal and the backend for this desktop: \
                             xdg-desktop-portal-kde on KDE Plasma)"
                        ))
                    }
                    other => failed(format!(
                        "the portal offers no {interface} (its backend for this desktop does not \
                         implement it): {other}"
                    )),
                })?;
            u32::try_from(value).map_err(|err| failed(format!("{interface}.version: {err}")))
        }
    };
    Ok(Offer {
        remote_desktop: version(REMOTE_DESKTOP).await?,
        screen_cast: version(SCREEN_CAST).await?,
    })
}

/// The remote-desktop session and its stream: made on the first call that needs the screen or
/// input, kept for the connection's life (a virtual keyboard and pointer that last), closed
/// when dropped.
pub struct Session {
    remote_desktop: zbus::Proxy<'static>,
    handle: OwnedObjectPath,
    /// The PipeWire node of the shared monitor: pointer positions are given relative to it.
    node: u32,
    /// The device types the person allowed (KEYBOARD | POINTER bits).
    devices: u32,
    /// The shared monitor's cast, closed when the portal closes the session (the person
    /// revoked it, the portal restarted).
    cast: Cast,
}

impl Session {
    /// Refuses input of a kind the person did not allow.
    fn allowed(&self, device: u32) -> DisplayResult<()> {
        if self.devices & device != 0 {
            return Ok(());
        }
        let kind = if device == KEYBOARD {
            "keyboard"
        } else {
            "pointer"
        };
        Err(failed(format!(
            "the person shared the screen but did not allow remote {kind} input in the \
             desktop's dialog; nothing was sent. To allow it, end this grant (restart the \
             daemon, or delete keychain://{}/{}) and tick remote interaction when asked again",
            super::remote_desktop::kept::SERVICE,
            token::ACCOUNT
        )))
    }

    fn no_options() -> HashMap<&'static str, Value<'static>> {
        HashMap::new()
    }
}

impl InputSink for Session {
    // Every event waits for its reply, whatever the caller allows: see `notify`.
    async fn motion(&self, x: i32, y: i32, _wait: bool) -> DisplayResult<()> {
        // Stream coordinates: the monitor's own, in logical units.
        let monitor = self.cast.monitor;
        let (fx, fy) = (f64::from(x - monitor.x), f64::from(y - monitor.y));
        let options = Session::no_options();
        let body = (self.handle.as_ref(), options, self.node, fx, fy);
        self.notify(POINTER, "NotifyPointerMotionAbsolute", &body)
            .await
    }

    async fn nudge(&self) -> DisplayResult<()> {
        let body = (self.handle.as_ref(), Session::no_options(), 0.0f64, 0.0f64);
        self.notify(POINTER, "NotifyPointerMotion", &body).await
    }

    async fn button(&self, code: i32, pressed: bool, _wait: bool) -> DisplayResult<()> {
        let options = Session::no_options();
        let body = (self.handle.as_ref(), options, code, u32::from(pressed));
        self.notify(POINTER, "NotifyPointerButton", &body).await
    }

    async fn axis(&self, axis: u32, steps: i32) -> DisplayResult<()> {
        let body = (self.handle.as_ref(), Session::no_options(), axis, steps);
        self.notify(POINTER, "NotifyPointerAxisDiscrete", &body)
            .await
    }

    async fn keysym(&self, keysym: u32, pressed: bool, _wait: bool) -> DisplayResult<()> {
        // The portal spells keysyms signed.
        let options = Session::no_options();
        let body = (
            self.handle.as_ref(),
            options,
            keysym as i32,
            u32::from(pressed),
        );
        self.notify(KEYBOARD, "NotifyKeyboardKeysym", &body).await
    }
}

impl Session {
    /// One input call on the session, refused first if the person did not allow `device`.
    /// Every call waits for its reply: the portal hands calls on to its backend without
    /// keeping their order, and events not awaited one by one arrive reordered (measured with
    /// xdg-desktop-portal 1.16 on GNOME: a release overtook its press and left the key
    /// repeating).
    async fn notify<B>(&self, device: u32, method: &'static str, body: &B) -> DisplayResult<()>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        self.allowed(device)?;
        self.remote_desktop
            .call::<_, _, ()>(method, body)
            .await
            .map_err(dbus_failed(method))
    }
}

impl OpenSession for Session {
    fn cast(&self) -> &Cast {
        &self.cast
    }
}

/// The portal backend: the process-wide connection to the portal, with the restore token.
pub type Backend = SessionBackend<PortalService>;

/// What the portal backend adds to a connection that works through a remote-desktop session:
/// the portal's versions, and the restore token its sessions start with.
pub struct PortalService {
    offer: Offer,
    tokens: Arc<RestoreToken>,
}

impl Service for PortalService {
    type Session = Session;
    type Kept = RestoreToken;
    const BACKEND: &'static str = "portal";
    const INPUT_BOUND: Duration = REPLY_BOUND.saturating_mul(4);
    const NO_CURSOR: &'static str =
        "the portal tells clients no pointer position: give the point (x, y) explicitly";
    const NO_FOCUS: &'static str = "the portal offers clients no way to raise or focus a window";
    const HOW_TO_FOCUS: &'static str = "focus a window first (`gui focus`)";

    fn kept(store: Arc<dyn SecretStore>) -> RestoreToken {
        RestoreToken::new(store)
    }

    fn connect(
        tokens: Arc<RestoreToken>,
    ) -> Result<(zbus::Connection, PortalService), Availability> {
        let (bus, offer) = block_on(ACTIVATION_BOUND, "asking xdg-desktop-portal", async {
            let bus = zbus::Connection::session()
                .await
                .map_err(dbus_failed("the session bus"))?;
            let offer = read_offer(&bus).await?;
            Ok((bus, offer))
        })
        .map_err(|err| Availability::Unavailable {
            reason: err.0,
            fix: "run the daemon inside the desktop session (its WAYLAND_DISPLAY and \
                  DBUS_SESSION_BUS_ADDRESS) with xdg-desktop-portal and the desktop's portal \
                  backend installed (xdg-desktop-portal-kde on KDE Plasma)"
                .into(),
        })?;
        Ok((bus, PortalService { offer, tokens }))
    }

    /// Starts the remote-desktop session: the portal asks the person unless the stored token
    /// restores the grant.
    fn start_session(&self, bus: &zbus::Connection) -> DisplayResult<Session> {
        let token = if self.offer.restorable() {
            // Without the token the portal asks the person again: safe, only less convenient.
            self.tokens.load().unwrap_or_else(|why| {
                tracing::warn!(%why, "starting the portal session without a kept grant");
                None
            })
        } else {
            None
        };
        let (bus, offer) = (bus.clone(), self.offer);
        let started = block_on(
            ANSWER_BOUND + REPLY_BOUND * 6,
            "starting the portal's remote-desktop session",
            async move {
                Ok(Session::start(bus, offer, token)
                    .await
                    .map_err(|f| (f.error, f.token_spent, f.new_token)))
            },
        )?;
        let started = match started {
            Ok(started) => started,
            Err((error, token_spent, new_token)) => {
                settle_token(&self.tokens, self.offer, new_token, token_spent);
                return Err(error);
            }
        };
        settle_token(&self.tokens, self.offer, started.token, false);
        Ok(started.session)
    }

    /// Whether the portal still answers.
    fn answers(&self, bus: &zbus::Connection) -> bool {
        let bus = bus.clone();
        block_on(REPLY_BOUND, "asking xdg-desktop-portal", async move {
            read_offer(&bus).await
        })
        .is_ok()
    }

    /// The key events of `text`, or why it cannot be typed through the portal.
    fn text_events(text: &str) -> DisplayResult<Vec<(u32, bool)>> {
        remote_desktop::text_events(
            text,
            "this desktop (xdg-desktop-portal)",
            "the portal's NotifyKeyboardKeysym",
        )
    }

    /// The shared monitor (the portal shares one; its place comes with the stream).
    fn screen(conn: &SessionConn<PortalService>) -> DisplayResult<Rect> {
        Ok(conn.session()?.cast().monitor)
    }

    fn monitors(conn: &SessionConn<PortalService>) -> DisplayResult<Vec<MonitorInfo>> {
        Ok(vec![MonitorInfo {
            index: 0,
            name: "the monitor shared through the portal".into(),
            rect: PortalService::screen(conn)?,
            primary: true,
        }])
    }
}

/// Keeps what a start said about the grant: a new token replaces the stored one (the portal
/// gives one at every start and honours each once); a start that was given the stored token
/// and failed (refused, revoked, stale) drops it, so the next start asks afresh. A keychain
/// that cannot be written only means the person is asked again: logged, without the value.
fn settle_token(tokens: &RestoreToken, offer: Offer, new: Option<SecretString>, spent: bool) {
    if spent && let Err(why) = tokens.forget() {
        tracing::warn!(%why, "a spent restore token stays in the keychain");
    }
    if offer.restorable()
        && let Some(token) = new
        && let Err(why) = tokens.save(token)
    {
        tracing::warn!(%why, "the person will be asked again at the next start");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::request::{Answer, Portal, not_granted};
    use super::start::{first_stream, negotiate};
    use super::token::tests::Memory;
    use super::*;

    #[test]
    fn an_old_portal_says_the_grant_is_not_kept() {
        let old = Offer {
            remote_desktop: 1,
            screen_cast: 4,
        };
        assert!(!old.restorable());
        assert!(
            old.missing()
                .unwrap()
                .contains("asked at every daemon start")
        );
        let new = Offer {
            remote_desktop: 2,
            screen_cast: 5,
        };
        assert!(new.restorable() && new.missing().is_none());
    }

    #[test]
    fn a_refusal_says_how_to_grant_again() {
        let refused = not_granted("RemoteDesktop.Start", Answer::Refused).0;
        assert!(refused.contains("refused"), "{refused}");
        assert!(
            refused.contains("nothing was captured or sent"),
            "{refused}"
        );
        assert!(
            refused.contains("keychain://computer.gui/portal-restore-token"),
            "{refused}"
        );
        let ended = not_granted("RemoteDesktop.Start", Answer::Ended(2)).0;
        assert!(ended.contains("revoked or is no longer valid"), "{ended}");
    }

    #[test]
    fn the_stream_gives_the_node_and_the_monitor() {
        let properties: HashMap<String, OwnedValue> = HashMap::from([
            (
                "position".to_string(),
                OwnedValue::try_from(Value::from((10i32, 20i32))).unwrap(),
            ),
            (
                "size".to_string(),
                OwnedValue::try_from(Value::from((1920i32, 1080i32))).unwrap(),
            ),
        ]);
        let streams = vec![(37u32, properties)];
        let results = HashMap::from([(
            "streams".to_string(),
            OwnedValue::try_from(Value::from(streams)).unwrap(),
        )]);
        let (node, monitor) = first_stream(&results).unwrap();
        assert_eq!(node, 37);
        assert_eq!(
            monitor,
            Rect {
                x: 10,
                y: 20,
                width: 1920,
                height: 1080
            }
        );
        let none = first_stream(&HashMap::new()).unwrap_err().0;
        assert!(none.contains("no monitor was shared"), "{none}");
    }

    /// A private session bus (no service files: nothing is started on demand), killed on drop.
    struct PrivateBus {
        daemon: std::process::Child,
        address: String,
        _dir: tempfile::TempDir,
    }

    impl Drop for PrivateBus {
        fn drop(&mut self) {
            let _ = self.daemon.kill();
            let _ = self.daemon.wait();
        }
    }

    fn private_bus() -> PrivateBus {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
                 <busconfig><type>session</type><listen>unix:dir={}</listen>\
                 <policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>\
                 <allow eavesdrop=\"true\"/><allow own=\"*\"/>\
                 </policy></busconfig>\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let mut daemon = std::process::Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("dbus-daemon runs");
        let mut address = String::new();
        std::io::BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        PrivateBus {
            daemon,
            address: address.trim().to_string(),
            _dir: dir,
        }
    }

    /// What the stand-in was asked: each method with its options.
    type Seen = Arc<Mutex<Vec<(String, HashMap<String, OwnedValue>)>>>;

    /// A stand-in for xdg-desktop-portal, served with zbus on a private bus: it answers every
    /// request with a `Request::Response` signal on the request's path as the portal does,
    /// records the options it was given, and answers Start with `start_code` and, on success, a
    /// new restore token. It is a stand-in, not proof that the surface works: it exercises this
    /// module's request plumbing and its keeping of the restore token, which the real portal
    /// on the test machine (RemoteDesktop version 1, no tokens) cannot; the surface itself is
    /// tested against the real portal in tests/tests/portal.rs.
    /// A connection to the private bus, made within a bound (a bus that does not answer fails
    /// the test instead of hanging it).
    async fn connect(builder: zbus::connection::Builder<'_>) -> zbus::Connection {
        tokio::time::timeout(Duration::from_secs(10), builder.build())
            .await
            .expect("the private bus answers within 10 s")
            .unwrap()
    }

    async fn stand_in(
        address: &str,
        start_code: u32,
        next_token: &'static str,
    ) -> (zbus::Connection, Seen) {
        let conn = connect(
            zbus::connection::Builder::address(address)
                .unwrap()
                .name(PORTAL)
                .unwrap(),
        )
        .await;
        let seen: Seen = Arc::default();
        let (server, record) = (conn.clone(), seen.clone());
        tokio::spawn(async move {
            let mut calls = zbus::MessageStream::from(&server);
            while let Some(Ok(call)) = calls.next().await {
                let header = call.header();
                if header.message_type() != zbus::message::Type::MethodCall {
                    continue;
                }
                let member = header.member().map(|m| m.to_string()).unwrap_or_default();
                let body = call.body();
                let options: HashMap<String, OwnedValue> = match member.as_str() {
                    "CreateSession" => {
                        body.deserialize::<(HashMap<String, OwnedValue>,)>()
                            .unwrap()
                            .0
                    }
                    "SelectDevices" | "SelectSources" => {
                        body.deserialize::<(OwnedObjectPath, HashMap<String, OwnedValue>)>()
                            .unwrap()
                            .1
                    }
                    "Start" => {
                        body.deserialize::<(OwnedObjectPath, String, HashMap<String, OwnedValue>)>()
                            .unwrap()
                            .2
                    }
                    _ => continue,
                };
                let sender = header.sender().unwrap().to_string();
                let token = <&str>::try_from(&options["handle_token"])
                    .unwrap()
                    .to_string();
                let path = format!(
                    "{PORTAL_PATH}/request/{}/{token}",
                    sender.trim_start_matches(':').replace('.', "_")
                );
                server
                    .reply(
                        &header,
                        &zbus::zvariant::ObjectPath::try_from(path.as_str()).unwrap(),
                    )
                    .await
                    .unwrap();
                let mut results: HashMap<&str, Value<'_>> = HashMap::new();
                let mut code = 0u32;
                match member.as_str() {
                    "CreateSession" => {
                        results.insert(
                            "session_handle",
                            Value::from("/org/freedesktop/portal/desktop/session/1_1/s"),
                        );
                    }
                    "Start" => {
                        code = start_code;
                        let stream: HashMap<&str, Value<'_>> = HashMap::from([
                            ("position", Value::from((0i32, 0i32))),
                            ("size", Value::from((1280i32, 720i32))),
                        ]);
                        results.insert("devices", Value::from(KEYBOARD | POINTER));
                        results.insert("streams", Value::from(vec![(42u32, stream)]));
                        results.insert("restore_token", Value::from(next_token));
                    }
                    _ => {}
                }
                record.lock().unwrap().push((member, options));
                server
                    .emit_signal(
                        Some(sender.as_str()),
                        path.as_str(),
                        REQUEST,
                        "Response",
                        &(code, results),
                    )
                    .await
                    .unwrap();
            }
        });
        (conn, seen)
    }

    /// Runs `negotiate` against a stand-in answering Start with `code`, with the token the
    /// store holds, and keeps what it says about the token as `PortalService::start_session` does.
    async fn start_against_stand_in(
        store: Arc<Memory>,
        code: u32,
        next_token: &'static str,
    ) -> (
        Result<(u32, Rect), String>,
        Vec<(String, HashMap<String, OwnedValue>)>,
    ) {
        let bus = private_bus();
        let (_server, seen) = stand_in(&bus.address, code, next_token).await;
        let client =
            connect(zbus::connection::Builder::address(bus.address.as_str()).unwrap()).await;
        let offer = Offer {
            remote_desktop: 2,
            screen_cast: 5,
        };
        // As after a restart: a fresh holder over the same keychain.
        let tokens = RestoreToken::new(store);
        let token = tokens.load().unwrap();
        let portal = Portal::new(client).unwrap();
        let outcome = match negotiate(&portal, offer, token).await {
            Ok(negotiated) => {
                settle_token(&tokens, offer, negotiated.token, false);
                Ok((negotiated.node, negotiated.monitor))
            }
            Err(failure) => {
                settle_token(&tokens, offer, failure.new_token, failure.token_spent);
                Err(failure.error.0)
            }
        };
        let seen = seen.lock().unwrap().clone();
        (outcome, seen)
    }

    fn stored(store: &Memory) -> Option<String> {
        store.items.lock().unwrap().first().map(|(_, v)| v.clone())
    }

    fn select_devices(
        seen: &[(String, HashMap<String, OwnedValue>)],
    ) -> HashMap<String, OwnedValue> {
        seen.iter()
            .find(|(member, _)| member == "SelectDevices")
            .map(|(_, options)| {
                options
                    .iter()
                    .map(|(k, v)| (k.clone(), v.try_clone().unwrap()))
                    .collect()
            })
            .expect("SelectDevices was called")
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_token_is_kept_passed_back_after_a_restart_and_dropped_when_refused() {
        let store = Arc::new(Memory::default());

        // First start: nothing kept, so no token is offered; the grant is asked to persist, and
        // the token Start returns is kept.
        let (outcome, seen) = start_against_stand_in(store.clone(), 0, "token-1").await;
        assert_eq!(
            outcome.unwrap(),
            (
                42,
                Rect {
                    x: 0,
                    y: 0,
                    width: 1280,
                    height: 720
                }
            )
        );
        let members: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            members,
            ["CreateSession", "SelectDevices", "SelectSources", "Start"]
        );
        let select = select_devices(&seen);
        assert_eq!(u32::try_from(&select["persist_mode"]).unwrap(), 2);
        assert_eq!(u32::try_from(&select["types"]).unwrap(), KEYBOARD | POINTER);
        assert!(!select.contains_key("restore_token"));
        assert_eq!(stored(&store).as_deref(), Some("token-1"));

        // After a restart: the kept token is passed back, and the new one replaces it.
        let (outcome, seen) = start_against_stand_in(store.clone(), 0, "token-2").await;
        assert!(outcome.is_ok());
        let select = select_devices(&seen);
        assert_eq!(
            <&str>::try_from(&select["restore_token"]).unwrap(),
            "token-1"
        );
        assert_eq!(stored(&store).as_deref(), Some("token-2"));

        // The portal no longer honours it (revoked): a clear error, and the token is dropped so
        // the next start asks afresh.
        let (outcome, _) = start_against_stand_in(store.clone(), 2, "unused").await;
        let error = outcome.unwrap_err();
        assert!(error.contains("revoked or is no longer valid"), "{error}");
        assert!(!error.contains("token-2"), "{error}");
        assert_eq!(stored(&store), None);

        // Refused by the person: says so and how to grant it; nothing kept.
        let (outcome, seen) = start_against_stand_in(store.clone(), 1, "unused").await;
        let error = outcome.unwrap_err();
        assert!(
            error.contains("refused") && error.contains("to grant it"),
            "{error}"
        );
        assert!(!select_devices(&seen).contains_key("restore_token"));
        assert_eq!(stored(&store), None);
    }

    #[test]
    fn a_start_that_failed_after_its_grant_keeps_the_new_token_in_place_of_the_spent_one() {
        let store = Arc::new(Memory::default());
        let tokens = RestoreToken::new(store.clone());
        let offer = Offer {
            remote_desktop: 2,
            screen_cast: 5,
        };
        tokens.save(SecretString::from("spent")).unwrap();
        settle_token(&tokens, offer, Some(SecretString::from("fresh")), true);
        assert_eq!(stored(&store).as_deref(), Some("fresh"));
        settle_token(&tokens, offer, None, true);
        assert_eq!(stored(&store), None);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_old_portal_is_not_asked_to_persist_and_nothing_is_kept() {
        let store = Arc::new(Memory::default());
        let bus = private_bus();
        let (_server, seen) = stand_in(&bus.address, 0, "ignored").await;
        let client =
            connect(zbus::connection::Builder::address(bus.address.as_str()).unwrap()).await;
        let offer = Offer {
            remote_desktop: 1,
            screen_cast: 4,
        };
        let tokens = RestoreToken::new(store.clone());
        let negotiated = negotiate(&Portal::new(client).unwrap(), offer, None)
            .await
            .unwrap_or_else(|failure| panic!("{}", failure.error));
        settle_token(&tokens, offer, negotiated.token, false);
        let seen = seen.lock().unwrap().clone();
        let select = select_devices(&seen);
        assert!(!select.contains_key("persist_mode") && !select.contains_key("restore_token"));
        assert_eq!(stored(&store), None);
    }
}
