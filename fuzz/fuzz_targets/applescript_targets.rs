//! Fuzzes the AppleScript/JXA target reader: for any source, an application named by a literal
//! after it (on a new line, whatever ends the line) is found unless the source is opaque, and a
//! name written as a string literal, escaped as the language escapes it, reads back as itself.
//! A target the reader misses is an application an allow rule would wrongly cover.
#![no_main]

use computer_surfaces::applescript::Language;
use computer_surfaces::applescript::targets::targets;
use libfuzzer_sys::fuzz_target;

const MARK: &str = "Zq Mark";

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    // The source as given: the reader never panics, and a second reading agrees.
    for language in [Language::AppleScript, Language::JavaScript] {
        assert_eq!(targets(language, text), targets(language, text));
    }

    // Whatever came before, a literal target on a line of its own is seen, or the whole is
    // opaque. Each language's own line ends are tried.
    for end in ["\n", "\r", "\r\n"] {
        let source = format!("{text}{end}tell application \"{MARK}\" to activate{end}");
        let found = targets(Language::AppleScript, &source);
        assert!(
            found.opaque.is_some() || found.apps.iter().any(|a| a == MARK),
            "applescript after {end:?} missed its target: {found:?}"
        );
    }
    for end in ["\n", "\r", "\u{2028}", "\u{2029}"] {
        let source = format!("{text}{end};Application(\"{MARK}\").activate(){end}");
        let found = targets(Language::JavaScript, &source);
        assert!(
            found.opaque.is_some() || found.apps.iter().any(|a| a == MARK),
            "jxa after {end:?} missed its target: {found:?}"
        );
    }

    // The input as an application's name, written as a literal.
    let escaped = text.replace('\\', r"\\").replace('"', "\\\"");
    let found = targets(
        Language::AppleScript,
        &format!("tell application \"{escaped}\" to activate"),
    );
    if !text.is_empty() {
        assert!(
            found.opaque.is_some() || found.apps.first().map(String::as_str) == Some(text),
            "applescript name {text:?} read as {found:?}"
        );
    }
    let found = targets(
        Language::JavaScript,
        &format!(
            "Application({}).activate()",
            serde_json::to_string(text).expect("a string serialises")
        ),
    );
    if !text.is_empty() {
        assert!(
            found.opaque.is_some() || found.apps.first().map(String::as_str) == Some(text),
            "jxa name {text:?} read as {found:?}"
        );
    }
});
