//! Approvals that cannot be answered stale, against the real daemon: request ids are never reused
//! across a restart, an answer naming another request decides nothing, a request leaves with its
//! agent, the time left counts down, and a waiting client keeps hearing progress. What approvers
//! are shown: every value of what will run, exactly, with misleading characters escaped and
//! flagged (`approvals list`, `--json`, `computer approve`), and a desktop notification of each
//! new request on a real session bus that never holds anything up.

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, shell_run, touch_task, wait_for};
use serde_json::{Value, json};

const ASK_ACTS: &str = "[defaults]\nact = \"ask\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_id_from_before_a_restart_approves_nothing() {
    let mut daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("asked-before-the-restart");
    daemon.touch_until_the_daemon_dies(&before);
    let old = tokio::task::block_in_place(|| daemon.pending_for(&before));
    let old_id = old["id"].as_u64().unwrap();

    daemon.stop_with(libc::SIGKILL);
    daemon.restart();

    let after = dir.path().join("asked-after-the-restart");
    let call = touch_task(&daemon, &after);
    let new = tokio::task::block_in_place(|| daemon.pending_for(&after));
    let new_id = new["id"].as_u64().unwrap();
    assert!(new_id > old_id, "ids continue: {old_id} then {new_id}");

    // A person (or a script) who noted the old id answers it: nothing is approved.
    let stale = daemon.cli(&["approvals", "allow", &old_id.to_string()]);
    assert!(!stale.status.success(), "{}", stale.stdout);
    assert!(
        stale
            .stderr
            .contains(&format!("no pending request with id {old_id}")),
        "{}",
        stale.stderr
    );
    // The right id with the old request's receipt: not the request that person saw.
    let mismatched = daemon.cli(&[
        "approvals",
        "allow",
        &new_id.to_string(),
        "--expect",
        old["receipt"].as_str().unwrap(),
    ]);
    assert!(!mismatched.status.success(), "{}", mismatched.stdout);
    assert!(
        mismatched.stderr.contains("not the one you were shown"),
        "{}",
        mismatched.stderr
    );
    assert!(!after.exists() && !before.exists());
    let still = daemon.pending_approvals();
    assert_eq!(still.len(), 1, "{still:?}");
    assert_eq!(
        (&still[0]["id"], &still[0]["receipt"]),
        (&new["id"], &new["receipt"]),
        "the new request still waits"
    );

    // The ordinary answer, naming the request it was shown, goes through.
    let allowed = daemon.cli(&[
        "approvals",
        "allow",
        &new_id.to_string(),
        "--expect",
        new["receipt"].as_str().unwrap(),
    ]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["receipt"], new["receipt"]);
    assert!(after.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_naming_another_request_is_refused_and_the_terminal_names_its_own() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("answered-in-the-terminal");
    let call = touch_task(&daemon, &file);
    let pending = tokio::task::block_in_place(|| daemon.pending_for(&file));

    // What a stale window or terminal would send: the right id, another request's receipt.
    let refused = tokio::task::block_in_place(|| {
        daemon.control_request(
            &json!({"op": "decide", "id": pending["id"], "answer": "allow_once",
                    "via": "window", "expect": "0190aaaa-0000-7000-8000-000000000000"}),
        )
    });
    assert_eq!(refused["ok"], false, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("not the one you were shown"), "{error}");
    assert!(
        error.contains(pending["receipt"].as_str().unwrap()),
        "{error}"
    );
    assert!(!file.exists());
    assert_eq!(daemon.pending_approvals().len(), 1, "still waiting");

    // The terminal approver shows the request and sends its receipt id with the answer.
    let mut approver = TerminalApprover::start(&daemon);
    tokio::task::block_in_place(|| {
        let text = approver.wait_for_text("allow? [a/s/d]");
        assert!(text.contains(file.to_str().unwrap()), "{text}");
        assert!(text.contains("expires in"), "{text}");
        approver.answer("a");
        approver.wait_for_text("AllowOnce sent");
    });
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["by"]["via"], "terminal");
    approver.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_leaves_with_its_agent_and_a_late_allow_runs_nothing() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("withdrawn");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["touch", file]}), json!({}))}}),
    );
    let pending = tokio::task::block_in_place(|| daemon.pending_for(&file));
    drop(raw);
    tokio::task::block_in_place(|| {
        wait_for(
            "the request to be withdrawn",
            Duration::from_secs(20),
            || daemon.pending_approvals().is_empty().then_some(()),
        )
    });
    let late = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(!late.status.success(), "{}", late.stdout);
    assert!(
        late.stderr.contains("no pending request with id"),
        "{}",
        late.stderr
    );
    let intent = daemon.receipt_row(&pending["receipt"], "intent");
    assert_eq!(intent["body"]["approval"]["outcome"], "denied", "{intent}");
    assert!(!file.exists(), "nothing ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn expires_in_ms_is_the_time_left_now() {
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"60s\"\n"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counting-down");
    let call = touch_task(&daemon, &file);
    let first = tokio::task::block_in_place(|| daemon.pending_for(&file));
    let first_left = first["expires_in_ms"].as_u64().unwrap();
    assert!(first_left <= 60_000, "{first}");
    let later_left = tokio::task::block_in_place(|| {
        wait_for(
            "a later read to show less time left",
            Duration::from_secs(20),
            || {
                let left = daemon.pending_approvals()[0]["expires_in_ms"].as_u64()?;
                (left < first_left).then_some(left)
            },
        )
    });
    assert!(later_left < first_left);
    // The plain-words list says the same.
    let listed = daemon.cli(&["approvals", "list"]).stdout;
    let secs: u64 = listed
        .split("expires in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no time left in {listed}"));
    assert!(secs < 60, "{listed}");
    let id = first["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    assert_eq!(call.await.unwrap()["error"]["code"], "denied");
}

