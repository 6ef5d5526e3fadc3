//! Programmatic calls from a run, with the real daemon: a `shell run` given
//! `complications.tools` calls the tool back through `computer call`, `computer tools` and the
//! generated `computer_tools` Python module; every call is decided, rate-limited and receipted
//! with `via` the run's receipt; what the run may call is what it lists; nothing else of the
//! daemon's is reachable from inside, and the capability dies with its run.
//! Linux: runs are contained there (and the nodes read are AT-SPI's).

use std::time::{Duration, Instant};

use computer_tests::desktop::{TestApp, TestDesktop, gi_python};
use computer_tests::{Daemon, computer_bin, structured, wait_for};
use serde_json::{Value, json};

/// A `shell run` of `script` with `complications`; its reply.
fn run(daemon: &Daemon, script: &str, complications: Value) -> Value {
    daemon.shell_run_json(&json!({ "script": script }), &complications)
}

/// The receipt rows (intent and result) of the calls a run made, by its receipt id.
fn calls_via(daemon: &Daemon, parent: &Value) -> Vec<Value> {
    daemon
        .receipts()
        .into_iter()
        .filter(|row| row["body"]["via"] == *parent)
        .collect()
}

fn stdout(reply: &Value) -> &str {
    reply["stdout"].as_str().unwrap_or_default()
}

#[test]
fn a_run_without_tools_cannot_call_the_daemon_at_all() {
    let daemon = Daemon::start();
    // An ordinary call from outside works.
    let outside = daemon.call_json("shell", "job", r#"{"op": "list"}"#);
    assert_eq!(outside["ok"], true, "{outside}");
    // The same call from a run without tools, by the daemon's own binary: no channel, no
    // token, no socket.
    let reply = run(
        &daemon,
        &format!(
            "{bin} call shell job --json --args '{{\"op\": \"list\"}}'; echo rc=$?; \
             echo token=${{COMPUTER_TOOLS_TOKEN:-none}}; test -e /proc/$$/fd/3 && echo fd3-open; \
             echo \"computer-on-path=$(command -v computer || echo none)\"",
            bin = computer_bin().display()
        ),
        json!({}),
    );
    let out = stdout(&reply);
    assert!(out.contains("rc="), "{reply}");
    assert!(
        !out.contains("rc=0"),
        "a run without tools reached the daemon: {reply}"
    );
    assert!(out.contains("token=none"), "{reply}");
    assert!(
        !out.contains("fd3-open"),
        "a run without tools inherited a descriptor: {reply}"
    );
    // No `computer` of the daemon's is on the run's PATH. One the person installed (in
    // ~/.cargo/bin, say) may be: it is only a client, with nothing to reach the daemon by.
    let on_path = out
        .lines()
        .find_map(|line| line.strip_prefix("computer-on-path="))
        .unwrap_or_else(|| panic!("the run did not say what is on its PATH: {reply}"));
    let tools_dir = daemon.state.join("run-tools");
    assert!(
        on_path == "none" || !std::path::Path::new(on_path).starts_with(&tools_dir),
        "a run without tools finds the daemon's run tools on its PATH ({on_path}): {reply}"
    );
    assert!(calls_via(&daemon, &reply["receipt"]).is_empty());
}

#[test]
fn what_a_run_may_call_is_what_it_lists_and_its_calls_are_receipted_via_the_run() {
    let daemon = Daemon::start();
    let python = gi_python();
    let script = format!(
        "computer tools; \
         {python} -c 'import computer_tools as t; print(sorted(n for n in dir(t) if n.split(\"_\")[0] in (\"shell\", \"ax\", \"gui\", \"keychain\")))'; \
         computer call shell job --json --args '{{\"op\": \"list\"}}'; \
         computer call shell run --json -- true; echo rc=$?"
    );
    let reply = run(&daemon, &script, json!({"tools": ["shell.job"]}));
    assert_eq!(reply["ok"], true, "{reply}");
    let out = stdout(&reply);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("shell.job\tobserve"), "{out}");
    assert_eq!(lines.next(), Some("['shell_job']"), "{out}");
    let listed: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(listed["ok"], true, "{listed}");
    assert!(listed["jobs"].is_array(), "{listed}");
    let refused: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(refused["error"]["code"], "denied", "{refused}");
    assert_eq!(refused["error"]["valid"], json!(["shell.job"]), "{refused}");
    assert_ne!(lines.next(), Some("rc=0"));

    // Both calls are receipted under the run, the refused one too; the run counts them.
    let rows = calls_via(&daemon, &reply["receipt"]);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert!(rows.iter().all(|r| r["body"]["via"] == reply["receipt"]));
    let result = daemon.receipt_row(&reply["receipt"], "result");
    assert_eq!(
        result["body"]["tool_calls"],
        json!({"allowed": 1, "refused": 1}),
        "{result}"
    );
    // Only what the run printed reached the caller: the reply is a run's reply, nothing of
    // its calls' results or counts beside it.
    for key in reply.as_object().unwrap().keys() {
        assert!(
            [
                "ok",
                "receipt",
                "exit_code",
                "duration_ms",
                "stdout",
                "stderr"
            ]
            .contains(&key.as_str()),
            "{key} in {reply}"
        );
    }
}

