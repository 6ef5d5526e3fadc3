//! Rules and matching: `[[rules]]` over `[defaults]` by risk, each rule's matchers (surface,
//! command, argv0, glob, regex, cwd, app, window, env, stdin, secrets, terminal), and the
//! `RulePolicy` that decides by them, the strictest part winning.

use std::path::{Path, PathBuf};

use computer_ipc::SurfaceName;
use computer_surfaces::kit::script::file_name;
use computer_surfaces::{ActionFacts, Risk, TargetFacts};
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::caller::*;
use super::paths::*;

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
    pub(super) fn call_matches(&self, input: &PolicyInput<'_>) -> bool {
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
    pub(super) fn names_target(
        &self,
        facts: &ActionFacts,
        is: impl Fn(&TargetFacts) -> bool,
    ) -> bool {
        match &facts.target {
            None => false,
            Some(target) if target.resolved => is(target),
            Some(_) => self.decision != Verdict::Allow,
        }
    }

    pub(super) fn has_command_matchers(&self) -> bool {
        self.argv0.is_some() || self.glob.is_some() || self.regex.is_some()
    }

    /// Whether one command (its argv) matches `argv0`, `glob` and `regex`.
    pub(super) fn command_matches(&self, argv: &[String]) -> bool {
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
    pub(super) fn names_program(&self, name: &str, program: &str) -> bool {
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

    pub(super) fn text_matches(&self, text: &str) -> bool {
        self.glob.as_ref().is_none_or(|g| g.matches(text))
            && self.regex.as_ref().is_none_or(|r| r.0.is_match(text))
    }

    /// Whether this rule decides `subject`, one part of the call.
    pub(super) fn decides(
        &self,
        input: &PolicyInput<'_>,
        subject: Subject<'_>,
        loader_env: &[Glob],
    ) -> bool {
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
pub(super) enum Subject<'a> {
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

pub(super) fn target_app_is(target: &TargetFacts, app: &str) -> bool {
    target
        .app
        .as_deref()
        .is_some_and(|name| name.eq_ignore_ascii_case(app))
}

pub(super) fn target_window_is(target: &TargetFacts, window: &str) -> bool {
    target.window.as_deref() == Some(window) || target.window_id.as_deref() == Some(window)
}

/// For actions that run no program: their args as the surface states them, as one text, for
/// `glob` and `regex`.
pub(super) fn argument_text(facts: &ActionFacts) -> String {
    facts
        .args
        .as_ref()
        .map(|args| args.to_string())
        .unwrap_or_default()
}

/// Where an allow rule's bare `argv0` name may also be spelled as a path.
pub(super) const SYSTEM_BIN_DIRS: &[&str] = &[
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
    pub(super) fn new(text: &str) -> Glob {
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
    pub(super) fn decide_by_rules(&self, input: &PolicyInput<'_>, words: &CallWords) -> Decision {
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
pub(super) fn rank(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Deny => 3,
        Verdict::Ask => 2,
        Verdict::Allow => 1,
    }
}

impl RulePolicy {
    /// One part's verdict: the strictest rule that decides it, or the default by risk.
    pub(super) fn decide_part(
        &self,
        input: &PolicyInput<'_>,
        subject: Subject<'_>,
    ) -> (Verdict, String) {
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
    pub(super) fn default_of(&self, input: &PolicyInput<'_>) -> (Verdict, String) {
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

    pub(super) fn default_for(&self, risk: Risk) -> (Verdict, String) {
        match risk {
            Risk::Observe => (self.defaults.observe, "defaults.observe".into()),
            Risk::Act => (self.defaults.act, "defaults.act".into()),
            Risk::Secret => (self.defaults.secret, "defaults.secret".into()),
        }
    }
}
