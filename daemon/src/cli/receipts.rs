//! `computer receipts list|show|verify|export`: reading the ledger directly (read-only, WAL).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use computer_ipc::paths;
use serde_json::Value;

use super::exit;
use crate::record::receipts::{self, ListFilter, ProblemKind, StoredRow, Verdict};

#[derive(Debug, clap::Subcommand)]
pub enum ReceiptsCommand {
    /// List receipts, oldest first.
    List {
        /// Only receipts newer than this, e.g. `30s`, `10m`, `2h`, `1d`.
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        surface: Option<String>,
        /// The newest N rows.
        #[arg(long)]
        limit: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Show both rows (intent and result) of one call.
    Show { id: String },
    /// Check the hash chain, the key's mark on every row and the chain head the daemon recorded;
    /// exit 0 when all hold, otherwise say what was cut, rewritten or added.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// Write every row as JSON lines.
    Export,
}

pub fn run(command: ReceiptsCommand) -> u8 {
    let path = paths::state_dir().join("receipts.sqlite");
    // Opened per command: verify reads the key and head before the store, and must report a
    // store that is gone.
    let store = || receipts::open_ro(&path);
    let outcome = match command {
        ReceiptsCommand::List {
            since,
            surface,
            limit,
            json,
        } => {
            let since_ms = match since.as_deref().map(parse_age).transpose() {
                Ok(since) => since.map(|age| now_ms() - age),
                Err(message) => {
                    eprintln!("error: {message}");
                    return exit::USAGE;
                }
            };
            let filter = ListFilter {
                since_ms,
                surface,
                call_id: None,
                limit,
            };
            store()
                .and_then(|conn| receipts::list(&conn, &path, &filter))
                .map(|rows| {
                    for row in &rows {
                        if json {
                            println!("{}", serde_json::to_string(row).unwrap_or_default());
                        } else {
                            println!("{}", one_line(row));
                        }
                    }
                    exit::OK
                })
        }
        ReceiptsCommand::Show { id } => {
            let filter = ListFilter {
                call_id: Some(id.clone()),
                ..Default::default()
            };
            store()
                .and_then(|conn| receipts::list(&conn, &path, &filter))
                .map(|rows| {
                    if rows.is_empty() {
                        eprintln!("error: no receipt with id {id}");
                        return exit::FAILED;
                    }
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&rows).unwrap_or_default()
                    );
                    exit::OK
                })
        }
        ReceiptsCommand::Verify { json } => Ok(verify(&path, json)),
        ReceiptsCommand::Export => store()
            .and_then(|conn| receipts::list(&conn, &path, &ListFilter::default()))
            .map(|rows| {
                for row in &rows {
                    println!("{}", serde_json::to_string(row).unwrap_or_default());
                }
                exit::OK
            }),
    };
    outcome.unwrap_or_else(|err| {
        eprintln!("error: {err}");
        exit::FAILED
    })
}

fn verify(path: &Path, json: bool) -> u8 {
    let verdict = match receipts::verify(path) {
        Ok(verdict) => verdict,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::FAILED;
        }
    };
    if json {
        let mut report = serde_json::to_value(&verdict).unwrap_or_default();
        report["ok"] = verdict.holds().into();
        if let Some(broken) = verdict
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::BrokenLink)
        {
            report["broken_seq"] = broken.seq.into();
            report["reason"] = broken.message.clone().into();
        }
        println!("{report}");
    } else {
        println!("{}", summary(&verdict));
        for problem in &verdict.problems {
            println!("  - {}", problem.message);
        }
        for note in &verdict.notes {
            println!("note: {note}");
        }
    }
    if verdict.holds() {
        exit::OK
    } else {
        exit::FAILED
    }
}

fn summary(verdict: &Verdict) -> String {
    let rows = verdict.rows;
    let receipts = if rows == 1 { "receipt" } else { "receipts" };
    match (verdict.holds(), &verdict.head) {
        (false, _) => format!(
            "the receipts do not hold ({rows} {receipts} read; {} problem{} found):",
            verdict.problems.len(),
            if verdict.problems.len() == 1 { "" } else { "s" }
        ),
        (true, Some(head)) => format!(
            "the chain holds: {rows} {receipts} verified, matching the head the daemon recorded \
             (seq {}{})",
            head.seq,
            if head.closed { ", stopped cleanly" } else { "" }
        ),
        (true, None) => format!("the chain holds: {rows} {receipts} verified"),
    }
}

fn one_line(row: &StoredRow) -> String {
    let at = local_time(row.at_ms);
    let detail = match row.kind.as_str() {
        "intent" => row.body["action"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| compact(&row.body["args"])),
        _ => match row.body.get("error") {
            Some(error) => format!(
                "error {}: {}",
                error["code"].as_str().unwrap_or("?"),
                error["message"].as_str().unwrap_or("")
            ),
            None => format!("ok={} {}", row.body["ok"], compact(&row.body["fields"])),
        },
    };
    format!(
        "{:>6}  {}  {:<6}  {:<6} {:<8} {}  {}",
        row.seq, at, row.kind, row.surface, row.command, row.call_id, detail
    )
}

/// A receipt's time for people: local date and time to the second (`--json` keeps the exact
/// milliseconds since the epoch).
fn local_time(at_ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(at_ms) {
        Some(utc) => utc
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        None => format!("{at_ms} ms"),
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 120 {
        let mut end = 117;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    } else {
        text
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Parses `30s`, `10m`, `2h` or `1d` into milliseconds.
fn parse_age(text: &str) -> Result<i64, String> {
    let invalid =
        || format!("--since `{text}` is not an age; use a number with s, m, h or d, e.g. 10m");
    let unit = text.chars().last().ok_or_else(invalid)?;
    let number: i64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| invalid())?;
    let scale = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return Err(invalid()),
    };
    Ok(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_dates() {
        let text = local_time(1_764_547_200_000);
        assert_eq!(text.len(), "2025-12-01 00:00:00".len(), "{text}");
        assert!(text.starts_with("2025-1"), "{text}");
    }

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("10m"), Ok(600_000));
        assert_eq!(parse_age("2h"), Ok(7_200_000));
        assert!(parse_age("10").unwrap_err().contains("not an age"));
        assert!(parse_age("").is_err());
    }
}
