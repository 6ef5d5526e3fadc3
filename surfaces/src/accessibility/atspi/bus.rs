//! The accessibility bus: a lazily opened, self-healing zbus connection, and the few AT-SPI
//! D-Bus calls the surface makes, each under a deadline that names the app that did not answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use zbus::zvariant::{DynamicType, OwnedObjectPath, OwnedValue};

/// The longest one D-Bus call may take: an app that does not answer within it is reported as
/// unresponsive instead of holding the call (and the daemon) hostage.
pub const CALL_LIMIT: Duration = Duration::from_millis(1500);
/// How long a failed connection attempt is remembered before `probe` lets a call retry.
const RETRY_AFTER: Duration = Duration::from_secs(5);

pub const REGISTRY: &str = "org.a11y.atspi.Registry";
pub const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
pub const ACCESSIBLE: &str = "org.a11y.atspi.Accessible";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// Why an AT-SPI call failed, in terms a caller can act on.
#[derive(Debug, Clone)]
pub enum BusError {
    /// The accessibility bus could not be reached.
    Connect(String),
    /// The app owning `bus` did not answer in time.
    Timeout { bus: String, after: Duration },
    /// The object (or its whole app) is gone.
    Gone,
    /// Anything else the app answered with.
    Other(String),
}

impl BusError {
    fn from_zbus(err: zbus::Error) -> BusError {
        match &err {
            zbus::Error::MethodError(name, _, _) => {
                let name = name.as_str();
                // NoReply within our limits: the app left the bus (quit or crashed) while
                // the call was on its way.
                if name.ends_with("UnknownObject")
                    || name.ends_with("NoReply")
                    || name.ends_with("ServiceUnknown")
                    || name.ends_with("NameHasNoOwner")
                    || name.ends_with("UnknownMethod")
                    || name.ends_with("UnknownInterface")
                {
                    BusError::Gone
                } else {
                    BusError::Other(err.to_string())
                }
            }
            zbus::Error::FDO(fdo) => match **fdo {
                zbus::fdo::Error::UnknownObject(_)
                | zbus::fdo::Error::NoReply(_)
                | zbus::fdo::Error::ServiceUnknown(_)
                | zbus::fdo::Error::NameHasNoOwner(_)
                | zbus::fdo::Error::UnknownMethod(_)
                | zbus::fdo::Error::UnknownInterface(_) => BusError::Gone,
                _ => BusError::Other(err.to_string()),
            },
            zbus::Error::InputOutput(_) => BusError::Connect(err.to_string()),
            _ => BusError::Other(err.to_string()),
        }
    }
}

/// Whether an app's cache is worth asking for.
#[derive(Debug, Clone, Copy)]
pub enum Support {
    /// `GetItems` answered.
    Works,
    /// It failed (not implemented, odd answer, too slow) at this time; the walk is used.
    Missing(Instant),
}

/// The shared connection state: opened on first use, dropped when it breaks.
pub struct Bus {
    state: tokio::sync::Mutex<Option<zbus::Connection>>,
    last_failure: Mutex<Option<(Instant, String)>>,
    /// app bus name → (app name, pid), for error messages naming the app.
    apps: Mutex<HashMap<String, (String, Option<u32>)>>,
    /// app bus name → the path of its root, where it is not [`ROOT_PATH`] (GTK4 roots its
    /// tree under the app's own object path).
    roots: Mutex<HashMap<String, String>>,
    /// Apps that recently did not answer, and when: listings give them a short wait only, so one
    /// frozen app does not slow every call that lists apps.
    stuck: Mutex<HashMap<String, Instant>>,
    /// Apps (by bus name) whose own AT-SPI cache answered, or did not.
    caches: Mutex<HashMap<String, Support>>,
    /// Whether walks may be seeded from the apps' own caches (off: node by node, for comparison
    /// and for apps whose cache misleads).
    pub use_app_caches: bool,
    /// The accessibility bus of an agent's own desktop; None: the process environment's.
    pub address: Option<String>,
}