#[test]
fn names_are_checked_against_the_live_registry_and_acts_need_config() {
    let daemon = Daemon::start();
    let unknown = run(&daemon, "true", json!({"tools": ["shell.nope"]}));
    assert_eq!(unknown["error"]["code"], "invalid_call", "{unknown}");
    assert_eq!(
        unknown["error"]["path"], "complications.tools[0]",
        "{unknown}"
    );
    assert!(
        unknown["error"]["valid"]
            .as_array()
            .unwrap()
            .contains(&json!("shell.job")),
        "{unknown}"
    );
    let act = run(&daemon, "true", json!({"tools": ["shell.run"]}));
    assert_eq!(act["error"]["code"], "denied", "{act}");
    assert!(
        act["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[tools] allow"),
        "{act}"
    );
    // Tools are for a run only.
    let session = daemon.cli(&[
        "call",
        "shell",
        "open",
        "--json",
        "--complications",
        r#"{"tools": true}"#,
    ]);
    assert_eq!(
        session.json()["error"]["path"],
        "complications.tools",
        "{}",
        session.stdout
    );
}

#[test]
fn an_act_named_by_config_is_callable_but_never_a_run_with_tools_nor_what_policy_would_ask() {
    let daemon = Daemon::start_with_config(
        "[tools]\nallow = [\"shell.run\"]\n\n[[rules]]\nsurface = \"shell\"\ncommand = \"run\"\nargv0 = [\"touch\"]\ndecision = \"ask\"\n",
    );
    let marker = daemon.root.join("asked");
    let script = format!(
        "computer call shell run -- echo nested; \
         computer call shell run --json --complications '{{\"tools\": true}}' -- true; \
         computer call shell run --json -- touch {marker}; \
         computer call keychain get --json --args '{{\"reference\": \"keychain://s/a\", \"reveal\": true}}'; true",
        marker = marker.display()
    );
    let reply = run(
        &daemon,
        &script,
        json!({"tools": ["shell.run", "shell.job"]}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    let out = stdout(&reply);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("nested"), "{out}");
    let nested: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(nested["error"]["code"], "denied", "{nested}");
    assert_eq!(nested["error"]["path"], "complications.tools", "{nested}");
    let asked: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(asked["error"]["code"], "denied", "{asked}");
    assert!(
        asked["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody is asked on a run's behalf"),
        "{asked}"
    );
    // Refused at once: policy said ask, yet nobody was asked (the intent names no approval, and
    // there is no second intent with an answer), and the file was never touched.
    assert!(daemon.pending_approvals().is_empty());
    assert!(!marker.exists());
    let intents: Vec<Value> = calls_via(&daemon, &reply["receipt"])
        .into_iter()
        .filter(|row| row["kind"] == "intent" && row["body"]["policy"]["decision"] == "ask")
        .collect();
    assert_eq!(intents.len(), 1, "{intents:?}");
    assert_eq!(intents[0]["body"]["approval"], Value::Null, "{intents:?}");
    let reveal: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(reveal["error"]["code"], "denied", "{reveal}");
    let result = daemon.receipt_row(&reply["receipt"], "result");
    assert_eq!(
        result["body"]["tool_calls"],
        json!({"allowed": 1, "refused": 3}),
        "{result}"
    );
}

#[test]
fn a_token_used_outside_its_run_is_refused() {
    let daemon = Daemon::start();
    let kept = daemon.root.join("token");
    let first = run(
        &daemon,
        &format!("echo \"$COMPUTER_TOOLS_TOKEN\" > {}", kept.display()),
        json!({"tools": true}),
    );
    assert_eq!(first["ok"], true, "{first}");
    let token = std::fs::read_to_string(&kept).unwrap();
    let token = token.trim();
    assert!(token.starts_with("ctr_"), "{token}");

    // From a second run, on its own channel: the first run's token is not this run's.
    let second = run(
        &daemon,
        &format!(
            "COMPUTER_TOOLS_TOKEN={token} computer call shell job --json --args '{{\"op\": \"list\"}}'; \
             computer call shell job --json --args '{{\"op\": \"list\"}}'"
        ),
        json!({"tools": true}),
    );
    let out = stdout(&second);
    let mut lines = out.lines();
    let stolen: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(stolen["error"]["code"], "denied", "{second}");
    assert!(
        stolen["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not this run's"),
        "{stolen}"
    );
    let own: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("json");
    assert_eq!(own["ok"], true, "its own token works: {own}");

    // After the run, outside any run: no channel to use it on, and the agent socket does not
    // take it as an agent's token.
    let mut outside = daemon.command();
    outside
        .args([
            "call",
            "shell",
            "job",
            "--json",
            "--args",
            r#"{"op": "list"}"#,
        ])
        .env("COMPUTER_TOKEN", token);
    let out = outside.output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("unknown agent token"), "{text}");
}

