//! Terminal windows and their command lines: which windows are terminal emulators (a configurable
//! list of application names), and, per terminal window, the line typed since its last Return, so
//! that keys which end a line are decided as the shell run of that line.
//!
//! Why a line per window: a shell reads what is typed into its terminal and runs it when Return
//! ends the line. Text typed earlier (`computer approvals allow 1`) and a later `Return` are two
//! harmless-looking gui calls; together they are a shell command. So the text typed into each
//! terminal window since its last Return is kept here, and a call that ends a line states that
//! line as what it runs. Only edits this module can follow are followed (characters appended,
//! BackSpace over ASCII); any other key (a paste, history, completion, cursor keys) or a pointer
//! action on the window makes the line *opaque*: its content is no longer known, so it is never
//! covered by an allow rule. A line a person typed by hand is not seen.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::keys::Combo;
use crate::kit::command_line::{Effect, Line};

/// Terminal emulators, matched case-insensitively against a window's application names (the X11
/// WM_CLASS instance and class; the application's name on macOS). `*` stands for any run of
/// characters. `[gui] terminal_apps` in the config replaces this list.
pub const DEFAULT_TERMINAL_APPS: &[&str] = &[
    "xterm",
    "uxterm",
    "gnome-terminal*",
    "konsole",
    "alacritty",
    "kitty",
    "org.wezfurlong.wezterm",
    "wezterm*",
    "foot",
    "footclient",
    "tilix",
    "com.gexperts.tilix",
    "xfce4-terminal",
    "urxvt",
    "rxvt*",
    "terminator",
    "st",
    "st-256color",
    "mate-terminal",
    "lxterminal",
    "qterminal",
    "terminology",
    "sakura",
    "guake",
    "tilda",
    "yakuake",
    "cool-retro-term",
    "deepin-terminal",
    "kgx",
    "org.gnome.console",
    "org.gnome.ptyxis",
    "ptyxis",
    "com.mitchellh.ghostty",
    "ghostty",
    "contour",
    "rio",
    "eterm",
    "aterm",
    "mlterm",
    "roxterm",
    "zutty",
    "blackbox",
    "com.raggesilver.blackbox",
    "hyper",
    "tabby",
    "terminal",
    "com.apple.terminal",
    "iterm2",
    "com.googlecode.iterm2",
];

/// Which windows are terminal emulators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalApps {
    /// Lower-cased patterns.
    patterns: Vec<String>,
}

impl Default for TerminalApps {
    fn default() -> Self {
        TerminalApps::new(DEFAULT_TERMINAL_APPS.iter().copied())
    }
}

