//! Windows through `wlr-foreign-toplevel-management` (rectangles and pids from sway's IPC
//! where it runs): the list, the focused one, and focusing one.

use super::*;

impl WlConn {
    /// The windows as the events read so far tell (the background reader keeps them current),
    /// with each one's place and process from sway's tree, read now.
    pub fn windows(&self) -> DisplayResult<Vec<WindowInfo>> {
        if !self.protocols.foreign_toplevel {
            return Err(failed(
                "the compositor offers no foreign-toplevel protocol: windows cannot be listed",
            ));
        }
        let mut queue = self.lock_queue();
        self.dispatch_waiting(&mut queue)?;
        // sway adds each window's rectangle and pid; elsewhere they are unknown.
        let views = self
            .sway
            .as_ref()
            .map(sway::SwayIpc::views)
            .transpose()
            .unwrap_or_else(|err| {
                tracing::debug!(%err, "sway's window rectangles are unavailable");
                None
            })
            .unwrap_or_default();
        // A window sway's tree shows mapped, whose output the Wayland events have not told
        // yet: those events were sent before the tree's reply, on the other socket; one
        // roundtrip brings them in.
        let placed_later = {
            let toplevels: Vec<&Toplevel> =
                queue.state.toplevels.iter().filter(|t| !t.closed).collect();
            toplevels
                .iter()
                .any(|t| t.outputs.is_empty() && matching_view(t, &toplevels, &views).is_some())
        };
        if placed_later {
            self.sync(&mut queue)?;
        }
        let monitors: Vec<wayland_client::backend::ObjectId> = queue
            .state
            .outputs
            .iter()
            .filter_map(|o| o.proxy.as_ref().map(Proxy::id))
            .collect();
        let toplevels: Vec<&Toplevel> =
            queue.state.toplevels.iter().filter(|t| !t.closed).collect();
        Ok(toplevels
            .iter()
            .map(|t| {
                let view = matching_view(t, &toplevels, &views);
                WindowInfo {
                    id: t.id,
                    title: t.title.clone(),
                    app: t.app_id.clone(),
                    instance: String::new(),
                    pid: view.and_then(|v| v.pid),
                    // Unknown: an empty rectangle, which no point lies in.
                    rect: view.map_or(
                        Rect {
                            x: 0,
                            y: 0,
                            width: 0,
                            height: 0,
                        },
                        |v| v.rect,
                    ),
                    focused: t.activated,
                    monitor: t
                        .outputs
                        .first()
                        .and_then(|id| monitors.iter().position(|m| m == id)),
                }
            })
            .collect())
    }

    pub fn window_ids(&self) -> DisplayResult<Vec<u32>> {
        Ok(self.windows()?.iter().map(|w| w.id).collect())
    }

    /// The activated toplevel, which keys reach; None when no window is activated (the focus
    /// is on no window, or on a panel or lock screen the protocol does not list).
    pub fn keyboard_target(&self) -> DisplayResult<Option<u32>> {
        if !self.protocols.foreign_toplevel {
            return Err(failed(
                "the compositor offers no foreign-toplevel protocol: the focused window cannot \
                 be told",
            ));
        }
        // After a roundtrip, so that every change the compositor made before now is in. Only
        // the activated state counts here: sway's tree (places, pids) is not read.
        let mut queue = self.lock_queue();
        self.sync(&mut queue)?;
        Ok(queue
            .state
            .toplevels
            .iter()
            .find(|t| t.activated && !t.closed)
            .map(|t| t.id))
    }

    /// Activates `window` and waits (bounded) until the compositor reports it activated.
    pub fn focus(&self, window: u32) -> DisplayResult<bool> {
        let mut queue = self.lock_queue();
        self.sync(&mut queue)?;
        let handle = queue
            .state
            .toplevels
            .iter()
            .find(|t| t.id == window && !t.closed)
            .map(|t| t.handle.clone())
            .ok_or_else(|| failed(format!("window {window} is gone")))?;
        handle.activate(&self.seat);
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            self.sync(&mut queue)?;
            let activated = queue
                .state
                .toplevels
                .iter()
                .any(|t| t.id == window && t.activated);
            if activated {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            // The compositor sends the new state when it applies it; wait for that event.
            let _ = self.wait_event(&mut queue, deadline, "the window's activation");
        }
    }
}

/// sway's view for a toplevel: the one view with the same app id and title, when exactly one
/// toplevel and one view share them (else unknown, rather than another window's facts).
pub(super) fn matching_view<'v>(
    toplevel: &Toplevel,
    toplevels: &[&Toplevel],
    views: &'v [sway::SwayView],
) -> Option<&'v sway::SwayView> {
    let same = |v: &&sway::SwayView| v.app_id == toplevel.app_id && v.title == toplevel.title;
    let twins = toplevels
        .iter()
        .filter(|t| t.app_id == toplevel.app_id && t.title == toplevel.title)
        .count();
    let mut candidates = views.iter().filter(same);
    let view = candidates.next()?;
    (twins == 1 && candidates.next().is_none()).then_some(view)
}

impl Dispatch<ZwlrForeignToplevelManagerV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrForeignToplevelManagerV1,
        event: zwlr_foreign_toplevel_manager_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let zwlr_foreign_toplevel_manager_v1::Event::Toplevel { toplevel } = event {
            let id = state.next_window;
            state.next_window += 1;
            state.toplevels.push(Toplevel {
                handle: toplevel,
                id,
                title: String::new(),
                app_id: String::new(),
                activated: false,
                outputs: Vec::new(),
                closed: false,
            });
        }
    }

    event_created_child!(State, ZwlrForeignToplevelManagerV1, [
        zwlr_foreign_toplevel_manager_v1::EVT_TOPLEVEL_OPCODE => (ZwlrForeignToplevelHandleV1, ()),
    ]);
}

impl Dispatch<ZwlrForeignToplevelHandleV1, ()> for State {
    fn event(
        state: &mut Self,
        handle: &ZwlrForeignToplevelHandleV1,
        event: zwlr_foreign_toplevel_handle_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(toplevel) = state.toplevels.iter_mut().find(|t| &t.handle == handle) else {
            return;
        };
        match event {
            zwlr_foreign_toplevel_handle_v1::Event::Title { title } => toplevel.title = title,
            zwlr_foreign_toplevel_handle_v1::Event::AppId { app_id } => toplevel.app_id = app_id,
            zwlr_foreign_toplevel_handle_v1::Event::OutputEnter { output } => {
                toplevel.outputs.push(output.id())
            }
            zwlr_foreign_toplevel_handle_v1::Event::OutputLeave { output } => {
                toplevel.outputs.retain(|id| *id != output.id())
            }
            zwlr_foreign_toplevel_handle_v1::Event::State { state: states } => {
                let activated = zwlr_foreign_toplevel_handle_v1::State::Activated as u32;
                toplevel.activated = states.chunks_exact(4).any(|word| {
                    u32::from_ne_bytes([word[0], word[1], word[2], word[3]]) == activated
                });
            }
            zwlr_foreign_toplevel_handle_v1::Event::Closed => {
                toplevel.closed = true;
                handle.destroy();
            }
            _ => {}
        }
        state.toplevels.retain(|t| !t.closed);
    }
}
