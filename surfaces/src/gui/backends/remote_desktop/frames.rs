//! The frames of a screen-cast stream, read over PipeWire: a thread runs a PipeWire main loop
//! with one input stream connected to the node Mutter (or the xdg-desktop-portal, through the
//! PipeWire remote it opened) announced, and keeps the latest frame (the compositor sends one
//! whenever the screen changes). A screenshot is the latest frame, cut to the
//! area asked for and converted to RGB.

use std::io::Cursor;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pipewire::spa::param::ParamType;
use pipewire::spa::param::format::{FormatProperties, MediaSubtype, MediaType};
use pipewire::spa::param::format_utils;
use pipewire::spa::param::video::{VideoFormat, VideoInfoRaw};
use pipewire::spa::pod::serialize::PodSerializer;
use pipewire::spa::pod::{self, Pod};
use pipewire::spa::utils::{Direction, Fraction, Rectangle, SpaTypes};
use pipewire::stream::{StreamFlags, StreamRc};

use super::super::rgb_frame::RgbFrame;
use crate::gui::desktop::Rect;

/// A frame as PipeWire delivered it: 4 bytes a pixel, rows `stride` bytes apart.
pub struct RawFrame {
    pub width: u32,
    pub height: u32,
    stride: usize,
    format: VideoFormat,
    data: Vec<u8>,
}

impl RawFrame {
    /// The part of the frame showing `area` (logical coordinates) of `monitor`, as RGB. The
    /// frame may hold more pixels than the monitor has logical units (a scaled monitor).
    pub fn crop(&self, monitor: Rect, area: Rect) -> Result<RgbFrame, String> {
        if monitor.intersect(&area) != Some(area) {
            return Err(format!(
                "the area {}x{} at ({},{}) is not inside the recorded monitor {}x{} at ({},{})",
                area.width,
                area.height,
                area.x,
                area.y,
                monitor.width,
                monitor.height,
                monitor.x,
                monitor.y
            ));
        }
        let scale_x = f64::from(self.width) / f64::from(monitor.width.max(1));
        let scale_y = f64::from(self.height) / f64::from(monitor.height.max(1));
        let to_pixels = |units: i64, scale: f64, limit: u32| -> u32 {
            ((units as f64 * scale).round() as i64).clamp(0, i64::from(limit)) as u32
        };
        let x0 = to_pixels(i64::from(area.x - monitor.x), scale_x, self.width);
        let y0 = to_pixels(i64::from(area.y - monitor.y), scale_y, self.height);
        let x1 = to_pixels(
            i64::from(area.x - monitor.x) + i64::from(area.width),
            scale_x,
            self.width,
        );
        let y1 = to_pixels(
            i64::from(area.y - monitor.y) + i64::from(area.height),
            scale_y,
            self.height,
        );
        let (width, height) = ((x1 - x0).max(1), (y1 - y0).max(1));
        let channels = match self.format {
            VideoFormat::BGRx | VideoFormat::BGRA => (2, 1, 0),
            VideoFormat::RGBx | VideoFormat::RGBA => (0, 1, 2),
            VideoFormat::xRGB | VideoFormat::ARGB => (1, 2, 3),
            VideoFormat::xBGR | VideoFormat::ABGR => (3, 2, 1),
            other => return Err(format!("frames in an unexpected format ({other:?})")),
        };
        let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
        for row in y0..y0 + height {
            let start = row as usize * self.stride + x0 as usize * 4;
            let line = self
                .data
                .get(start..start + width as usize * 4)
                .ok_or("a frame shorter than its size says")?;
            RgbFrame::append_row(&mut rgb, line, channels);
        }
        Ok(RgbFrame { width, height, rgb })
    }
}

#[derive(Default)]
struct Latest {
    frame: Option<Arc<RawFrame>>,
    /// Why the stream stopped, once it has.
    ended: Option<String>,
}

#[derive(Default)]
struct Shared {
    latest: Mutex<Latest>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn end(&self, why: String) {
        self.lock().ended.get_or_insert(why);
        self.arrived.notify_all();
    }
}

/// Why the PipeWire side of a stream could not be set up (or stopped).
#[derive(Debug, thiserror::Error)]
enum PipeWireError {
    /// A step of the set-up failed: the main loop, the context, the stream, its listener, the
    /// formats it accepts, its connection to the node.
    #[error("PipeWire {step}: {reason}")]
    Step { step: String, reason: String },
    #[error("cannot use the PipeWire remote the portal opened: {0}")]
    Remote(String),
    #[error("cannot reach the PipeWire daemon (is pipewire running on XDG_RUNTIME_DIR?): {0}")]
    NoDaemon(String),
}

/// The error of the set-up step `step`.
fn step_failed(step: &str) -> impl Fn(pipewire::Error) -> PipeWireError + '_ {
    move |err| PipeWireError::Step {
        step: step.to_string(),
        reason: err.to_string(),
    }
}

/// The PipeWire side of one screen-cast stream; its thread stops when this is dropped.
pub struct FrameStream {
    shared: Arc<Shared>,
    quit: pipewire::channel::Sender<()>,
}

