//! The documentation checked against itself and against the daemon: every `json`/`jsonc` and
//! `toml` block of README.md and the book (docs/src) parses; every relative link resolves, to a
//! file that exists and, with a `#fragment`, to a heading of that page (mdBook's anchors: the
//! heading's text lowercased, spaces as `-`, punctuation dropped); SUMMARY.md lists every page and
//! every page it lists exists; and every `COMPUTER` call example (a JSON object with a `surface`
//! or `steps` key, in a block or an inline code span) runs against the real daemon on the shared
//! headless desktop without being refused as a malformed call.
//!
//! Conventions the pages follow (docs/src/dev/testing.md says the same):
//! - A block whose lines start with `→` and `←` is a transcript: `→` a call, `←` its reply; each
//!   is one JSON value. In a `jsonc` block, lines starting with `//` are comments.
//! - Call examples name the app `gedit`: the suite runs them against its GTK test app (the same
//!   widgets: `Open Dialog`, the `Confirm` dialog and its `Close Dialog`, `Say Hello`). A string
//!   holding `…` in a transcript's call stands for the job id an earlier call of the same block was
//!   answered with.
//! - A path under `/home/me` is a directory the suite makes under a temporary directory.
//! - A refusal that is about the state earlier examples left (`args.id` of a job that already
//!   ended, `args.session` of a session already closed) is an answer to a well-formed call: the
//!   daemon found the caller's own job or session. Every other `invalid_call` fails the test.
//! - `<!-- docs: partial -->` on the line before a block: a snippet that is not whole JSON/TOML
//!   on purpose; it is not parsed, and is counted and listed. `<!-- example: skip REASON -->`:
//!   the block's calls are parsed but not run (they need a real app or macOS), counted and
//!   listed with the reason.
//!
//! Also: the book's generated pages are what this build renders (`computer docs`): the tool and
//! command-line references, the configuration reference and llms.txt cannot drift from the
//! binary. With `COMPUTER_BLESS=1` that test writes them instead of comparing (the committed
//! pages show the tool as Linux builds it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use computer_tests::desktop::TestApp;
use computer_tests::{Daemon, structured};
use serde_json::{Value, json};

/// The repository's root (the test crate lives in `tests/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository")
        .to_path_buf()
}

struct Page {
    /// Relative to the repository's root, for messages.
    name: String,
    path: PathBuf,
    text: String,
}

/// README.md and every `.md` page under docs/src.
fn pages() -> Vec<Page> {
    let root = repo();
    let mut paths = vec![root.join("README.md")];
    paths.extend(markdown_under(&root.join("docs/src")));
    paths
        .into_iter()
        .map(|path| Page {
            name: path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            text: std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
            path,
        })
        .collect()
}

fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(markdown_under(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    found
}

/// A fenced code block.
struct Block {
    info: String,
    body: String,
    /// The line of the opening fence, 1-based.
    line: usize,
    /// The `<!-- ... -->` comment on the line before the fence, if any.
    marker: Option<String>,
}

/// A page split into its fenced blocks and the prose around them (each prose line with its
/// number; fence lines and block bodies left out).
struct Parsed {
    blocks: Vec<Block>,
    prose: Vec<(usize, String)>,
}

fn parse(text: &str) -> Parsed {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if ticks >= 3 {
            let fence = &trimmed[..ticks];
            let info = trimmed[ticks..].trim().to_string();
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim())
                .filter(|l| l.starts_with("<!--") && l.ends_with("-->"))
                .map(|l| l.to_string());
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != fence {
                let l = lines[i];
                let strip = l.len() - l.trim_start().len();
                body.push(&l[strip.min(indent)..]);
                i += 1;
            }
            blocks.push(Block {
                info,
                body: body.join("\n"),
                line: start + 1,
                marker,
            });
            i += 1;
            continue;
        }
        prose.push((i + 1, line.to_string()));
        i += 1;
    }
    Parsed { blocks, prose }
}

