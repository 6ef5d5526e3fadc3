//! How a portal session starts: CreateSession, SelectDevices, SelectSources and Start (the
//! person's answer, or the restored grant), then the PipeWire remote the frames come over and
//! the first input that makes the virtual devices; and what a start that failed says about the
//! restore token.

use super::*;
use request::{Portal, options};

/// A start that failed, and whether it spent the stored token (the portal honours a token
/// once: a Start that was answered invalidated it, whatever the answer).
pub(super) struct StartFailure {
    pub(super) error: DisplayError,
    pub(super) token_spent: bool,
    /// The token a Start that was granted returned, when a later step failed: it replaces the
    /// spent one, so the next start is not asked again for the step's failure.
    pub(super) new_token: Option<SecretString>,
}

impl From<DisplayError> for StartFailure {
    fn from(error: DisplayError) -> StartFailure {
        StartFailure {
            error,
            token_spent: false,
            new_token: None,
        }
    }
}

/// A started session and the token that restores it next time, if the portal gave one.
pub(super) struct Started {
    pub(super) session: Session,
    pub(super) token: Option<SecretString>,
}

/// What Start granted: the session, the devices allowed, the shared stream, the next token.
pub(super) struct Negotiated {
    handle: OwnedObjectPath,
    session: zbus::Proxy<'static>,
    closed_signal: zbus::proxy::SignalStream<'static>,
    devices: u32,
    pub(super) node: u32,
    pub(super) monitor: Rect,
    pub(super) token: Option<SecretString>,
}

/// CreateSession, SelectDevices (persisted, with `token`, where the portal can), SelectSources
/// and Start, which the portal answers once the person has (or the token restored the grant).
pub(super) async fn negotiate(
    portal: &Portal,
    offer: Offer,
    token: Option<SecretString>,
) -> Result<Negotiated, StartFailure> {
    let handle = create_session(portal).await?;
    let restoring = offer.restorable() && token.is_some();
    select_devices(portal, &handle, offer, token).await?;
    select_monitor(portal, &handle).await?;
    let session = portal.proxy(handle.to_string(), SESSION).await?;
    let closed_signal = session
        .receive_signal("Closed")
        .await
        .map_err(dbus_failed("Session.Closed"))?;
    let results = start(portal, &handle).await.map_err(|error| StartFailure {
        error,
        token_spent: restoring,
        new_token: None,
    })?;
    let devices = results
        .get("devices")
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0);
    let new_token = results
        .get("restore_token")
        .and_then(|v| <&str>::try_from(v).ok())
        .map(|t| SecretString::from(t.to_string()));
    let (node, monitor) = first_stream(&results)?;
    Ok(Negotiated {
        handle,
        session,
        closed_signal,
        devices,
        node,
        monitor,
        token: new_token,
    })
}

/// RemoteDesktop.CreateSession: the new session's handle.
async fn create_session(portal: &Portal) -> DisplayResult<OwnedObjectPath> {
    let token = portal.token();
    let mut create = options(&token);
    create.insert("session_handle_token", Value::from(portal.token()));
    let results = portal
        .request(
            REMOTE_DESKTOP,
            "CreateSession",
            &token,
            &(create,),
            REPLY_BOUND,
        )
        .await?;
    session_handle(&results)
}

/// RemoteDesktop.SelectDevices: keyboard and pointer, asked to persist (with the stored
/// `token`, if any) where the portal can keep a grant.
async fn select_devices(
    portal: &Portal,
    handle: &OwnedObjectPath,
    offer: Offer,
    token: Option<SecretString>,
) -> DisplayResult<()> {
    let select_token = portal.token();
    let mut select = options(&select_token);
    select.insert("types", Value::from(KEYBOARD | POINTER));
    if offer.restorable() {
        select.insert("persist_mode", Value::from(PERSIST_UNTIL_REVOKED));
        if let Some(token) = &token {
            select.insert(
                "restore_token",
                Value::from(token.expose_secret().to_string()),
            );
        }
    }
    let body = (handle.as_ref(), select);
    portal
        .request(
            REMOTE_DESKTOP,
            "SelectDevices",
            &select_token,
            &body,
            REPLY_BOUND,
        )
        .await
        .map(drop)
}

