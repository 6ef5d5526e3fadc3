//! What a shell run will execute, found statically: every simple command of a script (through
//! pipelines, lists, subshells, substitutions, compound commands and the wrappers that run another
//! command), the paths it names and the variables it sets, or why that cannot be known (opaque).
//!
//! Scripts are parsed with `brush-parser`, a maintained pure-Rust POSIX/bash parser: a parse
//! error makes a script opaque rather than guessed at.
//!
//! # Layout
//! - this file: scripts and argvs read into their commands, paths and variables.
//! - `wrappers`: the commands wrappers run (`env`, `sudo`, `xargs`, `find -exec` ...).

mod wrappers;

use brush_parser::ParserOptions;
use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectTarget,
    IoRedirect, SimpleCommand,
};
use brush_parser::word::{WordPiece, WordPieceWithSource};
use wrappers::wrapped;

/// How deep `sh -c` and substitutions may nest before a script is called opaque.
const MAX_DEPTH: usize = 8;

/// How deep parentheses may nest in text handed to the parser. brush-parser backtracks between
/// a subshell and an arithmetic command at each unclosed `(`, so its time doubles with each one
/// (`((((((((((((((((((((-<&-` took over 10 s; found by the `script` fuzz target); counted
/// without regard to quotes, which can only make a script opaque, never hide a command.
const MAX_PARENS: usize = 8;

/// Shells whose `-c` text is parsed as a script of its own.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// Builtins that run text that is not in the script (or change what names mean).
const OPAQUE_BUILTINS: &[&str] = &["eval", "source", ".", "trap", "alias", "enable", "fc"];

/// Builtins that assign variables named by their `NAME=value` arguments.
const DECLARING_BUILTINS: &[&str] = &["export", "declare", "typeset", "local", "readonly"];

/// What a script (or an argv) will run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptCommands {
    /// The argv of each command, in source order; a wrapper and the command it runs both count.
    pub programs: Vec<Vec<String>>,
    /// Why not every command can be known before the run, when so.
    pub opaque: Option<String>,
    /// Words that may name files: arguments, redirection targets and assigned values.
    pub words: Vec<String>,
    /// Variables the script assigns (`X=1 cmd`, `X=1`, `export X=1`).
    pub assigned: Vec<String>,
}

impl ScriptCommands {
    fn opaque(&mut self, why: impl Into<String>) {
        // The first reason is the one reported; later ones add nothing to a verdict.
        if self.opaque.is_none() {
            self.opaque = Some(why.into());
        }
    }
}

/// The commands of a `/bin/sh -c` script.
pub fn script_commands(script: &str) -> ScriptCommands {
    let mut found = ScriptCommands::default();
    walk_script(script, 0, &mut found);
    found
}

/// The commands an argv run executes: the program itself, and whatever it runs in turn. `stdin`
/// is what a shell that reads its input (`["sh"]`) runs.
pub fn argv_commands(argv: &[String], stdin: Option<&str>) -> ScriptCommands {
    let mut found = ScriptCommands::default();
    found.words.extend(argv.iter().skip(1).cloned());
    command_and_wrapped(argv.to_vec(), stdin, 0, &mut found);
    found
}

fn options() -> ParserOptions {
    ParserOptions {
        // /bin/sh may be bash; parse the larger language so that nothing bash would run hides.
        enable_extended_globbing: true,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion_at_word_start: true,
        tilde_expansion_after_colon: false,
        ..ParserOptions::default()
    }
}

/// Runs one of brush-parser's entry points so that its panics count as a parse error: it has been
/// seen to panic on valid-looking input (an io number past `i32`, `444444444444444>>x`, found by
/// the `script` fuzz target), and a parser that gives up leaves the script opaque, never a
/// crashed call.
fn parsed<T, E: std::fmt::Display>(parse: impl FnOnce() -> Result<T, E>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse)) {
        Ok(result) => result.map_err(|err| err.to_string()),
        Err(_) => Err("the shell parser failed on it".to_string()),
    }
}

