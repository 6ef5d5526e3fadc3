//! Acts bound to what was seen (`complications.seen`) on the gui surface: what a screenshot or
//! window listing remembers (the windows with their places and stacking, and for a screenshot
//! its area and image size), the mapping of a screenshot's pixels to screen coordinates, and the
//! check, right before input, that the act's target is still where it was seen.

use async_trait::async_trait;
use computer_ipc::ToolError;
use serde_json::{Map, Value};

use super::desktop::{Desktop, DisplayResult, Rect, WindowInfo};
use crate::kit::snapshot::{self, Seen};
use crate::{ActionFacts, CallContext, Outcome, PreparedAction, Risk, SurfaceError};

/// What one gui observation saw.
#[derive(Debug)]
pub struct GuiSnapshot {
    /// The windows as listed then; None when they could not be listed.
    pub windows: Option<Vec<WindowInfo>>,
    /// Their ids from bottom to top, where the backend tells.
    pub stacking: Option<Vec<u32>>,
    /// A screenshot's image: which area it shows and at what size.
    pub image: Option<Image>,
}

/// A screenshot's geometry: the screen area it shows, and the image's size in pixels.
#[derive(Debug, Clone, Copy)]
pub struct Image {
    pub area: Rect,
    pub width: u32,
    pub height: u32,
}

impl GuiSnapshot {
    /// What the refusal tells the agent to do.
    fn look_again(&self) -> &'static str {
        if self.image.is_some() {
            "take a new screenshot"
        } else {
            "list the windows again"
        }
    }
}

/// The args with a screenshot's pixel coordinates turned into screen coordinates (the centre
/// of the screen area each image pixel covers); other snapshots leave them as given. A pixel
/// off the image is refused, naming the field and the image's size. `points`: the command's
/// coordinate args, as (x, y) pairs.
pub fn map_args(
    seen: &Seen<GuiSnapshot>,
    points: &[(&str, &str)],
    args: &Map<String, Value>,
) -> Result<Map<String, Value>, ToolError> {
    let Some(image) = seen.value.image else {
        return Ok(args.clone());
    };
    let mut mapped = args.clone();
    for (x_key, y_key) in points {
        for (key, size, start, span) in [
            (x_key, image.width, image.area.x, image.area.width),
            (y_key, image.height, image.area.y, image.area.height),
        ] {
            let Some(value) = args.get(*key).and_then(Value::as_i64) else {
                continue;
            };
            if value < 0 || value >= i64::from(size) {
                return Err(ToolError::invalid(format!(
                    "{key}={value} is off snapshot {}'s {}x{} image: with `seen` of a screenshot, \
                     coordinates are that image's pixels (valid {key} is 0..={})",
                    seen.id,
                    image.width,
                    image.height,
                    size - 1
                ))
                .at(format!("args.{key}")));
            }
            let screen = i64::from(start)
                + ((value as f64 + 0.5) * f64::from(span) / f64::from(size)).floor() as i64;
            mapped.insert((*key).to_string(), Value::from(screen));
        }
    }
    Ok(mapped)
}

/// A call bound to a snapshot that failed validation: its error goes only to the snapshot's
/// own agent (another agent is told the snapshot is unknown, as for an id that never was), at
/// the caller check, which runs before policy; it never runs.
pub struct Refusal {
    pub seen: Seen<GuiSnapshot>,
    pub error: ToolError,
}

#[async_trait]
impl PreparedAction for Refusal {
    fn risk(&self) -> Risk {
        Risk::Act
    }

    fn describe(&self) -> String {
        format!("a gui act bound to snapshot {}, refused", self.seen.id)
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts::default()
    }

    fn check_caller(&self, agent: &str) -> Result<(), ToolError> {
        self.seen.check_caller(agent)?;
        Err(self.error.clone())
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        Err(SurfaceError::Tool(self.error))
    }
}

/// Where an act lands, for the check.
#[derive(Debug)]
pub enum Aim {
    /// A pointer action at these screen points.
    Points(Vec<(i32, i32)>),
    /// Keys, which reach the focused window.
    Keys,
    /// Focusing this window.
    Window(u32),
}

