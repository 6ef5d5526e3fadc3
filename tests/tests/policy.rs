//! Policy and human approval with real processes: rules decide, asked calls wait for a person on
//! the control socket, every failure denies, every decision is receipted, and an agent cannot
//! answer its own request through the shell surface.

use std::time::Duration;

use computer_tests::{
    Daemon, RawConnection, computer_bin, shell_run, structured, touch_task, wait_for,
};
use serde_json::{Value, json};

const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";

fn first_pending(daemon: &Daemon) -> Value {
    wait_for("a pending approval", Duration::from_secs(20), || {
        daemon.pending_approvals().into_iter().next()
    })
}

async fn touch(daemon: &Daemon, file: &std::path::Path) -> Value {
    touch_task(daemon, file).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_asked_call_runs_once_a_person_allows_it() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("allowed");
    let call = touch_task(&daemon, &file);
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    assert_eq!(request["agent"], "default");
    assert_eq!(request["rule"], "defaults.act");
    assert!(
        request["action"].as_str().unwrap().contains("touch"),
        "{request}"
    );
    let id = request["id"].to_string();
    let answered = daemon.cli(&["approvals", "allow", &id]);
    assert!(answered.status.success(), "{}", answered.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["decision"], "ask");
    assert_eq!(intent["body"]["approval"]["outcome"], "allowed");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "cli");
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn denial_timeout_and_disconnect_all_deny() {
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"400ms\"\n"));
    let dir = tempfile::tempdir().unwrap();

    // Nobody answers: denied at the deadline.
    let out = touch(&daemon, &dir.path().join("late")).await;
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "{out}"
    );
    assert!(!dir.path().join("late").exists());

    // The agent hangs up while waiting: the request is withdrawn and receipted as denied.
    let client = daemon.client().await;
    let call = tokio::spawn(async move {
        let _ = client
            .call_raw(shell_run(json!({"argv": ["true"]}), json!({})))
            .await;
    });
    tokio::task::block_in_place(|| first_pending(&daemon));
    call.abort();
    drop(call);
    tokio::task::block_in_place(|| {
        wait_for(
            "the withdrawn request to be receipted",
            Duration::from_secs(20),
            || {
                daemon.receipts().into_iter().find(|r| {
                    r["kind"] == "intent"
                        && r["body"]["approval"]["reason"].as_str().is_some_and(|m| {
                            m.contains("went away") || m.contains("nobody answered")
                        })
                        && r["body"]["args"]["args"]["argv"] == json!(["true"])
                })
            },
        )
    });
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_denies_and_session_grants_cover_only_the_same_action() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");

    let call = touch_task(&daemon, &file);
    let id = tokio::task::block_in_place(|| first_pending(&daemon))["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied");
    assert!(!file.exists());

    let call = touch_task(&daemon, &file);
    let id = tokio::task::block_in_place(|| first_pending(&daemon))["id"].to_string();
    assert!(
        daemon
            .cli(&["approvals", "allow", "--session", &id])
            .status
            .success()
    );
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true);

    // The same action again: covered by the grant, nobody is asked.
    let again = touch(&daemon, &file).await;
    assert_eq!(again["ok"], true);
    let intent = daemon.receipt_row(&again["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["via_grant"], true);

    // A different action is asked again.
    let other = touch_task(&daemon, &dir.path().join("other"));
    let request = tokio::task::block_in_place(|| first_pending(&daemon));
    assert!(request["action"].as_str().unwrap().contains("other"));
    assert!(
        daemon
            .cli(&["approvals", "deny", &request["id"].to_string()])
            .status
            .success()
    );
    let out = other.await.unwrap();
    assert_eq!(out["error"]["code"], "denied");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shell_surface_cannot_answer_its_own_request() {
    // The agent may run `computer` itself (a rule allows it); it still cannot approve anything.
    // Policy denies `computer approvals` in any shell run, whatever the rules say (under another
    // name too); the layers below must hold for what policy lets through, such as a link asked
    // to list the requests, which needs the same control connection. Containment (on
    // by default) hides the control socket from runs altogether (see containment.rs); turned off
    // here, the control socket's own ancestry check must hold. An allow rule's bare name covers
    // only programs found through PATH or in a system directory; the binary under test lives
    // elsewhere, so the rule names its paths.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("cli");
    std::os::unix::fs::symlink(computer_bin(), &bin).unwrap();
    let config = format!(
        "{ASK_ACTS}[containment]\nmode = \"off\"\n[[rules]]\nargv0 = [{:?}, {:?}, \"env\"]\ndecision = \"allow\"\n",
        computer_bin().display().to_string(),
        bin.display().to_string()
    );
    let daemon = Daemon::start_with_config(&config);
    let file = dir.path().join("self-approved");
    let waiting = touch_task(&daemon, &file);
    let id = tokio::task::block_in_place(|| first_pending(&daemon))["id"].to_string();
    let client = daemon.client().await;
    for argv in [
        json!([computer_bin(), "approvals", "allow", id]),
        json!(["env", computer_bin(), "approvals", "allow", id]),
        json!([bin, "approvals", "allow", id]),
    ] {
        let named = client
            .call_raw(shell_run(json!({ "argv": argv }), json!({})))
            .await
            .unwrap();
        let named = structured(&named);
        assert_eq!(named["error"]["code"], "denied", "{named}");
        let intent = daemon.receipt_row(&named["receipt"], "intent");
        assert_eq!(intent["body"]["policy"]["rule"], "builtin:daemon-control");
    }
    // Without the control socket's path (runs never get it), the CLI finds no daemon.
    let blind = client
        .call_raw(shell_run(
            json!({"argv": [bin, "approvals", "list"]}),
            json!({}),
        ))
        .await
        .unwrap();
    let blind = structured(&blind);
    assert!(
        blind["exit_code"].as_i64().is_some_and(|code| code != 0),
        "{blind}"
    );
    // Knowing the path is not enough: the peer descends from the daemon and is refused.
    let control = format!(
        "COMPUTER_CONTROL_SOCKET={}",
        daemon.control_socket().display()
    );
    let knowing = client
        .call_raw(shell_run(
            json!({"argv": ["env", control, bin, "approvals", "list"]}),
            json!({}),
        ))
        .await
        .unwrap();
    client.close().await;
    let knowing = structured(&knowing);
    assert_ne!(knowing["exit_code"], 0, "{knowing}");
    assert!(
        knowing["stderr"]
            .as_str()
            .unwrap()
            .contains("descends from this daemon"),
        "{knowing}"
    );
    assert!(!file.exists());
    assert_eq!(
        daemon.pending_approvals().len(),
        1,
        "the request is still waiting for a person"
    );
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = waiting.await.unwrap();
    assert_eq!(out["error"]["code"], "denied");
    assert!(daemon.log_text().contains("refused a control connection"));
}

/// The daemon's children that have exited but were not reaped.
fn zombie_children(daemon_pid: i32) -> Vec<String> {
    let mut zombies = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{daemon_pid}/task"))
        .unwrap()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
            {
                zombies.push(pid.to_string());
            }
        }
    }
    zombies
}

