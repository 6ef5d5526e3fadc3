//! A terminal's command line as far as it can be known, and what typed text does to it: the one
//! model that both the gui surface's terminal windows (`gui/terminal.rs`) and the shell
//! surface's sessions (`shell/session/keys.rs`) follow a shell's line with, so that text typed
//! earlier and a later Return are decided together as the command they run.

/// Longest line kept per terminal; a longer one becomes opaque rather than growing without bound.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// A terminal's current command line as far as it can be known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// The characters typed into it that were followed, in order.
    pub text: String,
    /// Why the line's content is not known exactly, when so.
    pub opaque: Option<String>,
}

impl Line {
    pub fn make_opaque(&mut self, why: impl Into<String>) {
        if self.opaque.is_none() {
            self.opaque = Some(why.into());
        }
    }

    pub(crate) fn push(&mut self, c: char) {
        if self.text.len() + c.len_utf8() > MAX_LINE_BYTES {
            self.make_opaque(format!(
                "the line grew past {MAX_LINE_BYTES} bytes, more than is followed"
            ));
        } else {
            self.text.push(c);
        }
    }

    pub(crate) fn backspace(&mut self) {
        match self.text.chars().last() {
            None => {}
            // A character outside ASCII may be one of several that draw as one glyph, which a
            // line editor may erase together.
            Some(c) if c.is_ascii() => {
                self.text.pop();
            }
            Some(_) => self.make_opaque("BackSpace over a character outside ASCII"),
        }
    }
}

/// What keys do to a terminal's line: the lines they end (run by the shell), and the line left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub completed: Vec<Line>,
    pub after: Line,
}

/// Typing `text` onto `line`: "\n" (and "\r") is Return, "\t" is Tab, "\u{8}" is BackSpace.
pub fn type_text(line: &Line, text: &str) -> Effect {
    let mut current = line.clone();
    let mut completed = Vec::new();
    for c in text.chars() {
        match c {
            '\n' | '\r' => completed.push(std::mem::take(&mut current)),
            '\t' => current.make_opaque("Tab (completion) changes the line in ways not followed"),
            '\u{8}' => current.backspace(),
            c => current.push(c),
        }
    }
    Effect {
        completed,
        after: current,
    }
}
