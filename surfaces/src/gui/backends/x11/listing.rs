//! What one listing of windows and monitors reads from the display, turned into the surface's
//! types: the requests sent for a window and their answers.

use x11rb::cookie::Cookie;
use x11rb::protocol::randr;
use x11rb::protocol::res;
use x11rb::protocol::xproto;
use x11rb::rust_connection::RustConnection;

use crate::gui::desktop::{MonitorInfo, Rect, WindowInfo};

/// The window a `_NET_ACTIVE_WINDOW` property names, if any (0 is none).
pub(super) fn active_of(reply: &xproto::GetPropertyReply) -> Option<u32> {
    reply
        .value32()
        .and_then(|mut v| v.next())
        .filter(|&id| id != 0)
}

/// A window's requests of a listing, sent and not yet answered.
pub(super) struct AskedWindow<'c> {
    pub(super) id: u32,
    pub(super) net_name: Cookie<'c, RustConnection, xproto::GetPropertyReply>,
    pub(super) name: Cookie<'c, RustConnection, xproto::GetPropertyReply>,
    pub(super) class: Cookie<'c, RustConnection, xproto::GetPropertyReply>,
    pub(super) pid: Cookie<'c, RustConnection, xproto::GetPropertyReply>,
    pub(super) geometry: Cookie<'c, RustConnection, xproto::GetGeometryReply>,
    pub(super) origin: Cookie<'c, RustConnection, xproto::TranslateCoordinatesReply>,
    pub(super) client_pid: Option<Cookie<'c, RustConnection, res::QueryClientIdsReply>>,
}

/// The monitors RandR tells (`names`: their names asked), or the whole screen as one.
pub(super) fn monitors_of(
    randr_monitors: &[randr::MonitorInfo],
    names: Vec<Cookie<'_, RustConnection, xproto::GetAtomNameReply>>,
    screen: Rect,
) -> Vec<MonitorInfo> {
    let mut monitors = Vec::new();
    for (index, (monitor, name)) in randr_monitors.iter().zip(names).enumerate() {
        let name = name
            .reply()
            .map(|n| String::from_utf8_lossy(&n.name).into_owned())
            .unwrap_or_default();
        monitors.push(MonitorInfo {
            index,
            name,
            rect: Rect {
                x: i32::from(monitor.x),
                y: i32::from(monitor.y),
                width: u32::from(monitor.width),
                height: u32::from(monitor.height),
            },
            primary: monitor.primary,
        });
    }
    if monitors.is_empty() {
        monitors.push(MonitorInfo {
            index: 0,
            name: "screen".into(),
            rect: screen,
            primary: true,
        });
    }
    monitors
}

/// A window as its answers tell it (`active`: the active window's id); None for one that
/// closed between the list and its properties.
pub(super) fn window_of(
    asked: AskedWindow<'_>,
    active: Option<u32>,
    monitors: &[MonitorInfo],
) -> Option<WindowInfo> {
    let AskedWindow {
        id,
        net_name,
        name,
        class,
        pid,
        geometry,
        origin,
        client_pid,
    } = asked;
    let (Ok(geometry), Ok(origin)) = (geometry.reply(), origin.reply()) else {
        return None;
    };
    let text = |r: Result<xproto::GetPropertyReply, _>| {
        r.ok()
            .filter(|r| !r.value.is_empty())
            .map(|r| String::from_utf8_lossy(&r.value).into_owned())
    };
    let title = text(net_name.reply()).or_else(|| text(name.reply()));
    // WM_CLASS is "instance\0class\0"; the class names the application.
    let (instance, app) = text(class.reply())
        .map(|c| {
            let mut parts = c.split('\0').filter(|p| !p.is_empty());
            let instance = parts.next().unwrap_or_default().to_string();
            let class = parts
                .next()
                .map_or_else(|| instance.clone(), str::to_string);
            (instance, class)
        })
        .unwrap_or_default();
    // The pid the server took from the client's socket (XRes) where it has one:
    // `_NET_WM_PID` is a property any client may write, on any window, so a terminal
    // could be made to name a process without a pty (and an approver's window another
    // process). A client the server cannot tell (over TCP) has only its word.
    let told = client_pid
        .and_then(|cookie| cookie.reply().ok())
        .and_then(|reply| {
            reply
                .ids
                .into_iter()
                .find(|id| id.spec.mask.contains(res::ClientIdMask::LOCAL_CLIENT_PID))
                .and_then(|id| id.value.first().copied())
        });
    let pid = told.or_else(|| {
        pid.reply()
            .ok()
            .and_then(|r| r.value32().and_then(|mut v| v.next()))
    });
    let rect = Rect {
        x: i32::from(origin.dst_x),
        y: i32::from(origin.dst_y),
        width: u32::from(geometry.width),
        height: u32::from(geometry.height),
    };
    let (cx, cy) = (
        rect.x + rect.width as i32 / 2,
        rect.y + rect.height as i32 / 2,
    );
    Some(WindowInfo {
        id,
        title: title.unwrap_or_default(),
        app,
        instance,
        pid,
        rect,
        focused: active == Some(id),
        monitor: monitors
            .iter()
            .find(|m| m.rect.contains(cx, cy))
            .map(|m| m.index),
    })
}
