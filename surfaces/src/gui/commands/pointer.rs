//! The pointer commands `move`, `click`, `drag` and `scroll`: their args, the checks that their
//! points lie on the screen, where they land, and the input they send. One file because they
//! share those checks and what they tell the run about where they land.

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::json;

use super::{Act, Call, Failure, Reach, Running, done, target_window};
use crate::gui::desktop::{Button, Desktop, DisplayResult, Rect};
use crate::gui::read_back::Aim;
use crate::{CommandSpec, Outcome, Risk, TargetFacts, decode_args};

pub const MOVE: CommandSpec = CommandSpec::of::<MoveArgs>("move", Risk::Act);
pub const CLICK: CommandSpec = CommandSpec::of::<ClickArgs>("click", Risk::Act);
pub const DRAG: CommandSpec = CommandSpec::of::<DragArgs>("drag", Risk::Act);
pub const SCROLL: CommandSpec = CommandSpec::of::<ScrollArgs>("scroll", Risk::Act);

// Every act ends with what its read-back found (`effect`, `effect_evidence`).
pub const MOVE_FIELDS: &[&str] = &["x", "y", "effect", "effect_evidence"];
pub const CLICK_FIELDS: &[&str] = &["x", "y", "button", "count", "effect", "effect_evidence"];
pub const DRAG_FIELDS: &[&str] = &[
    "from_x",
    "from_y",
    "to_x",
    "to_y",
    "button",
    "effect",
    "effect_evidence",
];
pub const SCROLL_FIELDS: &[&str] = &["x", "y", "dx", "dy", "effect", "effect_evidence"];

// The coordinate args, as (x, y) pairs: with `seen` of a screenshot they are its pixels.
pub const POINT: &[(&str, &str)] = &[("x", "y")];
pub const DRAG_POINTS: &[(&str, &str)] = &[("from_x", "from_y"), ("to_x", "to_y")];

/// Most notches per scroll and clicks per click: more is a mistake, not a request.
const MAX_NOTCHES: i32 = 100;
const MAX_CLICKS: u32 = 10;

/// screen px
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MoveArgs {
    x: i32,
    y: i32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClickArgs {
    #[serde(default)]
    x: Option<i32>,
    #[serde(default)]
    y: Option<i32>,
    #[serde(default)]
    button: Option<Button>,
    /// =1
    #[serde(default)]
    count: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct DragArgs {
    from_x: i32,
    from_y: i32,
    to_x: i32,
    to_y: i32,
    #[serde(default)]
    button: Option<Button>,
}

/// dx,dy notches (+right/down)
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScrollArgs {
    #[serde(default)]
    dx: i32,
    #[serde(default)]
    dy: i32,
    #[serde(default)]
    x: Option<i32>,
    #[serde(default)]
    y: Option<i32>,
}

/// Checks that a point lies on the screen, naming the field and the valid range.
fn on_screen(screen: Rect, x: i32, y: i32, x_path: &str, y_path: &str) -> Result<(), ToolError> {
    // The screen starts at 0,0 on X11; on macOS a display left of or above the main one has
    // negative coordinates.
    let check = |value: i32, start: i32, size: u32, path: &str, axis: &str| {
        let end = i64::from(start) + i64::from(size) - 1;
        if i64::from(value) < i64::from(start) || i64::from(value) > end {
            Err(ToolError::invalid(format!(
                "{axis}={value} is off the screen: valid {axis} is {start}..={end} on this {}x{} screen",
                screen.width, screen.height
            ))
            .at(path))
        } else {
            Ok(())
        }
    };
    check(x, screen.x, screen.width, x_path, "x")?;
    check(y, screen.y, screen.height, y_path, "y")
}

fn point(x: Option<i32>, y: Option<i32>, screen: Rect) -> Result<Option<(i32, i32)>, ToolError> {
    match (x, y) {
        (Some(x), Some(y)) => {
            on_screen(screen, x, y, "args.x", "args.y")?;
            Ok(Some((x, y)))
        }
        (None, None) => Ok(None),
        (Some(_), None) => Err(ToolError::invalid("give y with x").at("args.y")),
        (None, Some(_)) => Err(ToolError::invalid("give x with y").at("args.x")),
    }
}

/// The point of a pointer action; required where the backend cannot read the pointer.
fn pointer_point<D: Desktop>(
    conn: &D,
    x: Option<i32>,
    y: Option<i32>,
    screen: Rect,
) -> Result<Option<(i32, i32)>, ToolError> {
    let at = point(x, y, screen)?;
    if at.is_none() && !conn.reads_cursor() {
        return Err(ToolError::invalid(
            "give x and y: where the pointer is cannot be read on this backend (Wayland tells no \
             client)",
        )
        .at("args")
        .valid(["x", "y"]));
    }
    Ok(at)
}

/// The point given, else where the pointer is now.
fn at_or_cursor<D: Desktop>(conn: &D, at: Option<(i32, i32)>) -> DisplayResult<(i32, i32)> {
    match at {
        Some(point) => Ok(point),
        None => conn.cursor(),
    }
}

fn button_name(button: Button) -> &'static str {
    match button {
        Button::Left => "left",
        Button::Middle => "middle",
        Button::Right => "right",
    }
}

#[derive(Debug)]
struct Move {
    x: i32,
    y: i32,
}

pub fn validate_move<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let a: MoveArgs = decode_args(call.args)?;
    on_screen(call.screen()?, a.x, a.y, "args.x", "args.y")?;
    Ok(Box::new(Move { x: a.x, y: a.y }))
}