/// How long a listing waits for an app that recently did not answer.
pub const STUCK_LIMIT: Duration = Duration::from_millis(200);
/// How long an app counts as recently stuck.
const STUCK_MEMORY: Duration = Duration::from_secs(30);

impl Bus {
    pub fn new(use_app_caches: bool) -> Bus {
        Bus {
            use_app_caches,
            address: None,
            state: tokio::sync::Mutex::new(None),
            last_failure: Mutex::new(None),
            apps: Mutex::new(HashMap::new()),
            roots: Mutex::new(HashMap::new()),
            stuck: Mutex::new(HashMap::new()),
            caches: Mutex::new(HashMap::new()),
        }
    }

    /// The last connection failure, while it is recent enough to be trusted.
    pub fn recent_failure(&self) -> Option<String> {
        let guard = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|(at, _)| at.elapsed() < RETRY_AFTER)
            .map(|(_, why)| why.clone())
    }

    /// A live connection to the accessibility bus, opening one if needed.
    pub async fn connection(&self, deadline: Instant) -> Result<zbus::Connection, BusError> {
        let mut state = self.state.lock().await;
        if let Some(conn) = state.as_ref() {
            return Ok(conn.clone());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let opened = tokio::time::timeout(
            left.min(Duration::from_secs(5)),
            open(self.address.as_deref()),
        )
        .await;
        let result = match opened {
            Ok(result) => result,
            Err(_) => Err("connecting to the accessibility bus timed out".to_string()),
        };
        match result {
            Ok(conn) => {
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
                *state = Some(conn.clone());
                Ok(conn)
            }
            Err(why) => {
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((Instant::now(), why.clone()));
                Err(BusError::Connect(why))
            }
        }
    }

    /// Forgets a broken connection so the next call opens a new one.
    pub async fn reset(&self) {
        *self.state.lock().await = None;
    }

    pub fn remember_app(&self, bus: &str, name: &str, pid: Option<u32>) {
        self.apps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(bus.to_string(), (name.to_string(), pid));
    }

    /// Remembers where the app at `bus` roots its tree, as the registry listed it.
    pub fn remember_root(&self, bus: &str, path: &str) {
        let mut roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        if path == ROOT_PATH {
            roots.remove(bus);
            return;
        }
        // Bus names are never reused; departed apps are forgotten all at once.
        if roots.len() > 1024 {
            roots.clear();
        }
        roots.insert(bus.to_string(), path.to_string());
    }

    /// The path of the root of the app at `bus`: as the registry listed it, else [`ROOT_PATH`].
    pub fn root_of(&self, bus: &str) -> String {
        let roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        roots
            .get(bus)
            .cloned()
            .unwrap_or_else(|| ROOT_PATH.to_string())
    }

    /// Records whether the app at `bus` answered.
    pub fn mark_stuck(&self, bus: &str, stuck: bool) {
        let mut map = self.stuck.lock().unwrap_or_else(|e| e.into_inner());
        if stuck {
            map.insert(bus.to_string(), Instant::now());
        } else {
            map.remove(bus);
        }
    }

    /// The wait a listing gives the app at `bus`.
    pub fn listing_limit(&self, bus: &str) -> Duration {
        let map = self.stuck.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(bus) {
            Some(at) if at.elapsed() < STUCK_MEMORY => STUCK_LIMIT,
            _ => CALL_LIMIT,
        }
    }

    /// What is known of the app's own cache, if it was asked before.
    pub fn cache_support(&self, bus: &str) -> Option<Support> {
        let map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        map.get(bus).copied()
    }

    pub fn set_cache_support(&self, bus: &str, support: Support) {
        let mut map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        // Unique bus names are never reused, but apps come and go: forget the departed ones.
        if map.len() > 1024 {
            map.clear();
        }
        map.insert(bus.to_string(), support);
    }

    /// Remembers the pid of an app whose name could not be read.
    pub fn remember_pid(&self, bus: &str, pid: Option<u32>) {
        let mut apps = self.apps.lock().unwrap_or_else(|e| e.into_inner());
        let entry = apps
            .entry(bus.to_string())
            .or_insert_with(|| ("(unnamed)".to_string(), pid));
        if entry.1.is_none() {
            entry.1 = pid;
        }
    }

    /// The apps seen so far, as (bus name, app name, pid): what an action's facts resolve its
    /// target against without a bus round trip.
    pub fn known_apps(&self) -> Vec<(String, String, Option<u32>)> {
        let apps = self.apps.lock().unwrap_or_else(|e| e.into_inner());
        apps.iter()
            .map(|(bus, (name, pid))| (bus.clone(), name.clone(), *pid))
            .collect()
    }

    /// "app `gedit` (pid 12, :1.40)" or the bare bus name when the app is unknown.
    pub fn describe_app(&self, bus: &str) -> String {
        match self.apps.lock().unwrap_or_else(|e| e.into_inner()).get(bus) {
            Some((name, Some(pid))) => format!("app `{name}` (pid {pid}, {bus})"),
            Some((name, None)) => format!("app `{name}` ({bus})"),
            None => format!("the app at {bus}"),
        }
    }
}

