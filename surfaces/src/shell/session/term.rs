//! The terminal a session's program draws on: the emulator (`vt100`) that keeps its screen, the
//! answers it gives to terminal queries, and the plain-text log of its output that `read`
//! serves by cursor.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;

use crate::kit::mask::Masker;

/// Masks a session's output with the secrets it was given (at `open`, or typed by `send`), as
/// shell runs mask their streams: the log is masked as it grows, a secret split across reads
/// included, and the screen whenever it is rendered.
struct OutputMask {
    masker: Arc<Masker>,
    /// What could still be the start of a secret, held back until the next output tells.
    held: Vec<u8>,
}

/// The emulator, the query answers and the output log of one session.
pub(super) struct Terminal {
    emulator: vt100::Parser<Answers>,
    /// A second parser over the same bytes that keeps only what is printed (no escapes).
    plain: vte::Parser,
    log: OutputLog,
    mask: Option<OutputMask>,
}

impl Terminal {
    pub(super) fn new(rows: u16, cols: u16, log_bytes: usize) -> Terminal {
        Terminal {
            emulator: vt100::Parser::new_with_callbacks(
                nonzero(rows),
                nonzero(cols),
                0,
                Answers::default(),
            ),
            plain: vte::Parser::new(),
            log: OutputLog::new(log_bytes),
            mask: None,
        }
    }

    /// Masks all output from now on with `masker` (every secret the session holds); what the
    /// previous masker held back is decided by the new one.
    pub(super) fn mask_with(&mut self, masker: Arc<Masker>) {
        let held = self.mask.take().map(|mask| mask.held).unwrap_or_default();
        self.mask = Some(OutputMask { masker, held });
    }

    /// The output ended: what was held back goes to the log, masked.
    pub(super) fn finish(&mut self) {
        if let Some(mask) = &mut self.mask {
            let rest = mask.masker.mask(&std::mem::take(&mut mask.held));
            self.log.push(&rest);
        }
    }

    /// Takes what the program wrote; returns the answers to the queries in it, to be written
    /// back to the program.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.emulator.process(bytes);
        let mut text = PlainText::default();
        self.plain.advance(&mut text, bytes);
        let text = match &mut self.mask {
            Some(mask) => {
                let mut stream = mask.masker.resume(std::mem::take(&mut mask.held));
                let mut out = stream.push(&text.text);
                // A prompt must reach `read` now, not once more output comes; only what could
                // still be the start of a secret waits.
                stream.release_settled(|part| out.extend_from_slice(part));
                mask.held = stream.into_held();
                out
            }
            None => text.text,
        };
        self.log.push(&text);
        std::mem::take(&mut self.emulator.callbacks_mut().pending)
    }

    pub(super) fn resize(&mut self, rows: u16, cols: u16) {
        self.emulator
            .screen_mut()
            .set_size(nonzero(rows), nonzero(cols));
    }

    pub(super) fn screen(&self) -> &vt100::Screen {
        self.emulator.screen()
    }

    /// The screen as text, one line per row, trailing blanks cut, masked.
    pub(super) fn screen_text(&self) -> String {
        let text = self.emulator.screen().contents();
        match &self.mask {
            Some(mask) => mask.masker.mask_screen(&text),
            None => text,
        }
    }

    pub(super) fn log(&self) -> &OutputLog {
        &self.log
    }
}

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

/// Answers to the queries programs send their terminal. A program that asks where the cursor is
/// (`ESC[6n`) or what the terminal is (`ESC[c`) waits for the answer; nobody else is there to
/// give it, so the emulator does, from the screen as it is at that point of the output.
#[derive(Default)]
struct Answers {
    pending: Vec<u8>,
}

impl vt100::Callbacks for Answers {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        let out = &mut self.pending;
        // Writing into a Vec cannot fail.
        let _ = match (c, i1, i2, first) {
            // Cursor position report (DSR 6), and its DEC form.
            ('n', None, None, 6) => {
                let (row, col) = screen.cursor_position();
                write!(out, "\x1b[{};{}R", row + 1, col + 1)
            }
            ('n', Some(b'?'), None, 6) => {
                let (row, col) = screen.cursor_position();
                write!(out, "\x1b[?{};{}R", row + 1, col + 1)
            }
            // Status report: all is well.
            ('n', None, None, 5) => out.write_all(b"\x1b[0n"),
            // Primary device attributes: a VT100 with advanced video, as xterm answers.
            ('c', None, None, 0) => out.write_all(b"\x1b[?1;2c"),
            // Secondary device attributes: a VT100, version 0.
            ('c', Some(b'>'), None, 0) => out.write_all(b"\x1b[>0;0;0c"),
            _ => Ok(()),
        };
    }

    fn unhandled_escape(&mut self, _: &mut vt100::Screen, i1: Option<u8>, _i2: Option<u8>, b: u8) {
        // DECID, the old form of the device attributes query.
        if i1.is_none() && b == b'Z' {
            self.pending.extend_from_slice(b"\x1b[?1;2c");
        }
    }
}

/// What a program printed, without escape sequences: text, line feeds and tabs.
#[derive(Default)]
struct PlainText {
    text: Vec<u8>,
    /// The last thing the output did was print a space.
    after_a_space: bool,
}

impl vte::Perform for PlainText {
    fn print(&mut self, c: char) {
        let mut buf = [0u8; 4];
        self.text
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.after_a_space = c == ' ';
    }

