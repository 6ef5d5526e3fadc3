//! Policy: who is calling, and whether a call is allowed, denied or asked of a person. Declared
//! rules over defaults by risk; deny wins, then ask, then allow. Paths that hold the daemon's own
//! config and state are protected from the shell surface whatever the rules say.

use std::path::PathBuf;

use computer_ipc::SurfaceName;
use computer_surfaces::Risk;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    pub args: &'a Map<String, Value>,
    pub cwd: Option<&'a str>,
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
    Allow { rule: String },
    Deny { rule: String, reason: String },
    Ask { rule: String },
}

impl Decision {
    pub fn rule(&self) -> &str {
        match self {
            Decision::Allow { rule } | Decision::Deny { rule, .. } | Decision::Ask { rule } => rule,
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone)]
pub struct Pattern(pub Regex);

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

/// A glob (`*` any run, `?` one character) over the whole argument text.
#[derive(Debug, Clone, PartialEq)]
pub struct Glob(Pattern);

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let mut regex = String::from("^");
        for c in text.chars() {
            match c {
                '*' => regex.push_str(".*"),
                '?' => regex.push('.'),
                other => regex.push_str(&regex::escape(&other.to_string())),
            }
        }
        regex.push('$');
        Regex::new(&regex)
            .map(|r| Glob(Pattern(r)))
            .map_err(|err| serde::de::Error::custom(format!("invalid glob: {err}")))
    }
}

/// One `[[rules]]` entry: every matcher given must match.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub surface: Option<SurfaceName>,
    #[serde(default)]
    pub command: Option<String>,
    /// The program (its file name), e.g. `["rm", "dd"]`; for scripts, the first word.
    #[serde(default)]
    pub argv0: Option<Vec<String>>,
    /// A glob over the argument text (argv joined by spaces, or the script).
    #[serde(default)]
    pub glob: Option<Glob>,
    /// A regex searched in the argument text.
    #[serde(default)]
    pub regex: Option<Pattern>,
    /// The call's working directory starts with this.
    #[serde(default)]
    pub cwd_prefix: Option<String>,
    /// For gui/ax: the target application (args.app).
    #[serde(default)]
    pub app: Option<String>,
    /// For gui/ax: the target window (args.window).
    #[serde(default)]
    pub window: Option<String>,
    pub decision: Verdict,
}

impl Rule {
    fn matches(&self, input: &PolicyInput<'_>) -> bool {
        let text = argument_text(input.args);
        self.surface.is_none_or(|s| s == input.surface)
            && self.command.as_deref().is_none_or(|c| c == input.command)
            && self
                .argv0
                .as_ref()
                .is_none_or(|names| program_name(input.args).is_some_and(|p| names.contains(&p)))
            && self.glob.as_ref().is_none_or(|g| g.0.0.is_match(&text))
            && self.regex.as_ref().is_none_or(|r| r.0.is_match(&text))
            && self
                .cwd_prefix
                .as_deref()
                .is_none_or(|prefix| input.cwd.is_some_and(|cwd| cwd.starts_with(prefix)))
            && self
                .app
                .as_deref()
                .is_none_or(|app| arg_is(input.args, "app", app))
            && self
                .window
                .as_deref()
                .is_none_or(|window| arg_is(input.args, "window", window))
    }
}

fn arg_is(args: &Map<String, Value>, key: &str, expected: &str) -> bool {
    match args.get(key) {
        Some(Value::String(s)) => s == expected,
        Some(other) => other.as_i64().is_some() && other.as_i64() == expected.parse().ok(),
        None => false,
    }
}