#[test]
fn progress_keeps_coming_for_the_whole_wait() {
    // With a 3 s approval timeout the daemon reminds every 300 ms (timeout / 10; 5 s at most).
    let daemon = Daemon::start_with_config(&format!("{ASK_ACTS}[approval]\ntimeout = \"3s\"\n"));
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "wait"}, "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["true"]}), json!({}))}}),
    );
    let mut progress = Vec::new();
    let reply = loop {
        let message = raw.recv().expect("the connection stays open");
        if message["id"] == 1 {
            break message;
        }
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "wait");
        progress.push(message["params"]["message"].as_str().unwrap().to_string());
    };
    assert!(
        progress.len() >= 3,
        "a notification when the wait began and then periodically: {progress:#?}"
    );
    assert!(
        progress[0].starts_with("waiting for approval"),
        "{progress:#?}"
    );
    assert!(
        progress[1..]
            .iter()
            .all(|m| m.starts_with("still waiting for approval") && m.contains("s left")),
        "{progress:#?}"
    );
    let result = &reply["result"]["structuredContent"];
    assert_eq!(result["error"]["code"], "denied", "{reply}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "{reply}"
    );
}

/// A call crafted to mislead an approver, harmless if it ever ran: a bidi override in the
/// script, a `--force` flag, stdin that reads like a disaster (the script only discards it) and
/// a variable that makes git run a pager of the agent's choosing.
const MISLEADING_SCRIPT: &str = "echo git push --force \u{202e}gnirts; cat >/dev/null";
const MISLEADING_STDIN: &str = "rm -rf $HOME";

fn misleading_call(daemon: &Daemon) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(shell_run(
        json!({"script": MISLEADING_SCRIPT, "stdin": MISLEADING_STDIN}),
        json!({"env": {"GIT_CONFIG_KEY_0": "core.pager"}}),
    ))
}

