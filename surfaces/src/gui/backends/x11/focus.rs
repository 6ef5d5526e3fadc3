//! Which window the keys go to, and focusing one: the input focus walked up to its client (the
//! agent's keyboard's, after its dialogs, or the core one), and activation through the window
//! manager.

use std::time::{Duration, Instant};

use x11rb::protocol::xproto::{
    self, ClientMessageEvent, ConfigureWindowAux, ConnectionExt as _, EventMask, StackMode,
};

use super::{XConn, XResult};

impl XConn {
    /// The managed window that holds the input focus: X sends key events to the focus window
    /// (or one inside it), which is the client window or a child of it, so the focus is walked
    /// up to the window in _NET_CLIENT_LIST. None when the focus is on no client (PointerRoot,
    /// None, the root, a frame or a popup of no managed window).
    pub fn keyboard_target(&self) -> XResult<Option<u32>> {
        let clients = self.window_ids()?;
        let Some(agent) = self.agent_peek() else {
            let focus = self.conn.get_input_focus()?.reply()?.focus;
            return self.client_holding(focus, &clients);
        };
        let target = self.client_holding(agent.focus()?, &clients)?;
        self.agent_follows_dialogs(&agent, &clients, target)
    }

    /// The client among `clients` that is `window` or holds it; None for None, PointerRoot,
    /// the root, or a window no client holds.
    pub(super) fn client_holding(&self, mut window: u32, clients: &[u32]) -> XResult<Option<u32>> {
        // A window's ancestry is short; the bound only guards against a server that lies.
        for _ in 0..64 {
            // 0 is None and 1 is PointerRoot: keys then go where the pointer is, which may
            // change before they arrive.
            if window <= 1 || window == self.root {
                return Ok(None);
            }
            if clients.contains(&window) {
                return Ok(Some(window));
            }
            window = match self.conn.query_tree(window)?.reply() {
                Ok(tree) => tree.parent,
                // The window closed while it was walked (as the keys went to it): keys have
                // no target now, which is what the caller is told, not the X error.
                Err(x11rb::errors::ReplyError::X11Error(_)) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
        }
        Ok(None)
    }

    /// Asks the window manager to activate `window` (`_NET_ACTIVE_WINDOW`), as a pager does.
    pub(super) fn ask_to_activate(&self, window: u32) -> XResult<()> {
        let event = ClientMessageEvent::new(
            32,
            window,
            self.atoms._NET_ACTIVE_WINDOW,
            // Source 2: a pager acting for the user, which window managers honour at once.
            [2, 0, self.active_window()?.unwrap_or(0), 0, 0],
        );
        self.conn.send_event(
            false,
            self.root,
            EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
            event,
        )?;
        Ok(())
    }

    /// Asks the window manager to activate and raise `window`, then waits (bounded) until it
    /// reports it active. Returns whether it did.
    pub fn focus(&self, window: u32) -> XResult<bool> {
        const BOUND: Duration = Duration::from_secs(1);
        // The root's event mask on this connection is shared with the ping wait: one at a time.
        let _input = self.lock_input();
        if let Some(agent) = self.agent_if_open() {
            return self.agent_focus(&agent, window);
        }
        // The window manager says so by changing the root's _NET_ACTIVE_WINDOW: see it as an
        // event, for the duration of the wait only.
        self.conn.change_window_attributes(
            self.root,
            &xproto::ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE),
        )?;
        self.ask_to_activate(window)?;
        self.conn.configure_window(
            window,
            &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
        )?;
        let deadline = Instant::now() + BOUND;
        let focused = loop {
            if self.active_window()? == Some(window) {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let changed = !left.is_zero()
                && self.wait_for_event(left, |event| {
                    matches!(event, x11rb::protocol::Event::PropertyNotify(event)
                        if event.window == self.root && event.atom == self.atoms._NET_ACTIVE_WINDOW)
                })?;
            if !changed {
                break self.active_window()? == Some(window);
            }
        };
        self.stop_watching_root()?;
        Ok(focused)
    }
}
