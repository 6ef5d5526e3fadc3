//! The people's side of approvals: `computer approve` (an interactive terminal approver, or with
//! `--window` the desktop approval window), `computer approvals list|allow|deny` (for scripts),
//! `computer policy explain`, and `computer config check`.

use std::io::Write;

use computer_ipc::control::{
    Answer, ControlClient, ControlEvent, ControlRequest, HeldRequest, describe,
};
use computer_ipc::paths;
use computer_ipc::shown::ascii_json;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use super::exit;

#[derive(Debug, clap::Subcommand)]
pub enum ApprovalsCommand {
    /// The calls waiting for a person.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Allow one pending call (with --session: also identical calls of this agent for a while).
    Allow {
        id: u64,
        #[arg(long)]
        session: bool,
        /// Decide only if request ID is the call with this receipt id (from `list`).
        #[arg(long, value_name = "RECEIPT")]
        expect: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Deny one pending call.
    Deny {
        id: u64,
        /// Decide only if request ID is the call with this receipt id (from `list`).
        #[arg(long, value_name = "RECEIPT")]
        expect: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

async fn connect() -> Result<ControlClient, u8> {
    let path = paths::control_socket_path();
    ControlClient::connect(&path).await.map_err(|err| {
        eprintln!(
            "error: cannot reach the daemon's control socket {}: {err}",
            path.display()
        );
        exit::UNAVAILABLE
    })
}

pub async fn approvals(command: ApprovalsCommand) -> u8 {
    let mut client = match connect().await {
        Ok(client) => client,
        Err(status) => return status,
    };
    let (request, json_output) = match &command {
        ApprovalsCommand::List { json } => (ControlRequest::List, *json),
        ApprovalsCommand::Allow {
            id,
            session,
            expect,
            json,
        } => (
            ControlRequest::Decide {
                id: *id,
                answer: if *session {
                    Answer::AllowSession
                } else {
                    Answer::AllowOnce
                },
                via: "cli".into(),
                expect: expect.clone(),
            },
            *json,
        ),
        ApprovalsCommand::Deny { id, expect, json } => (
            ControlRequest::Decide {
                id: *id,
                answer: Answer::Deny,
                via: "cli".into(),
                expect: expect.clone(),
            },
            *json,
        ),
    };
    match client.request(&request).await {
        Ok(reply) => {
            if json_output {
                // Every value whole and structured; non-ASCII as JSON escapes, so printing it
                // on a terminal cannot reorder or hide anything.
                println!("{}", ascii_json(&json!(reply)));
            } else if let ApprovalsCommand::List { .. } = command {
                let pending = reply.pending.unwrap_or_default();
                if pending.is_empty() {
                    println!("nothing is waiting for approval");
                }
                for request in &pending {
                    println!("{}", describe(request));
                }
            } else {
                println!("done");
            }
            exit::OK
        }
        Err(err) => {
            if json_output {
                println!(
                    "{}",
                    ascii_json(&json!({"ok": false, "error": err.to_string()}))
                );
            } else {
                eprintln!("error: {err}");
            }
            exit::FAILED
        }
    }
}

/// The desktop approval window's program name; it is installed beside `computer`.
pub const WINDOW_PROGRAM: &str = "computer-approval-window";

/// Replaces this process with the desktop approval window found beside the running program, so
/// the window keeps this pid and environment (the control socket overrides included). Returns
/// only on failure.
pub fn open_window() -> u8 {
    let window = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(WINDOW_PROGRAM),
        Err(err) => {
            eprintln!(
                "error: cannot locate this program to find {WINDOW_PROGRAM} beside it: {err}"
            );
            return exit::UNAVAILABLE;
        }
    };
    if !window.is_file() {
        eprintln!(
            "error: the approval window is not installed: {} is missing (install it beside `computer`, e.g. `cargo build -p computer-approval-window`; `computer approve` without --window works in a terminal)",
            window.display()
        );
        return exit::UNAVAILABLE;
    }
    let err = std::os::unix::process::CommandExt::exec(&mut std::process::Command::new(&window));
    eprintln!("error: cannot start {}: {err}", window.display());
    exit::UNAVAILABLE
}

/// Reads answers for each pending request from the terminal until stdin closes. Every answer
/// names the request shown (its receipt id), so it can never decide another one.
pub async fn approve() -> u8 {
    let mut watcher = match connect().await {
        Ok(client) => client,
        Err(status) => return status,
    };
    let mut answers = match connect().await {
        Ok(client) => client,
        Err(status) => return status,
    };
    if let Err(err) = watcher.send(&ControlRequest::Watch).await {
        eprintln!("error: {err}");
        return exit::UNAVAILABLE;
    }
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut queue: Vec<HeldRequest> = Vec::new();
    // The request whose prompt is on the screen, so it is printed once, not after every event.
    let mut prompted: Option<u64> = None;
    // Which config decides what is asked here: the one the running daemon read.
    if let Ok(reply) = answers.request(&ControlRequest::List).await
        && let Some(facts) = reply.daemon
    {
        println!("{}", facts.config_sentence());
    }
    println!(
        "waiting for requests (answer a = allow once, s = allow for this session, d = deny; Ctrl-D quits)"
    );
    loop {
        if let Some(current) = queue.first()
            && prompted != Some(current.request.id)
        {
            print!("{}  allow? [a/s/d] ", describe(&current.now()));
            let _ = std::io::stdout().flush();
            prompted = Some(current.request.id);
        }
        tokio::select! {
            event = watcher.next_event() => {
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        eprintln!("error: {err}");
                        return exit::UNAVAILABLE;
                    }
                };
                match event {
                    ControlEvent::Snapshot { pending } => {
                        queue = pending.into_iter().map(HeldRequest::new).collect();
                    }
                    ControlEvent::Pending { request } => {
                        queue.push(HeldRequest::new(*request));
                    }
                    ControlEvent::Resolved { id, why } => {
                        if queue.first().map(|r| r.request.id) == Some(id) {
                            println!("\n  ({})", why.text());
                            prompted = None;
                        }
                        queue.retain(|r| r.request.id != id);
                    }
                }
            }
            line = stdin.next_line() => {
                let Ok(Some(line)) = line else { return exit::OK };
                let Some(current) = queue.first().map(|held| held.request.clone()) else { continue };
                // Only these exact answers count; anything else asks again (never an allow).
                let answer = match line.trim() {
                    "a" | "allow" => Answer::AllowOnce,
                    "s" | "session" => Answer::AllowSession,
                    "d" | "deny" => Answer::Deny,
                    other => {
                        println!("  `{other}` is not an answer; type a, s or d");
                        prompted = None;
                        continue;
                    }
                };
                let decide = ControlRequest::Decide {
                    id: current.id,
                    answer,
                    via: "terminal".into(),
                    expect: Some(current.receipt.clone()),
                };
                match answers.request(&decide).await {
                    Ok(_) => println!("  {answer:?} sent for #{}", current.id),
                    Err(err) => println!("  could not answer #{}: {err}", current.id),
                }
                queue.retain(|r| r.request.id != current.id);
                prompted = None;
            }
        }
    }
}
