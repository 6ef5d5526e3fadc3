//! The X11 backend of the gui surface: one cached x11rb connection; screen grabs with GetImage;
//! windows from EWMH properties; monitors from RandR; pointer and keyboard input through XTEST,
//! with characters missing from the keymap typed through spare keycodes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::res::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    self, AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, ImageFormat, Window,
};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

mod agent;
mod dialogs;
mod focus;
mod listing;
mod person_devices;
mod place;

pub use agent::configure as configure_own_pointer;
pub use place::{Backend, no_display};

use crate::Availability;
use crate::gui::desktop::{self, Button, DisplayResult, MonitorInfo, Rect, Rgb, WindowInfo};
use crate::gui::keys::{Combo, char_keysym};
use listing::{AskedWindow, active_of, monitors_of, window_of};

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        _NET_CLIENT_LIST,
        _NET_CLIENT_LIST_STACKING,
        _NET_ACTIVE_WINDOW,
        _NET_WM_NAME,
        _NET_WM_PID,
        _NET_WM_PING,
        _NET_SUPPORTED,
        _NET_REQUEST_FRAME_EXTENTS,
        _NET_FRAME_EXTENTS,
        WM_PROTOCOLS,
        UTF8_STRING,
    }
}

/// A failure talking to the X server, in words for the caller.
pub use crate::gui::desktop::DisplayError as XError;

macro_rules! from_x_error {
    ($($t:ty),*) => {$(
        impl From<$t> for XError {
            fn from(err: $t) -> Self {
                XError(format!("x server request failed: {err}"))
            }
        }
    )*};
}
from_x_error!(
    x11rb::errors::ConnectionError,
    x11rb::errors::ReplyError,
    x11rb::errors::ReplyOrIdError
);

pub type XResult<T> = Result<T, XError>;

/// How the root window's pixels are laid out in a ZPixmap image.
#[derive(Debug, Clone, Copy)]
struct PixelLayout {
    msb_first: bool,
    red_mask: u32,
    green_mask: u32,
    blue_mask: u32,
}

/// An open connection to the display and what was learnt about it once.
pub struct XConn {
    conn: RustConnection,
    /// A second connection that only lists and watches windows and monitors: its events are
    /// read by nothing else, so none that a wait on `conn` expects is taken from it.
    watcher: RustConnection,
    has_randr: bool,
    root: Window,
    atoms: Atoms,
    layout: PixelLayout,
    min_keycode: u8,
    max_keycode: u8,
    /// Input sequences (a click, a typed text) must not interleave with one another.
    input: Mutex<Keyboard>,
    /// The windows and monitors as last listed, kept until an event says they may have changed.
    listed: Mutex<Option<Arc<Listing>>>,
    /// Set by every event the connection receives; a listing made before it is not trusted.
    changed: AtomicBool,
    /// The agent's own pointer and keyboard, once input asked for them.
    agent: Mutex<agent::AgentState>,
    /// Whether this is an agent's own desktop (a display named to [`Backend::on_display`]):
    /// no person's hands are on it to yield to, and no agent pointer pair is made there.
    agent_desktop: bool,
}

/// What one listing read from the display: the display says when any of it changes (the events
/// selected in [`XConn::watch`]), so it is read again only then.
struct Listing {
    /// `_NET_CLIENT_LIST`, in mapping order.
    ids: Vec<u32>,
    /// `_NET_CLIENT_LIST_STACKING`, bottom to top; None when the window manager has none.
    stacking: Option<Vec<u32>>,
    windows: Vec<WindowInfo>,
    monitors: Vec<MonitorInfo>,
    screen: Rect,
    /// Which listing this is, in the process (never reused, unlike the listing's address once
    /// it is freed): what the agent's cached focus was read for.
    generation: u64,
}

/// The keyboard state the typing code keeps between calls: which spare keycodes (keycodes with
/// no symbols when first seen) now hold which keysym.
#[derive(Default)]
struct Keyboard {
    spare: Option<Vec<u8>>,
    assigned: HashMap<u32, u8>,
    /// Next spare slot to reuse, round robin, once all are assigned.
    next: usize,
}

/// A raw grab, comparable cheaply (for the settle wait) and convertible to RGB.
pub struct RawImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

/// A mouse button as X numbers it.
fn button_number(button: Button) -> u8 {
    match button {
        Button::Left => 1,
        Button::Middle => 2,
        Button::Right => 3,
    }
}

const SHIFT_L: u32 = 0xffe1;

