//! Receipts under load, crashes and tampering: every call is receipted, the chain verifies, a
//! daemon killed mid-burst leaves nothing unaccounted for, a cut, rewritten or extended ledger is
//! named by `computer receipts verify`, and a run's output cannot outgrow the artifacts quota.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::{Daemon, shell_run, structured, try_wait_for, wait_for};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_clients_fifty_calls_each_all_receipted() {
    let daemon = Daemon::start();
    let mut tasks = Vec::new();
    for client_no in 0..32 {
        let client = daemon.client().await;
        tasks.push(tokio::spawn(async move {
            let mut receipts = Vec::new();
            for call_no in 0..50 {
                let result = client
                    .call_raw(shell_run(
                        json!({"argv": ["echo", format!("{client_no}-{call_no}")]}),
                        json!({}),
                    ))
                    .await
                    .expect("call");
                let out = structured(&result);
                assert_eq!(out["stdout"], format!("{client_no}-{call_no}\n"));
                receipts.push(out["receipt"].as_str().unwrap().to_string());
            }
            client.close().await;
            receipts
        }));
    }
    let mut replied = HashSet::new();
    for task in tasks {
        replied.extend(task.await.unwrap());
    }
    assert_eq!(replied.len(), 32 * 50);

    let rows = daemon.receipts();
    assert_eq!(rows.len(), 2 * 32 * 50);
    let results: HashSet<&str> = rows
        .iter()
        .filter(|r| r["kind"] == "result" && r["body"]["ok"] == true)
        .map(|r| r["call_id"].as_str().unwrap())
        .collect();
    assert!(replied.iter().all(|id| results.contains(id.as_str())));
    assert_eq!(daemon.assert_chain_holds()["rows"], 3200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_burst_leaves_a_verifiable_chain_and_no_loose_ends() {
    let mut daemon = Daemon::start();
    let replied: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = daemon.client().await;
        let replied = replied.clone();
        tasks.push(tokio::spawn(async move {
            // Runs until the daemon dies under it.
            while let Ok(result) = client
                .call_raw(shell_run(json!({"script": "echo burst"}), json!({})))
                .await
            {
                let out = structured(&result);
                replied
                    .lock()
                    .unwrap()
                    .push(out["receipt"].as_str().unwrap().to_string());
            }
        }));
    }
    let progress = replied.clone();
    tokio::task::spawn_blocking(move || {
        wait_for("200 replies", Duration::from_secs(60), || {
            (progress.lock().unwrap().len() >= 200).then_some(())
        })
    })
    .await
    .unwrap();
    daemon.stop_with(libc::SIGKILL);
    for task in tasks {
        task.await.unwrap();
    }
    let replied = replied.lock().unwrap().clone();

    daemon.restart();
    daemon.assert_chain_holds();
    let rows = daemon.receipts();
    let mut intents = HashSet::new();
    let mut finished = HashSet::new();
    let mut interrupted = HashSet::new();
    for row in &rows {
        let id = row["call_id"].as_str().unwrap().to_string();
        match (row["kind"].as_str().unwrap(), &row["body"]["outcome"]) {
            ("intent", _) => {
                intents.insert(id);
            }
            ("result", Value::String(outcome)) if outcome == "interrupted" => {
                interrupted.insert(id);
            }
            ("result", _) => {
                finished.insert(id);
            }
            _ => unreachable!(),
        }
    }
    for id in &replied {
        assert!(
            finished.contains(id),
            "call {id} got a reply but has no result receipt"
        );
        assert!(!interrupted.contains(id));
    }
    for id in &intents {
        assert!(
            finished.contains(id) ^ interrupted.contains(id),
            "call {id} has no single ending"
        );
    }
    assert!(intents.len() >= replied.len());
}

// ---- Receipts that cannot be quietly cut or rewritten ----------------------------------------
//
// Each attack below is done the way a hostile process would: it opens the SQLite file itself
// (Python's sqlite3 module), deletes or adds rows, recomputes the sha256 chain as the schema
// documents it, replaces the file. `computer receipts verify` must name each one and fail, and a
// daemon must refuse to build on such a store; an untouched ledger verifies clean.

/// Runs `script` against the SQLite file at `db` with Python's sqlite3 module.
fn sql(db: &Path, script: &str) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.executescript(sys.argv[2])\nc.commit()",
        ])
        .arg(db)
        .arg(script)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "sql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copies the receipts of `src` into a new store at `dst` with the old schema (no key marks),
