//! Protected paths and the daemon's own controls: a shell action naming the daemon's config or
//! state, or a login file, and shell runs in disguise or of the daemon's approval and admin
//! commands, decided whatever the rules say.

use std::path::{Path, PathBuf};

use computer_ipc::SurfaceName;
use computer_surfaces::kit::script::file_name;
use computer_surfaces::{ActionFacts, Risk};
use regex::Regex;

use super::caller::*;
use super::paths::*;
use super::rules::*;

impl RulePolicy {
    /// The protected path a shell action names, if any.
    pub(super) fn protected_named(
        &self,
        input: &PolicyInput<'_>,
        words: &CallWords,
    ) -> Option<&Path> {
        self.named_among(input, words, &self.protected, Unknown::MayName)
            .into_iter()
            .next()
    }

    /// Each distinct word of a shell action read as a path from where it runs: once per call
    /// (its symlinks resolved once), then held against the protected paths and the login files.
    pub(super) fn spellings(&self, input: &PolicyInput<'_>) -> Vec<PathSpelling> {
        let facts = input.facts;
        let base = facts
            .cwd
            .clone()
            .or_else(|| input.cwd.map(PathBuf::from))
            .or_else(|| self.home.clone())
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut candidates: Vec<String> = Vec::new();
        candidates.push(base.to_string_lossy().into_owned());
        for word in facts
            .words
            .iter()
            .chain(facts.programs.iter().flatten())
            .chain(facts.env.values())
        {
            candidates.push(word.clone());
            // `--file=PATH`, `if=PATH`, `PATH:PATH`
            if let Some((_, after)) = word.split_once('=') {
                candidates.push(after.to_string());
            }
            candidates.extend(word.split(':').map(str::to_string));
        }
        // Each distinct word is read as a path once (its symlinks resolved once), then held
        // against every protected path.
        let mut seen = std::collections::HashSet::new();
        candidates.retain(|word| seen.insert(word.clone()));
        candidates
            .iter()
            .map(|word| self.spelling(word, facts, &base))
            .collect()
    }

    /// Of `paths`, those a shell action names (as written, with `~`, `..`, variables the call
    /// sets, globs, or through a symlink), in their order; a word holding a variable whose value
    /// policy cannot know names them or not as `unknown` says.
    pub(super) fn named_among<'a>(
        &self,
        input: &PolicyInput<'_>,
        words: &CallWords,
        paths: &'a [PathBuf],
        unknown: Unknown,
    ) -> Vec<&'a Path> {
        let facts = input.facts;
        let mut named = Vec::new();
        for path in paths {
            let path_text = path.to_string_lossy();
            if path_text.is_empty() {
                continue;
            }
            let protected = lexical(path, Path::new("/"));
            // The plain spelling anywhere in the text, as before the parser: defense in depth.
            let raw_hit = facts
                .script
                .as_deref()
                .is_some_and(|script| script.contains(&*path_text))
                || facts
                    .stdin
                    .as_ref()
                    .is_some_and(|s| s.text.contains(&*path_text));
            let spellings = words.get_or_init(|| self.spellings(input));
            let names = |spelling: &&PathSpelling| {
                (unknown == Unknown::MayName || !spelling.holds_unknown())
                    && spelling.names(&protected)
            };
            if raw_hit || spellings.iter().any(|spelling| names(&spelling)) {
                named.push(path.as_path());
            }
        }
        named
    }

    /// `decided` asked where it would have allowed, with the reason, when the call names login
    /// files: writing one plants code that runs outside every run, at the person's next login.
    pub(super) fn asking_for_login_files(
        &self,
        input: &PolicyInput<'_>,
        words: &CallWords,
        decided: Decision,
    ) -> Decision {
        if !input.facts.runs_programs() || matches!(decided, Decision::Deny { .. }) {
            return decided;
        }
        // A word with a value policy cannot know (`$p/cmdline`) would name every login file of
        // the home: those are left to containment, which keeps them read-only.
        let named = self.named_among(input, words, &self.login_files, Unknown::NamesNothing);
        if named.is_empty() {
            return decided;
        }
        let shown: Vec<String> = named.iter().map(|p| self.tilde(p)).collect();
        let reason = format!(
            "it names {}, which runs code at the person's next login or terminal; runs find it \
             read-only, and a yes leaves it writable for this run only",
            shown.join(", ")
        );
        let rule = match decided {
            Decision::Ask { rule, .. } => rule,
            _ => "builtin:login-file".into(),
        };
        Decision::Ask {
            rule,
            reason: Some(reason),
            login_files: named.into_iter().map(Path::to_path_buf).collect(),
        }
    }

    /// `path` with the home directory written `~`, as a person reads it.
    pub(super) fn tilde(&self, path: &Path) -> String {
        match self.home.as_deref().map(|home| path.strip_prefix(home)) {
            Some(Ok(rest)) => format!("~/{}", rest.display()),
            _ => path.display().to_string(),
        }
    }

    /// `word` read as a path from `base`: spelled with `..`, `//`, `~`, `$HOME`, a variable the
    /// call sets or a glob, and, unless it is a glob, through its symlinks.
    pub(super) fn spelling(&self, word: &str, facts: &ActionFacts, base: &Path) -> PathSpelling {
        let expanded = self.expand(word, facts);
        let components = lexical(Path::new(&expanded), base);
        let resolved = (!expanded.contains(['*', '?', '[', UNKNOWN_VALUE]))
            .then(|| resolve_symlinks(&components));
        PathSpelling {
            components,
            resolved,
        }
    }

    /// `~`, `$HOME` and the call's own variables replaced by their values; other variables
    /// become [`UNKNOWN_VALUE`] (any text within one path component).
    pub(super) fn expand(&self, word: &str, facts: &ActionFacts) -> String {
        let home = self
            .home
            .as_ref()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let word = if word == "~" {
            home.clone()
        } else if let Some(rest) = word.strip_prefix("~/") {
            format!("{home}/{rest}")
        } else {
            word.to_string()
        };
        VARIABLE_REFERENCE
            .replace_all(&word, |captures: &regex::Captures<'_>| {
                let name = captures
                    .get(1)
                    .or_else(|| captures.get(2))
                    .map_or("", |m| m.as_str());
                match facts.env.get(name) {
                    Some(value) => value.clone(),
                    None if name == "HOME" => home.clone(),
                    None => UNKNOWN_VALUE.to_string(),
                }
            })
            .into_owned()
    }
}