/// Why `text` is not handed to the parser at all, if it is not: parentheses nested deeper than
/// [`MAX_PARENS`], or a carriage return or form feed (a here-document whose delimiter is one,
/// followed by a blank, sent the parser into a loop that grew past 2 GB: `cat <<\r\t`, found
/// by the `script` fuzz target; shells read both as ordinary characters, so such text is rare
/// and never what an agent means).
fn unparsable(text: &str) -> Option<String> {
    if text.contains(['\r', '\x0c']) {
        return Some("it holds a carriage return or form feed".to_string());
    }
    let mut depth = 0usize;
    for byte in text.bytes() {
        match byte {
            b'(' => {
                depth += 1;
                if depth > MAX_PARENS {
                    return Some(format!("its parentheses nest deeper than {MAX_PARENS}"));
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn walk_script(script: &str, depth: usize, found: &mut ScriptCommands) {
    if depth > MAX_DEPTH {
        found.opaque("shell text nests deeper than this daemon follows");
        return;
    }
    if let Some(why) = unparsable(script) {
        found.opaque(format!("the script is not read: {why}"));
        return;
    }
    let options = options();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(script), &options);
    match parsed(|| parser.parse_program()) {
        Ok(program) => {
            for list in &program.complete_commands {
                walk_list(list, depth, found);
            }
        }
        Err(err) => found.opaque(format!("the script does not parse: {err}")),
    }
}

fn walk_list(list: &CompoundList, depth: usize, found: &mut ScriptCommands) {
    for ast::CompoundListItem(and_or, _) in &list.0 {
        walk_pipeline(&and_or.first, depth, found);
        for next in &and_or.additional {
            let (ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline)) = next;
            walk_pipeline(pipeline, depth, found);
        }
    }
}

fn walk_pipeline(pipeline: &ast::Pipeline, depth: usize, found: &mut ScriptCommands) {
    for command in &pipeline.seq {
        walk_command(command, depth, found);
    }
}

fn walk_command(command: &Command, depth: usize, found: &mut ScriptCommands) {
    match command {
        Command::Simple(simple) => walk_simple(simple, depth, found),
        Command::Compound(compound, redirects) => {
            walk_compound(compound, depth, found);
            for redirect in redirects.iter().flat_map(|r| &r.0) {
                // A compound command's here-document feeds its commands' reads, not a shell's
                // command text: only its words matter here.
                let _fed_to_stdin = walk_redirect(redirect, depth, found);
            }
        }
        Command::Function(definition) => {
            walk_compound(&definition.body.0, depth, found);
            found.opaque(format!(
                "the script defines the function `{}`, which can stand in for any command",
                definition.fname.value
            ));
        }
        Command::ExtendedTest(test, redirects) => {
            substitution_guard(&test.to_string(), "a [[ ]] test", found);
            for redirect in redirects.iter().flat_map(|r| &r.0) {
                // A compound command's here-document feeds its commands' reads, not a shell's
                // command text: only its words matter here.
                let _fed_to_stdin = walk_redirect(redirect, depth, found);
            }
        }
    }
}

fn walk_compound(compound: &CompoundCommand, depth: usize, found: &mut ScriptCommands) {
    match compound {
        CompoundCommand::Arithmetic(_) => {
            // bash evaluates `((x))`; dash (Debian's /bin/sh) and other POSIX shells run it as
            // nested subshells, so `((rm -rf x))` runs `rm` there. The parser also reads spaced
            // subshells (`( ( ls ) )`) this way, so no command could be listed with confidence.
            found.opaque(
                "`((…))` is arithmetic in bash but runs its text as commands in dash and other \
                 POSIX shells (which /bin/sh may be)",
            )
        }
        CompoundCommand::ArithmeticForClause(clause) => {
            for expr in [&clause.initializer, &clause.condition, &clause.updater]
                .into_iter()
                .flatten()
            {
                substitution_guard(&expr.value, "an arithmetic for loop", found);
            }
            walk_list(&clause.body.list, depth, found);
        }
        CompoundCommand::BraceGroup(group) => walk_list(&group.list, depth, found),
        CompoundCommand::Subshell(subshell) => walk_list(&subshell.list, depth, found),
        CompoundCommand::ForClause(clause) => {
            for value in clause.values.iter().flatten() {
                word_text(&value.value, depth, found);
            }
            walk_list(&clause.body.list, depth, found);
        }
        CompoundCommand::CaseClause(clause) => {
            word_text(&clause.value.value, depth, found);
            for item in &clause.cases {
                for pattern in &item.patterns {
                    word_text(&pattern.value, depth, found);
                }
                if let Some(body) = &item.cmd {
                    walk_list(body, depth, found);
                }
            }
        }
        CompoundCommand::IfClause(clause) => {
            walk_list(&clause.condition, depth, found);
            walk_list(&clause.then, depth, found);
            for branch in clause.elses.iter().flatten() {
                if let Some(condition) = &branch.condition {
                    walk_list(condition, depth, found);
                }
                walk_list(&branch.body, depth, found);
            }
        }
        CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
            walk_list(&clause.0, depth, found);
            walk_list(&clause.1.list, depth, found);
        }
        CompoundCommand::Coprocess(coprocess) => walk_command(&coprocess.body, depth, found),
    }
}

/// Arithmetic and `[[ ]]` text is not parsed into words here; a substitution inside it would run
/// a command, so its presence makes the script opaque.
fn substitution_guard(text: &str, place: &str, found: &mut ScriptCommands) {
    if text.contains("$(") || text.contains('`') || text.contains("<(") || text.contains(">(") {
        found.opaque(format!("a command substitution inside {place}"));
    }
}

/// Walks a redirection; returns the text it feeds to standard input, for a here-document or
/// here-string (a shell reading its input runs that text).
fn walk_redirect(
    redirect: &IoRedirect,
    depth: usize,
    found: &mut ScriptCommands,
) -> Option<String> {
    match redirect {
        IoRedirect::File(_, _, target) => match target {
            IoFileRedirectTarget::Filename(word) | IoFileRedirectTarget::Duplicate(word) => {
                let text = word_text(&word.value, depth, found);
                found.words.push(text.text);
                None
            }
            IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                walk_list(&subshell.list, depth, found);
                None
            }
            IoFileRedirectTarget::Fd(_) => None,
        },
        IoRedirect::HereDocument(fd, here) => {
            let text = if here.requires_expansion {
                let pieces = if let Some(why) = unparsable(&here.doc.value) {
                    Err(why)
                } else {
                    parsed(|| brush_parser::word::parse_heredoc(&here.doc.value, &options()))
                };
                match pieces {
                    Ok(pieces) => render(&pieces, &here.doc.value, depth, found).text,
                    Err(err) => {
                        found.opaque(format!("a here-document does not parse: {err}"));
                        return None;
                    }
                }
            } else {
                here.doc.value.clone()
            };
            fd.is_none_or(|fd| fd == 0).then_some(text)
        }
        IoRedirect::HereString(fd, word) => {
            let text = word_text(&word.value, depth, found).text;
            fd.is_none_or(|fd| fd == 0).then(|| format!("{text}\n"))
        }
        IoRedirect::OutputAndError(word, _) => {
            let text = word_text(&word.value, depth, found);
            found.words.push(text.text);
            None
        }
    }
}

/// A word as the run would see it where that is known.
struct WordText {
    /// The word with quotes removed; dynamic parts kept as their source text (`$HOME`).
    text: String,
    /// Whether the word's value is known before the run.
    fixed: bool,
    /// Whether the word has unquoted glob or brace characters (it may become other words).
    expands: bool,
}

fn word_text(raw: &str, depth: usize, found: &mut ScriptCommands) -> WordText {
    let word = if let Some(why) = unparsable(raw) {
        Err(why)
    } else {
        parsed(|| brush_parser::word::parse(raw, &options()))
    };
    match word {
        Ok(pieces) => render(&pieces, raw, depth, found),
        Err(err) => {
            found.opaque(format!("the word `{raw}` does not parse: {err}"));
            WordText {
                text: raw.to_string(),
                fixed: false,
                expands: true,
            }
        }
    }
}

fn render(
    pieces: &[WordPieceWithSource],
    source: &str,
    depth: usize,
    found: &mut ScriptCommands,
) -> WordText {
    let mut word = WordText {
        text: String::new(),
        fixed: true,
        expands: false,
    };
    for piece in pieces {
        let piece_source = source
            .get(piece.start_index..piece.end_index)
            .unwrap_or_default();
        match &piece.piece {
            WordPiece::Text(text) => {
                if may_expand(text, source) {
                    word.expands = true;
                }
                word.text.push_str(text);
            }
            WordPiece::SingleQuotedText(text) => word.text.push_str(text),
            WordPiece::AnsiCQuotedText(text) => {
                if text.contains('\\') {
                    word.fixed = false;
                }
                word.text.push_str(text);
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                let inner = render(inner, source, depth, found);
                word.fixed &= inner.fixed;
                word.text.push_str(&inner.text);
            }
            WordPiece::TildeExpansion(_) => word.text.push_str(piece_source),
            WordPiece::EscapeSequence(text) => {
                word.text.push_str(text.strip_prefix('\\').unwrap_or(text))
            }
            WordPiece::ParameterExpansion(_) => {
                // `${x:-$(cmd)}` runs cmd; the parameter grammar is not walked here.
                substitution_guard(piece_source, "a parameter expansion", found);
                word.fixed = false;
                word.text.push_str(piece_source);
            }
            WordPiece::CommandSubstitution(inner)
            | WordPiece::BackquotedCommandSubstitution(inner) => {
                walk_script(inner, depth + 1, found);
                word.fixed = false;
                word.text.push_str(piece_source);
            }
            WordPiece::ArithmeticExpression(expr) => {
                substitution_guard(&expr.value, "an arithmetic expansion", found);
                word.fixed = false;
                word.text.push_str(piece_source);
            }
        }
    }
    word
}

/// Whether unquoted `text`, a piece of the word `source`, may become other words: `*`, `?` and
/// extended globs always; `[` and `{` only where the word closes them later (`[` alone is the `test` command,
/// and a lone `{` or `[` is a literal character to the shell).
fn may_expand(text: &str, source: &str) -> bool {
    let closes = |open: char, close: char| {
        text.contains(open)
            && source
                .find(open)
                .is_some_and(|at| source[at + 1..].contains(close))
    };
    // Extended globs (`@(r)m`, `+(…)`, `!(…)`) where bash has `extglob` on, as interactive
    // shells commonly do.
    let extended = ["@(", "+(", "!("].iter().any(|open| text.contains(open));
    text.contains(['*', '?']) || extended || closes('[', ']') || closes('{', '}')
}

fn walk_simple(simple: &SimpleCommand, depth: usize, found: &mut ScriptCommands) {
    let mut argv = Vec::new();
    let mut stdin: Option<String> = None;
    let mut name_known = true;
    let mut items: Vec<&CommandPrefixOrSuffixItem> = Vec::new();
    items.extend(simple.prefix.iter().flat_map(|p| &p.0));
    let prefix_len = items.len();
    items.extend(simple.suffix.iter().flat_map(|s| &s.0));
    for (index, item) in items.iter().enumerate() {
        if index == prefix_len
            && let Some(name) = &simple.word_or_name
        {
            let text = word_text(&name.value, depth, found);
            if !text.fixed || text.expands {
                name_known = false;
            }
            argv.push(text.text);
        }
        walk_item(item, depth, &mut argv, &mut stdin, found);
    }
    if items.len() == prefix_len
        && let Some(name) = &simple.word_or_name
    {
        let text = word_text(&name.value, depth, found);
        if !text.fixed || text.expands {
            name_known = false;
        }
        argv.push(text.text);
    }
    let Some(name) = argv.first().cloned() else {
        // Only assignments and redirections: nothing runs.
        return;
    };
    if !name_known {
        found.opaque(format!(
            "the command name `{name}` is only known at run time"
        ));
    }
    found.words.extend(argv.iter().skip(1).cloned());
    command_and_wrapped(argv, stdin.as_deref(), depth, found);
}

fn walk_item(
    item: &CommandPrefixOrSuffixItem,
    depth: usize,
    argv: &mut Vec<String>,
    stdin: &mut Option<String>,
    found: &mut ScriptCommands,
) {
    match item {
        CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
            if let Some(text) = walk_redirect(redirect, depth, found) {
                *stdin = Some(text);
            }
        }
        CommandPrefixOrSuffixItem::Word(word) => {
            let text = word_text(&word.value, depth, found);
            argv.push(text.text);
        }
        CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
            if argv.is_empty() {
                // A prefix assignment: the variable is set for (or by) this command.
                let name = match &assignment.name {
                    ast::AssignmentName::VariableName(name)
                    | ast::AssignmentName::ArrayElementName(name, _) => name.clone(),
                };
                found.assigned.push(name);
                match &assignment.value {
                    ast::AssignmentValue::Scalar(value) => {
                        let text = word_text(&value.value, depth, found);
                        found.words.push(text.text);
                    }
                    ast::AssignmentValue::Array(values) => {
                        for (_, value) in values {
                            let text = word_text(&value.value, depth, found);
                            found.words.push(text.text);
                        }
                    }
                }
            } else {
                // `export X=1` and the like: an argument that assigns.
                let text = word_text(&word.value, depth, found);
                argv.push(text.text);
            }
        }
        CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
            walk_list(&subshell.list, depth, found);
            argv.push("/dev/fd/?".into());
        }
    }
}

