//! Containment of runs, tried the way a hostile agent would: a `shell run` that a rule allows
//! goes after the daemon's config, receipts, sockets and process, and tries to leave processes
//! behind. Each attack must fail while the ordinary work beside it succeeds.

use std::path::Path;
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, wait_for};
use serde_json::{Value, json};

/// Shell runs are allowed by rule: the attacks below are what such a rule lets through.
const ALLOW_SHELL: &str = "[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n";

/// Runs `script` through `computer call`, with `env` added to the run's environment.
fn run(daemon: &Daemon, script: &str, env: Value) -> Value {
    let (script, env) = hidden_from_policy(script, env);
    daemon.shell_run_json(&json!({ "script": script }), &json!({ "env": env }))
}

/// Policy denies runs that name the daemon's paths, in env values too; an agent can still hide
/// a path from it (here: reversed, and turned round by the script), and containment must hold
/// then. Returns the script and env that do so.
fn hidden_from_policy(script: &str, env: Value) -> (String, Value) {
    let mut prelude = String::new();
    let mut hidden = serde_json::Map::new();
    for (name, value) in env.as_object().cloned().unwrap_or_default() {
        let text = value.as_str().unwrap_or_default();
        hidden.insert(name.clone(), json!(text.chars().rev().collect::<String>()));
        prelude.push_str(&format!("{name}=$(printf '%s' \"${name}\" | rev); "));
    }
    (format!("{prelude}\n{script}"), Value::Object(hidden))
}

/// Sends a `shell run` of `script` as request `id` on a raw connection and waits until a
/// process whose command line starts with `running` exists; the call's reply is left unread.
fn start_run(daemon: &Daemon, id: i64, script: &str, running: &str) -> RawConnection {
    let mut connection = RawConnection::connect(&daemon.socket);
    connection.initialize("2025-11-25");
    connection.send(&json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "COMPUTER", "arguments": {
            "surface": "shell", "command": "run", "args": {"script": script}}}
    }));
    wait_for("the run to start", Duration::from_secs(20), || {
        (!processes_with(running).is_empty()).then_some(())
    });
    connection
}

fn stdout(reply: &Value) -> &str {
    reply["stdout"].as_str().unwrap_or_default()
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        std::fs::read(path).unwrap_or_default(),
    ))
}

fn processes_with(prefix: &str) -> Vec<String> {
    computer_tests::processes_started_with(prefix)
}

#[test]
fn a_run_cannot_reach_the_config_receipts_or_sockets_while_ordinary_work_succeeds() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let config_before = sha256_of(&daemon.config);
    let env = json!({
        "CFG": daemon.config,
        "STATE": daemon.state,
        "SOCK_DIR": daemon.socket.parent().unwrap(),
        "ROOT": daemon.root,
    });

    // Read the config, the ledger and the agent store; rewrite the config; delete receipts.
    let attack = run(
        &daemon,
        r#"cat "$CFG"; ls -A "$STATE"; ls -A "$SOCK_DIR"; cat /proc/net/unix;
           printf '[defaults]\nact = "allow"\n' > "$CFG" 2>/dev/null;
           rm "$STATE/receipts.sqlite" 2>/dev/null && echo DELETED;
           mv "$STATE" "$STATE.moved" 2>/dev/null && echo MOVED-STATE;
           mv "$(dirname "$STATE")" "$(dirname "$STATE").moved" 2>/dev/null && echo MOVED-PARENT;
           find "$ROOT" -name 'receipts.sqlite*' 2>/dev/null | grep -q . && echo FOUND-LEDGER;
           true"#,
        env.clone(),
    );
    assert_eq!(attack["ok"], true, "{attack}");
    let seen = stdout(&attack);
    for leak in [
        "decision",
        "receipts.sqlite",
        "agents",
        "computer.sock",
        "control.sock",
        "DELETED",
        "MOVED-STATE",
        "MOVED-PARENT",
        "FOUND-LEDGER",
    ] {
        assert!(!seen.contains(leak), "the run reached `{leak}`: {seen}");
    }
    let socket_dir = daemon.socket.parent().unwrap().to_str().unwrap();
    assert!(
        !seen.contains(socket_dir),
        "the run saw {socket_dir}: {seen}"
    );
    assert_eq!(sha256_of(&daemon.config), config_before, "config changed");
    assert!(daemon.state.join("receipts.sqlite").exists());
    daemon.assert_chain_holds();

    // Ordinary work beside it: files of the person's, a git commit, pipes, the network stack.
    let work = tempfile::tempdir().unwrap();
    let ordinary = run(
        &daemon,
        r#"cd "$WORK" && echo note > notes.txt && cat notes.txt &&
           git init -q repo && cd repo && echo x > f && git add f &&
           git -c user.name=t -c user.email=t@example.com commit -qm first && git log --oneline | wc -l"#,
        json!({ "WORK": work.path() }),
    );
    assert_eq!(ordinary["ok"], true, "{ordinary}");
    assert_eq!(stdout(&ordinary), "note\n1\n");
    assert_eq!(
        std::fs::read_to_string(work.path().join("notes.txt")).unwrap(),
        "note\n"
    );

    // The receipt of each run records the containment it ran under.
    let result = daemon.receipt_row(&ordinary["receipt"], "result");
    assert_eq!(
        result["body"]["containment"]["mechanism"], "namespaces",
        "{result}"
    );
}

#[test]
fn a_run_cannot_see_signal_or_inspect_the_daemon() {
    let mut daemon = Daemon::start_with_config(ALLOW_SHELL);
    let daemon_pid = daemon.pid();
    let attack = run(
        &daemon,
        r#"kill -HUP "$DAEMON" 2>/dev/null && echo SIGNALLED;
           kill -HUP $PPID 2>/dev/null; kill -9 1 2>/dev/null;
           cat /proc/$PPID/environ 2>/dev/null | tr '\0' '\n' | grep -q . && echo READ-ENVIRON;
           cat "/proc/$DAEMON/environ" 2>/dev/null | grep -q . && echo READ-DAEMON-ENVIRON;
           ps -eo comm= | grep -q '^computer$' && echo SAW-DAEMON;
           ls /proc/self/fd | tr '\n' ' '"#,
        json!({ "DAEMON": daemon_pid.to_string() }),
    );
    assert_eq!(attack["ok"], true, "{attack}");
    let seen = stdout(&attack);
    for leak in [
        "SIGNALLED",
        "READ-ENVIRON",
        "READ-DAEMON-ENVIRON",
        "SAW-DAEMON",
    ] {
        assert!(!seen.contains(leak), "{leak}: {seen}");
    }
    // Only stdin, stdout, stderr and the directory `ls` itself opened.
    assert_eq!(seen.trim(), "0 1 2 3", "inherited descriptors: {seen}");
    assert!(
        !daemon.log_text().contains("SIGHUP"),
        "the daemon saw a SIGHUP"
    );
    // Still serving, and still the same process.
    let after = run(&daemon, "echo alive", json!({}));
    assert_eq!(stdout(&after), "alive\n");
    assert_eq!(daemon.pid(), daemon_pid);
    assert!(daemon.stop_with(libc::SIGTERM).success());
}

