//! What an approver is shown of a pending call, exactly: the structured view of what will run
//! ([`WillRun`]), the one escaping function every approver uses ([`escape`], [`unescape`]), the
//! warnings it raises, and the plain-words rendering ([`Shown`]) shared by the terminal approver
//! and the approval window.
//!
//! # What is escaped
//! Every escape has the form `\u{HEX}` (the character's code point), so the shown text is
//! unambiguous and [`unescape`] gives the original back. Escaped, and flagged with a warning:
//! - control characters (C0, DEL, C1): a carriage return or an escape sequence can rewrite what a
//!   terminal shows; a newline too, except in a script or stdin, whose lines are shown as lines;
//! - bidi controls (U+061C, U+200E, U+200F, U+202A–202E, U+2066–2069): they reorder the text as
//!   displayed, not as run;
//! - invisible characters (zero-width U+200B–200D, U+2060–2064, U+FEFF, the soft hyphen,
//!   variation selectors, tag characters, private use...);
//! - look-alikes: characters that pass for ASCII (Greek, Cyrillic, Armenian, Cherokee, fullwidth
//!   and mathematical letters, dashes, quotes and spaces that are not ASCII, combining marks...),
//!   anywhere; and **any** non-ASCII character in a command name, a flag (a word starting with
//!   `-`) or a variable name, where ASCII is all that is ever needed.
//!
//! Escaped without a warning: a tab (its width is the terminal's choice), spaces at the start or
//! end of a one-line value (otherwise invisible), and a backslash that is followed by `u{`
//! (so that text which looks like an escape is never taken for one). Other non-ASCII text, such
//! as `é`, `ü`, `中` or an emoji in an argument, is shown as it is.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::facts::ActionFacts;

/// What an asked call will do: its description and its facts, each value whole (the terminal
/// and the window cut long values and say so; `approvals list --json` carries all of it). Every
/// approver shows it through [`WillRun::rows`], [`WillRun::warnings`] and [`WillRun::one_line`],
/// all three read from one list of what is shown ([`WillRun::entries`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WillRun {
    /// The action in its surface's words (`run ["git", "status"] in /src`, `click at 10,20`).
    pub description: String,
    /// What the action will do, as policy decided on it and the intent receipt records it.
    pub facts: ActionFacts,
}

/// One thing an approver is shown of a pending call: a row on screen, the values checked for
/// characters that could be misread, and what the one-line summary says of it.
struct Entry {
    /// The row's label (`argv[0]`, `env GIT_DIR`, `target`).
    label: String,
    /// The values shown on the row, each with the field a warning names and the context it is
    /// escaped in; joined by `joiner`.
    values: Vec<(String, String, Context)>,
    joiner: &'static str,
    /// Values checked for warnings but shown in the label, not on the row (a variable's name).
    in_label: Vec<(String, String, Context)>,
    /// What the one-line summary says of this entry, unescaped (the whole line is escaped).
    summary: Option<String>,
}

impl Entry {
    fn one(label: impl Into<String>, value: &str, context: Context) -> Entry {
        let label = label.into();
        Entry {
            values: vec![(label.clone(), value.to_string(), context)],
            label,
            joiner: "",
            in_label: Vec::new(),
            summary: None,
        }
    }

    fn summary(mut self, summary: String) -> Entry {
        self.summary = Some(summary);
        self
    }
}

/// Where a value is shown, which decides what must be escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A command name, a flag or a variable name: ASCII only.
    Word,
    /// A value on one line (an argument, a path, a variable's value).
    Line,
    /// A script or stdin: newlines are shown as line breaks.
    Lines,
}

/// Why a character was escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concern {
    Control,
    Bidi,
    Invisible,
    LookAlike,
}

impl Concern {
    fn explain(self) -> &'static str {
        match self {
            Concern::Control => {
                "control characters (they can move the cursor or rewrite what a terminal shows)"
            }
            Concern::Bidi => "bidi overrides (the text is displayed in another order than it runs)",
            Concern::Invisible => "invisible characters (zero-width, not shown at all)",
            Concern::LookAlike => {
                "look-alike characters (not ASCII, but they pass for it; only ASCII is expected here)"
            }
        }
    }
}

