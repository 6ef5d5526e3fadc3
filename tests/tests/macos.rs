//! The surfaces on a real Mac, against the real daemon: shell runs under Seatbelt, gui
//! (screenshot, click, type into TextEdit), ax (read and press in TextEdit), applescript (System
//! Events and Finder, arguments as values, rules on the target application, the deadline) and
//! the approval window, pressed by an independent client (System Events UI scripting from this
//! test process, not the daemon).
//!
//! Written for GitHub's macOS runners, whose TCC database grants the runner's shell
//! Accessibility, Screen Recording and Apple events to System Events and Finder. Compiled on
//! Linux by `packaging/check-macos.sh`; run only there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use computer_tests::desktop::{App, Desktop, TestDesktop, spawn_tied};
use computer_tests::{Daemon, approval_window_bin, shell_run_cli, wait_for};
use serde_json::{Value, json};

/// The keyboard and the front window are one per session: tests that use them take turns.
static DESKTOP: Mutex<()> = Mutex::new(());

fn take_desktop() -> std::sync::MutexGuard<'static, ()> {
    DESKTOP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn call(daemon: &Daemon, surface: &str, command: &str, args: Value) -> Value {
    daemon.call_json(surface, command, &args.to_string())
}

fn call_with(
    daemon: &Daemon,
    surface: &str,
    command: &str,
    args: Value,
    complications: Value,
) -> Value {
    daemon.call_json_as(None, surface, command, &args, &complications)
}

fn applescript(daemon: &Daemon, args: Value) -> Value {
    call(daemon, "applescript", "run", args)
}

/// The independent client: System Events UI scripting from this test process, outside the
/// daemon. With `click`, presses the approval window's button named `name`; with `find`, only
/// finds it. Succeeds once the button is there.
const APPROVER_BUTTON: &str = r#"on run argv
  set wanted to item 1 of argv
  tell application "System Events" to tell process "computer-approval-window"
    repeat with e in (entire contents of window 1)
      set found to false
      try
        if role of e is "AXButton" then
          if name of e is wanted or description of e is wanted then set found to true
        end if
      end try
      if found then
        if item 2 of argv is "click" then click e
        return "found"
      end if
    end repeat
  end tell
  error "no button " & wanted
end run
"#;

