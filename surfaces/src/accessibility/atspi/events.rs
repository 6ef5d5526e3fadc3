//! An element's change signals: what wakes a read-back the moment the toolkit says the element
//! changed, instead of at its next poll.
//!
//! A read-back subscribes to one element's signals before the act and waits on them between
//! reads; a missed or absent signal costs nothing but the poll it would have replaced. The daemon
//! does not register for events with the AT-SPI registry: a registration makes every app on the
//! desktop send that kind of event for as long as the daemon runs, and it changed what apps
//! expose (with it, gtk3-widget-factory's tree no longer held still between two walks). The GTK
//! bridge (at-spi2-atk) on the test desktop sends state changes without one; where a bridge
//! does not, read-backs poll as before.

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use super::Accessible;

/// The signals of an object's own changes.
const OBJECT_EVENTS: &str = "org.a11y.atspi.Event.Object";
/// Signals queued for a watch before the oldest are dropped: one wakes the wait, the read that
/// follows sees them all.
const QUEUED: usize = 8;

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
