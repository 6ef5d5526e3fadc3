//! The gui surface on wlroots-style Wayland compositors (sway, Hyprland, river, labwc): one
//! Wayland connection per backend, with screenshots through `wlr-screencopy`, windows and focus
//! through `wlr-foreign-toplevel-management` (rectangles and pids from sway's IPC where it
//! runs), the pointer through `wlr-virtual-pointer` and the keyboard through
//! `virtual-keyboard-unstable-v1` with keymaps made per call, so any Unicode text types.
//!
//! The virtual pointer and keyboard live as long as the connection: a client binds
//! `wl_keyboard`/`wl_pointer` only when the seat announces the capability, so a device made for
//! one call and dropped after it reaches nobody. The first keys wait until the announcement is
//! seen (this connection binds the seat's keyboard too, and waits for its keymap). Outputs
//! plugged in or out later are followed through the registry's events.

mod keymap;
mod sway;

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use wayland_client::globals::{GlobalListContents, registry_queue_init};
use wayland_client::protocol::{
    wl_buffer::WlBuffer, wl_keyboard, wl_keyboard::WlKeyboard, wl_output, wl_output::WlOutput,
    wl_pointer, wl_registry::WlRegistry, wl_seat, wl_seat::WlSeat, wl_shm, wl_shm::WlShm,
    wl_shm_pool::WlShmPool,
};
use wayland_client::{
    Connection, Dispatch, EventQueue, Proxy, QueueHandle, WEnum, delegate_noop, event_created_child,
};
use wayland_protocols::xdg::xdg_output::zv1::client::{
    zxdg_output_manager_v1::ZxdgOutputManagerV1, zxdg_output_v1, zxdg_output_v1::ZxdgOutputV1,
};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1::{self, ZwlrForeignToplevelHandleV1},
    zwlr_foreign_toplevel_manager_v1::{self, ZwlrForeignToplevelManagerV1},
};
use wayland_protocols_wlr::screencopy::v1::client::{
    zwlr_screencopy_frame_v1::{self, ZwlrScreencopyFrameV1},
    zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1,
};
use wayland_protocols_wlr::virtual_pointer::v1::client::{
    zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1,
    zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1,
};

use self::virtual_keyboard::{
    zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1,
    zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1,
};
use crate::Availability;
use crate::gui::desktop::{
    self, Button, Capability, DisplayError, DisplayResult, MonitorInfo, Rect, Rgb, WindowInfo,
};
use crate::gui::keys::{Combo, char_keysym};
use keymap::Layout;

/// The virtual-keyboard protocol, generated from its XML (no crate in the tree carries it).
#[allow(
    dead_code,
    non_camel_case_types,
    unused_imports,
    missing_docs,
    clippy::all
)]
mod virtual_keyboard {
    use wayland_client;
    use wayland_client::protocol::*;

    pub mod __interfaces {
        use wayland_client::protocol::__interfaces::*;
        wayland_scanner::generate_interfaces!("protocols/virtual-keyboard-unstable-v1.xml");
    }
    use self::__interfaces::*;

    wayland_scanner::generate_client_code!("protocols/virtual-keyboard-unstable-v1.xml");
}

/// How long a call waits for the compositor (a frame, an activation) before it fails.
const REPLY_BOUND: Duration = Duration::from_secs(2);
/// Linux input codes of the mouse buttons (BTN_LEFT, BTN_RIGHT, BTN_MIDDLE).
const BTN_LEFT: u32 = 0x110;
const BTN_RIGHT: u32 = 0x111;
const BTN_MIDDLE: u32 = 0x112;
/// One wheel notch, in the units `wl_pointer.axis` uses (what libinput reports per notch).
const NOTCH: f64 = 15.0;

fn failed(what: impl std::fmt::Display) -> DisplayError {
    DisplayError(format!("wayland: {what}"))
}

/// Which of the protocols the gui surface uses the compositor offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protocols {
    pub screencopy: bool,
    pub foreign_toplevel: bool,
    pub virtual_pointer: bool,
    pub virtual_keyboard: bool,
    pub xdg_output: bool,
    /// Offered but not used by this build (screencopy is used where both are offered).
    pub ext_image_copy_capture: bool,
    /// Offered but not used by this build: it lists windows but cannot activate them.
    pub ext_foreign_toplevel_list: bool,
}

impl Protocols {
    /// Whether the compositor is wlroots-style: it offers any of the wlr protocols used here.
    pub fn is_wlroots(&self) -> bool {
        self.screencopy || self.foreign_toplevel || self.virtual_pointer || self.virtual_keyboard
    }

