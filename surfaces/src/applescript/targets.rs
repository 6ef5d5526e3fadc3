//! The applications an AppleScript or JXA source sends Apple events to, found by reading the
//! source (never by running it): `tell application "…"` / `app "…"` / `application id "…"` and
//! JXA's `Application("…")`. Anything that could reach an application the source does not name
//! as a literal (a computed name, `do shell script`, `run script`, AppleScriptObjC, raw event
//! codes, JXA's `eval`, the ObjC bridge, computed property access...) makes the source *opaque*,
//! and an opaque action is never covered by an allow rule. Pure text work: tested on every OS.

use super::Language;

/// What a source targets, as far as reading it can tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// Applications named by literal, in order of first appearance, each once (a bundle id
    /// such as `com.apple.finder` when the source names one with `application id`).
    pub apps: Vec<String>,
    /// Why the source may reach applications not in `apps`, when it may.
    pub opaque: Option<String>,
}

impl Targets {
    /// Adds a target as written and, when it was written as a path or with `.app`, also by its
    /// plain name (`/System/Library/CoreServices/Finder.app` is also `Finder`): one more name can
    /// only make a deny rule match more and an allow rule cover less.
    fn add(&mut self, app: String) {
        let plain = plain_name(&app);
        for name in [app, plain] {
            if !name.is_empty() && !self.apps.contains(&name) {
                self.apps.push(name);
            }
        }
    }

    fn opaque(&mut self, why: String) {
        // The first reason is kept: it is the one a person reads first in the source.
        self.opaque.get_or_insert(why);
    }
}

/// An application's name without the folders and `.app` it may be written with.
fn plain_name(app: &str) -> String {
    let last = app.trim_end_matches('/').rsplit('/').next().unwrap_or(app);
    match last.len().checked_sub(4) {
        Some(cut) if last.is_char_boundary(cut) && last[cut..].eq_ignore_ascii_case(".app") => {
            last[..cut].to_string()
        }
        _ => last.to_string(),
    }
}

