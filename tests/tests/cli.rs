//! The command line as a new user meets it: every `--help` has an example, printing commands
//! survive a reader that leaves (`| head`), logs off a terminal carry no colour codes, receipt
//! times read as dates, and `computer service` writes a user unit systemd accepts.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use computer_tests::{Daemon, computer_bin};
use serde_json::{Value, json};

/// The subcommand names a `--help` text lists under "Commands:" (without `help`).
fn listed_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

fn help_of(path: &[String]) -> String {
    let output = Command::new(computer_bin())
        .args(path)
        .arg("--help")
        .output()
        .expect("run computer --help");
    assert!(output.status.success(), "{path:?} --help failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn every_subcommand_help_shows_an_example() {
    let mut pending: Vec<Vec<String>> = listed_subcommands(&help_of(&[]))
        .into_iter()
        .map(|name| vec![name])
        .collect();
    assert!(
        pending.len() >= 12,
        "the top-level help lists the subcommands: {pending:?}"
    );
    let mut checked = 0;
    while let Some(path) = pending.pop() {
        let help = help_of(&path);
        assert!(
            help.contains("Example:") || help.contains("Examples:"),
            "`computer {} --help` has no example:\n{help}",
            path.join(" ")
        );
        assert!(
            help.contains("computer "),
            "the example of {path:?} shows a command line"
        );
        for child in listed_subcommands(&help) {
            let mut child_path = path.clone();
            child_path.push(child);
            pending.push(child_path);
        }
        checked += 1;
    }
    assert!(
        checked >= 25,
        "nested subcommands were walked too ({checked})"
    );
}

/// Runs `computer ARGS` with a stdout whose reader is gone before the command prints.
fn run_into_a_closed_pipe(daemon: &Daemon, args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = daemon
        .command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn computer");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait for computer");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn printing_commands_end_quietly_when_their_reader_leaves() {
    let daemon = Daemon::start();
    for n in 0..3 {
        let reply = daemon.shell_run_json(&json!({"argv": ["echo", n.to_string()]}), &json!({}));
        assert_eq!(reply["ok"], true, "{reply}");
    }
    let commands: &[&[&str]] = &[
        &["receipts", "list"],
        &["receipts", "list", "--json"],
        &["receipts", "export"],
        &["receipts", "verify"],
        &["receipts", "show", "nope"],
        &["tools", "--format", "anthropic"],
        &["doctor"],
        &["config", "check"],
        &["agents", "list"],
        &["service", "status"],
        &["call", "shell", "run", "--", "echo", "hello"],
        &["--help"],
    ];
    for args in commands {
        let (status, stderr) = run_into_a_closed_pipe(&daemon, args);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "`computer {}` into a closed pipe: {status}\n{stderr}",
            args.join(" ")
        );
        assert!(
            status.signal().is_none_or(|signal| signal == libc::SIGPIPE),
            "`computer {}` died of {status}",
            args.join(" ")
        );
    }
    // The daemon lost nothing: the call above was receipted and the chain holds.
    daemon.assert_chain_holds();
}

