//! `gui screenshot`: its args (a monitor, a window or a region), their checks, the shot scaled
//! and encoded into an artifact and recorded as a snapshot; and the scaling and encoding that
//! evidence shots share.

use std::io::Write;
use std::path::PathBuf;

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{
    Act, Call, Capability, Command, Failure, Reach, Running, display_failed, fields, target_window,
    unknown_window,
};
use crate::gui::desktop::{Desktop, DisplayResult, Rect, Rgb};
use crate::gui::seen::{self, GuiSnapshot};
use crate::{Artifact, CallContext, InlineImage, Outcome, Risk, SurfaceError, TargetFacts};

/// The default long side of a screenshot: big enough to read, small enough for a model.
const DEFAULT_MAX_DIM: u32 = 1280;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Region {
    x: i32,
    y: i32,
    width: u32,
    height: u32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Png,
    Jpeg,
}

/// one of monitor|window|region; image px*scale+origin = screen px
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotArgs {
    #[serde(default)]
    monitor: Option<usize>,
    /// id
    #[serde(default)]
    window: Option<u32>,
    #[serde(default)]
    region: Option<Region>,
    /// =1280
    #[serde(default)]
    max_dim: Option<u32>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    quality: Option<u8>,
}

/// A screenshot, checked: the screen area it shows and how it is encoded.
#[derive(Debug)]
pub struct Screenshot {
    area: Rect,
    max_dim: u32,
    jpeg_quality: Option<u8>,
    /// Whether the image goes back inline too (`complications.return.image`).
    inline: bool,
}

impl Command for Screenshot {
    const NAME: &'static str = "screenshot";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "path", "sha256", "bytes", "format", "width", "height", "scale", "origin_x", "origin_y",
        "snapshot",
    ];
    const NEEDS: &'static [Capability] = &[Capability::Capture];
    type Args = ScreenshotArgs;

    fn prepare<D: Desktop>(a: ScreenshotArgs, call: &Call<'_, D>) -> Result<Screenshot, ToolError> {
        checked(a, call)
    }
}

/// The shot the args ask for, checked against the screen as it is.
fn checked<D: Desktop>(a: ScreenshotArgs, call: &Call<'_, D>) -> Result<Screenshot, ToolError> {
    let conn = call.conn;
    let chosen = [a.monitor.is_some(), a.window.is_some(), a.region.is_some()];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err(ToolError::invalid(
            "give at most one of monitor, window and region (none: the whole screen)",
        )
        .at("args")
        .valid(["monitor", "window", "region"]));
    }
    let screen = call.screen()?;
    let area = if let Some(index) = a.monitor {
        let monitors = conn.monitors().map_err(display_failed)?;
        monitors.get(index).map(|m| m.rect).ok_or_else(|| {
            ToolError::invalid(format!(
                "no monitor {index}: this screen has {}",
                monitors.len()
            ))
            .at("args.monitor")
            .valid((0..monitors.len()).map(|i| i.to_string()))
        })?
    } else if let Some(id) = a.window {
        let windows = conn.windows().map_err(display_failed)?;
        let window = windows
            .iter()
            .find(|w| w.id == id)
            .ok_or_else(|| unknown_window(id, windows.iter().map(|w| w.id), "args.window"))?;
        window.rect
    } else if let Some(r) = &a.region {
        if r.width == 0 || r.height == 0 {
            return Err(
                ToolError::invalid("region width and height must be at least 1").at("args.region"),
            );
        }
        Rect {
            x: r.x,
            y: r.y,
            width: r.width,
            height: r.height,
        }
    } else {
        screen
    };
    let area = screen.intersect(&area).ok_or_else(|| {
        ToolError::invalid(format!(
            "the area {}x{} at ({},{}) is off the {}x{} screen",
            area.width, area.height, area.x, area.y, screen.width, screen.height
        ))
        .at(if a.window.is_some() {
            "args.window"
        } else {
            "args.region"
        })
    })?;
    let max_dim = a.max_dim.unwrap_or(DEFAULT_MAX_DIM);
    if max_dim < 16 {
        return Err(ToolError::invalid("max_dim must be at least 16").at("args.max_dim"));
    }
    let jpeg_quality = match (a.format.unwrap_or(Format::Png), a.quality) {
        (Format::Png, Some(_)) => {
            return Err(ToolError::invalid("quality applies to jpeg only").at("args.quality"));
        }
        (Format::Png, None) => None,
        (Format::Jpeg, Some(q)) if !(1..=100).contains(&q) => {
            return Err(ToolError::invalid("quality must be 1..=100").at("args.quality"));
        }
        (Format::Jpeg, q) => Some(q.unwrap_or(80)),
    };
    let inline = call
        .complications
        .return_budget
        .as_ref()
        .and_then(|r| r.image)
        .unwrap_or(false);
    Ok(Screenshot {
        area,
        max_dim,
        jpeg_quality,
        inline,
    })
}

