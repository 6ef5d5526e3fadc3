//! The ledger's own tests: appends, group commit, durability, take-over and verification.

use std::path::Path;

use rusqlite::{Connection, params};
use serde_json::json;

use super::ledger::{WAL_CHECKPOINT_PAGES, canonical_row, last_link, lock};
use super::seal::{HeadRead, LedgerKey};
use super::*;

fn row(call_id: &str, kind: RowKind) -> NewRow {
    NewRow {
        call_id: call_id.into(),
        kind,
        surface: "shell".into(),
        command: "run".into(),
        body: json!({"argv": ["true"]}),
    }
}

/// One act's receipts: its intent, then its result.
async fn act(ledger: &Ledger, call_id: &str) {
    for kind in [RowKind::Intent, RowKind::Result] {
        ledger.append(vec![row(call_id, kind)]).await.unwrap();
    }
}

/// On one thread every append goes through the writer thread.
#[tokio::test]
async fn concurrent_appends_chain_and_verify() {
    concurrent_acts_chain_and_verify().await;
}

/// On workers, some callers commit themselves and the rest queue for the writer thread,
/// whichever holds the writer: one chain either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_on_workers_chain_and_verify() {
    concurrent_acts_chain_and_verify().await;
}

async fn concurrent_acts_chain_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = Ledger::open(&path).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let ledger = ledger.clone();
        tasks.push(tokio::spawn(async move {
            act(&ledger, &format!("c{i}")).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds(), "{verdict:?}");
    assert_eq!(verdict.rows, 128);
    let conn = open_ro(&path).unwrap();
    let rows = list(
        &conn,
        &path,
        &ListFilter {
            call_id: Some("c7".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].kind, "intent");
    assert_eq!(rows[1].body["argv"][0], "true");
}

/// The seq the ledger's head names: the last row known to be on disk.
fn head_seq(path: &Path) -> i64 {
    let key = LedgerKey::load(&seal::key_path(path)).unwrap().unwrap();
    match seal::read_head(&seal::head_path(path), &key).unwrap() {
        HeadRead::Found { head, .. } => head.seq,
        other => panic!("no head: {other:?}"),
    }
}

/// An intent for `call_id`, appended in place if the writer lets the caller.
fn intent_in_place(ledger: &Ledger, call_id: &str) -> Option<Result<Vec<i64>, LedgerError>> {
    ledger.append_in_place(&[row(call_id, RowKind::Intent)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_commits_itself_when_the_writer_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = Ledger::open(&path).await.unwrap();

    // An intent is on disk, and named by the head, before its caller hears of it.
    let intent = intent_in_place(&ledger, "a");
    assert_eq!(intent.expect("the writer was free").unwrap(), vec![1]);
    assert_eq!(head_seq(&path), 1);

    // A result is answered once committed; with no call after it, the writer thread still
    // syncs it, and the head then names it.
    let result = ledger.append_in_place(&[row("a", RowKind::Result)]);
    assert_eq!(result.expect("the writer was free").unwrap(), vec![2]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while head_seq(&path) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the result committed in place never reached the disk"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }

    // A caller that finds the writer busy does not wait for it: its rows go to the thread.
    let held = lock(&ledger.writer);
    assert!(intent_in_place(&ledger, "b").is_none());
    drop(held);
    let queued = ledger.append(vec![row("b", RowKind::Intent)]).await;
    assert_eq!(queued.unwrap(), vec![3]);

    ledger.close().await.unwrap();
    assert!(intent_in_place(&ledger, "c").is_none());
    assert!(
        ledger
            .append(vec![row("c", RowKind::Intent)])
            .await
            .is_err()
    );
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds(), "{verdict:?}");
    assert_eq!(verdict.rows, 3);
}

/// On a runtime of one thread, lending the worker is not possible: the writer thread commits.
#[tokio::test]
async fn on_one_thread_the_writer_thread_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = Ledger::open(&path).await.unwrap();
    assert!(intent_in_place(&ledger, "a").is_none());
    act(&ledger, "a").await;
    assert_eq!(head_seq(&path), 1);
}

/// Acts one after another, as an agent makes them: the WAL is checkpointed every
/// [`WAL_CHECKPOINT_PAGES`] and written again from its start, so it stops growing long
/// before SQLite's default would have checkpointed it, and every row is kept.
#[tokio::test]
async fn the_wal_is_reused_from_its_start_after_a_few_acts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let wal = dir.path().join("receipts.sqlite-wal");
    let ledger = Ledger::open(&path).await.unwrap();
    for i in 0..100 {
        act(&ledger, &format!("c{i}")).await;
    }
    let after_100 = std::fs::metadata(&wal).unwrap().len();
    for i in 100..300 {
        act(&ledger, &format!("c{i}")).await;
    }
    let after_300 = std::fs::metadata(&wal).unwrap().len();
    // A WAL frame is a page and its 24-byte header; the checkpoint runs in the commit that
    // crosses the mark, so the file ends at most one commit (a few pages) past it.
    // The 200 acts after the first hundred wrote some 2 MB of frames; written over the
    // same blocks, they leave the file where it was, give or take the longest commit.
    let frame = 4096 + 24;
    let bound = (WAL_CHECKPOINT_PAGES as u64 + 16) * frame + 32;
    assert!(
        after_300 <= bound,
        "the WAL grew to {after_300} B (bound {bound} B)"
    );
    assert!(
        after_300 <= after_100 + 8 * frame,
        "the WAL kept growing ({after_100} B after 100 acts, {after_300} B after 300)"
    );
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds(), "{verdict:?}");
    assert_eq!(verdict.rows, 600);
}

#[tokio::test]
async fn tampering_names_the_first_broken_seq() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = Ledger::open(&path).await.unwrap();
    for i in 0..5 {
        ledger
            .append(vec![row(&format!("c{i}"), RowKind::Intent)])
            .await
            .unwrap();
    }
    let rw = Connection::open(&path).unwrap();
    rw.execute(
        "UPDATE receipts SET row = replace(row, 'true', 'rm') WHERE seq = 3",
        [],
    )
    .unwrap();
    let broken = verify(&path).unwrap().problems.remove(0);
    assert_eq!(broken.seq, Some(3), "{broken:?}");
    assert_eq!(broken.kind, ProblemKind::BrokenLink, "{broken:?}");

    rw.execute("DELETE FROM receipts WHERE seq = 3", [])
        .unwrap();
    let broken = verify(&path).unwrap().problems.remove(0);
    assert_eq!(broken.seq, Some(4), "{broken:?}");
    assert!(broken.message.contains("missing"), "{broken:?}");
}