/// The inline code spans of prose, each with the line it starts on; a span may cross lines.
fn code_spans(prose: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, usize, String)> = None; // (line, ticks, text so far)
    for (number, line) in prose {
        if line.trim().is_empty() {
            open = None; // a span never crosses a paragraph
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '`' {
                let run = chars[i..].iter().take_while(|&&c| c == '`').count();
                match &mut open {
                    Some((start, ticks, text)) if *ticks == run => {
                        spans.push((*start, text.trim().to_string()));
                        open = None;
                    }
                    Some((_, _, text)) => text.extend(std::iter::repeat_n('`', run)),
                    None => open = Some((*number, run, String::new())),
                }
                i += run;
                continue;
            }
            if let Some((_, _, text)) = &mut open {
                text.push(chars[i]);
            }
            i += 1;
        }
        if let Some((_, _, text)) = &mut open {
            text.push(' ');
        }
    }
    spans
}

/// Prose with its inline code spans blanked out, so that links and headings are read only
/// where Markdown reads them.
fn without_code(prose: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut inside = false;
    prose
        .iter()
        .map(|(n, line)| {
            let mut out = String::new();
            for c in line.chars() {
                if c == '`' {
                    inside = !inside;
                    out.push(' ');
                } else if inside {
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            if line.trim().is_empty() {
                inside = false;
            }
            (*n, out)
        })
        .collect()
}

/// mdBook's anchor for a heading's text: alphanumerics, `_` and `-` kept (lowercased), each
/// whitespace character a `-`, everything else dropped. Repeats get `-1`, `-2`, ...
fn anchors(parsed: &Parsed) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in &parsed.prose {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let text = rest.trim_start_matches('#');
        if !text.starts_with(' ') {
            continue;
        }
        let text = text.trim().trim_end_matches('#').trim();
        let id: String = text
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_lowercase().next().unwrap())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let count = seen.entry(id.clone()).or_insert(0);
        let unique = if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        };
        *count += 1;
        out.insert(unique);
    }
    out
}

/// The `[text](target)` links of a page's prose, with their lines.
fn links(parsed: &Parsed) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let prose = without_code(&parsed.prose);
    // Join each paragraph so that a link's text may cross a line break.
    let mut paragraph = String::new();
    let mut first_line = 0;
    let flush = |paragraph: &mut String, first_line: usize, found: &mut Vec<(usize, String)>| {
        let mut rest = paragraph.as_str();
        while let Some(close) = rest.find("](") {
            let after = &rest[close + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((first_line, target.to_string()));
            rest = &after[end.min(after.len())..];
        }
        paragraph.clear();
    };
    for (n, line) in prose {
        if line.trim().is_empty() {
            flush(&mut paragraph, first_line, &mut found);
            continue;
        }
        if paragraph.is_empty() {
            first_line = n;
        }
        paragraph.push_str(&line);
        paragraph.push(' ');
    }
    flush(&mut paragraph, first_line, &mut found);
    found
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let pages = pages();
    let parsed: BTreeMap<PathBuf, (Parsed, BTreeSet<String>)> = pages
        .iter()
        .map(|p| {
            let parsed = parse(&p.text);
            let anchors = anchors(&parsed);
            (normalise(&p.path), (parsed, anchors))
        })
        .collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let (own, _) = &parsed[&normalise(&page.path)];
        for (line, target) in links(own) {
            if target.is_empty() || is_external(&target) {
                continue;
            }
            checked += 1;
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                normalise(&page.path)
            } else {
                normalise(&page.path.parent().unwrap().join(file))
            };
            if !resolved.exists() {
                broken.push(format!(
                    "{}:{line}: `{target}`: no such file ({})",
                    page.name,
                    resolved.display()
                ));
                continue;
            }
            if let Some(fragment) = fragment {
                match parsed.get(&resolved) {
                    Some((_, anchors)) if anchors.contains(fragment) => {}
                    Some((_, anchors)) => broken.push(format!(
                        "{}:{line}: `{target}`: no heading with the anchor `{fragment}`; the page's anchors: {}",
                        page.name,
                        anchors.iter().cloned().collect::<Vec<_>>().join(", ")
                    )),
                    None => broken.push(format!(
                        "{}:{line}: `{target}`: an anchor into a file that is not a page of README or the book",
                        page.name
                    )),
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s) of {checked}:\n{}",
        broken.len(),
        broken.join("\n")
    );
    assert!(
        checked > 100,
        "only {checked} links found: is the scan broken?"
    );
}