impl<D: Desktop> Act<D> for Screenshot {
    fn describe(&self) -> String {
        let area = self.area;
        format!(
            "screenshot of {}x{} at ({},{})",
            area.width, area.height, area.x, area.y
        )
    }

    fn reach(&self) -> Reach {
        Reach::Nothing
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        // A shot of a window reads that window; any other reads the screen.
        match window {
            Some(_) => target_window(conn, None, window),
            None => Ok(None),
        }
    }

    fn perform(self: Box<Self>, conn: &D, running: &Running<'_>) -> Result<Outcome, Failure> {
        let Screenshot {
            area,
            max_dim,
            jpeg_quality,
            inline,
        } = *self;
        let ctx = running.ctx;
        let rgb = conn.to_rgb(&conn.grab(area)?);
        // The windows as the shot shows them, for acts aimed at it. A listing that fails
        // does not fail the shot; acts bound to it are then refused.
        let windows = conn.windows().ok();
        let stacking = conn.stacking().ok().flatten();
        let (rgb, _) = downscale(rgb, max_dim);
        // Screen units per image pixel along the long side: the downscale factor on X11;
        // on a Retina display the capture has two pixels per point to begin with.
        let scale =
            f64::from(area.width.max(area.height)) / f64::from(rgb.width.max(rgb.height).max(1));
        let (bytes, mime, ext) = encode(&rgb, jpeg_quality)?;
        let artifact = write_artifact(
            ctx,
            &format!("{}.screenshot.{ext}", ctx.call_id),
            "screenshot",
            &bytes,
        )?;
        let value = json!({
            "path": artifact.path,
            "sha256": artifact.sha256,
            "bytes": artifact.bytes,
            "format": ext,
            "width": rgb.width,
            "height": rgb.height,
            "scale": (scale * 1e4).round() / 1e4,
            "origin_x": area.x,
            "origin_y": area.y,
            "snapshot": running.snapshots.record(&ctx.agent, GuiSnapshot {
                windows,
                stacking,
                image: Some(seen::Image {
                    area,
                    width: rgb.width,
                    height: rgb.height,
                }),
            }),
        });
        Ok(Outcome {
            success: true,
            fields: fields(value),
            inline_image: inline.then(|| InlineImage {
                mime_type: mime.into(),
                bytes,
            }),
            artifacts: vec![artifact],
            ..Outcome::default()
        })
    }
}

/// Scales `rgb` so its long side is at most `max_dim`. Returns the image and the scale (screen
/// pixels per image pixel, 1 when unscaled).
fn downscale(rgb: Rgb, max_dim: u32) -> (Rgb, f64) {
    let long = rgb.width.max(rgb.height);
    if long <= max_dim {
        return (rgb, 1.0);
    }
    let scale = f64::from(long) / f64::from(max_dim);
    let width = ((f64::from(rgb.width) / scale).round() as u32).max(1);
    let height = ((f64::from(rgb.height) / scale).round() as u32).max(1);
    // Area averaging: each image pixel is the mean of the screen pixels it covers. Cheaper than
    // a filtered resize and as legible for screen content at these ratios.
    let span = |out: u32, size: u32, src: u32| -> Vec<(usize, usize)> {
        (0..out)
            .map(|i| {
                let start = (u64::from(i) * u64::from(src) / u64::from(size)) as usize;
                let end = ((u64::from(i) + 1) * u64::from(src) / u64::from(size)) as usize;
                (start, end.max(start + 1).min(src as usize))
            })
            .collect()
    };
    let xs = span(width, width, rgb.width);
    let ys = span(height, height, rgb.height);
    let stride = rgb.width as usize * 3;
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    let mut sums = vec![0u32; width as usize * 3];
    for &(y0, y1) in &ys {
        sums.iter_mut().for_each(|s| *s = 0);
        for row in rgb.pixels[y0 * stride..y1 * stride].chunks_exact(stride) {
            for (ox, &(x0, x1)) in xs.iter().enumerate() {
                let sum = &mut sums[ox * 3..ox * 3 + 3];
                for px in row[x0 * 3..x1 * 3].chunks_exact(3) {
                    sum[0] += u32::from(px[0]);
                    sum[1] += u32::from(px[1]);
                    sum[2] += u32::from(px[2]);
                }
            }
        }
        for (ox, &(x0, x1)) in xs.iter().enumerate() {
            let n = ((x1 - x0) * (y1 - y0)) as u32;
            for c in 0..3 {
                pixels.push(((sums[ox * 3 + c] + n / 2) / n) as u8);
            }
        }
    }
    (
        Rgb {
            width,
            height,
            pixels,
        },
        scale,
    )
}