/// A ledger with one call ended ("done") and one left open ("open").
async fn with_an_open_call(path: &Path) -> Ledger {
    let ledger = Ledger::open(path).await.unwrap();
    ledger
        .append(vec![
            row("done", RowKind::Intent),
            row("done", RowKind::Result),
        ])
        .await
        .unwrap();
    ledger
        .append(vec![row("open", RowKind::Intent)])
        .await
        .unwrap();
    ledger
}

#[tokio::test]
async fn interrupted_intents_get_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = with_an_open_call(&path).await;
    // A call asked for approval and allowed: its intent as asked, then as decided.
    ledger
        .append(vec![
            row("asked", RowKind::Intent),
            row("asked", RowKind::Intent),
        ])
        .await
        .unwrap();
    // The next daemon closes them as it opens the store, once.
    ledger.close().await.unwrap();
    let (ledger, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
    assert_eq!(interrupted, 2, "one result a call");
    ledger.close().await.unwrap();
    let (_, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
    assert_eq!(interrupted, 0);
    let conn = open_ro(&path).unwrap();
    let rows = list(
        &conn,
        &path,
        &ListFilter {
            call_id: Some("open".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(rows[1].body["outcome"], "interrupted");
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds() && verdict.rows == 7, "{verdict:?}");
}

#[tokio::test]
async fn a_store_from_before_open_calls_is_scanned_once_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = with_an_open_call(&path).await;
    ledger.close().await.unwrap();
    // What an older daemon left: the same rows, no list of open calls.
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE open_calls")
        .unwrap();
    let (ledger, interrupted) = Ledger::start(&path, MAX_BATCH).opened().await.unwrap();
    assert_eq!(interrupted, 1, "the open call found by the scan");
    ledger.close().await.unwrap();
    let open: i64 = open_ro(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM open_calls", [], |row| row.get(0))
        .unwrap();
    assert_eq!(open, 0, "closed, and kept up since");
    assert!(verify(&path).unwrap().holds());
}

async fn ledger_of(path: &Path, calls: usize) -> Ledger {
    let ledger = Ledger::open(path).await.unwrap();
    for i in 0..calls {
        let id = format!("c{i}");
        ledger
            .append(vec![row(&id, RowKind::Intent), row(&id, RowKind::Result)])
            .await
            .unwrap();
    }
    ledger
}

#[tokio::test]
async fn a_cut_tail_is_named_and_the_writer_refuses_to_build_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = ledger_of(&path, 5).await;
    ledger.close().await.unwrap();
    assert!(
        ledger
            .append(vec![row("late", RowKind::Intent)])
            .await
            .is_err()
    );
    assert!(verify(&path).unwrap().holds());

    let rw = Connection::open(&path).unwrap();
    rw.execute("DELETE FROM receipts WHERE seq > 7", [])
        .unwrap();
    let verdict = verify(&path).unwrap();
    let problem = &verdict.problems[0];
    assert_eq!(problem.kind, ProblemKind::TailDeleted, "{verdict:?}");
    assert!(
        problem
            .message
            .starts_with("the last 3 receipts (seq 8\u{2013}10) were deleted"),
        "{problem:?}"
    );
    let refused = Ledger::open(&path)
        .await
        .err()
        .expect("opened a cut ledger");
    assert!(refused.to_string().contains("were deleted"), "{refused}");
}

#[tokio::test]
async fn rows_after_a_clean_close_or_without_the_key_are_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    let ledger = ledger_of(&path, 2).await;
    ledger.close().await.unwrap();
    drop(ledger);
    let rw = Connection::open(&path).unwrap();
    let (seq, hash) = last_link(&rw).unwrap();
    let text = canonical_row(seq + 1, 0, &row("forged", RowKind::Intent));
    rw.execute(
        "INSERT INTO receipts (seq, call_id, kind, at_ms, surface, command, row, prev_hash, hash)
         VALUES (?1, 'forged', 'intent', 0, 'shell', 'run', ?2, ?3, ?4)",
        params![seq + 1, text, hash, chain_hash(&hash, &text)],
    )
    .unwrap();
    let verdict = verify(&path).unwrap();
    let kinds: Vec<ProblemKind> = verdict.problems.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [ProblemKind::RowsAfterClose, ProblemKind::ForeignRow],
        "{verdict:?}"
    );
    assert!(Ledger::open(&path).await.is_err());
}

#[tokio::test]
async fn a_store_from_an_older_daemon_verifies_and_is_keyed_from_its_next_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.sqlite");
    ledger_of(&path, 2).await.close().await.unwrap();
    // An older daemon had no key, no head and no mark column.
    std::fs::remove_file(seal::key_path(&path)).unwrap();
    std::fs::remove_file(seal::head_path(&path)).unwrap();
    let rw = Connection::open(&path).unwrap();
    rw.execute_batch("ALTER TABLE receipts DROP COLUMN mark")
        .unwrap();
    drop(rw);
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds(), "{verdict:?}");
    assert!(
        verdict.notes[0].contains("tail protection starts"),
        "{verdict:?}"
    );

    ledger_of(&path, 1).await.close().await.unwrap();
    let verdict = verify(&path).unwrap();
    assert!(verdict.holds() && verdict.rows == 6, "{verdict:?}");
    assert_eq!(verdict.head.as_ref().unwrap().keyed_since, 5);
    assert!(
        verdict
            .notes
            .iter()
            .any(|n| n.contains("before tail protection")),
        "{verdict:?}"
    );
}