fn approver_button(dir: &Path, name: &str, mode: &str) -> bool {
    let script = dir.join("approver_button.applescript");
    std::fs::write(&script, APPROVER_BUTTON).unwrap();
    Command::new("/usr/bin/osascript")
        .arg(&script)
        .args([name, mode])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Ends an application this test opened through Launch Services (not a child of ours).
struct Quit(u32);

impl Drop for Quit {
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal to the app this test opened.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

#[test]
fn the_tool_offers_applescript_here_and_doctor_reports_the_permissions() {
    let daemon = Daemon::start_on_desktop("");
    let tools = daemon.cli(&["tools", "--format", "mcp"]);
    assert!(tools.stdout.contains("applescript"), "{}", tools.stdout);
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    let permissions = doctor["permissions"].as_array().expect("permissions");
    let names: Vec<&str> = permissions
        .iter()
        .filter_map(|p| p["permission"].as_str())
        .collect();
    for wanted in [
        "Automation: System Events",
        "Automation: Finder",
        "Accessibility",
        "Screen Recording",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing: {doctor}");
    }
    let applescript = doctor["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["surface"] == "applescript")
        .unwrap();
    assert_eq!(applescript["availability"]["status"], "ready", "{doctor}");
}

#[test]
fn shell_runs_under_seatbelt_and_cannot_read_the_daemons_state() {
    let daemon = Daemon::start();
    let out = daemon.shell_run_json(&json!({"argv": ["/bin/echo", "hello mac"]}), &json!({}));
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["stdout"], "hello mac\n");
    let receipts = daemon.state.join("receipts.sqlite");
    let out = daemon.shell_run_json(&json!({"argv": ["/bin/cat", receipts]}), &json!({}));
    assert_ne!(out["exit_code"], 0, "a run read the receipts: {out}");
    assert!(
        out["stderr"]
            .as_str()
            .is_some_and(|e| e.contains("Operation not permitted")),
        "{out}"
    );
    let script = shell_run_cli(&json!({"script": "sleep 30"}), &json!({"timeout_ms": 500}));
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    let out = daemon.cli(&script).json();
    assert_eq!(out["timed_out"], true, "{out}");
    daemon.assert_chain_holds();
}

#[test]
fn applescript_drives_system_events_and_finder() {
    let daemon = Daemon::start_on_desktop("");
    let out = applescript(
        &daemon,
        json!({"source": "tell application \"System Events\" to get name of every process"}),
    );
    assert_eq!(out["ok"], true, "{out}");
    assert!(out["stdout"].as_str().unwrap().contains("Finder"), "{out}");

    // Finder's answer, checked against the file system.
    let out = applescript(
        &daemon,
        json!({"source": "tell application \"Finder\" to get POSIX path of (home as alias)"}),
    );
    assert_eq!(out["ok"], true, "{out}");
    let home = std::env::var("HOME").unwrap();
    assert_eq!(
        out["stdout"].as_str().unwrap().trim().trim_end_matches('/'),
        home.trim_end_matches('/')
    );

    // JXA, with the result computed from an argument.
    let out = applescript(
        &daemon,
        json!({"language": "javascript",
               "source": "function run(argv) { return Application('System Events').processes.whose({name: argv[0]}).length }",
               "argv": ["Finder"]}),
    );
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["stdout"].as_str().unwrap().trim(), "1", "{out}");

    // The receipt records the targets read from the source.
    let result = daemon.receipt_row(&out["receipt"], "result");
    assert!(result.to_string().contains("System Events"), "{result}");
    daemon.assert_chain_holds();
}

/// An argument crafted to break out of a string literal stays a value: nothing it names runs.
#[test]
fn arguments_are_values_never_source() {
    let daemon = Daemon::start_on_desktop("");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let hostile = format!("\" & (do shell script \"touch {}\") & \"", marker.display());
    let out = applescript(
        &daemon,
        json!({"source": "on run argv\n  return item 1 of argv\nend run", "argv": [hostile, "-e"]}),
    );
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["stdout"].as_str().unwrap().trim_end(), hostile);
    assert!(!marker.exists(), "the argument ran as source");
}