    /// Whether these protocols give `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::Capture => self.screencopy,
            Capability::Windows | Capability::RaiseWindow => self.foreign_toplevel,
            // No Wayland protocol tells a client where the pointer is.
            Capability::ReadPointer => false,
            Capability::Pointer => self.virtual_pointer,
            Capability::Keyboard => self.virtual_keyboard,
        }
    }

    /// What is missing, in words for `computer doctor`.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.screencopy {
            missing.push("zwlr_screencopy_manager_v1 (no screenshots or evidence)");
        }
        if !self.foreign_toplevel {
            missing.push(
                "zwlr_foreign_toplevel_manager_v1 (no window list or focus; keys refused since \
                 their window cannot be confirmed)",
            );
        }
        if !self.virtual_pointer {
            missing.push("zwlr_virtual_pointer_manager_v1 (no pointer input)");
        }
        if !self.virtual_keyboard {
            missing.push("zwp_virtual_keyboard_manager_v1 (no keyboard input)");
        }
        missing.push("a pointer position query (no Wayland protocol has one: `cursor` is absent, give x and y)");
        missing
    }

    /// The protocols in use, for the backend's description.
    pub fn used(&self) -> Vec<&'static str> {
        [
            (self.screencopy, "wlr-screencopy"),
            (self.foreign_toplevel, "wlr-foreign-toplevel"),
            (self.virtual_pointer, "wlr-virtual-pointer"),
            (self.virtual_keyboard, "virtual-keyboard"),
            (self.xdg_output, "xdg-output"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// The protocols the compositor at `WAYLAND_DISPLAY` advertises, read from its registry
/// without binding any; None when it cannot be reached.
pub fn advertised() -> Option<Protocols> {
    let conn = Connection::connect_to_env().ok()?;
    let (globals, _queue) = registry_queue_init::<State>(&conn).ok()?;
    let names: Vec<String> = globals
        .contents()
        .with_list(|list| list.iter().map(|g| g.interface.clone()).collect());
    let offered = |name: &str| names.iter().any(|n| n == name);
    Some(Protocols {
        screencopy: offered("zwlr_screencopy_manager_v1"),
        foreign_toplevel: offered("zwlr_foreign_toplevel_manager_v1"),
        virtual_pointer: offered("zwlr_virtual_pointer_manager_v1"),
        virtual_keyboard: offered("zwp_virtual_keyboard_manager_v1"),
        xdg_output: offered("zxdg_output_manager_v1"),
        ext_image_copy_capture: offered("ext_image_copy_capture_manager_v1"),
        ext_foreign_toplevel_list: offered("ext_foreign_toplevel_list_v1"),
    })
}

/// A monitor as the compositor describes it.
#[derive(Debug, Clone, Default)]
struct Output {
    /// The output's global name in the registry, which the handlers find it by.
    global: u32,
    proxy: Option<WlOutput>,
    name: String,
    /// From wl_output: the position, the current mode in pixels, the scale.
    position: (i32, i32),
    mode: (i32, i32),
    scale: i32,
    /// From xdg-output: the area in layout (input) coordinates, when offered.
    logical: Option<Rect>,
}

impl Output {
    /// The output's area in layout coordinates, which pointer input and windows use.
    fn rect(&self) -> Rect {
        self.logical.unwrap_or_else(|| {
            let scale = self.scale.max(1);
            Rect {
                x: self.position.0,
                y: self.position.1,
                width: (self.mode.0 / scale).max(0) as u32,
                height: (self.mode.1 / scale).max(0) as u32,
            }
        })
    }
}

/// A toplevel window as foreign-toplevel reports it.
#[derive(Debug, Clone)]
struct Toplevel {
    handle: ZwlrForeignToplevelHandleV1,
    id: u32,
    title: String,
    app_id: String,
    activated: bool,
    outputs: Vec<wayland_client::backend::ObjectId>,
    closed: bool,
}

/// The capture in flight (one at a time, under the connection's lock).
#[derive(Debug, Default)]
struct Capture {
    /// format, width, height, stride of the shm buffer the compositor asks for.
    shm: Option<(WEnum<wl_shm::Format>, u32, u32, u32)>,
    described: bool,
    y_invert: bool,
    ready: bool,
    failed: bool,
}

/// Everything the event handlers update.
#[derive(Default)]
struct State {
    outputs: Vec<Output>,
    toplevels: Vec<Toplevel>,
    next_window: u32,
    capture: Capture,
    /// Kept to describe outputs plugged in after the connection was made.
    xdg_output_manager: Option<ZxdgOutputManagerV1>,
    /// This connection's own `wl_keyboard`, bound when the seat announces a keyboard (as every
    /// client does), and whether the compositor has sent it a keymap through it.
    seat_keyboard: Option<WlKeyboard>,
    seat_keymap_seen: bool,
}

impl State {
    /// Binds the output `name` of the registry and asks for its layout area (xdg-output).
    fn add_output(
        &mut self,
        registry: &WlRegistry,
        name: u32,
        version: u32,
        qh: &QueueHandle<Self>,
    ) {
        let output: WlOutput = registry.bind(name, version.min(4), qh, name);
        if let Some(manager) = &self.xdg_output_manager {
            manager.get_xdg_output(&output, qh, name);
        }
        self.outputs.push(Output {
            global: name,
            proxy: Some(output),
            scale: 1,
            ..Output::default()
        });
    }
}

/// The event queue and the state it updates: used under one lock.
struct Queue {
    queue: EventQueue<State>,
    state: State,
}

/// The devices made once per connection.
struct Devices {
    pointer: Option<ZwlrVirtualPointerV1>,
    keyboard: Option<ZwpVirtualKeyboardV1>,
    /// The keymap the keyboard holds now.
    layout: Layout,
    /// Whether the seat was seen to offer the virtual keyboard to clients (checked once).
    keyboard_announced: bool,
}

/// One connection to the compositor and what was learnt from it.
pub struct WlConn {
    conn: Connection,
    qh: QueueHandle<State>,
    queue: Mutex<Queue>,
    devices: Mutex<Devices>,
    seat: WlSeat,
    shm: WlShm,
    screencopy: Option<ZwlrScreencopyManagerV1>,
    protocols: Protocols,
    sway: Option<sway::SwayIpc>,
    started: Instant,
}

impl WlConn {
    /// Connects to `WAYLAND_DISPLAY`, binds the protocols the compositor offers, and makes the
    /// virtual pointer and keyboard.
    pub fn connect() -> Result<WlConn, Availability> {
        let unavailable = |reason: String| Availability::Unavailable {
            reason,
            fix: "start the daemon inside the Wayland session, with WAYLAND_DISPLAY (and \
                  XDG_RUNTIME_DIR) of the compositor's socket set"
                .into(),
        };
        let conn = Connection::connect_to_env().map_err(|err| {
            unavailable(format!(
                "this is a Wayland session (WAYLAND_DISPLAY={}), but its compositor cannot be \
                 reached: {err}",
                std::env::var("WAYLAND_DISPLAY").unwrap_or_default()
            ))
        })?;
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
        let outputs: Vec<u32> = globals.contents().with_list(|list| {
            list.iter()
                .filter(|g| g.interface == "wl_output")
                .map(|g| g.name)
                .collect()
        });
        state.xdg_output_manager = globals
            .bind::<ZxdgOutputManagerV1, _, _>(&qh, 1..=3, ())
            .ok();
        protocols.xdg_output = state.xdg_output_manager.is_some();
        for name in outputs {
            let version = globals.contents().with_list(|list| {
                list.iter()
                    .find(|g| g.name == name)
                    .map_or(1, |g| g.version)
            });
            state.add_output(globals.registry(), name, version, &qh);
        }
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
            sway: sway::socket().map(sway::SwayIpc::new),
            started: Instant::now(),
        };
        Ok(conn)
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_devices(&self) -> MutexGuard<'_, Devices> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what is queued and handles every event the compositor has sent by now.
    fn sync(&self, queue: &mut Queue) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .roundtrip(state)
            .map(|_| ())
            .map_err(|err| failed(format!("roundtrip: {err}")))
    }

    /// Handles events that arrived without a roundtrip: reads what the socket holds now.
    fn dispatch_waiting(&self, queue: &mut Queue) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .flush()
            .map_err(|err| failed(format!("flush: {err}")))?;
        if let Some(guard) = queue.prepare_read() {
            match guard.read() {
                Ok(_) => {}
                Err(wayland_client::backend::WaylandError::Io(err))
                    if err.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(failed(format!("read: {err}"))),
            }
        }
        queue
            .dispatch_pending(state)
            .map(|_| ())
            .map_err(|err| failed(format!("dispatch: {err}")))
    }

    /// Milliseconds for input events' timestamps.
    fn now(&self) -> u32 {
        self.started.elapsed().as_millis() as u32
    }

    pub fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        let mut queue = self.lock_queue();
        self.dispatch_waiting(&mut queue)?;
        // A monitor plugged in since has been bound but not yet described: wait for that.
        if queue.state.outputs.iter().any(|o| o.rect().width == 0) {
            self.sync(&mut queue)?;
        }
        Ok(monitors_of(&queue.state))
    }

    pub fn screen(&self) -> DisplayResult<Rect> {
        let monitors = self.monitors()?;
        let mut rects = monitors.iter().map(|m| m.rect);
        let first = rects
            .next()
            .ok_or_else(|| failed("the compositor has no outputs"))?;
        Ok(rects.fold(first, |a, b| {
            let x = a.x.min(b.x);
            let y = a.y.min(b.y);
            let right =
                (i64::from(a.x) + i64::from(a.width)).max(i64::from(b.x) + i64::from(b.width));
            let bottom =
                (i64::from(a.y) + i64::from(a.height)).max(i64::from(b.y) + i64::from(b.height));
            Rect {
                x,
                y,
                width: (right - i64::from(x)) as u32,
                height: (bottom - i64::from(y)) as u32,
            }
        }))
    }

    /// Captures `area` (layout coordinates) from every output it covers. On one output, or on
    /// outputs of one integer scale, the image has that output's own resolution (a scale-2
    /// output gives two pixels per unit); an area across outputs of different scales is
    /// composed at one pixel per unit, each part sampled down from its output's pixels, so that
    /// a pixel of the image still maps back to exactly one layout point.
    pub fn grab(&self, area: Rect) -> DisplayResult<Frame> {
        let Some(manager) = &self.screencopy else {
            return Err(failed(
                "the compositor offers no screencopy: screenshots are not possible here",
            ));
        };
        let mut queue = self.lock_queue();
        self.dispatch_waiting(&mut queue)?;
        let parts: Vec<(WlOutput, Rect, Rect, i32)> = queue
            .state
            .outputs
            .iter()
            .filter_map(|o| {
                let rect = o.rect();
                let part = rect.intersect(&area)?;
                Some((o.proxy.clone()?, rect, part, o.scale.max(1)))
            })
            .collect();
        if parts.is_empty() {
            return Err(failed("the area lies on no output"));
        }
        let scale = parts[0].3;
        let per_unit = if parts.iter().all(|p| p.3 == scale) {
            scale as u32
        } else {
            1
        };
        let mut frame = Frame {
            width: area.width * per_unit,
            height: area.height * per_unit,
            rgb: vec![0; (area.width * per_unit * area.height * per_unit * 3) as usize],
        };
        for (output, rect, part, _) in parts {
            let piece = self.capture_region(
                &mut queue,
                manager,
                &output,
                Rect {
                    x: part.x - rect.x,
                    y: part.y - rect.y,
                    ..part
                },
            )?;
            paste(&mut frame, &piece, &part, &area, per_unit);
        }
        Ok(frame)
    }

    /// One screencopy of `region` (output-local coordinates) of `output`, as RGB.
    fn capture_region(
        &self,
        queue: &mut Queue,
        manager: &ZwlrScreencopyManagerV1,
        output: &WlOutput,
        region: Rect,
    ) -> DisplayResult<Frame> {
        queue.state.capture = Capture::default();
        let frame = manager.capture_output_region(
            0,
            output,
            region.x,
            region.y,
            region.width as i32,
            region.height as i32,
            &self.qh,
            (),
        );
        let result = self.copy_frame(queue, &frame);
        frame.destroy();
        result
    }

    fn copy_frame(&self, queue: &mut Queue, frame: &ZwlrScreencopyFrameV1) -> DisplayResult<Frame> {
        let deadline = Instant::now() + REPLY_BOUND;
        // Version 3 ends the buffer descriptions with buffer_done; older ones send one
        // `buffer` event only.
        let described_by_buffer = frame.version() < 3;
        while !(queue.state.capture.described
            || (described_by_buffer && queue.state.capture.shm.is_some()))
        {
            self.wait_event(queue, deadline, "the screencopy buffer description")?;
            if queue.state.capture.failed {
                return Err(failed("the compositor refused the capture"));
            }
        }
        let (format, width, height, stride) =
            queue.state.capture.shm.ok_or_else(|| {
                failed("the compositor offers no shared-memory buffer to copy into")
            })?;
        let format = match format {
            WEnum::Value(format) => format,
            WEnum::Unknown(code) => return Err(failed(format!("unknown pixel format {code:#x}"))),
        };
        let size = stride as usize * height as usize;
        let file = shared_file("computer-screencopy", size)?;
        let pool = self
            .shm
            .create_pool(file.as_fd(), size as i32, &self.qh, ());
        let buffer = pool.create_buffer(
            0,
            width as i32,
            height as i32,
            stride as i32,
            format,
            &self.qh,
            (),
        );
        frame.copy(&buffer);
        let outcome = loop {
            if queue.state.capture.ready {
                break Ok(());
            }
            if queue.state.capture.failed {
                break Err(failed("the compositor failed the capture"));
            }
            if let Err(err) = self.wait_event(queue, deadline, "the captured frame") {
                break Err(err);
            }
        };
        buffer.destroy();
        pool.destroy();
        outcome?;
        let mut raw = vec![0u8; size];
        file.read_exact_at(&mut raw, 0)
            .map_err(|err| failed(format!("reading the captured frame: {err}")))?;
        to_rgb(
            &raw,
            format,
            width,
            height,
            stride,
            queue.state.capture.y_invert,
        )
    }

    /// Blocks until at least one event is handled or the deadline passes.
    fn wait_event(&self, queue: &mut Queue, deadline: Instant, what: &str) -> DisplayResult<()> {
        let Queue { queue, state } = queue;
        queue
            .flush()
            .map_err(|err| failed(format!("flush: {err}")))?;
        if queue
            .dispatch_pending(state)
            .map_err(|err| failed(format!("dispatch: {err}")))?
            > 0
        {
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
            match guard.read() {
                Ok(_) => {}
                Err(wayland_client::backend::WaylandError::Io(err))
                    if err.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(failed(format!("read: {err}"))),
            }
        }
        queue
            .dispatch_pending(state)
            .map(|_| ())
            .map_err(|err| failed(format!("dispatch: {err}")))
    }

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

    fn pointer<'d>(&self, devices: &'d Devices) -> DisplayResult<&'d ZwlrVirtualPointerV1> {
        devices.pointer.as_ref().ok_or_else(|| {
            failed("the compositor offers no virtual pointer: pointer input is not possible here")
        })
    }

    /// Moves the pointer to a layout point: absolute motion over the whole layout's extent.
    fn motion(&self, pointer: &ZwlrVirtualPointerV1, x: i32, y: i32) -> DisplayResult<()> {
        let screen = self.screen()?;
        pointer.motion_absolute(
            self.now(),
            (x - screen.x).max(0) as u32,
            (y - screen.y).max(0) as u32,
            screen.width,
            screen.height,
        );
        pointer.frame();
        Ok(())
    }

    fn button(&self, pointer: &ZwlrVirtualPointerV1, button: Button, pressed: bool) {
        let code = match button {
            Button::Left => BTN_LEFT,
            Button::Right => BTN_RIGHT,
            Button::Middle => BTN_MIDDLE,
        };
        let state = if pressed {
            wl_pointer::ButtonState::Pressed
        } else {
            wl_pointer::ButtonState::Released
        };
        pointer.button(self.now(), code, state);
        pointer.frame();
    }

    /// Sends what input queued and waits until the compositor has handled it.
    fn flush_input(&self) -> DisplayResult<()> {
        let mut queue = self.lock_queue();
        self.sync(&mut queue)
    }

    pub fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        let devices = self.lock_devices();
        self.motion(self.pointer(&devices)?, x, y)?;
        self.flush_input()
    }

    pub fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        let (x, y) = at.ok_or_else(no_cursor)?;
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, x, y)?;
        for _ in 0..count {
            self.button(pointer, button, true);
            self.button(pointer, button, false);
        }
        self.flush_input()
    }

    pub fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, from.0, from.1)?;
        self.button(pointer, button, true);
        self.flush_input()?;
        const STEPS: i32 = 10;
        for step in 1..=STEPS {
            let x = from.0 + (to.0 - from.0) * step / STEPS;
            let y = from.1 + (to.1 - from.1) * step / STEPS;
            self.motion(pointer, x, y)?;
            self.flush_input()?;
        }
        self.button(pointer, button, false);
        self.flush_input()
    }

    pub fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        let (x, y) = at.ok_or_else(no_cursor)?;
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, x, y)?;
        pointer.axis_source(wl_pointer::AxisSource::Wheel);
        for (axis, notches) in [
            (wl_pointer::Axis::VerticalScroll, dy),
            (wl_pointer::Axis::HorizontalScroll, dx),
        ] {
            if notches != 0 {
                pointer.axis_discrete(self.now(), axis, f64::from(notches) * NOTCH, notches);
            }
        }
        pointer.frame();
        self.flush_input()
    }

    fn keyboard<'d>(&self, devices: &'d Devices) -> DisplayResult<&'d ZwpVirtualKeyboardV1> {
        devices.keyboard.as_ref().ok_or_else(|| {
            failed("the compositor offers no virtual keyboard: keyboard input is not possible here")
        })
    }

    /// Waits (bounded, once per keyboard) until the seat offers the virtual keyboard to
    /// clients: a client binds `wl_keyboard` only when the seat announces the capability, so keys
    /// sent before that reach nobody. This connection binds one too when the announcement comes
    /// (see the seat's handler), and the keymap arriving on it proves the compositor has
    /// announced the keyboard and handed out its keymap; the focused client got the same
    /// announcement in the same dispatch. A further roundtrip lets it bind before the keys.
    fn keyboard_announced(&self, devices: &mut Devices) -> DisplayResult<()> {
        if devices.keyboard_announced {
            return Ok(());
        }
        let deadline = Instant::now() + REPLY_BOUND;
        let mut queue = self.lock_queue();
        while !queue.state.seat_keymap_seen {
            self.wait_event(
                &mut queue,
                deadline,
                "the seat's keyboard (the virtual keyboard was not announced to clients)",
            )?;
        }
        self.sync(&mut queue)?;
        devices.keyboard_announced = true;
        Ok(())
    }

    /// Puts `keysyms` on the keymap unless it holds them already.
    fn ensure_layout(&self, devices: &mut Devices, keysyms: Vec<u32>) -> DisplayResult<()> {
        if devices.layout.holds(&keysyms) {
            return Ok(());
        }
        let layout = Layout::new(keysyms);
        upload(self.keyboard(devices)?, &layout)?;
        devices.layout = layout;
        Ok(())
    }

    fn key(&self, keyboard: &ZwpVirtualKeyboardV1, code: u32, pressed: bool) {
        let state = if pressed {
            wl_keyboard::KeyState::Pressed
        } else {
            wl_keyboard::KeyState::Released
        };
        keyboard.key(self.now(), code, state);
    }

    pub fn type_text(&self, text: &str) -> DisplayResult<()> {
        let keysyms: Vec<u32> = text.chars().map(char_keysym).collect();
        let mut devices = self.lock_devices();
        self.keyboard(&devices)?;
        self.keyboard_announced(&mut devices)?;
        for (run, distinct) in keymap::rounds(&keysyms) {
            self.ensure_layout(&mut devices, distinct)?;
            let keyboard = self.keyboard(&devices)?;
            for &sym in run {
                let code = devices.layout.key_of(sym).ok_or_else(|| {
                    failed(format!("keysym {sym:#x} could not be put on the keymap"))
                })?;
                self.key(keyboard, code, true);
                self.key(keyboard, code, false);
            }
            self.flush_input()?;
        }
        Ok(())
    }

    pub fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        let mut devices = self.lock_devices();
        self.keyboard(&devices)?;
        self.keyboard_announced(&mut devices)?;
        if let Some(modifier) = combo.modifiers.iter().find(|m| !keymap::is_modifier(**m)) {
            return Err(failed(format!(
                "modifier keysym {modifier:#x} has no key on the virtual keyboard"
            )));
        }
        if !keymap::is_modifier(combo.key) {
            let mut wanted = devices.layout.keysyms.clone();
            if !wanted.contains(&combo.key) {
                if wanted.len() == keymap::KEY_SLOTS {
                    wanted.clear();
                }
                wanted.push(combo.key);
            }
            self.ensure_layout(&mut devices, wanted)?;
        }
        let keyboard = self.keyboard(&devices)?;
        let key_of = |sym: u32| {
            devices
                .layout
                .key_of(sym)
                .ok_or_else(|| failed(format!("keysym {sym:#x} has no key")))
        };
        let mut held = Vec::new();
        for &modifier in &combo.modifiers {
            self.key(keyboard, key_of(modifier)?, true);
            held.push(modifier);
            keyboard.modifiers(keymap::modifier_mask(&held), 0, 0, 0);
        }
        let code = key_of(combo.key)?;
        self.key(keyboard, code, true);
        self.key(keyboard, code, false);
        while let Some(modifier) = held.pop() {
            self.key(keyboard, key_of(modifier)?, false);
            keyboard.modifiers(keymap::modifier_mask(&held), 0, 0, 0);
        }
        self.flush_input()
    }
}