#[test]
fn nothing_a_run_starts_outlives_it() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    // Three ways out of a process group: setsid -f, setsid in the background, a double fork.
    let reply = run(
        &daemon,
        "setsid -f sleep 3011; setsid sleep 3012 & (sleep 3013 &); echo started",
        json!({}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(stdout(&reply), "started\n");
    let killed = reply["killed_processes"].as_u64().unwrap_or(0);
    assert!(killed >= 3, "killed_processes: {reply}");
    assert!(
        processes_with("sleep 301").is_empty(),
        "left behind: {:?}",
        processes_with("sleep 301")
    );
    let result = daemon.receipt_row(&reply["receipt"], "result");
    assert_eq!(result["body"]["killed_processes"], killed, "{result}");

    // At the deadline the whole run goes, the program included, and the receipt counts it.
    let reply = daemon.shell_run_json(
        &json!({"script": "setsid -f sleep 3021; sleep 3022"}),
        &json!({"timeout_ms": 300}),
    );
    assert_eq!(reply["timed_out"], true, "{reply}");
    assert!(
        reply["killed_processes"].as_u64().unwrap_or(0) >= 2,
        "{reply}"
    );
    assert!(processes_with("sleep 302").is_empty());

    // An ordinary run beside them still reports its exit code and kills nothing.
    let plain = run(&daemon, "exit 3", json!({}));
    assert_eq!(plain["exit_code"], 3);
    assert!(plain.get("killed_processes").is_none(), "{plain}");
}

/// Sandboxes serve run after run: a run finds nothing of the runs before it, however hard the
/// one before tried to stay.
#[test]
fn a_run_finds_nothing_of_the_run_before_it() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let list = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done";
    for round in 0..4 {
        let left = run(
            &daemon,
            &format!("setsid -f sleep 304{round}; (sleep 305{round} &); {list}"),
            json!({}),
        );
        assert_eq!(left["ok"], true, "{left}");
        assert!(
            stdout(&left).contains(&format!("sleep 304{round}")),
            "a run sees its own processes (so the check below could fail): {left}"
        );
        for earlier in 0..round {
            for name in [format!("sleep 304{earlier}"), format!("sleep 305{earlier}")] {
                assert!(
                    !stdout(&left).contains(&name),
                    "round {round} saw `{name}` of an earlier run: {left}"
                );
            }
        }
        assert!(
            left["killed_processes"].as_u64().unwrap_or(0) >= 2,
            "{left}"
        );
    }
}

#[test]
fn a_cancelled_run_stops_and_its_receipt_says_so() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let mut connection = start_run(&daemon, 7, "setsid -f sleep 3031; sleep 3032", "sleep 3032");
    connection.send(&json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "user pressed stop"}
    }));
    wait_for("the run's processes to go", Duration::from_secs(20), || {
        processes_with("sleep 303").is_empty().then_some(())
    });
    let result = wait_for(
        "the cancelled call's receipt",
        Duration::from_secs(20),
        || {
            daemon
                .receipts()
                .into_iter()
                .find(|r| r["kind"] == "result" && r["body"]["cancelled"].is_object())
        },
    );
    assert_eq!(result["body"]["cancelled"]["by"], "client", "{result}");
    assert_eq!(result["body"]["ok"], false, "{result}");
    assert!(
        result["body"]["killed_processes"].as_u64().unwrap_or(0) >= 2,
        "{result}"
    );
    // The connection still serves, and no reply came for the cancelled request.
    let (reply, _) = connection.call_tool(&json!({
        "surface": "shell", "command": "run", "args": {"argv": ["echo", "next"]}
    }));
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "next\n",
        "{reply}"
    );
}

#[test]
fn containment_off_is_a_deliberate_and_receipted_choice() {
    let daemon =
        Daemon::start_with_config(&format!("{ALLOW_SHELL}[containment]\nmode = \"off\"\n"));
    let reply = run(
        &daemon,
        r#"ls -A "$STATE""#,
        json!({ "STATE": daemon.state }),
    );
    assert!(stdout(&reply).contains("receipts.sqlite"), "{reply}");
    let result = daemon.receipt_row(&reply["receipt"], "result");
    assert_eq!(
        result["body"]["containment"]["mechanism"], "off",
        "{result}"
    );

    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert_eq!(doctor["containment"]["mechanism"], "off", "{doctor}");
}

#[test]
fn doctor_names_the_containment_this_machine_gives() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert_eq!(doctor["containment"]["mechanism"], "namespaces", "{doctor}");
    let detail = doctor["containment"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&daemon.state.display().to_string()),
        "the state dir is not among the hidden paths: {detail}"
    );
}