/// The address of the accessibility bus a session bus's `org.a11y.Bus` gives.
pub(crate) async fn accessibility_bus_address(session: &zbus::Connection) -> zbus::Result<String> {
    let reply = session
        .call_method(
            Some("org.a11y.Bus"),
            "/org/a11y/bus",
            Some("org.a11y.Bus"),
            "GetAddress",
            &(),
        )
        .await?;
    reply.body().deserialize::<String>()
}

/// Whether a session bus's `org.a11y.Bus` has an owner now (asking for its address would
/// otherwise have the bus activate a launcher); `None` when the bus does not answer.
pub(crate) async fn accessibility_bus_running(session: &zbus::Connection) -> Option<bool> {
    session
        .call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "NameHasOwner",
            &("org.a11y.Bus",),
        )
        .await
        .ok()?
        .body()
        .deserialize()
        .ok()
}

/// Opens a connection to the accessibility bus: `named` (an agent's own desktop's), else
/// `AT_SPI_BUS_ADDRESS`, else the address the session bus's `org.a11y.Bus` gives.
async fn open(named: Option<&str>) -> Result<zbus::Connection, String> {
    let address = match (named, std::env::var("AT_SPI_BUS_ADDRESS")) {
        (Some(named), _) => named.to_string(),
        (None, Ok(address)) if !address.is_empty() => address,
        _ => {
            let session = zbus::Connection::session()
                .await
                .map_err(|err| format!("cannot reach the D-Bus session bus: {err}"))?;
            accessibility_bus_address(&session)
                .await
                .map_err(|err| format!("the session bus has no accessibility bus: {err}"))?
        }
    };
    let conn = zbus::connection::Builder::address(address.as_str())
        .map_err(|err| format!("bad accessibility bus address {address:?}: {err}"))?
        .method_timeout(CALL_LIMIT)
        .build()
        .await
        .map_err(|err| format!("cannot connect to the accessibility bus at {address}: {err}"))?;
    tracing::info!(%address, "connected to the AT-SPI accessibility bus");
    Ok(conn)
}