/// replacing `old` by `new` in every row's text and recomputing the chain the documented way:
/// `hash = sha256(prev_hash ‖ row)`. With `keep_marks`, the marks are copied along (new schema).
fn recompute_chain(src: &Path, dst: &Path, old: &str, new: &str, keep_marks: bool) {
    let script = r#"
import hashlib, sqlite3, sys
src, dst, old, new, keep = sys.argv[1:6]
rows = sqlite3.connect(src).execute(
    "SELECT seq, call_id, kind, at_ms, surface, command, row, mark FROM receipts ORDER BY seq").fetchall()
d = sqlite3.connect(dst)
d.execute("CREATE TABLE receipts (seq INTEGER PRIMARY KEY, call_id TEXT NOT NULL, kind TEXT NOT NULL,"
          " at_ms INTEGER NOT NULL, surface TEXT NOT NULL, command TEXT NOT NULL, row TEXT NOT NULL,"
          " prev_hash TEXT NOT NULL, hash TEXT NOT NULL" + (", mark TEXT" if keep == "1" else "") + ")")
prev = "0" * 64
for seq, call_id, kind, at_ms, surface, command, row, mark in rows:
    row = row.replace(old, new)
    h = hashlib.sha256((prev + row).encode()).hexdigest()
    values = [seq, call_id, kind, at_ms, surface, command, row, prev, h] + ([mark] if keep == "1" else [])
    d.execute("INSERT INTO receipts VALUES (" + ",".join("?" * len(values)) + ")", values)
    prev = h
d.commit()
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(src)
        .arg(dst)
        .args([old, new, if keep_marks { "1" } else { "0" }])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "recompute failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn db(daemon: &Daemon) -> PathBuf {
    daemon.state.join("receipts.sqlite")
}

/// Puts the store at `replacement` in place of the daemon's, as an attacker with the stopped
/// daemon's files would (the WAL and shared-memory files go too).
fn replace_store(daemon: &Daemon, replacement: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(daemon.state.join(format!("receipts.sqlite{suffix}")));
    }
    std::fs::rename(replacement, db(daemon)).expect("replace the store");
}

/// Appends one row after the newest, chained correctly (sha256 over the previous hash and the
/// row's text), as anyone with write access to the file but without the key could.
fn append_forged_row(db: &Path) {
    let script = r#"
import hashlib, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
seq, prev = c.execute("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1").fetchone()
row = '{"seq":%d,"call_id":"forged","kind":"result","at_ms":0,"surface":"shell","command":"run","body":{"ok":true}}' % (seq + 1)
c.execute("INSERT INTO receipts (seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash)"
          " VALUES (?, 'forged', 'result', 0, 'shell', 'run', ?, ?, ?)",
          (seq + 1, row, prev, hashlib.sha256((prev + row).encode()).hexdigest()))
c.commit()
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "append failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `computer receipts verify`, as text and as JSON.
fn verify(daemon: &Daemon) -> (bool, String, Value) {
    let text = daemon.cli(&["receipts", "verify"]);
    let json = daemon.cli(&["receipts", "verify", "--json"]);
    assert_eq!(text.status.success(), json.status.success());
    (text.status.success(), text.stdout, json.json())
}

/// Asserts that verify fails and says `words`.
fn assert_verify_names(daemon: &Daemon, words: &str) -> Value {
    let (ok, text, json) = verify(daemon);
    assert!(!ok, "verify passed a tampered ledger:\n{text}");
    assert!(
        text.contains(words),
        "verify did not say {words:?}:\n{text}"
    );
    assert_eq!(json["ok"], false, "{json}");
    json
}

/// Starts `computer serve` on the daemon's state and expects it to refuse, returning its error.
fn start_is_refused(daemon: &Daemon) -> String {
    let mut child = daemon
        .command()
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn computer serve");
    let status = try_wait_for(Duration::from_secs(30), || child.try_wait().ok().flatten());
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the daemon started on a tampered ledger");
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.unwrap().success());
    stderr
}