/// The targets of `source`, written in `language`.
pub fn targets(language: Language, source: &str) -> Targets {
    match language {
        Language::AppleScript => applescript(source),
        Language::JavaScript => javascript(source),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A word, lower-cased for AppleScript (its keywords are case-insensitive), as written for JS.
    Word(String),
    /// A string literal's text, escapes decoded; `escaped` when it held an escape JXA would
    /// decode in ways this reader does not follow.
    Str {
        text: String,
        escaped: bool,
    },
    Number,
    Punct(char),
}

struct Lexed {
    tokens: Vec<(Token, usize)>,
    /// Set when the text cannot be read safely past some point.
    unreadable: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// AppleScript

fn applescript(source: &str) -> Targets {
    let lexed = lex_applescript(source);
    let mut found = Targets::default();
    if let Some(why) = lexed.unreadable {
        found.opaque(why);
    }
    let tokens = &lexed.tokens;
    let word = |i: usize| match tokens.get(i) {
        Some((Token::Word(w), _)) => Some(w.as_str()),
        _ => None,
    };
    for (i, (token, line)) in tokens.iter().enumerate() {
        let Token::Word(w) = token else { continue };
        let line = *line;
        match w.as_str() {
            "application" | "app" => {
                if i > 0 && word(i - 1) == Some("current") {
                    // The script's own host (osascript), not another application; its `'s`
                    // form is AppleScriptObjC, refused below.
                    if matches!(tokens.get(i + 1), Some((Token::Punct('\''), _))) {
                        found.opaque(format!(
                            "line {line}: `current application's` reaches Cocoa through \
                             AppleScriptObjC, which can do anything a program can"
                        ));
                    }
                    continue;
                }
                match (tokens.get(i + 1), tokens.get(i + 2)) {
                    (Some((Token::Str { text, .. }, _)), _) => found.add(text.clone()),
                    (Some((Token::Word(id), _)), Some((Token::Str { text, .. }, _)))
                        if id == "id" =>
                    {
                        found.add(text.clone())
                    }
                    // Classes of System Events and Finder, not targets.
                    (Some((Token::Word(class), _)), _)
                        if matches!(class.as_str(), "process" | "processes" | "file" | "files") => {
                    }
                    _ => found.opaque(format!(
                        "line {line}: `{w}` is not followed by a literal name, so the \
                         application it targets is known only when the script runs"
                    )),
                }
            }
            "do" if word(i + 1) == Some("shell") && word(i + 2) == Some("script") => {
                found.opaque(format!(
                    "line {line}: `do shell script` runs shell commands this reader does not see"
                ))
            }
            "run" | "load" if word(i + 1) == Some("script") => found.opaque(format!(
                "line {line}: `{w} script` runs script code that is not in this source"
            )),
            "use" if matches!(word(i + 1), Some("framework" | "script")) => found.opaque(format!(
                "line {line}: `use {}` brings in code that is not in this source",
                word(i + 1).unwrap_or_default()
            )),
            "machine" => found.opaque(format!(
                "line {line}: `machine` sends Apple events to another computer"
            )),
            _ => {}
        }
    }
    found
}

fn lex_applescript(source: &str) -> Lexed {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let unreadable = |what: &str, line: usize| Some(format!("line {line}: {what}"));
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' | '\r' => {
                // `\r\n` counts once.
                if !(c == '\r' && chars.get(i + 1) == Some(&'\n')) {
                    line += 1;
                }
                i += 1;
            }
            c if c.is_whitespace() || c == '¬' => i += 1,
            '-' if chars.get(i + 1) == Some(&'-') => {
                while i < chars.len() && !matches!(chars[i], '\n' | '\r') {
                    i += 1;
                }
            }
            '#' => {
                while i < chars.len() && !matches!(chars[i], '\n' | '\r') {
                    i += 1;
                }
            }
            '(' if chars.get(i + 1) == Some(&'*') => {
                // Block comments nest in AppleScript.
                let start = line;
                let mut depth = 0;
                loop {
                    match (chars.get(i), chars.get(i + 1)) {
                        (None, _) => {
                            return Lexed {
                                tokens,
                                unreadable: unreadable("a `(*` comment is never closed", start),
                            };
                        }
                        (Some('('), Some('*')) => {
                            depth += 1;
                            i += 2;
                        }
                        (Some('*'), Some(')')) => {
                            depth -= 1;
                            i += 2;
                            if depth == 0 {
                                break;
                            }
                        }
                        (Some('\n'), _) => {
                            line += 1;
                            i += 1;
                        }
                        _ => i += 1,
                    }
                }
            }
            '"' | '“' => {
                let close = if c == '"' { '"' } else { '”' };
                let start = line;
                let mut text = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Lexed {
                                tokens,
                                unreadable: unreadable("a string is never closed", start),
                            };
                        }
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some('n') => text.push('\n'),
                                Some('t') => text.push('\t'),
                                Some('r') => text.push('\r'),
                                Some(&other) => text.push(other),
                                // A lone `\` at the end: the string is never closed.
                                None => {}
                            }
                            i += 2;
                        }
                        Some(&ch) if ch == close => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            text.push(ch);
                            i += 1;
                        }
                    }
                }
                tokens.push((
                    Token::Str {
                        text,
                        escaped: false,
                    },
                    start,
                ));
            }
            '|' => {
                // `|any text|` is an identifier, never a keyword.
                let start = line;
                let mut text = String::from("|");
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Lexed {
                                tokens,
                                unreadable: unreadable("a `|` identifier is never closed", start),
                            };
                        }
                        Some('|') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            text.push(ch);
                            i += 1;
                        }
                    }
                }
                tokens.push((Token::Word(text), start));
            }
            '«' => {
                return Lexed {
                    tokens,
                    unreadable: unreadable(
                        "raw Apple event codes (`«…»`) can name any event for any application",
                        line,
                    ),
                };
            }
            c if c.is_alphanumeric() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let token = if word.chars().all(|ch| ch.is_ascii_digit()) {
                    Token::Number
                } else {
                    Token::Word(word.to_lowercase())
                };
                tokens.push((token, line));
            }
            '’' => {
                tokens.push((Token::Punct('\''), line));
                i += 1;
            }
            other => {
                tokens.push((Token::Punct(other), line));
                i += 1;
            }
        }
    }
    Lexed {
        tokens,
        unreadable: None,
    }
}

// ---------------------------------------------------------------------------------------------
// JavaScript for Automation