/// The lines every approver shows for [`misleading_call`] (the terminal's layout).
fn misleading_lines() -> Vec<String> {
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(MISLEADING_STDIN));
    vec![
        "script     | echo git push --force \\u{202e}gnirts; cat >/dev/null".into(),
        "command 1  | echo git push --force \\u{202e}gnirts".into(),
        "command 2  | cat".into(),
        "env GIT_CONFIG_KEY_0 | core.pager".into(),
        format!("stdin (12 bytes, sha256 {sha}) | rm -rf $HOME"),
        "WARNING script: bidi overrides (the text is displayed in another order than it runs): \\u{202e}".into(),
        "WARNING command 1[4]: bidi overrides".into(),
    ]
}

/// `computer approve` on its own process, its output collected as it comes.
struct TerminalApprover {
    child: std::process::Child,
    shown: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl TerminalApprover {
    fn start(daemon: &Daemon) -> TerminalApprover {
        let mut child = daemon
            .command()
            .arg("approve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let shown = Arc::new(Mutex::new(String::new()));
        let mut stdout = child.stdout.take().unwrap();
        let reader = {
            let shown = shown.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = stdout.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    shown
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            })
        };
        TerminalApprover {
            child,
            shown,
            reader: Some(reader),
        }
    }

    /// Everything shown so far, once it holds `text`.
    fn wait_for_text(&self, text: &str) -> String {
        wait_for(
            &format!("the terminal approver to show {text:?}"),
            Duration::from_secs(20),
            || {
                let shown = self.shown.lock().unwrap();
                shown.contains(text).then(|| shown.clone())
            },
        )
    }

