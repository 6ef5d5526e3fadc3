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
//!
//! # Layout
//! - `connection`: the connection made once, its event queue, the registry's and seat's events.
//! - `outputs`: the monitors and the screen they make.
//! - `capture`: screenshots through `wlr-screencopy`.
//! - `windows`: windows and focus through `wlr-foreign-toplevel-management`.
//! - `input`: the virtual pointer and keyboard.
//! - `keymap`: the virtual keyboard's keymaps, made per call.
//! - `sway`: window rectangles and pids from sway's IPC.

mod capture;
mod connection;
mod input;
mod keymap;
mod outputs;
pub(crate) mod sway;
mod windows;

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
use super::kept_conn::KeptConn;
use super::rgb_frame::RgbFrame;
use crate::Availability;
use crate::gui::desktop::{
    self, Button, Capability, DisplayError, DisplayResult, MonitorInfo, Rect, Rgb, WindowInfo,
};
use crate::gui::keys::{Combo, char_keysym};
use connection::{drain_in_background, shared_file};
use input::{no_cursor, upload};
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

delegate_noop!(State: ignore WlShm);
delegate_noop!(State: WlShmPool);
delegate_noop!(State: ignore WlBuffer);
delegate_noop!(State: ZxdgOutputManagerV1);
delegate_noop!(State: ZwlrScreencopyManagerV1);
delegate_noop!(State: ZwlrVirtualPointerManagerV1);
delegate_noop!(State: ZwlrVirtualPointerV1);
delegate_noop!(State: ZwpVirtualKeyboardManagerV1);
delegate_noop!(State: ZwpVirtualKeyboardV1);

/// The process-wide connection to the compositor (see [`KeptConn`]), remade with new virtual
/// devices after it breaks.
pub struct Backend {
    conn: KeptConn<WlConn>,
    /// The protocols of the last connection, for the commands offered while none is open.
    protocols: Mutex<Option<Protocols>>,
    /// The compositor of an agent's own desktop; None: the person's, as the environment names.
    place: Option<Place>,
}

/// A compositor named by its sockets' absolute paths rather than by the environment.
#[derive(Debug, Clone)]
struct Place {
    socket: std::path::PathBuf,
    swaysock: Option<std::path::PathBuf>,
}

impl Backend {
    pub fn new() -> Backend {
        Backend {
            conn: KeptConn::new(),
            protocols: Mutex::new(None),
            place: None,
        }
    }

    /// The backend on an agent's own compositor: its Wayland socket and (sway) IPC socket by
    /// absolute path, whatever `WAYLAND_DISPLAY` and `SWAYSOCK` say.
    pub fn on_socket(socket: &std::path::Path, swaysock: Option<&std::path::Path>) -> Backend {
        Backend {
            conn: KeptConn::new(),
            protocols: Mutex::new(None),
            place: Some(Place {
                socket: socket.to_path_buf(),
                swaysock: swaysock.map(std::path::Path::to_path_buf),
            }),
        }
    }

    pub fn conn(&self) -> Result<Arc<WlConn>, Availability> {
        let place = self.place.clone();
        let connect = move || match place {
            Some(place) => WlConn::connect_to(&place.socket, place.swaysock),
            None => WlConn::connect(),
        };
        self.conn.get(connect, |conn| {
            *self.protocols.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(conn.protocols.clone());
            drain_in_background(Arc::downgrade(conn));
        })
    }

    pub fn forget(&self, broken: &Arc<WlConn>) {
        self.conn.forget(broken)
    }

    /// The protocols of the current (or last) connection.
    pub fn protocols(&self) -> Option<Protocols> {
        let _ = self.conn();
        self.protocols
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl desktop::Desktop for WlConn {
    type Frame = RgbFrame;

    fn screen(&self) -> DisplayResult<Rect> {
        WlConn::screen(self)
    }
    fn grab(&self, area: Rect) -> DisplayResult<RgbFrame> {
        WlConn::grab(self, area)
    }
    fn same_frame(a: &RgbFrame, b: &RgbFrame) -> bool {
        a == b
    }
    fn to_rgb(&self, frame: &RgbFrame) -> Rgb {
        frame.to_rgb()
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