#[test]
fn summary_lists_every_page_and_only_pages_that_exist() {
    let src = repo().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let listed: Vec<(usize, String)> = links(&parse(&summary));
    let listed_paths: BTreeSet<PathBuf> = listed
        .iter()
        .map(|(_, target)| normalise(&src.join(target)))
        .collect();
    let missing: Vec<String> = listed
        .iter()
        .filter(|(_, target)| !src.join(target).is_file())
        .map(|(line, target)| format!("SUMMARY.md:{line}: `{target}` does not exist"))
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    let unlisted: Vec<String> = markdown_under(&src)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "SUMMARY.md"))
        .filter(|p| !listed_paths.contains(&normalise(p)))
        .map(|p| p.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert!(
        unlisted.is_empty(),
        "pages under docs/src that SUMMARY.md does not list (mdBook would leave them out): {}",
        unlisted.join(", ")
    );
}

/// The index from feature to suite in docs/src/dev/testing.md names every suite the test
/// binary declares (`mod NAME;` in tests/tests/main.rs), and only those.
#[test]
fn the_testing_page_indexes_every_suite_and_only_suites() {
    let main = std::fs::read_to_string(repo().join("tests/tests/main.rs")).expect("main.rs");
    let declared: BTreeSet<String> = main
        .lines()
        .filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect();
    assert!(declared.len() > 30, "main.rs declares only {declared:?}");
    let page = std::fs::read_to_string(repo().join("docs/src/dev/testing.md")).expect("testing.md");
    // A row of the index: `| feature | `suite` | what it checks |`.
    let indexed: BTreeSet<String> = page
        .lines()
        .filter_map(|row| {
            let cells: Vec<&str> = row.strip_prefix('|')?.split(" | ").collect();
            let suite = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some(suite.to_string())
        })
        .collect();
    let unindexed: Vec<&String> = declared.difference(&indexed).collect();
    let stray: Vec<&String> = indexed.difference(&declared).collect();
    assert!(
        unindexed.is_empty() && stray.is_empty(),
        "docs/src/dev/testing.md's index has no row for {unindexed:?} (suites \
         tests/tests/main.rs declares) and rows for {stray:?} (which it does not declare); a \
         row is `| feature | `NAME` | what it checks |`"
    );
}

fn is_partial(block: &Block) -> bool {
    block
        .marker
        .as_deref()
        .is_some_and(|m| m.contains("docs: partial"))
}

fn is_json(block: &Block) -> bool {
    matches!(block.info.as_str(), "json" | "jsonc")
}

/// A transcript's values: (is a call, the text of one JSON value, its offset in lines).
fn transcript(body: &str) -> Option<Vec<(bool, String, usize)>> {
    if !body
        .lines()
        .any(|l| l.trim_start().starts_with('→') || l.trim_start().starts_with('←'))
    {
        return None;
    }
    let mut values: Vec<(bool, String, usize)> = Vec::new();
    for (offset, line) in body.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        if let Some(call) = trimmed.strip_prefix('→') {
            values.push((true, call.to_string(), offset));
        } else if let Some(reply) = trimmed.strip_prefix('←') {
            values.push((false, reply.to_string(), offset));
        } else if let Some((_, text, _)) = values.last_mut() {
            text.push('\n');
            text.push_str(line);
        } else {
            values.push((false, line.to_string(), offset));
        }
    }
    Some(values)
}