#[tokio::test(flavor = "multi_thread")]
async fn a_descendant_that_a_run_detached_is_still_refused_and_reaped() {
    // Contained, a detached process dies with its run (containment.rs); with containment off,
    // the subreaper keeps it the daemon's descendant, refused at the control socket.
    let daemon =
        Daemon::start_with_config("[defaults]\nact = \"allow\"\n[containment]\nmode = \"off\"\n");
    let dir = tempfile::tempdir().unwrap();
    let (go, ready, out) = (
        dir.path().join("go"),
        dir.path().join("ready"),
        dir.path().join("out"),
    );
    for fifo in [&go, &ready] {
        assert!(
            std::process::Command::new("mkfifo")
                .arg(fifo)
                .status()
                .unwrap()
                .success()
        );
    }
    // The run starts a new session in the background, waits until it is running (so the end of
    // the run's process group cannot take it along), and exits: the detached process escapes the
    // group and, without a subreaper, would belong to init.
    let script = r#"COMPUTER_CONTROL_SOCKET="$4" setsid sh -c 'echo > "$5"; read go < "$1"; "$2" approvals list --json > "$3" 2>&1' sh "$1" "$2" "$3" "$4" "$5" </dev/null >/dev/null 2>&1 &
read ready < "$5""#;
    let client = daemon.client().await;
    let run = client
        .call_raw(shell_run(
            json!({"argv": ["sh", "-c", script, "sh", go, computer_bin(), out,
                            daemon.control_socket(), ready]}),
            json!({}),
        ))
        .await
        .unwrap();
    client.close().await;
    assert_eq!(structured(&run)["exit_code"], 0, "{run:?}");
    // The run is over (its shell gone); now let the detached process knock. Opening without
    // blocking fails while nobody reads, so a process that died cannot hang the test.
    tokio::task::block_in_place(|| {
        wait_for(
            "the detached process to read",
            Duration::from_secs(20),
            || {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let mut fifo = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&go)
                    .ok()?;
                fifo.write_all(b"go\n").ok()
            },
        )
    });
    let answer = tokio::task::block_in_place(|| {
        wait_for(
            "the detached process's answer",
            Duration::from_secs(20),
            || {
                let text = std::fs::read_to_string(&out).ok()?;
                text.contains('\n').then_some(text)
            },
        )
    });
    assert!(answer.contains("descends from this daemon"), "{answer}");
    // Once it exits, the daemon (its adoptive parent) reaps it.
    let daemon_pid = daemon.pid();
    tokio::task::block_in_place(|| {
        wait_for(
            "the adopted orphan to be reaped",
            Duration::from_secs(10),
            || zombie_children(daemon_pid).is_empty().then_some(()),
        )
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_protected_paths_reload_and_rate_limits() {
    let allow = "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n";
    let daemon = Daemon::start_with_config(allow);
    let client = daemon.client().await;
    let call = |args: Value| client.call_raw(shell_run(args, json!({})));

    let out = structured(
        &call(json!({"argv": ["rm", "-rf", "/nonexistent-dir"]}))
            .await
            .unwrap(),
    );
    assert_eq!(out["error"]["code"], "denied", "{out}");
    let out = structured(
        &call(json!({"script": format!("cat {}", daemon.config.display())}))
            .await
            .unwrap(),
    );
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("configuration or state")
    );
    let out = structured(&call(json!({"argv": ["true"]})).await.unwrap());
    assert_eq!(out["ok"], true);

    // `policy explain` names the deciding rule.
    let explained = daemon.cli(&[
        "policy",
        "explain",
        "--args",
        r#"{"surface":"shell","command":"run","args":{"argv":["rm","x"]}}"#,
    ]);
    assert!(explained.status.success(), "{}", explained.stderr);
    let explained = explained.json();
    assert_eq!(explained["decision"]["rule"], "rules[0]");
    assert_eq!(explained["decision"]["decision"], "deny");

    // SIGHUP: the new config applies; a broken one is refused and the rules in force stay.
    std::fs::write(
        &daemon.config,
        "[defaults]\nact = \"deny\"\n[limits]\ncalls = 2\nwindow = \"60s\"\n",
    )
    .unwrap();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(daemon.pid(), libc::SIGHUP) };
    let denied = wait_for_async(|| async {
        let out = structured(&call(json!({"argv": ["true"]})).await.unwrap());
        (out["error"]["code"] == "denied" || out["error"]["code"] == "rate_limited").then_some(out)
    })
    .await;
    assert!(denied["error"]["message"].is_string());
    // Over the limit of 2 calls a minute: refused with the time to retry.
    let mut limited = None;
    for _ in 0..3 {
        let out = structured(&call(json!({"argv": ["true"]})).await.unwrap());
        if out["error"]["code"] == "rate_limited" {
            limited = Some(out);
            break;
        }
    }
    let limited = limited.expect("a call over the limit is refused");
    assert!(
        limited["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry in"),
        "{limited}"
    );

    std::fs::write(&daemon.config, "[defaults]\nact = \"sometimes\"\n").unwrap();
    unsafe { libc::kill(daemon.pid(), libc::SIGHUP) };
    wait_for(
        "the refused reload in the log",
        Duration::from_secs(20),
        || daemon.log_text().contains("config refused").then_some(()),
    );
    let check = daemon.cli(&["config", "check"]);
    assert!(!check.status.success());
    assert!(check.stderr.contains("line 2"), "{}", check.stderr);
    client.close().await;
    daemon.assert_chain_holds();
}