/// A field whose value holds characters an approver could misread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Which value: `argv[2]`, `script`, `env GIT_DIR`, `stdin`...
    pub field: String,
    pub concern: Concern,
    /// The characters as escaped (`\u{202e}`), each once, in order of appearance.
    pub chars: Vec<String>,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.field,
            self.concern.explain(),
            self.chars.join(" ")
        )
    }
}

/// A value made safe to show: printable ASCII, line breaks where allowed, and non-ASCII text that
/// cannot be mistaken for anything else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Escaped {
    pub text: String,
    /// Each concern found, with its characters escaped, in order of appearance.
    pub concerns: Vec<(Concern, Vec<String>)>,
}

/// Escapes `text` for showing in `context` (see the module's documentation for the rules).
pub fn escape(text: &str, context: Context) -> Escaped {
    let mut out = Escaped::default();
    let last = text.chars().count().saturating_sub(1);
    for (index, (at, c)) in text.char_indices().enumerate() {
        let edge_space = c == ' ' && context != Context::Lines && (index == 0 || index == last);
        let literal_backslash = c == '\\' && text[at + 1..].starts_with("u{");
        let concern = concern_of(c, context);
        if concern.is_none() && !edge_space && !literal_backslash && c != '\t' {
            out.text.push(c);
            continue;
        }
        let escaped = format!("\\u{{{:x}}}", c as u32);
        if let Some(concern) = concern {
            match out.concerns.iter_mut().find(|(k, _)| *k == concern) {
                Some((_, chars)) if chars.contains(&escaped) => {}
                Some((_, chars)) => chars.push(escaped.clone()),
                None => out.concerns.push((concern, vec![escaped.clone()])),
            }
        }
        out.text.push_str(&escaped);
    }
    out
}

/// The original text of an escaped one: every `\u{HEX}` naming a character becomes it; any
/// other backslash is itself.
pub fn unescape(shown: &str) -> String {
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(at) = rest.find("\\u{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let decoded = after.find('}').and_then(|end| {
            let hex = &after[..end];
            let valid = (1..=6).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
            valid
                .then(|| u32::from_str_radix(hex, 16).ok().and_then(char::from_u32))
                .flatten()
                .map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Why `c` may not be shown as it is in `context`, if it may not.
pub fn concern_of(c: char, context: Context) -> Option<Concern> {
    let code = c as u32;
    if c == '\n' && context == Context::Lines {
        return None;
    }
    if c == '\t' {
        // Escaped for its width, not for a risk.
        return None;
    }
    if c.is_control() {
        return Some(Concern::Control);
    }
    if c.is_ascii() {
        return None;
    }
    if is_bidi(code) {
        return Some(Concern::Bidi);
    }
    if is_invisible(code) {
        return Some(Concern::Invisible);
    }
    if context == Context::Word || is_look_alike(code) {
        return Some(Concern::LookAlike);
    }
    None
}

fn is_bidi(code: u32) -> bool {
    matches!(code, 0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069)
}

fn is_invisible(code: u32) -> bool {
    matches!(
        code,
        0x00AD
            | 0x034F
            | 0x115F
            | 0x1160
            | 0x17B4
            | 0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200D
            | 0x2060..=0x2065
            | 0x206A..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFFB
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
            | 0xE000..=0xF8FF
            | 0xF0000..=0x10FFFF
    ) || (code & 0xFFFE) == 0xFFFE
        || (0xFDD0..=0xFDEF).contains(&code)
}

/// Characters that pass for ASCII letters, digits, punctuation or spaces.
fn is_look_alike(code: u32) -> bool {
    matches!(
        code,
        // Non-ASCII spaces.
        0x00A0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000
            // Latin letters that are ASCII's twins: ǀ ǁ ǂ ǃ, dotless i, long s; IPA and
            // modifier letters; combining marks (they fake accents and strokes).
            | 0x01C0..=0x01C3 | 0x0131 | 0x017F | 0x0250..=0x036F
            // Greek, Cyrillic, Armenian, Cherokee, Lisu, Coptic.
            | 0x0370..=0x058F | 0x13A0..=0x13FF | 0x1C80..=0x1C8F | 0x1F00..=0x1FFF
            | 0x2C80..=0x2CFF | 0x2DE0..=0x2DFF | 0xA4D0..=0xA4FF | 0xA640..=0xA69F
            | 0xAB70..=0xABBF
            // Phonetic and small-capital letters, combining marks again.
            | 0x1AB0..=0x1AFF | 0x1D00..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
            // Dashes, quotes, dots and slashes of general punctuation; super- and subscripts;
            // letter-like symbols, Roman numerals, math operators, enclosed letters.
            | 0x2010..=0x205E | 0x2070..=0x209F | 0x2100..=0x218F | 0x2200..=0x22FF
            | 0x2460..=0x24FF | 0x29F8 | 0x29F9
            // Small and fullwidth forms, mathematical letters and digits.
            | 0xFE50..=0xFE6F | 0xFF00..=0xFFEF | 0x1D400..=0x1D7FF | 0x1F100..=0x1F1FF
    )
}

/// How many characters of one value the terminal and the window show before cutting it.
pub const SHOWN_CHARS: usize = 2000;

/// Where the whole of a cut value can be read.
pub const WHOLE_VALUE_AT: &str = "`computer approvals list --json`";

/// One value as shown: its escaped lines, and what was left out if it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `argv[0]`, `script`, `cwd`, `env NAME`...
    pub label: String,
    /// The escaped value (several lines for a script or stdin).
    pub value: String,
    /// Said after the value when it was cut.
    pub cut: Option<String>,
}

/// A pending call as every approver shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Who asks, for what, under which rule (plain words, escaped).
    pub title: String,
    pub rows: Vec<Row>,
    pub warnings: Vec<Warning>,
}