/// The JSON values of a block (comments dropped in `jsonc`), with the line each starts on and
/// whether a transcript marks it as a call.
fn json_values(block: &Block) -> Result<Vec<(usize, bool, Value)>, String> {
    if let Some(values) = transcript(&block.body) {
        return values
            .into_iter()
            .map(|(call, text, offset)| {
                serde_json::from_str::<Value>(&text)
                    .map(|v| (block.line + 1 + offset, call, v))
                    .map_err(|e| format!("line {}: {e}: {text}", block.line + 1 + offset))
            })
            .collect();
    }
    let body: String = block
        .body
        .lines()
        .map(|l| {
            if block.info == "jsonc" && l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(&body).into_iter::<Value>();
    loop {
        let start = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(value)) => {
                let rest = &body[start..];
                let blank = rest.len() - rest.trim_start().len();
                let line = block.line + 1 + body[..start + blank].matches('\n').count();
                values.push((line, false, value));
            }
            Some(Err(e)) => return Err(e.to_string()),
        }
    }
    Ok(values)
}

#[test]
fn every_json_and_toml_block_parses() {
    let mut failures = Vec::new();
    let mut partial = Vec::new();
    let (mut json_blocks, mut toml_blocks) = (0, 0);
    for page in pages() {
        for block in parse(&page.text).blocks {
            let where_ = format!("{}:{}", page.name, block.line);
            if (is_json(&block) || block.info == "toml") && is_partial(&block) {
                partial.push(where_);
                continue;
            }
            if is_json(&block) {
                json_blocks += 1;
                match json_values(&block) {
                    Ok(values) if values.is_empty() => {
                        failures.push(format!("{where_}: an empty {} block", block.info))
                    }
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{where_}: not JSON: {e}")),
                }
            } else if block.info == "toml" {
                toml_blocks += 1;
                if let Err(e) = toml::from_str::<toml::Table>(&block.body) {
                    failures.push(format!("{where_}: not TOML: {e}"));
                }
            }
        }
    }
    println!(
        "{json_blocks} JSON and {toml_blocks} TOML blocks; {} partial on purpose: {}",
        partial.len(),
        partial.join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        json_blocks >= 10 && toml_blocks >= 5,
        "too few blocks found ({json_blocks} JSON, {toml_blocks} TOML): is the scan broken?"
    );
}

/// A call example, where it is written and what it belongs with.
struct Example {
    place: String,
    call: Value,
    /// Examples of one transcript share a job id (see the module's doc).
    block: Option<usize>,
    skip: Option<String>,
}

fn is_call(value: &Value) -> bool {
    value.get("ok").is_none() && (value.get("surface").is_some() || value.get("steps").is_some())
}

fn examples() -> Vec<Example> {
    let mut examples = Vec::new();
    let mut block_id = 0;
    for page in pages() {
        let parsed = parse(&page.text);
        for block in parsed.blocks.iter().filter(|b| is_json(b)) {
            block_id += 1;
            let skip = block
                .marker
                .as_deref()
                .and_then(|m| m.strip_prefix("<!-- example: skip"))
                .map(|m| m.trim_end_matches("-->").trim().to_string());
            let is_transcript = transcript(&block.body).is_some();
            let Ok(values) = json_values(block) else {
                continue; // reported by every_json_and_toml_block_parses
            };
            for (line, marked_call, value) in values {
                let call = if is_transcript {
                    marked_call
                } else {
                    is_call(&value)
                };
                if call {
                    examples.push(Example {
                        place: format!("{}:{line}", page.name),
                        call: value,
                        block: Some(block_id),
                        skip: skip.clone(),
                    });
                }
            }
        }
        for (line, span) in code_spans(&parsed.prose) {
            if let Ok(value) = serde_json::from_str::<Value>(&span)
                && value.is_object()
                && is_call(&value)
            {
                examples.push(Example {
                    place: format!("{}:{line}", page.name),
                    call: value,
                    block: None,
                    skip: None,
                });
            }
        }
    }
    examples
}