/// The way a person's daemon runs: not as root, so each run gets its own user namespace too;
/// there too a run holds no capability, sees only its own terminals and changes no kernel
/// setting.
#[test]
fn a_daemon_of_an_ordinary_user_contains_its_runs_in_a_user_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(root.join("config.toml"), ALLOW_SHELL).unwrap();
    std::fs::set_permissions(
        root.join("config.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let as_nobody = |args: &[&str]| {
        let mut command = std::process::Command::new("setpriv");
        command
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(computer_tests::computer_bin())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", root)
            .env("COMPUTER_SOCKET", root.join("run/computer.sock"))
            .env("COMPUTER_STATE_DIR", root.join("state"))
            .env("COMPUTER_CONFIG", root.join("config.toml"))
            .env("SECRET_TOKEN", "hunter2-of-the-client");
        command
    };
    let mut daemon = as_nobody(&["serve"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the daemon as nobody");
    let socket = root.join("run/computer.sock");
    wait_for("the daemon to listen", Duration::from_secs(30), || {
        std::os::unix::net::UnixStream::connect(&socket).ok()
    });
    let (script, mut env) = hidden_from_policy(
        &format!(
            r#"id -u; ls -A "$S" | grep -cvx run-tools; grep -c computer.sock /proc/net/unix;
               touch "$S/run-tools/planted" 2>/dev/null || echo tools-refused;
               touch "$H/.config/autostart/x.desktop" 2>/dev/null || echo login-refused;
               keyctl add user own-key v @s >/dev/null && echo keyring-own;
               ps -e -o comm= | grep -c .;
               cat /proc/1/environ 2>/dev/null | tr '\0' '\n' | grep -c hunter2;
               {PRIVILEGES}; ls -A /dev/pts; python3 -c "$ATTACKS" 1 | grep -c refused;
               setsid -f sleep 3041; echo done"#
        ),
        json!({"S": root.join("state"), "H": root}),
    );
    env["ATTACKS"] = json!(KERNEL_ATTACKS);
    let cli = computer_tests::shell_run_cli(&json!({ "script": script }), &json!({ "env": env }));
    let cli: Vec<&str> = cli.iter().map(String::as_str).collect();
    let output = as_nobody(&cli).output().unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let reply: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{err}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    // nobody's uid; no state but run-tools; no daemon socket in the socket list; the run's tools
    // and the home's autostart read-only; a session keyring of its own; only the init, the shell, `ps` and `grep`; no secret;
    // no capability (not even in its user namespace); a /dev/pts of its own; every kernel
    // attack refused.
    assert_eq!(
        stdout(&reply),
        format!(
            "65534\n0\n0\ntools-refused\nlogin-refused\nkeyring-own\n4\n0\n{NO_PRIVILEGES}ptmx\n10\ndone\n"
        ),
        "{reply}"
    );
    assert!(
        reply["killed_processes"].as_u64().unwrap_or(0) >= 1,
        "{reply}"
    );
    assert!(processes_with("sleep 3041").is_empty());
    // The autostart directory was there to write into (the daemon makes it at start), and
    // stayed empty.
    let autostart = root.join(".config/autostart");
    assert_eq!(
        std::fs::read_dir(&autostart).map(|d| d.count()).ok(),
        Some(0)
    );
}

#[test]
fn a_call_can_ask_for_a_stricter_sandbox_and_never_a_looser_one() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let work = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let probe = r#"python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2); print('connected')" "$PORT" 2>/dev/null || echo no-network;
                   touch "$WORK/inside" 2>/dev/null && echo wrote-inside;
                   touch "$ELSEWHERE/outside" 2>/dev/null && echo wrote-outside"#;
    let env = json!({"PORT": port, "WORK": work.path(), "ELSEWHERE": elsewhere.path()});
    let call = |sandbox: Value| {
        daemon.shell_run_json(
            &json!({ "script": probe }),
            &json!({"env": env, "sandbox": sandbox}),
        )
    };
    // By default: the network and the person's files are there.
    let ordinary = call(json!({}));
    assert_eq!(
        stdout(&ordinary),
        "connected\nwrote-inside\nwrote-outside\n",
        "{ordinary}"
    );
    // Asked for: no network, and nothing writable but the work directory.
    let strict = call(json!({"network": false, "writable": [work.path()]}));
    assert_eq!(stdout(&strict), "no-network\nwrote-inside\n", "{strict}");
    let result = daemon.receipt_row(&strict["receipt"], "result");
    assert_eq!(result["body"]["sandbox"]["network"], false, "{result}");
    // A writable path that is not absolute is an error naming it.
    let bad = call(json!({"writable": ["relative/dir"]}));
    assert_eq!(
        bad["error"]["path"], "complications.sandbox.writable[0]",
        "{bad}"
    );
    drop(listener);
}

#[test]
fn a_run_dies_with_a_daemon_that_is_killed() {
    let mut daemon = Daemon::start_with_config(ALLOW_SHELL);
    let _connection = start_run(&daemon, 9, "setsid -f sleep 3051; sleep 3052", "sleep 3052");
    // No shutdown, no cleanup code of the daemon's: the kernel alone must end the run.
    daemon.stop_with(libc::SIGKILL);
    wait_for(
        "the run's processes to die with the daemon",
        Duration::from_secs(20),
        || processes_with("sleep 305").is_empty().then_some(()),
    );
}

/// Where containment cannot be set up, runs are refused, saying why and what would fix it; the
/// config can turn containment off, and that is what the receipts then say.
#[test]
fn without_user_namespaces_runs_are_refused_unless_containment_is_turned_off() {
    for (extra_config, contained) in [("", false), ("[containment]\nmode = \"off\"\n", true)] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("config.toml"),
            format!("{ALLOW_SHELL}{extra_config}"),
        )
        .unwrap();
        let env = [
            ("COMPUTER_SOCKET", root.join("run/computer.sock")),
            ("COMPUTER_STATE_DIR", root.join("state")),
            ("COMPUTER_CONFIG", root.join("config.toml")),
        ];
        // A daemon of an ordinary user on a machine that allows no user namespaces (as Debian's
        // `kernel.unprivileged_userns_clone=0` or Ubuntu's AppArmor restriction would).
        let mut daemon = std::process::Command::new("bwrap")
            .args([
                "--dev-bind",
                "/",
                "/",
                "--unshare-user",
                "--uid",
                "1000",
                "--gid",
                "1000",
            ])
            .args(["--disable-userns", "--die-with-parent", "--"])
            .arg(computer_tests::computer_bin())
            .arg("serve")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("bwrap (bubblewrap) starts the daemon");
        wait_for("the daemon to listen", Duration::from_secs(30), || {
            std::os::unix::net::UnixStream::connect(root.join("run/computer.sock")).ok()
        });
        let call = |args: &[&str]| {
            let out = std::process::Command::new(computer_tests::computer_bin())
                .args(args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        };
        let reply = call(&["call", "shell", "run", "--json", "--", "echo", "ran"]);
        let doctor = call(&["doctor", "--json"]);
        let _ = daemon.kill();
        let _ = daemon.wait();
        if contained {
            assert!(reply.contains("\"stdout\":\"ran\\n\""), "{reply}");
            assert!(doctor.contains("\"mechanism\":\"off\""), "{doctor}");
        } else {
            assert!(
                !reply.contains("ran\\n"),
                "an uncontained run started: {reply}"
            );
            assert!(reply.contains("unavailable"), "{reply}");
            assert!(reply.contains("user namespaces"), "no fix named: {reply}");
        }
    }
}

/// A run whose working directory lies above the daemon's state dir (the default, `$HOME`, holds
/// `~/.local/state/computer`) cannot step down into it by a relative path: the run's directory
/// is entered only once the masks are in place, never held open from before them.
#[test]
fn a_run_started_above_the_state_dir_cannot_reach_it_by_a_relative_path() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let (script, env) = hidden_from_policy(
        r#"head -c 15 "$S/receipts.sqlite" 2>/dev/null; ls -A "$S" | grep -vx run-tools; cat "$C" 2>/dev/null;
           echo note > notes.txt && cat notes.txt"#,
        json!({"S": "state", "C": "config.toml"}),
    );
    let reply = daemon.shell_run_json(
        &json!({ "script": script }),
        &json!({ "env": env, "cwd": daemon.root }),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    // No ledger header, no state listing, no config: only the ordinary work.
    assert_eq!(stdout(&reply), "note\n", "{reply}");
    assert_eq!(
        std::fs::read_to_string(daemon.root.join("notes.txt")).unwrap(),
        "note\n"
    );
}

