//! The wlroots backend's connection: made once (the globals bound, the virtual pointer and
//! keyboard made and announced), its event queue dispatched and waited on, and drained in
//! the background between calls; the registry's, seat's and keyboard's events.

use wayland_client::globals::GlobalList;

use super::*;

fn unavailable(reason: String) -> Availability {
    Availability::Unavailable {
        reason,
        fix: "start the daemon inside the Wayland session, with WAYLAND_DISPLAY (and \
              XDG_RUNTIME_DIR) of the compositor's socket set"
            .into(),
    }
}

impl WlConn {
    /// Connects to `WAYLAND_DISPLAY`, binds the protocols the compositor offers, and makes the
    /// virtual pointer and keyboard.
    pub fn connect() -> Result<WlConn, Availability> {
        let conn = Connection::connect_to_env().map_err(|err| {
            unavailable(format!(
                "this is a Wayland session (WAYLAND_DISPLAY={}), but its compositor cannot be \
                 reached: {err}",
                std::env::var("WAYLAND_DISPLAY").unwrap_or_default()
            ))
        })?;
        WlConn::set_up(conn, sway::socket())
    }

    /// Connects to the compositor listening at `socket` (an absolute path), with sway's IPC at
    /// `swaysock`: an agent's own desktop, never the session the environment names.
    pub fn connect_to(
        socket: &std::path::Path,
        swaysock: Option<std::path::PathBuf>,
    ) -> Result<WlConn, Availability> {
        let stream = std::os::unix::net::UnixStream::connect(socket).map_err(|err| {
            unavailable(format!(
                "the compositor at {} cannot be reached: {err}",
                socket.display()
            ))
        })?;
        let conn = Connection::from_socket(stream).map_err(|err| {
            unavailable(format!(
                "the compositor at {} cannot be reached: {err}",
                socket.display()
            ))
        })?;
        WlConn::set_up(conn, swaysock)
    }

    /// Binds the protocols the compositor on `conn` offers, and makes the virtual pointer and
    /// keyboard.
    fn set_up(
        conn: Connection,
        swaysock: Option<std::path::PathBuf>,
    ) -> Result<WlConn, Availability> {
        let (globals, mut queue) = registry_queue_init::<State>(&conn)
            .map_err(|err| unavailable(format!("the compositor's globals: {err}")))?;
        let qh = queue.handle();
        let names: Vec<String> = globals
            .contents()
            .with_list(|list| list.iter().map(|g| g.interface.clone()).collect());
        let offered = |name: &str| names.iter().any(|n| n == name);
        let mut protocols = Protocols {
            ext_image_copy_capture: offered("ext_image_copy_capture_manager_v1"),
            ext_foreign_toplevel_list: offered("ext_foreign_toplevel_list_v1"),
            ..Protocols::default()
        };
        let seat: WlSeat = globals
            .bind(&qh, 1..=7, ())
            .map_err(|err| unavailable(format!("the compositor offers no seat: {err}")))?;
        let shm: WlShm = globals
            .bind(&qh, 1..=1, ())
            .map_err(|err| unavailable(format!("the compositor offers no wl_shm: {err}")))?;
        let mut state = State {
            next_window: 1,
            ..State::default()
        };
        protocols.xdg_output = bind_outputs(&globals, &qh, &mut state);
        let screencopy = globals
            .bind::<ZwlrScreencopyManagerV1, _, _>(&qh, 1..=3, ())
            .ok();
        protocols.screencopy = screencopy.is_some();
        protocols.foreign_toplevel = globals
            .bind::<ZwlrForeignToplevelManagerV1, _, _>(&qh, 1..=3, ())
            .is_ok();
        let pointer = globals
            .bind::<ZwlrVirtualPointerManagerV1, _, _>(&qh, 1..=2, ())
            .ok()
            .map(|manager| manager.create_virtual_pointer(Some(&seat), &qh, ()));
        protocols.virtual_pointer = pointer.is_some();
        let keyboard = globals
            .bind::<ZwpVirtualKeyboardManagerV1, _, _>(&qh, 1..=1, ())
            .ok()
            .map(|manager| manager.create_virtual_keyboard(&seat, &qh, ()));
        protocols.virtual_keyboard = keyboard.is_some();
        if !protocols.is_wlroots() {
            return Err(Availability::Unavailable {
                reason: format!(
                    "the Wayland compositor offers none of the wlroots protocols the gui surface \
                     drives (screencopy, foreign-toplevel, virtual pointer and keyboard){}; GNOME \
                     (Mutter) and KDE (KWin) are not supported yet",
                    desktop_named()
                ),
                fix: "use a wlroots compositor (sway, Hyprland, river, labwc), or start the \
                      daemon with DISPLAY set to reach X11 apps through Xwayland"
                    .into(),
            });
        }
        let layout = Layout::default();
        if let Some(keyboard) = &keyboard {
            upload(keyboard, &layout).map_err(|err| unavailable(err.0))?;
        }
        // The outputs' modes and positions, the existing toplevels, the keymap accepted.
        for _ in 0..2 {
            queue
                .roundtrip(&mut state)
                .map_err(|err| unavailable(format!("wayland roundtrip: {err}")))?;
        }
        let conn = WlConn {
            conn,
            qh,
            queue: Mutex::new(Queue { queue, state }),
            devices: Mutex::new(Devices {
                pointer,
                keyboard,
                layout,
                keyboard_announced: false,
            }),
            seat,
            shm,
            screencopy,
            protocols,
            sway: swaysock.map(sway::SwayIpc::new),
            started: Instant::now(),
        };
        Ok(conn)
    }