impl WillRun {
    pub fn new(description: impl Into<String>, facts: ActionFacts) -> WillRun {
        WillRun {
            description: description.into(),
            facts,
        }
    }

    /// Everything an approver is shown, in order: each fact's row, the values its warnings
    /// check, and its words in the one-line summary are written here, side by side.
    fn entries(&self) -> Vec<Entry> {
        let facts = &self.facts;
        let mut entries = Vec::new();
        if let Some(argv) = &facts.argv {
            for (index, word) in argv.iter().enumerate() {
                entries.push(Entry::one(
                    format!("argv[{index}]"),
                    word,
                    word_context(index, word),
                ));
            }
        }
        if let Some(script) = &facts.script {
            entries.push(Entry::one("script", script, Context::Lines));
        }
        // Every command found, unless it is only the argv itself: a wrapper's (`env X=1 git`,
        // `sh` reading a script on stdin) are shown beside the argv.
        let only_the_argv = matches!(&facts.argv,
            Some(argv) if facts.programs.len() == 1 && facts.programs[0] == *argv);
        if !only_the_argv {
            for (n, command) in facts.programs.iter().enumerate() {
                entries.push(Entry {
                    label: format!("command {}", n + 1),
                    values: command
                        .iter()
                        .enumerate()
                        .map(|(index, word)| {
                            let field = format!("command {}[{index}]", n + 1);
                            (field, word.clone(), word_context(index, word))
                        })
                        .collect(),
                    joiner: " ",
                    in_label: Vec::new(),
                    summary: None,
                });
            }
        }
        if let Some(why) = &facts.opaque {
            let said = format!("not every command is known before it runs: {why}");
            entries.push(
                Entry::one("not known", &said, Context::Line)
                    .summary(format!("not every command is known: {why}")),
            );
        }
        if facts.argv.is_none() && facts.script.is_none() {
            entries.push(Entry::one("action", &self.description, Context::Line));
        }
        if let Some(cwd) = &facts.cwd {
            entries.push(Entry::one("cwd", &cwd.display().to_string(), Context::Line));
        }
        let names: Vec<&str> = facts.env_names().collect();
        let sets = (!names.is_empty()).then(|| format!("sets {}", names.join(", ")));
        for (name, value) in &facts.env {
            let field = format!("env {}", escape(name, Context::Word).text);
            let mut entry = Entry::one(field.clone(), value, Context::Line);
            entry.in_label = vec![(format!("{field} (name)"), name.clone(), Context::Word)];
            entries.push(entry);
        }
        if !facts.script_env.is_empty() {
            entries.push(Entry {
                label: "script sets".into(),
                values: (facts.script_env.iter())
                    .map(|name| ("script sets".to_string(), name.clone(), Context::Word))
                    .collect(),
                joiner: " ",
                in_label: Vec::new(),
                summary: None,
            });
        }
        // The variables set, by name, once in the summary.
        if let (Some(sets), Some(first)) = (
            sets,
            entries
                .iter_mut()
                .find(|e| e.label.starts_with("env ") || e.label == "script sets"),
        ) {
            first.summary = Some(sets);
        }
        if let Some(stdin) = &facts.stdin {
            let cut = if stdin.head.len() < stdin.bytes {
                " (cut)"
            } else {
                ""
            };
            let label = format!("stdin ({} bytes, sha256 {})", stdin.bytes, stdin.sha256);
            let mut entry = Entry::one(label, &stdin.text, Context::Lines).summary(format!(
                "stdin {} bytes: {:?}{cut}",
                stdin.bytes, stdin.head
            ));
            entry.values[0].0 = "stdin".into();
            entries.push(entry);
        }
        if !facts.secrets.is_empty() {
            let shown: Vec<String> = facts.secrets.iter().map(|s| s.shown()).collect();
            let summary: Vec<String> = shown.iter().map(|s| format!("secret {s}")).collect();
            entries.push(Entry {
                label: "secrets".into(),
                values: (shown.into_iter())
                    .map(|s| ("secret".to_string(), s, Context::Line))
                    .collect(),
                joiner: ", ",
                in_label: Vec::new(),
                summary: Some(summary.join("; ")),
            });
        }
        if let Some(target) = &facts.target {
            let parts = target.parts();
            if !parts.is_empty() {
                // A target only the args spell may turn out to be another at run time: say so.
                let how = if target.resolved {
                    ""
                } else {
                    " (as the call names it)"
                };
                let summary = parts
                    .iter()
                    .map(|(what, value)| match what {
                        &"pid" => format!("pid {value}"),
                        _ => format!("{what} \"{value}\""),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let mut values: Vec<(String, String, Context)> = parts
                    .into_iter()
                    .map(|(what, value)| {
                        (
                            format!("target {what}"),
                            format!("{what} {value}"),
                            Context::Line,
                        )
                    })
                    .collect();
                if !target.resolved {
                    let field = "target".to_string();
                    values.push((field, "as the call names it".into(), Context::Line));
                }
                entries.push(Entry {
                    label: "target".into(),
                    values,
                    joiner: ", ",
                    in_label: Vec::new(),
                    summary: Some(format!("target {summary}{how}")),
                });
            }
        }
        entries
    }

    /// Every value that holds characters an approver could misread.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut warnings = Vec::new();
        for entry in self.entries() {
            for (field, value, context) in entry.in_label.iter().chain(&entry.values) {
                for (concern, chars) in escape(value, *context).concerns {
                    warnings.push(Warning {
                        field: field.clone(),
                        concern,
                        chars,
                    });
                }
            }
        }
        warnings
    }

    /// The rows an approver reads, each value escaped and cut at [`SHOWN_CHARS`].
    pub fn rows(&self) -> Vec<Row> {
        self.entries()
            .into_iter()
            .map(|entry| {
                let escaped: Vec<String> = (entry.values.iter())
                    .map(|(_, value, context)| escape(value, *context).text)
                    .collect();
                let (value, cut) = cut(&escaped.join(entry.joiner), SHOWN_CHARS);
                Row {
                    label: entry.label,
                    value,
                    cut,
                }
            })
            .collect()
    }

    /// The action in one line, escaped, as a pending request's `action` says it: the
    /// description, then what else takes part in the run (variables set, stdin, secrets, why
    /// its commands are not all known, the target).
    pub fn one_line(&self) -> String {
        let mut text = self.description.clone();
        for summary in self.entries().into_iter().filter_map(|e| e.summary) {
            text.push_str("; ");
            text.push_str(&summary);
        }
        escape(&text, Context::Line).text
    }
}

/// A command's name and its flags hold ASCII only; its other arguments are ordinary text.
fn word_context(index: usize, word: &str) -> Context {
    if index == 0 || word.starts_with('-') {
        Context::Word
    } else {
        Context::Line
    }
}

/// `text` cut after `max` characters, never inside an escape, with what was left out.
fn cut(text: &str, max: usize) -> (String, Option<String>) {
    let total = text.chars().count();
    if total <= max {
        return (text.to_string(), None);
    }
    let mut end = text
        .char_indices()
        .nth(max)
        .map_or(text.len(), |(at, _)| at);
    // An escape cut in two would read as something else: cut before it.
    if let Some(start) = text[..end].rfind("\\u{")
        && !text[start..end].contains('}')
    {
        end = start;
    }
    let shown = &text[..end];
    let left = total - shown.chars().count();
    (
        shown.to_string(),
        Some(format!(
            "[cut here: {left} more characters not shown; the whole value is in {WHOLE_VALUE_AT}]"
        )),
    )
}

impl fmt::Display for Shown {
    /// The terminal's form: the title, the warnings, then one value per row (a script's or
    /// stdin's lines each behind `| `, so where a value starts and ends is plain).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.title)?;
        for warning in &self.warnings {
            writeln!(f, "     WARNING {warning}")?;
        }
        for row in &self.rows {
            let mut lines = row.value.split('\n');
            writeln!(f, "     {:<10} | {}", row.label, lines.next().unwrap_or(""))?;
            for line in lines {
                writeln!(f, "     {:<10} | {line}", "")?;
            }
            if let Some(cut) = &row.cut {
                writeln!(f, "     {:<10}   {cut}", "")?;
            }
        }
        Ok(())
    }
}

