//! What a GNOME or portal connection does with its remote-desktop session, written once: the
//! slot the session is kept in (started on first use, started again after the other side
//! closed it), and the input sent through it (pointer moves, clicks, drags, scrolls, typing,
//! key combinations), each gesture one task on the backends' runtime.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{InputSink, block_on};
use crate::gui::desktop::{Button, DisplayResult};
use crate::gui::keys::Combo;

/// A remote-desktop session the other side (Mutter, the portal) may close.
pub trait OpenSession: InputSink {
    /// Whether the other side closed it (it restarted, or the person revoked it).
    fn closed(&self) -> bool;
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

/// A connection whose input goes through a remote-desktop session: the gestures of `Desktop`
/// as both backends send them.
pub trait SessionInput {
    type Session: OpenSession;
    /// The backend, as its errors name it.
    const BACKEND: &'static str;
    /// How long one gesture may take.
    const INPUT_BOUND: Duration;

    /// The session, started on first use.
    fn session(&self) -> DisplayResult<Arc<Self::Session>>;

    /// The key events of `text`, or why it cannot be typed here.
    fn text_events(text: &str) -> DisplayResult<Vec<(u32, bool)>>;

    /// Runs input calls on the session, in order, as one task.
    fn input<F, Fut>(&self, what: &str, work: F) -> DisplayResult<()>
    where
        F: FnOnce(Arc<Self::Session>) -> Fut,
        Fut: Future<Output = DisplayResult<()>> + Send + 'static,
    {
        let session = self.session()?;
        block_on(Self::BACKEND, Self::INPUT_BOUND, what, work(session))
    }

    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        self.input("a pointer move", move |s| async move {
            s.motion(x, y, true).await
        })
    }

    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        self.input("a click", move |s| async move {
            super::click(&*s, at, button, count).await
        })
    }

    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        self.input("a drag", move |s| async move {
            super::drag(&*s, from, to, button).await
        })
    }

    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        self.input("a scroll", move |s| async move {
            super::scroll(&*s, at, dx, dy).await
        })
    }

    fn untypable(text: &str) -> Option<String> {
        Self::text_events(text).err().map(|err| err.0)
    }

    fn type_text(&self, text: &str) -> DisplayResult<()> {
        let events = Self::text_events(text)?;
        self.input(
            "typing",
            move |s| async move { super::keys(&*s, &events).await },
        )
    }

    fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        let events = super::combo_events(combo);
        self.input("a key combination", move |s| async move {
            super::keys(&*s, &events).await
        })
    }
}