/// The window a pointer event at `(x, y)` reaches among `windows`: the highest in `stacking`
/// where the backend tells it; else the focused one if it is there (it is on top in practice),
/// else the last listed (the surface's rule for the target of a pointer action).
fn on_top<'w>(
    windows: &'w [WindowInfo],
    stacking: Option<&[u32]>,
    (x, y): (i32, i32),
) -> Option<&'w WindowInfo> {
    let under: Vec<&WindowInfo> = windows.iter().filter(|w| w.rect.contains(x, y)).collect();
    let height =
        |w: &&WindowInfo| stacking.and_then(|order| order.iter().position(|id| *id == w.id));
    match stacking {
        Some(_) if under.iter().all(|w| height(w).is_some()) => {
            under.iter().max_by_key(|w| height(w)).copied()
        }
        _ => under.iter().find(|w| w.focused).or(under.last()).copied(),
    }
}

fn name(window: &WindowInfo) -> String {
    format!("window {} {:?}", window.id, window.title)
}

/// Refuses the act as `stale` when its target is no longer as `seen` showed it: the window at
/// the point moved, resized, closed or is covered by another now on top; for keys, the focus
/// moved or the focused window moved; for `focus`, the window moved or closed. Read now, right
/// before input is sent.
pub fn check<D: Desktop>(
    conn: &D,
    seen: &Seen<GuiSnapshot>,
    aim: &Aim,
) -> DisplayResult<Result<(), ToolError>> {
    let then = &seen.value;
    let Some(then_windows) = &then.windows else {
        return Ok(Err(ToolError::invalid(format!(
            "snapshot {} was taken when the windows could not be listed, so it cannot tell \
             whether the target moved: leave `seen` out, or bind the act to a `windows` listing",
            seen.id
        ))
        .at(snapshot::SEEN_PATH)));
    };
    let now = conn.windows()?;
    let change = match aim {
        Aim::Points(points) => points_change(then, then_windows, &now, conn.stacking()?, points),
        Aim::Keys => keys_change(then_windows, &now, conn.keyboard_target()?),
        Aim::Window(id) => match then_windows.iter().find(|w| w.id == *id) {
            Some(was) => moved_or_closed(was, &now),
            None => Some(format!("window {id} was not listed")),
        },
    };
    Ok(match change {
        Some(what) => Err(snapshot::stale(format!(
            "{what} since snapshot {}; {}",
            seen.id,
            then.look_again()
        ))),
        None => Ok(()),
    })
}

/// How the window as seen (`was`) differs from the same window now: closed, moved, resized.
fn moved_or_closed(was: &WindowInfo, now: &[WindowInfo]) -> Option<String> {
    let Some(is) = now.iter().find(|w| w.id == was.id) else {
        return Some(format!("{} closed", name(was)));
    };
    let (a, b) = (was.rect, is.rect);
    let moved = (a.x, a.y) != (b.x, b.y);
    let resized = (a.width, a.height) != (b.width, b.height);
    let was = name(was);
    match (moved, resized) {
        (false, false) => None,
        (true, false) => Some(format!(
            "{was} moved from {},{} to {},{}",
            a.x, a.y, b.x, b.y
        )),
        (false, true) => Some(format!(
            "{was} resized from {}x{} to {}x{}",
            a.width, a.height, b.width, b.height
        )),
        (true, true) => Some(format!(
            "{was} moved and resized from {}x{} at {},{} to {}x{} at {},{}",
            a.width, a.height, a.x, a.y, b.width, b.height, b.x, b.y
        )),
    }
}

/// What changed at the points pointer input lands on: the window on top there then moved or
/// closed, another is on top now, or one lies where none did.
fn points_change(
    then: &GuiSnapshot,
    then_windows: &[WindowInfo],
    now: &[WindowInfo],
    now_stacking: Option<Vec<u32>>,
    points: &[(i32, i32)],
) -> Option<String> {
    for &point in points {
        let was = on_top(then_windows, then.stacking.as_deref(), point);
        if let Some(was) = was
            && let Some(what) = moved_or_closed(was, now)
        {
            return Some(what);
        }
        let is = on_top(now, now_stacking.as_deref(), point);
        match (was, is) {
            (Some(was), Some(is)) if was.id != is.id => {
                return Some(format!(
                    "{} is covered at {},{} by {}, now on top",
                    name(was),
                    point.0,
                    point.1,
                    name(is)
                ));
            }
            (None, Some(is)) => {
                return Some(format!(
                    "the point {},{} lay on no window, and {} lies there now",
                    point.0,
                    point.1,
                    name(is)
                ));
            }
            _ => {}
        }
    }
    None
}

