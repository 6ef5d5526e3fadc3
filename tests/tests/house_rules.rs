//! The house rules, kept by a test rather than by reviews: every Rust file opens with a `//!`
//! line, files and functions stay under a length limit, a module doc's `# Layout` lists exactly
//! the modules the file declares, and library code adds no `Result<_, String>`.
//!
//! Pure source reading: no daemon, no build of the crates read. The code that breaks a limit
//! today is listed in `tests/house_rules/*.txt` with its size; a list may only shrink (an entry
//! that grew fails, and so does one that is now under the limit or gone, until it is lowered or
//! removed). `HOUSE_RULES_BLESS=1` writes the lists from the current tree; never bless to let
//! code grow, shrink the code instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Lines a file may have before it must be split (or listed in `long_files.txt`).
const FILE_LINE_LIMIT: usize = 1000;
/// Lines a function may have, from its `fn` line to its closing brace, before it must be split
/// (or listed in `long_functions.txt`).
const FUNCTION_LINE_LIMIT: usize = 100;

/// The source folders read, relative to the workspace root.
const SOURCE_DIRS: &[&str] = &[
    "ipc/src",
    "surfaces/src",
    "daemon/src",
    "approval-window/src",
    "tests/src",
    "fuzz/fuzz_targets",
];

/// The library code, where an error is a type and not a `String`.
const LIBRARY_DIRS: &[&str] = &[
    "ipc/src",
    "surfaces/src",
    "daemon/src",
    "approval-window/src",
];

const LONG_FILES: &str = "tests/house_rules/long_files.txt";
const LONG_FUNCTIONS: &str = "tests/house_rules/long_functions.txt";
const STRING_ERRORS: &str = "tests/house_rules/string_errors.txt";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

fn blessing() -> bool {
    std::env::var_os("HOUSE_RULES_BLESS").is_some_and(|value| value == "1")
}

/// One Rust source file, read once for every rule.
struct SourceFile {
    /// Relative to the workspace root, with `/` separators.
    path: String,
    text: String,
    /// `text` with comments and the insides of string and char literals blanked (newlines
    /// kept), so braces, `fn` and `mod` found in it are code.
    code: Vec<char>,
    /// Where `code`'s line breaks are.
    newlines: Vec<usize>,
    /// The file is test code: a `#[cfg(test)]` module's own file, or under one's folder.
    is_test_module: bool,
}

impl SourceFile {
    fn line_count(&self) -> usize {
        self.text.lines().count()
    }
}

fn sources() -> &'static [SourceFile] {
    static SOURCES: OnceLock<Vec<SourceFile>> = OnceLock::new();
    SOURCES.get_or_init(|| {
        let root = workspace_root();
        let mut paths = Vec::new();
        for dir in SOURCE_DIRS {
            collect_rust_files(&root.join(dir), &mut paths);
        }
        paths.sort();
        let mut files: Vec<SourceFile> = paths
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path)
                    .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
                let code = blank_comments_and_literals(&text);
                let relative = path
                    .strip_prefix(&root)
                    .expect("under the workspace root")
                    .to_string_lossy()
                    .replace('\\', "/");
                SourceFile {
                    path: relative,
                    text,
                    newlines: newlines(&code),
                    code,
                    is_test_module: false,
                }
            })
            .collect();
        let test_modules: Vec<String> = files.iter().flat_map(test_module_paths).collect();
        for file in &mut files {
            file.is_test_module = test_modules.iter().any(|module| {
                file.path == format!("{module}.rs") || file.path.starts_with(&format!("{module}/"))
            });
        }
        assert!(
            files.len() > 50,
            "house rules found only {} Rust files under {SOURCE_DIRS:?}; the walk is broken",
            files.len()
        );
        files
    })
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            collect_rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

