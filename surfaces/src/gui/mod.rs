//! The gui surface: screenshots, windows, pointer and keyboard; and the evidence capturer.

use std::sync::Arc;

use crate::{EvidenceCapture, Surface};

/// The gui surface for this platform, if this build has one.
pub fn surface() -> Option<Arc<dyn Surface>> {
    None
}

/// The evidence capturer for this platform, if this build has one.
pub fn evidence() -> Option<Arc<dyn EvidenceCapture>> {
    None
}
