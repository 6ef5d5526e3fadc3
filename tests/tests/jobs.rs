//! Detached jobs against the real daemon: `complications.detach` answers with a job id at once;
//! the job outlives the client that started it, is followed, waited for (with progress),
//! cancelled with its processes, hidden from other agents, marked interrupted when the daemon
//! dies under it, stopped at shutdown, and its result expires; detach is refused where it is not
//! honoured; a bad id says how to find the right one.
//!
//! Jobs wait for a file the test creates (the job polls for it, the test never sleeps), so the
//! test decides when each ends.

use std::path::Path;
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, processes_started_with, shell_run, wait_for};
use serde_json::{Value, json};

/// A script that prints `started`, waits until `go` exists, prints `finished`.
fn gated_script(go: &Path) -> String {
    format!(
        "echo started; while [ ! -e '{}' ]; do sleep 0.05; done; echo finished",
        go.display()
    )
}

/// Starts `script` detached through `computer call` (a client that leaves once answered).
fn detach(daemon: &Daemon, script: &str) -> Value {
    let reply = daemon.shell_run_json(&json!({"script": script}), &json!({"detach": true}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["status"], "running", "{reply}");
    assert_eq!(
        reply["job"], reply["receipt"],
        "the job's id is its receipt: {reply}"
    );
    reply
}

/// One `shell job` call as the agent `token` names (the default agent without one).
fn job_as(daemon: &Daemon, token: Option<&str>, args: &Value, complications: &Value) -> Value {
    daemon.call_json_as(token, "shell", "job", args, complications)
}

fn job(daemon: &Daemon, args: Value) -> Value {
    job_as(daemon, None, &args, &json!({}))
}

/// Polls `status` until the job has printed at least `bytes` bytes.
fn wait_for_output(daemon: &Daemon, id: &Value, bytes: u64) -> Value {
    wait_for("the job's output", Duration::from_secs(30), || {
        let status = job(daemon, json!({"op": "status", "id": id}));
        (status["output_bytes"].as_u64().unwrap_or(0) >= bytes).then_some(status)
    })
}

#[test]
fn a_detached_run_answers_at_once_and_outlives_its_client() {
    let daemon = Daemon::start();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    // The client that started it has left (`computer call` exits once answered).
    let started = detach(&daemon, &gated_script(&go));
    let id = started["job"].clone();
    let intent = daemon.receipt_row(&id, "intent");
    assert_eq!(
        intent["body"]["args"]["complications"]["detach"], true,
        "{intent}"
    );
    assert!(
        !daemon
            .receipts()
            .iter()
            .any(|r| r["call_id"] == id && r["kind"] == "result"),
        "no result receipt while the job runs"
    );

    let status = wait_for_output(&daemon, &id, "started\n".len() as u64);
    assert_eq!(status["ok"], true, "{status}");
    assert_eq!(status["status"], "running", "{status}");
    assert_eq!(
        (&status["surface"], &status["command"]),
        (&json!("shell"), &json!("run"))
    );
    assert!(status["elapsed_ms"].is_u64(), "{status}");
    let listed = job(&daemon, json!({"op": "list"}));
    assert_eq!(listed["jobs"][0]["job"], id, "{listed}");
    // Asked before the end without waiting, `result` says where the job stands.
    let early = job(&daemon, json!({"op": "result", "id": id}));
    assert_eq!(early["status"], "running", "{early}");
    assert!(early.get("stdout").is_none(), "{early}");

    std::fs::write(&go, "").unwrap();
    let result = job(&daemon, json!({"op": "result", "id": id, "wait_ms": 30000}));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["status"], "done", "{result}");
    assert_eq!(result["job"], id, "{result}");
    assert_eq!(result["stdout"], "started\nfinished\n", "{result}");
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_ne!(result["receipt"], id, "the result call has its own receipt");

    // The job's result receipt was written when it ended; the job calls are receipted too.
    let ended = daemon.receipt_row(&id, "result");
    assert_eq!(ended["body"]["job"]["status"], "done", "{ended}");
    assert_eq!(ended["body"]["ok"], true, "{ended}");
    assert!(ended["body"].get("cancelled").is_none(), "{ended}");
    let asked = daemon.receipt_row(&result["receipt"], "intent");
    assert_eq!(asked["command"], "job", "{asked}");
    assert_eq!(asked["body"]["args"]["args"]["op"], "result", "{asked}");

    // The result again, through this call's own budget.
    let selected = job_as(
        &daemon,
        None,
        &json!({"op": "result", "id": id}),
        &json!({"return": {"select": ["exit_code"]}}),
    );
    assert_eq!(selected["exit_code"], 0, "{selected}");
    assert!(selected.get("stdout").is_none(), "{selected}");
    let done = job(&daemon, json!({"op": "status", "id": id}));
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["output_bytes"], "started\nfinished\n".len(), "{done}");
    daemon.assert_chain_holds();
}