/// Runs served at once (one from the prepared slot, the others from slots made for them) each
/// get namespaces of their own: all four are alive together, and each sees only itself.
#[test]
fn runs_at_the_same_time_each_see_only_their_own_processes() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let meeting = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let daemon = &daemon;
                let meeting = meeting.path();
                scope.spawn(move || {
                    // The runs meet through files (bounded, 10 s) so that they overlap.
                    let script = format!(
                        "# marker-{i}\n\
                         touch \"$D/{i}\"; n=0;\n\
                         while [ \"$(ls \"$D\" | wc -l)\" -lt 4 ] && [ $n -lt 200 ]; do\n\
                           sleep 0.05; n=$((n+1)); done\n\
                         ls \"$D\" | wc -l; ps -e -o args= | grep -o 'marker-[0-9]' | sort -u"
                    );
                    run(daemon, &script, json!({ "D": meeting }))
                })
            })
            .collect();
        for (i, handle) in runs.into_iter().enumerate() {
            let reply = handle.join().unwrap();
            assert_eq!(reply["ok"], true, "{reply}");
            assert_eq!(stdout(&reply), format!("4\nmarker-{i}\n"), "{reply}");
        }
    });
}

/// The zygote that starts every run is the daemon's child, holds nothing of the daemon's
/// environment, is started again when killed, ends with the daemon, and serves nobody who
/// starts it by hand.
#[test]
fn the_zygote_holds_no_secret_of_the_daemon_and_ends_with_it() {
    let mut daemon = Daemon::start_with(ALLOW_SHELL, &[("SECRET_TOKEN", "hunter2".into())]);
    let ordinary = run(&daemon, "echo ran", json!({}));
    assert_eq!(stdout(&ordinary), "ran\n", "{ordinary}");
    let zygote = zygotes_of(daemon.pid());
    assert_eq!(zygote.len(), 1, "zygotes: {zygote:?}");
    let zygote = zygote[0];
    let environ = std::fs::read(format!("/proc/{zygote}/environ")).unwrap_or_default();
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    // The daemon's environment does hold the secret: the check above could have failed.
    let daemon_environ = std::fs::read(format!("/proc/{}/environ", daemon.pid())).unwrap();
    assert!(String::from_utf8_lossy(&daemon_environ).contains("hunter2"));

    // Killed from outside (no run can see it), it is started again for the next run.
    // SAFETY: kill only sends a signal.
    unsafe { libc::kill(zygote, libc::SIGKILL) };
    wait_for("the zygote to end", Duration::from_secs(20), || {
        (!is_zygote(zygote)).then_some(())
    });
    let again = run(&daemon, "echo again", json!({}));
    assert_eq!(stdout(&again), "again\n", "{again}");
    let zygote = zygotes_of(daemon.pid());
    assert_eq!(zygote.len(), 1, "zygotes: {zygote:?}");

    daemon.stop_with(libc::SIGKILL);
    wait_for(
        "the zygote to end with the daemon",
        Duration::from_secs(20),
        || (!is_zygote(zygote[0])).then_some(()),
    );

    use std::os::unix::process::CommandExt;
    let by_hand = std::process::Command::new(computer_tests::computer_bin())
        .arg0("computer-contain-zygote")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(by_hand.status.code(), Some(2), "{by_hand:?}");
    assert!(
        String::from_utf8_lossy(&by_hand.stderr).contains("started by `computer serve`"),
        "{by_hand:?}"
    );
}

/// Whether `pid` is a live containment zygote (a dead one's command line reads empty).
fn is_zygote(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.starts_with(b"computer-contain-zygote")
}

/// Live children of `parent` that run as the containment zygote.
fn zygotes_of(parent: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent pid is the second field after the command name, which may hold spaces.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let ppid = after_name
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(parent) && is_zygote(pid) {
            found.push(pid);
        }
    }
    found
}

/// Terminals of another agent's session and of the person's, attacked from runs (Linux: the
/// person's pty is named with `ptsname_r`).
#[cfg(target_os = "linux")]
mod terminals {
    use super::*;

    /// One `shell COMMAND` call through `computer call` as the agent whose token is given.
    fn shell_as(
        daemon: &Daemon,
        token: &str,
        command: &str,
        args: Value,
        complications: Value,
    ) -> Value {
        daemon.call_json_as(Some(token), "shell", command, &args, &complications)
    }

    /// Reads `session` (as `token`) until `pattern` shows in its new output; that output.
    fn session_read_until(daemon: &Daemon, token: &str, session: u64, pattern: &str) -> String {
        let read = shell_as(
            daemon,
            token,
            "read",
            json!({"session": session, "until": pattern}),
            json!({"timeout_ms": 20000}),
        );
        assert_eq!(read["met"], true, "waiting for {pattern:?}: {read}");
        read["output"].as_str().unwrap_or_default().to_string()
    }

    fn session_send(daemon: &Daemon, token: &str, session: u64, text: &str) {
        let sent = shell_as(
            daemon,
            token,
            "send",
            json!({"session": session, "text": text}),
            json!({}),
        );
        assert_eq!(sent["ok"], true, "send {text:?}: {sent}");
    }

    /// A pty of the test's own, in the machine's /dev/pts: the person's terminal. Its master
    /// (non-blocking) and its terminal side's name.
    fn persons_terminal() -> (std::fs::File, String) {
        use std::os::fd::FromRawFd;
        // SAFETY: plain libc calls on a descriptor we own; ptsname_r writes into our buffer.
        unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(master >= 0, "posix_openpt");
            assert_eq!(libc::grantpt(master), 0);
            assert_eq!(libc::unlockpt(master), 0);
            assert_eq!(libc::fcntl(master, libc::F_SETFL, libc::O_NONBLOCK), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
            let name = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            (std::fs::File::from_raw_fd(master), name)
        }
    }

    /// What the attacks below write into terminals: a fake prompt.
    const FAKE_PROMPT: &str = "[sudo] password for root: ";
    /// What the owner types into its session while they run.
    const TYPED_SECRET: &str = "s3cret-typed-by-the-owner";