/// Records `argv` as a command, then whatever command it runs in turn (`env rm x` runs `rm x`).
fn command_and_wrapped(
    argv: Vec<String>,
    stdin: Option<&str>,
    depth: usize,
    found: &mut ScriptCommands,
) {
    let mut current = argv;
    for _ in 0..=MAX_DEPTH {
        let Some(first) = current.first() else {
            return;
        };
        let name = file_name(first).to_string();
        if OPAQUE_BUILTINS.contains(&name.as_str()) {
            found.opaque(format!("`{name}` runs commands this daemon cannot see"));
        }
        if DECLARING_BUILTINS.contains(&name.as_str()) {
            for arg in &current[1..] {
                if let Some((var, _)) = arg.split_once('=')
                    && !var.starts_with('-')
                {
                    found.assigned.push(var.to_string());
                }
            }
        }
        // A wrapper comes before what it runs, as it does when it runs: `sh -c 'x'` reads
        // `sh`, then `x`, although `x` is found while `sh`'s arguments are read.
        let at = found.programs.len();
        let next = wrapped(&name, &current[1..], stdin, depth, found);
        found.programs.insert(at, current);
        match next {
            Some(next) => {
                // A wrapped name keeps its expansions as source text: `$x`, `*` and braces
                // mean it is only known at run time.
                if next[0].contains(['$', '`']) || may_expand(&next[0], &next[0]) {
                    found.opaque(format!(
                        "the command name `{}` is only known at run time",
                        next[0]
                    ));
                }
                current = next;
            }
            None => return,
        }
    }
    found.opaque("wrappers nest deeper than this daemon follows");
}

