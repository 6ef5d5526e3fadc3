//! An element's change signals: what wakes a read-back the moment the toolkit says the element
//! changed, instead of at its next poll.
//!
//! Toolkit bridges (at-spi2-atk, AccessKit) emit an event only while some client has registered
//! for its kind with the registry, so the connection registers once, when it opens. A read-back
//! then subscribes to one element's signals before the act and waits on them between reads; a
//! missed or absent signal costs nothing but the poll it would have replaced.

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use super::Accessible;
use super::bus::REGISTRY;

const REGISTRY_PATH: &str = "/org/a11y/atspi/registry";
/// The signals of an object's own changes.
const OBJECT_EVENTS: &str = "org.a11y.atspi.Event.Object";
/// The kind a read-back waits on: states (checked, expanded, focused, sensitive...). Property
/// and text changes are left out on purpose: every registered kind makes every app on the
/// desktop send it for as long as the daemon runs, and spinners, progress bars and clocks
/// change those all the time. Their read-backs poll.
const KINDS: &[&str] = &["object:state-changed"];
/// Signals queued for a watch before the oldest are dropped: one wakes the wait, the read that
/// follows sees them all.
const QUEUED: usize = 8;

/// Asks the registry to have bridges emit the kind a read-back waits on, for as long as `conn`
/// lives. A refusal only leaves read-backs to their polls, so it is logged, not returned.
pub async fn register(conn: &zbus::Connection) {
    for kind in KINDS {
        let asked = conn
            .call_method(
                Some(REGISTRY),
                REGISTRY_PATH,
                Some("org.a11y.atspi.Registry"),
                "RegisterEvent",
                kind,
            )
            .await;
        if let Err(err) = asked {
            tracing::info!(kind, %err, "the AT-SPI registry did not take an event registration; read-backs poll");
        }
    }
}

/// The change signals of one element, subscribed to before an act.
pub struct Watch {
    signals: zbus::MessageStream,
    /// Signals taken so far.
    taken: usize,
}

impl Watch {
    /// Subscribes to `at`'s change signals; `None` when the bus would not take the match rule.
    pub async fn start(conn: &zbus::Connection, at: &Accessible) -> Option<Watch> {
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(at.bus.as_str())
            .and_then(|b| b.interface(OBJECT_EVENTS))
            .and_then(|b| b.path(at.path.as_str()))
            .ok()?
            .build();
        zbus::MessageStream::for_match_rule(rule, conn, Some(QUEUED))
            .await
            .ok()
            .map(|signals| Watch { signals, taken: 0 })
    }

    /// Waits up to `pause` for a change signal; whether one came. The signals that came while
    /// nobody waited wake it at once; a stream that broke waits the whole pause, as a poll would.
    pub async fn changed_within(&mut self, pause: Duration) -> bool {
        let until = tokio::time::Instant::now() + pause;
        match tokio::time::timeout_at(until, self.signals.next()).await {
            Ok(Some(Ok(_))) => {
                self.taken += 1;
                true
            }
            Ok(_) => {
                tokio::time::sleep_until(until).await;
                false
            }
            Err(_) => false,
        }
    }

    /// How many change signals the element sent since the watch began, those still queued
    /// included: what a log line tells of a read-back.
    pub fn signals(&mut self) -> usize {
        while let Some(Some(Ok(_))) = self.signals.next().now_or_never() {
            self.taken += 1;
        }
        self.taken
    }
}