#[test]
fn nothing_inside_a_run_with_tools_reaches_approvals_the_control_socket_or_the_agent_socket() {
    let daemon = Daemon::start();
    let control = daemon.control_socket();
    let script = format!(
        "computer approvals list --json; echo approvals=$?; \
         test -e {control} && echo control-visible; \
         test -e {socket} && echo socket-visible; \
         COMPUTER_TOOLS_TOKEN= computer call shell job --args '{{\"op\": \"list\"}}'; echo agent=$?; \
         computer call shell read --json --args '{{\"session\": \"s1\"}}'",
        control = control.display(),
        socket = daemon.socket.display(),
    );
    // From a file, as a hostile script would: the daemon refuses a script that names
    // `computer approvals` outright, so this one does not say it where policy can read it.
    let file = daemon.root.join("probe.sh");
    std::fs::write(&file, script).unwrap();
    let reply = run(
        &daemon,
        &format!("sh {}", file.display()),
        json!({"tools": true}),
    );
    let out = stdout(&reply);
    assert!(!out.contains("approvals=0"), "{reply}");
    assert!(!out.contains("control-visible"), "{reply}");
    assert!(!out.contains("socket-visible"), "{reply}");
    assert!(!out.contains("agent=0"), "{reply}");
    // Another session's terminal is not in the default set.
    let read: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|err| panic!("{err}: {reply}"));
    assert_eq!(read["error"]["code"], "denied", "{read}");
}