impl<D: Desktop> Act<D> for Move {
    fn describe(&self) -> String {
        let Move { x, y } = self;
        format!("move the pointer to ({x},{y})")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some((self.x, self.y)), window)
    }

    fn landing(&self, _conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![(self.x, self.y)])
    }

    fn may_edit_terminals(&self) -> bool {
        false
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Pointer(self.x, self.y))
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Move { x, y } = *self;
        conn.move_to(x, y)?;
        Ok(done(json!({"x": x, "y": y})))
    }
}

#[derive(Debug)]
struct Click {
    at: Option<(i32, i32)>,
    button: Button,
    count: u32,
}

pub fn validate_click<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let a: ClickArgs = decode_args(call.args)?;
    let count = a.count.unwrap_or(1);
    if !(1..=MAX_CLICKS).contains(&count) {
        return Err(ToolError::invalid(format!("count must be 1..={MAX_CLICKS}")).at("args.count"));
    }
    Ok(Box::new(Click {
        at: pointer_point(call.conn, a.x, a.y, call.screen()?)?,
        button: a.button.unwrap_or(Button::Left),
        count,
    }))
}

impl<D: Desktop> Act<D> for Click {
    fn describe(&self) -> String {
        let Click { at, button, count } = self;
        match at {
            Some((x, y)) => format!("{button:?} click x{count} at ({x},{y})"),
            None => format!("{button:?} click x{count} where the pointer is"),
        }
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some(at_or_cursor(conn, self.at)?), window)
    }

    fn landing(&self, conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![at_or_cursor(conn, self.at)?])
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Click(self.at))
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Click { at, button, count } = *self;
        conn.click(at, button, count)?;
        let (x, y) = at_or_cursor(conn, at)?;
        Ok(done(
            json!({"x": x, "y": y, "button": button_name(button), "count": count}),
        ))
    }
}

#[derive(Debug)]
struct Drag {
    from: (i32, i32),
    to: (i32, i32),
    button: Button,
}

pub fn validate_drag<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let a: DragArgs = decode_args(call.args)?;
    let screen = call.screen()?;
    on_screen(screen, a.from_x, a.from_y, "args.from_x", "args.from_y")?;
    on_screen(screen, a.to_x, a.to_y, "args.to_x", "args.to_y")?;
    Ok(Box::new(Drag {
        from: (a.from_x, a.from_y),
        to: (a.to_x, a.to_y),
        button: a.button.unwrap_or(Button::Left),
    }))
}

impl<D: Desktop> Act<D> for Drag {
    fn describe(&self) -> String {
        let Drag { from, to, button } = self;
        format!("{button:?} drag from {from:?} to {to:?}")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some(self.from), window)
    }

    fn landing(&self, _conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![self.from, self.to])
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Windows)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Drag { from, to, button } = *self;
        conn.drag(from, to, button)?;
        Ok(done(json!({
            "from_x": from.0, "from_y": from.1, "to_x": to.0, "to_y": to.1,
            "button": button_name(button),
        })))
    }
}

#[derive(Debug)]
struct Scroll {
    at: Option<(i32, i32)>,
    dx: i32,
    dy: i32,
}

pub fn validate_scroll<D: Desktop>(call: &Call<'_, D>) -> Result<Box<dyn Act<D>>, ToolError> {
    let a: ScrollArgs = decode_args(call.args)?;
    for (value, path) in [(a.dx, "args.dx"), (a.dy, "args.dy")] {
        if value.abs() > MAX_NOTCHES {
            return Err(ToolError::invalid(format!(
                "scroll at most {MAX_NOTCHES} notches per call"
            ))
            .at(path));
        }
    }
    if a.dx == 0 && a.dy == 0 {
        return Err(
            ToolError::invalid("give dy (down +, up -) or dx (right +, left -)")
                .at("args")
                .valid(["dx", "dy"]),
        );
    }
    Ok(Box::new(Scroll {
        at: pointer_point(call.conn, a.x, a.y, call.screen()?)?,
        dx: a.dx,
        dy: a.dy,
    }))
}

impl<D: Desktop> Act<D> for Scroll {
    fn describe(&self) -> String {
        let Scroll { dx, dy, .. } = self;
        format!("scroll dx={dx} dy={dy}")
    }

    fn reach(&self) -> Reach {
        Reach::Points
    }

    fn target(&self, conn: &D, window: Option<u64>) -> DisplayResult<Option<TargetFacts>> {
        target_window(conn, Some(at_or_cursor(conn, self.at)?), window)
    }

    fn landing(&self, conn: &D) -> DisplayResult<Vec<(i32, i32)>> {
        Ok(vec![at_or_cursor(conn, self.at)?])
    }

    fn read_back(&self) -> Option<Aim> {
        Some(Aim::Windows)
    }

    fn perform(self: Box<Self>, conn: &D, _running: &Running<'_>) -> Result<Outcome, Failure> {
        let Scroll { at, dx, dy } = *self;
        conn.scroll(at, dx, dy)?;
        let (x, y) = at_or_cursor(conn, at)?;
        Ok(done(json!({"x": x, "y": y, "dx": dx, "dy": dy})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_off_the_screen_name_the_field_and_range() {
        let screen = Rect {
            x: 0,
            y: 0,
            width: 100,
            height: 50,
        };
        let err = on_screen(screen, 100, 0, "args.x", "args.y").unwrap_err();
        assert_eq!(err.path.as_deref(), Some("args.x"));
        assert!(err.message.contains("0..=99"), "{}", err.message);
        let err = on_screen(screen, 5, -1, "args.x", "args.y").unwrap_err();
        assert_eq!(err.path.as_deref(), Some("args.y"));
        assert!(on_screen(screen, 99, 49, "args.x", "args.y").is_ok());
    }
}
