//! The process-wide connection every backend keeps: made on first use, remade after it breaks,
//! and not retried more than once a second while what it connects to is unreachable (the
//! probe runs on every call).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::Availability;

/// How long a failed connection's reason is answered before connecting is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub struct KeptConn<C> {
    state: Mutex<State<C>>,
}

struct State<C> {
    conn: Option<Arc<C>>,
    last_error: Option<(Instant, Availability)>,
}

impl<C> KeptConn<C> {
    pub const fn new() -> KeptConn<C> {
        KeptConn {
            state: Mutex::new(State {
                conn: None,
                last_error: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection, or one `connect` makes now (`made` sees it first, before any other
    /// caller can), or why there is none.
    pub fn get(
        &self,
        connect: impl FnOnce() -> Result<C, Availability>,
        made: impl FnOnce(&Arc<C>),
    ) -> Result<Arc<C>, Availability> {
        let mut state = self.lock();
        if let Some(conn) = &state.conn {
            return Ok(conn.clone());
        }
        if let Some((at, why)) = &state.last_error
            && at.elapsed() < RETRY_AFTER
        {
            return Err(why.clone());
        }
        match connect() {
            Ok(conn) => {
                let conn = Arc::new(conn);
                made(&conn);
                state.conn = Some(conn.clone());
                state.last_error = None;
                Ok(conn)
            }
            Err(why) => {
                state.last_error = Some((Instant::now(), why.clone()));
                Err(why)
            }
        }
    }

    /// The connection made last, if it is still kept (none is made here).
    pub fn current(&self) -> Option<Arc<C>> {
        self.lock().conn.clone()
    }

    /// Drops `broken` if it is the one kept, so the next use makes a new one.
    pub fn forget(&self, broken: &Arc<C>) {
        let mut state = self.lock();
        if state
            .conn
            .as_ref()
            .is_some_and(|conn| Arc::ptr_eq(conn, broken))
        {
            state.conn = None;
        }
    }
}