/// The words a shell run executes, as one text: argv joined by spaces, or the script.
fn argument_text(args: &Map<String, Value>) -> String {
    if let Some(Value::Array(argv)) = args.get("argv") {
        return argv
            .iter()
            .map(|w| {
                w.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| w.to_string())
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    if let Some(Value::String(script)) = args.get("script") {
        return script.clone();
    }
    Value::Object(args.clone()).to_string()
}

/// The program's file name: argv[0]'s, or a script's first word's.
fn program_name(args: &Map<String, Value>) -> Option<String> {
    let first = match (args.get("argv"), args.get("script")) {
        (Some(Value::Array(argv)), _) => argv.first()?.as_str()?.to_string(),
        (_, Some(Value::String(script))) => script.split_whitespace().next()?.to_string(),
        _ => return None,
    };
    Some(first.rsplit('/').next().unwrap_or(&first).to_string())
}

/// Rules and defaults from the config, plus the daemon's protected paths.
pub struct RulePolicy {
    pub defaults: Defaults,
    pub rules: Vec<Rule>,
    /// The config file and state dir: a shell run that names them is denied.
    pub protected: Vec<PathBuf>,
}

impl Policy for RulePolicy {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision {
        if input.surface == SurfaceName::Shell {
            let text = argument_text(input.args);
            let cwd = input.cwd.unwrap_or("");
            for path in &self.protected {
                let path_text = path.to_string_lossy();
                if !path_text.is_empty()
                    && (text.contains(&*path_text) || cwd.starts_with(&*path_text))
                {
                    return Decision::Deny {
                        rule: "builtin:protected-path".into(),
                        reason: format!(
                            "{path_text} holds this daemon's own configuration or state; no agent may touch it through the shell surface"
                        ),
                    };
                }
            }
        }
        let mut verdict: Option<(Verdict, String)> = None;
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.matches(input) {
                continue;
            }
            let rank = |v: Verdict| match v {
                Verdict::Deny => 3,
                Verdict::Ask => 2,
                Verdict::Allow => 1,
            };
            if verdict
                .as_ref()
                .is_none_or(|(v, _)| rank(rule.decision) > rank(*v))
            {
                verdict = Some((rule.decision, format!("rules[{index}]")));
            }
        }
        let (verdict, rule) = verdict.unwrap_or_else(|| match input.risk {
            Risk::Observe => (self.defaults.observe, "defaults.observe".into()),
            Risk::Act => (self.defaults.act, "defaults.act".into()),
            Risk::Secret => (self.defaults.secret, "defaults.secret".into()),
        });
        match verdict {
            Verdict::Allow => Decision::Allow { rule },
            Verdict::Ask => Decision::Ask { rule },
            Verdict::Deny => Decision::Deny {
                reason: format!("denied by {rule}"),
                rule,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(toml_rules: &str) -> RulePolicy {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(default)]
            defaults: Defaults,
            #[serde(default)]
            rules: Vec<Rule>,
        }
        let doc: Doc = toml::from_str(toml_rules).unwrap();
        RulePolicy {
            defaults: doc.defaults,
            rules: doc.rules,
            protected: vec![PathBuf::from("/home/me/.config/computer")],
        }
    }

    fn decide(policy: &RulePolicy, args: Value, risk: Risk) -> Decision {
        let caller = Caller {
            uid: 1,
            pid: None,
            agent: "default".into(),
            surfaces: None,
        };
        let args = args.as_object().unwrap().clone();
        policy.decide(&PolicyInput {
            caller: &caller,
            surface: SurfaceName::Shell,
            command: "run",
            risk,
            action: "",
            args: &args,
            cwd: Some("/tmp/work"),
        })
    }

    #[test]
    fn defaults_by_risk() {
        let p = policy("");
        assert_eq!(
            decide(&p, json!({"argv": ["ls"]}), Risk::Act),
            Decision::Ask {
                rule: "defaults.act".into()
            }
        );
        assert_eq!(
            decide(&p, json!({"argv": ["ls"]}), Risk::Observe),
            Decision::Allow {
                rule: "defaults.observe".into()
            }
        );
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
        assert_eq!(
            decide(&p, json!({"argv": ["ls"]}), Risk::Act).rule(),
            "rules[0]"
        );
        assert!(matches!(
            decide(&p, json!({"argv": ["/bin/rm", "-rf", "x"]}), Risk::Act),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(&p, json!({"script": "rm -rf ~"}), Risk::Act),
            Decision::Deny { .. }
        ));
        assert_eq!(
            decide(&p, json!({"argv": ["git", "push", "origin"]}), Risk::Act),
            Decision::Ask {
                rule: "rules[2]".into()
            }
        );
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
        assert!(matches!(
            decide(&p, json!({"script": "curl x | sh"}), Risk::Act),
            Decision::Deny { .. }
        ));
        assert_eq!(
            decide(&p, json!({"argv": ["make"]}), Risk::Act).rule(),
            "rules[1]"
        );
        assert_eq!(
            decide(&p, json!({"argv": ["ls"]}), Risk::Act).rule(),
            "defaults.act"
        );
    }

    #[test]
    fn protected_paths_are_denied_whatever_the_rules() {
        let p = policy("[[rules]]\ndecision = \"allow\"\n");
        let d = decide(
            &p,
            json!({"script": "echo x >> /home/me/.config/computer/config.toml"}),
            Risk::Act,
        );
        assert_eq!(d.rule(), "builtin:protected-path");
    }

    #[test]
    fn bad_regex_fails_at_load() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Doc {
            rules: Vec<Rule>,
        }
        let err =
            toml::from_str::<Doc>("[[rules]]\nregex = \"(\"\ndecision = \"deny\"\n").unwrap_err();
        assert!(err.to_string().contains("invalid regex"), "{err}");
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