/// Encodes as PNG (fast compression) or JPEG; returns the bytes, MIME type and extension.
pub fn encode(
    rgb: &Rgb,
    jpeg_quality: Option<u8>,
) -> Result<(Vec<u8>, &'static str, &'static str), SurfaceError> {
    use image::ImageEncoder;
    let mut bytes = Vec::with_capacity(rgb.pixels.len() / 8);
    let failed = |err: image::ImageError| SurfaceError::Failed {
        message: format!("could not encode the screenshot: {err}"),
    };
    match jpeg_quality {
        None => {
            image::codecs::png::PngEncoder::new_with_quality(
                &mut bytes,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            )
            .write_image(
                &rgb.pixels,
                rgb.width,
                rgb.height,
                image::ExtendedColorType::Rgb8,
            )
            .map_err(failed)?;
            Ok((bytes, "image/png", "png"))
        }
        Some(quality) => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality)
                .write_image(
                    &rgb.pixels,
                    rgb.width,
                    rgb.height,
                    image::ExtendedColorType::Rgb8,
                )
                .map_err(failed)?;
            Ok((bytes, "image/jpeg", "jpeg"))
        }
    }
}

/// Writes `bytes` to `file_name` in the call's artifact directory (mode 0600), within the
/// artifacts quota, and describes it as an artifact.
pub fn write_artifact(
    ctx: &CallContext,
    file_name: &str,
    name: &str,
    bytes: &[u8],
) -> Result<Artifact, SurfaceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = &ctx.artifact_dir;
    ctx.artifact_quota
        .reserve(bytes.len() as u64)
        .map_err(|full| SurfaceError::Failed {
            message: format!("{name} not written: {full}"),
        })?;
    std::fs::create_dir_all(dir)
        .map_err(|e| SurfaceError::io(format!("create artifact dir {}", dir.display()), e))?;
    let path: PathBuf = dir.join(file_name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| SurfaceError::io(format!("create {}", path.display()), e))?;
    file.write_all(bytes)
        .map_err(|e| SurfaceError::io(format!("write {}", path.display()), e))?;
    Ok(Artifact {
        name: name.into(),
        sha256: hex::encode(Sha256::digest(bytes)),
        bytes: bytes.len() as u64,
        path,
        truncated: false,
        cut: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscale_keeps_the_long_side_within_max_dim() {
        let rgb = Rgb {
            width: 1920,
            height: 1080,
            pixels: vec![7; 1920 * 1080 * 3],
        };
        let (scaled, scale) = downscale(rgb, 1280);
        assert_eq!((scaled.width, scaled.height), (1280, 720));
        assert!((scale - 1.5).abs() < 1e-9);
        assert_eq!(scaled.pixels.len(), 1280 * 720 * 3);
    }

    #[test]
    fn downscale_averages_the_covered_pixels() {
        // Left half red, right half blue, 40x20 down to 20x10: no colour bleeds across.
        let mut pixels = Vec::new();
        for _y in 0..20 {
            for x in 0..40 {
                pixels.extend_from_slice(if x < 20 { &[255, 0, 0] } else { &[0, 0, 255] });
            }
        }
        let (scaled, scale) = downscale(
            Rgb {
                width: 40,
                height: 20,
                pixels,
            },
            20,
        );
        assert_eq!((scaled.width, scaled.height, scale), (20, 10, 2.0));
        assert_eq!(&scaled.pixels[..3], &[255, 0, 0]);
        assert_eq!(&scaled.pixels[57..60], &[0, 0, 255]);
    }

    #[test]
    fn small_images_are_not_scaled() {
        let rgb = Rgb {
            width: 10,
            height: 20,
            pixels: vec![0; 600],
        };
        let (same, scale) = downscale(rgb, 1280);
        assert_eq!((same.width, same.height, scale), (10, 20, 1.0));
    }
}