/// An object's states (`GetState`), as a set.
pub async fn states(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<crate::accessibility::roles::StateSet, BusError> {
    call::<_, Vec<u32>>(conn, deadline, dest, path, ACCESSIBLE, "GetState", &())
        .await
        .map(|words| super::roles::state_set(&words))
}

/// One method call under the per-call limit and the overall deadline, answered as the raw reply.
pub async fn call_message<B>(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<zbus::Message, BusError>
where
    B: serde::Serialize + DynamicType,
{
    let key = app_key(conn, dest);
    if let Some(held) = unanswered::hold_back(conn, dest, &key).await {
        return Err(held);
    }
    // A permit for this app's calls in flight; waiting for it counts against the deadline.
    let _permit = match tokio::time::timeout_at(deadline.into(), in_flight::permit(&key)).await {
        Ok(permit) => permit,
        Err(_) => {
            return Err(BusError::Timeout {
                bus: dest.to_string(),
                after: Duration::ZERO,
            });
        }
    };
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .min(CALL_LIMIT);
    let fut = conn.call_method(Some(dest), path, Some(iface), method, body);
    let timed_out = || {
        unanswered::note(&key);
        Err(BusError::Timeout {
            bus: dest.to_string(),
            after: limit,
        })
    };
    match tokio::time::timeout(limit, fut).await {
        Err(_) => timed_out(),
        Ok(Err(zbus::Error::InputOutput(err))) if err.kind() == std::io::ErrorKind::TimedOut => {
            timed_out()
        }
        Ok(Err(err)) => Err(BusError::from_zbus(err)),
        Ok(Ok(reply)) => Ok(reply),
    }
}

/// What the per-app bookkeeping below is keyed by: the app's bus name on this bus. Names repeat
/// across buses (`org.a11y.atspi.Registry` on each, unique names from `:1.0` on each), and the
/// process may be on several (agents' own desktops each have one).
fn app_key(conn: &zbus::Connection, dest: &str) -> String {
    format!("{}/{dest}", conn.server_guid())
}

/// How many calls one app is asked at once. A walk asks hundreds of nodes in one round; an app
/// answers them one by one anyway, and some toolkits break when many requests on objects they
/// make on demand arrive together (Thunar's list cells), so more in flight gains nothing.
mod in_flight {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};

    use tokio::sync::{OwnedSemaphorePermit, Semaphore};

    /// Calls in flight to one app at most.
    pub const PER_APP: usize = 16;
    /// Apps whose permits are kept (bus names are never reused; idle ones are forgotten).
    const KEPT: usize = 256;

    fn apps() -> &'static Mutex<HashMap<String, Arc<Semaphore>>> {
        static APPS: OnceLock<Mutex<HashMap<String, Arc<Semaphore>>>> = OnceLock::new();
        APPS.get_or_init(|| Mutex::new(HashMap::new()))
    }

    /// A permit to call the app `dest` ([`super::app_key`]), once fewer than [`PER_APP`] calls
    /// are in flight.
    pub async fn permit(dest: &str) -> OwnedSemaphorePermit {
        let semaphore = {
            let mut apps = apps().lock().unwrap_or_else(|e| e.into_inner());
            if apps.len() >= KEPT && !apps.contains_key(dest) {
                // Forget the apps with nothing in flight.
                apps.retain(|_, s| s.available_permits() < PER_APP);
            }
            apps.entry(dest.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(PER_APP)))
                .clone()
        };
        semaphore
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }
}

/// Apps that did not answer a call. Until one answers a ping again it is sent nothing else:
/// a frozen app (Calc building an accessible per cell) must not be handed more work by every
/// retry, nor a queue of requests that runs when it wakes.
mod unanswered {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::{Duration, Instant};

    use super::BusError;

    /// How long the ping that tells whether a held-back app answers again may take.
    const PING_LIMIT: Duration = Duration::from_millis(250);
    /// How often an app that does not answer is pinged: calls between pings fail at once.
    const PING_EVERY: Duration = Duration::from_secs(1);
    /// Apps remembered at most (bus names are never reused; departed apps are forgotten).
    const REMEMBERED: usize = 256;

    struct Unanswered {
        since: Instant,
        pinged: Option<Instant>,
    }

