//! Terminal sessions of the shell surface against real programs on real ptys: a Python REPL, a
//! `read -s` password prompt, `top` read as a screen, `vim` editing a file, a program asking the
//! terminal where its cursor is; closing kills what a session started (`setsid` included); idle
//! sessions close; a session is its agent's only; policy decides a shell's lines as shell runs.
//!
//! Sessions run contained, as runs do (namespaces); the start and close of an uncontained
//! session (`[containment] mode = "off"`, and macOS's path) are tested too.
//!
//! The `read -s` prompt fed from a secret reference, and the masking of a session's secrets,
//! are tested in `secrets.rs`, beside the keychain they need.

use std::time::Duration;

use computer_tests::{Daemon, processes_started_with, wait_for};
use serde_json::{Value, json};

/// The daemon's default: sessions contained.
const CONTAINED: &str = "";
/// Containment turned off: sessions start as commands through portable-pty.
const UNCONTAINED: &str = "[containment]\nmode = \"off\"\n";

/// One `shell COMMAND` call through `computer call`, as the agent whose token is given.
fn call_as(
    daemon: &Daemon,
    token: Option<&str>,
    command: &str,
    args: Value,
    complications: Value,
) -> Value {
    daemon.call_json_as(token, "shell", command, &args, &complications)
}

fn call(daemon: &Daemon, command: &str, args: Value) -> Value {
    call_as(daemon, None, command, args, json!({}))
}

/// Opens a session running `argv` (a login shell when None); its id.
fn open(daemon: &Daemon, argv: Option<&[&str]>, extra: Value) -> u64 {
    let mut args = json!({"rows": 30, "cols": 100});
    if let Some(argv) = argv {
        args["argv"] = json!(argv);
    }
    let opened = call_as(daemon, None, "open", args, extra);
    assert_eq!(opened["ok"], true, "open {argv:?}: {opened}");
    opened["session"].as_u64().expect("session id")
}