#[test]
fn cancel_stops_the_job_and_every_process_it_started() {
    let daemon = Daemon::start();
    let started = detach(
        &daemon,
        "setsid -f sleep 3411; sleep 3412 & echo started; wait",
    );
    let id = started["job"].clone();
    wait_for("the job's processes", Duration::from_secs(30), || {
        (processes_started_with("sleep 341").len() >= 2).then_some(())
    });
    let cancelled = job(&daemon, json!({"op": "cancel", "id": id}));
    assert_eq!(cancelled["ok"], true, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(
        cancelled["killed_processes"].as_u64().unwrap_or(0) >= 2,
        "{cancelled}"
    );
    wait_for("the job's processes to go", Duration::from_secs(20), || {
        processes_started_with("sleep 341").is_empty().then_some(())
    });
    let ended = daemon.receipt_row(&id, "result");
    assert_eq!(ended["body"]["cancelled"]["by"], "job_cancel", "{ended}");
    assert_eq!(ended["body"]["ok"], false, "{ended}");
    assert_eq!(ended["body"]["job"]["status"], "cancelled", "{ended}");

    let again = job(&daemon, json!({"op": "cancel", "id": id}));
    assert_eq!(again["error"]["code"], "invalid_call", "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not running (cancelled)"),
        "{again}"
    );
    // An ordinary run beside it is untouched.
    let plain = daemon.shell_run_json(&json!({"argv": ["echo", "next"]}), &json!({}));
    assert_eq!(plain["stdout"], "next\n", "{plain}");
}

#[test]
fn another_agent_can_neither_see_nor_cancel_a_job() {
    let daemon = Daemon::start();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let id = detach(&daemon, &gated_script(&go))["job"].clone();
    let intruder = daemon.add_agent("intruder");
    let token = Some(intruder.as_str());

    for op in ["status", "result", "cancel"] {
        let reply = job_as(&daemon, token, &json!({"op": op, "id": id}), &json!({}));
        assert_eq!(reply["ok"], false, "{op}: {reply}");
        assert_eq!(reply["error"]["code"], "invalid_call", "{op}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("no job") && message.contains("`intruder`"),
            "{op}: {reply}"
        );
        assert_eq!(
            reply["error"]["valid"],
            json!(null),
            "nothing of theirs: {reply}"
        );
    }
    let listed = job_as(&daemon, token, &json!({"op": "list"}), &json!({}));
    assert_eq!(listed["jobs"], json!([]), "{listed}");
    // Waiting on someone else's job is refused too, at once.
    let waited = job_as(
        &daemon,
        token,
        &json!({"op": "result", "id": id, "wait_ms": 60000}),
        &json!({}),
    );
    assert_eq!(waited["error"]["code"], "invalid_call", "{waited}");

    // The owner's job ran on untouched.
    let status = job(&daemon, json!({"op": "status", "id": id}));
    assert_eq!(status["status"], "running", "{status}");
    std::fs::write(&go, "").unwrap();
    let result = job(&daemon, json!({"op": "result", "id": id, "wait_ms": 30000}));
    assert_eq!(result["status"], "done", "{result}");
    assert!(
        daemon.receipt_row(&id, "result")["body"]
            .get("cancelled")
            .is_none()
    );
}

