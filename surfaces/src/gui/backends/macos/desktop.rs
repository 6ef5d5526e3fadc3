//! The macOS backend of the gui surface: captures through xcap (per display, composed when an
//! area spans several), windows from CGWindowListCopyWindowInfo, displays from CoreGraphics,
//! pointer and keyboard through CGEvent (Unicode typing with CGEventKeyboardSetUnicodeString),
//! and focus through the window's application (AX). Missing Screen Recording or Accessibility
//! permissions end in errors that say what to grant to which binary.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_foundation::base::TCFType;
use core_foundation::boolean::CFBoolean;
use core_graphics::access::ScreenCaptureAccess;
use core_graphics::display::CGDisplay;
use core_graphics::event::{
    CGEvent, CGEventFlags, CGEventTapLocation, CGEventType, CGMouseButton, EventField,
    ScrollEventUnit,
};
use core_graphics::event_source::{CGEventSource, CGEventSourceStateID};
use core_graphics::geometry::CGPoint;
use image::RgbaImage;

use super::keys::{self, Typed};
use crate::Availability;
use crate::accessibility::macos::element::{self, Element};
use crate::accessibility::macos::window_list::{self, ListedRect, ListedWindow};
use crate::gui::desktop::{
    self, Button, DisplayError, DisplayResult, MonitorInfo, Rect, Rgb, WindowInfo,
};
use crate::gui::keys::Combo;

/// Pause between the steps of a drag and between typed characters: CGEventPost is
/// asynchronous, and apps coalesce or reorder events that arrive in one burst.
const STEP_PAUSE: Duration = Duration::from_millis(8);
const KEY_PAUSE: Duration = Duration::from_millis(2);
/// How long `focus` waits for the window server to bring the window to the front.
const FOCUS_WAIT: Duration = Duration::from_millis(1500);

/// There is no connection to keep on macOS: the one `Desktop` serialises input.
pub struct Backend {
    desktop: Arc<MacDesktop>,
}

impl Backend {
    pub fn new() -> Backend {
        Backend {
            desktop: Arc::new(MacDesktop {
                input: Mutex::new(()),
            }),
        }
    }

    /// Whether screen captures show windows' contents (Screen Recording granted).
    pub fn can_capture(&self) -> bool {
        ScreenCaptureAccess.preflight()
    }
}

impl desktop::Backend for Backend {
    type Conn = MacDesktop;

    fn conn(&self) -> Result<Arc<MacDesktop>, Availability> {
        match CGDisplay::active_displays() {
            Ok(displays) if !displays.is_empty() => Ok(self.desktop.clone()),
            _ => Err(Availability::Unavailable {
                reason: "no display: the daemon is not running in a logged-in macOS GUI session (ssh, or a LaunchDaemon)".into(),
                fix: "run it as a LaunchAgent of the logged-in user (packaging/launchd) or from a terminal in that session".into(),
            }),
        }
    }

    fn forget(&self, _broken: &Arc<MacDesktop>) {}
}

pub struct MacDesktop {
    /// Input sequences (a click, a typed text) must not interleave with one another.
    input: Mutex<()>,
}

fn failed(what: &str) -> DisplayError {
    DisplayError(format!("{what} failed"))
}

fn need_screen_recording() -> DisplayResult<()> {
    if ScreenCaptureAccess.preflight() {
        Ok(())
    } else {
        Err(DisplayError(element::grant_message("Screen Recording")))
    }
}

fn need_accessibility() -> DisplayResult<()> {
    if element::trusted() {
        Ok(())
    } else {
        Err(DisplayError(element::grant_message("Accessibility")))
    }
}

fn source() -> DisplayResult<CGEventSource> {
    CGEventSource::new(CGEventSourceStateID::HIDSystemState)
        .map_err(|_| failed("creating a CGEventSource"))
}

fn point(x: i32, y: i32) -> CGPoint {
    CGPoint::new(f64::from(x), f64::from(y))
}

/// The event types and CG button of a mouse button: (down, up, dragged, button).
fn button_events(button: Button) -> (CGEventType, CGEventType, CGEventType, CGMouseButton) {
    match button {
        Button::Left => (
            CGEventType::LeftMouseDown,
            CGEventType::LeftMouseUp,
            CGEventType::LeftMouseDragged,
            CGMouseButton::Left,
        ),
        Button::Right => (
            CGEventType::RightMouseDown,
            CGEventType::RightMouseUp,
            CGEventType::RightMouseDragged,
            CGMouseButton::Right,
        ),
        Button::Middle => (
            CGEventType::OtherMouseDown,
            CGEventType::OtherMouseUp,
            CGEventType::OtherMouseDragged,
            CGMouseButton::Center,
        ),
    }
}