    /// An agent's run, job and session go after another agent's terminal session (while it types a
    /// secret) and the person's terminal: they find no terminal but their own in /dev/pts, cannot
    /// open, read or write the others' by name, and the owner's session reads on unharmed.
    #[test]
    fn another_agents_run_job_and_session_cannot_reach_a_sessions_terminal_or_the_persons() {
        let daemon = Daemon::start_with_config(ALLOW_SHELL);
        let owner = daemon.add_agent("owner");
        let intruder = daemon.add_agent("intruder");
        let (mut person, person_tty) = persons_terminal();

        // The owner's session, and the name its terminal has (inside its own run).
        let opened = shell_as(
            &daemon,
            &owner,
            "open",
            json!({"argv": ["bash", "--norc", "--noprofile"]}),
            json!({}),
        );
        let session = opened["session"]
            .as_u64()
            .unwrap_or_else(|| panic!("{opened}"));
        session_send(
            &daemon,
            &owner,
            session,
            "tty; ls /dev/pts | tr '\\n' ' '; echo\n",
        );
        let named = session_read_until(&daemon, &owner, session, r"(?m)^[0-9 ]*ptmx");
        let owner_tty = named
            .split_whitespace()
            .find(|word| word.starts_with("/dev/pts/"))
            .unwrap_or_else(|| panic!("no tty named: {named}"))
            .to_string();
        // Its own pty, the only one in its own /dev/pts.
        assert_eq!(owner_tty, "/dev/pts/0", "{named}");
        assert!(named.contains("\n0 ptmx"), "{named}");
        // A pty of its own, inside the session, as `script` makes one. The next line is typed
        // only once `script` is gone: while it runs, it passes what is typed to its inner
        // terminal, whose command may have ended already, and the line would be lost.
        session_send(
            &daemon,
            &owner,
            session,
            "script -qc 'echo inner=$(tty)' /dev/null; echo script-ended\n",
        );
        let inner = session_read_until(&daemon, &owner, session, r"(?m)^script-ended");
        assert!(inner.contains("inner=/dev/pts/1"), "{inner}");
        session_send(
            &daemon,
            &owner,
            session,
            "read -rs secret; echo \"typed=${#secret}\"\n",
        );

        // Every pty name the intruder could try: the owner's, the person's, and the first few.
        let targets =
            format!("{owner_tty} {person_tty} /dev/pts/[0-9]* /dev/pts/0 /dev/pts/1 /dev/pts/2");
        let env = json!({"TARGETS": targets});
        // A job that listens on every terminal it can open while the owner types.
        let go = tempfile::tempdir().unwrap();
        let stop = go.path().join("stop");
        let job = shell_as(
            &daemon,
            &intruder,
            "run",
            json!({"script": format!(
                "ls -A /dev/pts | tr '\\n' ' '; echo; \
                 for p in $TARGETS; do (stty -F \"$p\" raw -echo; exec cat \"$p\") 2>/dev/null & done; \
                 echo listening; while [ ! -e '{}' ]; do sleep 0.05; done; echo stopped",
                stop.display()
            )}),
            json!({"env": env, "detach": true}),
        );
        assert_eq!(job["ok"], true, "{job}");
        let job_id = job["job"].clone();
        // "ptmx \nlistening\n": what it prints once its listeners are started.
        wait_for("the job to listen", Duration::from_secs(30), || {
            let status = shell_as(
                &daemon,
                &intruder,
                "job",
                json!({"op": "status", "id": job_id}),
                json!({}),
            );
            (status["output_bytes"].as_u64().unwrap_or(0) >= 16).then_some(())
        });

        // A run that writes a fake prompt to every terminal it can name.
        let writer_script = format!(
            "ls -A /dev/pts | tr '\\n' ' '; echo; \
             for p in $TARGETS; do printf '{FAKE_PROMPT}' 2>/dev/null > \"$p\" && echo \"wrote $p\"; done; true"
        );
        let run = shell_as(
            &daemon,
            &intruder,
            "run",
            json!({"script": writer_script}),
            json!({"env": env}),
        );
        assert_eq!(run["ok"], true, "{run}");
        assert_eq!(
            stdout(&run),
            "ptmx \n",
            "a run sees a terminal in /dev/pts, or wrote to one: {run}"
        );

        // A session of the intruder's does the same from a terminal of its own: its /dev/pts holds
        // that one terminal (which it may write to: it is its own).
        let theirs = shell_as(
            &daemon,
            &intruder,
            "open",
            json!({"argv": ["bash", "--norc", "--noprofile"]}),
            json!({"env": {"TARGETS": targets}}),
        );
        let their_session = theirs["session"]
            .as_u64()
            .unwrap_or_else(|| panic!("{theirs}"));
        // The secret as a pattern that does not spell it, so that the echoed line does not either.
        let hidden_secret = format!(
            "{}[{}]{}",
            &TYPED_SECRET[..1],
            &TYPED_SECRET[1..2],
            &TYPED_SECRET[2..]
        );
        session_send(
            &daemon,
            &intruder,
            their_session,
            &format!(
                "echo \"seen=$(ls -A /dev/pts | tr '\\n' ' ')\"; \
                 for p in $TARGETS; do printf '{FAKE_PROMPT}' 2>/dev/null > \"$p\"; done; \
                 (stty -F {owner_tty} raw -echo; timeout 2 cat {owner_tty}) 2>/dev/null | grep -c '{hidden_secret}'; echo done-$((6*7))\n"
            ),
        );

        // The owner types its secret meanwhile; its session goes on as if nothing happened.
        session_send(&daemon, &owner, session, &format!("{TYPED_SECRET}\n"));
        let typed = session_read_until(&daemon, &owner, session, r"typed=\d+");
        assert!(
            typed.contains(&format!("typed={}", TYPED_SECRET.len())),
            "{typed}"
        );
        let seen_by_intruder = session_read_until(&daemon, &intruder, their_session, r"done-42");
        assert!(
            seen_by_intruder
                .lines()
                .any(|line| line.trim_end() == "seen=0 ptmx"),
            "the intruder's session sees more than its own terminal: {seen_by_intruder}"
        );
        assert!(
            !seen_by_intruder.contains(TYPED_SECRET),
            "{seen_by_intruder}"
        );

        session_send(&daemon, &owner, session, "echo still-$((40+2))\n");
        let after = session_read_until(&daemon, &owner, session, r"still-42");
        let screen = shell_as(
            &daemon,
            &owner,
            "screen",
            json!({"session": session}),
            json!({}),
        );
        for (what, text) in [
            ("read", after.as_str()),
            ("read", typed.as_str()),
            ("screen", &screen.to_string()),
        ] {
            assert!(
                !text.contains("[sudo]"),
                "a fake prompt reached the owner's {what}: {text}"
            );
        }

        // The job heard nothing of it.
        std::fs::write(&stop, b"").unwrap();
        let result = shell_as(
            &daemon,
            &intruder,
            "job",
            json!({"op": "result", "id": job_id, "wait_ms": 30000}),
            json!({}),
        );
        assert_eq!(result["ok"], true, "{result}");
        let heard = stdout(&result);
        assert!(heard.starts_with("ptmx \nlistening\n"), "{result}");
        assert!(
            !heard.contains(TYPED_SECRET),
            "the job read the owner's secret: {result}"
        );

        // Nor did anything reach the person's terminal.
        let mut buf = [0u8; 4096];
        let reached = std::io::Read::read(&mut person, &mut buf).unwrap_or(0);
        assert_eq!(
            String::from_utf8_lossy(&buf[..reached]),
            "",
            "something was written to the person's terminal {person_tty}"
        );
    }
}