#[test]
fn a_job_the_daemon_died_under_reads_interrupted_after_restart() {
    let mut daemon = Daemon::start();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let id = detach(&daemon, &gated_script(&go))["job"].clone();
    wait_for_output(&daemon, &id, 1);
    let script = gated_script(&go);
    assert!(!processes_started_with(&format!("sh -c {script}")).is_empty());
    daemon.stop_with(libc::SIGKILL);
    // The job's processes did not outlive the daemon that ran them.
    wait_for("the job's processes to go", Duration::from_secs(20), || {
        processes_started_with(&format!("sh -c {script}"))
            .is_empty()
            .then_some(())
    });
    daemon.restart();

    let status = job(&daemon, json!({"op": "status", "id": id}));
    assert_eq!(status["ok"], true, "{status}");
    assert_eq!(status["status"], "interrupted", "{status}");
    let result = job(&daemon, json!({"op": "result", "id": id}));
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{result}"
    );
    let ended = daemon.receipt_row(&id, "result");
    assert_eq!(ended["body"]["outcome"], "interrupted", "{ended}");
    daemon.assert_chain_holds();
    // A new job after the restart runs as usual.
    let next = detach(&daemon, "echo again");
    let again = job(
        &daemon,
        json!({"op": "result", "id": next["job"], "wait_ms": 30000}),
    );
    assert_eq!(again["stdout"], "again\n", "{again}");
}

#[test]
fn shutdown_stops_running_jobs_with_their_receipts() {
    let mut daemon = Daemon::start();
    let id = detach(&daemon, "sleep 3431 & echo started; wait")["job"].clone();
    wait_for_output(&daemon, &id, 1);
    let status = daemon.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", daemon.log_text());
    wait_for("the job's processes to go", Duration::from_secs(20), || {
        processes_started_with("sleep 3431")
            .is_empty()
            .then_some(())
    });
    let ended = daemon.receipt_row(&id, "result");
    assert_eq!(ended["body"]["cancelled"]["by"], "shutdown", "{ended}");
    daemon.assert_chain_holds();
}

#[test]
fn waiting_for_a_result_sends_progress_to_a_client_that_asked() {
    let daemon = Daemon::start();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    let (started, _) = raw.call_tool(&shell_run(
        json!({"script": gated_script(&go)}),
        json!({"detach": true}),
    ));
    let id = started["result"]["structuredContent"]["job"].clone();
    assert!(id.is_string(), "{started}");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": {"progressToken": "job"}, "name": "COMPUTER",
        "arguments": {"surface": "shell", "command": "job",
                      "args": {"op": "result", "id": id, "wait_ms": 60000}}}}),
    );
    let mut progress = Vec::new();
    let reply = loop {
        let message = raw.recv().expect("the connection stays open");
        if message["id"] == 2 {
            break message;
        }
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "job");
        progress.push(message["params"]["message"].as_str().unwrap().to_string());
        // Two notifications heard: let the job end.
        if progress.len() == 2 {
            std::fs::write(&go, "").unwrap();
        }
    };
    assert!(progress.len() >= 2, "{progress:#?}");
    assert!(
        progress.iter().all(
            |m| m.starts_with(&format!("job {} running", id.as_str().unwrap()))
                && m.contains("bytes of output")
        ),
        "{progress:#?}"
    );
    let result = &reply["result"]["structuredContent"];
    assert_eq!(result["status"], "done", "{reply}");
    assert_eq!(result["stdout"], "started\nfinished\n", "{reply}");

    // Without a progress token the same wait sends nothing but the reply.
    let (quiet, _) = raw.call_tool(&json!({"surface": "shell", "command": "job",
        "args": {"op": "result", "id": id, "wait_ms": 1000}}));
    assert_eq!(
        quiet["result"]["structuredContent"]["status"], "done",
        "{quiet}"
    );
}