fn mouse(kind: CGEventType, at: (i32, i32), button: CGMouseButton) -> DisplayResult<CGEvent> {
    let event = CGEvent::new_mouse_event(source()?, kind, point(at.0, at.1), button)
        .map_err(|_| failed("creating a mouse event"))?;
    if matches!(button, CGMouseButton::Center) {
        event.set_integer_value_field(EventField::MOUSE_EVENT_BUTTON_NUMBER, 2);
    }
    Ok(event)
}

fn key_event(code: u16, down: bool, flags: u64, text: Option<char>) -> DisplayResult<()> {
    let event = CGEvent::new_keyboard_event(source()?, code, down)
        .map_err(|_| failed("creating a key event"))?;
    event.set_flags(CGEventFlags::from_bits_truncate(flags));
    if let Some(c) = text {
        event.set_string(&c.to_string());
    }
    event.post(CGEventTapLocation::HID);
    Ok(())
}

/// Normal (layer 0) on-screen windows, front to back, from the window server's list (which the
/// macOS accessibility backend reads too); its failure as the gui's.
fn window_list() -> DisplayResult<Vec<ListedWindow>> {
    window_list::window_list().map_err(DisplayError)
}

/// A listed window's frame as the gui's area.
impl From<ListedRect> for Rect {
    fn from(listed: ListedRect) -> Rect {
        Rect {
            x: listed.x,
            y: listed.y,
            width: listed.width,
            height: listed.height,
        }
    }
}

fn display_rects() -> DisplayResult<Vec<(Rect, bool, u32)>> {
    let ids = CGDisplay::active_displays()
        .map_err(|code| DisplayError(format!("CGGetActiveDisplayList failed: {code}")))?;
    Ok(ids
        .into_iter()
        .map(|id| {
            let display = CGDisplay::new(id);
            let b = display.bounds();
            (
                Rect {
                    x: b.origin.x.round() as i32,
                    y: b.origin.y.round() as i32,
                    width: b.size.width.round() as u32,
                    height: b.size.height.round() as u32,
                },
                display.is_main(),
                id,
            )
        })
        .collect())
}

fn xcap_failed(what: &str, err: xcap::XCapError) -> DisplayError {
    DisplayError(format!("{what}: {err}"))
}

impl MacDesktop {
    fn lock_input(&self) -> std::sync::MutexGuard<'_, ()> {
        self.input.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn post_mouse(
        &self,
        kind: CGEventType,
        at: (i32, i32),
        button: CGMouseButton,
    ) -> DisplayResult<()> {
        mouse(kind, at, button)?.post(CGEventTapLocation::HID);
        Ok(())
    }
}

impl desktop::Desktop for MacDesktop {
    type Frame = RgbaImage;

    fn screen(&self) -> DisplayResult<Rect> {
        let rects = display_rects()?;
        let mut all = rects
            .first()
            .map(|r| r.0)
            .ok_or_else(|| failed("finding a display"))?;
        for (r, _, _) in &rects[1..] {
            let x0 = all.x.min(r.x);
            let y0 = all.y.min(r.y);
            let x1 =
                (i64::from(all.x) + i64::from(all.width)).max(i64::from(r.x) + i64::from(r.width));
            let y1 = (i64::from(all.y) + i64::from(all.height))
                .max(i64::from(r.y) + i64::from(r.height));
            all = Rect {
                x: x0,
                y: y0,
                width: (x1 - i64::from(x0)) as u32,
                height: (y1 - i64::from(y0)) as u32,
            };
        }
        Ok(all)
    }

