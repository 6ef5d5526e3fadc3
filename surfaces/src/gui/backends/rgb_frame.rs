//! A capture already in 8-bit RGB: the frame of the backends that convert pixels while they
//! capture (wlroots' screencopy, the screen-cast stream of GNOME and the portal), with the
//! comparison and conversion their `Desktop` impls answer with.

use crate::gui::desktop::Rgb;

/// A captured area as 8-bit RGB, three bytes a pixel, rows one after another.
#[derive(Debug, PartialEq, Eq)]
pub struct RgbFrame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl RgbFrame {
    /// Appends a row of 4-byte pixels (`line`) as RGB, taking each pixel's red, green and blue
    /// from the byte offsets `channels` names (the pixel formats of compositors and PipeWire
    /// differ only in where those three sit).
    pub fn append_row(rgb: &mut Vec<u8>, line: &[u8], channels: (usize, usize, usize)) {
        let (r, g, b) = channels;
        for pixel in line.chunks_exact(4) {
            rgb.extend_from_slice(&[pixel[r], pixel[g], pixel[b]]);
        }
    }

    /// The same frame as the surface keeps it.
    pub fn to_rgb(&self) -> Rgb {
        Rgb {
            width: self.width,
            height: self.height,
            pixels: self.rgb.clone(),
        }
    }
}
