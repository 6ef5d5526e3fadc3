//! The session terminal (emulator, query answers, masked log and screen) reachable from the fuzz
//! targets, which live outside this crate; built only with the `fuzzing` feature.

use std::sync::Arc;

use crate::kit::mask::Masker;

use super::term::Terminal;

/// A session's terminal without its pty: what the program writes goes in through [`feed`].
///
/// [`feed`]: FuzzTerminal::feed
pub struct FuzzTerminal(Terminal);

impl FuzzTerminal {
    pub fn new(rows: u16, cols: u16, log_bytes: usize) -> FuzzTerminal {
        FuzzTerminal(Terminal::new(rows, cols, log_bytes))
    }

    pub fn mask_with(&mut self, masker: Arc<Masker>) {
        self.0.mask_with(masker);
    }

    /// Takes what the program wrote; returns the answers to its terminal queries.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.0.feed(bytes)
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.0.resize(rows, cols);
    }

    /// The screen as `screen` serves it, masked.
    pub fn screen_text(&self) -> String {
        self.0.screen_text()
    }

    /// Everything the log still holds, as `read` serves it, masked.
    pub fn log_text(&self) -> Vec<u8> {
        self.0.log().since(0).text
    }

    /// The output ended.
    pub fn finish(&mut self) {
        self.0.finish();
    }
}