    fn execute(&mut self, byte: u8) {
        // A space right before a carriage return is how readline steps over the right margin
        // while it echoes what is typed (" \r", then the rest of the line over that space): in
        // plain text it would split a typed word, and a typed secret, in two.
        if byte == b'\r' && self.after_a_space {
            self.text.pop();
        }
        self.after_a_space = false;
        if matches!(byte, b'\n' | b'\t') {
            self.text.push(byte);
        }
    }

    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.after_a_space = false;
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.after_a_space = false;
    }
}

/// The output as plain text, the last `capacity` bytes of it; positions count every byte the
/// session ever logged, so a cursor stays valid while the log rolls on.
pub(super) struct OutputLog {
    bytes: VecDeque<u8>,
    /// The position of the first byte still held.
    start: u64,
    capacity: usize,
}

/// What the log holds from a cursor on.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Since {
    pub text: Vec<u8>,
    /// Bytes between the cursor and the oldest byte still held, rolled out of the log.
    pub dropped: u64,
    /// The position after the text: the cursor of the next read.
    pub end: u64,
}

impl OutputLog {
    pub(super) fn new(capacity: usize) -> OutputLog {
        OutputLog {
            bytes: VecDeque::new(),
            start: 0,
            capacity: capacity.max(1),
        }
    }

    pub(super) fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        let excess = self.bytes.len().saturating_sub(self.capacity);
        if excess > 0 {
            self.bytes.drain(..excess);
            self.start += excess as u64;
        }
    }

    /// The position after the last byte logged.
    pub(super) fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Everything logged from `cursor` on (a cursor past the end reads nothing).
    pub(super) fn since(&self, cursor: u64) -> Since {
        let from = cursor.max(self.start).min(self.end());
        let skip = (from - self.start) as usize;
        Since {
            text: self.bytes.iter().skip(skip).copied().collect(),
            dropped: self.start.saturating_sub(cursor),
            end: self.end(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rolls_and_says_what_a_cursor_missed() {
        let mut log = OutputLog::new(8);
        log.push(b"hello ");
        assert_eq!(log.since(0).text, b"hello ");
        log.push(b"world!");
        let since = log.since(0);
        assert_eq!(since.text, b"o world!");
        assert_eq!((since.dropped, since.end), (4, 12));
        let since = log.since(10);
        assert_eq!((since.text.as_slice(), since.dropped), (&b"d!"[..], 0));
        assert_eq!(log.since(99).text, b"");
    }

    #[test]
    fn queries_are_answered_from_the_screen_and_escapes_stay_out_of_the_log() {
        let mut term = Terminal::new(24, 80, 1024);
        let answers = term.feed(b"\x1b[31mab\x1b[0m\r\nc\x1b[6n");
        assert_eq!(answers, b"\x1b[2;2R");
        assert_eq!(term.log().since(0).text, b"ab\nc");
        assert_eq!(term.feed(b"\x1b[c"), b"\x1b[?1;2c");
        assert_eq!(term.feed(b"\x1b[>c"), b"\x1b[>0;0;0c");
        assert_eq!(term.feed(b"\x1b[5n"), b"\x1b[0n");
        assert!(term.feed(b"plain").is_empty());
        assert_eq!(term.screen_text(), "ab\ncplain");
    }

    #[test]
    fn a_query_split_across_reads_is_still_answered() {
        let mut term = Terminal::new(24, 80, 1024);
        assert!(term.feed(b"x\x1b[").is_empty());
        assert_eq!(term.feed(b"6n"), b"\x1b[1;2R");
    }

    #[test]
    fn a_value_split_by_readline_s_margin_step_or_cut_by_a_resize_stays_masked() {
        let value = "abcdefghijklmnop";
        let mut term = Terminal::new(24, 20, 1024);
        term.mask_with(Arc::new(Masker::new([("PW", value.as_bytes())])));
        // readline echoing typed text across the right margin: " \r", then the rest over it.
        term.feed(b"$ export T=abcdefghi \rjklmnop\r\n$ ");
        let log = String::from_utf8(term.log().since(0).text).unwrap();
        assert_eq!(log, "$ export T=[masked PW]\n$ ");
        assert!(
            !term.screen_text().contains("abcd"),
            "{}",
            term.screen_text()
        );
        for cols in [15, 12, 30] {
            term.resize(24, cols);
            let screen = term.screen_text();
            for part in ["abcd", "efgh", "ijkl", "mnop"] {
                assert!(!screen.contains(part), "{cols} columns: {screen:?}");
            }
        }
    }

    #[test]
    fn the_mask_covers_log_and_screen_and_secrets_split_across_output() {
        let mut term = Terminal::new(24, 80, 1024);
        term.feed(b"before: hunter2-value\r\n");
        term.mask_with(Arc::new(Masker::new([("PW", b"hunter2-value".as_slice())])));
        term.feed(b"pw: hunter2-value\r\nsplit: hunt");
        assert_eq!(
            term.log().since(0).text,
            b"before: hunter2-value\npw: [masked PW]\nsplit: ",
            "output before the mask is as it was; the start of a secret is held back"
        );
        term.feed(b"\x1b[1mer2-val\x1b[0mue\r\nPassword: ");
        let log = term.log().since(0).text;
        assert!(
            log.ends_with(b"split: [masked PW]\nPassword: "),
            "{}",
            String::from_utf8_lossy(&log)
        );
        assert!(!term.screen_text().contains("hunter2-value"));
        term.feed(b"hunter2");
        term.finish();
        assert!(term.log().since(0).text.ends_with(b"Password: hunter2"));
    }
}