/// Follows `sh -c TEXT` into TEXT, and `sh` reading its input into the run's stdin.
fn shell_text(
    shell: &str,
    args: &[String],
    stdin: Option<&str>,
    depth: usize,
    found: &mut ScriptCommands,
) {
    let args = if shell == "busybox" {
        match args.split_first() {
            Some((applet, rest)) if SHELLS.contains(&file_name(applet)) => rest,
            Some((applet, rest)) => {
                let mut argv = vec![applet.clone()];
                argv.extend(rest.iter().cloned());
                command_and_wrapped(argv, stdin, depth, found);
                return;
            }
            None => return,
        }
    } else {
        args
    };
    let mut command_text = false;
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        if arg == "--" || arg == "-" {
            at += 1;
            break;
        }
        if matches!(
            arg.as_str(),
            "-o" | "+o" | "--rcfile" | "--init-file" | "-O" | "+O"
        ) {
            at += 2;
            continue;
        }
        if (arg.starts_with('-') || arg.starts_with('+')) && arg.len() > 1 {
            if !arg.starts_with("--") && arg.contains('c') {
                command_text = true;
            }
            at += 1;
            continue;
        }
        break;
    }
    match (command_text, args.get(at)) {
        (true, Some(text)) => walk_script(text, depth + 1, found),
        (true, None) => found.opaque(format!("`{shell} -c` without its command text")),
        (false, Some(file)) => found.opaque(format!(
            "`{shell}` runs the script file `{file}`, whose commands are not known here"
        )),
        (false, None) => match stdin {
            Some(text) => walk_script(text, depth + 1, found),
            None => found.opaque(format!(
                "`{shell}` reads commands from an input that is not known here"
            )),
        },
    }
}