impl XConn {
    /// Connects to `display` (an agent's own desktop), or to `$DISPLAY` when None, and checks
    /// for XTEST.
    pub fn connect_to(named: Option<&str>) -> Result<XConn, Availability> {
        if named.is_none()
            && let Some(why) = no_display()
        {
            return Err(why);
        }
        let display = match named {
            Some(display) => display.to_string(),
            None => std::env::var("DISPLAY").unwrap_or_default(),
        };
        let unavailable = |reason: String| Availability::Unavailable {
            reason,
            fix: format!(
                "check that the X server for DISPLAY={display} is running and that this user may \
                 connect to it (XAUTHORITY, `xhost`); `xdpyinfo` should answer"
            ),
        };
        let (conn, screen) = RustConnection::connect(named)
            .map_err(|err| unavailable(format!("cannot connect to X server {display}: {err}")))?;
        let failed = |err: &dyn std::fmt::Display| {
            unavailable(format!("X server {display} failed a request: {err}"))
        };
        let xtest = conn
            .extension_information(x11rb::protocol::xtest::X11_EXTENSION_NAME)
            .map_err(|e| failed(&e))?;
        if xtest.is_none() {
            return Err(Availability::Unavailable {
                reason: format!("X server {display} lacks the XTEST extension needed for input"),
                fix: "enable XTEST in the X server (Xorg and Xvfb have it unless started with \
                      -extension XTEST)"
                    .into(),
            });
        }
        let atoms = Atoms::new(&conn)
            .map_err(|e| failed(&e))?
            .reply()
            .map_err(|e| failed(&e))?;
        let setup = conn.setup();
        let root_screen = &setup.roots[screen];
        let visual = root_screen
            .allowed_depths
            .iter()
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == root_screen.root_visual);
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == root_screen.root_depth)
            .map(|f| f.bits_per_pixel);
        let (Some(visual), Some(32)) = (visual, bpp) else {
            return Err(Availability::Unavailable {
                reason: format!(
                    "X server {display} uses a pixel format this build cannot read (depth {}, {:?} bits per pixel)",
                    root_screen.root_depth, bpp
                ),
                fix: "run the X server at depth 24 or 32 (e.g. `Xvfb -screen 0 1920x1080x24`)"
                    .into(),
            });
        };
        let layout = PixelLayout {
            msb_first: setup.image_byte_order == xproto::ImageOrder::MSB_FIRST,
            red_mask: visual.red_mask,
            green_mask: visual.green_mask,
            blue_mask: visual.blue_mask,
        };
        let (watcher, _) = RustConnection::connect(named)
            .map_err(|err| unavailable(format!("cannot connect to X server {display}: {err}")))?;
        let has_randr = conn
            .extension_information(x11rb::protocol::randr::X11_EXTENSION_NAME)
            .map_err(|e| failed(&e))?
            .is_some();
        let xconn = XConn {
            watcher,
            has_randr,
            root: root_screen.root,
            min_keycode: setup.min_keycode,
            max_keycode: setup.max_keycode,
            atoms,
            layout,
            conn,
            input: Mutex::new(Keyboard::default()),
            listed: Mutex::new(None),
            changed: AtomicBool::new(false),
            // An agent's own desktop has its core pointer to itself: no pair is made there.
            agent: Mutex::new(if named.is_some() {
                agent::AgentState::Refused
            } else {
                agent::AgentState::Untried
            }),
            agent_desktop: named.is_some(),
        };
        xconn.watch_root().map_err(|e| failed(&e))?;
        Ok(xconn)
    }

    /// Asks the server for the events that tell when a listing may no longer hold: on the root,
    /// windows (frames) mapped, moved, restacked or gone and its properties (the client list,
    /// the active window); from RandR, monitors changed.
    fn watch_root(&self) -> XResult<()> {
        self.watcher.change_window_attributes(
            self.root,
            &xproto::ChangeWindowAttributesAux::new()
                .event_mask(EventMask::SUBSTRUCTURE_NOTIFY | EventMask::PROPERTY_CHANGE),
        )?;
        if self.has_randr {
            use x11rb::protocol::randr::NotifyMask;
            self.watcher.randr_select_input(
                self.root,
                NotifyMask::SCREEN_CHANGE | NotifyMask::CRTC_CHANGE | NotifyMask::OUTPUT_CHANGE,
            )?;
        }
        self.watcher.get_input_focus()?.reply()?;
        Ok(())
    }

    /// Reads every event the server has sent so far. Any event may mean the windows changed
    /// (it is cheaper to list again than to tell which do not), so each marks the listing as
    /// not to be trusted.
    fn take_events(&self) -> XResult<()> {
        while self.watcher.poll_for_event()?.is_some() {
            self.changed.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// The windows and monitors as the display has them now: read again only when an event came
    /// since the last listing, else the last listing, without a round trip. What another client
    /// changed reaches this connection as an event at once; to include the effect of requests
    /// this connection has just sent, [`XConn::sync`] first.
    fn listing(&self) -> XResult<Arc<Listing>> {
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        self.take_events()?;
        // Cleared before reading, so that an event arriving during the read marks this one.
        let changed = self.changed.swap(false, Ordering::SeqCst);
        if let (false, Some(listing)) = (changed, listed.as_ref()) {
            return Ok(listing.clone());
        }
        *listed = None;
        let listing = Arc::new(self.list()?);
        *listed = Some(listing.clone());
        Ok(listing)
    }

    /// One round trip: when it returns, the server has processed every earlier request.
    pub fn sync(&self) -> XResult<()> {
        if let Some(agent) = self.agent_if_open() {
            agent.conn.get_input_focus()?.reply()?;
        }
        self.conn.get_input_focus()?.reply()?;
        Ok(())
    }

    /// The root window's size (the whole screen across monitors).
    pub fn screen(&self) -> XResult<Rect> {
        Ok(self.listing()?.screen)
    }

    /// Grabs `area` of the screen (which must lie within it) as the server stores it.
    pub fn grab(&self, area: Rect) -> XResult<RawImage> {
        let reply = self
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                self.root,
                area.x as i16,
                area.y as i16,
                area.width as u16,
                area.height as u16,
                !0,
            )?
            .reply()?;
        let expected = area.width as usize * area.height as usize * 4;
        if reply.data.len() < expected {
            return Err(XError(format!(
                "the X server returned {} bytes for a {}x{} grab, expected {expected}",
                reply.data.len(),
                area.width,
                area.height
            )));
        }
        Ok(RawImage {
            width: area.width,
            height: area.height,
            data: reply.data,
        })
    }

    /// Converts a raw grab to RGB.
    pub fn to_rgb(&self, raw: &RawImage) -> Rgb {
        let layout = self.layout;
        let mut pixels = Vec::with_capacity(raw.width as usize * raw.height as usize * 3);
        let pixel_bytes = &raw.data[..raw.width as usize * raw.height as usize * 4];
        let common = !layout.msb_first
            && layout.red_mask == 0xff0000
            && layout.green_mask == 0xff00
            && layout.blue_mask == 0xff;
        if common {
            // BGRX in memory: the layout of every little-endian 24/32-bit server.
            for px in pixel_bytes.chunks_exact(4) {
                pixels.extend_from_slice(&[px[2], px[1], px[0]]);
            }
        } else {
            let channel = |value: u32, mask: u32| -> u8 {
                if mask == 0 {
                    return 0;
                }
                let shifted = (value & mask) >> mask.trailing_zeros();
                let bits = mask.count_ones();
                if bits >= 8 {
                    (shifted >> (bits - 8)) as u8
                } else {
                    ((shifted << (8 - bits)) | (shifted >> (2 * bits).saturating_sub(8))) as u8
                }
            };
            for px in pixel_bytes.chunks_exact(4) {
                let bytes = [px[0], px[1], px[2], px[3]];
                let value = if layout.msb_first {
                    u32::from_be_bytes(bytes)
                } else {
                    u32::from_le_bytes(bytes)
                };
                pixels.extend_from_slice(&[
                    channel(value, layout.red_mask),
                    channel(value, layout.green_mask),
                    channel(value, layout.blue_mask),
                ]);
            }
        }
        Rgb {
            width: raw.width,
            height: raw.height,
            pixels,
        }
    }

    /// The monitors (RandR 1.5), or the whole screen as one when RandR does not say.
    pub fn monitors(&self) -> XResult<Vec<MonitorInfo>> {
        Ok(self.listing()?.monitors.clone())
    }

    /// The managed windows (EWMH `_NET_CLIENT_LIST`, in mapping order).
    pub fn window_ids(&self) -> XResult<Vec<u32>> {
        Ok(self.listing()?.ids.clone())
    }

    /// The focused window, per the window manager.
    pub fn active_window(&self) -> XResult<Option<u32>> {
        let reply = self
            .conn
            .get_property(
                false,
                self.root,
                self.atoms._NET_ACTIVE_WINDOW,
                AtomEnum::WINDOW,
                0,
                1,
            )?
            .reply()?;
        Ok(active_of(&reply))
    }

    /// The managed windows from bottom to top (EWMH `_NET_CLIENT_LIST_STACKING`), or None
    /// when the window manager does not publish it.
    pub fn stacking(&self) -> XResult<Option<Vec<u32>>> {
        Ok(self.listing()?.stacking.clone())
    }

    /// Every managed window with its title, app, pid and bounds.
    pub fn windows(&self) -> XResult<Vec<WindowInfo>> {
        self.with_agent_focus(&self.listing()?)
    }

    /// Reads the windows and monitors afresh, on the watching connection, in two round trips:
    /// every request of a round is sent before the first reply is awaited. Each window is
    /// watched (its properties and structure) before it is read, so that a change made after
    /// the read arrives as an event.
    fn list(&self) -> XResult<Listing> {
        let c = &self.watcher;
        let a = &self.atoms;
        let client_list = c.get_property(
            false,
            self.root,
            a._NET_CLIENT_LIST,
            AtomEnum::WINDOW,
            0,
            u32::MAX / 4,
        )?;
        let active = c.get_property(
            false,
            self.root,
            a._NET_ACTIVE_WINDOW,
            AtomEnum::WINDOW,
            0,
            1,
        )?;
        let stacking = c.get_property(
            false,
            self.root,
            a._NET_CLIENT_LIST_STACKING,
            AtomEnum::WINDOW,
            0,
            u32::MAX / 4,
        )?;
        let root = c.get_geometry(self.root)?;
        let randr_monitors = match self.has_randr {
            true => Some(c.randr_get_monitors(self.root, true)?),
            false => None,
        };
        let client_list = client_list.reply()?;
        let ids: Vec<u32> = match client_list.value32() {
            Some(ids) => ids.collect(),
            None if client_list.type_ == u32::from(AtomEnum::NONE) => {
                return Err(XError(
                    "the window manager does not publish _NET_CLIENT_LIST: run an EWMH window \
                     manager (openbox, xfwm4, mutter, kwin)"
                        .into(),
                ));
            }
            None => Vec::new(),
        };
        let active = active_of(&active.reply()?);
        let stacking = stacking.reply()?.value32().map(Iterator::collect);
        let root = root.reply()?;
        let screen = Rect {
            x: 0,
            y: 0,
            width: u32::from(root.width),
            height: u32::from(root.height),
        };
        let randr_monitors = match randr_monitors.map(|cookie| cookie.reply()) {
            Some(Ok(reply)) => reply.monitors,
            // RandR older than 1.5 has no GetMonitors.
            Some(Err(x11rb::errors::ReplyError::X11Error(_))) | None => Vec::new(),
            Some(Err(err)) => return Err(err.into()),
        };
        let names: Vec<_> = randr_monitors
            .iter()
            .map(|m| c.get_atom_name(m.name))
            .collect::<Result<_, _>>()?;
        let watched = xproto::ChangeWindowAttributesAux::new()
            .event_mask(EventMask::PROPERTY_CHANGE | EventMask::STRUCTURE_NOTIFY);
        let mut pending = Vec::with_capacity(ids.len());
        for &id in &ids {
            // A window gone by now answers with an error event, which only marks this listing
            // as stale.
            c.change_window_attributes(id, &watched)?;
            pending.push(self.ask_window(id)?);
        }
        let monitors = monitors_of(&randr_monitors, names, screen);
        let windows = pending
            .into_iter()
            .filter_map(|asked| window_of(asked, active, &monitors))
            .collect();
        static LISTINGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(Listing {
            ids,
            stacking,
            windows,
            monitors,
            screen,
            generation: LISTINGS.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Asks what a window's listing shows of it (the replies are read by [`window_of`]).
    fn ask_window(&self, id: u32) -> XResult<AskedWindow<'_>> {
        let c = &self.watcher;
        let a = &self.atoms;
        Ok(AskedWindow {
            id,
            net_name: c.get_property(false, id, a._NET_WM_NAME, a.UTF8_STRING, 0, 1024)?,
            name: c.get_property(false, id, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 1024)?,
            class: c.get_property(false, id, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 256)?,
            pid: c.get_property(false, id, a._NET_WM_PID, AtomEnum::CARDINAL, 0, 1)?,
            geometry: c.get_geometry(id)?,
            origin: c.translate_coordinates(id, self.root, 0, 0)?,
            // None where the server has no XRes.
            client_pid: c
                .res_query_client_ids(&[res::ClientIdSpec {
                    client: id,
                    mask: res::ClientIdMask::LOCAL_CLIENT_PID,
                }])
                .ok(),
        })
    }

    pub fn cursor(&self) -> XResult<(i32, i32)> {
        if let Some(agent) = self.agent_peek() {
            return agent.pointer(self.root);
        }
        let reply = self.conn.query_pointer(self.root)?.reply()?;
        Ok((i32::from(reply.root_x), i32::from(reply.root_y)))
    }

    fn fake(&self, kind: u8, detail: u8, x: i32, y: i32) -> XResult<()> {
        let agent = self.agent_if_open();
        agent
            .as_ref()
            .map_or(&self.conn, |agent| &agent.conn)
            .xtest_fake_input(kind, detail, 0, self.root, x as i16, y as i16, 0)?;
        Ok(())
    }

    fn motion(&self, x: i32, y: i32) -> XResult<()> {
        // detail 0: absolute coordinates on the given root.
        self.fake(xproto::MOTION_NOTIFY_EVENT, 0, x, y)
    }

    fn button(&self, button: u8, press: bool) -> XResult<()> {
        let kind = if press {
            xproto::BUTTON_PRESS_EVENT
        } else {
            xproto::BUTTON_RELEASE_EVENT
        };
        self.fake(kind, button, 0, 0)
    }

    fn key(&self, keycode: u8, press: bool) -> XResult<()> {
        let kind = if press {
            xproto::KEY_PRESS_EVENT
        } else {
            xproto::KEY_RELEASE_EVENT
        };
        self.fake(kind, keycode, 0, 0)
    }

    /// Takes the input lock, and the agent's own devices for what follows (made at first).
    fn lock_input(&self) -> std::sync::MutexGuard<'_, Keyboard> {
        let keyboard = self.input.lock().unwrap_or_else(|e| e.into_inner());
        self.agent();
        keyboard
    }

    pub fn move_to(&self, x: i32, y: i32) -> XResult<()> {
        let _input = self.lock_input();
        self.motion(x, y)?;
        self.sync()
    }

    pub fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> XResult<()> {
        let _input = self.lock_input();
        if let Some((x, y)) = at {
            self.motion(x, y)?;
        }
        let lent = self.lend_client_pointer()?;
        for _ in 0..count {
            self.button(button_number(button), true)?;
            self.button(button_number(button), false)?;
        }
        self.agent_click_focus(lent)?;
        self.sync()
    }

    pub fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> XResult<()> {
        let _input = self.lock_input();
        self.motion(from.0, from.1)?;
        let lent = self.lend_client_pointer()?;
        self.button(button_number(button), true)?;
        // Toolkits start a drag only after the pointer moved a few pixels while pressed: pass
        // through intermediate points so they see motion, not a jump.
        const STEPS: i32 = 8;
        for step in 1..=STEPS {
            let x = from.0 + (to.0 - from.0) * step / STEPS;
            let y = from.1 + (to.1 - from.1) * step / STEPS;
            self.motion(x, y)?;
            // Each step is its own event batch: a round trip keeps the motions distinct.
            self.sync()?;
            if self.person_paused() {
                // The person took the pointer: let go where it is and send nothing more.
                self.button(button_number(button), false)?;
                self.agent_click_focus(lent)?;
                self.sync()?;
                return Err(person_took_over());
            }
            if step == 1 {
                // A window manager decides on the first motion whether a press on a frame is a
                // move. One that lags behind (a loaded machine) would read every motion queued
                // by then as one, decide on it, and meet the release before its move began: the
                // window stays put. Let it catch up here, once.
                self.window_manager_caught_up()?;
            }
        }
        self.button(button_number(button), false)?;
        self.agent_click_focus(lent)?;
        self.sync()
    }

    /// Scrolls by notches: buttons 4/5 are up/down, 6/7 left/right.
    pub fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> XResult<()> {
        let _input = self.lock_input();
        if let Some((x, y)) = at {
            self.motion(x, y)?;
        }
        let notch = |button: u8, n: i32| -> XResult<()> {
            for _ in 0..n.unsigned_abs() {
                self.button(button, true)?;
                self.button(button, false)?;
            }
            Ok(())
        };
        notch(if dy < 0 { 4 } else { 5 }, dy)?;
        notch(if dx < 0 { 6 } else { 7 }, dx)?;
        self.sync()
    }

    /// The keymap now: keysyms per keycode and the keysyms of each keycode.
    fn keymap(&self) -> XResult<(usize, Vec<u32>)> {
        let count = self.max_keycode - self.min_keycode + 1;
        let reply = self
            .conn
            .get_keyboard_mapping(self.min_keycode, count)?
            .reply()?;
        Ok((usize::from(reply.keysyms_per_keycode), reply.keysyms))
    }

    /// Where `keysym` sits on the keymap: (keycode, needs shift).
    fn find_keysym(&self, map: &(usize, Vec<u32>), keysym: u32) -> Option<(u8, bool)> {
        let (per, syms) = map;
        if *per == 0 {
            return None;
        }
        for level in 0..(*per).min(2) {
            for (i, chunk) in syms.chunks(*per).enumerate() {
                if chunk.get(level) == Some(&keysym) {
                    return Some((self.min_keycode + i as u8, level == 1));
                }
            }
        }
        None
    }

    /// Presses a combo: modifiers down in order, the key, everything up in reverse.
    pub fn press_combo(&self, modifiers: &[u32], key: u32) -> XResult<()> {
        let mut keyboard = self.lock_input();
        let map = self.keymap()?;
        let mut held = Vec::new();
        for &modifier in modifiers {
            let (code, _) = self.find_keysym(&map, modifier).ok_or_else(|| {
                XError(format!(
                    "the keyboard map has no key for modifier keysym {modifier:#x}"
                ))
            })?;
            held.push(code);
        }
        let (code, shift) = match self.find_keysym(&map, key) {
            Some(found) => found,
            None => {
                let codes = self.assign_spare(&mut keyboard, &map, &[key])?;
                (codes[&key], false)
            }
        };
        if shift && !modifiers.contains(&SHIFT_L) {
            held.push(self.shift_code(&map)?);
        }
        for &code in &held {
            self.key(code, true)?;
        }
        self.key(code, true)?;
        self.key(code, false)?;
        for &code in held.iter().rev() {
            self.key(code, false)?;
        }
        self.sync()
    }

    fn shift_code(&self, map: &(usize, Vec<u32>)) -> XResult<u8> {
        self.find_keysym(map, SHIFT_L)
            .map(|(code, _)| code)
            .ok_or_else(|| XError("the keyboard map has no Shift_L key".into()))
    }

    /// Types `keysyms` in order. Keysyms already on the keymap use their keys (with shift for the
    /// second level); the others are put on spare keycodes first, all at once, so no keycode is
    /// remapped while its earlier key events may still be waiting in a client's queue.
    pub fn type_keysyms(&self, keysyms: &[u32]) -> XResult<()> {
        let mut keyboard = self.lock_input();
        let map = self.keymap()?;
        let shift = self.shift_code(&map)?;
        let spare_count = self.spare_keycodes(&mut keyboard, &map).len().max(1);
        // Text needing more new characters than there are spare keys goes in rounds; each round
        // maps its characters, then types every key up to the next unmapped one.
        let mut start = 0;
        while start < keysyms.len() {
            let map = self.keymap()?;
            let mut round: Vec<u32> = Vec::new();
            let mut end = start;
            while end < keysyms.len() {
                let sym = keysyms[end];
                // Keys we mapped earlier count against this round's spare keys: a new character
                // must not take the key of one still to be typed.
                let native =
                    self.find_keysym(&map, sym).is_some() && !keyboard.assigned.contains_key(&sym);
                let known = native || round.contains(&sym);
                if !known {
                    if round.len() == spare_count {
                        break;
                    }
                    round.push(sym);
                }
                end += 1;
            }
            let codes = if round.is_empty() {
                HashMap::new()
            } else {
                self.assign_spare(&mut keyboard, &map, &round)?
            };
            let map = if round.is_empty() {
                map
            } else {
                self.keymap()?
            };
            for &sym in &keysyms[start..end] {
                if self.person_paused() {
                    // The person is typing or moving the mouse: stop between two keys.
                    self.sync()?;
                    return Err(person_took_over());
                }
                let (code, shifted) = match codes.get(&sym) {
                    Some(&code) => (code, false),
                    None => self.find_keysym(&map, sym).ok_or_else(|| {
                        XError(format!("keysym {sym:#x} could not be put on the keymap"))
                    })?,
                };
                if shifted {
                    self.key(shift, true)?;
                }
                self.key(code, true)?;
                self.key(code, false)?;
                if shifted {
                    self.key(shift, false)?;
                }
            }
            self.sync()?;
            start = end;
        }
        Ok(())
    }

    /// Keycodes that had no symbols when first seen: ours to assign.
    fn spare_keycodes<'k>(&self, keyboard: &'k mut Keyboard, map: &(usize, Vec<u32>)) -> &'k [u8] {
        if keyboard.spare.is_none() {
            let (per, syms) = map;
            let spare = syms
                .chunks((*per).max(1))
                .enumerate()
                .filter(|(_, chunk)| chunk.iter().all(|&s| s == 0))
                .map(|(i, _)| self.min_keycode + i as u8)
                // Keycodes below 9 are never generated by keyboards and some servers refuse them.
                .filter(|&code| code > 8)
                .collect();
            keyboard.spare = Some(spare);
        }
        keyboard.spare.as_deref().unwrap_or_default()
    }

    /// Puts each keysym on a spare keycode (both levels, so shift state does not matter) and
    /// waits for the server to apply it. Returns keysym → keycode for all of `keysyms`.
    fn assign_spare(
        &self,
        keyboard: &mut Keyboard,
        map: &(usize, Vec<u32>),
        keysyms: &[u32],
    ) -> XResult<HashMap<u32, u8>> {
        let spare = self.spare_keycodes(keyboard, map).to_vec();
        if spare.is_empty() {
            return Err(XError(
                "the keyboard map has no spare keycode to type characters that are not on it"
                    .into(),
            ));
        }
        let mut result = HashMap::new();
        let mut in_use: Vec<u8> = Vec::new();
        let mut waited = false;
        // First keep every keysym still mapped from before, so no new one takes its key.
        let (per, syms) = map;
        for &sym in keysyms {
            if let Some(&code) = keyboard.assigned.get(&sym)
                && syms.get(usize::from(code - self.min_keycode) * per) == Some(&sym)
            {
                result.insert(sym, code);
                in_use.push(code);
            }
        }
        for &sym in keysyms {
            if result.contains_key(&sym) {
                continue;
            }
            // Take the next spare slot not used in this batch.
            let mut code = spare[keyboard.next % spare.len()];
            let mut tries = 0;
            while in_use.contains(&code) && tries < spare.len() {
                keyboard.next += 1;
                code = spare[keyboard.next % spare.len()];
                tries += 1;
            }
            keyboard.next += 1;
            if !waited && keyboard.assigned.values().any(|c| *c == code) {
                // This keycode typed another character, whose key events the focused client
                // may not have read yet: clients look keysyms up lazily, from the map as it is
                // when they get to the event. Remap only once it has caught up.
                self.sync()?;
                self.focused_client_caught_up()?;
                waited = true;
            }
            keyboard.assigned.retain(|_, c| *c != code);
            keyboard.assigned.insert(sym, code);
            self.conn.change_keyboard_mapping(1, code, 2, &[sym, sym])?;
            result.insert(sym, code);
            in_use.push(code);
        }
        // The mapping must be in effect before the first key event that relies on it.
        self.sync()?;
        Ok(result)
    }

    /// Waits (bounded) until the focused window's client has read every event sent before now:
    /// an EWMH `_NET_WM_PING` it answers only after reading the events queued ahead of it.
    /// Clients that do not take part in pings get a fixed grace instead.
    fn focused_client_caught_up(&self) -> XResult<()> {
        self.client_caught_up(self.key_window()?)
    }

    /// Waits (bounded) until `window`'s client has read every event sent before now (see
    /// [`XConn::focused_client_caught_up`]); a fixed grace for no window.
    fn client_caught_up(&self, window: Option<u32>) -> XResult<()> {
        const GRACE: Duration = Duration::from_millis(150);
        const BOUND: Duration = Duration::from_secs(2);
        let Some(window) = window else {
            std::thread::sleep(GRACE);
            return Ok(());
        };
        let protocols = self
            .conn
            .get_property(
                false,
                window,
                self.atoms.WM_PROTOCOLS,
                AtomEnum::ATOM,
                0,
                64,
            )?
            .reply()?;
        let pings = protocols
            .value32()
            .is_some_and(|mut atoms| atoms.any(|a| a == self.atoms._NET_WM_PING));
        if !pings {
            std::thread::sleep(GRACE);
            return Ok(());
        }
        // The pong goes to the root window; see it by selecting SubstructureNotify there, for
        // the duration of the wait only.
        self.conn.change_window_attributes(
            self.root,
            &xproto::ChangeWindowAttributesAux::new().event_mask(EventMask::SUBSTRUCTURE_NOTIFY),
        )?;
        let stamp = self.ping_stamp();
        let ping = ClientMessageEvent::new(
            32,
            window,
            self.atoms.WM_PROTOCOLS,
            [self.atoms._NET_WM_PING, stamp, window, 0, 0],
        );
        self.conn
            .send_event(false, window, EventMask::NO_EVENT, ping)?;
        self.conn.flush()?;
        let answered = self.wait_for_event(BOUND, |event| match event {
            x11rb::protocol::Event::ClientMessage(event) => {
                let data = event.data.as_data32();
                event.type_ == self.atoms.WM_PROTOCOLS
                    && data[0] == self.atoms._NET_WM_PING
                    && data[1] == stamp
            }
            _ => false,
        })?;
        self.stop_watching_root()?;
        if !answered {
            tracing::warn!(
                window,
                "the focused client did not answer a ping within 2 s"
            );
        }
        Ok(())
    }

    /// Waits (bounded) until the window manager has read every event sent before now: it answers
    /// an EWMH `_NET_REQUEST_FRAME_EXTENTS` for a probe window only after the events queued
    /// ahead of it. A window manager that does not offer the request is not waited for.
    fn window_manager_caught_up(&self) -> XResult<()> {
        const BOUND: Duration = Duration::from_secs(2);
        let supported = self
            .conn
            .get_property(
                false,
                self.root,
                self.atoms._NET_SUPPORTED,
                AtomEnum::ATOM,
                0,
                1024,
            )?
            .reply()?;
        let offered = supported
            .value32()
            .is_some_and(|mut atoms| atoms.any(|a| a == self.atoms._NET_REQUEST_FRAME_EXTENTS));
        if !offered {
            return Ok(());
        }
        // An unmapped window of our own: the answer lands on it as a property change.
        let probe = self.conn.generate_id()?;
        self.conn.create_window(
            0,
            probe,
            self.root,
            -1,
            -1,
            1,
            1,
            0,
            xproto::WindowClass::INPUT_ONLY,
            0,
            &xproto::CreateWindowAux::new().event_mask(EventMask::PROPERTY_CHANGE),
        )?;
        let request = ClientMessageEvent::new(
            32,
            probe,
            self.atoms._NET_REQUEST_FRAME_EXTENTS,
            [0, 0, 0, 0, 0],
        );
        self.conn.send_event(
            false,
            self.root,
            EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
            request,
        )?;
        self.conn.flush()?;
        let answered = self.wait_for_event(BOUND, |event| {
            matches!(event, x11rb::protocol::Event::PropertyNotify(event)
                if event.window == probe && event.atom == self.atoms._NET_FRAME_EXTENTS)
        })?;
        self.conn.destroy_window(probe)?;
        self.sync()?;
        if !answered {
            tracing::warn!("the window manager did not answer a frame-extents request within 2 s");
        }
        Ok(())
    }

    /// Ends a wait's watch of the root on the input connection: selects no events there again,
    /// and drops what came meanwhile, so that no later wait reads a stale one.
    fn stop_watching_root(&self) -> XResult<()> {
        self.conn.change_window_attributes(
            self.root,
            &xproto::ChangeWindowAttributesAux::new().event_mask(EventMask::NO_EVENT),
        )?;
        self.sync()?;
        while self.conn.poll_for_event()?.is_some() {}
        Ok(())
    }

    /// Reads events until one is `wanted` (true) or `bound` has passed (false), blocking on the
    /// connection's descriptor between them rather than polling on a timer.
    fn wait_for_event(
        &self,
        bound: Duration,
        mut wanted: impl FnMut(&x11rb::protocol::Event) -> bool,
    ) -> XResult<bool> {
        use std::os::fd::AsRawFd;
        let deadline = Instant::now() + bound;
        loop {
            while let Some(event) = self.conn.poll_for_event()? {
                if wanted(&event) {
                    return Ok(true);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut readable = libc::pollfd {
                fd: self.conn.stream().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one pollfd on a descriptor the connection owns for its whole life.
            unsafe { libc::poll(&mut readable, 1, millis) };
        }
    }

    /// A distinct value per ping, so that a late pong is not taken for the current one.
    fn ping_stamp(&self) -> u32 {
        use std::sync::atomic::{AtomicU32, Ordering};
        static STAMP: AtomicU32 = AtomicU32::new(1);
        STAMP.fetch_add(1, Ordering::Relaxed)
    }
}

impl XConn {
    /// Whether input pauses for the person's own now: never on an agent's own desktop.
    fn person_paused(&self) -> bool {
        !self.agent_desktop && crate::gui::person::watch().paused()
    }
}

/// The failure of input the person's own input cut short (the surface tells it apart through
/// the watch and answers `interrupted_by_person`).
fn person_took_over() -> XError {
    XError("the person's input came in the middle of this input; the rest was not sent".into())
}

impl desktop::Desktop for XConn {
    type Frame = RawImage;

    fn screen(&self) -> DisplayResult<Rect> {
        XConn::screen(self)
    }
    fn grab(&self, area: Rect) -> DisplayResult<RawImage> {
        XConn::grab(self, area)
    }
    fn same_frame(a: &RawImage, b: &RawImage) -> bool {
        a.data == b.data
    }
    fn to_rgb(&self, frame: &RawImage) -> Rgb {
        XConn::to_rgb(self, frame)
    }
    fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        XConn::monitors(self)
    }
    fn window_ids(&self) -> DisplayResult<Vec<u32>> {
        XConn::window_ids(self)
    }
    fn windows(&self) -> DisplayResult<Vec<WindowInfo>> {
        XConn::windows(self)
    }
    fn stacking(&self) -> DisplayResult<Option<Vec<u32>>> {
        XConn::stacking(self)
    }
    fn keyboard_target(&self) -> DisplayResult<Option<u32>> {
        XConn::keyboard_target(self)
    }
    fn cursor(&self) -> DisplayResult<(i32, i32)> {
        XConn::cursor(self)
    }
    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        XConn::move_to(self, x, y)
    }
    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        XConn::click(self, at, button, count)
    }
    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        XConn::drag(self, from, to, button)
    }
    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        XConn::scroll(self, at, dx, dy)
    }
    fn type_text(&self, text: &str) -> DisplayResult<()> {
        let keysyms: Vec<u32> = text.chars().map(char_keysym).collect();
        self.type_keysyms(&keysyms)
    }
    fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        XConn::press_combo(self, &combo.modifiers, combo.key)
    }
    fn focus(&self, window: u32) -> DisplayResult<bool> {
        XConn::focus(self, window)
    }
    fn yields_to_person(&self) -> bool {
        !self.agent_desktop
    }
}