/// The error for pointer input without a point: Wayland gives no client the pointer position.
fn no_cursor() -> DisplayError {
    failed("the pointer position cannot be read on Wayland: give x and y")
}

/// The session's desktop, as the environment names it, for messages.
fn desktop_named() -> String {
    std::env::var("XDG_CURRENT_DESKTOP")
        .ok()
        .filter(|d| !d.is_empty())
        .map(|d| format!(" (XDG_CURRENT_DESKTOP={d})"))
        .unwrap_or_default()
}

/// sway's view for a toplevel: the one view with the same app id and title, when exactly one
/// toplevel and one view share them (else unknown, rather than another window's facts).
fn matching_view<'v>(
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

fn monitors_of(state: &State) -> Vec<MonitorInfo> {
    state
        .outputs
        .iter()
        .enumerate()
        .map(|(index, o)| MonitorInfo {
            index,
            name: o.name.clone(),
            rect: o.rect(),
            // Wayland has no primary output; the first one stands for it.
            primary: index == 0,
        })
        .collect()
}

/// A file in memory of `size` bytes, to share with the compositor.
fn shared_file(name: &str, size: usize) -> DisplayResult<std::fs::File> {
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

/// Uploads `layout` as the virtual keyboard's keymap.
fn upload(keyboard: &ZwpVirtualKeyboardV1, layout: &Layout) -> DisplayResult<()> {
    let text = layout.text();
    let mut file = shared_file("computer-keymap", 0)?;
    file.write_all(text.as_bytes())
        .map_err(|err| failed(format!("writing the keymap: {err}")))?;
    keyboard.keymap(
        wl_keyboard::KeymapFormat::XkbV1,
        file.as_fd(),
        text.len() as u32,
    );
    Ok(())
}

/// Copies `piece` (the capture of `part`, at whatever resolution its output has) into `frame`
/// (the capture of `area` at `per_unit` pixels per layout unit): row by row where the two
/// resolutions agree, else each pixel from the piece's pixel that covers its place.
fn paste(frame: &mut Frame, piece: &Frame, part: &Rect, area: &Rect, per_unit: u32) {
    let left = (part.x - area.x) as usize * per_unit as usize;
    let top = (part.y - area.y) as usize * per_unit as usize;
    let width = (part.width * per_unit) as usize;
    let height = (part.height * per_unit) as usize;
    let width = width.min(frame.width as usize - left);
    let height = height.min(frame.height as usize - top);
    if piece.width as usize == width && piece.height as usize >= height {
        for row in 0..height {
            let from = row * piece.width as usize * 3;
            let to = ((top + row) * frame.width as usize + left) * 3;
            frame.rgb[to..to + width * 3].copy_from_slice(&piece.rgb[from..from + width * 3]);
        }
        return;
    }
    if piece.width == 0 || piece.height == 0 || width == 0 || height == 0 {
        return;
    }
    for row in 0..height {
        let source_row = (row * piece.height as usize / height).min(piece.height as usize - 1);
        for column in 0..width {
            let source_column =
                (column * piece.width as usize / width).min(piece.width as usize - 1);
            let from = (source_row * piece.width as usize + source_column) * 3;
            let to = ((top + row) * frame.width as usize + left + column) * 3;
            frame.rgb[to..to + 3].copy_from_slice(&piece.rgb[from..from + 3]);
        }
    }
}

/// A capture as RGB.
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

/// Converts a shm buffer in one of the 32-bit formats compositors offer to RGB.
fn to_rgb(
    raw: &[u8],
    format: wl_shm::Format,
    width: u32,
    height: u32,
    stride: u32,
    y_invert: bool,
) -> DisplayResult<Frame> {
    // Byte order in memory (little-endian formats): where red, green and blue are.
    let (r, g, b) = match format {
        wl_shm::Format::Xrgb8888 | wl_shm::Format::Argb8888 => (2, 1, 0),
        wl_shm::Format::Xbgr8888 | wl_shm::Format::Abgr8888 => (0, 1, 2),
        other => {
            return Err(failed(format!(
                "the compositor offers pixel format {other:?}, which this build does not read"
            )));
        }
    };
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for row in 0..height as usize {
        let source = if y_invert {
            height as usize - 1 - row
        } else {
            row
        };
        let line = &raw[source * stride as usize..][..width as usize * 4];
        for px in line.chunks_exact(4) {
            rgb.extend_from_slice(&[px[r], px[g], px[b]]);
        }
    }
    Ok(Frame { width, height, rgb })
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

impl Dispatch<WlOutput, u32> for State {
    fn event(
        state: &mut Self,
        _: &WlOutput,
        event: wl_output::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        match event {
            wl_output::Event::Geometry { x, y, .. } => output.position = (x, y),
            wl_output::Event::Mode {
                flags,
                width,
                height,
                ..
            } => {
                if matches!(flags, WEnum::Value(f) if f.contains(wl_output::Mode::Current)) {
                    output.mode = (width, height);
                }
            }
            wl_output::Event::Scale { factor } => output.scale = factor,
            wl_output::Event::Name { name } if output.name.is_empty() => output.name = name,
            _ => {}
        }
    }
}

impl Dispatch<ZxdgOutputV1, u32> for State {
    fn event(
        state: &mut Self,
        _: &ZxdgOutputV1,
        event: zxdg_output_v1::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        let logical = output.logical.get_or_insert(Rect {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        });
        match event {
            zxdg_output_v1::Event::LogicalPosition { x, y } => {
                logical.x = x;
                logical.y = y;
            }
            zxdg_output_v1::Event::LogicalSize { width, height } => {
                logical.width = width.max(0) as u32;
                logical.height = height.max(0) as u32;
            }
            zxdg_output_v1::Event::Name { name } => output.name = name,
            _ => {}
        }
    }
}

impl Dispatch<ZwlrScreencopyFrameV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrScreencopyFrameV1,
        event: zwlr_screencopy_frame_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let capture = &mut state.capture;
        match event {
            zwlr_screencopy_frame_v1::Event::Buffer {
                format,
                width,
                height,
                stride,
            } => capture.shm = Some((format, width, height, stride)),
            zwlr_screencopy_frame_v1::Event::BufferDone => capture.described = true,
            zwlr_screencopy_frame_v1::Event::Flags { flags } => {
                capture.y_invert = matches!(flags, WEnum::Value(f)
                    if f.contains(zwlr_screencopy_frame_v1::Flags::YInvert));
            }
            zwlr_screencopy_frame_v1::Event::Ready { .. } => capture.ready = true,
            zwlr_screencopy_frame_v1::Event::Failed => capture.failed = true,
            _ => {}
        }
    }
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

delegate_noop!(State: ignore WlShm);
delegate_noop!(State: WlShmPool);
delegate_noop!(State: ignore WlBuffer);
delegate_noop!(State: ZxdgOutputManagerV1);
delegate_noop!(State: ZwlrScreencopyManagerV1);
delegate_noop!(State: ZwlrVirtualPointerManagerV1);
delegate_noop!(State: ZwlrVirtualPointerV1);
delegate_noop!(State: ZwpVirtualKeyboardManagerV1);
delegate_noop!(State: ZwpVirtualKeyboardV1);

/// The process-wide connection: made on first use, remade after it breaks (with new virtual
/// devices), and not retried more than once a second while the compositor is unreachable.
pub struct Backend {
    state: Mutex<BackendState>,
}

struct BackendState {
    conn: Option<Arc<WlConn>>,
    last_error: Option<(Instant, Availability)>,
    /// The protocols of the last connection, for the commands offered while none is open.
    protocols: Option<Protocols>,
}

const RETRY_AFTER: Duration = Duration::from_secs(1);

impl Backend {
    pub fn new() -> Backend {
        Backend {
            state: Mutex::new(BackendState {
                conn: None,
                last_error: None,
                protocols: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BackendState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn conn(&self) -> Result<Arc<WlConn>, Availability> {
        let mut state = self.lock();
        if let Some(conn) = &state.conn {
            return Ok(conn.clone());
        }
        if let Some((at, why)) = &state.last_error
            && at.elapsed() < RETRY_AFTER
        {
            return Err(why.clone());
        }
        match WlConn::connect() {
            Ok(conn) => {
                let conn = Arc::new(conn);
                state.protocols = Some(conn.protocols.clone());
                state.conn = Some(conn.clone());
                state.last_error = None;
                drain_in_background(Arc::downgrade(&conn));
                Ok(conn)
            }
            Err(why) => {
                state.last_error = Some((Instant::now(), why.clone()));
                Err(why)
            }
        }
    }

    pub fn forget(&self, broken: &Arc<WlConn>) {
        let mut state = self.lock();
        if state
            .conn
            .as_ref()
            .is_some_and(|conn| Arc::ptr_eq(conn, broken))
        {
            state.conn = None;
        }
    }

    /// The protocols of the current (or last) connection.
    pub fn protocols(&self) -> Option<Protocols> {
        let _ = self.conn();
        self.lock().protocols.clone()
    }
}

/// Reads the compositor's events between calls (title changes, new windows), so they never
/// pile up in the socket until the compositor gives up on a client that does not read.
fn drain_in_background(conn: Weak<WlConn>) {
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

impl desktop::Desktop for WlConn {
    type Frame = Frame;

    fn screen(&self) -> DisplayResult<Rect> {
        WlConn::screen(self)
    }
    fn grab(&self, area: Rect) -> DisplayResult<Frame> {
        WlConn::grab(self, area)
    }
    fn same_frame(a: &Frame, b: &Frame) -> bool {
        a.width == b.width && a.height == b.height && a.rgb == b.rgb
    }
    fn to_rgb(&self, frame: &Frame) -> Rgb {
        Rgb {
            width: frame.width,
            height: frame.height,
            pixels: frame.rgb.clone(),
        }
    }
    fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        WlConn::monitors(self)
    }
    fn window_ids(&self) -> DisplayResult<Vec<u32>> {
        WlConn::window_ids(self)
    }
    fn windows(&self) -> DisplayResult<Vec<WindowInfo>> {
        WlConn::windows(self)
    }
    fn keyboard_target(&self) -> DisplayResult<Option<u32>> {
        WlConn::keyboard_target(self)
    }
    fn focus_must_be_known(&self) -> bool {
        true
    }
    fn reads_cursor(&self) -> bool {
        false
    }
    fn knows_owner(&self, window: &WindowInfo) -> bool {
        window.pid.is_some() && window.rect.width > 0 && window.rect.height > 0
    }
    fn cursor(&self) -> DisplayResult<(i32, i32)> {
        Err(no_cursor())
    }
    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        WlConn::move_to(self, x, y)
    }
    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        WlConn::click(self, at, button, count)
    }
    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        WlConn::drag(self, from, to, button)
    }
    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        WlConn::scroll(self, at, dx, dy)
    }
    fn type_text(&self, text: &str) -> DisplayResult<()> {
        WlConn::type_text(self, text)
    }
    fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        WlConn::press_combo(self, combo)
    }
    fn focus(&self, window: u32) -> DisplayResult<bool> {
        WlConn::focus(self, window)
    }
}

