//! Screen captures through `wlr-screencopy`: one copy per output the area touches, pasted
//! into one frame, converted to RGB.

use super::*;

impl WlConn {
    /// Captures `area` (layout coordinates) from every output it covers. On one output, or on
    /// outputs of one integer scale, the image has that output's own resolution (a scale-2
    /// output gives two pixels per unit); an area across outputs of different scales is
    /// composed at one pixel per unit, each part sampled down from its output's pixels, so that
    /// a pixel of the image still maps back to exactly one layout point.
    pub fn grab(&self, area: Rect) -> DisplayResult<RgbFrame> {
        let Some(manager) = &self.screencopy else {
            return Err(failed(
                "the compositor offers no screencopy: screenshots are not possible here",
            ));
        };
        let mut queue = self.lock_queue();
        self.dispatch_waiting(&mut queue)?;
        let parts: Vec<(WlOutput, Rect, Rect, i32)> = queue
            .state
            .outputs
            .iter()
            .filter_map(|o| {
                let rect = o.rect();
                let part = rect.intersect(&area)?;
                Some((o.proxy.clone()?, rect, part, o.scale.max(1)))
            })
            .collect();
        if parts.is_empty() {
            return Err(failed("the area lies on no output"));
        }
        let scale = parts[0].3;
        let per_unit = if parts.iter().all(|p| p.3 == scale) {
            scale as u32
        } else {
            1
        };
        let mut frame = RgbFrame {
            width: area.width * per_unit,
            height: area.height * per_unit,
            rgb: vec![0; (area.width * per_unit * area.height * per_unit * 3) as usize],
        };
        for (output, rect, part, _) in parts {
            let piece = self.capture_region(
                &mut queue,
                manager,
                &output,
                Rect {
                    x: part.x - rect.x,
                    y: part.y - rect.y,
                    ..part
                },
            )?;
            paste(&mut frame, &piece, &part, &area, per_unit);
        }
        Ok(frame)
    }

    /// One screencopy of `region` (output-local coordinates) of `output`, as RGB.
    pub(super) fn capture_region(
        &self,
        queue: &mut Queue,
        manager: &ZwlrScreencopyManagerV1,
        output: &WlOutput,
        region: Rect,
    ) -> DisplayResult<RgbFrame> {
        queue.state.capture = Capture::default();
        let frame = manager.capture_output_region(
            0,
            output,
            region.x,
            region.y,
            region.width as i32,
            region.height as i32,
            &self.qh,
            (),
        );
        let result = self.copy_frame(queue, &frame);
        frame.destroy();
        result
    }

    pub(super) fn copy_frame(
        &self,
        queue: &mut Queue,
        frame: &ZwlrScreencopyFrameV1,
    ) -> DisplayResult<RgbFrame> {
        let deadline = Instant::now() + REPLY_BOUND;
        // Version 3 ends the buffer descriptions with buffer_done; older ones send one
        // `buffer` event only.
        let described_by_buffer = frame.version() < 3;
        while !(queue.state.capture.described
            || (described_by_buffer && queue.state.capture.shm.is_some()))
        {
            self.wait_event(queue, deadline, "the screencopy buffer description")?;
            if queue.state.capture.failed {
                return Err(failed("the compositor refused the capture"));
            }
        }
        let (format, width, height, stride) =
            queue.state.capture.shm.ok_or_else(|| {
                failed("the compositor offers no shared-memory buffer to copy into")
            })?;
        let format = match format {
            WEnum::Value(format) => format,
            WEnum::Unknown(code) => return Err(failed(format!("unknown pixel format {code:#x}"))),
        };
        let size = stride as usize * height as usize;
        let file = shared_file("computer-screencopy", size)?;
        let pool = self
            .shm
            .create_pool(file.as_fd(), size as i32, &self.qh, ());
        let buffer = pool.create_buffer(
            0,
            width as i32,
            height as i32,
            stride as i32,
            format,
            &self.qh,
            (),
        );
        frame.copy(&buffer);
        let outcome = loop {
            if queue.state.capture.ready {
                break Ok(());
            }
            if queue.state.capture.failed {
                break Err(failed("the compositor failed the capture"));
            }
            if let Err(err) = self.wait_event(queue, deadline, "the captured frame") {
                break Err(err);
            }
        };
        buffer.destroy();
        pool.destroy();
        outcome?;
        let mut raw = vec![0u8; size];
        file.read_exact_at(&mut raw, 0)
            .map_err(|err| failed(format!("reading the captured frame: {err}")))?;
        to_rgb(
            &raw,
            format,
            width,
            height,
            stride,
            queue.state.capture.y_invert,
        )
    }
}

