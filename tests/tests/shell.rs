//! The shell surface against real processes: argv and scripts, stdin, cwd, env scrubbing, exit
//! codes and signals, deadlines that kill whole process groups, and output floods.

use std::time::{Duration, Instant};

use computer_tests::{Daemon, processes_started_with, shell_run, structured, wait_for};
use serde_json::{Value, json};

async fn run(daemon: &Daemon, args: Value, complications: Value) -> Value {
    let result = daemon
        .call_result_once(shell_run(args, complications))
        .await;
    let value = structured(&result);
    assert_eq!(
        result.is_error,
        Some(value["ok"] != json!(true)),
        "isError mirrors ok: {value}"
    );
    value
}

#[tokio::test(flavor = "multi_thread")]
async fn argv_script_stdin_cwd_env_and_exit_codes() {
    let daemon = Daemon::start();
    let out = run(
        &daemon,
        json!({"argv": ["printf", "%s|%s", "a b", "ü"]}),
        json!({}),
    )
    .await;
    assert_eq!(out["stdout"], "a b|ü");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["ok"], true);
    assert!(
        out.get("timed_out").is_none(),
        "false flags are left out: {out}"
    );

    let out = run(
        &daemon,
        json!({"script": "echo out; echo err >&2; exit 7"}),
        json!({}),
    )
    .await;
    assert_eq!(
        (out["stdout"].as_str(), out["stderr"].as_str()),
        (Some("out\n"), Some("err\n"))
    );
    assert_eq!(out["exit_code"], 7);
    assert_eq!(out["ok"], false);

    let out = run(
        &daemon,
        json!({"argv": ["tr", "a-z", "A-Z"], "stdin": "shout\n"}),
        json!({}),
    )
    .await;
    assert_eq!(out["stdout"], "SHOUT\n");

    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let out = run(&daemon, json!({"argv": ["pwd"]}), json!({"cwd": cwd})).await;
    assert_eq!(
        out["stdout"].as_str().unwrap().trim_end(),
        cwd.to_str().unwrap()
    );

    let out = run(
        &daemon,
        json!({"script": "echo \"$GREETING\""}),
        json!({"env": {"GREETING": "hi there"}}),
    )
    .await;
    assert_eq!(out["stdout"], "hi there\n");

    // A program that does not exist is an action error saying so.
    let out = run(&daemon, json!({"argv": ["no-such-program-xyz"]}), json!({})).await;
    assert_eq!(out["error"]["code"], "action_failed");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("command not found"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn children_get_a_scrubbed_environment() {
    let daemon = Daemon::start();
    let out = run(&daemon, json!({"argv": ["env"]}), json!({})).await;
    let env = out["stdout"].as_str().unwrap();
    assert!(
        !env.contains("COMPUTER_"),
        "daemon variables leaked into a child:\n{env}"
    );
    assert!(
        env.lines().any(|l| l.starts_with("PATH=")),
        "PATH is kept:\n{env}"
    );
    assert!(
        !env.contains("CARGO"),
        "unrelated variables are dropped:\n{env}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn signals_are_reported_by_name() {
    let daemon = Daemon::start();
    let out = run(&daemon, json!({"script": "kill -TERM $$"}), json!({})).await;
    assert_eq!(out["signal"], "SIGTERM", "{out}");
    assert!(out["exit_code"].is_null());
    assert_eq!(out["ok"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_kills_the_whole_group_including_background_grandchildren() {
    let daemon = Daemon::start();
    let script = "sleep 3101 & sleep 3102";
    let started = Instant::now();
    let out = run(
        &daemon,
        json!({"script": script}),
        json!({"timeout_ms": 500}),
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["signal"], "SIGKILL");
    // The shell, its background job and its foreground child.
    assert_eq!(out["killed_processes"], 3, "{out}");
    assert!(
        elapsed < Duration::from_millis(500 + 2000),
        "result came after {elapsed:?}"
    );
    // The run's pids are its own namespace's: the host's /proc is searched by command line.
    wait_for(
        "the background grandchild to die",
        Duration::from_secs(5),
        || processes_started_with("sleep 310").is_empty().then_some(()),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn leftovers_of_a_finished_run_die_with_it() {
    let daemon = Daemon::start();
    let script = "sleep 3201 >/dev/null 2>&1 &";
    let out = run(&daemon, json!({"script": script}), json!({})).await;
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["killed_processes"], 1, "{out}");
    wait_for("the background job to die", Duration::from_secs(5), || {
        processes_started_with("sleep 3201")
            .is_empty()
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escaped_child_holding_the_output_open_does_not_hold_the_reply() {
    // Uncontained, a child that left the run's process group (setsid) outlives it and keeps
    // its stdout open: the reply comes once the run has ended and the output was drained for
    // its grace (1.5 s), with everything written before; not when the child ends (15 s).
    let daemon = Daemon::start_with_config(
        "[[rules]]\nsurface = \"shell\"\ndecision = \"allow\"\n[containment]\nmode = \"off\"\n",
    );
    // The run ends only once the child has its own session (it made the marker after
    // `setsid`): ended before, the run's group would be killed with the child still in it.
    let marker = daemon.root.join("escaped");
    let script = "echo before; setsid -f sh -c 'touch \"$MARKER\"; exec sleep 15.3301'; \
                  while [ ! -e \"$MARKER\" ]; do sleep 0.01; done; echo after >&2";
    let started = Instant::now();
    let out = run(
        &daemon,
        json!({"script": script}),
        json!({"env": {"MARKER": marker}}),
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["stdout"], "before\n", "{out}");
    assert_eq!(out["stderr"], "after\n", "{out}");
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(10),
        "the reply waited for the drain grace and no longer: {elapsed:?}"
    );
    let escaped = processes_started_with("sleep 15.3301");
    for found in &escaped {
        let pid: i32 = found.split(':').next().unwrap().parse().unwrap();
        // SAFETY: a signal to the sleep this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert_eq!(escaped.len(), 1, "uncontained, the escaped child lives on");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_flood_is_capped_in_the_reply_and_in_memory() {
    let daemon = Daemon::start_with_config("[shell]\nspill_limit_bytes = 8388608\n");
    let before = daemon.memory_kib("VmRSS");
    let out = run(
        &daemon,
        json!({"argv": ["yes", "flood"]}),
        json!({"timeout_ms": 3000, "return": {"max_bytes": 1000}}),
    )
    .await;
    assert_eq!(out["timed_out"], true);
    let shown = out["stdout"].as_str().unwrap();
    assert!(
        shown.len() < 1000 + 64,
        "reply carries {} bytes",
        shown.len()
    );
    assert!(
        shown.starts_with("flood\nflood\n") && shown.ends_with("flood\n"),
        "{shown}"
    );
    let cut = &out["cut"]["stdout"];
    let total = cut["bytes"].as_u64().unwrap();
    assert!(total > 8 << 20, "only {total} bytes were produced");
    assert_eq!(cut["shown"].as_u64().unwrap(), 1000);
    let artifact = std::path::PathBuf::from(cut["artifact"].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(&artifact).unwrap().len(),
        8 << 20,
        "spill stops at its limit"
    );

    // Memory stayed bounded: the flood never sat in the daemon's memory.
    let peak = daemon.memory_kib("VmHWM");
    assert!(
        peak < before + 64 * 1024,
        "peak RSS {peak} KiB (was {before} KiB before the flood)"
    );

    // The receipt keeps the size and sha256 of everything, and the artifact's path and hash.
    let rows = daemon.receipts();
    let result = rows
        .iter()
        .find(|r| r["call_id"] == out["receipt"] && r["kind"] == "result")
        .unwrap();
    let stdout = &result["body"]["outputs"][0];
    assert_eq!(stdout["bytes"].as_u64().unwrap(), total);
    assert_eq!(stdout["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(stdout["artifact"]["path"], cut["artifact"]);
    assert_eq!(stdout["artifact"]["truncated"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn budget_modes_and_select_shape_the_reply() {
    let daemon = Daemon::start();
    let script = "seq 1 2000";
    let out = run(
        &daemon,
        json!({"script": script}),
        json!({"return": {"max_bytes": 20, "mode": "tail"}}),
    )
    .await;
    assert!(
        out["stdout"].as_str().unwrap().ends_with("1999\n2000\n"),
        "{out}"
    );
    assert_eq!(out["cut"]["stdout"]["mode"], "tail");
    let out = run(
        &daemon,
        json!({"script": script}),
        json!({"return": {"select": ["exit_code"]}}),
    )
    .await;
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["exit_code", "ok", "receipt"], "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_proceed_in_parallel() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("meet");
    // The first run waits for a line that only the second run writes: they must overlap.
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = client.call_raw(shell_run(
        json!({"argv": ["cat", fifo]}),
        json!({"timeout_ms": 20000}),
    ));
    let writer = client.call_raw(shell_run(
        json!({"script": format!("echo met > {}", fifo.display())}),
        json!({"timeout_ms": 20000}),
    ));
    let (read, wrote) = tokio::join!(reader, writer);
    assert_eq!(structured(&read.unwrap())["stdout"], "met\n");
    assert_eq!(structured(&wrote.unwrap())["ok"], true);
    client.close().await;
}

/// A daemon whose HOME is no directory (a service account's, or one removed) starts runs in `/`,
/// as when HOME is unset, contained or not.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_home_starts_runs_in_the_root_directory() {
    let gone = tempfile::tempdir().unwrap();
    let home = gone.path().join("never-made");
    for config in ["", "[containment]\nmode = \"off\"\n"] {
        let daemon = Daemon::start_with(config, &[("HOME", home.display().to_string())]);
        let out = run(&daemon, json!({"argv": ["pwd"]}), json!({})).await;
        assert_eq!(out["ok"], true, "{config:?}: {out}");
        assert_eq!(out["stdout"], "/\n", "{config:?}: {out}");
    }
}