/// The script that tries, from a run of a root daemon, what would reach beyond containment:
/// each attempt prints `name refused ERRNO`, or `name WORKED`.
const KERNEL_ATTACKS: &str = r#"
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, act):
    try:
        if act() == -1:
            print(name, "refused", errno.errorcode[ctypes.get_errno()])
        else:
            print(name, "WORKED")
    except OSError as err:
        print(name, "refused", errno.errorcode.get(err.errno, err.errno))
def rewrite(path):
    # The current value written back: harmless where it would succeed.
    with open(path) as f:
        value = f.read()
    with open(path, "w") as f:
        f.write(value)
def open_for_writing(path):
    os.close(os.open(path, os.O_WRONLY))
attempt("core_pattern", lambda: rewrite("/proc/sys/kernel/core_pattern"))
attempt("sysctl", lambda: rewrite("/proc/sys/vm/swappiness"))
attempt("sysrq", lambda: open_for_writing("/proc/sysrq-trigger"))
attempt("sys", lambda: open_for_writing("/sys/kernel/rcu_expedited"))
attempt("module", lambda: libc.init_module(None, ctypes.c_ulong(0), b""))
attempt("raw_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None))
attempt("ptrace_init", lambda: libc.ptrace(16, 1, None, None))
attempt("ptrace_daemon", lambda: libc.ptrace(16, int(sys.argv[1]), None, None))
attempt("hostname", lambda: libc.sethostname(b"taken", ctypes.c_size_t(5)))
"#;

/// Refusals a root daemon's run must meet in `KERNEL_ATTACKS`, in order. A kernel built
/// without magic SysRq has no `/proc/sysrq-trigger` (ENOENT), one without loadable modules no
/// `init_module` (ENOSYS): the attack cannot work there either.
fn kernel_refused() -> String {
    let sysrq = if Path::new("/proc/sysrq-trigger").exists() {
        "EROFS"
    } else {
        "ENOENT"
    };
    let module = if Path::new("/proc/modules").exists() {
        "EPERM"
    } else {
        "ENOSYS"
    };
    format!(
        "core_pattern refused EROFS\nsysctl refused EROFS\nsysrq refused {sysrq}\n\
         sys refused EROFS\nmodule refused {module}\nraw_socket refused EPERM\n\
         mount refused EPERM\nptrace_init refused EPERM\nptrace_daemon refused ESRCH\n\
         hostname refused EPERM\n"
    )
}

/// A run's capability sets and no_new_privs, as its /proc/self/status says.
const PRIVILEGES: &str =
    "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status | tr -s '\\t ' ' '";
const NO_PRIVILEGES: &str = "CapInh: 0000000000000000\nCapPrm: 0000000000000000\n\
    CapEff: 0000000000000000\nCapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\n";

/// A root daemon's runs (the harness runs as root) hold no capability and cannot change the
/// kernel: core_pattern, sysctl, sysrq, /sys, module loading, raw sockets, mount, ptrace and
/// the host name are all refused, and the machine's disks and consoles are not in their /dev;
/// while a run still writes root's files, talks over the network and runs programs.
#[test]
fn a_root_daemons_runs_are_no_stronger_than_a_users() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs the suite to run as root"
    );
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let core_pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let attacks = daemon.shell_run_json(
        &json!({"script": format!(
            "{PRIVILEGES}; python3 -c \"$ATTACKS\" {}", daemon.pid()
        )}),
        &json!({"env": {"ATTACKS": KERNEL_ATTACKS}}),
    );
    assert_eq!(attacks["ok"], true, "{attacks}");
    assert_eq!(
        stdout(&attacks),
        format!("{NO_PRIVILEGES}{}", kernel_refused()),
        "{attacks}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        core_pattern
    );

    // Ordinary work beside it: root's own files, a program, the network over loopback.
    let work = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Devices root owns: the machine's disks, consoles and the kernel log. A run as uid 0 could
    // open each by its mode, capabilities or not; its own /dev holds none of them.
    use std::os::unix::fs::FileTypeExt;
    let mut devices: Vec<String> = std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let kind = entry.file_type().ok()?;
            let name = entry.file_name().to_string_lossy().into_owned();
            (kind.is_block_device()
                || ["console", "kmsg", "tty1", "mem", "port"].contains(&name.as_str()))
            .then(|| format!("/dev/{name}"))
        })
        .collect();
    devices.sort();
    assert!(devices.iter().any(|d| d == "/dev/console"), "{devices:?}");
    let device_attack = daemon.shell_run_json(
        &json!({"script": r#"for d in $DEVICES; do
              head -c 1 "$d" >/dev/null 2>&1 && echo "read $d";
              printf x 2>/dev/null >> "$d" && echo "wrote $d";
            done; ls -A /dev | tr '\n' ' '"#}),
        &json!({"env": {"DEVICES": devices.join(" ")}}),
    );
    let listed = stdout(&device_attack);
    assert!(
        !listed.contains("read ") && !listed.contains("wrote "),
        "{device_attack}"
    );
    let allowed = [
        "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "mqueue", "dri",
        "snd", "fd", "stdin", "stdout", "stderr",
    ];
    for entry in listed.split_whitespace() {
        assert!(
            allowed.contains(&entry),
            "the run's /dev holds {entry}: {device_attack}"
        );
    }
    assert!(
        listed.contains("null") && listed.contains("pts"),
        "{device_attack}"
    );

    let ordinary = daemon.shell_run_json(
        &json!({"script": r#"id -u; echo note > "$WORK/notes.txt" && cat "$WORK/notes.txt";
            python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5); s.sendall(b'hello'); s.close(); print('sent')" "$PORT""#}),
        &json!({"env": {"WORK": work.path(), "PORT": port.to_string()}}),
    );
    assert_eq!(stdout(&ordinary), "0\nnote\nsent\n", "{ordinary}");
    let (mut peer, _) = listener.accept().unwrap();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut peer, &mut got).unwrap();
    assert_eq!(got, "hello");
}

/// A write to a hidden path fails with an error, never vanishing into a mask: the config, a
/// file in the state dir, the sockets' directory.
#[test]
fn writes_to_hidden_paths_fail_loudly() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    let config_before = sha256_of(&daemon.config);
    let attack = run(
        &daemon,
        r#"printf '[defaults]\nact = "allow"\n' > "$CFG" && echo config-written;
           printf x >> "$CFG" && echo config-appended;
           touch "$STATE/planted" && echo state-written;
           touch "$SOCK_DIR/planted" && echo sockets-written;
           wc -c < "$CFG""#,
        json!({
            "CFG": daemon.config,
            "STATE": daemon.state,
            "SOCK_DIR": daemon.socket.parent().unwrap(),
        }),
    );
    assert_eq!(
        stdout(&attack),
        "0\n",
        "a write to a hidden path succeeded, or the masked config is not empty: {attack}"
    );
    assert_eq!(attack["ok"], true, "{attack}");
    let errors = attack["stderr"].as_str().unwrap_or_default();
    assert_eq!(
        errors.matches("Read-only file system").count(),
        4,
        "each write says why it failed: {attack}"
    );
    assert_eq!(sha256_of(&daemon.config), config_before, "config changed");
    assert!(!daemon.state.join("planted").exists());
    // An ordinary write beside them succeeds.
    let work = tempfile::tempdir().unwrap();
    let ordinary = run(
        &daemon,
        r#"printf ok > "$WORK/file" && cat "$WORK/file""#,
        json!({"WORK": work.path()}),
    );
    assert_eq!(stdout(&ordinary), "ok", "{ordinary}");
}