    /// Captures each display's part of `area` and lays them out on one canvas at the highest
    /// pixel density among them (a Retina display has 2 pixels per point).
    fn grab(&self, area: Rect) -> DisplayResult<RgbaImage> {
        need_screen_recording()?;
        let monitors = xcap::Monitor::all().map_err(|e| xcap_failed("listing displays", e))?;
        let mut parts = Vec::new();
        for monitor in &monitors {
            let bounds = Rect {
                x: monitor.x().map_err(|e| xcap_failed("display x", e))?,
                y: monitor.y().map_err(|e| xcap_failed("display y", e))?,
                width: monitor
                    .width()
                    .map_err(|e| xcap_failed("display width", e))?,
                height: monitor
                    .height()
                    .map_err(|e| xcap_failed("display height", e))?,
            };
            if let Some(part) = bounds.intersect(&area) {
                let image = monitor
                    .capture_region(
                        (part.x - bounds.x) as u32,
                        (part.y - bounds.y) as u32,
                        part.width,
                        part.height,
                    )
                    .map_err(|e| xcap_failed("capturing the screen", e))?;
                parts.push((part, image));
            }
        }
        let density = parts
            .iter()
            .map(|(part, image)| f64::from(image.width()) / f64::from(part.width.max(1)))
            .fold(1.0f64, f64::max);
        let scaled = |units: u32| ((f64::from(units) * density).round() as u32).max(1);
        let mut canvas = RgbaImage::new(scaled(area.width), scaled(area.height));
        for (part, image) in parts {
            let (width, height) = (scaled(part.width), scaled(part.height));
            let image = if image.dimensions() == (width, height) {
                image
            } else {
                image::imageops::resize(
                    &image,
                    width,
                    height,
                    image::imageops::FilterType::Triangle,
                )
            };
            let x = ((f64::from(part.x - area.x)) * density).round() as i64;
            let y = ((f64::from(part.y - area.y)) * density).round() as i64;
            image::imageops::replace(&mut canvas, &image, x, y);
        }
        Ok(canvas)
    }

    fn same_frame(a: &RgbaImage, b: &RgbaImage) -> bool {
        a.dimensions() == b.dimensions() && a.as_raw() == b.as_raw()
    }

    fn to_rgb(&self, frame: &RgbaImage) -> Rgb {
        let mut pixels = Vec::with_capacity(frame.as_raw().len() / 4 * 3);
        for px in frame.as_raw().chunks_exact(4) {
            pixels.extend_from_slice(&px[..3]);
        }
        Rgb {
            width: frame.width(),
            height: frame.height(),
            pixels,
        }
    }

    fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        Ok(display_rects()?
            .into_iter()
            .enumerate()
            .map(|(index, (rect, primary, id))| MonitorInfo {
                index,
                name: format!("display {id}"),
                rect,
                primary,
            })
            .collect())
    }

    fn window_ids(&self) -> DisplayResult<Vec<u32>> {
        Ok(window_list()?.into_iter().map(|w| w.id).collect())
    }

    fn windows(&self) -> DisplayResult<Vec<WindowInfo>> {
        let displays = display_rects()?;
        let list = window_list()?;
        // The list runs front to back: the first normal window is the one in front, which is
        // the focused app's (a floating panel is not on layer 0).
        Ok(list
            .into_iter()
            .enumerate()
            .map(
                |(
                    n,
                    ListedWindow {
                        id,
                        pid,
                        app,
                        title,
                        rect,
                    },
                )| {
                    let cx = rect.x + (rect.width / 2) as i32;
                    let cy = rect.y + (rect.height / 2) as i32;
                    WindowInfo {
                        id,
                        title,
                        app,
                        instance: String::new(),
                        pid: Some(pid),
                        rect: rect.into(),
                        focused: n == 0,
                        monitor: displays.iter().position(|(d, _, _)| d.contains(cx, cy)),
                    }
                },
            )
            .collect())
    }

    fn cursor(&self) -> DisplayResult<(i32, i32)> {
        let event = CGEvent::new(source()?).map_err(|_| failed("reading the pointer"))?;
        let at = event.location();
        Ok((at.x.round() as i32, at.y.round() as i32))
    }

    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        need_accessibility()?;
        let _input = self.lock_input();
        self.post_mouse(CGEventType::MouseMoved, (x, y), CGMouseButton::Left)
    }

    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        need_accessibility()?;
        let at = match at {
            Some(at) => at,
            None => self.cursor()?,
        };
        let _input = self.lock_input();
        self.post_mouse(CGEventType::MouseMoved, at, CGMouseButton::Left)?;
        let (down, up, _, cg_button) = button_events(button);
        for n in 1..=count {
            // The click state makes a double click a double click to AppKit.
            for kind in [down, up] {
                let event = mouse(kind, at, cg_button)?;
                event.set_integer_value_field(EventField::MOUSE_EVENT_CLICK_STATE, i64::from(n));
                event.post(CGEventTapLocation::HID);
            }
        }
        Ok(())
    }

    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        need_accessibility()?;
        let _input = self.lock_input();
        let (down, up, dragged, cg_button) = button_events(button);
        self.post_mouse(CGEventType::MouseMoved, from, CGMouseButton::Left)?;
        self.post_mouse(down, from, cg_button)?;
        const STEPS: i32 = 8;
        for step in 1..=STEPS {
            std::thread::sleep(STEP_PAUSE);
            let x = from.0 + (to.0 - from.0) * step / STEPS;
            let y = from.1 + (to.1 - from.1) * step / STEPS;
            self.post_mouse(dragged, (x, y), cg_button)?;
        }
        std::thread::sleep(STEP_PAUSE);
        self.post_mouse(up, to, cg_button)
    }

    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        need_accessibility()?;
        let _input = self.lock_input();
        if let Some(at) = at {
            self.post_mouse(CGEventType::MouseMoved, at, CGMouseButton::Left)?;
        }
        // Line units, one event per notch; CG counts wheel 1 up and wheel 2 left as positive.
        let notch = |vertical: i32, horizontal: i32| -> DisplayResult<()> {
            let event = CGEvent::new_scroll_event(
                source()?,
                ScrollEventUnit::LINE,
                2,
                vertical,
                horizontal,
                0,
            )
            .map_err(|_| failed("creating a scroll event"))?;
            event.post(CGEventTapLocation::HID);
            Ok(())
        };
        for _ in 0..dy.unsigned_abs() {
            notch(-dy.signum(), 0)?;
        }
        for _ in 0..dx.unsigned_abs() {
            notch(0, -dx.signum())?;
        }
        Ok(())
    }

    fn type_text(&self, text: &str) -> DisplayResult<()> {
        need_accessibility()?;
        let _input = self.lock_input();
        for c in text.chars() {
            match keys::typed(c) {
                Typed::Key(code) => {
                    key_event(code, true, 0, None)?;
                    key_event(code, false, 0, None)?;
                }
                // Key code 0 carries the character; no modifier flags, so a held key cannot
                // turn "a" into a shortcut.
                Typed::Text(c) => {
                    key_event(0, true, 0, Some(c))?;
                    key_event(0, false, 0, Some(c))?;
                }
            }
            std::thread::sleep(KEY_PAUSE);
        }
        Ok(())
    }

    fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        need_accessibility()?;
        let key = keys::combo_key(combo.key)
            .ok_or_else(|| DisplayError("this key does not exist on a Mac keyboard".into()))?;
        let modifiers: Vec<(u16, u64)> = combo
            .modifiers
            .iter()
            .filter_map(|m| keys::modifier(*m))
            .collect();
        let _input = self.lock_input();
        let mut flags = 0u64;
        for (code, flag) in &modifiers {
            flags |= flag;
            key_event(*code, true, flags, None)?;
        }
        let mut key_flags = flags;
        if key.shift {
            key_flags |= keys::FLAG_SHIFT;
        }
        key_event(key.code, true, key_flags, key.text)?;
        key_event(key.code, false, key_flags, key.text)?;
        for (code, flag) in modifiers.iter().rev() {
            flags &= !flag;
            key_event(*code, false, flags, None)?;
        }
        Ok(())
    }

    /// Brings the window's application to the front (AXFrontmost) and raises the window
    /// (AXRaise on the AX window with the same frame, else title), then waits until the
    /// window server shows it in front.
    fn focus(&self, window: u32) -> DisplayResult<bool> {
        need_accessibility()?;
        let list = window_list()?;
        let Some(ListedWindow {
            pid, title, rect, ..
        }) = list.into_iter().find(|w| w.id == window)
        else {
            return Ok(false);
        };
        let app = Element::application(pid as i32);
        app.set_timeout(1.5);
        let ax_failed =
            |err: element::AxError| DisplayError(format!("focusing the window: {err:?}"));
        let frame = (rect.x, rect.y, rect.width as i32, rect.height as i32);
        let windows = app.elements("AXWindows").map_err(ax_failed)?;
        let target = windows
            .iter()
            .find(|w| w.frame().ok().flatten() == Some(frame))
            .or_else(|| {
                windows.iter().find(|w| {
                    !title.is_empty()
                        && w.string("AXTitle").ok().flatten().as_deref() == Some(title.as_str())
                })
            });
        app.set("AXFrontmost", &CFBoolean::true_value().as_CFType())
            .map_err(ax_failed)?;
        if let Some(target) = target {
            // Some apps refuse one or the other; either brings the window forward.
            let _ = target.perform("AXRaise");
            let _ = target.set("AXMain", &CFBoolean::true_value().as_CFType());
        }
        let deadline = Instant::now() + FOCUS_WAIT;
        loop {
            if window_list()?.first().map(|w| w.id) == Some(window) {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
