//! The ax surface: accessibility trees over AT-SPI.

use std::sync::Arc;

use crate::Surface;

/// The ax surface for this platform, if this build has one.
pub fn surface() -> Option<Arc<dyn Surface>> {
    None
}