impl TerminalApps {
    pub fn new<S: AsRef<str>>(patterns: impl IntoIterator<Item = S>) -> TerminalApps {
        TerminalApps {
            patterns: patterns
                .into_iter()
                .map(|p| p.as_ref().trim().to_lowercase())
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }

    /// Whether an application known by any of `names` is a terminal emulator.
    pub fn matches<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        names.into_iter().any(|name| {
            let name = name.trim().to_lowercase();
            !name.is_empty() && self.patterns.iter().any(|p| glob_matches(p, &name))
        })
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Keysyms (see `keys.rs`).
const RETURN: u32 = 0xff0d;
const BACKSPACE: u32 = 0xff08;
const CTRL: [u32; 2] = [0xffe3, 0xffe4];
const SHIFT: [u32; 2] = [0xffe1, 0xffe2];

/// The character a plain key types, if it is one (Latin-1 keysyms are their code points; others
/// are 0x01000000 + the code point).
fn keysym_char(keysym: u32) -> Option<char> {
    match keysym {
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(keysym),
        0x0100_0000..=0x0110_ffff => char::from_u32(keysym - 0x0100_0000),
        _ => None,
    }
}

/// Pressing `combo` (named `name` in reasons) on `line`.
pub fn press(line: &Line, combo: &Combo, name: &str) -> Effect {
    let mut current = line.clone();
    let mods = &combo.modifiers;
    let only_shift = mods.iter().all(|m| SHIFT.contains(m));
    let ctrl_only = !mods.is_empty() && mods.iter().all(|m| CTRL.contains(m));
    // Keys that end a line other than a plain Return: ctrl+j (line feed), ctrl+m (carriage
    // return) and ctrl+o (readline's operate-and-get-next) run it; Return with modifiers may.
    // Whether the line was run then is not known, so the one left is opaque.
    let ends_line_maybe = (combo.key == RETURN && !mods.is_empty())
        || (ctrl_only && matches!(keysym_char(combo.key), Some('j' | 'm' | 'o')));
    if combo.key == RETURN && mods.is_empty() {
        return Effect {
            completed: vec![current],
            after: Line::default(),
        };
    }
    if ends_line_maybe {
        current.make_opaque(format!("{name} may run the line without a plain Return"));
        let mut after = line.clone();
        after.make_opaque(format!(
            "after {name}, whether the line was run is not known"
        ));
        return Effect {
            completed: vec![current],
            after,
        };
    }
    match (combo.key, keysym_char(combo.key)) {
        (BACKSPACE, _) if mods.is_empty() => current.backspace(),
        (_, Some(c)) if mods.is_empty() => current.push(c),
        (_, Some(c)) if only_shift && c.is_ascii_lowercase() => {
            current.push(c.to_ascii_uppercase())
        }
        _ => current.make_opaque(format!(
            "{name} edits the line in ways not followed (paste, history, completion, cursor \
             keys)"
        )),
    }
    Effect {
        completed: Vec::new(),
        after: current,
    }
}

/// One terminal window's line, with a count of its changes so that a call decided on one state
/// of the line does not act on another.
#[derive(Debug, Clone, Default)]
struct Tracked {
    line: Line,
    generation: u64,
}

/// The lines of every terminal window keys were sent to. A window never typed into starts with
/// an empty line.
#[derive(Debug, Default)]
pub struct LineTracker {
    windows: Mutex<HashMap<u32, Tracked>>,
    /// Held while keys (or pointer actions that may edit a line) are sent: the input of two
    /// calls must not interleave, or neither line would be the one decided.
    keyboard: Mutex<()>,
}

/// The keyboard, held: lines may be checked and changed, and keys sent, by one call at a time.
pub struct Held<'a> {
    tracker: &'a LineTracker,
    _keyboard: MutexGuard<'a, ()>,
}

impl LineTracker {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Tracked>> {
        // Every update is one assignment, so the map is whole even after a panic.
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The window's line and its generation now.
    pub fn line(&self, window: u32) -> (Line, u64) {
        let map = self.lock();
        map.get(&window)
            .map(|t| (t.line.clone(), t.generation))
            .unwrap_or_default()
    }

    /// Forgets windows that are gone, so the map stays as small as the desktop.
    pub fn retain(&self, live: &[u32]) {
        self.lock().retain(|id, _| live.contains(id));
    }

