//! The gui surface: screenshots, windows, pointer and keyboard; and the evidence capturer.
//! On Linux the backend is X11 (x11rb: GetImage, EWMH, RandR, XTEST); other platforms have none
//! in this build.

use std::sync::Arc;

use crate::{EvidenceCapture, Surface};

pub mod keys;
#[cfg(target_os = "linux")]
mod surface;
#[cfg(target_os = "linux")]
mod x11;

#[cfg(target_os = "linux")]
fn backend() -> Arc<x11::Backend> {
    // One connection for the surface and the evidence capturer.
    static BACKEND: std::sync::OnceLock<Arc<x11::Backend>> = std::sync::OnceLock::new();
    BACKEND
        .get_or_init(|| Arc::new(x11::Backend::new()))
        .clone()
}

/// The gui surface for this platform, if this build has one. On Linux it is always returned;
/// whether it can be used now is what its `probe` says (no DISPLAY, X server unreachable...).
pub fn surface() -> Option<Arc<dyn Surface>> {
    #[cfg(target_os = "linux")]
    {
        let backend = backend();
        match backend.availability() {
            crate::Availability::Ready => {
                tracing::info!(
                    backend = "x11 (x11rb: GetImage, EWMH, RandR, XTEST)",
                    "gui backend chosen"
                )
            }
            crate::Availability::Unavailable { reason, .. } => {
                tracing::info!(backend = "x11 (x11rb)", %reason, "gui backend chosen; display not reachable now")
            }
        }
        Some(Arc::new(surface::GuiSurface::new(backend)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The evidence capturer for this platform, if this build has one and the display is reachable
/// now (the tool then lists the `evidence` complication and `return.image`).
pub fn evidence() -> Option<Arc<dyn EvidenceCapture>> {
    #[cfg(target_os = "linux")]
    {
        let backend = backend();
        match backend.availability() {
            crate::Availability::Ready => Some(Arc::new(surface::X11Evidence::new(backend))),
            crate::Availability::Unavailable { .. } => None,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// A full-screen PNG exactly as `gui screenshot` makes one at full resolution (grab, convert,
/// encode with fast compression, sha256), for benchmarks. Returns (png bytes, width, height,
/// sha256 hex).
#[cfg(target_os = "linux")]
pub fn capture_screen_png() -> Result<(Vec<u8>, u32, u32, String), String> {
    surface::capture_screen_png(&backend())
}