/// The example as the suite runs it: the app `gedit` is the test app (by pid), a path under
/// `/home/me` is under `home`, and a string with `…` is the job id the example's block was last
/// answered with.
fn as_run(value: &Value, pid: u32, home: &Path, job: Option<&str>) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if k == "app" && v == "gedit" {
                        json!(pid)
                    } else {
                        as_run(v, pid, home, job)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| as_run(v, pid, home, job)).collect())
        }
        Value::String(s) if s.contains('…') => job.map_or_else(|| value.clone(), |id| json!(id)),
        Value::String(s) if s == "/home/me" || s.starts_with("/home/me/") => {
            json!(format!("{}{}", home.display(), &s["/home/me".len()..]))
        }
        other => other.clone(),
    }
}

/// A refusal of a job or session id that names the caller's own, ended job or closed session.
fn about_ended_state(error: &Value) -> bool {
    let message = error["message"].as_str().unwrap_or("");
    match error["path"].as_str() {
        Some("args.id") => message.contains("is not running"),
        Some("args.session") => message.contains("is closed"),
        _ => false,
    }
}

/// Every `invalid_call` error in a reply, wherever it sits (a failed step's included).
fn invalid_calls(reply: &Value) -> Vec<Value> {
    let mut found = Vec::new();
    match reply {
        Value::Object(map) => {
            if map.get("code").and_then(Value::as_str) == Some("invalid_call")
                && !about_ended_state(reply)
            {
                found.push(reply.clone());
            }
            for v in map.values() {
                found.extend(invalid_calls(v));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| found.extend(invalid_calls(v))),
        _ => {}
    }
    found
}

/// Acts, observations and secrets are all allowed here, so that no example waits for a person;
/// whatever the examples do happens on the suite's own desktop, in the daemon's own home.
const ALLOW_ALL: &str = "[defaults]\nobserve = \"allow\"\nact = \"allow\"\nsecret = \"allow\"\n\
                         [approval]\ntimeout = \"2s\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn every_call_example_runs_against_the_daemon() {
    let examples = examples();
    assert!(
        examples.len() >= 15,
        "only {} call examples found: is the scan broken?",
        examples.len()
    );
    // The one the docs promise about `find`'s matches must be among them, and run.
    assert!(
        examples.iter().any(|e| e.skip.is_none()
            && e.call.to_string().contains("$1.matches[0].ref")
            && e.call.to_string().contains("\"find\"")),
        "the `ax find` then `$1.matches[0].ref` example is gone from the docs"
    );

    let daemon = Daemon::start_on_desktop(ALLOW_ALL);
    let app = TestApp::launch("Docs Test");
    let pid = app.pid();
    let client = daemon.client().await;
    let seen = structured(
        &client
            .call_raw(json!({"surface": "ax", "command": "wait",
                "args": {"app": pid, "selector": "button \"Say Hello\"", "timeout_ms": 30000},
                "complications": {"timeout_ms": 30000}}))
            .await
            .expect("wait for the test app"),
    );
    assert_eq!(
        seen["met"], true,
        "the test app never reached AT-SPI: {seen}"
    );

    let home = tempfile::tempdir().expect("a home for the examples' paths");
    std::fs::create_dir_all(home.path().join("src")).unwrap();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut ran = 0;
    let mut jobs: BTreeMap<usize, String> = BTreeMap::new();
    for example in &examples {
        if let Some(reason) = &example.skip {
            skipped.push(format!("{} ({reason})", example.place));
            continue;
        }
        let job = example.block.and_then(|b| jobs.get(&b)).map(String::as_str);
        let call = as_run(&example.call, pid, home.path(), job);
        let answered =
            tokio::time::timeout(Duration::from_secs(120), client.call_raw(call.clone())).await;
        ran += 1;
        let reply = match answered {
            Err(_) => {
                failures.push(format!("{}: no answer in 120 s to {call}", example.place));
                continue;
            }
            Ok(Err(e)) => {
                failures.push(format!("{}: the call failed: {e}: {call}", example.place));
                continue;
            }
            Ok(Ok(result)) => structured(&result),
        };
        println!("{}: {call}\n  → {reply}", example.place);
        if let (Some(block), Some(id)) = (example.block, reply.get("job").and_then(Value::as_str)) {
            jobs.insert(block, id.to_string());
        }
        let refused = invalid_calls(&reply);
        if !refused.is_empty() {
            failures.push(format!(
                "{}: refused as a malformed call: {}\n  the call as run: {call}",
                example.place,
                Value::Array(refused)
            ));
        }
    }
    client.close().await;
    println!(
        "{ran} call examples run; {} skipped: {}",
        skipped.len(),
        skipped.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} call examples fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    daemon.assert_chain_holds();
}