impl desktop::Backend for Backend {
    type Conn = WlConn;

    fn conn(&self) -> Result<Arc<WlConn>, Availability> {
        Backend::conn(self)
    }
    fn forget(&self, broken: &Arc<WlConn>) {
        Backend::forget(self, broken)
    }
    fn has(&self, capability: Capability) -> bool {
        self.protocols().is_none_or(|p| p.has(capability))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_formats_convert_to_rgb_with_rows_in_order() {
        // Two pixels per row, two rows; XRGB8888 is B,G,R,X in memory.
        let raw = [1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0, 10, 11, 12, 0];
        let frame = to_rgb(&raw, wl_shm::Format::Xrgb8888, 2, 2, 8, false).unwrap();
        assert_eq!(frame.rgb, [3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10]);
        let flipped = to_rgb(&raw, wl_shm::Format::Xbgr8888, 2, 2, 8, true).unwrap();
        assert_eq!(flipped.rgb, [7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6]);
        assert!(to_rgb(&raw, wl_shm::Format::Rgb565, 2, 2, 8, false).is_err());
    }

    #[test]
    fn a_scale_two_piece_is_sampled_to_one_pixel_per_unit_at_its_place() {
        // The area: 4×2 units from (10, 0); the piece covers units 12..14 × 0..2 at scale 2
        // (4×4 pixels, each pixel's red channel its index).
        let area = Rect {
            x: 10,
            y: 0,
            width: 4,
            height: 2,
        };
        let part = Rect {
            x: 12,
            y: 0,
            width: 2,
            height: 2,
        };
        let piece = Frame {
            width: 4,
            height: 4,
            rgb: (0..16u8).flat_map(|i| [i, 0, 0]).collect(),
        };
        let mut frame = Frame {
            width: 4,
            height: 2,
            rgb: vec![255; 4 * 2 * 3],
        };
        paste(&mut frame, &piece, &part, &area, 1);
        let red: Vec<u8> = frame.rgb.chunks(3).map(|px| px[0]).collect();
        // Left half untouched; unit (12, 0) from pixel (0, 0), (13, 0) from (2, 0), (12, 1)
        // from (0, 2), (13, 1) from (2, 2).
        assert_eq!(red, [255, 255, 0, 2, 255, 255, 8, 10]);
        // At the piece's own resolution the rows are copied as they are.
        let mut sharp = Frame {
            width: 8,
            height: 4,
            rgb: vec![255; 8 * 4 * 3],
        };
        paste(&mut sharp, &piece, &part, &area, 2);
        assert_eq!(sharp.rgb[(4 * 3)..(8 * 3)], piece.rgb[..12]);
        assert_eq!(sharp.rgb[(3 * 8 + 4) * 3], 12);
    }

    #[test]
    fn capabilities_follow_the_offered_protocols() {
        let all = Protocols {
            screencopy: true,
            foreign_toplevel: true,
            virtual_pointer: true,
            virtual_keyboard: true,
            ..Protocols::default()
        };
        for capability in [
            Capability::Capture,
            Capability::Windows,
            Capability::RaiseWindow,
            Capability::Pointer,
            Capability::Keyboard,
        ] {
            assert!(all.has(capability), "{capability:?}");
        }
        assert!(
            !all.has(Capability::ReadPointer),
            "no protocol reads the pointer"
        );
        let no_toplevels = Protocols {
            foreign_toplevel: false,
            ..all.clone()
        };
        assert!(!no_toplevels.has(Capability::Windows));
        assert!(!no_toplevels.has(Capability::RaiseWindow));
        assert!(no_toplevels.has(Capability::Pointer) && no_toplevels.has(Capability::Keyboard));
        assert!(!Protocols::default().is_wlroots());
    }
}
