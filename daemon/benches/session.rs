//! Benchmark of terminal sessions against the same-run anchor agents use without them: one
//! command's round trip (send a line, wait until its output and the next prompt are there) as
//! `shell send` and `shell read until` over the socket with the real daemon, vs `tmux
//! send-keys` and `capture-pane` polled until the pane shows the same. Run with
//! `cargo bench -p computer-daemon --bench session`; it prints markdown table rows.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use computer_tests::{Daemon, RawConnection};
use serde_json::{Value, json};

use crate::common::{ms, p50};

/// The prompt both shells print, so that "the command is done" reads the same in both.
const PROMPT: &str = "ready> ";
const ROUNDS: usize = 60;

/// One shell call over a raw connection (no client library in the timing); it must succeed.
fn shell(raw: &mut RawConnection, command: &str, args: Value, complications: Value) -> Value {
    let (reply, _) = raw.call_tool(&json!({"surface": "shell", "command": command,
        "args": args, "complications": complications}));
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
    reply["result"]["structuredContent"].clone()
}

/// tmux on a server of this run's own (`-L`), never the person's.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (packaging/install-deps.sh installs it)")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn main() {
    // SAFETY: set before any other thread exists; the harness reads it to find the binary.
    unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };

    // Ours: a bash session in the real daemon, contained as every session is, driven over a raw
    // MCP connection.
    let daemon = Daemon::start_with_config("");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    let opened = shell(
        &mut raw,
        "open",
        json!({"argv": ["bash", "--norc", "--noprofile"], "rows": 30, "cols": 100}),
        json!({"env": {"PS1": PROMPT}}),
    );
    let session = opened["session"].as_u64().expect("session");
    let until = |token: &str| format!("\\n{token}\\n{PROMPT}$");
    let first = shell(
        &mut raw,
        "read",
        json!({"session": session, "until": format!("{PROMPT}$")}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(first["met"], true, "{first}");
    let mut ours = Vec::new();
    let (mut sends, mut lists) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS + 5 {
        let token = format!("ours{round}");
        // A call that does next to nothing: what the pipeline (socket, policy, two durable
        // receipts) costs each of the round's two calls.
        let listed = Instant::now();
        shell(&mut raw, "list", json!({}), json!({}));
        lists.push(listed.elapsed());
        let started = Instant::now();
        shell(
            &mut raw,
            "send",
            json!({"session": session, "text": format!("echo {token}\n")}),
            json!({}),
        );
        sends.push(started.elapsed());
        let read = shell(
            &mut raw,
            "read",
            json!({"session": session, "until": until(&token)}),
            json!({"timeout_ms": 20000}),
        );
        assert_eq!(read["met"], true, "{read}");
        if round >= 5 {
            ours.push(started.elapsed());
        }
    }
    shell(&mut raw, "close", json!({"session": session}), json!({}));

    // The anchor: the same bash in tmux, the line sent with send-keys, the pane polled with
    // capture-pane until the output and the next prompt show (as an agent without sessions
    // drives a terminal).
    let tmux = Tmux {
        socket: format!("computer-bench-{}", std::process::id()),
    };
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "bench",
        "-x",
        "100",
        "-y",
        "30",
        &format!("env PS1='{PROMPT}' bash --norc --noprofile"),
    ]);
    assert!(started.status.success(), "{started:?}");
    // capture-pane drops trailing blanks, the prompt's included.
    let prompt = PROMPT.trim_end();
    let shows = |tmux: &Tmux, wanted: &str| {
        let out = tmux.run(&["capture-pane", "-p", "-t", "bench"]);
        String::from_utf8_lossy(&out.stdout).contains(wanted)
    };
    let mut polls = 0usize;
    let mut theirs = Vec::new();
    for round in 0..ROUNDS + 5 {
        let token = format!("tmux{round}");
        // `clear` first (not timed) keeps earlier rounds' lines from satisfying this one's poll.
        let cleared = tmux.run(&["send-keys", "-t", "bench", "clear", "Enter"]);
        assert!(cleared.status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !shows(&tmux, prompt) || shows(&tmux, "clear") {
            assert!(Instant::now() < deadline, "tmux pane never cleared");
        }
        let wanted = format!("\n{token}\n{prompt}");
        let started = Instant::now();
        let sent = tmux.run(&[
            "send-keys",
            "-t",
            "bench",
            &format!("echo {token}"),
            "Enter",
        ]);
        assert!(sent.status.success());
        loop {
            polls += usize::from(round >= 5);
            if shows(&tmux, &wanted) {
                break;
            }
            assert!(Instant::now() < deadline, "tmux pane never showed {token}");
        }
        if round >= 5 {
            theirs.push(started.elapsed());
        }
    }
    let (ours, theirs) = (p50(ours), p50(theirs));
    eprintln!(
        "of ours: send p50 {}, an empty call (`shell list`) p50 {}",
        ms(p50(sends)),
        ms(p50(lists))
    );
    println!(
        "| a command's round trip in a terminal session (`shell send` + `shell read until` the \
         prompt), p50 of {ROUNDS} | {} | `tmux send-keys` + `capture-pane` polled until the \
         prompt, same bash: {} ({:.1} polls a round) | {:.2}× | ≤ 1× |",
        ms(ours),
        ms(theirs),
        polls as f64 / ROUNDS as f64,
        ours.as_secs_f64() / theirs.as_secs_f64(),
    );
}