    /// Holds the keyboard until the guard drops.
    pub fn hold(&self) -> Held<'_> {
        Held {
            tracker: self,
            _keyboard: self.keyboard.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

impl Held<'_> {
    pub fn generation(&self, window: u32) -> u64 {
        self.tracker.line(window).1
    }

    pub fn set(&mut self, window: u32, line: Line) {
        let mut map = self.tracker.lock();
        let tracked = map.entry(window).or_default();
        tracked.line = line;
        tracked.generation += 1;
    }

    pub fn make_all_opaque(&mut self, why: &str) {
        for tracked in self.tracker.lock().values_mut() {
            tracked.line.make_opaque(why);
            tracked.generation += 1;
        }
    }

    pub fn make_opaque(&mut self, window: u32, why: &str) {
        let mut map = self.tracker.lock();
        let tracked = map.entry(window).or_default();
        tracked.line.make_opaque(why);
        tracked.generation += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gui::keys::parse_combo;
    use crate::kit::command_line::type_text;

    fn press_named(line: &Line, name: &str) -> Effect {
        press(line, &parse_combo(name).unwrap(), name)
    }

    fn texts(effect: &Effect) -> Vec<&str> {
        effect.completed.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn terminal_apps_match_either_name_ignoring_case() {
        let apps = TerminalApps::default();
        assert!(apps.matches(["xterm", "XTerm"]));
        assert!(apps.matches(["gnome-terminal-server", "Gnome-terminal"]));
        assert!(apps.matches(["", "URxvt"]));
        assert!(!apps.matches(["gtk3-widget-factory", "Gtk3-widget-factory"]));
        assert!(!apps.matches(["", ""]));
        let custom = TerminalApps::new(["my-*-term", "exact"]);
        assert!(custom.matches(["MY-fancy-TERM"]));
        assert!(custom.matches(["exact"]));
        assert!(!custom.matches(["exactly", "xterm"]));
        assert!(!TerminalApps::new(Vec::<String>::new()).matches(["xterm"]));
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_matches("a*c", "abbbc"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*b*c", "a-b-b-c"));
        assert!(!glob_matches("a*c", "abcd"));
        assert!(!glob_matches("abc", "ab"));
        assert!(glob_matches("*term", "xterm"));
    }

    #[test]
    fn typed_newlines_complete_lines_and_leave_the_rest() {
        let effect = type_text(&Line::default(), "ls -l\necho a\rpartial");
        assert_eq!(texts(&effect), ["ls -l", "echo a"]);
        assert_eq!(effect.after.text, "partial");
        assert!(effect.completed.iter().all(|l| l.opaque.is_none()));
        // Text typed earlier is the start of the line a later Return runs.
        let effect = press_named(&effect.after, "Return");
        assert_eq!(texts(&effect), ["partial"]);
        assert_eq!(effect.after, Line::default());
    }

    #[test]
    fn backspace_edits_ascii_and_makes_other_characters_opaque() {
        let effect = type_text(&Line::default(), "rmx\u{8}\u{8}\u{8}ls");
        assert_eq!(effect.after.text, "ls");
        let effect = press_named(&effect.after, "BackSpace");
        assert_eq!(effect.after.text, "l");
        let effect = type_text(&Line::default(), "é\u{8}");
        assert!(effect.after.opaque.is_some());
    }

    #[test]
    fn plain_keys_append_and_untracked_keys_make_the_line_opaque() {
        let mut line = Line::default();
        for key in ["l", "s", "space", "minus", "shift+a"] {
            line = press_named(&line, key).after;
        }
        assert_eq!(line.text, "ls -A");
        assert!(line.opaque.is_none());
        for key in [
            "ctrl+v",
            "ctrl+r",
            "Up",
            "Tab",
            "alt+b",
            "ctrl+shift+v",
            "shift+1",
        ] {
            let effect = press_named(&line, key);
            assert!(effect.completed.is_empty(), "{key}");
            let why = effect.after.opaque.expect(key);
            assert!(why.contains(key), "{why}");
        }
        // Once opaque, a line stays so until it ends; the next one starts clear.
        let opaque = press_named(&line, "ctrl+v").after;
        let typed = type_text(&opaque, "x\ny");
        assert!(typed.completed[0].opaque.is_some());
        assert_eq!(typed.after.text, "y");
        assert!(typed.after.opaque.is_none());
    }

    #[test]
    fn other_line_ending_keys_run_an_opaque_line_and_leave_one() {
        let line = type_text(&Line::default(), "ls").after;
        for key in ["ctrl+j", "ctrl+m", "ctrl+o", "shift+Return", "alt+Return"] {
            let effect = press_named(&line, key);
            assert_eq!(texts(&effect), ["ls"], "{key}");
            assert!(effect.completed[0].opaque.is_some(), "{key}");
            assert!(effect.after.opaque.is_some(), "{key}");
        }
    }

    #[test]
    fn tab_makes_a_typed_line_opaque() {
        let effect = type_text(&Line::default(), "cat /etc/pass\t\n");
        assert!(
            effect.completed[0]
                .opaque
                .as_deref()
                .unwrap()
                .contains("Tab")
        );
    }

    #[test]
    fn the_tracker_counts_changes_per_window() {
        let tracker = LineTracker::default();
        assert_eq!(tracker.line(7), (Line::default(), 0));
        {
            let mut held = tracker.hold();
            held.set(
                7,
                Line {
                    text: "ls".into(),
                    opaque: None,
                },
            );
            held.make_opaque(9, "pasted");
        }
        assert_eq!(tracker.line(7).0.text, "ls");
        assert_eq!(tracker.line(7).1, 1);
        assert_eq!(tracker.line(9).0.opaque.as_deref(), Some("pasted"));
        tracker.retain(&[9]);
        assert_eq!(tracker.line(7), (Line::default(), 0));
    }
}