    pub(super) fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn lock_devices(&self) -> MutexGuard<'_, Devices> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what is queued and handles every event the compositor has sent by now.
    pub(super) fn sync(&self, queue: &mut Queue) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .roundtrip(state)
            .map(|_| ())
            .map_err(|err| failed(format!("roundtrip: {err}")))
    }

    /// Handles events that arrived without a roundtrip: reads what the socket holds now.
    pub(super) fn dispatch_waiting(&self, queue: &mut Queue) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .flush()
            .map_err(|err| failed(format!("flush: {err}")))?;
        if let Some(guard) = queue.prepare_read() {
            read_socket(guard)?;
        }
        dispatch_pending(queue, state).map(|_| ())
    }

    /// Milliseconds for input events' timestamps.
    pub(super) fn now(&self) -> u32 {
        self.started.elapsed().as_millis() as u32
    }

    /// Blocks until at least one event is handled or the deadline passes.
    pub(super) fn wait_event(
        &self,
        queue: &mut Queue,
        deadline: Instant,
        what: &str,
    ) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .flush()
            .map_err(|err| failed(format!("flush: {err}")))?;
        if dispatch_pending(queue, state)? > 0 {
            return Ok(());
        }
        let Some(guard) = queue.prepare_read() else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(failed(format!("no answer from the compositor for {what}")));
        }
        let mut poll = libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as i32) };
        if ready > 0 {
            read_socket(guard)?;
        }
        dispatch_pending(queue, state).map(|_| ())
    }
}

/// Reads what the socket holds now into the queue (nothing there is no error).
fn read_socket(guard: wayland_client::backend::ReadEventsGuard) -> DisplayResult<()> {
    match guard.read() {
        Ok(_) => Ok(()),
        Err(wayland_client::backend::WaylandError::Io(err))
            if err.kind() == std::io::ErrorKind::WouldBlock =>
        {
            Ok(())
        }
        Err(err) => Err(failed(format!("read: {err}"))),
    }
}

/// Handles the events the queue holds; how many it handled.
fn dispatch_pending(queue: &mut EventQueue<State>, state: &mut State) -> DisplayResult<usize> {
    queue
        .dispatch_pending(state)
        .map_err(|err| failed(format!("dispatch: {err}")))
}

/// Binds the outputs the compositor lists now, and xdg-output where it is offered (whether it
/// is).
fn bind_outputs(globals: &GlobalList, qh: &QueueHandle<State>, state: &mut State) -> bool {
    let outputs: Vec<u32> = globals.contents().with_list(|list| {
        list.iter()
            .filter(|g| g.interface == "wl_output")
            .map(|g| g.name)
            .collect()
    });
    state.xdg_output_manager = globals
        .bind::<ZxdgOutputManagerV1, _, _>(qh, 1..=3, ())
        .ok();
    for name in outputs {
        let version = globals.contents().with_list(|list| {
            list.iter()
                .find(|g| g.name == name)
                .map_or(1, |g| g.version)
        });
        state.add_output(globals.registry(), name, version, qh);
    }
    state.xdg_output_manager.is_some()
}

