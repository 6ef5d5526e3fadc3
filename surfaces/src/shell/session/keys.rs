//! What `send` writes to a session's terminal, and what it does to the command line of a session
//! that runs a shell: named keys as the bytes a terminal sends for them, and the line each input
//! leaves, followed as `gui type` follows a terminal window's line (`gui/terminal.rs`).

use crate::kit::command_line::{Effect, Line, type_text};

/// The names `send.keys` takes, for errors and the tool description.
pub(super) const KEY_NAMES: &str = "Enter, Tab, Escape, Backspace, Delete, Up, Down, Left, Right, \
     Home, End, PageUp, PageDown, Insert, Space, F1-F12, C-a..C-z (ctrl), M-x (alt)";

/// The bytes a terminal sends for the key `name`; arrows follow the application cursor mode the
/// program set (DECCKM), as a real terminal's do.
pub(super) fn key_bytes(name: &str, application_cursor: bool) -> Option<Vec<u8>> {
    let lower = name.to_ascii_lowercase();
    let arrow = |c: u8| {
        if application_cursor {
            vec![0x1b, b'O', c]
        } else {
            vec![0x1b, b'[', c]
        }
    };
    let bytes = match lower.as_str() {
        "enter" | "return" => b"\r".to_vec(),
        "tab" => b"\t".to_vec(),
        "escape" | "esc" => b"\x1b".to_vec(),
        "backspace" => b"\x7f".to_vec(),
        "delete" | "del" => b"\x1b[3~".to_vec(),
        "insert" => b"\x1b[2~".to_vec(),
        "space" => b" ".to_vec(),
        "up" => arrow(b'A'),
        "down" => arrow(b'B'),
        "right" => arrow(b'C'),
        "left" => arrow(b'D'),
        "home" => arrow(b'H'),
        "end" => arrow(b'F'),
        "pageup" | "page_up" => b"\x1b[5~".to_vec(),
        "pagedown" | "page_down" => b"\x1b[6~".to_vec(),
        "f1" => b"\x1bOP".to_vec(),
        "f2" => b"\x1bOQ".to_vec(),
        "f3" => b"\x1bOR".to_vec(),
        "f4" => b"\x1bOS".to_vec(),
        "f5" => b"\x1b[15~".to_vec(),
        "f6" => b"\x1b[17~".to_vec(),
        "f7" => b"\x1b[18~".to_vec(),
        "f8" => b"\x1b[19~".to_vec(),
        "f9" => b"\x1b[20~".to_vec(),
        "f10" => b"\x1b[21~".to_vec(),
        "f11" => b"\x1b[23~".to_vec(),
        "f12" => b"\x1b[24~".to_vec(),
        _ => return combo_bytes(&lower),
    };
    Some(bytes)
}

/// `C-x` / `ctrl+x` (a control character) and `M-x` / `alt+x` (ESC, then the key).
fn combo_bytes(lower: &str) -> Option<Vec<u8>> {
    let (modifier, key) = lower
        .split_once('-')
        .or_else(|| lower.split_once('+'))
        .filter(|(_, key)| !key.is_empty())?;
    match modifier {
        "c" | "ctrl" | "control" => {
            let mut chars = key.chars();
            let (c, None) = (chars.next()?, chars.next()) else {
                return None;
            };
            match c {
                'a'..='z' => Some(vec![c as u8 - b'a' + 1]),
                '@' | ' ' => Some(vec![0]),
                '[' => Some(vec![0x1b]),
                '\\' => Some(vec![0x1c]),
                ']' => Some(vec![0x1d]),
                '^' => Some(vec![0x1e]),
                '_' => Some(vec![0x1f]),
                _ => None,
            }
        }
        "m" | "alt" | "meta" => {
            let mut bytes = vec![0x1b];
            bytes.extend(key_bytes(key, false).or_else(|| {
                let mut chars = key.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Some(c.to_string().into_bytes()),
                    _ => None,
                }
            })?);
            Some(bytes)
        }
        _ => None,
    }
}

