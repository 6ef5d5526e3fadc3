//! What the pointer commands (`move`, `click`, `drag`, `scroll`) share: the checks that their
//! points lie on the screen, and where they land when they name no point.

use computer_ipc::ToolError;

use crate::gui::desktop::{Button, Desktop, DisplayResult, Rect};

/// The coordinate args of a command at one point, as (x, y) pairs: with `seen` of a screenshot
/// they are its pixels.
pub const POINT: &[(&str, &str)] = &[("x", "y")];

/// Checks that a point lies on the screen, naming the field and the valid range.
pub fn on_screen(
    screen: Rect,
    x: i32,
    y: i32,
    x_path: &str,
    y_path: &str,
) -> Result<(), ToolError> {
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
pub fn pointer_point<D: Desktop>(
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
pub fn at_or_cursor<D: Desktop>(conn: &D, at: Option<(i32, i32)>) -> DisplayResult<(i32, i32)> {
    match at {
        Some(point) => Ok(point),
        None => conn.cursor(),
    }
}

pub fn button_name(button: Button) -> &'static str {
    match button {
        Button::Left => "left",
        Button::Middle => "middle",
        Button::Right => "right",
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