/// What changed for keys: the focus moved (`is`: the keyboard's target now), or the focused
/// window moved or closed.
fn keys_change(then_windows: &[WindowInfo], now: &[WindowInfo], is: Option<u32>) -> Option<String> {
    let was = then_windows.iter().find(|w| w.focused);
    match (was, is) {
        (Some(was), _) if is != Some(was.id) => Some(format!(
            "the focus moved from {} to {}",
            name(was),
            is.and_then(|id| now.iter().find(|w| w.id == id))
                .map_or("a window that cannot be told".into(), name)
        )),
        (Some(was), _) => moved_or_closed(was, now),
        (None, Some(id)) => Some(format!(
            "no window had the focus, and {} has it now",
            now.iter()
                .find(|w| w.id == id)
                .map_or(format!("window {id}"), name)
        )),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::snapshot::Snapshots;
    use serde_json::json;

    fn half_size_shot() -> (Snapshots<GuiSnapshot>, String) {
        let store = Snapshots::new("gui");
        let id = store.record(
            "a",
            GuiSnapshot {
                windows: Some(Vec::new()),
                stacking: None,
                image: Some(Image {
                    area: Rect {
                        x: 100,
                        y: 50,
                        width: 800,
                        height: 600,
                    },
                    width: 400,
                    height: 300,
                }),
            },
        );
        (store, id)
    }

    #[test]
    fn screenshot_pixels_map_through_scale_and_origin() {
        let (store, id) = half_size_shot();
        let seen = store.bind(&id).unwrap();
        let args = json!({"x": 10, "y": 299, "button": "left"});
        let mapped = map_args(&seen, &[("x", "y")], args.as_object().unwrap()).unwrap();
        // Pixel 10 covers screen 20..22 of the area: its centre is 21, plus the origin.
        assert_eq!(mapped["x"], json!(121));
        assert_eq!(mapped["y"], json!(50 + 599));
        assert_eq!(mapped["button"], json!("left"));
        let drag = json!({"from_x": 0, "from_y": 0, "to_x": 399, "to_y": 1});
        let mapped = map_args(
            &seen,
            &[("from_x", "from_y"), ("to_x", "to_y")],
            drag.as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(
            (&mapped["from_x"], &mapped["to_x"], &mapped["to_y"]),
            (&json!(101), &json!(100 + 799), &json!(53))
        );
    }

    fn window(id: u32, x: i32, focused: bool) -> WindowInfo {
        WindowInfo {
            id,
            title: format!("w{id}"),
            app: String::new(),
            instance: String::new(),
            pid: None,
            rect: Rect {
                x,
                y: 0,
                width: 100,
                height: 100,
            },
            focused,
            monitor: None,
        }
    }

    #[test]
    fn the_window_on_top_follows_the_stacking_where_it_is_told() {
        let windows = [window(1, 0, false), window(2, 50, true)];
        // Told: 1 above 2, whatever has the focus.
        assert_eq!(
            on_top(&windows, Some(&[2, 1]), (60, 10)).map(|w| w.id),
            Some(1)
        );
        // Not told: the focused one.
        assert_eq!(on_top(&windows, None, (60, 10)).map(|w| w.id), Some(2));
        assert_eq!(
            on_top(&windows, Some(&[2, 1]), (10, 10)).map(|w| w.id),
            Some(1)
        );
        assert!(on_top(&windows, None, (500, 10)).is_none());
    }

    #[test]
    fn a_pixel_off_the_image_names_the_field_and_the_size() {
        let (store, id) = half_size_shot();
        let seen = store.bind(&id).unwrap();
        let args = json!({"x": 400, "y": 0});
        let err = map_args(&seen, &[("x", "y")], args.as_object().unwrap()).unwrap_err();
        assert_eq!(err.path.as_deref(), Some("args.x"));
        assert!(err.message.contains("400x300"), "{}", err.message);
        assert!(err.message.contains("0..=399"), "{}", err.message);
    }
}