    fn apps() -> &'static Mutex<HashMap<String, Unanswered>> {
        static APPS: OnceLock<Mutex<HashMap<String, Unanswered>>> = OnceLock::new();
        APPS.get_or_init(|| Mutex::new(HashMap::new()))
    }

    /// Records that the app `dest` ([`super::app_key`]) did not answer in time.
    pub fn note(dest: &str) {
        let mut apps = apps().lock().unwrap_or_else(|e| e.into_inner());
        if apps.len() >= REMEMBERED && !apps.contains_key(dest) {
            apps.clear();
        }
        apps.entry(dest.to_string()).or_insert(Unanswered {
            since: Instant::now(),
            pinged: None,
        });
    }

    /// `Some` (the error to answer instead) when the app at `dest` has not answered since it
    /// last timed out: pinged at most once a second, and forgotten once it answers.
    pub async fn hold_back(conn: &zbus::Connection, dest: &str, key: &str) -> Option<BusError> {
        let since = {
            let mut apps = apps().lock().unwrap_or_else(|e| e.into_inner());
            let entry = apps.get_mut(key)?;
            if entry.pinged.is_some_and(|at| at.elapsed() < PING_EVERY) {
                return Some(held(dest, entry.since));
            }
            entry.pinged = Some(Instant::now());
            entry.since
        };
        let ping = conn.call_method(
            Some(dest),
            "/",
            Some("org.freedesktop.DBus.Peer"),
            "Ping",
            &(),
        );
        match tokio::time::timeout(PING_LIMIT, ping).await {
            Err(_) => Some(held(dest, since)),
            Ok(Err(zbus::Error::InputOutput(err)))
                if err.kind() == std::io::ErrorKind::TimedOut =>
            {
                Some(held(dest, since))
            }
            // It answered (even with an error): it is awake again.
            Ok(_) => {
                apps().lock().unwrap_or_else(|e| e.into_inner()).remove(key);
                None
            }
        }
    }

    fn held(dest: &str, since: Instant) -> BusError {
        BusError::Timeout {
            bus: dest.to_string(),
            after: since.elapsed().max(Duration::from_millis(1)),
        }
    }
}

