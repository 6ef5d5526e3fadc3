//! Receipts under load and under crashes: every call is receipted, the chain verifies, and a
//! daemon killed mid-burst leaves nothing unaccounted for.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tests::{Daemon, shell_run, structured, wait_for};
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