    fn answer(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    fn finish(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
        self.reader.take().unwrap().join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_approver_shows_what_will_run_exactly_and_flags_what_could_mislead() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    let call = misleading_call(&daemon);

    // `approvals list --json`: structured, every value whole and exact; printed as ASCII, so a
    // terminal showing it cannot be reordered by the override.
    let listed = tokio::task::block_in_place(|| {
        wait_for("the request to be pending", Duration::from_secs(20), || {
            let out = daemon.cli(&["approvals", "list", "--json"]);
            (out.status.success() && out.json()["pending"][0].is_object()).then_some(out)
        })
    });
    assert!(listed.stdout.is_ascii(), "{}", listed.stdout);
    let request = &listed.json()["pending"][0];
    // The same facts policy decided on and the receipt records, every value whole.
    let will_run = &request["will_run"]["facts"];
    assert_eq!(will_run["script"], MISLEADING_SCRIPT, "{request}");
    assert_eq!(
        will_run["programs"],
        json!([
            ["echo", "git", "push", "--force", "\u{202e}gnirts"],
            ["cat"]
        ])
    );
    assert_eq!(will_run["env"], json!({"GIT_CONFIG_KEY_0": "core.pager"}));
    assert_eq!(will_run["stdin"]["text"], MISLEADING_STDIN);
    assert_eq!(will_run["stdin"]["bytes"], 12);
    assert_eq!(
        request["warnings"][0],
        json!({"field": "script", "concern": "bidi", "chars": ["\\u{202e}"]})
    );
    assert!(
        !request["action"].as_str().unwrap().contains('\u{202e}'),
        "{request}"
    );

    // `approvals list`, for a person: each value on its own line, escaped and flagged.
    let text = daemon.cli(&["approvals", "list"]).stdout;
    assert!(!text.contains('\u{202e}'), "{text}");
    for line in misleading_lines() {
        assert!(text.contains(&line), "{line:?} missing from\n{text}");
    }

    // `computer approve` shows the same, then denies on `d`.
    let mut approver = TerminalApprover::start(&daemon);
    tokio::task::block_in_place(|| {
        let shown = approver.wait_for_text("allow? [a/s/d]");
        assert!(!shown.contains('\u{202e}'), "{shown}");
        for line in misleading_lines() {
            assert!(shown.contains(&line), "{line:?} missing from\n{shown}");
        }
        approver.answer("d");
        approver.wait_for_text("Deny sent");
    });
    let out = call.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    approver.finish();
    // One shape: the facts the person was shown are those the intent receipt records, but for
    // stdin, which the receipt keeps as its size, digest and head.
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    let mut shown_facts = request["will_run"]["facts"].clone();
    let stdin = shown_facts["stdin"].as_object_mut().unwrap();
    assert_eq!(stdin.remove("text").unwrap(), MISLEADING_STDIN);
    assert_eq!(intent["body"]["facts"], shown_facts, "{intent}");

    // `sh` reading a script on stdin: the argv word for word, and what stdin will run. (HOME
    // points nowhere, so even a run by mistake would remove nothing.)
    let call = daemon.call_task(shell_run(
        json!({"argv": ["sh"], "stdin": MISLEADING_STDIN}),
        json!({"env": {"HOME": "/nonexistent-home-of-a-test"}}),
    ));
    let text = tokio::task::block_in_place(|| {
        wait_for("the request to be listed", Duration::from_secs(20), || {
            let out = daemon.cli(&["approvals", "list"]).stdout;
            out.contains("argv[0]").then_some(out)
        })
    });
    for want in [
        "argv[0]    | sh\n",
        // The shell reading its stdin comes before the commands it runs there.
        "command 1  | sh\n",
        "command 2  | rm -rf $HOME\n",
        "env HOME   | /nonexistent-home-of-a-test",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    let id = daemon.pending_approvals()[0]["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    assert_eq!(call.await.unwrap()["error"]["code"], "denied");

    // An ordinary call is shown plainly, without warnings, and still answered.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    let call = touch_task(&daemon, &file);
    let pending = tokio::task::block_in_place(|| daemon.pending_for(&file));
    assert!(pending.get("warnings").is_none(), "{pending}");
    assert_eq!(pending["will_run"]["facts"]["argv"], json!(["touch", file]));
    let text = daemon.cli(&["approvals", "list"]).stdout;
    assert!(
        text.contains("argv[0]    | touch") && !text.contains("WARNING"),
        "{text}"
    );
    let allowed = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    assert_eq!(call.await.unwrap()["ok"], true);
    assert!(file.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_look_alike_command_or_flag_is_flagged_and_a_long_value_says_where_the_rest_is() {
    let daemon = Daemon::start_with_config(ASK_ACTS);
    // Cyrillic `е` in the program, a fullwidth hyphen-minus in the flag, and a long argument.
    let long = "x".repeat(5000);
    let socket = daemon.socket.clone();
    let argv = json!(["\u{0435}cho", "\u{ff0d}-force", long]);
    let call = tokio::spawn(async move {
        let client = computer_ipc::Client::connect(&socket).await.unwrap();
        let result = client
            .call_raw(shell_run(json!({"argv": argv}), json!({})))
            .await;
        client.close().await;
        result.map(|r| computer_tests::structured(&r)).ok()
    });
    let text = tokio::task::block_in_place(|| {
        wait_for("the request to be listed", Duration::from_secs(20), || {
            let out = daemon.cli(&["approvals", "list"]).stdout;
            out.contains("argv[0]").then_some(out)
        })
    });
    for want in [
        "argv[0]    | \\u{435}cho",
        "argv[1]    | \\u{ff0d}-force",
        "WARNING argv[0]: look-alike characters",
        "WARNING argv[1]: look-alike characters",
        "[cut here: 3000 more characters not shown; the whole value is in `computer approvals list --json`]",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    let request = &daemon.pending_approvals()[0];
    assert_eq!(
        request["will_run"]["facts"]["argv"][2]
            .as_str()
            .unwrap()
            .len(),
        5000
    );
    let denied = daemon.cli(&["approvals", "deny", &request["id"].to_string()]);
    assert!(denied.status.success(), "{}", denied.stderr);
    let out = call.await.unwrap().expect("a reply");
    assert_eq!(out["error"]["code"], "denied", "{out}");
}

/// A private session bus with a freedesktop notification server on it that records every
/// `Notify` call (or, with `hang`, never answers one).
struct NotificationServer {
    address: String,
    calls: Arc<Mutex<Vec<(String, String, String)>>>,
    closed: Arc<Mutex<Vec<u32>>>,
    _bus: std::process::Child,
    _connection: zbus::Connection,
}

struct Recorder {
    calls: Arc<Mutex<Vec<(String, String, String)>>>,
    closed: Arc<Mutex<Vec<u32>>>,
    hang: bool,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Recorder {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &self,
        app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        self.calls.lock().unwrap().push((app_name, summary, body));
        if self.hang {
            std::future::pending::<()>().await;
        }
        // The service's id for the notification, as a real server numbers them.
        41 + self.calls.lock().unwrap().len() as u32
    }

    async fn close_notification(&self, id: u32) {
        self.closed.lock().unwrap().push(id);
    }
}

impl NotificationServer {
    async fn start(hang: bool) -> NotificationServer {
        use std::io::BufRead;
        let mut bus = std::process::Command::new("dbus-daemon");
        bus.args(["--session", "--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut bus = computer_tests::desktop::spawn_tied(bus);
        let mut address = String::new();
        std::io::BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .expect("dbus-daemon prints its address");
        let address = address.trim().to_string();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder {
            calls: calls.clone(),
            closed: closed.clone(),
            hang,
        };
        let connection = zbus::connection::Builder::address(address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .serve_at("/org/freedesktop/Notifications", recorder)
            .unwrap()
            .build()
            .await
            .expect("the notification server on the private bus");
        NotificationServer {
            address,
            calls,
            closed,
            _bus: bus,
            _connection: connection,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_request_is_announced_on_the_desktop_without_its_secrets() {
    let server = NotificationServer::start(false).await;
    let daemon = Daemon::start_with(
        ASK_ACTS,
        &[("DBUS_SESSION_BUS_ADDRESS", server.address.clone())],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token-s3cr3t");
    let call = daemon.call_task(shell_run(
        json!({"argv": ["touch", file], "stdin": "password=hunter2"}),
        json!({"env": {"API_KEY": "k3y-value"}}),
    ));
    let pending = tokio::task::block_in_place(|| daemon.pending_for(&file));
    let (app, summary, body) = tokio::task::block_in_place(|| {
        wait_for("the Notify call", Duration::from_secs(20), || {
            server.calls.lock().unwrap().first().cloned()
        })
    });
    assert_eq!(app, "computer");
    assert_eq!(
        summary,
        "computer: agent `default` asks for shell run: touch"
    );
    assert!(
        body.contains(&format!("#{}", pending["id"])) && body.contains("computer approve"),
        "{body}"
    );
    for secret in ["s3cr3t", "hunter2", "k3y-value", "API_KEY"] {
        assert!(
            !summary.contains(secret) && !body.contains(secret),
            "{secret} in {summary} / {body}"
        );
    }
    assert!(
        server.closed.lock().unwrap().is_empty(),
        "still pending, still shown"
    );
    let allowed = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    assert_eq!(call.await.unwrap()["ok"], true);
    assert!(file.exists());
    // Answered: the notification is taken back (the service's id for it was 42).
    tokio::task::block_in_place(|| {
        wait_for("CloseNotification", Duration::from_secs(20), || {
            (*server.closed.lock().unwrap() == [42]).then_some(())
        })
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notification_service_that_never_answers_holds_nothing_up() {
    let server = NotificationServer::start(true).await;
    let daemon = Daemon::start_with(
        ASK_ACTS,
        &[("DBUS_SESSION_BUS_ADDRESS", server.address.clone())],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("still-answered");
    let call = touch_task(&daemon, &file);
    let pending = tokio::task::block_in_place(|| {
        wait_for("the Notify call", Duration::from_secs(20), || {
            (!server.calls.lock().unwrap().is_empty()).then_some(())
        });
        daemon.pending_for(&file)
    });
    // The service holds its answer; the request is listed and answered all the same.
    let allowed = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
    assert!(allowed.status.success(), "{}", allowed.stderr);
    let out = call.await.unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(file.exists());
}