/// `text` with every non-ASCII character written as a JSON `\u` escape: the same JSON value,
/// safe to print on a terminal (no bidi override or escape sequence reaches it).
pub fn ascii_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::facts::{StdinFacts, TargetFacts, TargetKind};
    use proptest::prelude::*;

    fn check(text: &str, context: Context, shown: &str, concerns: &[Concern]) {
        let escaped = escape(text, context);
        assert_eq!(escaped.text, shown, "{text:?}");
        let found: Vec<Concern> = escaped.concerns.iter().map(|(c, _)| *c).collect();
        assert_eq!(found, concerns, "{text:?}");
        assert_eq!(unescape(&escaped.text), text);
    }

    #[test]
    fn each_kind_of_character_is_shown_as_expected() {
        use Concern::*;
        use Context::*;
        check("--force", Word, "--force", &[]);
        check("git status", Line, "git status", &[]);
        check("café ü 中 ✓", Line, "café ü 中 ✓", &[]);
        check("a\u{202e}b", Line, "a\\u{202e}b", &[Bidi]);
        check("\u{2066}x\u{2069}", Lines, "\\u{2066}x\\u{2069}", &[Bidi]);
        check("ls\u{200b}", Word, "ls\\u{200b}", &[Invisible]);
        check(
            "\u{feff}x\u{2060}",
            Line,
            "\\u{feff}x\\u{2060}",
            &[Invisible],
        );
        // Cyrillic а and Greek ο look like Latin a and o.
        check("c\u{0430}t", Word, "c\\u{430}t", &[LookAlike]);
        check("d\u{03bf}g", Line, "d\\u{3bf}g", &[LookAlike]);
        // Fullwidth letters, a non-ASCII hyphen before a flag.
        check("\u{ff52}\u{ff4d}", Line, "\\u{ff52}\\u{ff4d}", &[LookAlike]);
        check("\u{2010}-force", Word, "\\u{2010}-force", &[LookAlike]);
        // In a command name or flag, any non-ASCII is suspect; in an argument, é is just é.
        check("caf\u{e9}", Word, "caf\\u{e9}", &[LookAlike]);
        check("caf\u{e9}", Line, "caf\u{e9}", &[]);
        check("a\u{1b}[2Jb\r", Line, "a\\u{1b}[2Jb\\u{d}", &[Control]);
        check("one\ntwo", Lines, "one\ntwo", &[]);
        check("one\ntwo", Line, "one\\u{a}two", &[Control]);
        check("a\tb", Lines, "a\\u{9}b", &[]);
        // Spaces that would be invisible at a value's ends.
        check(" x ", Line, "\\u{20}x\\u{20}", &[]);
        check(" x ", Lines, " x ", &[]);
        // Text that looks like an escape is never taken for one.
        check("\\u{41}", Line, "\\u{5c}u{41}", &[]);
        check("a\\nb \\\\", Lines, "a\\nb \\\\", &[]);
        check(
            "\u{202e}\u{202e}\u{200d}",
            Line,
            "\\u{202e}\\u{202e}\\u{200d}",
            &[Bidi, Invisible],
        );
    }

    #[test]
    fn warnings_name_the_field_and_the_characters() {
        let view = WillRun::new(
            "run",
            ActionFacts {
                argv: Some(vec!["git".into(), "push".into(), "\u{2014}force".into()]),
                env: BTreeMap::from([("GIT_CONFIG_KEY_0".into(), "core.pager".into())]),
                stdin: Some(StdinFacts::of("a\u{202e}b")),
                ..ActionFacts::default()
            },
        );
        let warnings: Vec<String> = view.warnings().iter().map(|w| w.to_string()).collect();
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert!(
            warnings[0].starts_with("argv[2]: look-alike") && warnings[0].ends_with("\\u{2014}")
        );
        assert!(warnings[1].starts_with("stdin: bidi") && warnings[1].ends_with("\\u{202e}"));
    }

    #[test]
    fn rows_warnings_and_the_one_line_say_the_same_facts() {
        let facts = ActionFacts {
            env: BTreeMap::from([("PAGER".into(), "cat".into())]),
            stdin: Some(StdinFacts::of("hello")),
            opaque: Some("eval".into()),
            target: Some(TargetFacts {
                kind: TargetKind::Element,
                app: Some("gedit\u{202e}".into()),
                window_id: Some("ref:7".into()),
                resolved: false,
                ..TargetFacts::default()
            }),
            ..ActionFacts::default()
        };
        let view = WillRun::new("press ref:7", facts);
        let rows: Vec<(String, String)> = (view.rows().into_iter())
            .map(|row| (row.label, row.value))
            .collect();
        let row = |label: &str| {
            let found = rows.iter().find(|(l, _)| l.starts_with(label));
            found.map(|(_, value)| value.as_str())
        };
        assert_eq!(row("action"), Some("press ref:7"));
        assert_eq!(row("env PAGER"), Some("cat"));
        assert_eq!(row("stdin (5 bytes"), Some("hello"));
        assert_eq!(
            row("target"),
            Some("app gedit\\u{202e}, element ref:7, as the call names it")
        );
        let fields: Vec<String> = view.warnings().into_iter().map(|w| w.field).collect();
        assert_eq!(fields, ["target app"]);
        let line = view.one_line();
        for said in [
            "press ref:7",
            "not every command is known: eval",
            "sets PAGER",
            "stdin 5 bytes: \"hello\"",
            "target app \"gedit\\u{202e}\", element \"ref:7\" (as the call names it)",
        ] {
            assert!(line.contains(said), "{said:?} not in {line:?}");
        }
    }

    #[test]
    fn each_kind_of_target_names_its_fields_in_its_own_words() {
        let row = |target: TargetFacts| {
            let facts = ActionFacts {
                target: Some(target),
                ..ActionFacts::default()
            };
            let rows = WillRun::new("act", facts).rows();
            rows.into_iter()
                .find(|row| row.label == "target")
                .unwrap()
                .value
        };
        let window = TargetFacts {
            app: Some("xterm".into()),
            window: Some("bash".into()),
            window_id: Some("4194305".into()),
            pid: Some(42),
            resolved: true,
            ..TargetFacts::default()
        };
        assert_eq!(row(window.clone()), "app xterm, window bash, pid 42");
        let untitled = TargetFacts {
            window: None,
            ..window
        };
        assert_eq!(row(untitled), "app xterm, window 4194305, pid 42");
        let item = TargetFacts {
            kind: TargetKind::SecretItem,
            app: Some("github.com".into()),
            window: Some("me".into()),
            window_id: Some("keychain://github.com/me".into()),
            resolved: true,
            ..TargetFacts::default()
        };
        assert_eq!(row(item), "service github.com, account me");
    }

    #[test]
    fn a_long_value_says_how_much_was_left_out_and_where_the_rest_is() {
        let long = format!("{}\u{202e}tail", "x".repeat(SHOWN_CHARS - 3));
        let view = WillRun::new(
            "run",
            ActionFacts {
                script: Some(long.clone()),
                ..ActionFacts::default()
            },
        );
        let rows = view.rows();
        let script = &rows[0];
        // The cut falls inside the escape `\u{202e}`: it moves before it.
        assert_eq!(script.value, "x".repeat(SHOWN_CHARS - 3));
        let cut = script.cut.as_deref().unwrap();
        let left = escape(&long, Context::Lines).text.chars().count() - (SHOWN_CHARS - 3);
        assert!(
            cut.contains(&format!("{left} more characters not shown")),
            "{cut}"
        );
        assert!(cut.contains("computer approvals list --json"), "{cut}");
        let short = WillRun::new(
            "run",
            ActionFacts {
                script: Some("echo hi".into()),
                ..ActionFacts::default()
            },
        );
        assert_eq!(short.rows()[0].cut, None);
    }

    #[test]
    fn json_for_a_terminal_is_ascii_and_the_same_value() {
        let value = serde_json::json!({"s": "a\u{202e}b\u{1d400}é", "n": 1});
        let text = ascii_json(&value);
        assert!(text.is_ascii(), "{text}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            value
        );
    }

    fn context() -> impl Strategy<Value = Context> {
        prop_oneof![
            Just(Context::Word),
            Just(Context::Line),
            Just(Context::Lines)
        ]
    }

    /// Text rich in what matters here: ASCII, backslashes and `u{`, controls, bidi, invisible,
    /// look-alike and ordinary non-ASCII characters, and anything else.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[ -~]{0,4}",
            Just("\\u{".to_string()),
            Just("\\".to_string()),
            Just("}".to_string()),
            Just("\n".to_string()),
            Just("\t".to_string()),
            prop::sample::select(vec![
                '\u{202e}',
                '\u{2066}',
                '\u{200b}',
                '\u{feff}',
                '\u{430}',
                '\u{3bf}',
                '\u{ff0d}',
                '\u{1b}',
                '\u{7f}',
                '\u{85}',
                '\u{e9}',
                '\u{4e2d}',
                '\u{1f600}',
                '\u{a0}',
                '\u{10ffff}',
                '\u{e0041}',
            ])
            .prop_map(String::from),
            any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn the_escaped_form_is_safe_and_gives_the_original_back(text in text(), context in context()) {
            let escaped = escape(&text, context);
            for c in escaped.text.chars() {
                let printable_ascii = (' '..='~').contains(&c);
                let line_break = c == '\n' && context == Context::Lines;
                let safe = !c.is_ascii() && concern_of(c, context).is_none();
                prop_assert!(printable_ascii || line_break || safe, "{c:?} in {:?}", escaped.text);
            }
            prop_assert_eq!(unescape(&escaped.text), text.clone());
            // Every risky character is reported.
            let reported = text.chars().filter(|c| concern_of(*c, context).is_some()).count() > 0;
            prop_assert_eq!(reported, !escaped.concerns.is_empty());
        }
    }
}
