//! Policy decides on what a shell run will actually run, against the real daemon: every command
//! of a script, the variables and stdin a call adds, protected paths however spelled, and
//! `computer policy explain` answering as the daemon does.

use std::time::Duration;

use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// Acts are allowed unless a rule says otherwise; `rm` is denied wherever it appears.
const DENY_RM: &str =
    "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n";

/// Acts are asked; `git status` and `echo` are allowed by rule.
const ALLOW_GIT_STATUS: &str = "[defaults]\nact = \"ask\"\n[[rules]]\nglob = \"git status*\"\ndecision = \"allow\"\n[[rules]]\nargv0 = [\"echo\"]\ndecision = \"allow\"\n";

fn run(daemon: &Daemon, args: Value, complications: Value) -> Value {
    daemon.shell_run_json(&args, &complications)
}

fn assert_denied_by(reply: &Value, rule: &str, what: &str) {
    assert_eq!(reply["ok"], false, "{what} went through: {reply}");
    assert_eq!(reply["error"]["code"], "denied", "{what}: {reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(rule)
            || (rule == "builtin:protected-path" && message.contains("holds this daemon's own")),
        "{what}: expected {rule}: {message}"
    );
}

#[test]
fn a_denied_program_is_denied_wherever_a_script_hides_it() {
    let daemon = Daemon::start_with_config(DENY_RM);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("keep"), "x").unwrap();
    let v = victim.display().to_string();

    for script in [
        format!("#x\nrm -rf {v}"),
        format!("true; rm -rf {v}"),
        format!("echo $(rm -rf {v})"),
        format!("sh -c 'rm -rf {v}'"),
        format!("env rm -rf {v}"),
        format!("ls | xargs rm -rf {v}"),
        format!("if true; then\n  nice -n 5 \\rm -rf {v}\nfi"),
    ] {
        let reply = run(&daemon, json!({"script": script}), json!({}));
        assert_denied_by(&reply, "rules[0]", &script);
    }
    // The program itself a shell that reads the script from stdin.
    let reply = run(
        &daemon,
        json!({"argv": ["sh"], "stdin": format!("rm -rf {v}\n")}),
        json!({}),
    );
    assert_denied_by(&reply, "rules[0]", "sh with rm on stdin");
    let reply = run(
        &daemon,
        json!({"argv": ["env", "X=1", "rm", "-rf", v]}),
        json!({}),
    );
    assert_denied_by(&reply, "rules[0]", "env rm as argv");
    assert!(victim.join("keep").exists(), "the victim was removed");

    // Ordinary scripts still run, `rm` as a mere word included.
    let reply = run(
        &daemon,
        json!({"script": "echo rm; printf '%s\\n' ok | cat"}),
        json!({}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["stdout"], "rm\nok\n");
    let intent = daemon.receipt_row(&reply["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["rule"], "defaults.act", "{intent}");
}

/// Starts a call on its own task, for a test that answers its approval meanwhile.
fn call_task(daemon: &Daemon, args: Value, complications: Value) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(computer_tests::shell_run(args, complications))
}

/// Waits for the call to be asked, checks what the approver is shown, and denies it.
async fn asked_and_denied(daemon: &Daemon, args: Value, complications: Value, shown: &str) {
    let call = call_task(daemon, args.clone(), complications.clone());
    let request = tokio::task::block_in_place(|| {
        wait_for("a pending approval", Duration::from_secs(20), || {
            daemon.pending_approvals().into_iter().next()
        })
    });
    assert_eq!(
        request["rule"], "defaults.act",
        "{args} {complications}: {request}"
    );
    let action = request["action"].as_str().unwrap_or_default();
    assert!(
        action.contains(shown),
        "the approver is not shown `{shown}`: {action}"
    );
    let answered = daemon.cli(&["approvals", "deny", &request["id"].to_string()]);
    assert!(answered.status.success(), "{}", answered.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_does_not_reach_loader_variables_opaque_scripts_or_uncovered_commands() {
    let daemon = Daemon::start_with_config(ALLOW_GIT_STATUS);
    let repo = tempfile::tempdir().unwrap();
    let cwd = json!({"cwd": repo.path()});

    // The ordinary call is allowed without asking anyone.
    let plain = tokio::task::block_in_place(|| {
        run(&daemon, json!({"argv": ["git", "status"]}), cwd.clone())
    });
    let intent = daemon.receipt_row(&plain["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["decision"], "allow", "{intent}");
    assert_eq!(intent["body"]["policy"]["rule"], "rules[0]");
    let script = tokio::task::block_in_place(|| {
        run(
            &daemon,
            json!({"script": "echo hi && git status"}),
            cwd.clone(),
        )
    });
    let intent = daemon.receipt_row(&script["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["decision"], "allow", "{intent}");

    // Variables that make git run other code take the call out of the allow.
    let mut with_env = cwd.clone();
    with_env["env"] = json!({
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": "touch /tmp/pwned",
    });
    asked_and_denied(
        &daemon,
        json!({"argv": ["git", "status"]}),
        with_env,
        "GIT_CONFIG_COUNT",
    )
    .await;
    let mut with_path = cwd.clone();
    with_path["env"] = json!({"PATH": format!("{}:/usr/bin:/bin", repo.path().display())});
    asked_and_denied(
        &daemon,
        json!({"argv": ["git", "status"]}),
        with_path,
        "PATH",
    )
    .await;
    // The same set by the script itself.
    asked_and_denied(
        &daemon,
        json!({"script": "PATH=/tmp/evil:$PATH git status"}),
        cwd.clone(),
        "PATH",
    )
    .await;
    // A command the allow does not cover, and a script whose commands cannot all be known.
    asked_and_denied(
        &daemon,
        json!({"script": "git status; touch x"}),
        cwd.clone(),
        "touch",
    )
    .await;
    asked_and_denied(
        &daemon,
        json!({"script": "eval 'git status'"}),
        cwd.clone(),
        "not every command is known",
    )
    .await;
    // `((…))`: arithmetic to bash, nested subshells that run `touch` to dash (Debian's /bin/sh),
    // spaced or not; the allow must not cover it, and nothing may have run.
    for script in [
        "git status; ((touch pwned))",
        "git status; ( ( ( touch pwned ) ) )",
    ] {
        asked_and_denied(
            &daemon,
            json!({"script": script}),
            cwd.clone(),
            "not every command is known",
        )
        .await;
    }
    assert!(!repo.path().join("pwned").exists());
    // stdin is shown to the approver with its size.
    asked_and_denied(
        &daemon,
        json!({"argv": ["sh"], "stdin": "git status; rm -rf $HOME"}),
        cwd,
        "rm -rf $HOME",
    )
    .await;
}

#[test]
fn protected_paths_are_denied_however_they_are_spelled() {
    let daemon =
        Daemon::start_with_config("[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n");
    let config = daemon.config.canonicalize().unwrap();
    let config_text = config.display().to_string();
    let parent = config.parent().unwrap();
    let name = config.file_name().unwrap().to_string_lossy().into_owned();
    let doubled = config_text.replacen('/', "//", 2);
    let globbed = format!("{}?", &config_text[..config_text.len() - 1]);
    let dotted = format!(
        "{}/../{}/{name}",
        parent.display(),
        parent.file_name().unwrap().to_string_lossy()
    );
    let link_dir = tempfile::tempdir().unwrap();
    let link = link_dir.path().join("innocent");
    std::os::unix::fs::symlink(parent, &link).unwrap();

    let cases = [
        (
            json!({"script": format!("cat {doubled}")}),
            json!({}),
            "a doubled slash",
        ),
        (
            json!({"script": format!("cat {globbed}")}),
            json!({}),
            "a glob",
        ),
        (
            json!({"script": format!("cat {dotted}")}),
            json!({}),
            "a dot-dot",
        ),
        (
            json!({"script": format!("cat ./{name}")}),
            json!({"cwd": parent}),
            "a cwd-relative path",
        ),
        (
            json!({"argv": ["cat", format!("innocent/{name}")]}),
            json!({"cwd": link_dir.path()}),
            "a symlink",
        ),
        (
            json!({"script": "cat \"$F\""}),
            json!({"env": {"F": config}}),
            "an env variable",
        ),
    ];
    for (args, complications, what) in cases {
        let reply = run(&daemon, args, complications);
        assert_denied_by(&reply, "builtin:protected-path", what);
    }
    // Beside it, a file next to the symlink is read as usual.
    std::fs::write(link_dir.path().join("notes"), "mine\n").unwrap();
    let reply = run(
        &daemon,
        json!({"argv": ["cat", "notes"]}),
        json!({"cwd": link_dir.path()}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["stdout"], "mine\n");
}

#[test]
fn policy_explain_decides_as_the_daemon_does() {
    let daemon = Daemon::start_with_config(DENY_RM);
    let explain = |call: Value| {
        let out = daemon.cli(&["policy", "explain", "--args", &call.to_string()]);
        assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
        out.json()
    };
    let shell = |args: Value| json!({"surface": "shell", "command": "run", "args": args});

    let hidden = explain(shell(json!({"script": "true; rm -rf /tmp/x"})));
    assert_eq!(hidden["decision"]["decision"], "deny", "{hidden}");
    assert_eq!(hidden["decision"]["rule"], "rules[0]");
    assert_eq!(
        hidden["facts"]["programs"],
        json!([["true"], ["rm", "-rf", "/tmp/x"]])
    );
    // The built-in protection of the daemon's own config holds here as in the daemon.
    let protected = explain(shell(json!({"argv": ["cat", daemon.config]})));
    assert_eq!(
        protected["decision"]["rule"], "builtin:protected-path",
        "{protected}"
    );
    let reply = run(&daemon, json!({"argv": ["cat", daemon.config]}), json!({}));
    assert_denied_by(&reply, "builtin:protected-path", "cat config");
    // Opaque scripts say why.
    let opaque = explain(shell(json!({"script": "$RUN x"})));
    assert!(
        opaque["facts"]["opaque"]
            .as_str()
            .unwrap_or_default()
            .contains("$RUN"),
        "{opaque}"
    );
    // The ordinary call is allowed, by the same default the daemon uses.
    let plain = explain(shell(json!({"argv": ["ls"]})));
    assert_eq!(plain["decision"]["decision"], "allow", "{plain}");
    let reply = run(&daemon, json!({"argv": ["true"]}), json!({}));
    assert_eq!(reply["ok"], true, "{reply}");
}

/// The intent receipt records the facts policy decided on and the args as the surface redacts
/// them: stdin as its size, digest and head, not its whole text; the digest still covers the
/// request whole.
#[test]
fn intent_receipts_record_the_facts_and_the_redacted_args() {
    let daemon = Daemon::start_with_config(DENY_RM);
    let stdin = format!("{}\nDONE", "x".repeat(5000));
    let reply = run(
        &daemon,
        json!({"argv": ["wc", "-c"], "stdin": stdin}),
        json!({"env": {"LANG": "C"}}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    let intent = daemon.receipt_row(&reply["receipt"], "intent");
    let body = &intent["body"];
    assert_eq!(body["args"]["args"]["argv"], json!(["wc", "-c"]), "{body}");
    let recorded_stdin = &body["args"]["args"]["stdin"];
    assert_eq!(recorded_stdin["bytes"], stdin.len(), "{body}");
    assert!(
        recorded_stdin["head"]
            .as_str()
            .is_some_and(|head| head.len() <= 256 && !head.contains("DONE")),
        "{recorded_stdin}"
    );
    assert_eq!(body["args"]["complications"]["env"]["LANG"], "C");
    assert_eq!(body["facts"]["programs"], json!([["wc", "-c"]]), "{body}");
    assert_eq!(body["facts"]["env"]["LANG"], "C", "{body}");
    assert!(body["args_sha256"].as_str().is_some_and(|d| d.len() == 64));

    // A denied call's intent records what decided it, and its facts.
    let reply = run(
        &daemon,
        json!({"script": "true; rm -rf /nonexistent"}),
        json!({}),
    );
    assert_denied_by(&reply, "rules[0]", "rm in a script");
    let body = &daemon.receipt_row(&reply["receipt"], "intent")["body"];
    assert_eq!(body["policy"]["rule"], "rules[0]", "{body}");
    assert_eq!(
        body["facts"]["programs"],
        json!([["true"], ["rm", "-rf", "/nonexistent"]]),
        "{body}"
    );
}

/// A surface's config section is checked by the surface, and an error names the section and the
/// key (and the valid keys), in `computer config check` as at start.
#[test]
fn a_surface_config_error_names_its_section_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let check = |text: &str| {
        std::fs::write(&config, text).unwrap();
        std::process::Command::new(computer_tests::computer_bin())
            .args(["config", "check"])
            .env("COMPUTER_CONFIG", &config)
            .env_remove("DISPLAY")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .output()
            .unwrap()
    };
    let out = check("[shell]\nmax_timeot_ms = 5000\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("[shell] max_timeot_ms") && err.contains("max_timeout_ms"),
        "{err}"
    );
    let out = check("[shell]\ndefault_timeout_ms = 100\nmax_timeout_ms = 5000\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