/// This daemon's subcommands that answer approvals or change who may do what (`computer approve`,
/// `approvals`, `agents`, `policy`), and the approval window's program: no agent runs them.
pub(super) const DAEMON_CONTROL: &[&str] = &["approve", "approvals", "agents", "policy"];
pub(super) const APPROVAL_WINDOW: &str = "computer-approval-window";

impl RulePolicy {
    /// Shell runs in disguise, and this daemon's own controls. Keys that end command lines in a
    /// terminal are decided as the shell run of those lines and as the gui action they also are,
    /// the stricter winning; a line not known exactly is never allowed without a person. Any
    /// shell run, typed or not, of this daemon's approval or admin commands is denied, whatever
    /// the rules say.
    pub(super) fn decide_shell_in_disguise(&self, input: &PolicyInput<'_>) -> Option<Decision> {
        let terminal = input.facts.terminal.as_ref();
        let run: &ActionFacts = match terminal {
            Some(terminal) => &terminal.run,
            None if input.facts.runs_programs() => input.facts,
            None => return None,
        };
        let named = run.programs.iter().find_map(|argv| {
            let program = file_name(argv.first()?);
            let words: Vec<&str> = argv
                .iter()
                .skip(1)
                .map(String::as_str)
                .take_while(|w| *w != "--")
                .collect();
            // Under another name (a copy, a link) the program is known by its answer.
            let answers = words
                .windows(2)
                .any(|pair| pair[0] == "approvals" && matches!(pair[1], "allow" | "deny"));
            match program {
                APPROVAL_WINDOW => Some(APPROVAL_WINDOW.to_string()),
                "computer" => words
                    .iter()
                    .find(|w| DAEMON_CONTROL.contains(w))
                    .map(|sub| format!("computer {sub}")),
                _ if answers => Some(argv.join(" ")),
                _ => None,
            }
        });
        // What an opaque script runs is not all known: its text counts.
        let in_text = || {
            let text = [
                run.script.as_deref(),
                run.stdin.as_ref().map(|s| s.text.as_str()),
            ];
            text.into_iter().flatten().find_map(|text| {
                DAEMON_CONTROL_TEXT
                    .find(text)
                    .map(|m| m.as_str().split_whitespace().collect::<Vec<_>>().join(" "))
            })
        };
        if let Some(command) = named.or_else(|| run.opaque.as_ref().and_then(|_| in_text())) {
            return Some(Decision::Deny {
                rule: "builtin:daemon-control".into(),
                reason: format!(
                    "`{command}` answers approvals or changes this daemon's agents or policy; \
                     no agent may run it, whatever the rules say"
                ),
            });
        }
        let terminal = terminal?;
        let as_shell = PolicyInput {
            surface: SurfaceName::Shell,
            command: "run",
            risk: Risk::Act,
            facts: run,
            cwd: None,
            // A session's shell runs contained, as a shell run does; a terminal window's does not.
            typed_into_terminal: input.surface == SurfaceName::Gui,
            ..*input
        };
        let gui_facts = ActionFacts {
            terminal: None,
            ..input.facts.clone()
        };
        let as_gui = PolicyInput {
            facts: &gui_facts,
            ..*input
        };
        let strictness = |d: &Decision| match d {
            Decision::Allow { .. } => rank(Verdict::Allow),
            Decision::Ask { .. } => rank(Verdict::Ask),
            Decision::Deny { .. } => rank(Verdict::Deny),
        };
        let (shell, gui) = (self.decide(&as_shell), self.decide(&as_gui));
        let decision = if strictness(&gui) > strictness(&shell) {
            gui
        } else {
            shell
        };
        Some(match decision {
            Decision::Allow { .. } if terminal.run.opaque.is_some() => {
                Decision::ask("builtin:opaque-terminal-line")
            }
            decided => decided,
        })
    }
}

/// A daemon control command spelled in a script's text.
pub(super) static DAEMON_CONTROL_TEXT: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| {
        Regex::new(r"computer-approval-window|\bcomputer\s+(approve|approvals|agents|policy)\b")
            .unwrap_or_else(|_| never_matching())
    });