/// Login files a test home holds before its daemon starts, with what they hold.
const LOGIN_FILES: &[(&str, &str)] = &[
    (".bashrc", "# the person's bashrc\n"),
    (".profile", "# the person's profile\n"),
    (
        ".ssh/authorized_keys",
        "ssh-ed25519 AAAAthepersons person@desk\n",
    ),
];

/// What an agent plants to run at the person's next login, terminal or desktop session, each a
/// line of shell run on its own; none may take effect.
const PLANTED_FOR_LATER: &[&str] = &[
    "echo '(printf \"a\\n\" | computer approve) &' >> ~/.bashrc",
    "printf 'computer approve\\n' > ~/.profile",
    "mkdir -p ~/.config/autostart && printf '[Desktop Entry]\\nExec=computer approve\\n' > ~/.config/autostart/x.desktop",
    "mkdir -p ~/.config/systemd/user && printf '[Service]\\nExecStart=computer approve\\n' > ~/.config/systemd/user/x.service",
    "printf '[Desktop Entry]\\nExec=computer approve\\n' > ~/.local/share/applications/x.desktop",
    "echo 'ssh-ed25519 AAAAtheagents agent@run' >> ~/.ssh/authorized_keys",
    "mkdir -p ~/.config/environment.d && echo 'PATH=/tmp/agent' > ~/.config/environment.d/x.conf",
    "rm -f ~/.bashrc && echo planted > ~/.bashrc",
    "ln -sf ~/.bashrc ~/innocent.txt && { echo planted >> ~/innocent.txt; r=$?; rm -f ~/innocent.txt; exit $r; }",
    "mv ~/.config ~/.config-moved && mkdir -p ~/.config/autostart && echo planted > ~/.config/autostart/x.desktop",
    "mv ~/.ssh ~/.ssh-moved && mkdir ~/.ssh && echo planted > ~/.ssh/authorized_keys",
    "echo '* * * * * computer approve' | crontab -",
    "test -d /var/spool/cron && mkdir -p /var/spool/cron/crontabs && echo '* * * * * computer approve' > /var/spool/cron/crontabs/root",
    "echo 'computer approve' >> /etc/profile.d/computer-planted.sh",
    "echo 'computer approve' >> /etc/bash.bashrc",
];

/// Every file under `dir` with its content, in order: what a run may have changed there.
fn tree_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            let content = std::fs::read(&path).unwrap_or_default();
            found.push((path.display().to_string(), content));
        }
    }
    found.sort();
    found
}

/// A home directory of the test's own, holding [`LOGIN_FILES`], and a daemon whose runs have it
/// as their HOME. (Never the machine's own home: a run that got through would change it.)
fn daemon_with_home(config: &str) -> (Daemon, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    for (name, text) in LOGIN_FILES {
        let path = home.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let daemon = Daemon::start_with_env(
        config,
        &[("HOME", home.path().display().to_string())],
        &["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"],
    );
    (daemon, home)
}

#[test]
fn nothing_a_run_plants_runs_at_the_next_login_while_ordinary_writes_succeed() {
    let (daemon, home) = daemon_with_home(ALLOW_SHELL);
    // Once containment is proven (the first run waits for it), which makes the login
    // directories that were missing.
    assert_eq!(run(&daemon, "true", json!({}))["ok"], true);
    let before = tree_of(home.path());
    let system = ["/etc/profile.d", "/etc/bash.bashrc", "/var/spool"];
    let system_before: Vec<_> = system.iter().map(|p| tree_of(Path::new(p))).collect();
    let bashrc_before = std::fs::metadata("/etc/bash.bashrc").map(|m| m.len()).ok();
    // Each path is hidden from policy (which would ask the person about a call that names a
    // login file): here containment alone must hold.
    let mut script = String::new();
    for attack in PLANTED_FOR_LATER {
        let hidden = (attack.replace("~/", "$H/"))
            .replace("/etc/", "$E/")
            .replace("/var/spool/", "$V/");
        script.push_str(&format!(
            "( {hidden} ) 2>/dev/null && echo 'planted: {}'\n",
            hidden.replace('\'', "")
        ));
    }
    script.push_str("echo 'the agent was here' > ~/notes.txt && cat ~/notes.txt\n");
    let env = json!({"H": home.path(), "E": "/etc", "V": "/var/spool"});
    let reply = run(&daemon, &script, env);
    assert_eq!(
        stdout(&reply),
        "the agent was here\n",
        "an attack took effect, or the ordinary write failed: {reply}"
    );
    let mut after = tree_of(home.path());
    let notes = home.path().join("notes.txt").display().to_string();
    assert!(
        after.contains(&(notes.clone(), b"the agent was here\n".to_vec())),
        "the ordinary write did not reach the home: {after:?}"
    );
    after.retain(|(path, _)| *path != notes);
    assert_eq!(after, before, "the home's login files changed");
    for (path, tree) in system.iter().zip(&system_before) {
        assert_eq!(&tree_of(Path::new(path)), tree, "{path} changed");
    }
    assert_eq!(
        std::fs::metadata("/etc/bash.bashrc").map(|m| m.len()).ok(),
        bashrc_before
    );
}

#[test]
fn a_login_file_the_config_names_stays_writable() {
    let (daemon, home) = daemon_with_home(&format!(
        "{ALLOW_SHELL}\n[containment]\nlogin_files_writable = [\"~/.bashrc\"]\n"
    ));
    let reply = run(
        &daemon,
        "echo 'alias ll=\"ls -l\"' >> ~/.bashrc && echo written; echo x >> \"$H/.profile\" || echo refused",
        json!({"H": home.path()}),
    );
    assert_eq!(stdout(&reply), "written\nrefused\n", "{reply}");
    assert!(
        std::fs::read_to_string(home.path().join(".bashrc"))
            .unwrap()
            .ends_with("alias ll=\"ls -l\"\n")
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join(".profile")).unwrap(),
        "# the person's profile\n"
    );
}