/// What writing `bytes` does to a shell's line: the lines it ends and the line it leaves. Text
/// is followed where `gui type` would follow it; what a line editor does with other control
/// characters (kill and yank, history, completion, escape sequences) is not followed, and makes
/// the line opaque. History expansion (`!`) makes it opaque too: `!!` runs another line.
pub(super) fn input_effect(line: &Line, bytes: &[u8]) -> Effect {
    let text = String::from_utf8_lossy(bytes);
    let mut completed = Vec::new();
    let mut current = line.clone();
    let mut plain = String::new();
    let flush = |current: &mut Line, completed: &mut Vec<Line>, plain: &mut String| {
        if !plain.is_empty() {
            let effect = type_text(current, plain);
            completed.extend(effect.completed);
            *current = effect.after;
            plain.clear();
        }
    };
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' | '\u{8}' => plain.push(c),
            '\u{7f}' => plain.push('\u{8}'),
            // ctrl-c and ctrl-u drop the line being edited (readline, and the tty's own
            // line discipline).
            '\u{3}' | '\u{15}' => {
                flush(&mut current, &mut completed, &mut plain);
                current = Line::default();
            }
            '!' => {
                plain.push(c);
                flush(&mut current, &mut completed, &mut plain);
                opaque(
                    &mut current,
                    "`!` may expand to another line from the shell's history",
                );
            }
            c if c.is_control() || c == char::REPLACEMENT_CHARACTER => {
                flush(&mut current, &mut completed, &mut plain);
                opaque(
                    &mut current,
                    &format!(
                        "{} edits the line in ways not followed (history, completion, kill \
                         and yank, cursor keys)",
                        describe_char(c)
                    ),
                );
            }
            c => plain.push(c),
        }
    }
    flush(&mut current, &mut completed, &mut plain);
    Effect {
        completed,
        after: current,
    }
}

fn opaque(line: &mut Line, why: &str) {
    if line.opaque.is_none() {
        line.opaque = Some(why.to_string());
    }
}

fn describe_char(c: char) -> String {
    match c as u32 {
        0x1b => "Escape".into(),
        n @ 1..=26 => format!("C-{}", (b'a' + n as u8 - 1) as char),
        n => format!("the character U+{n:04X}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(effect: &Effect) -> Vec<(&str, bool)> {
        effect
            .completed
            .iter()
            .map(|l| (l.text.as_str(), l.opaque.is_some()))
            .collect()
    }

    #[test]
    fn named_keys_are_the_bytes_a_terminal_sends() {
        assert_eq!(key_bytes("Enter", false).unwrap(), b"\r");
        assert_eq!(key_bytes("C-c", false).unwrap(), b"\x03");
        assert_eq!(key_bytes("ctrl+d", false).unwrap(), b"\x04");
        assert_eq!(key_bytes("Up", false).unwrap(), b"\x1b[A");
        assert_eq!(key_bytes("Up", true).unwrap(), b"\x1bOA");
        assert_eq!(key_bytes("M-b", false).unwrap(), b"\x1bb");
        assert_eq!(key_bytes("escape", false).unwrap(), b"\x1b");
        assert!(key_bytes("Hyper", false).is_none());
        assert!(key_bytes("C-long", false).is_none());
    }

    #[test]
    fn lines_are_followed_and_what_is_not_followed_is_opaque() {
        let effect = input_effect(&Line::default(), b"ls -l\rrm -rf x\n");
        assert_eq!(lines(&effect), [("ls -l", false), ("rm -rf x", false)]);

        // Kill and yank would assemble a line the text never spells.
        let effect = input_effect(&Line::default(), b"rm -rf x\x01\x0bls \x19\r");
        assert_eq!(effect.completed.len(), 1);
        assert!(effect.completed[0].opaque.is_some());

        // ctrl-c drops the line: what follows is a fresh one.
        let effect = input_effect(&Line::default(), b"rm -rf x\x03echo hi\r");
        assert_eq!(lines(&effect), [("echo hi", false)]);

        let effect = input_effect(&Line::default(), b"echo !!\r");
        assert_eq!(lines(&effect), [("echo !!", true)]);

        let effect = input_effect(&Line::default(), b"ecx\x7fho\r");
        assert_eq!(lines(&effect), [("echo", false)]);
    }
}
