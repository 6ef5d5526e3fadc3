//! The gui surface: screenshots, windows, pointer and keyboard; and the evidence capturer.
//! On Linux the backend is X11 (x11rb: GetImage, EWMH, RandR, XTEST); on macOS it is xcap
//! captures and CoreGraphics events; other platforms have none in this build.
//!
//! # Layout
//! - `desktop`: the platform-neutral contract (`Desktop`, `Backend`) and its types.
//! - `surface`: args, validation, scaling, encoding and evidence, over any backend.
//! - [`keys`]: key-combo parsing (keysyms), shared by every backend.
//! - [`terminal`]: which windows are terminal emulators, and the command line typed into each.
//! - `x11` (Linux), `macos` and `macos_keys` (macOS): the backends.

use std::sync::Arc;

use crate::{EvidenceCapture, Surface};

#[cfg(any(target_os = "linux", target_os = "macos"))]
mod desktop;
pub mod keys;
#[cfg(target_os = "macos")]
pub(crate) mod macos;
#[cfg(any(target_os = "macos", test))]
mod macos_keys;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod surface;
pub mod terminal;
#[cfg(target_os = "linux")]
mod x11;

#[cfg(target_os = "linux")]
type PlatformBackend = x11::Backend;
#[cfg(target_os = "macos")]
type PlatformBackend = macos::Backend;

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn backend() -> Arc<PlatformBackend> {
    // One connection for the surface and the evidence capturer.
    static BACKEND: std::sync::OnceLock<Arc<PlatformBackend>> = std::sync::OnceLock::new();
    BACKEND
        .get_or_init(|| Arc::new(PlatformBackend::new()))
        .clone()
}

/// What the log says about the backend.
#[cfg(target_os = "linux")]
const BACKEND_NAME: &str = "x11 (x11rb: GetImage, EWMH, RandR, XTEST)";
#[cfg(target_os = "macos")]
const BACKEND_NAME: &str = "macos (xcap captures, CoreGraphics events)";

/// The gui surface for this platform, if this build has one. On Linux and macOS it is always
/// returned; whether it can be used now is what its `probe` says (no DISPLAY, X server
/// unreachable, no window server...).
pub fn surface() -> Option<Arc<dyn Surface>> {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        let backend = backend();
        match desktop::Backend::availability(&*backend) {
            crate::Availability::Ready => {
                tracing::info!(backend = BACKEND_NAME, "gui backend chosen")
            }
            crate::Availability::Unavailable { reason, .. } => {
                tracing::info!(backend = BACKEND_NAME, %reason, "gui backend chosen; display not reachable now")
            }
        }
        Some(Arc::new(surface::GuiSurface::new(backend)))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// The evidence capturer for this platform, if this build has one and the screen can be
/// captured now (the tool then lists the `evidence` complication and `return.image`).
pub fn evidence() -> Option<Arc<dyn EvidenceCapture>> {
    #[cfg(target_os = "linux")]
    {
        let backend = backend();
        match desktop::Backend::availability(&*backend) {
            crate::Availability::Ready => Some(Arc::new(surface::Evidence::new(backend))),
            crate::Availability::Unavailable { .. } => None,
        }
    }
    #[cfg(target_os = "macos")]
    {
        // Without Screen Recording permission a capture shows only the desktop wallpaper and
        // the menu bar: offering evidence then would receipt pictures that prove nothing.
        let backend = backend();
        backend
            .can_capture()
            .then(|| Arc::new(surface::Evidence::new(backend)) as Arc<dyn EvidenceCapture>)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// A full-screen PNG exactly as `gui screenshot` makes one at full resolution (grab, convert,
/// encode with fast compression, sha256), for benchmarks. Returns (png bytes, width, height,
/// sha256 hex).
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub fn capture_screen_png() -> Result<(Vec<u8>, u32, u32, String), String> {
    surface::capture_screen_png(backend().as_ref())
}