/// Reads until `pattern` shows in the new output; the reply (which must say it was met).
fn read_until(daemon: &Daemon, session: u64, pattern: &str) -> Value {
    let read = call_as(
        daemon,
        None,
        "read",
        json!({"session": session, "until": pattern}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(read["met"], true, "waiting for {pattern:?}: {read}");
    read
}

fn output(read: &Value) -> &str {
    read["output"].as_str().unwrap_or_default()
}

fn send(daemon: &Daemon, session: u64, text: &str) -> Value {
    let sent = call(daemon, "send", json!({"session": session, "text": text}));
    assert_eq!(sent["ok"], true, "send {text:?}: {sent}");
    sent
}

/// A bash without the person's rc files, so its prompt and behaviour are known.
const BASH: &[&str] = &["bash", "--norc", "--noprofile"];

#[test]
fn a_python_repl_answers_and_its_output_reads_as_text() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let session = open(&daemon, Some(&["python3", "-q"]), json!({}));
    read_until(&daemon, session, ">>> $");
    send(&daemon, session, "1+1\n");
    let read = read_until(&daemon, session, r"\n2\n>>> $");
    assert!(
        !output(&read).contains('\u{1b}'),
        "escapes stay out: {read}"
    );
    // The cursor moves on: a read without waits returns nothing new.
    let again = call(&daemon, "read", json!({"session": session}));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(output(&again), "", "{again}");
    assert_eq!(again["cursor"], read["cursor"], "{again}");
    // An earlier cursor reads again what followed it.
    let from_start = call(&daemon, "read", json!({"session": session, "cursor": 0}));
    assert!(output(&from_start).contains("1+1"), "{from_start}");

    send(&daemon, session, "exit()\n");
    let ended = call_as(
        &daemon,
        None,
        "read",
        json!({"session": session, "exit": true}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(
        (&ended["met"], &ended["exited"], &ended["exit_code"]),
        (&json!(true), &json!(true), &json!(0)),
        "{ended}"
    );
    let listed = call(&daemon, "list", json!({}));
    assert_eq!(listed["sessions"][0]["exited"], true, "{listed}");
    let closed = call(&daemon, "close", json!({"session": session}));
    assert_eq!(closed["closed"], session, "{closed}");
    daemon.assert_chain_holds();
}

#[test]
fn a_password_prompt_reads_its_answer_without_echoing_it() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let session = open(&daemon, Some(BASH), json!({}));
    send(
        &daemon,
        session,
        "read -rsp 'Password: ' pw; echo; echo \"got ${#pw} characters\"\n",
    );
    read_until(&daemon, session, "Password: $");
    send(&daemon, session, "hunter2\n");
    let read = read_until(&daemon, session, "got 7 characters");
    assert!(
        !output(&read).contains("hunter2"),
        "the terminal does not echo a silent read: {read}"
    );
    let screen = call(&daemon, "screen", json!({"session": session}));
    assert!(
        !screen["screen"].as_str().unwrap().contains("hunter2"),
        "{screen}"
    );
}

#[test]
fn top_reads_as_a_screen() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let session = open(&daemon, Some(&["top", "-d", "0.5"]), json!({}));
    read_until(&daemon, session, "PID");
    let screen = call(&daemon, "screen", json!({"session": session}));
    let text = screen["screen"].as_str().expect("screen text");
    assert!(
        text.contains("load average") && text.contains("PID"),
        "{text}"
    );
    assert_eq!(
        (&screen["rows"], &screen["cols"]),
        (&json!(30), &json!(100))
    );
    assert!(screen["cursor"]["row"].is_u64(), "{screen}");

    // A smaller terminal: top redraws for it, and the screen has the new size.
    let resized = call(
        &daemon,
        "resize",
        json!({"session": session, "rows": 12, "cols": 60}),
    );
    assert_eq!(resized["ok"], true, "{resized}");
    let screen = call(&daemon, "screen", json!({"session": session}));
    assert_eq!((&screen["rows"], &screen["cols"]), (&json!(12), &json!(60)));
    assert!(
        screen["screen"]
            .as_str()
            .unwrap()
            .lines()
            .all(|line| line.chars().count() <= 60),
        "{screen}"
    );

    let quit = call(&daemon, "send", json!({"session": session, "text": "q"}));
    assert_eq!(quit["ok"], true, "{quit}");
    let ended = call_as(
        &daemon,
        None,
        "read",
        json!({"session": session, "exit": true}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(ended["exited"], true, "{ended}");
}

#[test]
fn vim_edits_a_file() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    let file_arg = file.to_str().unwrap();
    let session = open(
        &daemon,
        Some(&["vim", "-u", "NONE", "-i", "NONE", "-N", file_arg]),
        json!({}),
    );
    read_until(&daemon, session, "notes.txt");
    send(&daemon, session, "i");
    send(&daemon, session, "hello from a session");
    let escaped = call(
        &daemon,
        "send",
        json!({"session": session, "keys": ["Escape"]}),
    );
    assert_eq!(escaped["ok"], true, "{escaped}");
    let screen = call(&daemon, "screen", json!({"session": session}));
    assert!(
        screen["screen"]
            .as_str()
            .unwrap()
            .starts_with("hello from a session"),
        "{screen}"
    );
    let saved = call(
        &daemon,
        "send",
        json!({"session": session, "text": ":wq", "keys": ["Enter"]}),
    );
    assert_eq!(saved["ok"], true, "{saved}");
    let ended = call_as(
        &daemon,
        None,
        "read",
        json!({"session": session, "exit": true}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(
        (&ended["exited"], &ended["exit_code"]),
        (&json!(true), &json!(0)),
        "{ended}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "hello from a session\n"
    );
}

#[test]
fn a_program_asking_for_the_cursor_position_gets_an_answer() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let session = open(&daemon, Some(BASH), json!({}));
    send(
        &daemon,
        session,
        "printf 'abc\\e[6n'; read -rsdR pos; echo; echo \"at ${pos#*[}\"\n",
    );
    // The answer names the row and the column after `abc`.
    let read = read_until(&daemon, session, r"at \d+;4\n");
    assert!(output(&read).contains(";4"), "{read}");
    // Device attributes too. The answer above went into the shell's input, so the line the
    // daemon follows is no longer known; Ctrl-U clears it first, as a person would.
    send(
        &daemon,
        session,
        "\u{15}printf '\\e[c'; read -rsdc da; echo \"attributes ${da#*[}\"\n",
    );
    read_until(&daemon, session, r"attributes \?1;2");
}

/// Queries whose answer the emulator writes into the shell's input, where bash leaves part of it
/// on its next line (`\e[0n` leaves `n`), and a printable part of each answer.
const QUERIES: &[(&str, &str)] = &[
    ("\\e[5n", "0n"),
    ("\\e[c", "1;2c"),
    ("\\e[>c", "0;0;0c"),
    ("\\e[6n", "R"),
];

#[test]
fn a_query_answer_left_on_the_shell_line_is_never_run_unseen() {
    // Acts are allowed by default: only the line's being unknown can ask.
    let daemon = Daemon::start_with_config(CONTAINED);
    // What the answer of `\e[5n` leaves on the line would run this program, found on PATH.
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let leftover = dir.path().join("n");
    std::fs::write(&leftover, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(
        &leftover,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", dir.path().display());
    let session = open(&daemon, Some(BASH), json!({"env": {"PATH": path}}));
    for (index, (query, answer)) in QUERIES.iter().enumerate() {
        send(
            &daemon,
            session,
            &format!("printf '{query}'; echo queried-{index}\n"),
        );
        // The echo's output line, not the typed one. The answer is taken in the same step as
        // the query's output; the terminal may echo it (`^[[0n`) in front of that line.
        read_until(
            &daemon,
            session,
            &format!(r"(?m)^(\^\[[^\s]*)?queried-{index}"),
        );
        // The agent's Return: the shell would run what the answer left, so it is asked (and
        // denied here), never decided as an empty line.
        let enter = std::thread::scope(|scope| {
            let sending = scope.spawn(|| {
                call(
                    &daemon,
                    "send",
                    json!({"session": session, "keys": ["Enter"]}),
                )
            });
            let request = wait_for("the Return's approval", Duration::from_secs(20), || {
                daemon.pending_approvals().into_iter().next()
            });
            assert_eq!(request["rule"], "builtin:opaque-terminal-line", "{request}");
            let action = request["action"].as_str().unwrap_or_default();
            assert!(
                action.contains("answered a query") && action.contains(answer),
                "{query}: the person is not told of the answer: {action}"
            );
            let id = request["id"].to_string();
            assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
            sending.join().unwrap()
        });
        assert_eq!(enter["error"]["code"], "denied", "{query}: {enter}");
        let intent = daemon.receipt_row(&enter["receipt"], "intent");
        assert!(
            intent["body"]["facts"]["terminal"]["opaque"]
                .as_str()
                .is_some_and(|why| why.contains("answered a query")),
            "{query}: the receipt does not say the line is unknown: {intent}"
        );
        // Ctrl-U clears the line, the answer's leftover with it.
        send(&daemon, session, "\u{15}");
    }
    // An ordinary line beside them is allowed and runs; the leftover never did.
    send(&daemon, session, "echo ordinary-$((6*7))\n");
    read_until(&daemon, session, "(?m)^ordinary-42");
    assert!(!ran.exists(), "the answer's leftover `n` ran");
}

#[test]
fn closing_kills_everything_the_session_started() {
    closing_kills_everything(CONTAINED);
}

#[test]
fn closing_an_uncontained_session_kills_everything_it_started() {
    closing_kills_everything(UNCONTAINED);
}

fn closing_kills_everything(config: &str) {
    let daemon = Daemon::start_with_config(config);
    let session = open(&daemon, Some(BASH), json!({}));
    // One child left in the background, one that left the session with setsid.
    // Distinct durations per configuration: the two tests run at the same time.
    let (first, second) = if config.is_empty() {
        ("7651.5", "7652.5")
    } else {
        ("7661.5", "7662.5")
    };
    send(
        &daemon,
        session,
        &format!("sleep {first} & setsid sleep {second} & echo started\n"),
    );
    read_until(&daemon, session, "(?m)^started");
    wait_for("both sleeps", Duration::from_secs(10), || {
        (!processes_started_with(&format!("sleep {first}")).is_empty()
            && !processes_started_with(&format!("sleep {second}")).is_empty())
        .then_some(())
    });
    let closed = call(&daemon, "close", json!({"session": session}));
    assert_eq!(closed["ok"], true, "{closed}");
    assert!(
        closed["killed_processes"].as_u64().unwrap() >= 3,
        "bash and both sleeps: {closed}"
    );
    wait_for("the sleeps to be gone", Duration::from_secs(10), || {
        (processes_started_with(&format!("sleep {first}")).is_empty()
            && processes_started_with(&format!("sleep {second}")).is_empty())
        .then_some(())
    });
    let gone = call(
        &daemon,
        "send",
        json!({"session": session, "text": "echo\n"}),
    );
    assert_eq!(gone["ok"], false, "{gone}");
    assert!(
        gone["error"]["message"]
            .as_str()
            .unwrap()
            .contains("closed"),
        "{gone}"
    );
}

#[test]
fn an_idle_session_closes_and_says_so() {
    let daemon = Daemon::start_with_config(&format!("{CONTAINED}[shell]\nsession_idle_ms = 300\n"));
    let session = open(&daemon, Some(&["sleep", "7653.5"]), json!({}));
    wait_for("the session's sleep", Duration::from_secs(10), || {
        (!processes_started_with("sleep 7653.5").is_empty()).then_some(())
    });
    wait_for("the idle session to close", Duration::from_secs(20), || {
        let listed = call(&daemon, "list", json!({}));
        (listed["sessions"] == json!([])).then_some(())
    });
    wait_for("its program to be gone", Duration::from_secs(10), || {
        processes_started_with("sleep 7653.5")
            .is_empty()
            .then_some(())
    });
    let read = call(&daemon, "read", json!({"session": session}));
    assert_eq!(read["ok"], false, "{read}");
    let message = read["error"]["message"].as_str().unwrap();
    assert!(message.contains("without use"), "{message}");
}

#[test]
fn another_agent_can_neither_drive_nor_see_a_session() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let owner = daemon.add_agent("owner");
    let intruder = daemon.add_agent("intruder");
    let opened = call_as(
        &daemon,
        Some(&owner),
        "open",
        json!({"argv": BASH}),
        json!({}),
    );
    let session = opened["session"].as_u64().expect("opened");
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("planted");

    // The intruder guesses the id and tries every command on it. Each is refused before policy
    // sees it, in the very words a session that never existed gets: the intruder cannot even
    // tell that the id is taken.
    let never = 4_000_000u64;
    let commands = |id: u64| {
        [
            (
                "send",
                json!({"session": id, "text": format!("touch {}\n", planted.display())}),
            ),
            ("send", json!({"session": id, "keys": ["Enter"]})),
            ("read", json!({"session": id})),
            ("screen", json!({"session": id})),
            ("resize", json!({"session": id, "rows": 10, "cols": 40})),
            ("close", json!({"session": id})),
        ]
    };
    for ((command, args), (_, args_never)) in commands(session).into_iter().zip(commands(never)) {
        let reply = call_as(&daemon, Some(&intruder), command, args, json!({}));
        let reply_never = call_as(&daemon, Some(&intruder), command, args_never, json!({}));
        assert_eq!(reply["ok"], false, "{command}: {reply}");
        assert_eq!(
            reply["error"].to_string(),
            reply_never["error"]
                .to_string()
                .replace(&never.to_string(), &session.to_string()),
            "{command}: an existing session of another agent reads as one that never existed"
        );
        assert_eq!(reply["error"]["path"], "args.session", "{reply}");
    }
    let listed = call_as(&daemon, Some(&intruder), "list", json!({}), json!({}));
    assert_eq!(listed["sessions"], json!([]), "{listed}");

    // The owner's session is untouched and still its own to drive.
    let mine = call_as(&daemon, Some(&owner), "list", json!({}), json!({}));
    assert_eq!(mine["sessions"][0]["session"], session, "{mine}");
    let done = call_as(
        &daemon,
        Some(&owner),
        "send",
        json!({"session": session, "text": "echo owner-here\n"}),
        json!({}),
    );
    assert_eq!(done["ok"], true, "{done}");
    let read = call_as(
        &daemon,
        Some(&owner),
        "read",
        json!({"session": session, "until": "(?m)^owner-here"}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(read["met"], true, "{read}");
    assert!(!planted.exists(), "the intruder's line never ran");

    // Closed, it tells its owner why; the intruder still hears of no such session.
    let closed = call_as(
        &daemon,
        Some(&owner),
        "close",
        json!({"session": session}),
        json!({}),
    );
    assert_eq!(closed["ok"], true, "{closed}");
    let owner_reads = call_as(
        &daemon,
        Some(&owner),
        "read",
        json!({"session": session}),
        json!({}),
    );
    assert!(
        owner_reads["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is closed: closed by `shell close`"),
        "{owner_reads}"
    );
    let intruder_reads = call_as(
        &daemon,
        Some(&intruder),
        "read",
        json!({"session": session}),
        json!({}),
    );
    assert_eq!(
        intruder_reads["error"]["message"],
        format!(
            "no session {session} of yours; `shell list` shows your open sessions, `shell open` \
             starts one"
        ),
        "{intruder_reads}"
    );
}

#[test]
fn a_deny_rule_holds_for_a_line_sent_to_a_shell() {
    let config = format!("{CONTAINED}[[rules]]\nargv0 = [\"rm\"]\ndecision = \"deny\"\n");
    let daemon = Daemon::start_with_config(&config);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let session = open(&daemon, Some(BASH), json!({}));

    // The hostile line in one send, and spread over two (the text, then Enter).
    let line = format!("rm -f {}", victim.display());
    let denied = call(
        &daemon,
        "send",
        json!({"session": session, "text": format!("{line}\n")}),
    );
    assert_denied(&daemon, &denied, "rules[0]");
    send(&daemon, session, &line);
    let enter = call(
        &daemon,
        "send",
        json!({"session": session, "keys": ["Enter"]}),
    );
    assert_denied(&daemon, &enter, "rules[0]");
    // Ctrl-U clears the line that was left typed, as a person would.
    send(&daemon, session, "\u{15}");
    // A line the line editor assembles (`m -f …`, then Home and `r`: `rm -f …`) is not known
    // exactly, so it is never allowed without a person, though acts are allowed by default:
    // asked, and denied here.
    let assembled = format!("{}\u{1}r\r", &line[1..]);
    let asked = std::thread::scope(|scope| {
        let sending = scope.spawn(|| {
            call(
                &daemon,
                "send",
                json!({"session": session, "text": assembled}),
            )
        });
        let request = wait_for(
            "the assembled line's approval",
            Duration::from_secs(20),
            || daemon.pending_approvals().into_iter().next(),
        );
        // The deny rule on `rm` cannot rule the line out, nor may anything allow it unseen.
        assert_eq!(
            request["rule"], "rules[0] (commands not known)",
            "{request}"
        );
        let id = request["id"].to_string();
        assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
        sending.join().unwrap()
    });
    assert_eq!(asked["error"]["code"], "denied", "{asked}");

    // Daemon control typed into a session is denied whatever the rules say.
    let control = call(
        &daemon,
        "send",
        json!({"session": session, "text": "computer approvals allow 1\n"}),
    );
    assert_denied(&daemon, &control, "builtin:daemon-control");

    // An ordinary line beside them goes through and runs.
    send(&daemon, session, "echo still-here\n");
    read_until(&daemon, session, "(?m)^still-here");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

fn assert_denied(daemon: &Daemon, reply: &Value, rule: &str) {
    assert_eq!(reply["ok"], false, "went through: {reply}");
    assert_eq!(reply["error"]["code"], "denied", "{reply}");
    let intent = daemon.receipt_row(&reply["receipt"], "intent");
    assert_eq!(intent["body"]["policy"]["rule"], rule, "{intent}");
    assert!(
        intent["body"]["facts"]["terminal"]["lines"].is_array(),
        "the intent states the lines: {intent}"
    );
}

#[test]
fn bad_input_gets_clear_errors_and_the_daemon_stays_up() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let no_such = call(&daemon, "read", json!({"session": 999}));
    assert_eq!(no_such["error"]["path"], "args.session", "{no_such}");
    let session = open(&daemon, Some(BASH), json!({}));
    let bad_key = call(
        &daemon,
        "send",
        json!({"session": session, "keys": ["Enter", "Hyper-Q"]}),
    );
    assert_eq!(bad_key["error"]["path"], "args.keys[1]", "{bad_key}");
    assert!(
        bad_key["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Escape"),
        "names the valid keys: {bad_key}"
    );
    let bad_regex = call(&daemon, "read", json!({"session": session, "until": "("}));
    assert_eq!(bad_regex["error"]["path"], "args.until", "{bad_regex}");
    let misplaced = call_as(
        &daemon,
        None,
        "send",
        json!({"session": session, "text": "pwd\n"}),
        json!({"cwd": "/tmp"}),
    );
    assert_eq!(
        misplaced["error"]["path"], "complications.cwd",
        "{misplaced}"
    );
    // A secret in place of text must be a reference; the error says what one looks like.
    let not_a_reference = call(
        &daemon,
        "send",
        json!({"session": session, "text": {"secret": "op://vault/item"}}),
    );
    assert_eq!(
        not_a_reference["error"]["path"], "args.text.secret",
        "{not_a_reference}"
    );
    let not_a_secret = call(
        &daemon,
        "send",
        json!({"session": session, "text": {"value": "x"}}),
    );
    assert_eq!(not_a_secret["error"]["path"], "args.text", "{not_a_secret}");
    assert!(
        not_a_secret["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keychain://"),
        "{not_a_secret}"
    );
    let nothing = call(&daemon, "send", json!({"session": session}));
    assert_eq!(nothing["ok"], false, "{nothing}");
    let big = call(
        &daemon,
        "resize",
        json!({"session": session, "rows": 0, "cols": 80}),
    );
    assert_eq!(big["error"]["path"], "args.rows", "{big}");
    let past = call(
        &daemon,
        "read",
        json!({"session": session, "cursor": 1u64 << 40}),
    );
    assert_eq!(past["ok"], false, "{past}");
    let missing = call(&daemon, "open", json!({"argv": ["no-such-program-xyz"]}));
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("command not found"),
        "{missing}"
    );
    // A wait that is not met ends at its bound, saying so.
    let waited = call_as(
        &daemon,
        None,
        "read",
        json!({"session": session, "until": "never-printed"}),
        json!({"timeout_ms": 200}),
    );
    assert_eq!(
        (&waited["met"], &waited["timed_out"]),
        (&json!(false), &json!(true)),
        "{waited}"
    );
    // Still up, and the session still works.
    send(&daemon, session, "echo alive\n");
    read_until(&daemon, session, "(?m)^alive");
}

#[test]
fn output_beyond_the_buffer_is_dropped_and_read_says_how_much() {
    let daemon = Daemon::start_with_config(&format!(
        "{CONTAINED}[shell]\nsession_output_bytes = 1000\n"
    ));
    let session = open(&daemon, Some(BASH), json!({}));
    send(&daemon, session, "seq 1 2000; echo done-counting\n");
    let read = call_as(
        &daemon,
        None,
        "read",
        // Anchored, so the echo of the command line itself does not match.
        json!({"session": session, "cursor": 0, "until": "(?m)^done-counting\\n"}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(read["met"], true, "{read}");
    assert!(read["dropped"].as_u64().unwrap() > 5000, "{read}");
    assert!(output(&read).contains("2000\n"), "{read}");
}

#[test]
fn a_session_runs_contained_like_a_run() {
    let daemon = Daemon::start_with_config(CONTAINED);
    let opened = call(&daemon, "open", json!({"argv": BASH}));
    assert_eq!(opened["ok"], true, "{opened}");
    let session = opened["session"].as_u64().unwrap();
    let receipt = daemon.receipt_row(&opened["receipt"], "result");
    assert_eq!(
        receipt["body"]["containment"]["mechanism"], "namespaces",
        "{receipt}"
    );
    // Its shell lives in a PID namespace of its own: it sees a handful of pids, not the host's.
    send(&daemon, session, "echo \"pid=$$\"\n");
    let read = read_until(&daemon, session, r"(?m)^pid=\d+");
    let pid: u32 = output(&read)
        .lines()
        .find_map(|line| line.strip_prefix("pid="))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("a pid");
    assert!(pid < 10, "the shell's pid inside its namespace: {pid}");
    let closed = call(&daemon, "close", json!({"session": session}));
    assert_eq!(closed["ok"], true, "{closed}");
}

#[test]
fn one_agent_cannot_take_every_session_slot() {
    let daemon =
        Daemon::start_with_config(&format!("{CONTAINED}[shell]\nmax_sessions_per_agent = 2\n"));
    let hog = daemon.add_agent("hog");
    let other = daemon.add_agent("other");
    let open_as = |token: &str| {
        call_as(
            &daemon,
            Some(token),
            "open",
            json!({"argv": BASH}),
            json!({}),
        )
    };

    // The hog asks for five sessions at once, as an agent racing the cap would: only two start.
    let replies: Vec<Value> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..5).map(|_| scope.spawn(|| open_as(&hog))).collect();
        calls.into_iter().map(|call| call.join().unwrap()).collect()
    });
    let opened: Vec<u64> = replies
        .iter()
        .filter_map(|r| r["session"].as_u64())
        .collect();
    assert_eq!(opened.len(), 2, "two sessions for the hog: {replies:?}");
    for refused in replies.iter().filter(|r| r["ok"] == false) {
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`[shell] max_sessions_per_agent` = 2")
                && message.contains("raise it")
                && message.contains("close one first"),
            "the refusal names the cap and how to raise it: {refused}"
        );
    }
    let listed = call_as(&daemon, Some(&hog), "list", json!({}), json!({}));
    assert_eq!(
        listed["sessions"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );

    // Another agent still gets a session, and it works.
    let theirs = open_as(&other);
    assert_eq!(
        theirs["ok"], true,
        "another agent opens a session: {theirs}"
    );
    let session = theirs["session"].as_u64().unwrap();
    let sent = call_as(
        &daemon,
        Some(&other),
        "send",
        json!({"session": session, "text": "echo other-here\n"}),
        json!({}),
    );
    assert_eq!(sent["ok"], true, "{sent}");
    let read = call_as(
        &daemon,
        Some(&other),
        "read",
        json!({"session": session, "until": "(?m)^other-here"}),
        json!({"timeout_ms": 20000}),
    );
    assert_eq!(read["met"], true, "{read}");

    // Once the hog closes one of its sessions, it may open one again.
    let closed = call_as(
        &daemon,
        Some(&hog),
        "close",
        json!({"session": opened[0]}),
        json!({}),
    );
    assert_eq!(closed["ok"], true, "{closed}");
    let again = open_as(&hog);
    assert_eq!(
        again["ok"], true,
        "a freed slot is the hog's again: {again}"
    );
}

/// A daemon whose HOME is no directory opens sessions in `/`, as its runs start there (contained
/// or not), instead of failing them.
#[test]
fn a_missing_home_opens_sessions_in_the_root_directory() {
    let gone = tempfile::tempdir().unwrap();
    let home = gone.path().join("never-made");
    for config in [CONTAINED, UNCONTAINED] {
        let daemon = Daemon::start_with(config, &[("HOME", home.display().to_string())]);
        let session = open(&daemon, Some(BASH), json!({}));
        send(&daemon, session, "pwd; echo ended-$((6*7))\n");
        let read = read_until(&daemon, session, r"(?m)^ended-42");
        assert!(
            output(&read).lines().any(|line| line.trim_end() == "/"),
            "{config:?}: {read}"
        );
    }
}
