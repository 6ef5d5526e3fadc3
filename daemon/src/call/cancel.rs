//! Why a call stops before its end: its client cancelled it, its client went away, or the daemon
//! is shutting down. The gateway hands surfaces one token that fires on any of them and records
//! which one it was.

use tokio_util::sync::{CancellationToken, DropGuard};

/// The ways a call can be cancelled, each its own token so the receipt can say which fired.
#[derive(Debug, Clone, Default)]
pub struct CallCancel {
    /// Fired by the client's `notifications/cancelled` for this request.
    pub request: CancellationToken,
    /// Fired when the client's connection closes.
    pub connection: CancellationToken,
}

impl CallCancel {
    /// A token that fires as soon as any of the reasons does, and a guard that ends the watch
    /// when the call is over.
    pub fn watch(&self) -> (CancellationToken, DropGuard) {
        let any = CancellationToken::new();
        let done = CancellationToken::new();
        let (request, connection, fired, finished) = (
            self.request.clone(),
            self.connection.clone(),
            any.clone(),
            done.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                _ = request.cancelled() => fired.cancel(),
                _ = connection.cancelled() => fired.cancel(),
                _ = finished.cancelled() => {}
            }
        });
        (any, done.drop_guard())
    }

    /// Who cancelled the call, if it was cancelled: `client` or `disconnect`.
    pub fn by(&self) -> Option<&'static str> {
        if self.connection.is_cancelled() {
            Some("disconnect")
        } else if self.request.is_cancelled() {
            Some("client")
        } else {
            None
        }
    }
}