/// Copies `piece` (the capture of `part`, at whatever resolution its output has) into `frame`
/// (the capture of `area` at `per_unit` pixels per layout unit): row by row where the two
/// resolutions agree, else each pixel from the piece's pixel that covers its place.
pub(super) fn paste(
    frame: &mut RgbFrame,
    piece: &RgbFrame,
    part: &Rect,
    area: &Rect,
    per_unit: u32,
) {
    let left = (part.x - area.x) as usize * per_unit as usize;
    let top = (part.y - area.y) as usize * per_unit as usize;
    let width = (part.width * per_unit) as usize;
    let height = (part.height * per_unit) as usize;
    let width = width.min(frame.width as usize - left);
    let height = height.min(frame.height as usize - top);
    if piece.width as usize == width && piece.height as usize >= height {
        for row in 0..height {
            let from = row * piece.width as usize * 3;
            let to = ((top + row) * frame.width as usize + left) * 3;
            frame.rgb[to..to + width * 3].copy_from_slice(&piece.rgb[from..from + width * 3]);
        }
        return;
    }
    if piece.width == 0 || piece.height == 0 || width == 0 || height == 0 {
        return;
    }
    for row in 0..height {
        let source_row = (row * piece.height as usize / height).min(piece.height as usize - 1);
        for column in 0..width {
            let source_column =
                (column * piece.width as usize / width).min(piece.width as usize - 1);
            let from = (source_row * piece.width as usize + source_column) * 3;
            let to = ((top + row) * frame.width as usize + left + column) * 3;
            frame.rgb[to..to + 3].copy_from_slice(&piece.rgb[from..from + 3]);
        }
    }
}

/// Converts a shm buffer in one of the 32-bit formats compositors offer to RGB.
pub(super) fn to_rgb(
    raw: &[u8],
    format: wl_shm::Format,
    width: u32,
    height: u32,
    stride: u32,
    y_invert: bool,
) -> DisplayResult<RgbFrame> {
    // Byte order in memory (little-endian formats): where red, green and blue are.
    let channels = match format {
        wl_shm::Format::Xrgb8888 | wl_shm::Format::Argb8888 => (2, 1, 0),
        wl_shm::Format::Xbgr8888 | wl_shm::Format::Abgr8888 => (0, 1, 2),
        other => {
            return Err(failed(format!(
                "the compositor offers pixel format {other:?}, which this build does not read"
            )));
        }
    };
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for row in 0..height as usize {
        let source = if y_invert {
            height as usize - 1 - row
        } else {
            row
        };
        let line = &raw[source * stride as usize..][..width as usize * 4];
        RgbFrame::append_row(&mut rgb, line, channels);
    }
    Ok(RgbFrame { width, height, rgb })
}

impl Dispatch<ZwlrScreencopyFrameV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrScreencopyFrameV1,
        event: zwlr_screencopy_frame_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let capture = &mut state.capture;
        match event {
            zwlr_screencopy_frame_v1::Event::Buffer {
                format,
                width,
                height,
                stride,
            } => capture.shm = Some((format, width, height, stride)),
            zwlr_screencopy_frame_v1::Event::BufferDone => capture.described = true,
            zwlr_screencopy_frame_v1::Event::Flags { flags } => {
                capture.y_invert = matches!(flags, WEnum::Value(f)
                    if f.contains(zwlr_screencopy_frame_v1::Flags::YInvert));
            }
            zwlr_screencopy_frame_v1::Event::Ready { .. } => capture.ready = true,
            zwlr_screencopy_frame_v1::Event::Failed => capture.failed = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_formats_convert_to_rgb_with_rows_in_order() {
        // Two pixels per row, two rows; XRGB8888 is B,G,R,X in memory.
        let raw = [1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0, 10, 11, 12, 0];
        let frame = to_rgb(&raw, wl_shm::Format::Xrgb8888, 2, 2, 8, false).unwrap();
        assert_eq!(frame.rgb, [3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10]);
        let flipped = to_rgb(&raw, wl_shm::Format::Xbgr8888, 2, 2, 8, true).unwrap();
        assert_eq!(flipped.rgb, [7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6]);
        assert!(to_rgb(&raw, wl_shm::Format::Rgb565, 2, 2, 8, false).is_err());
    }

    #[test]
    fn a_scale_two_piece_is_sampled_to_one_pixel_per_unit_at_its_place() {
        // The area: 4×2 units from (10, 0); the piece covers units 12..14 × 0..2 at scale 2
        // (4×4 pixels, each pixel's red channel its index).
        let area = Rect {
            x: 10,
            y: 0,
            width: 4,
            height: 2,
        };
        let part = Rect {
            x: 12,
            y: 0,
            width: 2,
            height: 2,
        };
        let piece = RgbFrame {
            width: 4,
            height: 4,
            rgb: (0..16u8).flat_map(|i| [i, 0, 0]).collect(),
        };
        let mut frame = RgbFrame {
            width: 4,
            height: 2,
            rgb: vec![255; 4 * 2 * 3],
        };
        paste(&mut frame, &piece, &part, &area, 1);
        let red: Vec<u8> = frame.rgb.chunks(3).map(|px| px[0]).collect();
        // Left half untouched; unit (12, 0) from pixel (0, 0), (13, 0) from (2, 0), (12, 1)
        // from (0, 2), (13, 1) from (2, 2).
        assert_eq!(red, [255, 255, 0, 2, 255, 255, 8, 10]);
        // At the piece's own resolution the rows are copied as they are.
        let mut sharp = RgbFrame {
            width: 8,
            height: 4,
            rgb: vec![255; 8 * 4 * 3],
        };
        paste(&mut sharp, &piece, &part, &area, 2);
        assert_eq!(sharp.rgb[(4 * 3)..(8 * 3)], piece.rgb[..12]);
        assert_eq!(sharp.rgb[(3 * 8 + 4) * 3], 12);
    }
}