async fn wait_for_async<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn waiting_calls_get_progress_notifications() {
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"30s\"\n"));
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "p1"}, "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["true"]}), json!({}))}}),
    );
    let note = raw.recv().expect("a progress notification");
    assert_eq!(note["method"], "notifications/progress", "{note}");
    assert_eq!(note["params"]["progressToken"], "p1");
    assert!(
        note["params"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting for approval")
    );
    let id = first_pending(&daemon)["id"].to_string();
    assert!(daemon.cli(&["approvals", "allow", &id]).status.success());
    let reply = raw.recv_response(1);
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
}

/// A call that names a login file is asked of the person whatever rule allows it, with the
/// reason and the files a yes opens; a deny still wins; a word policy cannot read, or a file that
/// is no login file, is not asked about (`policy explain`, which decides as the daemon does).
#[test]
fn a_call_that_names_a_login_file_is_asked_with_the_reason_whatever_allows_it() {
    let daemon = Daemon::start_with_config(
        "[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n\
         [[rules]]\nsurface = \"shell\"\nargv0 = [\"rm\"]\ndecision = \"deny\"\n",
    );
    let home = tempfile::tempdir().unwrap();
    let explain = |args: Value| {
        let call = json!({"surface": "shell", "command": "run", "args": args});
        let out = (daemon.command().env("HOME", home.path()))
            .args(["policy", "explain", "--args", &call.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["decision"].clone()
    };
    let at_home = |p: &str| home.path().join(p).display().to_string();
    for (script, named) in [
        ("echo 'alias ll=ls' >> ~/.bashrc", at_home(".bashrc")),
        (
            "cp x.desktop $HOME/.config/autostart/",
            at_home(".config/autostart"),
        ),
        (
            "tee /etc//profile.d/../profile.d/x.sh < x",
            "/etc/profile.d".into(),
        ),
    ] {
        let decision = explain(json!({ "script": script }));
        assert_eq!(decision["decision"], "ask", "{script}: {decision}");
        assert_eq!(decision["rule"], "builtin:login-file", "{decision}");
        assert!(
            decision["reason"].as_str().unwrap().contains("next login"),
            "{decision}"
        );
        assert_eq!(decision["login_files"], json!([named]), "{decision}");
    }
    let bashrc = explain(json!({"script": "echo x >> ~/.bashrc"}));
    assert!(
        bashrc["reason"].as_str().unwrap().contains("~/.bashrc"),
        "{bashrc}"
    );
    let denied = explain(json!({"argv": ["rm", at_home(".bashrc")]}));
    assert_eq!(denied["decision"], "deny", "{denied}");
    for script in ["ls ~/src", "cat $p/cmdline", "echo x > ~/.bashrc.bak"] {
        let decision = explain(json!({ "script": script }));
        assert_eq!(decision["decision"], "allow", "{script}: {decision}");
    }
}