/// The daemon reads a script file itself: its own config is refused, an ordinary file runs.
#[test]
fn a_script_file_cannot_be_the_daemons_own() {
    let daemon = Daemon::start_on_desktop("");
    let out = applescript(&daemon, json!({"file": daemon.config}));
    assert_eq!(out["error"]["path"], "args.file", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("daemon's own files"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hello.applescript");
    std::fs::write(
        &script,
        "on run argv\n  return \"hello \" & item 1 of argv\nend run",
    )
    .unwrap();
    let out = applescript(&daemon, json!({"file": script, "argv": ["mac"]}));
    assert_eq!(out["stdout"].as_str().unwrap().trim(), "hello mac", "{out}");
}

/// A rule on the target application: Finder is denied, System Events still allowed; a source
/// that hides its target is not reached by the allow rule and is asked about (here: denied, as
/// nobody answers).
#[test]
fn rules_match_the_target_application() {
    let daemon = Daemon::start_on_desktop(
        "[defaults]\nact = \"ask\"\n[approval]\ntimeout = \"1s\"\n\
         [[rules]]\nsurface = \"applescript\"\nargv0 = [\"Finder\"]\ndecision = \"deny\"\n\
         [[rules]]\nsurface = \"applescript\"\nargv0 = [\"System Events\"]\ndecision = \"allow\"\n\
         [[rules]]\nsurface = \"applescript\"\nregex = \"(?i)finder\"\ndecision = \"deny\"\n",
    );
    let allowed = applescript(
        &daemon,
        json!({"source": "tell application \"System Events\" to count processes"}),
    );
    assert_eq!(allowed["ok"], true, "{allowed}");
    let denied = applescript(
        &daemon,
        json!({"source": "tell application \"Finder\" to get name of startup disk"}),
    );
    assert_eq!(denied["error"]["code"], "denied", "{denied}");
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .contains("denied by rules["),
        "{denied}"
    );
    // The same application named another way: its path (stated by its plain name too), its
    // bundle id (caught by the case-insensitive regex over the source).
    for spelled in [
        "tell application \"/System/Library/CoreServices/Finder.app\" to get name of startup disk",
        "tell application id \"com.apple.finder\" to get name of startup disk",
    ] {
        let out = applescript(&daemon, json!({"source": spelled}));
        assert_eq!(out["error"]["code"], "denied", "{spelled}: {out}");
    }
    let hidden = applescript(
        &daemon,
        json!({"source": "tell application \"System Events\" to count processes\n\
                set n to \"Fin\" & \"der\"\ntell application n to get name of startup disk"}),
    );
    assert_eq!(hidden["ok"], false, "{hidden}");
    assert!(
        hidden["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "asked, not allowed by the System Events rule: {hidden}"
    );
}

#[test]
fn the_deadline_kills_osascript() {
    let daemon = Daemon::start_on_desktop("");
    let out = call_with(
        &daemon,
        "applescript",
        "run",
        json!({"source": "delay 30\nreturn \"late\""}),
        json!({"timeout_ms": 1000}),
    );
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["ok"], false, "{out}");
    wait_for("osascript to be gone", Duration::from_secs(10), || {
        let ps = Command::new("/bin/ps")
            .args(["-axo", "command"])
            .output()
            .ok()?;
        (!String::from_utf8_lossy(&ps.stdout).contains("delay 30")).then_some(())
    });
}

/// Opens `file` in TextEdit and returns its window from `gui windows`.
fn open_in_textedit(daemon: &Daemon, file: &Path) -> Value {
    let status = Command::new("/usr/bin/open")
        .args(["-a", "TextEdit"])
        .arg(file)
        .status()
        .expect("open");
    assert!(status.success());
    let name = file.file_name().unwrap().to_str().unwrap().to_string();
    wait_for("the TextEdit window", Duration::from_secs(30), || {
        let list = call(daemon, "gui", "windows", json!({}));
        list["windows"]
            .as_array()?
            .iter()
            .find(|w| {
                w["app"] == "TextEdit" && w["title"].as_str().is_some_and(|t| t.contains(&name))
            })
            .cloned()
    })
}

/// gui types into TextEdit and saves with a key combo: the file on disk (read by this test, not
/// the daemon) holds the text; ax reads the same text and presses the window's close button.
#[test]
fn gui_types_into_textedit_and_ax_reads_and_presses() {
    let _desktop = take_desktop();
    let daemon = Daemon::start_on_desktop("");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("note-{}.txt", std::process::id()));
    std::fs::write(&file, "").unwrap();
    let window = open_in_textedit(&daemon, &file);
    let pid = window["pid"].as_u64().expect("pid") as u32;
    let _quit = Quit(pid);

    let shot = call(&daemon, "gui", "screenshot", json!({}));
    assert_eq!(shot["ok"], true, "{shot}");
    let (width, height) = image::image_dimensions(shot["path"].as_str().unwrap()).unwrap();
    assert_eq!(
        (width as u64, height as u64),
        (
            shot["width"].as_u64().unwrap(),
            shot["height"].as_u64().unwrap()
        )
    );

    let focus = call(&daemon, "gui", "focus", json!({"window": window["id"]}));
    assert_eq!(focus["ok"], true, "{focus}");
    let x = window["x"].as_i64().unwrap() + window["width"].as_i64().unwrap() / 2;
    let y = window["y"].as_i64().unwrap() + window["height"].as_i64().unwrap() / 2;
    let click = call(&daemon, "gui", "click", json!({"x": x, "y": y}));
    assert_eq!(click["ok"], true, "{click}");
    let text = "typed by computer: héllo ✓";
    let typed = call(&daemon, "gui", "type", json!({"text": text}));
    assert_eq!(typed["ok"], true, "{typed}");

    let read = wait_for("ax to read the typed text", Duration::from_secs(15), || {
        let read = call(
            &daemon,
            "ax",
            "read",
            json!({"app": pid, "selector": "multilineTextInput"}),
        );
        read["text"]
            .as_str()
            .is_some_and(|t| t.contains(text))
            .then_some(read)
    });
    assert_eq!(read["ok"], true, "{read}");

    let saved = call(&daemon, "gui", "key", json!({"combo": "cmd+s"}));
    assert_eq!(saved["ok"], true, "{saved}");
    wait_for("TextEdit to save the file", Duration::from_secs(15), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|t| t.contains(text))
    });

    // The saved document closes without a sheet when its close button is pressed.
    let buttons = call(
        &daemon,
        "ax",
        "find",
        json!({"app": pid, "selector": "button"}),
    );
    let outline = buttons["matches"].as_str().unwrap_or_default().to_string();
    let close = outline
        .lines()
        .find(|line| line.to_lowercase().contains("close"))
        .and_then(|line| line.trim().strip_prefix('['))
        .and_then(|rest| rest.split(']').next())
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no close button in {outline}"));
    let pressed = call(
        &daemon,
        "ax",
        "act",
        json!({"app": pid, "ref": close, "action": "press"}),
    );
    assert_eq!(pressed["ok"], true, "{pressed}");
    let name = file.file_name().unwrap().to_str().unwrap().to_string();
    wait_for("the window to close", Duration::from_secs(15), || {
        let list = call(&daemon, "gui", "windows", json!({}));
        (!list["windows"]
            .as_array()?
            .iter()
            .any(|w| w["title"].as_str().is_some_and(|t| t.contains(&name))))
        .then_some(())
    });
}