#[test]
fn a_call_that_names_a_login_file_is_asked_and_a_yes_opens_it_for_that_run_alone() {
    let (daemon, home) = daemon_with_home(ALLOW_SHELL);
    let bashrc = home.path().join(".bashrc");
    let before = std::fs::read_to_string(&bashrc).unwrap();
    // An ordinary call beside it is not asked: the rule allows it.
    let ordinary = daemon.shell_run_json(
        &json!({"script": "echo fine > ~/notes.txt && cat ~/notes.txt"}),
        &json!({}),
    );
    assert_eq!(stdout(&ordinary), "fine\n", "{ordinary}");
    // Named plainly, the login file is asked of the person, with the reason, though a rule
    // allows every shell run.
    let asking = {
        let socket_daemon = &daemon;
        std::thread::scope(|scope| {
            let call = scope.spawn(|| {
                socket_daemon.shell_run_json(
                    &json!({"script": "echo 'alias ll=\"ls -l\"' >> ~/.bashrc && echo written"}),
                    &json!({}),
                )
            });
            let pending = wait_for("the login file's request", Duration::from_secs(20), || {
                (daemon.pending_approvals().into_iter()).find(|r| {
                    r["rule"]
                        .as_str()
                        .is_some_and(|rule| rule.contains("login-file"))
                })
            });
            let rule = pending["rule"].as_str().unwrap();
            assert!(
                rule.contains("~/.bashrc") && rule.contains("next login"),
                "the reason is shown: {pending}"
            );
            let yes = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
            assert!(yes.status.success(), "{}{}", yes.stdout, yes.stderr);
            call.join().unwrap()
        })
    };
    assert_eq!(stdout(&asking), "written\n", "{asking}");
    let after = std::fs::read_to_string(&bashrc).unwrap();
    assert_eq!(after, format!("{before}alias ll=\"ls -l\"\n"));
    let result = daemon.receipt_row(&asking["receipt"], "result");
    assert_eq!(
        result["body"]["sandbox"]["login_files_writable"][0],
        bashrc.display().to_string(),
        "{result}"
    );
    // The yes was for that run: the next, with the path hidden from policy, finds it
    // read-only again.
    let later = run(
        &daemon,
        "echo planted >> \"$H/.bashrc\" 2>/dev/null && echo planted || echo refused",
        json!({"H": home.path()}),
    );
    assert_eq!(stdout(&later), "refused\n", "{later}");
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), after);
}

#[test]
fn a_root_daemons_run_has_no_keyring_calls_and_cannot_reach_roots_keys() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL);
    // A key of root's own, in root's user keyring, which every root process's `@u` names.
    let keyctl = |args: &[&str]| {
        let out = std::process::Command::new("keyctl")
            .args(args)
            .output()
            .expect("keyctl (package keyutils)");
        assert!(out.status.success(), "keyctl {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let serial = keyctl(&["add", "user", "computer-root-secret", "roots-value", "@u"]);
    let reply = run(
        &daemon,
        r#"keyctl print "$KEY" 2>/dev/null && echo READ;
           keyctl add user computer-planted-key agents-value @u 2>/dev/null && echo PLANTED;
           keyctl link "$KEY" @s 2>/dev/null && echo LINKED;
           keyctl show @u >/dev/null 2>&1 && echo SHOWN;
           keyctl add user own-key v @s 2>&1 | grep -c 'not permitted';
           echo ordinary work"#,
        json!({ "KEY": serial }),
    );
    keyctl(&["unlink", &serial, "@u"]);
    assert_eq!(stdout(&reply), "1\nordinary work\n", "{reply}");
    let search = std::process::Command::new("keyctl")
        .args(["search", "@u", "user", "computer-planted-key"])
        .output()
        .unwrap();
    assert!(
        !search.status.success(),
        "the run's key reached root's keyring"
    );
}

#[test]
fn a_session_a_run_opens_ends_with_the_run() {
    let daemon = Daemon::start_with_config(&format!(
        "{ALLOW_SHELL}\n[tools]\nallow = [\"shell.open\"]\n"
    ));
    let reply = daemon.shell_run_json(
        &json!({"script": "computer call shell open --json --args '{\"argv\": [\"sleep\", \"3097\"]}'"}),
        &json!({"tools": ["shell.open"]}),
    );
    let opened: Value = serde_json::from_str(stdout(&reply).trim()).unwrap_or_else(|err| {
        panic!("{err}: {reply}");
    });
    let session = opened["session"]
        .as_u64()
        .unwrap_or_else(|| panic!("{opened}"));
    wait_for("the run's session to end", Duration::from_secs(20), || {
        processes_with("sleep 3097").is_empty().then_some(())
    });
    let read = daemon.call_json("shell", "read", &json!({"session": session}).to_string());
    assert!(
        read.to_string().contains("the run that opened it ended"),
        "{read}"
    );
    // A session opened outside any run stays open after its call.
    let own = daemon.call_json("shell", "open", r#"{"argv": ["sleep", "3098"]}"#);
    assert_eq!(own["ok"], true, "{own}");
    wait_for("the agent's own session", Duration::from_secs(20), || {
        (!processes_with("sleep 3098").is_empty()).then_some(())
    });
    let own_id = own["session"].clone();
    let closed = daemon.call_json("shell", "close", &json!({"session": own_id}).to_string());
    assert_eq!(closed["ok"], true, "{closed}");
}