#[test]
fn logs_off_a_terminal_have_no_colour_codes_and_receipts_list_reads_as_dates() {
    let daemon = Daemon::start();
    let reply = daemon.shell_run_json(&json!({"argv": ["true"]}), &json!({}));
    assert_eq!(reply["ok"], true, "{reply}");
    let log = daemon.log_text();
    assert!(
        log.contains("surface ready"),
        "the daemon logged at start:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no ANSI escapes in a log file:\n{log:?}"
    );

    let listed = daemon.cli(&["receipts", "list"]);
    assert!(listed.status.success(), "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(lines.len() >= 2, "{}", listed.stdout);
    for line in &lines {
        assert!(has_date_and_time(line), "a human time in: {line}");
    }
    let json_line = daemon.cli(&["receipts", "list", "--json", "--limit", "1"]);
    let row: Value = serde_json::from_str(json_line.stdout.trim()).expect("a JSON row");
    assert!(
        row["at_ms"]
            .as_i64()
            .is_some_and(|ms| ms > 1_700_000_000_000),
        "--json keeps the exact time: {row}"
    );
}

/// Whether `line` holds a `YYYY-MM-DD HH:MM:SS` time.
fn has_date_and_time(line: &str) -> bool {
    const SHAPE: &[u8] = b"dddd-dd-dd dd:dd:dd";
    line.as_bytes().windows(SHAPE.len()).any(|window| {
        window.iter().zip(SHAPE).all(|(byte, shape)| match shape {
            b'd' => byte.is_ascii_digit(),
            other => byte == other,
        })
    })
}

/// A home for `computer service` with no user manager reachable: the unit is written and
/// enabled by link, and starting it is left to the next login.
struct ServiceHome {
    dir: tempfile::TempDir,
}

impl ServiceHome {
    fn new() -> ServiceHome {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("runtime")).unwrap();
        ServiceHome { dir }
    }

    fn computer(&self, args: &[&str]) -> (bool, String, String) {
        let output = Command::new(computer_bin())
            .args(args)
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            // An empty runtime dir and no session bus: no systemd user manager answers.
            .env("XDG_RUNTIME_DIR", self.dir.path().join("runtime"))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env("COMPUTER_SOCKET", self.dir.path().join("runtime/none.sock"))
            .output()
            .expect("run computer service");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn unit(&self) -> PathBuf {
        self.dir.path().join("config/systemd/user/computer.service")
    }

    fn wants_link(&self) -> PathBuf {
        self.dir
            .path()
            .join("config/systemd/user/graphical-session.target.wants/computer.service")
    }
}

fn verify_unit(unit: &Path, runtime: &Path) -> (bool, String) {
    let output = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .expect("systemd-analyze (package systemd) runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn service_install_writes_a_unit_systemd_accepts_and_is_idempotent() {
    let home = ServiceHome::new();
    let exe = computer_bin().canonicalize().unwrap();

    let (ok, out, err) = home.computer(&["service", "install"]);
    assert!(ok, "install succeeds without a user manager: {out}{err}");
    assert!(out.contains("wrote") && out.contains("enabled"), "{out}");
    assert!(
        out.contains("not started"),
        "says it could not start: {out}"
    );
    let unit = std::fs::read_to_string(home.unit()).expect("the unit is written");
    assert!(
        unit.contains(&format!("ExecStart={} serve", exe.display())),
        "starts this binary:\n{unit}"
    );
    assert!(unit.contains("WantedBy=graphical-session.target"), "{unit}");
    assert!(unit.contains("PartOf=graphical-session.target"), "{unit}");
    assert_eq!(
        std::fs::read_link(home.wants_link()).unwrap(),
        Path::new("../computer.service"),
        "enabled as `systemctl enable` would"
    );
    let (verified, warnings) = verify_unit(&home.unit(), &home.dir.path().join("runtime"));
    assert!(
        verified && warnings.trim().is_empty(),
        "systemd-analyze verify accepts the unit without a warning:\n{warnings}"
    );

    let (ok, out, _) = home.computer(&["service", "install"]);
    assert!(
        ok && out.contains("unchanged") && out.contains("already enabled"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(home.unit()).unwrap(), unit);

    let (ok, out, _) = home.computer(&["service", "status", "--json"]);
    assert!(ok, "installed, enabled and current: {out}");
    let status: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(status["installed"], true, "{status}");
    assert_eq!(status["enabled"], true, "{status}");
    assert_eq!(status["current"], true, "{status}");
    assert_eq!(status["program"], exe.display().to_string(), "{status}");
    assert!(
        status["daemon"]
            .as_str()
            .is_some_and(|d| d.starts_with("not answering")),
        "{status}"
    );

    // A unit left by another binary is reported stale, and install brings it up to date.
    std::fs::write(
        home.unit(),
        unit.replace(&exe.display().to_string(), "/old/computer"),
    )
    .unwrap();
    let (ok, out, _) = home.computer(&["service", "status"]);
    assert!(!ok && out.contains("/old/computer"), "{out}");
    let (ok, out, _) = home.computer(&["service", "install", "--no-start"]);
    assert!(ok && out.contains("wrote"), "{out}");
    assert_eq!(std::fs::read_to_string(home.unit()).unwrap(), unit);

    let (ok, out, _) = home.computer(&["service", "uninstall"]);
    assert!(ok && out.contains("removed"), "{out}");
    assert!(!home.unit().exists() && home.wants_link().symlink_metadata().is_err());
    let (ok, out, _) = home.computer(&["service", "status", "--json"]);
    assert!(!ok, "status fails when not installed: {out}");
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap()["installed"],
        false
    );
    let (ok, out, _) = home.computer(&["service", "uninstall"]);
    assert!(ok && out.contains("nothing to remove"), "idempotent: {out}");
}

/// A `computer call` started with its stderr read line by line: the lines come through `lines`.
fn call_reading_stderr(
    daemon: &Daemon,
    args: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = daemon
        .command()
        .arg("call")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run computer call");
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    (child, lines)
}

/// The first line of `lines` that contains `want`, and every line read before it.
fn line_with(lines: &std::sync::mpsc::Receiver<String>, want: &str) -> (String, Vec<String>) {
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(line) if line.contains(want) => return (line, seen),
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {want:?} on stderr; it said: {seen:#?}"),
        }
    }
}

#[test]
fn a_call_waiting_for_the_person_says_so_with_how_to_answer_and_how_it_ended() {
    let daemon = Daemon::start_with_config("[defaults]\nact = \"ask\"\n");
    // Allowed: the notice names the request, `computer approve` and the line that allows it.
    let (child, lines) = call_reading_stderr(&daemon, &["shell", "run", "--", "echo", "hi"]);
    let (notice, _) = line_with(&lines, "waiting for approval");
    let id = notice
        .split("(request ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no request id in {notice:?}"));
    assert!(
        notice.contains("`computer approve`")
            && notice.contains(&format!("`computer approvals allow {id}`")),
        "{notice}"
    );
    let pending = daemon.pending_approvals();
    assert_eq!(pending[0]["id"].to_string(), id, "{pending:?}");
    assert!(daemon.cli(&["approvals", "allow", id]).status.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");

    // Denied, with --json: stdout is the reply alone, stderr says the request was denied.
    let (child, lines) =
        call_reading_stderr(&daemon, &["shell", "run", "--json", "--", "echo", "hi"]);
    line_with(&lines, "waiting for approval");
    let id = daemon.pending_approvals()[0]["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    line_with(&lines, "the request was denied");
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let reply: Value = serde_json::from_slice(&out.stdout).expect("the reply as JSON");
    assert_eq!(reply["error"]["code"], "denied", "{reply}");

    // Nobody answers: it says it timed out.
    let daemon =
        Daemon::start_with_config("[defaults]\nact = \"ask\"\n[approval]\ntimeout = \"1s\"\n");
    let (mut child, lines) = call_reading_stderr(&daemon, &["shell", "run", "--", "true"]);
    line_with(&lines, "waiting for approval");
    line_with(&lines, "the request timed out");
    assert!(!child.wait().unwrap().success());

    // A call that asks nobody says nothing of approvals.
    let quiet = daemon.cli(&["call", "shell", "help"]);
    assert!(quiet.status.success(), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("approval"), "{}", quiet.stderr);
}