impl FrameStream {
    /// Connects to PipeWire node `node` on a thread of its own, through `remote` (the PipeWire
    /// connection the portal opened for this session, which sees only the session's nodes) or
    /// else the PipeWire daemon on `XDG_RUNTIME_DIR`; fails if the stream cannot be set up (no
    /// PipeWire daemon, an unknown node).
    pub fn connect(node: u32, remote: Option<OwnedFd>) -> Result<FrameStream, String> {
        let shared = Arc::new(Shared::default());
        let (quit, quit_receiver) = pipewire::channel::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
        let for_thread = shared.clone();
        std::thread::Builder::new()
            .name("gnome-pipewire".into())
            .spawn(move || {
                let ended = run_stream(node, remote, &for_thread, quit_receiver, &ready);
                let why = match ended {
                    Ok(()) => "the PipeWire stream was stopped".to_string(),
                    Err(err) => err.to_string(),
                };
                let _ = ready.send(Err(why.clone()));
                for_thread.end(why);
            })
            .map_err(|err| format!("no thread for the PipeWire stream: {err}"))?;
        match is_ready.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(FrameStream { shared, quit }),
            Ok(Err(why)) => Err(why),
            Err(_) => Err("the PipeWire stream was not set up within 5 s".into()),
        }
    }

    /// Waits (at most `bound`) until the first frame has arrived.
    pub fn wait_first(&self, bound: Duration) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        let mut latest = self.shared.lock();
        loop {
            if latest.frame.is_some() {
                return Ok(());
            }
            if let Some(why) = &latest.ended {
                return Err(why.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("the compositor sent no frame within {bound:?}"));
            }
            latest = self
                .shared
                .arrived
                .wait_timeout(latest, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The latest frame the compositor sent (one for every change of the screen).
    pub fn latest(&self) -> Result<Arc<RawFrame>, String> {
        let latest = self.shared.lock();
        match (&latest.frame, &latest.ended) {
            (_, Some(why)) => Err(why.clone()),
            (Some(frame), None) => Ok(frame.clone()),
            (None, None) => Err("the compositor has sent no frame yet".into()),
        }
    }

    /// The stream's size in pixels, once a frame has arrived.
    pub fn size(&self) -> Option<(u32, u32)> {
        self.shared
            .lock()
            .frame
            .as_ref()
            .map(|f| (f.width, f.height))
    }
}

impl Drop for FrameStream {
    fn drop(&mut self) {
        let _ = self.quit.send(());
    }
}

/// Runs the stream until told to quit; reports set-up through `ready`.
fn run_stream(
    node: u32,
    remote: Option<OwnedFd>,
    shared: &Arc<Shared>,
    quit: pipewire::channel::Receiver<()>,
    ready: &std::sync::mpsc::SyncSender<Result<(), String>>,
) -> Result<(), PipeWireError> {
    pipewire::init();
    let main_loop = pipewire::main_loop::MainLoopRc::new(None).map_err(step_failed("main loop"))?;
    let context =
        pipewire::context::ContextRc::new(&main_loop, None).map_err(step_failed("context"))?;
    let core = connect_core(&context, remote)?;
    let stream = StreamRc::new(
        core.clone(),
        "computer-gui",
        pipewire::properties::properties! {
            *pipewire::keys::MEDIA_TYPE => "Video",
            *pipewire::keys::MEDIA_CATEGORY => "Capture",
            *pipewire::keys::MEDIA_ROLE => "Screen",
        },
    )
    .map_err(step_failed("stream"))?;
    let _listener = listen(&stream, shared)?;
    let formats = video_formats()?;
    let mut params = [
        Pod::from_bytes(&formats).ok_or_else(|| PipeWireError::Step {
            step: "format".into(),
            reason: "not a pod".into(),
        })?,
    ];
    stream
        .connect(
            Direction::Input,
            Some(node),
            StreamFlags::AUTOCONNECT | StreamFlags::MAP_BUFFERS,
            &mut params,
        )
        .map_err(step_failed(&format!("stream to node {node}")))?;
    let quitting = main_loop.clone();
    let _quit = quit.attach(main_loop.loop_(), move |()| quitting.quit());
    let _ = ready.send(Ok(()));
    main_loop.run();
    Ok(())
}

/// The PipeWire connection: through `remote` (the one the portal opened), else to the daemon
/// on `XDG_RUNTIME_DIR`.
fn connect_core(
    context: &pipewire::context::ContextRc,
    remote: Option<OwnedFd>,
) -> Result<pipewire::core::CoreRc, PipeWireError> {
    match remote {
        Some(fd) => context
            .connect_fd_rc(fd, None)
            .map_err(|err| PipeWireError::Remote(err.to_string())),
        None => context
            .connect_rc(None)
            .map_err(|err| PipeWireError::NoDaemon(err.to_string())),
    }
}

/// Listens on `stream`: its format as it is negotiated, each frame it delivers kept in
/// `shared` as the latest, and an error ending it.
fn listen(
    stream: &StreamRc,
    shared: &Arc<Shared>,
) -> Result<pipewire::stream::StreamListener<VideoInfoRaw>, PipeWireError> {
    let on_frame = shared.clone();
    let on_state = shared.clone();
    stream
        .add_local_listener_with_user_data(VideoInfoRaw::default())
        .state_changed(move |_, _, _, new| {
            if let pipewire::stream::StreamState::Error(why) = new {
                on_state.end(format!("the PipeWire stream failed: {why}"));
            }
        })
        .param_changed(|_, format, id, param| {
            let Some(param) = param else { return };
            if id != ParamType::Format.as_raw() {
                return;
            }
            if let Ok((MediaType::Video, MediaSubtype::Raw)) = format_utils::parse_format(param) {
                let _ = format.parse(param);
            }
        })
        .process(move |stream, format| {
            if let Some(raw) = take_frame(stream, format) {
                on_frame.lock().frame = Some(Arc::new(raw));
                on_frame.arrived.notify_all();
            }
        })
        .register()
        .map_err(step_failed("stream listener"))
}

/// The frame in the stream's next buffer, copied out; None for no buffer or an empty one.
fn take_frame(stream: &pipewire::stream::Stream, format: &VideoInfoRaw) -> Option<RawFrame> {
    let mut buffer = stream.dequeue_buffer()?;
    let data = buffer.datas_mut().first_mut()?;
    let size = format.size();
    let chunk = data.chunk();
    let (offset, length, stride) = (
        chunk.offset() as usize,
        chunk.size() as usize,
        chunk.stride(),
    );
    let stride = if stride > 0 {
        stride as usize
    } else {
        size.width as usize * 4
    };
    let frame = data.data()?.get(offset..offset + length)?;
    if size.width == 0 || frame.len() < stride * size.height as usize {
        // An empty buffer: Mutter sends those when only the cursor moved.
        return None;
    }
    Some(RawFrame {
        width: size.width,
        height: size.height,
        stride,
        format: format.format(),
        data: frame.to_vec(),
    })
}

/// The formats the stream accepts, as a serialized pod: raw video in any 4-byte RGB order, at
/// any size and frame rate.
fn video_formats() -> Result<Vec<u8>, PipeWireError> {
    let formats = pod::object!(
        SpaTypes::ObjectParamFormat,
        ParamType::EnumFormat,
        pod::property!(FormatProperties::MediaType, Id, MediaType::Video),
        pod::property!(FormatProperties::MediaSubtype, Id, MediaSubtype::Raw),
        pod::property!(
            FormatProperties::VideoFormat,
            Choice,
            Enum,
            Id,
            VideoFormat::BGRx,
            VideoFormat::BGRx,
            VideoFormat::BGRA,
            VideoFormat::RGBx,
            VideoFormat::RGBA,
            VideoFormat::xRGB,
            VideoFormat::ARGB,
            VideoFormat::xBGR,
            VideoFormat::ABGR
        ),
        pod::property!(
            FormatProperties::VideoSize,
            Choice,
            Range,
            Rectangle,
            Rectangle {
                width: 1920,
                height: 1080
            },
            Rectangle {
                width: 1,
                height: 1
            },
            Rectangle {
                width: 16384,
                height: 16384
            }
        ),
        pod::property!(
            FormatProperties::VideoFramerate,
            Choice,
            Range,
            Fraction,
            Fraction { num: 60, denom: 1 },
            Fraction { num: 0, denom: 1 },
            Fraction {
                num: 1000,
                denom: 1
            }
        ),
    );
    let bytes = PodSerializer::serialize(Cursor::new(Vec::new()), &pod::Value::Object(formats))
        .map_err(|err| PipeWireError::Step {
            step: "format".into(),
            reason: format!("{err:?}"),
        })?
        .0
        .into_inner();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_of_a_bgrx_frame_is_the_area_in_rgb_at_the_frame_scale() {
        // 4x2 pixels for a 2x1 monitor: two pixels per unit. Each pixel's blue byte is its
        // index, so the cut shows which pixels it took.
        let mut data = Vec::new();
        for i in 0..8u8 {
            data.extend_from_slice(&[i, 100, 200, 0]);
        }
        let frame = RawFrame {
            width: 4,
            height: 2,
            stride: 16,
            format: VideoFormat::BGRx,
            data,
        };
        let monitor = Rect {
            x: 10,
            y: 0,
            width: 2,
            height: 1,
        };
        let right = Rect {
            x: 11,
            y: 0,
            width: 1,
            height: 1,
        };
        let cut = frame.crop(monitor, right).unwrap();
        assert_eq!((cut.width, cut.height), (2, 2));
        assert_eq!(
            cut.rgb,
            vec![200, 100, 2, 200, 100, 3, 200, 100, 6, 200, 100, 7]
        );
        let outside = Rect { x: 0, ..right };
        assert!(
            frame
                .crop(monitor, outside)
                .unwrap_err()
                .contains("not inside")
        );
    }
}