/// `calls` ordinary receipted runs; returns the seq of the newest row.
async fn some_calls(daemon: &Daemon, calls: usize, word: &str) -> i64 {
    let client = daemon.client().await;
    for _ in 0..calls {
        let result = client
            .call_raw(shell_run(json!({"argv": ["echo", word]}), json!({})))
            .await
            .expect("call");
        assert_eq!(structured(&result)["ok"], true);
    }
    client.close().await;
    daemon.receipts().last().unwrap()["seq"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untouched_ledger_verifies_clean_after_a_clean_stop_and_after_kill_9() {
    let mut daemon = Daemon::start();
    let newest = some_calls(&daemon, 3, "hello").await;
    // A result is answered once committed and on disk right after; the head names it then.
    wait_for(
        "the head to cover the newest row",
        Duration::from_secs(10),
        || {
            let json = daemon.cli(&["receipts", "verify", "--json"]).json();
            (json["head"]["seq"] == newest).then_some(())
        },
    );
    let (ok, text, json) = verify(&daemon);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "matching the head the daemon recorded (seq {newest})"
        )),
        "{text}"
    );
    assert_eq!(json["head"]["seq"], newest);

    // A clean stop checkpoints the WAL into the database and closes the head.
    daemon.stop_with(libc::SIGTERM);
    let wal = daemon.state.join("receipts.sqlite-wal");
    assert!(
        std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) == 0,
        "the WAL was not checkpointed at shutdown"
    );
    let (ok, text, _) = verify(&daemon);
    assert!(ok && text.contains("stopped cleanly"), "{text}");

    // A crash with a run in flight: the next start closes it as interrupted, and all verifies.
    daemon.restart();
    some_calls(&daemon, 2, "again").await;
    let client = daemon.client().await;
    let in_flight = tokio::spawn(async move {
        let _ = client
            .call_raw(shell_run(json!({"argv": ["sleep", "30"]}), json!({})))
            .await;
    });
    wait_for(
        "the sleep's intent receipt",
        Duration::from_secs(20),
        || {
            let rows = daemon.receipts();
            (rows.last()?["kind"] == "intent").then_some(())
        },
    );
    daemon.stop_with(libc::SIGKILL);
    let _ = in_flight.await;
    let (ok, text, _) = verify(&daemon);
    assert!(ok, "a crash is not tampering:\n{text}");
    daemon.restart();
    let (ok, text, _) = verify(&daemon);
    assert!(ok, "{text}");
    let rows = daemon.receipts();
    assert_eq!(rows.last().unwrap()["body"]["outcome"], "interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_last_receipt_while_the_daemon_is_stopped_is_named() {
    let mut daemon = Daemon::start();
    let newest = some_calls(&daemon, 3, "hello").await;
    daemon.stop_with(libc::SIGTERM);
    sql(
        &db(&daemon),
        &format!("DELETE FROM receipts WHERE seq = {newest};"),
    );
    let json = assert_verify_names(
        &daemon,
        &format!("the last receipt (seq {newest}) was deleted"),
    );
    assert_eq!(json["problems"][0]["kind"], "tail_deleted");
    let refused = start_is_refused(&daemon);
    assert!(refused.contains("was deleted"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_newest_receipts_then_kill_9_as_a_run_would_is_named() {
    let mut daemon = Daemon::start();
    let newest = some_calls(&daemon, 4, "hello").await;
    // The issue's attack: with the daemon running, open its store, delete the newest rows, and
    // kill -9 the daemon so that nothing it does later can tell.
    sql(
        &db(&daemon),
        &format!("DELETE FROM receipts WHERE seq > {};", newest - 3),
    );
    daemon.stop_with(libc::SIGKILL);
    assert_verify_names(
        &daemon,
        &format!(
            "the last 3 receipts (seq {}\u{2013}{newest}) were deleted",
            newest - 2
        ),
    );
    start_is_refused(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_every_receipt_or_the_whole_store_is_named() {
    let mut daemon = Daemon::start();
    let newest = some_calls(&daemon, 2, "hello").await;
    daemon.stop_with(libc::SIGTERM);
    sql(&db(&daemon), "DELETE FROM receipts;");
    let all = format!("all {newest} receipts (seq 1\u{2013}{newest}) were deleted");
    assert_verify_names(&daemon, &all);

    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(daemon.state.join(format!("receipts.sqlite{suffix}")));
    }
    assert_verify_names(&daemon, &all);
    let refused = start_is_refused(&daemon);
    assert!(refused.contains("were deleted"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_replaced_by_one_with_a_recomputed_chain_is_named() {
    let mut daemon = Daemon::start();
    some_calls(&daemon, 2, "secret-plan").await;
    some_calls(&daemon, 1, "harmless").await;
    daemon.stop_with(libc::SIGTERM);
    let forged = daemon.root.join("forged.sqlite");

    // Rewritten rows, the chain recomputed with sha256, the marks copied along.
    recompute_chain(&db(&daemon), &forged, "secret-plan", "harmless", true);
    replace_store(&daemon, &forged);
    let json = assert_verify_names(
        &daemon,
        "the database does not match the chain head the daemon recorded",
    );
    let kinds: Vec<&str> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["head_mismatch", "foreign_row"], "{json}");
    assert_eq!(
        json["problems"][1]["seq"], 1,
        "the first rewritten row is named: {json}"
    );
    start_is_refused(&daemon);

    // The same store built from scratch in the old schema (no marks at all).
    let again = daemon.root.join("forged-again.sqlite");
    recompute_chain(&db(&daemon), &again, "secret-plan", "harmless", false);
    replace_store(&daemon, &again);
    let (_, text, _) = verify(&daemon);
    assert!(
        text.contains("receipt seq 1 was not written by the daemon: it has no key mark"),
        "{text}"
    );
    assert!(text.contains("does not match the chain head"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_appended_by_someone_else_are_named_and_the_daemon_will_not_chain_onto_them() {
    let mut daemon = Daemon::start();
    let newest = some_calls(&daemon, 2, "hello").await;
    // With the daemon running, append a row chained exactly as the daemon would, minus the key.
    append_forged_row(&db(&daemon));
    let (ok, text, _) = verify(&daemon);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!(
            "receipt seq {} was not written by the daemon",
            newest + 1
        )),
        "{text}"
    );

    // The daemon does not build on it: the next call is refused before it runs.
    let marker = daemon.root.join("ran");
    let reply = daemon.call_json(
        "shell",
        "run",
        &json!({"argv": ["touch", marker]}).to_string(),
    );
    assert_eq!(reply["error"]["code"], "receipt_failed", "{reply}");
    assert!(!marker.exists(), "an action ran without its intent receipt");
    daemon.stop_with(libc::SIGKILL);
    start_is_refused(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_added_after_a_clean_stop_is_named_even_with_a_valid_chain() {
    let mut daemon = Daemon::start();
    some_calls(&daemon, 1, "hello").await;
    daemon.stop_with(libc::SIGTERM);
    append_forged_row(&db(&daemon));
    let json = assert_verify_names(
        &daemon,
        "follows the head the daemon recorded when it last stopped cleanly",
    );
    assert_eq!(json["problems"][0]["kind"], "rows_after_close", "{json}");
    start_is_refused(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_from_an_older_daemon_verifies_with_a_note_and_is_protected_from_then_on() {
    let mut daemon = Daemon::start();
    some_calls(&daemon, 2, "old").await;
    daemon.stop_with(libc::SIGTERM);
    // What an older daemon left: the old schema, no key, no head.
    let old = daemon.root.join("old.sqlite");
    recompute_chain(&db(&daemon), &old, "", "", false);
    replace_store(&daemon, &old);
    std::fs::remove_file(daemon.state.join("receipts.key")).unwrap();
    std::fs::remove_file(daemon.state.join("receipts.head")).unwrap();
    let (ok, text, _) = verify(&daemon);
    assert!(ok, "{text}");
    assert!(
        text.contains("tail protection starts the next time the daemon starts"),
        "{text}"
    );

    daemon.restart();
    let newest = some_calls(&daemon, 1, "new").await;
    let (ok, text, json) = verify(&daemon);
    assert!(ok, "{text}");
    assert!(text.contains("before tail protection began"), "{text}");
    assert_eq!(json["head"]["keyed_since"], 5, "{json}");
    daemon.stop_with(libc::SIGTERM);
    sql(
        &db(&daemon),
        &format!("DELETE FROM receipts WHERE seq = {newest};"),
    );
    assert_verify_names(&daemon, "was deleted");
}

// ---- The artifacts quota -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_outgrows_the_artifacts_quota_is_cut_there_and_receipts_go_on() {
    const QUOTA: u64 = 300_000;
    let daemon = Daemon::start_with_config(&format!(
        "[artifacts]\nquota_bytes = {QUOTA}\n[shell]\ncapture_memory_bytes = 4096\n"
    ));
    let artifacts = daemon.state.join("artifacts");
    let client = daemon.client().await;
    // 2 MB of output, far past the quota: the run completes, its spill stops at the quota.
    let result = client
        .call_raw(shell_run(
            json!({"script": "head -c 2000000 /dev/zero | tr '\\0' x"}),
            json!({}),
        ))
        .await
        .unwrap();
    let out = structured(&result);
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["exit_code"], 0);
    let cut = &out["cut"]["stdout"];
    assert_eq!(cut["bytes"], 2_000_000, "{out}");
    assert_eq!(cut["artifact_cut"]["reason"], "quota", "{out}");
    let message = cut["artifact_cut"]["message"].as_str().unwrap();
    assert!(message.contains("cut at the artifacts quota"), "{message}");
    assert!(message.contains("quota_bytes"), "{message}");
    let spilled = std::fs::metadata(cut["artifact"].as_str().unwrap())
        .unwrap()
        .len();
    assert!(spilled <= QUOTA && spilled > 0, "{spilled} bytes spilled");

    let result = daemon.receipt_row(&out["receipt"], "result");
    let artifact = &result["body"]["outputs"][0]["artifact"];
    assert_eq!(artifact["truncated"], true, "{result}");
    assert_eq!(artifact["cut"]["reason"], "quota", "{result}");
    assert_eq!(artifact["bytes"], spilled);

    // A second flood finds the quota full: nothing more lands on disk, the run still completes.
    let result = client
        .call_raw(shell_run(
            json!({"script": "head -c 500000 /dev/zero"}),
            json!({}),
        ))
        .await
        .unwrap();
    let out = structured(&result);
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(
        out["cut"]["stdout"]["artifact_cut"]["reason"], "quota",
        "{out}"
    );
    let total: u64 = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        total <= QUOTA,
        "the artifacts hold {total} bytes, over the {QUOTA} quota"
    );

    // Ordinary calls and their receipts go on.
    let result = client
        .call_raw(shell_run(
            json!({"argv": ["echo", "still here"]}),
            json!({}),
        ))
        .await
        .unwrap();
    assert_eq!(structured(&result)["stdout"], "still here\n");
    client.close().await;
    daemon.assert_chain_holds();
}

#[test]
fn a_screenshot_that_does_not_fit_the_artifacts_quota_is_refused_in_words() {
    let daemon = Daemon::start_on_desktop("[artifacts]\nquota_bytes = 100\n");
    let reply = daemon.call_json("gui", "screenshot", r#"{"max_dim": 400}"#);
    assert_eq!(reply["ok"], false, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("artifacts quota is full") && message.contains("quota_bytes"),
        "{reply}"
    );
    let written: u64 = std::fs::read_dir(daemon.state.join("artifacts"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(written, 0, "a refused screenshot left bytes behind");
    // An observation that writes no artifact still works, and everything is receipted.
    let windows = daemon.call_json("gui", "windows", "{}");
    assert_eq!(windows["ok"], true, "{windows}");
    daemon.assert_chain_holds();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_or_altered_head_or_key_is_named() {
    let mut daemon = Daemon::start();
    some_calls(&daemon, 2, "hello").await;
    daemon.stop_with(libc::SIGTERM);
    let head = daemon.state.join("receipts.head");
    let key = daemon.state.join("receipts.key");
    let saved = std::fs::read(&head).unwrap();

    std::fs::remove_file(&head).unwrap();
    assert_verify_names(&daemon, "the chain head");
    assert_verify_names(&daemon, "is missing");
    start_is_refused(&daemon);

    // A head written by hand (the right shape, the newest seq, a made-up mark).
    let forged = String::from_utf8_lossy(&saved)
        .trim_end_matches('\0')
        .split('\0')
        .next()
        .unwrap()
        .replace("\"mac\":\"", "\"mac\":\"00");
    std::fs::write(&head, forged).unwrap();
    assert_verify_names(&daemon, "does not carry the key's mark");
    start_is_refused(&daemon);

    std::fs::write(&head, &saved).unwrap();
    let (ok, text, _) = verify(&daemon);
    assert!(ok, "the head put back verifies again:\n{text}");
    std::fs::remove_file(&key).unwrap();
    assert_verify_names(&daemon, "the receipts key");
    start_is_refused(&daemon);
    // Every row gone too: the head left behind still tells.
    sql(&db(&daemon), "DELETE FROM receipts;");
    assert_verify_names(&daemon, "the receipts key");
    start_is_refused(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verify_beside_a_busy_daemon_never_mistakes_its_head_for_tampering() {
    let daemon = Daemon::start();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let client = daemon.client().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                let result = client
                    .call_raw(shell_run(json!({"argv": ["true"]}), json!({})))
                    .await
                    .expect("call");
                assert_eq!(structured(&result)["ok"], true);
            }
            client.close().await;
        }));
    }
    // Each verify reads the head the running daemon keeps rewriting, then its own snapshot.
    let mut checks = 0;
    while tasks.iter().any(|task| !task.is_finished()) || checks == 0 {
        let (ok, text, _) = verify(&daemon);
        assert!(ok, "verify beside the live daemon:\n{text}");
        checks += 1;
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(daemon.assert_chain_holds()["rows"], 2 * 6 * 40);
}