#[test]
fn bad_job_calls_get_errors_that_say_what_would_work() {
    let daemon = Daemon::start();
    let id = detach(&daemon, "echo quick")["job"].clone();

    let unknown = job(&daemon, json!({"op": "status", "id": "not-a-job"}));
    assert_eq!(unknown["error"]["code"], "invalid_call", "{unknown}");
    assert_eq!(unknown["error"]["path"], "args.id", "{unknown}");
    assert_eq!(unknown["error"]["valid"], json!([id]), "{unknown}");
    let message = unknown["error"]["message"].as_str().unwrap();
    assert!(message.contains(r#""op": "list""#), "{unknown}");

    let missing = job(&daemon, json!({"op": "cancel"}));
    assert_eq!(missing["error"]["path"], "args.id", "{missing}");
    assert_eq!(missing["error"]["valid"], json!([id]), "{missing}");

    let bad_op = job(&daemon, json!({"op": "kill", "id": id}));
    assert_eq!(bad_op["error"]["code"], "invalid_call", "{bad_op}");
    assert_eq!(bad_op["error"]["path"], "args.op", "{bad_op}");
    assert!(
        bad_op["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancel"),
        "{bad_op}"
    );

    let wait_on_status = job(&daemon, json!({"op": "status", "id": id, "wait_ms": 5}));
    assert_eq!(
        wait_on_status["error"]["path"], "args.wait_ms",
        "{wait_on_status}"
    );
    let too_long = job(
        &daemon,
        json!({"op": "result", "id": id, "wait_ms": 3_600_000}),
    );
    assert_eq!(too_long["error"]["path"], "args.wait_ms", "{too_long}");
    let detached_job = job_as(
        &daemon,
        None,
        &json!({"op": "list"}),
        &json!({"detach": true}),
    );
    assert_eq!(
        detached_job["error"]["path"], "complications",
        "{detached_job}"
    );

    // Every refusal was receipted, and the daemon still serves the good call.
    let result = job(&daemon, json!({"op": "result", "id": id, "wait_ms": 30000}));
    assert_eq!(result["stdout"], "quick\n", "{result}");
    let refused = daemon.receipt_row(&unknown["receipt"], "result");
    assert_eq!(refused["body"]["ok"], false, "{refused}");
    daemon.assert_chain_holds();
}

#[test]
fn finished_results_expire_and_status_still_tells_the_end() {
    let daemon = Daemon::start_with_config("[jobs]\nkeep_finished = 1\n");
    let first = detach(&daemon, "echo one")["job"].clone();
    let one = job(
        &daemon,
        json!({"op": "result", "id": first, "wait_ms": 30000}),
    );
    assert_eq!(one["stdout"], "one\n", "{one}");
    let second = detach(&daemon, "exit 3")["job"].clone();
    let two = job(
        &daemon,
        json!({"op": "result", "id": second, "wait_ms": 30000}),
    );
    assert_eq!(two["status"], "failed", "{two}");
    assert_eq!(two["exit_code"], 3, "{two}");
    assert_eq!(two["ok"], false, "{two}");

    // Only the newest finished job is kept: the first one's result has expired.
    let expired = job(&daemon, json!({"op": "result", "id": first}));
    assert_eq!(expired["error"]["code"], "unavailable", "{expired}");
    assert!(
        expired["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{expired}"
    );
    let status = job(&daemon, json!({"op": "status", "id": first}));
    assert_eq!(status["status"], "done", "{status}");
    assert_eq!(status["kept"], false, "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_lists_detach_and_the_job_command() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let tools = client.list_tools().await.unwrap();
    let schema = Value::Object((*tools[0].input_schema).clone());
    let commands = schema["properties"]["command"]["enum"].as_array().unwrap();
    assert!(commands.contains(&json!("job")), "{schema}");
    let description = tools[0].description.as_deref().unwrap();
    assert!(
        description.contains("job{op:status|result|cancel|list}"),
        "{description}"
    );
    let reference = computer_tests::help(&client, "shell").await;
    client.close().await;
    assert!(reference.contains("\n- detach:bool"), "{reference}");
    assert!(reference.contains("detach=true"), "{reference}");
}

#[test]
fn detach_is_refused_clearly_where_it_is_not_honoured() {
    let daemon = Daemon::start_on_desktop("");
    let refused = daemon
        .cli(&[
            "call",
            "gui",
            "windows",
            "--json",
            "--complications",
            r#"{"detach": true}"#,
        ])
        .json();
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "unavailable", "{refused}");
    assert_eq!(
        refused["error"]["path"], "complications.detach",
        "{refused}"
    );
    assert_eq!(refused["error"]["valid"], json!(["shell run"]), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not honoured by gui windows"),
        "{refused}"
    );
    let result = daemon.receipt_row(&refused["receipt"], "result");
    assert_eq!(result["body"]["ok"], false, "{result}");
    // A `job` command is not a gui command.
    let no_job = daemon.call_json("gui", "job", r#"{"op": "list"}"#);
    assert_eq!(no_job["error"]["path"], "command", "{no_job}");
    // The same call without detach goes through.
    let windows = daemon.cli(&["call", "gui", "windows", "--json"]).json();
    assert_eq!(windows["ok"], true, "{windows}");
    // And so does a detached shell run beside it, with evidence refused as it cannot apply.
    let with_evidence = daemon.shell_run_json(
        &json!({"argv": ["true"]}),
        &json!({"detach": true, "evidence": "screenshot"}),
    );
    assert_eq!(
        with_evidence["error"]["path"], "complications.evidence",
        "{with_evidence}"
    );
    let plain = detach(&daemon, "echo fine");
    assert_eq!(plain["status"], "running", "{plain}");
}

/// A raw connection whose client declares the MCP tasks extension.
fn tasks_client(daemon: &Daemon) -> (RawConnection, Value) {
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.send(&json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25",
                   "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                   "clientInfo": {"name": "tasks-test", "version": "0"}}
    }));
    let initialized = raw.recv_response(0);
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (raw, initialized)
}

fn tasks_request(raw: &mut RawConnection, id: i64, method: &str, task: &Value) -> Value {
    raw.send(&json!({"jsonrpc": "2.0", "id": id, "method": method,
                     "params": {"taskId": task}}));
    raw.recv_response(id)
}

#[test]
fn a_client_that_declares_tasks_gets_a_detached_call_as_a_task() {
    let daemon = Daemon::start();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let (mut raw, initialized) = tasks_client(&daemon);
    assert!(
        initialized["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{initialized}"
    );
    let (created, _) = raw.call_tool(&shell_run(
        json!({"script": gated_script(&go)}),
        json!({"detach": true}),
    ));
    let task = created["result"]["taskId"].clone();
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    assert!(task.is_string(), "{created}");
    // The task is the job: `job status` and `tasks/get` see the same thing.
    let status = job(&daemon, json!({"op": "status", "id": task}));
    assert_eq!(status["status"], "running", "{status}");

    let working = wait_for("the task's output", Duration::from_secs(30), || {
        let got = tasks_request(&mut raw, 10, "tasks/get", &task);
        let message = got["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (!message.contains(" 0 bytes")).then_some(got)
    });
    assert_eq!(working["result"]["status"], "working", "{working}");
    assert!(
        working["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("bytes of output"),
        "{working}"
    );
    std::fs::write(&go, "").unwrap();
    let mut n = 10;
    let completed = wait_for("the task to complete", Duration::from_secs(30), || {
        n += 1;
        let got = tasks_request(&mut raw, n, "tasks/get", &task);
        (got["result"]["status"] != "working").then_some(got)
    });
    assert_eq!(completed["result"]["status"], "completed", "{completed}");
    let result = &completed["result"]["result"]["structuredContent"];
    assert_eq!(result["stdout"], "started\nfinished\n", "{completed}");
    assert_eq!(result["status"], "done", "{completed}");
    // Each poll was a receipted `job result` call.
    assert!(
        daemon
            .receipts()
            .iter()
            .any(|r| r["command"] == "job" && r["body"]["args"]["args"]["id"] == task),
        "tasks/get leaves receipts"
    );

    // tasks/cancel stops a running one, with its processes.
    let (second, _) = raw.call_tool(&shell_run(
        json!({"script": "sleep 3441 & echo started; wait"}),
        json!({"detach": true}),
    ));
    let second = second["result"]["taskId"].clone();
    wait_for("the task's processes", Duration::from_secs(30), || {
        (!processes_started_with("sleep 3441").is_empty()).then_some(())
    });
    let cancelled = tasks_request(&mut raw, 100, "tasks/cancel", &second);
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    wait_for(
        "the task's processes to go",
        Duration::from_secs(20),
        || {
            processes_started_with("sleep 3441")
                .is_empty()
                .then_some(())
        },
    );
    let after = tasks_request(&mut raw, 101, "tasks/get", &second);
    assert_eq!(after["result"]["status"], "cancelled", "{after}");

    // An unknown task is an error naming it; a call without detach is answered as ever.
    let unknown = tasks_request(&mut raw, 102, "tasks/get", &json!("no-such-task"));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no job `no-such-task`"),
        "{unknown}"
    );
    let (plain, _) = raw.call_tool(&shell_run(json!({"argv": ["echo", "plain"]}), json!({})));
    assert_eq!(
        plain["result"]["structuredContent"]["stdout"], "plain\n",
        "{plain}"
    );
}

#[test]
fn an_agent_cannot_flood_the_daemon_with_jobs() {
    let daemon = Daemon::start_with_config("[jobs]\nmax_running = 2\n");
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let script = gated_script(&go);
    // Six detached calls at once, the way a hostile agent would fire them: two run.
    let replies: Vec<Value> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    daemon.shell_run_json(&json!({"script": script}), &json!({"detach": true}))
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let started: Vec<&Value> = replies.iter().filter(|r| r["ok"] == true).collect();
    assert_eq!(started.len(), 2, "{replies:#?}");
    let refused = replies.iter().find(|r| r["ok"] == false).unwrap();
    assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
    assert_eq!(
        refused["error"]["path"], "complications.detach",
        "{refused}"
    );
    let mut running: Vec<Value> = started.iter().map(|r| r["job"].clone()).collect();
    let mut named = refused["error"]["valid"].as_array().unwrap().clone();
    running.sort_by_key(|v| v.to_string());
    named.sort_by_key(|v| v.to_string());
    assert_eq!(named, running, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_running"),
        "{refused}"
    );
    // Refused before it started: no job of that id, and its receipts say refused.
    let result = daemon.receipt_row(&refused["receipt"], "result");
    assert_eq!(result["body"]["error"]["code"], "rate_limited", "{result}");
    let no_job = job(&daemon, json!({"op": "status", "id": refused["receipt"]}));
    assert_eq!(no_job["error"]["code"], "invalid_call", "{no_job}");

    // Beside it: an attached run, and another agent's job, go through.
    let plain = daemon.shell_run_json(&json!({"argv": ["echo", "attached"]}), &json!({}));
    assert_eq!(plain["stdout"], "attached\n", "{plain}");
    let other = daemon.add_agent("other");
    let mut command = daemon.command();
    let out = command
        .env("COMPUTER_TOKEN", &other)
        .args(computer_tests::shell_run_cli(
            &json!({"script": "echo theirs"}),
            &json!({"detach": true}),
        ))
        .output()
        .unwrap();
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs["status"], "running", "{theirs}");

    // Once the jobs end, the agent may start more.
    std::fs::write(&go, "").unwrap();
    for id in &running {
        let done = job(&daemon, json!({"op": "result", "id": id, "wait_ms": 30000}));
        assert_eq!(done["status"], "done", "{done}");
    }
    let again = detach(&daemon, "echo again");
    assert_eq!(again["status"], "running", "{again}");
}
