//! The gui backends, a folder each: what each platform or compositor offers behind the
//! `Desktop` and `Backend` traits (`gui::desktop`).
//!
//! # Layout
//! - [`x11`] (Linux): X11 through x11rb (GetImage, EWMH, RandR, XTEST, XInput2).
//! - [`wayland`] (Linux): wlroots-style compositors through their protocols, with `keymap`
//!   (the virtual keyboard's keymaps) and `sway` (window rectangles and pids from sway's IPC).
//! - [`gnome`] (Linux): GNOME's Mutter through its RemoteDesktop and ScreenCast D-Bus API,
//!   with `consent` (the person's consent, kept in the keychain).
//! - [`portal`] (Linux): any other Wayland compositor through xdg-desktop-portal (KDE's
//!   KWin), with `token` (the portal's restore token, kept in the keychain).
//! - `remote_desktop` (Linux): what the GNOME and portal backends share: input gestures over a
//!   remote-desktop session, AT-SPI windows, their D-Bus runtime, `frames` (the screen-cast
//!   stream read over PipeWire) and `kept` (their items in the keychain).
//! - `kept_conn` (Linux): the process-wide connection every Linux backend keeps and remakes.
//! - `rgb_frame` (Linux): the frame of the backends that capture straight to RGB (wlroots,
//!   GNOME, the portal).
//! - [`macos`]: xcap captures and CoreGraphics events (the backend on macOS only), with
//!   `keys` (characters and key names as virtual key codes).

#[cfg(target_os = "linux")]
pub mod gnome;
#[cfg(target_os = "linux")]
mod kept_conn;
#[cfg(any(target_os = "macos", test))]
pub mod macos;
#[cfg(target_os = "linux")]
pub mod portal;
#[cfg(target_os = "linux")]
mod remote_desktop;
#[cfg(target_os = "linux")]
mod rgb_frame;
#[cfg(target_os = "linux")]
pub mod wayland;
#[cfg(target_os = "linux")]
pub mod x11;