/// One typed method call under the per-call limit and the overall deadline.
pub async fn call<B, R>(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<R, BusError>
where
    B: serde::Serialize + DynamicType,
    R: DeserializeOwned + zbus::zvariant::Type,
{
    let reply = call_message(conn, deadline, dest, path, iface, method, body).await?;
    reply
        .body()
        .deserialize::<R>()
        .map_err(|err| BusError::Other(format!("{iface}.{method} answered oddly: {err}")))
}

/// A property of `iface`.
pub async fn property<R: TryFrom<OwnedValue>>(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    iface: &str,
    name: &str,
) -> Result<R, BusError> {
    let value: OwnedValue = call(
        conn,
        deadline,
        dest,
        path,
        PROPERTIES,
        "Get",
        &(iface, name),
    )
    .await?;
    R::try_from(value).map_err(|_| BusError::Other(format!("{iface}.{name} has an odd type")))
}

/// The properties `names` of `iface`, each asked with `Get`, all at once. `GetAll` is never
/// sent: Qt 5's bridge reads a second argument of every Properties call, which GetAll has not,
/// and the whole app crashes (FeatherPad, Qt 5.15.8, exits on one). A property the object does
/// not have is left out (Qt answers UnknownInterface for one it does not know); a timeout ends
/// the read, and so does an object that answers none of them (it is gone).
pub async fn properties(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    iface: &str,
    names: &[&str],
) -> Result<HashMap<String, OwnedValue>, BusError> {
    let asked = names.iter().map(|name| async move {
        let value = call::<_, OwnedValue>(
            conn,
            deadline,
            dest,
            path,
            PROPERTIES,
            "Get",
            &(iface, *name),
        )
        .await;
        (*name, value)
    });
    let mut found = HashMap::new();
    let mut first_error = None;
    for (name, value) in futures::future::join_all(asked).await {
        match value {
            Ok(value) => {
                found.insert(name.to_string(), value);
            }
            Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => return Err(err),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    match first_error {
        Some(err) if found.is_empty() => Err(err),
        _ => Ok(found),
    }
}

/// Children of an accessible as (bus name, path) pairs.
pub async fn children(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<Vec<(String, String)>, BusError> {
    let kids: Vec<(String, OwnedObjectPath)> =
        call(conn, deadline, dest, path, ACCESSIBLE, "GetChildren", &()).await?;
    Ok(kids
        .into_iter()
        .map(|(bus, path)| (bus, path.as_str().to_string()))
        .collect())
}

/// The pid behind a unique bus name.
pub async fn pid_of(conn: &zbus::Connection, deadline: Instant, bus: &str) -> Option<u32> {
    call(
        conn,
        deadline,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "GetConnectionUnixProcessID",
        &(bus,),
    )
    .await
    .ok()
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};

    use futures::StreamExt;

    use super::*;

    /// A private dbus-daemon, killed when dropped.
    struct PrivateBus {
        daemon: std::process::Child,
        address: String,
    }

    impl Drop for PrivateBus {
        fn drop(&mut self) {
            let _ = self.daemon.kill();
            let _ = self.daemon.wait();
        }
    }

    fn private_bus() -> PrivateBus {
        let mut daemon = std::process::Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
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
        }
    }

    async fn connect(address: &str) -> zbus::Connection {
        let builder = zbus::connection::Builder::address(address).unwrap();
        tokio::time::timeout(Duration::from_secs(10), builder.build())
            .await
            .expect("the private bus answers within 10 s")
            .unwrap()
    }

    /// A stand-in for a Qt 5 app's root object: `Get` of the properties Qt knows is answered,
    /// of one it does not with UnknownInterface (as Qt does); a `GetAll` is recorded and never
    /// answered (Qt 5 crashes on it). Returns its connection and the methods it was asked.
    async fn qt_like_app(address: &str) -> (zbus::Connection, Arc<Mutex<Vec<String>>>) {
        let conn = connect(address).await;
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (serving, told) = (conn.clone(), asked.clone());
        let mut calls = zbus::MessageStream::from(&conn);
        tokio::spawn(async move {
            while let Some(Ok(call)) = calls.next().await {
                let header = call.header();
                if header.message_type() != zbus::message::Type::MethodCall {
                    continue;
                }
                let member = header.member().map(|m| m.to_string()).unwrap_or_default();
                told.lock().unwrap().push(member.clone());
                if member != "Get" {
                    continue;
                }
                let (_, name): (String, String) = call.body().deserialize().unwrap();
                let _ = match name.as_str() {
                    "Name" => {
                        serving
                            .reply(&header, &zbus::zvariant::Value::from("FeatherPad"))
                            .await
                    }
                    "ChildCount" => {
                        serving
                            .reply(&header, &zbus::zvariant::Value::from(1i32))
                            .await
                    }
                    _ => {
                        serving
                            .reply_error(
                                &header,
                                "org.freedesktop.DBus.Error.UnknownInterface",
                                &"Interface org.a11y.atspi.Accessible was not found",
                            )
                            .await
                    }
                };
            }
        });
        (conn, asked)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn properties_are_asked_one_by_one_and_never_with_get_all() {
        let bus = private_bus();
        let (app, asked) = qt_like_app(&bus.address).await;
        let agent = connect(&bus.address).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        let dest = app.unique_name().unwrap().to_string();
        let names = ["Name", "Description", "ChildCount"];
        let found = properties(&agent, deadline, &dest, ROOT_PATH, ACCESSIBLE, &names)
            .await
            .expect("the properties the app has are read");
        let name = found
            .get("Name")
            .and_then(|v| String::try_from(v.try_clone().ok()?).ok());
        assert_eq!(name.as_deref(), Some("FeatherPad"));
        let count = found.get("ChildCount").and_then(|v| i32::try_from(v).ok());
        assert_eq!(count, Some(1));
        // The one the app does not know is left out, not an error for the node.
        assert!(!found.contains_key("Description"), "{found:?}");
        let asked = asked.lock().unwrap().clone();
        assert!(!asked.contains(&"GetAll".to_string()), "{asked:?}");
        assert_eq!(asked.len(), names.len(), "{asked:?}");
        // An object that answers none of them is gone.
        let gone = properties(&agent, deadline, &dest, ROOT_PATH, ACCESSIBLE, &["Locale"]).await;
        assert!(matches!(gone, Err(BusError::Gone)), "{gone:?}");
    }
}