#[test]
fn a_flooding_script_is_held_by_the_rate_limit_and_the_runs_deadline() {
    let daemon = Daemon::start_with_config("[limits]\ncalls = 20\nwindow = \"1m\"\n");
    let python = gi_python();
    let script = format!(
        "{python} -c '\nimport computer_tools as t\nwhile True:\n    try:\n        t.shell_job(op=\"list\")\n    except t.ToolError as e:\n        if e.code == \"rate_limited\": print(\"held\", flush=True)\n'"
    );
    // Held by the run's deadline: the reply says the run was stopped there.
    let reply = run(&daemon, &script, json!({"tools": true, "timeout_ms": 3000}));
    assert_eq!(reply["timed_out"], true, "{reply}");
    assert!(stdout(&reply).contains("held"), "{reply}");
    let result = daemon.receipt_row(&reply["receipt"], "result");
    let counted = &result["body"]["tool_calls"];
    // The run itself took one call of the window.
    assert_eq!(counted["allowed"], 19, "{result}");
    assert!(counted["refused"].as_u64().unwrap() > 0, "{result}");
    let rows = calls_via(&daemon, &reply["receipt"]);
    assert!(
        rows.iter()
            .any(|r| r["body"]["error"]["code"] == "rate_limited"),
        "refusals are receipted too"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_reads_sixteen_nodes_through_the_module_and_prints_one_line() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch_with("Tools Test", &["--more"]);
    let pid = app.pid();
    // The app is on the bus before the run reads it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let client = daemon.client().await;
        let tree = client
            .call_raw(json!({"surface": "ax", "command": "find", "args": {"app": pid, "selector": "button \"Item 16\""}}))
            .await
            .expect("call");
        client.close().await;
        if structured(&tree)["ok"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the app never showed: {tree:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let python = gi_python();
    let script = format!(
        "{python} -c '\nimport computer_tools as t\nnodes = [t.ax_read(app={pid}, selector=\"button \\\"Item %d\\\"\" % i) for i in range(1, 17)]\nprint(len(nodes), \"buttons read\", sum(1 for n in nodes if \"Item\" in str(n[\"node\"])))\n'"
    );
    let reply = run(&daemon, &script, json!({"tools": true}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(stdout(&reply), "16 buttons read 16\n", "{reply}");
    let rows = calls_via(&daemon, &reply["receipt"]);
    let results: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "result").collect();
    assert_eq!(results.len(), 16, "{rows:#?}");
    assert!(
        rows.iter()
            .all(|r| r["surface"] == "ax" && r["command"] == "read")
    );
    let result = daemon.receipt_row(&reply["receipt"], "result");
    assert_eq!(
        result["body"]["tool_calls"],
        json!({"allowed": 16, "refused": 0})
    );
}

#[test]
fn a_runs_calls_are_masked_with_the_runs_secrets() {
    use computer_tests::desktop::Desktop;
    use std::io::Write;
    const VALUE: &str = "tools-suite-Secret-7731";
    let keyring = computer_tests::keyring::Keyring::on_bus(&Desktop::shared().dbus_address);
    let mut store = Desktop::shared()
        .command("timeout")
        .args(["20", "secret-tool", "store", "--label", "tools", "service"])
        .args(["tools-suite", "username", "token"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    store
        .stdin
        .take()
        .unwrap()
        .write_all(VALUE.as_bytes())
        .unwrap();
    assert!(store.wait().unwrap().success(), "secret-tool store");
    let daemon = Desktop::shared().start_daemon(
        "[tools]\nallow = [\"shell.run\"]\n\n[[rules]]\nsecrets = [\"keychain://tools-suite/*\"]\ndecision = \"allow\"\n",
    );
    // The run hands its secret to a call of its own (as an argument, where the call's own
    // masking does not know it); what comes back to the script, and every receipt, is masked.
    let seen = daemon.root.join("seen.json");
    let reply = run(
        &daemon,
        &format!(
            "computer call shell run --json -- echo \"$TOKEN\" > {}",
            seen.display()
        ),
        json!({"tools": ["shell.run"], "secrets": {"TOKEN": "keychain://tools-suite/token"}}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let nested: Value = serde_json::from_str(&seen).expect("json");
    assert_eq!(nested["ok"], true, "{nested}");
    assert!(
        !seen.contains(VALUE),
        "the script got the value back: {seen}"
    );
    assert!(seen.contains("[masked TOKEN]"), "{seen}");
    let rows = calls_via(&daemon, &reply["receipt"]);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let receipts = daemon.cli(&["receipts", "export"]).stdout;
    assert!(!receipts.contains(VALUE), "a receipt holds the value");
    drop(keyring);
}

/// The same answer from a run as from outside: for calls a run may make, `computer call` inside
/// the run and the same command line over the agent socket get the same error (code, path,
/// valid choices) and the same receipted decision, as both compose the same stages.
#[test]
fn a_programmatic_call_gets_the_same_error_and_decision_as_a_single_call() {
    let daemon = Daemon::start_with_config(
        "[tools]\nallow = [\"shell.run\"]\n\n[[rules]]\nsurface = \"shell\"\ncommand = \"run\"\nargv0 = [\"rm\"]\ndecision = \"deny\"\n",
    );
    // (what, the run's args); none holds a single quote, so each goes into the script as is.
    let table = [
        ("unknown field", json!({"argv": ["true"], "bogus": 1})),
        ("bad arg type", json!({"argv": "true"})),
        ("neither argv nor script", json!({})),
        (
            "denied by a rule",
            json!({"argv": ["rm", "-f", "/tmp/never-there"]}),
        ),
        ("allowed", json!({"argv": ["true"]})),
    ];
    let script: String = table
        .iter()
        .map(|(_, args)| format!("computer call shell run --json --args '{args}'; "))
        .collect::<String>()
        + "true";
    let reply = run(&daemon, &script, json!({"tools": ["shell.run"]}));
    assert_eq!(reply["ok"], true, "{reply}");
    let inside: Vec<Value> = stdout(&reply)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}: {reply}")))
        .collect();
    assert_eq!(inside.len(), table.len(), "{reply}");
    let decision =
        |receipt: &Value| daemon.receipt_row(receipt, "intent")["body"]["policy"].clone();
    for ((what, args), from_run) in table.iter().zip(&inside) {
        let single = daemon.call_json("shell", "run", &args.to_string());
        let comparable = |reply: &Value| {
            json!({"ok": reply["ok"], "code": reply["error"]["code"],
                   "path": reply["error"]["path"], "valid": reply["error"]["valid"]})
        };
        assert_eq!(
            comparable(from_run),
            comparable(&single),
            "{what}: {from_run} vs {single}"
        );
        assert_eq!(
            decision(&from_run["receipt"]),
            decision(&single["receipt"]),
            "{what}: the decision receipted"
        );
        let intent = daemon.receipt_row(&from_run["receipt"], "intent");
        assert_eq!(intent["body"]["via"], reply["receipt"], "{what}: {intent}");
    }
    assert_eq!(inside[3]["error"]["code"], "denied", "{}", inside[3]);
    assert_eq!(inside[4]["ok"], true, "{}", inside[4]);
}

/// The directory of tools the daemon wrote, as a run's `PATH` names it.
fn tools_dir(daemon: &Daemon) -> std::path::PathBuf {
    daemon.state.canonicalize().unwrap().join("run-tools")
}

#[test]
fn no_run_can_change_the_tools_another_run_imports() {
    let daemon = Daemon::start();
    let dir = tools_dir(&daemon);
    // The daemon writes the tools once it serves: the socket may answer a moment earlier.
    let module = wait_for("the tools module written", Duration::from_secs(10), || {
        std::fs::read(dir.join("computer_tools.py")).ok()
    });
    let python = gi_python();
    // A hostile run, given tools or not, at the tools every run imports: append to the module,
    // swap the link, plant a file beside them, remove or move them away.
    let attack = format!(
        "d={dir}; echo 'import os; os.system(\"id\")' >> $d/computer_tools.py && echo appended; \
         ln -sf /bin/true $d/computer && echo relinked; \
         touch $d/sitecustomize.py && echo planted; \
         rm -f $d/computer_tools.py && echo removed; \
         mv $d $d.gone && echo moved; true",
        dir = dir.display()
    );
    // From a file, as a hostile script would: policy refuses a script that names the daemon's
    // state dir outright.
    let file = daemon.root.join("attack.sh");
    std::fs::write(&file, attack).unwrap();
    for complications in [json!({"tools": true}), json!({})] {
        let reply = run(
            &daemon,
            &format!("sh {} 2>/dev/null", file.display()),
            complications,
        );
        assert_eq!(reply["ok"], true, "{reply}");
        assert_eq!(stdout(&reply), "", "the attack worked: {reply}");
    }
    assert_eq!(
        std::fs::read(dir.join("computer_tools.py")).unwrap(),
        module,
        "the module changed"
    );
    assert_eq!(
        std::fs::read_link(dir.join("computer")).unwrap(),
        computer_bin().canonicalize().unwrap()
    );
    assert!(!dir.join("sitecustomize.py").exists());
    // The next run finds its tools where the daemon wrote them, not in the shared /tmp, and
    // an ordinary call through them succeeds.
    let reply = run(
        &daemon,
        &format!(
            "echo \"$PATH\" | cut -d: -f1; \
             {python} -c 'import computer_tools as t; print(t.shell_job(op=\"list\")[\"ok\"])'"
        ),
        json!({"tools": true}),
    );
    assert_eq!(
        stdout(&reply),
        format!("{}\nTrue\n", dir.display()),
        "{reply}"
    );
}

#[test]
fn links_fifos_and_leftovers_where_the_daemon_writes_its_tools_are_swept_at_start() {
    let mut daemon = Daemon::start();
    let victim = daemon.root.join("victim.txt");
    std::fs::write(&victim, "the victim's own\n").unwrap();
    let elsewhere = daemon.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // An old daemon's per-run directory in the shared /tmp, a FIFO inside.
    let old = std::env::temp_dir().join(format!("computer-tools-leftover-{}", std::process::id()));
    std::fs::create_dir_all(&old).unwrap();
    let mkfifo = |path: &std::path::Path| {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo of a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    };
    mkfifo(&old.join("computer_tools.py"));
    let dir = daemon.state.join("run-tools");

    // As a run of a daemon with containment off could, while the daemon is down (killed): the
    // directory itself a link elsewhere, then its entries a link aimed at the ledger and at a
    // file of the person's, and a FIFO.
    for plant in [
        &(|dir: &std::path::Path, _: &std::path::Path, elsewhere: &std::path::Path| {
            std::os::unix::fs::symlink(elsewhere, dir).unwrap();
        }) as &dyn Fn(&std::path::Path, &std::path::Path, &std::path::Path),
        &|dir, victim, _| {
            std::fs::create_dir(dir).unwrap();
            std::os::unix::fs::symlink(victim, dir.join("computer_tools.py")).unwrap();
            let ledger = dir.parent().unwrap().join("receipts.sqlite");
            std::os::unix::fs::symlink(ledger, dir.join("computer")).unwrap();
            mkfifo(&dir.join("leftover"));
        },
        &|dir, _, _| {
            std::fs::create_dir(dir).unwrap();
            mkfifo(&dir.join("computer_tools.py"));
            mkfifo(&dir.join("computer"));
        },
    ] {
        daemon.stop_with(libc::SIGKILL);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&dir).unwrap(),
            Ok(_) => std::fs::remove_file(&dir).unwrap(),
            Err(_) => {}
        }
        plant(&dir, &victim, &elsewhere);
        // Answering at all means the start held on no FIFO.
        daemon.restart();
        let meta = std::fs::symlink_metadata(dir.join("computer_tools.py")).unwrap();
        assert!(meta.is_file(), "{meta:?}");
        assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
        assert!(!dir.join("leftover").exists());
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the victim's own\n"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        daemon.assert_chain_holds();
        assert!(!old.exists(), "an old run's directory was left in /tmp");
        // An ordinary run with tools works.
        let reply = run(
            &daemon,
            "computer call shell job --json --args '{\"op\": \"list\"}'",
            json!({"tools": true}),
        );
        let listed: Value = serde_json::from_str(stdout(&reply)).expect("json");
        assert_eq!(listed["ok"], true, "{reply}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_run_holding_hundreds_of_tools_connections_stops_no_one_else() {
    let daemon = Daemon::start();
    let holding = daemon.root.join("holding");
    let release = daemon.root.join("release");
    let python = gi_python();
    // Hostile: connections without end, each asked for the list, none closed; a request line
    // with a field the channel does not know first. Then, released, an ordinary call.
    let script = format!(
        r#"{python} -c '
import json, os, socket, time
channel = socket.socket(fileno=int(os.environ["COMPUTER_TOOLS_FD"]))
token = os.environ["COMPUTER_TOOLS_TOKEN"]
def connect():
    ours, theirs = socket.socketpair()
    socket.send_fds(channel, [b"C"], [theirs.fileno()])
    theirs.close()
    return ours
def ask(sock, request):
    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
    except OSError:
        pass
    return json.loads(sock.makefile("rb").readline())
first = connect()
print(ask(first, dict(token=token, op="list", as_agent="other"))["error"]["message"].split(";")[0])
first.close()
held, refused, said = [], 0, ""
for n in range(300):
    sock = connect()
    reply = ask(sock, dict(token=token, op="list"))
    if "callable" in reply:
        held.append(sock)
    else:
        refused += 1
        said = reply["error"]["code"] + ": " + reply["error"]["message"]
        sock.close()
print("held", len(held), "refused", refused)
print(said)
open("{holding}", "w").close()
while not os.path.exists("{release}"):
    time.sleep(0.05)
for sock in held:
    sock.close()
import computer_tools as t
print("after", t.shell_job(op="list")["ok"])
'"#,
        holding = holding.display(),
        release = release.display(),
    );
    let running = {
        let daemon_env = daemon.env();
        let bin = computer_bin();
        std::thread::spawn(move || {
            let mut command = std::process::Command::new(bin);
            command.envs(daemon_env).args([
                "call",
                "shell",
                "run",
                "--json",
                "--args",
                &json!({"script": script}).to_string(),
                "--complications",
                r#"{"tools": true, "timeout_ms": 120000}"#,
            ]);
            let out = command.output().unwrap();
            serde_json::from_slice::<Value>(&out.stdout)
                .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
        })
    };
    computer_tests::wait_for(
        "the run to hold its connections",
        Duration::from_secs(60),
        || holding.exists().then_some(()),
    );
    // Meanwhile: another client's ordinary call, tools/list, and the control socket.
    let other = daemon.call_json("shell", "job", r#"{"op": "list"}"#);
    assert_eq!(other["ok"], true, "{other}");
    let client = daemon.client().await;
    let tools = client.list_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "COMPUTER"));
    client.close().await;
    let approvals = daemon.cli(&["approvals", "list", "--json"]);
    assert!(approvals.status.success(), "{}", approvals.stderr);
    std::fs::write(&release, "").unwrap();
    let reply = running.join().unwrap();
    let out = stdout(&reply);
    let mut lines = out.lines();
    let unknown = lines.next().unwrap_or_default();
    assert!(
        unknown.contains("unknown field `as_agent`"),
        "{unknown}: {reply}"
    );
    assert_eq!(lines.next(), Some("held 8 refused 292"), "{reply}");
    let said = lines.next().unwrap_or_default();
    assert!(
        said.starts_with("rate_limited: this run holds its most tools connections (8)"),
        "{said}"
    );
    assert_eq!(lines.next(), Some("after True"), "{reply}");
}
