//! The window server's list of normal on-screen windows (CGWindowListCopyWindowInfo), front to
//! back: the gui surface lists, focuses and stacks windows with it, and the macOS accessibility
//! backend finds apps and their names in it.

use core_foundation::base::{CFType, TCFType};
use core_foundation::dictionary::CFDictionary;
use core_foundation::number::CFNumber;
use core_foundation::string::CFString;
use core_graphics::window::{
    copy_window_info, kCGNullWindowID, kCGWindowBounds, kCGWindowLayer,
    kCGWindowListExcludeDesktopElements, kCGWindowListOptionOnScreenOnly, kCGWindowName,
    kCGWindowNumber, kCGWindowOwnerName, kCGWindowOwnerPID,
};

/// A window's frame in global display points (the gui surface's `Rect`, which this module
/// cannot name: it belongs to the gui surface).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListedRect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

/// A dictionary entry of the window list.
fn entry(
    dict: &CFDictionary<CFString, CFType>,
    key: core_foundation::string::CFStringRef,
) -> Option<CFType> {
    dict.find(key).map(|value| (*value).clone())
}

fn entry_i64(
    dict: &CFDictionary<CFString, CFType>,
    key: core_foundation::string::CFStringRef,
) -> Option<i64> {
    entry(dict, key)?.downcast::<CFNumber>()?.to_i64()
}

fn entry_string(
    dict: &CFDictionary<CFString, CFType>,
    key: core_foundation::string::CFStringRef,
) -> Option<String> {
    Some(entry(dict, key)?.downcast::<CFString>()?.to_string())
}

/// kCGWindowBounds: a dictionary with X, Y, Width and Height in global points.
fn entry_rect(dict: &CFDictionary<CFString, CFType>) -> Option<ListedRect> {
    // SAFETY: a static CFString the framework defines.
    let bounds = entry(dict, unsafe { kCGWindowBounds })?.downcast::<CFDictionary>()?;
    // SAFETY: the bounds dictionary maps CFStrings to CFNumbers; re-typing the reference we
    // hold (get rule: retained) changes nothing about ownership.
    let bounds: CFDictionary<CFString, CFType> =
        unsafe { CFDictionary::wrap_under_get_rule(bounds.as_concrete_TypeRef()) };
    let number = |name: &str| -> Option<f64> {
        bounds
            .find(CFString::new(name))?
            .downcast::<CFNumber>()?
            .to_f64()
    };
    Some(ListedRect {
        x: number("X")?.round() as i32,
        y: number("Y")?.round() as i32,
        width: number("Width")?.round().max(0.0) as u32,
        height: number("Height")?.round().max(0.0) as u32,
    })
}

/// A normal window as the window server lists it.
#[derive(Debug, Clone)]
pub(crate) struct ListedWindow {
    pub id: u32,
    pub pid: u32,
    /// The owning application's name.
    pub app: String,
    /// Empty without Screen Recording: the window server withholds titles then.
    pub title: String,
    pub rect: ListedRect,
}

/// Normal (layer 0) on-screen windows, front to back; on failure, what failed, in words.
pub(crate) fn window_list() -> Result<Vec<ListedWindow>, String> {
    let list = copy_window_info(
        kCGWindowListOptionOnScreenOnly | kCGWindowListExcludeDesktopElements,
        kCGNullWindowID,
    )
    .ok_or_else(|| "CGWindowListCopyWindowInfo failed".to_string())?;
    let mut windows = Vec::new();
    for item in list.iter() {
        if item.is_null() {
            continue;
        }
        // SAFETY: every item of the window list is a CFDictionary of CFString keys; get rule:
        // we retain our own reference while the list lives.
        let dict: CFDictionary<CFString, CFType> =
            unsafe { CFDictionary::wrap_under_get_rule(*item as _) };
        // SAFETY (each `unsafe` below): static CFStrings the framework defines.
        if entry_i64(&dict, unsafe { kCGWindowLayer }) != Some(0) {
            continue;
        }
        let (Some(id), Some(pid), Some(rect)) = (
            entry_i64(&dict, unsafe { kCGWindowNumber }),
            entry_i64(&dict, unsafe { kCGWindowOwnerPID }),
            entry_rect(&dict),
        ) else {
            continue;
        };
        let app = entry_string(&dict, unsafe { kCGWindowOwnerName }).unwrap_or_default();
        // Without Screen Recording the window server withholds titles.
        let title = entry_string(&dict, unsafe { kCGWindowName }).unwrap_or_default();
        windows.push(ListedWindow {
            id: id as u32,
            pid: pid as u32,
            app,
            title,
            rect,
        });
    }
    Ok(windows)
}