/// A program's file name: `/usr/bin/rm` → `rm`.
pub fn file_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(script: &str) -> (Vec<String>, Option<String>) {
        let found = script_commands(script);
        (
            found.programs.iter().map(|argv| argv.join(" ")).collect(),
            found.opaque,
        )
    }

    #[test]
    fn a_wrapper_comes_before_the_commands_it_runs() {
        // Found by the `script` fuzz target: the shell of `sh -c '…'` came after its script's
        // commands (with a one-byte script that looked like the shell had gone).
        for (script, expected) in [
            ("sh -c '\x01'", vec!["sh -c \x01", "\x01"]),
            ("sh -c 'a; b'", vec!["sh -c a; b", "a", "b"]),
            (
                "env X=1 nice sh -c 'ls'",
                vec!["env X=1 nice sh -c ls", "nice sh -c ls", "sh -c ls", "ls"],
            ),
        ] {
            let (programs, opaque) = names(script);
            assert_eq!(opaque, None, "{script}");
            assert_eq!(programs, expected, "{script}");
        }
        let argv = argv_commands(&["sh".into(), "-c".into(), "\x01".into()], None);
        assert_eq!(argv.programs[0], ["sh", "-c", "\x01"]);
        assert_eq!(argv.programs[1], ["\x01"]);
    }

    #[test]
    fn a_script_the_parser_panics_on_is_opaque() {
        // Found by the `script` fuzz target (FUZZING.md): brush-parser unwraps an io number
        // into an `i32`, so a longer one panicked inside the call's policy check.
        for script in [
            "444444444444444>>x",
            "ls 99999999999<in",
            "sh -c '444444444444444>x'",
        ] {
            let (_, opaque) = names(script);
            assert!(opaque.is_some(), "{script} should be opaque");
        }
        let argv = argv_commands(
            &["sh".into(), "-c".into(), "444444444444444>>x".into()],
            None,
        );
        assert!(argv.opaque.is_some());
        // An io number that fits is read as before.
        assert_eq!(names("ls 2>x"), (vec!["ls".to_string()], None));
    }

    #[test]
    fn parentheses_nested_past_the_bound_make_a_script_opaque_at_once() {
        // Found by the `script` fuzz target: unclosed parentheses made the parser's time double
        // with each one (20 took over 10 s, holding the call's policy check).
        for script in [
            "((((((((((((((((((((-<&-".to_string(),
            format!("{}true", "( ".repeat(40)),
            format!("echo \"$({}\"", "(".repeat(40)),
            format!("cat <<EOF\n$({}\nEOF\n", "(".repeat(40)),
        ] {
            let (_, opaque) = names(&script);
            assert!(opaque.is_some(), "{script} should be opaque");
        }
        // Parentheses within the bound still read as commands.
        let (programs, opaque) = names("( (ls); (cd /; pwd) ) | (wc -l); echo $(date) $((1+2))");
        assert_eq!(opaque, None);
        for program in ["ls", "cd /", "pwd", "wc -l", "date"] {
            assert!(
                programs.contains(&program.to_string()),
                "{program}: {programs:?}"
            );
        }
    }

    #[test]
    fn a_carriage_return_or_form_feed_makes_a_script_opaque_before_parsing() {
        // Found by the `script` fuzz target: a here-document delimited by `\r` or `\f` and a
        // blank sent the parser into a loop that grew past 2 GB.
        for script in ["<<<<<\r\t", "cat <<\r\t", "cat << \x0c ", "echo a\r\nls"] {
            let (programs, opaque) = names(script);
            assert!(
                opaque.is_some(),
                "{script:?} should be opaque: {programs:?}"
            );
        }
        let argv = argv_commands(&["sh".into(), "-c".into(), "cat <<\r\t".into()], None);
        assert!(argv.opaque.is_some());
        // Other blanks and controls read as before.
        assert_eq!(names("ls\tx\x0b").1, None);
    }

    #[test]
    fn an_arithmetic_command_is_opaque_as_dash_runs_it_as_commands() {
        // Found while checking the parenthesis bound: `((rm -rf x))` is arithmetic to bash and
        // to the parser (no commands), but Debian's /bin/sh (dash) runs `rm` in it, and the
        // parser read `( ( ( ls ) ) )`, which every shell runs, the same way.
        for script in [
            "((rm -rf x))",
            "( ( ( rm -rf x ) ) )",
            "((i++))",
            "sh -c '((id))'",
        ] {
            let (programs, opaque) = names(script);
            assert!(opaque.is_some(), "{script} should be opaque: {programs:?}");
        }
    }

    #[test]
    fn every_command_of_lists_pipelines_and_bodies_counts() {
        let (programs, opaque) = names(
            "#x\nrm -rf victim; true && ls | wc -l || (cd /tmp; make)\n\
             if test -f a; then cp a b; else mv b a; fi\n\
             for f in 1 2; do echo \"$f\"; done\n\
             case x in x) touch y ;; esac\nwhile false; do sleep 1; done",
        );
        assert_eq!(opaque, None);
        for expected in [
            "rm -rf victim",
            "true",
            "ls",
            "wc -l",
            "cd /tmp",
            "make",
            "test -f a",
            "cp a b",
            "mv b a",
            "echo $f",
            "touch y",
            "false",
            "sleep 1",
        ] {
            assert!(
                programs.iter().any(|p| p == expected),
                "{expected}: {programs:?}"
            );
        }
    }

    #[test]
    fn substitutions_and_wrappers_are_seen_through() {
        let (programs, opaque) = names(
            "echo $(rm -rf a) `rm b` \"$(rm c)\"; env X=1 nice -n 5 rm d; sh -c 'rm e'; \
             bash -ec \"timeout 5 rm f\"; sudo -u root rm g; xargs rm < list; \
             find . -name x -exec rm {} \\; ; command rm h; exec rm i; cat <(rm j)",
        );
        assert_eq!(opaque, None);
        for expected in [
            "rm -rf a", "rm b", "rm c", "rm d", "rm e", "rm f", "rm g", "rm", "rm {}", "rm h",
            "rm i", "rm j",
        ] {
            assert!(
                programs.iter().any(|p| p == expected),
                "{expected}: {programs:?}"
            );
        }
        assert!(
            script_commands("env X=1 rm d")
                .assigned
                .contains(&"X".to_string())
        );
    }

    #[test]
    fn escaped_and_quoted_names_are_the_names_they_run() {
        let (programs, _) = names("\\rm a; 'rm' b; \"r\"m c; /bin/rm d");
        assert_eq!(programs, ["rm a", "rm b", "rm c", "/bin/rm d"]);
    }

    #[test]
    fn what_cannot_be_known_is_opaque() {
        for script in [
            "eval 'rm x'",
            ". ./x.sh",
            "source x",
            "$cmd x",
            "$(echo rm) x",
            "`echo rm` x",
            "exec \"$run\"",
            "rm() { ls; }; rm x",
            "/bin/r? x",
            "{rm,x}",
            "sh script.sh",
            "echo x | sh",
            "echo ${x:-$(rm y)}",
            "echo $(( $(rm y) ))",
            "trap 'rm x' EXIT",
            "env -S 'rm x'",
            "if then fi (",
        ] {
            assert!(
                script_commands(script).opaque.is_some(),
                "{script} should be opaque"
            );
        }
        assert_eq!(script_commands("echo $x \"$HOME\" $((1+2))").opaque, None);
    }

    #[test]
    fn the_bracket_test_command_is_known_and_globs_are_not() {
        let (programs, opaque) =
            names("[ ! -e /tmp/go ] && { echo x; }; while [ -e a ]; do :; done");
        assert_eq!(opaque, None, "{programs:?}");
        assert!(
            programs.iter().any(|p| p == "[ ! -e /tmp/go ]"),
            "{programs:?}"
        );
        for script in [
            "/bin/[a-z]m x",
            "r[m] x",
            "/bin/{rm,ls} x",
            "./*",
            "/usr/bin/@(r)m -rf x",
            "+(r)m x",
            "env !(x)m y",
        ] {
            assert!(
                script_commands(script).opaque.is_some(),
                "{script} should be opaque"
            );
        }
    }

    #[test]
    fn a_shell_fed_a_here_document_runs_it() {
        for script in [
            "sh <<EOF\nrm -rf victim\nEOF\n",
            "bash <<'EOF'\nrm -rf victim\nEOF\n",
            "sh <<< 'rm -rf victim'",
        ] {
            let found = script_commands(script);
            assert_eq!(found.opaque, None, "{script}");
            assert!(
                found
                    .programs
                    .contains(&vec!["rm".into(), "-rf".into(), "victim".into()]),
                "{script}: {:?}",
                found.programs
            );
        }
    }

    #[test]
    fn an_argv_shell_reads_its_stdin() {
        let found = argv_commands(&["sh".into()], Some("rm -rf victim"));
        assert!(
            found
                .programs
                .contains(&vec!["rm".into(), "-rf".into(), "victim".into()])
        );
        assert!(argv_commands(&["bash".into()], None).opaque.is_some());
    }
}
