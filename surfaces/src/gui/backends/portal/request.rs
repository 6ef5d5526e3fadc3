//! The portal's requests: every call that asks the person (or the portal) something answers
//! through an `org.freedesktop.portal.Request::Response` signal on a request object, which is
//! subscribed to before the call so no answer is missed.

use super::*;

/// How a request ended: granted with its results, refused by the person, or failed otherwise.
#[derive(Debug)]
pub(super) enum Answer {
    Granted(HashMap<String, OwnedValue>),
    /// Response code 1: the person cancelled the dialog.
    Refused,
    /// Response code 2 (or another): the portal ended the interaction otherwise.
    Ended(u32),
}

/// One connection to the portal: makes request tokens and waits for their answers.
pub(super) struct Portal {
    bus: zbus::Connection,
    /// The bus's unique name as request paths spell it (`:1.42` → `1_42`).
    sender: String,
    counter: AtomicU64,
}

impl Portal {
    pub(super) fn new(bus: zbus::Connection) -> DisplayResult<Portal> {
        let sender = bus
            .unique_name()
            .ok_or_else(|| failed("the session bus gave this connection no name"))?
            .trim_start_matches(':')
            .replace('.', "_");
        Ok(Portal {
            bus,
            sender,
            counter: AtomicU64::new(0),
        })
    }

    /// A token unique to this process, valid in an object path.
    pub(super) fn token(&self) -> String {
        format!(
            "computer_{}_{}",
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed)
        )
    }

    pub(super) async fn proxy(
        &self,
        path: String,
        interface: &'static str,
    ) -> DisplayResult<zbus::Proxy<'static>> {
        zbus::proxy::Builder::<zbus::Proxy<'static>>::new(&self.bus)
            .destination(PORTAL)
            .and_then(|b| b.path(path))
            .and_then(|b| b.interface(interface))
            .map_err(dbus_failed(interface))?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(dbus_failed(interface))
    }

    /// Calls `method` (whose options carry `handle_token: token`) and waits, at most `bound`,
    /// for the answer on the request object (subscribed to first, so no answer is missed): the
    /// results if it was granted, else why not.
    pub(super) async fn request<B>(
        &self,
        interface: &'static str,
        method: &'static str,
        token: &str,
        body: &B,
        bound: Duration,
    ) -> DisplayResult<HashMap<String, OwnedValue>>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        let path = format!("{PORTAL_PATH}/request/{}/{token}", self.sender);
        let request = self.proxy(path.clone(), REQUEST).await?;
        let mut responses = request
            .receive_signal("Response")
            .await
            .map_err(dbus_failed("Request.Response"))?;
        let handle: OwnedObjectPath = self
            .proxy(PORTAL_PATH.into(), interface)
            .await?
            .call(method, body)
            .await
            .map_err(|err| failed(format!("{interface}.{method}: {err}")))?;
        if handle.as_str() != path {
            // A portal older than 0.9 names its requests itself: listen there (the answer may
            // have come already, which the bound then reports).
            let request = self.proxy(handle.to_string(), REQUEST).await?;
            responses = request
                .receive_signal("Response")
                .await
                .map_err(dbus_failed("Request.Response"))?;
        }
        let answer = match tokio::time::timeout(bound, responses.next()).await {
            Ok(Some(message)) => message,
            Ok(None) => {
                return Err(failed(format!(
                    "{interface}.{method}: the portal went away"
                )));
            }
            Err(_) => {
                // Takes the dialog down, so no later answer grants what nobody waits for.
                let _ = request.call::<_, _, ()>("Close", &()).await;
                return Err(failed(format!(
                    "{interface}.{method} got no answer within {bound:?} (the person did not \
                     answer the desktop's dialog, or the portal hung); nothing was granted. {}",
                    token::how_to_grant()
                )));
            }
        };
        let (code, results): (u32, HashMap<String, OwnedValue>) = answer
            .body()
            .deserialize()
            .map_err(|err| failed(format!("{interface}.{method}'s answer: {err}")))?;
        let answer = match code {
            0 => Answer::Granted(results),
            1 => Answer::Refused,
            other => Answer::Ended(other),
        };
        // The step as errors name it: `RemoteDesktop.Start`.
        let short = interface.rsplit('.').next().unwrap_or(interface);
        granted(&format!("{short}.{method}"), answer)
    }
}

/// The error for a request that was not granted.
pub(super) fn not_granted(step: &str, answer: Answer) -> DisplayError {
    match answer {
        Answer::Granted(_) => failed(format!("{step} was granted")),
        Answer::Refused => failed(format!(
            "the person refused to share the screen and allow remote control in the desktop's \
             dialog ({step} answered 1: cancelled); nothing was captured or sent. {}",
            token::how_to_grant()
        )),
        Answer::Ended(code) => failed(format!(
            "the portal ended the request ({step} answered {code}: the dialog was closed, or a \
             kept grant was revoked or is no longer valid); nothing was captured or sent. {}",
            token::how_to_grant()
        )),
    }
}

fn granted(step: &str, answer: Answer) -> DisplayResult<HashMap<String, OwnedValue>> {
    match answer {
        Answer::Granted(results) => Ok(results),
        other => Err(not_granted(step, other)),
    }
}

/// The options every request carries: its handle token.
pub(super) fn options(token: &str) -> HashMap<&'static str, Value<'static>> {
    HashMap::from([("handle_token", Value::from(token.to_string()))])
}