/// The approval window shows an asked call; the agent cannot press its buttons through ax, a
/// person (here System Events, driven from this test process) can, and the call then runs.
#[test]
fn the_approval_window_is_answered_by_a_person_not_the_agent() {
    let _desktop = take_desktop();
    let daemon = Daemon::start_on_desktop(
        "[defaults]\nact = \"allow\"\n[[rules]]\nargv0 = [\"touch\"]\ndecision = \"ask\"\n",
    );
    let log = std::fs::File::create(daemon.root.join("window.log")).unwrap();
    let mut command = Desktop::shared().command(approval_window_bin().to_str().unwrap());
    command
        .envs(daemon.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    let window = App(spawn_tied(command));

    let dir = tempfile::tempdir().unwrap();
    let marker: PathBuf = dir.path().join("approved");
    let cli = shell_run_cli(&json!({"argv": ["touch", marker]}), &json!({}));
    let mut waiting = daemon.command();
    waiting
        .args(&cli)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let waiting = waiting.spawn().unwrap();
    wait_for(
        "the call to wait for a person",
        Duration::from_secs(30),
        || (!daemon.pending_approvals().is_empty()).then_some(()),
    );
    // Shown in the window: it is connected, so the daemon protects its pid.
    wait_for(
        "the window to show the request",
        Duration::from_secs(60),
        || approver_button(dir.path(), "Allow once", "find").then_some(()),
    );

    // The agent, through the ax surface: refused, the window is an approver.
    let attempt = call(
        &daemon,
        "ax",
        "act",
        json!({"app": window.pid(), "selector": "button \"Allow once\"", "action": "press"}),
    );
    daemon.assert_refused_as_targeting_an_approver(&attempt, "ax press on the approval window");
    assert!(!marker.exists());

    // The person: System Events, from outside the daemon.
    assert!(approver_button(dir.path(), "Allow once", "click"));
    let reply = waiting.wait_with_output().unwrap();
    let reply: Value = serde_json::from_slice(&reply.stdout).unwrap_or(Value::Null);
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(marker.exists());
    let intent = daemon.receipt_row(&reply["receipt"], "intent");
    assert_eq!(
        intent["body"]["approval"]["by"]["via"], "window",
        "{intent}"
    );
    daemon.assert_chain_holds();
}
