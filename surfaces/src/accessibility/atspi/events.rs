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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;

use super::Accessible;

/// The signals of an object's own changes.
const OBJECT_EVENTS: &str = "org.a11y.atspi.Event.Object";

/// The change signals of one element, subscribed to before an act. They are drained as they
/// come by a task of the watch's own: zbus stops reading the connection while any subscriber's
/// queue is full, so a queue left to fill (GTK4 sends a signal per typed character and more)
/// would stall every other call on the accessibility bus until the read-back gave up.
pub struct Watch {
    seen: Arc<Seen>,
    drain: tokio::task::JoinHandle<()>,
    /// Signals taken by [`Watch::changed_within`] so far.
    taken: usize,
}

/// What the draining task tells the watch.
#[derive(Default)]
struct Seen {
    signals: AtomicUsize,
    wake: tokio::sync::Notify,
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
        let mut signals = zbus::MessageStream::for_match_rule(rule, conn, None)
            .await
            .ok()?;
        let seen = Arc::new(Seen::default());
        let told = seen.clone();
        let drain = tokio::spawn(async move {
            while let Some(Ok(_)) = signals.next().await {
                told.signals.fetch_add(1, Ordering::Relaxed);
                told.wake.notify_one();
            }
        });
        Some(Watch {
            seen,
            drain,
            taken: 0,
        })
    }

    /// Waits up to `pause` for a change signal; whether one came. Signals that came while
    /// nobody waited wake it at once; a stream that broke waits the whole pause, as a poll would.
    pub async fn changed_within(&mut self, pause: Duration) -> bool {
        let until = tokio::time::Instant::now() + pause;
        loop {
            let count = self.seen.signals.load(Ordering::Relaxed);
            if count > self.taken {
                self.taken = count;
                return true;
            }
            if tokio::time::timeout_at(until, self.seen.wake.notified())
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    /// How many change signals the element sent since the watch began: what a log line tells
    /// of a read-back.
    pub fn signals(&mut self) -> usize {
        self.seen.signals.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.drain.abort();
    }
}