/// ScreenCast.SelectSources: one monitor.
async fn select_monitor(portal: &Portal, handle: &OwnedObjectPath) -> DisplayResult<()> {
    let token = portal.token();
    let mut sources = options(&token);
    sources.insert("types", Value::from(MONITOR));
    sources.insert("multiple", Value::from(false));
    let body = (handle.as_ref(), sources);
    portal
        .request(SCREEN_CAST, "SelectSources", &token, &body, REPLY_BOUND)
        .await
        .map(drop)
}

/// RemoteDesktop.Start: the person's answer (or the restored grant), with the devices allowed,
/// the streams shared and the next restore token.
async fn start(
    portal: &Portal,
    handle: &OwnedObjectPath,
) -> DisplayResult<HashMap<String, OwnedValue>> {
    let token = portal.token();
    let body = (handle.as_ref(), "", options(&token));
    portal
        .request(REMOTE_DESKTOP, "Start", &token, &body, ANSWER_BOUND)
        .await
}

impl Session {
    pub(super) async fn start(
        bus: zbus::Connection,
        offer: Offer,
        token: Option<SecretString>,
    ) -> Result<Started, StartFailure> {
        let portal = Portal::new(bus)?;
        let Negotiated {
            handle,
            session,
            closed_signal,
            devices,
            node,
            monitor,
            token: new_token,
        } = negotiate(&portal, offer, token).await?;
        let connected = async {
            let remote_desktop = portal.proxy(PORTAL_PATH.into(), REMOTE_DESKTOP).await?;
            let screen_cast = portal.proxy(PORTAL_PATH.into(), SCREEN_CAST).await?;
            let no_options: HashMap<&str, Value<'_>> = HashMap::new();
            let remote: zbus::zvariant::OwnedFd = screen_cast
                .call("OpenPipeWireRemote", &(handle.as_ref(), no_options))
                .await
                .map_err(dbus_failed("ScreenCast.OpenPipeWireRemote"))?;
            let frames = FrameStream::connect(node, Some(remote.into())).map_err(failed)?;
            let close = EndCall {
                on: session,
                method: "Close",
            };
            let session = Session {
                remote_desktop,
                handle,
                node,
                devices,
                cast: Cast::new(frames, monitor, closed_signal, close),
            };
            if devices & (KEYBOARD | POINTER) == KEYBOARD | POINTER {
                remote_desktop::prime(&session).await?;
            }
            Ok(session)
        }
        .await;
        match connected {
            Ok(session) => Ok(Started {
                session,
                token: new_token,
            }),
            Err(error) => Err(StartFailure {
                error,
                token_spent: false,
                new_token,
            }),
        }
    }
}

/// CreateSession's `session_handle` (a string in the specification, an object path in some
/// portals).
fn session_handle(results: &HashMap<String, OwnedValue>) -> DisplayResult<OwnedObjectPath> {
    let value = results
        .get("session_handle")
        .ok_or_else(|| failed("CreateSession answered without a session handle"))?;
    if let Ok(text) = <&str>::try_from(value) {
        return OwnedObjectPath::try_from(text.to_string())
            .map_err(|err| failed(format!("the session handle {text:?}: {err}")));
    }
    OwnedObjectPath::try_from(value.try_clone().map_err(failed)?)
        .map_err(|err| failed(format!("the session handle: {err}")))
}

/// Start's first stream: its PipeWire node and the monitor it shows.
pub(super) fn first_stream(results: &HashMap<String, OwnedValue>) -> DisplayResult<(u32, Rect)> {
    type Streams = Vec<(u32, HashMap<String, OwnedValue>)>;
    let streams: Streams = results
        .get("streams")
        .ok_or_else(|| failed("Start answered without a stream (no monitor was shared)"))?
        .try_clone()
        .map_err(failed)?
        .try_into()
        .map_err(|err| failed(format!("Start's streams: {err}")))?;
    let (node, properties) = streams
        .into_iter()
        .next()
        .ok_or_else(|| failed("Start answered with no stream (no monitor was shared)"))?;
    let monitor = monitor_of(&properties, "the shared stream").map_err(failed)?;
    Ok((node, monitor))
}