// ---- The scanner: comments and literals blanked, braces matched. ----

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with every comment and the inside of every string, raw string and char literal
/// replaced by spaces (newlines kept, so line numbers still hold). Quotes stay, so a literal
/// still separates tokens.
fn blank_comments_and_literals(text: &str) -> Vec<char> {
    let src: Vec<char> = text.chars().collect();
    let mut out = src.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(src.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        if !matches!(c, '/' | 'r' | '"' | '\'') {
            i += 1; // the common case, kept cheap: most of the source is plain code
            continue;
        }
        let next = src.get(i + 1).copied();
        let after_ident = i > 0 && is_ident_char(src[i - 1]);
        if c == '/' && next == Some('/') {
            let end = src[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(src.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut j = i;
            while j < src.len() {
                if src[j] == '/' && src.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if src[j] == '*' && src.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && (!after_ident || (i == 1 || !is_ident_char(src[i - 2])) && src[i - 1] == 'b')
        {
            // A raw string: r"…", r#"…"#, br#"…"# (a lone `r#ident` is a raw identifier).
            let hashes = src[i + 1..].iter().take_while(|&&c| c == '#').count();
            if src.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let body = i + 2 + hashes;
            let mut j = body;
            while j < src.len() {
                if src[j] == '"' && src[j + 1..].iter().take_while(|&&c| c == '#').count() >= hashes
                {
                    break;
                }
                j += 1;
            }
            blank(&mut out, body, j);
            i = j + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != '"' {
                j += if src[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{…}'), or else a lifetime or label, left alone.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < src.len() && src[j] != '\'' {
                    j += 1;
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            } else if src.get(i + 2) == Some(&'\'') {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where each line break of the code is, to tell a char's line without counting.
fn newlines(code: &[char]) -> Vec<usize> {
    code.iter()
        .enumerate()
        .filter_map(|(i, &c)| (c == '\n').then_some(i))
        .collect()
}

/// The 1-based line of the char at `index`, given the code's `newlines`.
fn line_of(newlines: &[usize], index: usize) -> usize {
    1 + newlines.partition_point(|&at| at < index)
}

/// The index of the brace closing the one at `open`.
fn matching_brace(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &c) in code[open..].iter().enumerate() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// From `from`, the first `{` or `;` outside parentheses and brackets: where an item's body
/// starts, or where a body-less item ends.
fn item_body_or_end(code: &[char], from: usize) -> Option<(usize, char)> {
    let mut depth = 0i32;
    for (offset, &c) in code[from..].iter().enumerate() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' | ';' if depth <= 0 => return Some((from + offset, c)),
            _ => {}
        }
    }
    None
}

/// Where every identifier or keyword of the code starts, found in one pass so that looking for
/// a keyword visits words, not chars.
fn word_starts(code: &[char]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_word = false;
    for (i, &c) in code.iter().enumerate() {
        let word_char = is_ident_char(c);
        if word_char && !in_word {
            starts.push(i);
        }
        in_word = word_char;
    }
    starts
}

/// Indices where the keyword `word` stands alone in the code, given its `word_starts`.
fn keyword_positions<'a>(
    code: &'a [char],
    words: &'a [usize],
    word: &'a str,
) -> impl Iterator<Item = usize> + 'a {
    let word: Vec<char> = word.chars().collect();
    words.iter().copied().filter(move |&i| {
        code[i] == word[0]
            && code[i..].starts_with(&word)
            && code.get(i + word.len()).is_none_or(|c| !is_ident_char(*c))
    })
}

fn identifier_at(code: &[char], mut i: usize) -> (String, usize) {
    while code.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    let start = i;
    while code.get(i).is_some_and(|&c| is_ident_char(c)) {
        i += 1;
    }
    (code[start..i].iter().collect(), i)
}

/// The brace depth at every index (the depth inside which that char sits).
fn depths(code: &[char]) -> Vec<usize> {
    let mut depth = 0usize;
    code.iter()
        .map(|&c| match c {
            '{' => {
                depth += 1;
                depth - 1
            }
            '}' => {
                depth = depth.saturating_sub(1);
                depth
            }
            _ => depth,
        })
        .collect()
}

// ---- What the rules read: functions, modules, test code. ----

struct Function {
    /// `Type::name` inside an impl or trait, else `name`.
    name: String,
    line: usize,
    lines: usize,
}

/// The self type an `impl` or `trait` header at `start` (its keyword) names.
fn block_owner(code: &[char], start: usize, open: usize) -> String {
    let header: String = code[start..open].iter().collect();
    let mut header = header.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(rest) = header.strip_prefix("trait ") {
        return identifier_at(&rest.chars().collect::<Vec<_>>(), 0).0;
    }
    header = header.trim_start_matches("impl").trim().to_string();
    if header.starts_with('<') {
        let mut depth = 0;
        let mut cut = 0;
        for (i, c) in header.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                cut = i + 1;
                break;
            }
        }
        header = header[cut..].trim().to_string();
    }
    if let Some((_, self_type)) = header.split_once(" for ") {
        header = self_type.trim().to_string();
    }
    let path = header.split(['<', ' ']).next().unwrap_or_default();
    path.rsplit("::").next().unwrap_or_default().to_string()
}

/// Whether the keyword at `at` opens an item (`impl Type {`), rather than naming a type in a
/// signature (`-> impl Iterator`, `x: impl Fn()`): an item follows the end of another, an
/// attribute, a block's opening, or `unsafe`.
fn starts_an_item(code: &[char], at: usize) -> bool {
    let Some(last) = code[..at].iter().rposition(|c| !c.is_whitespace()) else {
        return true;
    };
    if matches!(code[last], ';' | '}' | '{' | ']') {
        return true;
    }
    let word_start = code[..=last]
        .iter()
        .rposition(|&c| !is_ident_char(c))
        .map_or(0, |i| i + 1);
    code[word_start..=last].iter().collect::<String>() == "unsafe"
}

fn functions(file: &SourceFile) -> Vec<Function> {
    let code = &file.code;
    let words = word_starts(code);
    // The impl and trait blocks, as (body start, body end, owner).
    let mut owners = Vec::new();
    for keyword in ["impl", "trait"] {
        for start in keyword_positions(code, &words, keyword) {
            if starts_an_item(code, start)
                && let Some((open, '{')) = item_body_or_end(code, start)
                && let Some(close) = matching_brace(code, open)
            {
                owners.push((open, close, block_owner(code, start, open)));
            }
        }
    }
    let mut found = Vec::new();
    for at in keyword_positions(code, &words, "fn") {
        let (name, after) = identifier_at(code, at + 2);
        if name.is_empty() {
            continue; // a fn pointer type
        }
        let Some((open, '{')) = item_body_or_end(code, after) else {
            continue; // a declaration without a body
        };
        let Some(close) = matching_brace(code, open) else {
            continue;
        };
        let owner = owners
            .iter()
            .filter(|(body, end, _)| *body < at && at < *end)
            .max_by_key(|(body, _, _)| *body)
            .map(|(_, _, owner)| owner.as_str());
        let line = line_of(&file.newlines, at);
        found.push(Function {
            name: owner.map_or(name.clone(), |owner| format!("{owner}::{name}")),
            line,
            lines: line_of(&file.newlines, close) - line + 1,
        });
    }
    found
}

/// Where an attribute starting at `hash` ends (after its `]`).
fn attribute_end(code: &[char], hash: usize) -> Option<usize> {
    let mut depth = 0;
    for (offset, &c) in code[hash..].iter().enumerate() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(hash + offset + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The char ranges of items under `#[cfg(test)]`, and the names of the out-of-line modules among
/// them.
fn cfg_test_items(code: &[char]) -> (Vec<(usize, usize)>, Vec<String>) {
    let attribute: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut ranges = Vec::new();
    let mut modules = Vec::new();
    let attributes =
        (0..code.len()).filter(|&i| code[i] == '#' && code[i..].starts_with(&attribute));
    for at in attributes {
        // Skip this and any further attributes to reach the item.
        let mut i = at;
        loop {
            while code.get(i).is_some_and(|c| c.is_whitespace()) {
                i += 1;
            }
            if code.get(i) == Some(&'#') {
                match attribute_end(code, i) {
                    Some(end) => i = end,
                    None => break,
                }
            } else {
                break;
            }
        }
        let item_start = i;
        let Some((end, kind)) = item_body_or_end(code, item_start) else {
            continue;
        };
        let item_end = if kind == '{' {
            matching_brace(code, end).unwrap_or(code.len() - 1)
        } else {
            let header: String = code[item_start..end].iter().collect();
            let words: Vec<&str> = header.split_whitespace().collect();
            if let [.., "mod", name] = words.as_slice() {
                modules.push((*name).to_string());
            }
            end
        };
        ranges.push((at, item_end + 1));
    }
    (ranges, modules)
}

/// The folder a file's child modules live in.
fn module_dir(path: &str) -> String {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    match file {
        "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
        _ => format!("{dir}/{}", file.trim_end_matches(".rs")),
    }
}

/// The paths (without `.rs`) of the modules a file declares out of line under `#[cfg(test)]`.
fn test_module_paths(file: &SourceFile) -> Vec<String> {
    let dir = module_dir(&file.path);
    cfg_test_items(&file.code)
        .1
        .into_iter()
        .map(|name| format!("{dir}/{name}"))
        .collect()
}

/// The out-of-line modules (`mod name;`, any visibility) a file declares at its top level.
fn declared_modules(code: &[char]) -> BTreeSet<String> {
    let depth = depths(code);
    let words = word_starts(code);
    keyword_positions(code, &words, "mod")
        .filter(|&at| depth[at] == 0)
        .filter_map(|at| {
            let (name, after) = identifier_at(code, at + 3);
            let mut i = after;
            while code.get(i).is_some_and(|c| c.is_whitespace()) {
                i += 1;
            }
            (!name.is_empty() && code.get(i) == Some(&';')).then_some(name)
        })
        .collect()
}

/// The modules a `# Layout` section of the module doc names, with the line of each; `None`
/// when the doc has no such section.
fn layout_modules(text: &str) -> Option<BTreeMap<String, usize>> {
    let mut lines = text.lines().enumerate();
    lines.find(|(_, line)| line.trim_end() == "//! # Layout")?;
    let mut listed = BTreeMap::new();
    for (index, line) in lines {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        let doc = doc.trim_start();
        if doc.is_empty() || doc.starts_with('#') {
            break;
        }
        let Some(bullet) = doc.strip_prefix("- ") else {
            continue; // a bullet's continuation
        };
        // The names are the backticked words before the bullet's colon, outside parentheses:
        // "[`server`]: …", "`unlisted` (Linux): …", "`term.rs`: …", "`commands/`: …".
        let head = bullet.split_once(": ").map_or(bullet, |(head, _)| head);
        let mut outside = String::new();
        let mut depth = 0;
        for c in head.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => outside.push(c),
                _ => {}
            }
        }
        if !outside.trim_start().starts_with(['`', '[']) {
            continue; // "this file: …"
        }
        for name in outside.split('`').skip(1).step_by(2) {
            let name = name.trim_end_matches('/').trim_end_matches(".rs");
            if name != "mod" && !name.is_empty() {
                listed.insert(name.to_string(), index + 1);
            }
        }
    }
    Some(listed)
}

/// Where library code names `String` as a `Result`'s error type, as (line, the type written).
fn string_results(code: &[char]) -> Vec<(usize, String)> {
    let newlines = newlines(code);
    let words = word_starts(code);
    let mut found = Vec::new();
    for at in keyword_positions(code, &words, "Result") {
        if code.get(at + 6) != Some(&'<') {
            continue;
        }
        // The arguments between the matching angle brackets (a `->` inside is no bracket).
        let mut depth = 0;
        let mut end = None;
        for i in at + 6..code.len() {
            match code[i] {
                '<' => depth += 1,
                '>' if code[i - 1] != '-' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                ';' | '{' => break,
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let arguments: String = code[at + 7..end].iter().collect();
        let mut nesting = 0;
        let mut last_argument = 0;
        let mut previous = ' ';
        for (i, c) in arguments.char_indices() {
            match c {
                '<' | '(' | '[' => nesting += 1,
                '>' if previous == '-' => {}
                '>' | ')' | ']' => nesting -= 1,
                ',' if nesting == 0 => last_argument = i + 1,
                _ => {}
            }
            previous = c;
        }
        let error = arguments[last_argument..].trim();
        if last_argument > 0 && matches!(error, "String" | "std::string::String") {
            let written: String = code[at..=end].iter().collect();
            found.push((
                line_of(&newlines, at),
                written.split_whitespace().collect::<Vec<_>>().join(" "),
            ));
        }
    }
    found
}

// ---- The lists that may only shrink. ----

/// A list of `key size` lines (`#` starts a comment).
fn read_list(relative: &str) -> BTreeMap<String, usize> {
    let path = workspace_root().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut list = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, size) = line.rsplit_once(' ').unwrap_or_else(|| {
            panic!(
                "{relative}:{}: expected `KEY SIZE`, got {line:?}",
                index + 1
            )
        });
        let size = size.parse().unwrap_or_else(|_| {
            panic!(
                "{relative}:{}: {size:?} is not a number of lines",
                index + 1
            )
        });
        list.insert(key.trim().to_string(), size);
    }
    list
}

fn write_list(relative: &str, about: &str, entries: &BTreeMap<String, usize>) {
    let mut text = String::new();
    for line in about.lines() {
        text.push_str(&format!("# {line}\n").replace("# \n", "#\n"));
    }
    for (key, size) in entries {
        text.push_str(&format!("{key} {size}\n"));
    }
    std::fs::write(workspace_root().join(relative), text).expect("writing a house-rules list");
}

/// Compares what the tree has over the limit (`over`, key → size) with a list that may only
/// shrink, and returns every way they disagree, each saying how to fix it.
fn may_only_shrink(
    list_path: &str,
    rule: &str,
    unit: &str,
    fix: &str,
    over: &BTreeMap<String, (usize, String)>,
    measure: impl Fn(&str) -> Option<usize>,
) -> Vec<String> {
    let listed = read_list(list_path);
    let mut failures = Vec::new();
    for (key, (size, place)) in over {
        match listed.get(key) {
            None => failures.push(format!(
                "{rule}: {place} has {size} {unit}, over the limit. {fix}; do not add it to \
                 {list_path} (only code that moved or was renamed takes its old entry over, at \
                 the same size or less)."
            )),
            Some(&recorded) if *size > recorded => failures.push(format!(
                "{rule}: {place} grew to {size} {unit}, past the {recorded} {list_path} records. \
                 {fix}; the list may only shrink, never raise an entry."
            )),
            Some(_) => {}
        }
    }
    for (key, &recorded) in &listed {
        if over.contains_key(key) {
            if let Some(now) = measure(key)
                && now < recorded
            {
                failures.push(format!(
                    "{rule}: {key} shrank to {now} {unit} (recorded {recorded}). Lower its entry \
                     in {list_path} to {now}, so it cannot grow back."
                ));
            }
            continue;
        }
        failures.push(match measure(key) {
            Some(now) => format!(
                "{rule}: {key} is within the limit now ({now} {unit}). Remove its entry from \
                 {list_path}."
            ),
            None => {
                format!("{rule}: {key} is gone from the tree. Remove its entry from {list_path}.")
            }
        });
    }
    failures
}

fn report(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} house-rule failure(s):\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}

// ---- The rules. ----

#[test]
fn every_file_opens_with_a_module_doc_line() {
    let failures: Vec<String> = sources()
        .iter()
        .filter(|file| !file.text.starts_with("//!"))
        .map(|file| {
            format!(
                "module doc: {}:1 does not open with a `//!` line. Add one that says what the \
                 file owns.",
                file.path
            )
        })
        .collect();
    report(&failures);
}

#[test]
fn files_stay_under_the_length_limit() {
    let over: BTreeMap<String, (usize, String)> = sources()
        .iter()
        .filter(|file| file.line_count() > FILE_LINE_LIMIT)
        .map(|file| {
            let lines = file.line_count();
            (file.path.clone(), (lines, file.path.clone()))
        })
        .collect();
    if blessing() {
        let sizes = over.iter().map(|(k, (n, _))| (k.clone(), *n)).collect();
        write_list(
            LONG_FILES,
            &format!(
                "Files over {FILE_LINE_LIMIT} lines, with their length today. This list may only \
                 shrink:\nlower an entry when its file shrinks, remove it when the file is split. \
                 Checked by\ntests/tests/house_rules.rs."
            ),
            &sizes,
        );
        return;
    }
    let measure = |key: &str| {
        sources()
            .iter()
            .find(|file| file.path == key)
            .map(SourceFile::line_count)
    };
    report(&may_only_shrink(
        LONG_FILES,
        &format!("file length (limit {FILE_LINE_LIMIT} lines)"),
        "lines",
        "Split the file by concern",
        &over,
        measure,
    ));
}

/// Every function, keyed `path::Type::name` (a second one of the same key gets `#2`, …), with
/// its length and where it starts.
fn all_functions() -> BTreeMap<String, (usize, String)> {
    let mut all = BTreeMap::new();
    for file in sources() {
        for function in functions(file) {
            let base = format!("{}::{}", file.path, function.name);
            let mut key = base.clone();
            let mut nth = 1;
            while all.contains_key(&key) {
                nth += 1;
                key = format!("{base}#{nth}");
            }
            let place = format!("{}:{} `{}`", file.path, function.line, function.name);
            all.insert(key, (function.lines, place));
        }
    }
    all
}

#[test]
fn functions_stay_under_the_length_limit() {
    let all = all_functions();
    assert!(
        all.len() > 500,
        "house rules found only {} functions; the scanner is broken",
        all.len()
    );
    let over: BTreeMap<String, (usize, String)> = all
        .iter()
        .filter(|(_, (lines, _))| *lines > FUNCTION_LINE_LIMIT)
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if blessing() {
        let sizes = over.iter().map(|(k, (n, _))| (k.clone(), *n)).collect();
        write_list(
            LONG_FUNCTIONS,
            &format!(
                "Functions over {FUNCTION_LINE_LIMIT} lines (from the `fn` line to the closing \
                 brace), with their length\ntoday, keyed path::Type::name. This list may only \
                 shrink: lower an entry when its\nfunction shrinks, remove it when the function \
                 is split into its steps. Checked by\ntests/tests/house_rules.rs."
            ),
            &sizes,
        );
        return;
    }
    report(&may_only_shrink(
        LONG_FUNCTIONS,
        &format!("function length (limit {FUNCTION_LINE_LIMIT} lines)"),
        "lines",
        "Split the function into its steps",
        &over,
        |key| all.get(key).map(|(lines, _)| *lines),
    ));
}

#[test]
fn layout_sections_list_exactly_the_declared_modules() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in sources() {
        let Some(listed) = layout_modules(&file.text) else {
            continue;
        };
        checked += 1;
        let declared = declared_modules(&file.code);
        let unlisted: Vec<&String> = declared
            .iter()
            .filter(|name| !listed.contains_key(*name))
            .collect();
        if !unlisted.is_empty() {
            failures.push(format!(
                "# Layout: {} declares {unlisted:?} but its `//! # Layout` does not list them. \
                 Add a `//! - `name`: what it owns` bullet for each.",
                file.path
            ));
        }
        for (name, line) in &listed {
            if !declared.contains(name) {
                failures.push(format!(
                    "# Layout: {}:{line} lists `{name}`, which the file declares no `mod` for. \
                     Remove the bullet or name the module as it is declared now.",
                    file.path
                ));
            }
        }
    }
    assert!(
        checked > 10,
        "house rules found only {checked} `# Layout` sections; the reader is broken"
    );
    report(&failures);
}

#[test]
fn library_code_adds_no_string_errors() {
    let mut over = BTreeMap::new();
    for file in sources() {
        let library = LIBRARY_DIRS
            .iter()
            .any(|dir| file.path.starts_with(&format!("{dir}/")));
        if !library || file.is_test_module {
            continue;
        }
        let test_ranges = cfg_test_items(&file.code).0;
        let found: Vec<(usize, String)> = string_results(&file.code)
            .into_iter()
            .filter(|(line, _)| {
                !test_ranges.iter().any(|&(from, to)| {
                    line_of(&file.newlines, from) <= *line
                        && *line <= line_of(&file.newlines, to - 1)
                })
            })
            .collect();
        if !found.is_empty() {
            let places: Vec<String> = found
                .iter()
                .map(|(line, written)| format!("{}:{line} `{written}`", file.path))
                .collect();
            over.insert(file.path.clone(), (found.len(), places.join(", ")));
        }
    }
    if blessing() {
        let counts = over.iter().map(|(k, (n, _))| (k.clone(), *n)).collect();
        write_list(
            STRING_ERRORS,
            "Library files whose non-test code names `String` as a `Result`'s error type, with how \
             many\ntimes today. This list may only shrink: give the error a type (thiserror) and \
             lower or\nremove the entry. Checked by tests/tests/house_rules.rs.",
            &counts,
        );
        return;
    }
    let counts: BTreeMap<String, usize> = over.iter().map(|(k, (n, _))| (k.clone(), *n)).collect();
    report(&may_only_shrink(
        STRING_ERRORS,
        "no Result<_, String> in library code (limit 0 per file)",
        "use(s)",
        "Give the error a type (an enum with thiserror) instead of a String",
        &over,
        |key| {
            counts
                .get(key)
                .copied()
                .or_else(|| sources().iter().any(|file| file.path == key).then_some(0))
        },
    ));
}

// ---- The scanner's own checks. ----

#[test]
fn the_scanner_ignores_braces_in_strings_chars_and_comments() {
    let source = r##"//! doc
fn one() {
    let a = "}{";
    let b = '{';
    let c = r#"}"#;
    // }
    /* { /* } */ } */
    let d: &'static str = "\"}";
}
fn two() -> [u8; 2] { [b'}', b'{'] }
trait T { fn declared(&self); }
impl<X> T for Wrapper<X> { fn declared(&self) {} }
fn maker() -> impl Fn() { fn inner() {} inner }
"##;
    let code = blank_comments_and_literals(source);
    let file = SourceFile {
        path: "x.rs".into(),
        text: source.into(),
        newlines: newlines(&code),
        code,
        is_test_module: false,
    };
    let found: Vec<(String, usize)> = functions(&file)
        .into_iter()
        .map(|f| (f.name, f.lines))
        .collect();
    assert_eq!(
        found,
        [
            ("one".to_string(), 8),
            ("two".to_string(), 1),
            ("Wrapper::declared".to_string(), 1),
            ("maker".to_string(), 1),
            ("inner".to_string(), 1)
        ]
    );
    let results = string_results(&blank_comments_and_literals(
        "fn a() -> Result<(), String> {}\nfn b() -> io::Result<String> {}\n\
         fn c() -> Result<Box<dyn Fn() -> u8>, String> {}\n",
    ));
    assert_eq!(
        results.iter().map(|(line, _)| *line).collect::<Vec<_>>(),
        [1, 3]
    );
}