/// The session's desktop, as the environment names it, for messages.
pub(super) fn desktop_named() -> String {
    std::env::var("XDG_CURRENT_DESKTOP")
        .ok()
        .filter(|d| !d.is_empty())
        .map(|d| format!(" (XDG_CURRENT_DESKTOP={d})"))
        .unwrap_or_default()
}

/// Reads the compositor's events between calls (title changes, new windows), so they never
/// pile up in the socket until the compositor gives up on a client that does not read.
pub(super) fn drain_in_background(conn: Weak<WlConn>) {
    let spawned = std::thread::Builder::new()
        .name("wayland-events".into())
        .spawn(move || {
            loop {
                let Some(strong) = conn.upgrade() else { return };
                let fd = strong.conn.backend().poll_fd().as_raw_fd();
                drop(strong);
                let mut poll = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the call's duration. The descriptor stays open
                // while the connection lives; once it is dropped the upgrade above fails, and a
                // poll on a closed (or reused) descriptor only wakes this loop early.
                let ready = unsafe { libc::poll(&mut poll, 1, 250) };
                if ready <= 0 {
                    continue;
                }
                let Some(strong) = conn.upgrade() else { return };
                let mut queue = strong.lock_queue();
                if strong.dispatch_waiting(&mut queue).is_err() {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "no thread to read wayland events between calls");
    }
}

/// A file in memory of `size` bytes, to share with the compositor.
pub(super) fn shared_file(name: &str, size: usize) -> DisplayResult<std::fs::File> {
    let name = std::ffi::CString::new(name).map_err(failed)?;
    // SAFETY: a NUL-terminated name; the returned descriptor is checked and then owned.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(failed(format!(
            "memfd_create: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fd is a fresh descriptor this process owns and nothing else holds.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.set_len(size as u64)
        .map_err(|err| failed(format!("sizing shared memory: {err}")))?;
    Ok(file)
}

impl Dispatch<WlRegistry, GlobalListContents> for State {
    fn event(
        state: &mut Self,
        registry: &WlRegistry,
        event: wayland_client::protocol::wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        // Monitors plugged in or out while the connection lives.
        use wayland_client::protocol::wl_registry::Event;
        match event {
            Event::Global {
                name,
                interface,
                version,
            } if interface == WlOutput::interface().name => {
                state.add_output(registry, name, version, qh);
            }
            Event::GlobalRemove { name } => {
                if let Some(gone) = state.outputs.iter().position(|o| o.global == name) {
                    let output = state.outputs.remove(gone);
                    if let Some(proxy) = output.proxy
                        && proxy.version() >= 3
                    {
                        proxy.release();
                    }
                }
            }
            _ => {}
        }
    }
}

impl Dispatch<WlSeat, ()> for State {
    fn event(
        state: &mut Self,
        seat: &WlSeat,
        event: wl_seat::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        let wl_seat::Event::Capabilities { capabilities } = event else {
            return;
        };
        let keyboard =
            matches!(capabilities, WEnum::Value(c) if c.contains(wl_seat::Capability::Keyboard));
        match (keyboard, &state.seat_keyboard) {
            (true, None) => state.seat_keyboard = Some(seat.get_keyboard(qh, ())),
            (false, Some(bound)) => {
                if bound.version() >= 3 {
                    bound.release();
                }
                state.seat_keyboard = None;
                state.seat_keymap_seen = false;
            }
            _ => {}
        }
    }
}

impl Dispatch<WlKeyboard, ()> for State {
    fn event(
        state: &mut Self,
        _: &WlKeyboard,
        event: wl_keyboard::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        // The keymap's descriptor closes as the event drops; its arrival is what counts.
        if let wl_keyboard::Event::Keymap { .. } = event {
            state.seat_keymap_seen = true;
        }
    }
}