/// Names through which JXA code can reach what this reader cannot follow: code built at run time,
/// the Cocoa bridge, the global object, shell commands, other scripts.
const JXA_OPAQUE_NAMES: &[&str] = &[
    "eval",
    "Function",
    "constructor",
    "__proto__",
    "ObjC",
    "$",
    "globalThis",
    "this",
    "Reflect",
    "Proxy",
    "Library",
    "doShellScript",
    "runScript",
    "import",
    "require",
];

/// Keywords after which a `/` starts a regular expression rather than a division.
const JS_KEYWORDS_BEFORE_EXPRESSION: &[&str] = &[
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "instanceof",
    "yield",
    "await",
];

fn javascript(source: &str) -> Targets {
    let lexed = lex_javascript(source);
    let mut found = Targets::default();
    if let Some(why) = lexed.unreadable {
        found.opaque(why);
    }
    let tokens = &lexed.tokens;
    let at = |i: usize| tokens.get(i).map(|(token, _)| token);
    for (i, (token, line)) in tokens.iter().enumerate() {
        let line = *line;
        match token {
            Token::Word(w) if w == "Application" => match (at(i + 1), at(i + 2), at(i + 3)) {
                (
                    Some(Token::Punct('(')),
                    Some(Token::Str {
                        text,
                        escaped: false,
                    }),
                    Some(Token::Punct(')')),
                ) => found.add(text.clone()),
                (Some(Token::Punct('.')), Some(Token::Word(member)), Some(Token::Punct('(')))
                    if member == "currentApplication" => {}
                _ => found.opaque(format!(
                    "line {line}: `Application` is not called with a literal name, so the \
                         application it targets is known only when the script runs"
                )),
            },
            Token::Word(w) if JXA_OPAQUE_NAMES.contains(&w.as_str()) => found.opaque(format!(
                "line {line}: `{w}` can reach code or applications this reader does not see"
            )),
            Token::Punct('[') if i > 0 && is_value_end(at(i - 1)) => {
                // Property access by a computed name (`app[name]`) can call anything.
                match (at(i + 1), at(i + 2)) {
                    (Some(Token::Number), Some(Token::Punct(']'))) => {}
                    (
                        Some(Token::Str {
                            text,
                            escaped: false,
                        }),
                        Some(Token::Punct(']')),
                    ) => {
                        if text == "Application" || JXA_OPAQUE_NAMES.contains(&text.as_str()) {
                            found.opaque(format!(
                                "line {line}: `{text}` can reach code or applications this \
                                 reader does not see"
                            ))
                        }
                    }
                    _ => found.opaque(format!(
                        "line {line}: a property reached by a computed name (`x[…]`) may be \
                         anything, an application or a shell command included"
                    )),
                }
            }
            _ => {}
        }
    }
    found
}

/// Whether a token can end a value, so that a following `[` indexes it and `/` divides it.
fn is_value_end(token: Option<&Token>) -> bool {
    match token {
        Some(Token::Word(w)) => !JS_KEYWORDS_BEFORE_EXPRESSION.contains(&w.as_str()),
        Some(Token::Str { .. } | Token::Number | Token::Punct(')' | ']')) => true,
        _ => false,
    }
}

