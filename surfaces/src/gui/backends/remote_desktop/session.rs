//! A GNOME or portal remote-desktop session as both backends keep it, written once: the
//! screen cast joined to it (its frames, the monitor it shows, whether the other side closed
//! the session) and the slot the session is kept in (started on first use, started again after
//! the other side closed it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use zbus::zvariant::OwnedValue;

use super::InputSink;
use super::frames::FrameStream;
use crate::gui::desktop::{DisplayResult, Rect};

/// A remote-desktop session the other side (Mutter, the portal) may close, with its screen cast.
pub trait OpenSession: InputSink {
    /// The screen cast joined to the session.
    fn cast(&self) -> &Cast;

    /// Whether the other side closed it (it restarted, or the person revoked it).
    fn closed(&self) -> bool {
        self.cast().closed.load(Ordering::SeqCst)
    }
}

/// The screen cast of a session: the frames its stream delivers, the monitor it shows, and
/// whether the other side has closed the session; dropped, it ends the session.
pub struct Cast {
    pub frames: FrameStream,
    /// The recorded monitor, in the compositor's logical coordinates: pointer positions are
    /// given relative to it.
    pub monitor: Rect,
    /// Set when the other side closes the session.
    closed: Arc<AtomicBool>,
    end: EndCall,
}

/// The call that ends a session (Mutter's `Stop`, the portal's `Close`) on its object. The
/// other side also ends the session when this connection closes; the call says so at once.
pub struct EndCall {
    pub on: zbus::Proxy<'static>,
    pub method: &'static str,
}

impl Cast {
    /// The cast of `monitor` read from `frames`, marked closed once `closed_signal` (the
    /// session's `Closed` signal) arrives, ended through `end` when dropped. Runs on the
    /// backends' runtime (the watch is a task).
    pub fn new(
        frames: FrameStream,
        monitor: Rect,
        mut closed_signal: zbus::proxy::SignalStream<'static>,
        end: EndCall,
    ) -> Cast {
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        tokio::spawn(async move {
            if closed_signal.next().await.is_some() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        Cast {
            frames,
            monitor,
            closed,
            end,
        }
    }
}

impl Drop for Cast {
    fn drop(&mut self) {
        let (on, method) = (self.end.on.clone(), self.end.method);
        super::spawn(async move {
            let _ = on.call::<_, _, ()>(method, &()).await;
        });
    }
}

/// Why a screen-cast stream's properties name no monitor.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("{stream} names no monitor size")]
    NoSize { stream: &'static str },
    #[error("a negative monitor {0}")]
    Negative(&'static str),
}

/// The monitor a screen-cast stream shows, from its `position` and `size` properties (no
/// position: the origin); `stream` names the stream in the error.
pub fn monitor_of(
    properties: &HashMap<String, OwnedValue>,
    stream: &'static str,
) -> Result<Rect, MonitorError> {
    let pair = |key: &str| -> Option<(i32, i32)> {
        properties
            .get(key)
            .and_then(|v| <(i32, i32)>::try_from(v.try_clone().ok()?).ok())
    };
    let (x, y) = pair("position").unwrap_or((0, 0));
    let (width, height) = pair("size").ok_or(MonitorError::NoSize { stream })?;
    Ok(Rect {
        x,
        y,
        width: u32::try_from(width).map_err(|_| MonitorError::Negative("width"))?,
        height: u32::try_from(height).map_err(|_| MonitorError::Negative("height"))?,
    })
}

/// Where a connection keeps its session.
pub struct SessionSlot<S> {
    slot: Mutex<Option<Arc<S>>>,
}

impl<S: OpenSession> SessionSlot<S> {
    pub fn new() -> SessionSlot<S> {
        SessionSlot {
            slot: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<S>>> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open session, else the one `start` makes (the slot held meanwhile, so one call
    /// starts it while the others wait), kept for the calls after.
    pub fn open_or_start(
        &self,
        start: impl FnOnce() -> DisplayResult<Arc<S>>,
    ) -> DisplayResult<Arc<S>> {
        let mut slot = self.lock();
        if let Some(session) = slot.as_ref()
            && !session.closed()
        {
            return Ok(session.clone());
        }
        *slot = None;
        let session = start()?;
        *slot = Some(session.clone());
        Ok(session)
    }

    /// The open session, if one is (it is not started here).
    pub fn running(&self) -> Option<Arc<S>> {
        self.lock().as_ref().filter(|s| !s.closed()).cloned()
    }

    /// Whether the session kept was closed by the other side.
    pub fn closed(&self) -> bool {
        self.lock().as_ref().is_some_and(|s| s.closed())
    }

    /// Ends the session kept: the next call that needs one starts it again.
    pub fn end(&self) {
        self.lock().take();
    }
}