/// The configuration reference's `toml` block is a file a person can copy: the daemon starts
/// with it as its config, `computer config check` calls it valid, and it holds every section
/// that has keys (rendered from the config types, not written by hand).
#[test]
fn the_configuration_reference_is_a_config_the_daemon_loads() {
    let page = std::fs::read_to_string(repo().join("docs/src/reference/config.md"))
        .expect("docs/src/reference/config.md");
    let blocks: Vec<Block> = parse(&page)
        .blocks
        .into_iter()
        .filter(|b| b.info == "toml")
        .collect();
    assert_eq!(
        blocks.len(),
        1,
        "the configuration reference should show the defaults as one TOML file"
    );
    let defaults = &blocks[0].body;
    for section in [
        "server",
        "defaults",
        "approval",
        "limits",
        "containment",
        "artifacts",
        "jobs",
        "policy",
        "tools",
        "export",
    ] {
        assert!(
            defaults.lines().any(|l| l == format!("[{section}]")),
            "no [{section}] in the rendered defaults:\n{defaults}"
        );
    }
    assert!(
        !defaults.contains("DurationText") && !defaults.contains("Some("),
        "Rust's Debug format, not TOML:\n{defaults}"
    );

    // The daemon itself reads it at start (a config it refused would end it there), and the
    // checker says so.
    let daemon = Daemon::start_with_config(defaults);
    let checked = daemon.cli(&["config", "check"]);
    assert!(
        checked.status.success() && checked.stdout.contains(": valid (0 rules)"),
        "the reference's defaults are not a valid config: {}{}",
        checked.stdout,
        checked.stderr
    );
    // What it says holds: an act asks and an observation is allowed, each by its default.
    let explain = |call: Value| -> Value {
        let out = daemon.cli(&["policy", "explain", "--args", &call.to_string()]);
        assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
        serde_json::from_str(&out.stdout).expect("policy explain answers JSON")
    };
    let act =
        explain(json!({"surface": "shell", "command": "run", "args": {"argv": ["touch", "x"]}}));
    assert_eq!(
        act["decision"],
        json!({"decision": "ask", "rule": "defaults.act"}),
        "{act}"
    );
    let observe = explain(json!({"surface": "shell", "command": "help"}));
    assert_eq!(
        observe["decision"],
        json!({"decision": "allow", "rule": "defaults.observe"}),
        "{observe}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_generated_pages_of_the_book_are_current() {
    let book = repo().join("docs/src");
    let out = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(computer_tests::computer_bin())
        .args(["docs", "--out"])
        .arg(out.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", out.path())
        .output()
        .expect("run computer docs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let bless = std::env::var_os("COMPUTER_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for page in [
        "reference/tool.md",
        "reference/config.md",
        "reference/cli.md",
        "llms.txt",
    ] {
        let rendered = std::fs::read_to_string(out.path().join(page)).expect("a rendered page");
        assert!(rendered.len() > 500, "{page} is nearly empty: {rendered}");
        let committed = book.join(page);
        if bless {
            std::fs::write(&committed, &rendered).unwrap();
        } else if std::fs::read_to_string(&committed).ok().as_deref() != Some(rendered.as_str()) {
            stale.push(page);
        }
    }
    assert!(
        stale.is_empty(),
        "generated pages out of date: {stale:?} under docs/src; write them again with \
         `COMPUTER_BLESS=1 cargo test -p computer-tests --test suite docs::` (or \
         `computer docs --out docs/src`) and commit them"
    );
}