fn lex_javascript(source: &str) -> Lexed {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens: Vec<(Token, usize)> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let stop = |tokens: Vec<(Token, usize)>, what: &str, line: usize| Lexed {
        tokens,
        unreadable: Some(format!("line {line}: {what}")),
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if chars.get(i + 1) == Some(&'/') => {
                // JavaScript ends a line at any of its line terminators: a comment read on to
                // the next `\n` would hide the code after a `\r` or U+2028.
                while i < chars.len() && !matches!(chars[i], '\n' | '\r' | '\u{2028}' | '\u{2029}')
                {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                let start = line;
                i += 2;
                loop {
                    match (chars.get(i), chars.get(i + 1)) {
                        (None, _) => return stop(tokens, "a `/*` comment is never closed", start),
                        (Some('*'), Some('/')) => {
                            i += 2;
                            break;
                        }
                        (Some('\n'), _) => {
                            line += 1;
                            i += 1;
                        }
                        _ => i += 1,
                    }
                }
            }
            '/' if !is_value_end(tokens.last().map(|(token, _)| token)) => {
                // A regular expression literal: its text may hold quotes that would mislead
                // the rest of this reader.
                return stop(
                    tokens,
                    "a regular expression literal, which this reader does not follow",
                    line,
                );
            }
            '\'' | '"' | '`' => {
                let start = line;
                let mut text = String::new();
                let mut escaped = false;
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return stop(tokens, "a string is never closed", start),
                        Some('\\') => {
                            escaped = true;
                            if let Some(&next) = chars.get(i + 1) {
                                if next == '\n' {
                                    line += 1;
                                }
                                text.push(next);
                            }
                            i += 2;
                        }
                        Some('$') if c == '`' && chars.get(i + 1) == Some(&'{') => {
                            return stop(
                                tokens,
                                "a template literal with `${…}` computes its text at run time",
                                start,
                            );
                        }
                        Some(&ch) if ch == c => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            text.push(ch);
                            i += 1;
                        }
                    }
                }
                tokens.push((Token::Str { text, escaped }, start));
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                tokens.push((Token::Number, line));
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' || c == '\\' => {
                if c == '\\' {
                    // `\u0041pplication` is `Application` to JavaScript.
                    return stop(tokens, "an identifier written with escapes", line);
                }
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                {
                    i += 1;
                }
                if chars.get(i) == Some(&'\\') {
                    return stop(tokens, "an identifier written with escapes", line);
                }
                tokens.push((Token::Word(chars[start..i].iter().collect()), line));
            }
            other => {
                tokens.push((Token::Punct(other), line));
                i += 1;
            }
        }
    }
    Lexed {
        tokens,
        unreadable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `apps` are the targets expected; `opaque` a word the reason must hold, or None when the
    /// source must be fully known.
    fn check(language: Language, source: &str, apps: &[&str], opaque: Option<&str>) {
        let found = targets(language, source);
        assert_eq!(found.apps, apps, "targets of {source:?}");
        match (opaque, &found.opaque) {
            (None, None) => {}
            (Some(word), Some(why)) => assert!(why.contains(word), "{why:?} lacks {word:?}"),
            (want, got) => panic!("opaque for {source:?}: wanted {want:?}, got {got:?}"),
        }
    }

    fn script(source: &str, apps: &[&str], opaque: Option<&str>) {
        check(Language::AppleScript, source, apps, opaque)
    }

    fn jxa(source: &str, apps: &[&str], opaque: Option<&str>) {
        check(Language::JavaScript, source, apps, opaque)
    }

    #[test]
    fn a_jxa_line_comment_ends_at_every_javascript_line_terminator() {
        for end in ["\n", "\r", "\r\n", "\u{2028}", "\u{2029}"] {
            jxa(
                &format!("// note{end}Application(\"Terminal\").doScript(\"x\")"),
                &["Terminal"],
                None,
            );
        }
    }

    #[test]
    fn applescript_names_its_targets() {
        script(
            "tell application \"Finder\" to get name of every window",
            &["Finder"],
            None,
        );
        script(
            "Tell App \"System Events\"\n  get name of every application process\nend tell\n\
             tell application id \"com.apple.TextEdit\" to activate\n\
             tell application \"Finder\" to count files\ntell app \"Finder\" to quit",
            &["System Events", "com.apple.TextEdit", "Finder"],
            None,
        );
        script("on run argv\n  return item 1 of argv\nend run", &[], None);
        // The script's own host is not a target.
        script(
            "tell current application to display dialog \"hi\"",
            &[],
            None,
        );
        script(
            "using terms from application \"Mail\"\nend using terms from",
            &["Mail"],
            None,
        );
        script(
            "tell application \"Say \\\"Hi\\\"\" to run",
            &["Say \"Hi\""],
            None,
        );
    }

    /// A deny rule on `Finder` must not be stepped around by naming the same application
    /// another way.
    #[test]
    fn paths_and_app_suffixes_also_state_the_plain_name() {
        script(
            "tell application \"/System/Library/CoreServices/Finder.app\" to quit\n\
             tell application \"Mail.APP\" to quit\ntell application \"Notes\" to quit",
            &[
                "/System/Library/CoreServices/Finder.app",
                "Finder",
                "Mail.APP",
                "Mail",
                "Notes",
            ],
            None,
        );
        jxa(
            "Application('/Applications/Safari.app/').quit()",
            &["/Applications/Safari.app/", "Safari"],
            None,
        );
    }

    #[test]
    fn applescript_comments_and_strings_do_not_name_targets() {
        script(
            "-- tell application \"Mail\"\n# tell application \"Notes\"\n\
             (* tell application \"Safari\" (* nested *) tell application \"Music\" *)\n\
             set s to \"tell application \\\"Calendar\\\"\"\n\
             set |application| to 3\n\
             tell application \"Finder\" to activate",
            &["Finder"],
            None,
        );
    }

    #[test]
    fn applescript_computed_or_hidden_targets_are_opaque() {
        script(
            "set x to \"Fin\" & \"der\"\ntell application x to quit",
            &[],
            Some("line 2"),
        );
        script(
            "tell application (\"Fin\" & \"der\") to quit",
            &[],
            Some("literal"),
        );
        script(
            "tell application \"Finder\" to do shell script \"rm -rf ~\"",
            &["Finder"],
            Some("do shell script"),
        );
        script(
            "run script \"tell application \\\"Mail\\\" to quit\"",
            &[],
            Some("run script"),
        );
        script(
            "set s to load script POSIX file \"/tmp/x.scpt\"",
            &[],
            Some("load script"),
        );
        script(
            "use framework \"Foundation\"\ncurrent application's NSTask's launchedTaskWithLaunchPath:\"/bin/sh\" arguments:{}",
            &[],
            Some("use framework"),
        );
        script(
            "current application’s NSWorkspace's sharedWorkspace()",
            &[],
            Some("AppleScriptObjC"),
        );
        script("«event sysoexec» \"id\"", &[], Some("raw Apple event"));
        script(
            "tell application \"Finder\" of machine \"eppc://host\" to quit",
            &["Finder"],
            Some("another computer"),
        );
        script("tell application \"Finder", &[], Some("never closed"));
        script("(* open comment", &[], Some("never closed"));
        script("choose application", &[], Some("literal"));
    }

    #[test]
    fn javascript_names_its_targets() {
        jxa(
            "const finder = Application('Finder');\nfinder.windows[0].name();\n\
             Application(\"System Events\").processes.byName(\"Dock\");\n\
             Application(`TextEdit`).activate()",
            &["Finder", "System Events", "TextEdit"],
            None,
        );
        jxa("function run(argv) { return argv.join(' ') }", &[], None);
        jxa(
            "var app = Application.currentApplication();\napp.includeStandardAdditions = true;\n\
             app.displayDialog('hi') // Application('Mail')\n/* Application('Notes') */ x = 4 / 2",
            &[],
            None,
        );
        jxa("var o = {}; o['name'] = 1", &[], None);
    }

    #[test]
    fn javascript_computed_or_hidden_targets_are_opaque() {
        jxa(
            "var n = 'Fin' + 'der'; Application(n).quit()",
            &[],
            Some("literal"),
        );
        jxa("Application('Fin' + 'der').quit()", &[], Some("literal"));
        jxa(
            "var A = Application; A('Mail').quit()",
            &[],
            Some("literal"),
        );
        jxa("Application(`${name}`)", &[], Some("template"));
        jxa("Application('\\u0046inder')", &[], Some("literal"));
        jxa("\\u0041pplication('Mail')", &[], Some("escapes"));
        jxa("eval(\"Application('Mail').quit()\")", &[], Some("eval"));
        jxa(
            "[].constructor.constructor('x')()",
            &[],
            Some("constructor"),
        );
        jxa(
            "ObjC.import('Foundation'); $.NSTask.alloc",
            &[],
            Some("ObjC"),
        );
        jxa("this['Appli' + 'cation']('Mail')", &[], Some("this"));
        jxa(
            "globalThis.Application('Mail')",
            &["Mail"],
            Some("globalThis"),
        );
        jxa(
            "var a = Application.currentApplication(); a.includeStandardAdditions = true; a.doShellScript('id')",
            &[],
            Some("doShellScript"),
        );
        jxa(
            "var a = Application.currentApplication(); a['doShell' + 'Script']('id')",
            &[],
            Some("computed"),
        );
        jxa("a['doShellScript']('id')", &[], Some("doShellScript"));
        // A regular expression could hide a quote that would make `Application(x)` look like
        // the inside of a string.
        jxa(
            "var r = /\"/; Application(x); var s = /\"/;",
            &[],
            Some("regular expression"),
        );
        jxa("Application('Mail", &[], Some("never closed"));
    }
}
