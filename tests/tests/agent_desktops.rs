//! Desktops of agents' own through the daemon (`gui desktop` and `complications.desktop`): a
//! virtual desktop opened by a call, a GTK app started there by `shell run`, typed into through
//! gui and read through ax, screenshots of its size, while the person's desktop (the suite's
//! Xvfb) sees none of it; two agents' desktops kept apart; receipts and approvers naming the
//! desktop; closing a desktop, and stopping the daemon, ending what ran in it.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use computer_tests::desktop::{Desktop, TestDesktop};
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// How long an app on a fresh desktop may take to show (GTK starts slowly on a loaded machine).
const APP_BOUND: Duration = Duration::from_secs(60);

/// One call with its whole arguments as `token`'s agent (`None`: the person's default agent);
/// the structured reply.
async fn call_as(daemon: &Daemon, token: Option<&str>, arguments: Value) -> Value {
    match token {
        Some(token) => daemon.call_raw_once_as(token, arguments).await,
        None => daemon.call_raw_once(arguments).await,
    }
}

/// One call of `surface`'s `command` on `desktop`, as `token`'s agent; the structured reply.
async fn on_desktop(
    daemon: &Daemon,
    token: Option<&str>,
    desktop: &str,
    surface: &str,
    command: &str,
    args: Value,
) -> Value {
    let call = json!({"surface": surface, "command": command, "args": args,
                      "complications": {"desktop": desktop}});
    call_as(daemon, token, call).await
}

/// Opens a virtual desktop of `size` for `token`'s agent; its id.
async fn open_desktop(daemon: &Daemon, token: Option<&str>, size: [u32; 2]) -> String {
    let reply = call_as(
        daemon,
        token,
        json!({"surface": "gui", "command": "desktop",
               "args": {"op": "open", "size": size, "visible": false}}),
    )
    .await;
    assert_eq!(reply["ok"], true, "{reply}\n{}", daemon.log_text());
    assert_eq!(reply["kind"], "xvfb", "{reply}");
    assert_eq!(reply["size"], json!(size), "{reply}");
    reply["desktop"].as_str().expect("a desktop id").to_string()
}

/// Starts zenity's entry dialog titled `title` on `desktop` through a detached `shell run`.
async fn start_app_on(daemon: &Daemon, token: Option<&str>, desktop: &str, title: &str) -> Value {
    let reply = call_as(
        daemon,
        token,
        json!({"surface": "shell", "command": "run",
               "args": {"argv": ["zenity", "--entry", "--title", title, "--text", "name"]},
               "complications": {"desktop": desktop, "detach": true}}),
    )
    .await;
    assert_eq!(reply["ok"], true, "{reply}");
    reply
}

/// The windows the gui surface lists on `desktop` (`None`: the person's).
async fn windows(daemon: &Daemon, token: Option<&str>, desktop: Option<&str>) -> Vec<Value> {
    let mut call = json!({"surface": "gui", "command": "windows", "args": {}});
    if let Some(desktop) = desktop {
        call["complications"] = json!({"desktop": desktop});
    }
    let reply = call_as(daemon, token, call).await;
    assert_eq!(reply["ok"], true, "{reply}");
    reply["windows"].as_array().cloned().unwrap_or_default()
}

fn titled<'a>(windows: &'a [Value], title: &str) -> Option<&'a Value> {
    windows.iter().find(|w| w["title"] == title)
}

/// Every pid whose command line names `needle`.
fn pids_running(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

/// The person's pointer position and focused window, read from outside the daemon.
fn person_pointer_and_focus(desktop: &Desktop) -> (String, String) {
    (
        desktop.tool_output("xdotool", &["getmouselocation"]),
        desktop.tool_output("xdotool", &["getwindowfocus"]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_works_on_its_own_desktop_and_the_persons_sees_none_of_it() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop("");
    let before = person_pointer_and_focus(person);
    let id = open_desktop(&daemon, None, [800, 600]).await;

    let title = "agent-desk-entry";
    start_app_on(&daemon, None, &id, title).await;
    let _window = {
        let mut found = None;
        for _ in 0..600 {
            if let Some(w) = titled(&windows(&daemon, None, Some(&id)).await, title) {
                found = Some(w.clone());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        found.unwrap_or_else(|| panic!("zenity never showed on {id} within {APP_BOUND:?}"))
    };
    assert!(
        titled(&windows(&daemon, None, None).await, title).is_none(),
        "the agent's app shows on the person's desktop"
    );

    // A screenshot of the agent's desktop has the desktop's size.
    let shot = on_desktop(&daemon, None, &id, "gui", "screenshot", json!({})).await;
    assert_eq!(shot["ok"], true, "{shot}");
    let (width, height) = screenshot_size(&daemon, &shot);
    assert_eq!((width, height), (800, 600), "{shot}");

    // Typed through the desktop's gui, read back through its ax.
    let typed = on_desktop(
        &daemon,
        None,
        &id,
        "gui",
        "type",
        json!({"text": "on my own desk"}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    // Read back on the desktop's own accessibility bus.
    assert_eq!(typed["effect"], "confirmed", "{typed}");
    let found = on_desktop(
        &daemon,
        None,
        &id,
        "ax",
        "find",
        json!({"selector": "textInput", "app": "zenity", "include": ["value"]}),
    )
    .await;
    assert_eq!(found["ok"], true, "{found}");
    assert!(
        found.to_string().contains("on my own desk"),
        "the entry does not read what was typed: {found}"
    );
    // The app is found by its pid too (as the host sees it, the pid `ax apps` lists).
    let zenity = pids_running(title);
    assert_eq!(zenity.len(), 1, "one zenity titled {title}: {zenity:?}");
    let by_pid = on_desktop(
        &daemon,
        None,
        &id,
        "ax",
        "find",
        json!({"selector": "textInput", "app": zenity[0], "include": ["value"]}),
    )
    .await;
    assert!(
        by_pid["ok"] == true && by_pid.to_string().contains("on my own desk"),
        "ax find by the app's pid on its desktop: {by_pid}"
    );
    // The person's accessibility bus has no zenity.
    let persons = call_as(
        &daemon,
        None,
        json!({"surface": "ax", "command": "find",
               "args": {"selector": "textInput", "app": "zenity"}}),
    )
    .await;
    assert_ne!(
        persons["ok"], true,
        "the person's bus shows the agent's app: {persons}"
    );

    assert_eq!(
        person_pointer_and_focus(person),
        before,
        "the person's pointer or focus moved while the agent worked on its own desktop"
    );

    // Every row of a call on the desktop names it.
    let rows = daemon.receipts();
    let typed_rows: Vec<&Value> = rows
        .iter()
        .filter(|row| row["command"] == "type" && row["surface"] == "gui")
        .collect();
    assert!(!typed_rows.is_empty(), "no receipt for the typing");
    for row in typed_rows {
        assert_eq!(row["body"]["desktop"], json!(id), "{row}");
    }

    // doctor lists the open desktop.
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert!(
        doctor.to_string().contains(&format!("\"{id}\"")),
        "doctor does not list {id}: {doctor}"
    );

    // Closing ends the app started in it.
    let zenity = wait_for("zenity's pid", APP_BOUND, || {
        let pids = pids_running(title);
        (!pids.is_empty()).then_some(pids)
    });
    let closed = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "desktop", "args": {"op": "close", "id": id}}),
    )
    .await;
    assert_eq!(closed["closed"], json!(id), "{closed}");
    for pid in zenity {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
            "zenity (pid {pid}) outlived its desktop"
        );
    }
    let after = on_desktop(&daemon, None, &id, "gui", "windows", json!({})).await;
    assert_eq!(
        after["ok"], false,
        "a closed desktop still answers: {after}"
    );
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

/// The width and height of the PNG a screenshot reply holds (inline or as a file).
fn screenshot_size(daemon: &Daemon, reply: &Value) -> (u32, u32) {
    if let (Some(w), Some(h)) = (reply["width"].as_u64(), reply["height"].as_u64()) {
        return (w as u32, h as u32);
    }
    let bytes = if let Some(path) = reply["path"].as_str() {
        std::fs::read(path).expect("the screenshot file")
    } else {
        let data = reply["image"].as_str().unwrap_or_else(|| {
            panic!(
                "no size, path or image in the reply: {reply}\n{}",
                daemon.log_text()
            )
        });
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64")
    };
    let image = image::load_from_memory(&bytes).expect("a PNG");
    (image.width(), image.height())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_agent_cannot_see_or_reach_another_agents_desktop() {
    let daemon = Daemon::start_on_desktop("");
    let alice = daemon.add_agent("alice");
    let bob = daemon.add_agent("bob");
    let hers = open_desktop(&daemon, Some(&alice), [640, 480]).await;
    let his = open_desktop(&daemon, Some(&bob), [640, 480]).await;
    assert_ne!(hers, his);

    // Bob lists his own only.
    let listed = call_as(
        &daemon,
        Some(&bob),
        json!({"surface": "gui", "command": "desktop", "args": {"op": "list"}}),
    )
    .await;
    assert_eq!(
        listed["desktops"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["desktops"][0]["desktop"], json!(his), "{listed}");

    // Bob naming Alice's desktop is refused exactly as a desktop that does not exist.
    let reach = |desktop: &str| {
        json!({"surface": "gui", "command": "screenshot", "args": {},
               "complications": {"desktop": desktop}})
    };
    let hers_refused = call_as(&daemon, Some(&bob), reach(&hers)).await;
    let none_refused = call_as(&daemon, Some(&bob), reach("d999")).await;
    assert_eq!(hers_refused["ok"], false, "{hers_refused}");
    assert_eq!(
        hers_refused["error"]["message"]
            .as_str()
            .map(|m| m.replace(&hers, "ID")),
        none_refused["error"]["message"]
            .as_str()
            .map(|m| m.replace("d999", "ID")),
        "a refusal tells Alice's desktop from none"
    );
    // Nor may he close it.
    let close = call_as(
        &daemon,
        Some(&bob),
        json!({"surface": "gui", "command": "desktop", "args": {"op": "close", "id": hers}}),
    )
    .await;
    assert_eq!(close["ok"], false, "{close}");
    // While his own answers, and hers still answers her.
    let own = call_as(&daemon, Some(&bob), reach(&his)).await;
    assert_eq!(own["ok"], true, "{own}");
    let alices = call_as(&daemon, Some(&alice), reach(&hers)).await;
    assert_eq!(alices["ok"], true, "{alices}");

    // A desktop names no surface but gui, ax and shell.
    let keychain = on_desktop(&daemon, Some(&bob), &his, "keychain", "list", json!({})).await;
    assert_eq!(keychain["ok"], false, "{keychain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_daemon_ends_its_desktops() {
    let mut daemon = Daemon::start_on_desktop("");
    let id = open_desktop(&daemon, None, [320, 240]).await;
    let title = "agent-desk-left-running";
    start_app_on(&daemon, None, &id, title).await;
    let app = wait_for("the app's pid", APP_BOUND, || {
        let pids = pids_running(title);
        (!pids.is_empty()).then_some(pids)
    });
    daemon.stop_with(libc::SIGTERM);
    for pid in app {
        wait_for("the app to end with the daemon", APP_BOUND, || {
            (!Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid)).then_some(())
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_desktop_calls_are_refused_clearly_and_receipted() {
    let daemon = Daemon::start_on_desktop("");
    let too_big = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "desktop",
               "args": {"op": "open", "size": [100000, 10]}}),
    )
    .await;
    assert_eq!(too_big["ok"], false, "{too_big}");
    assert_eq!(too_big["error"]["path"], "args.size", "{too_big}");
    let no_id = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "desktop", "args": {"op": "close"}}),
    )
    .await;
    assert_eq!(no_id["error"]["path"], "args.id", "{no_id}");
    let unknown = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "windows", "args": {},
               "complications": {"desktop": "d42"}}),
    )
    .await;
    assert_eq!(
        unknown["error"]["path"], "complications.desktop",
        "{unknown}"
    );
    // Each refusal has its receipt.
    let receipts = daemon.receipts();
    for reply in [&too_big, &no_id, &unknown] {
        let receipt = reply["receipt"].as_str().expect("a receipt id");
        assert!(
            receipts.iter().any(|row| row["call_id"] == receipt),
            "no receipt for {reply}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_confined_to_its_own_desktop_never_reaches_the_persons() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop(
        "[agents.boxed]\ndesktop = \"own\"\ndesktop_visible = false\ndesktop_size = [640, 480]\n",
    );
    let boxed = daemon.add_agent("boxed");
    let free = daemon.add_agent("free");

    // Its calls name no desktop, and land on its own: a screen of its size, none of the
    // person's windows, its runs on its display.
    let shot = call_as(
        &daemon,
        Some(&boxed),
        json!({"surface": "gui", "command": "screenshot", "args": {}}),
    )
    .await;
    assert_eq!(shot["ok"], true, "{shot}");
    assert_eq!(screenshot_size(&daemon, &shot), (640, 480), "{shot}");
    let display = call_as(
        &daemon,
        Some(&boxed),
        json!({"surface": "shell", "command": "run",
               "args": {"script": "printf %s \"$DISPLAY\""}}),
    )
    .await;
    assert_eq!(display["ok"], true, "{display}");
    let persons_display = person
        .env()
        .into_iter()
        .find(|(name, _)| *name == "DISPLAY")
        .map(|(_, value)| value)
        .expect("the person's DISPLAY");
    assert_ne!(
        display["stdout"].as_str(),
        Some(persons_display.as_str()),
        "the confined agent's run got the person's display: {display}"
    );
    let listed = call_as(
        &daemon,
        Some(&boxed),
        json!({"surface": "gui", "command": "desktop", "args": {"op": "list"}}),
    )
    .await;
    let own = listed["desktops"][0]["desktop"].clone();
    assert!(own.is_string(), "its own desktop is not listed: {listed}");
    let rows = daemon.receipts();
    let shot_receipt = shot["receipt"].as_str().expect("receipt");
    let shot_rows: Vec<&Value> = rows
        .iter()
        .filter(|r| r["call_id"] == shot_receipt)
        .collect();
    assert!(!shot_rows.is_empty());
    for row in shot_rows {
        assert_eq!(row["body"]["desktop"], own, "{row}");
    }

    // Naming the person's display through the call's variables is refused.
    let escape = call_as(
        &daemon,
        Some(&boxed),
        json!({"surface": "shell", "command": "run",
               "args": {"argv": ["xdotool", "getmouselocation"]},
               "complications": {"env": {"DISPLAY": persons_display}}}),
    )
    .await;
    assert_eq!(escape["ok"], false, "{escape}");
    assert_eq!(
        escape["error"]["path"], "complications.env.DISPLAY",
        "{escape}"
    );

    // Another agent works on the person's desktop as before.
    let persons = call_as(
        &daemon,
        Some(&free),
        json!({"surface": "gui", "command": "screenshot", "args": {}}),
    )
    .await;
    assert_eq!(persons["ok"], true, "{persons}");
    assert_ne!(screenshot_size(&daemon, &persons), (640, 480), "{persons}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visible_desktop_is_a_window_on_the_persons_screen() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop("");
    // The person works in a window of theirs, which keeps the keyboard focus while the
    // desktop's window maps (the person's window manager would focus a new window).
    let persons_title = "person-keeps-the-focus";
    let _persons_app = computer_tests::desktop::TestApp::launch(persons_title);
    let found = person.tool_output("xdotool", &["search", "--sync", "--name", persons_title]);
    let persons_window = found
        .lines()
        .next()
        .expect("the person's window")
        .to_string();
    person.tool_output("xdotool", &["windowactivate", "--sync", &persons_window]);
    let focus_before = person.tool_output("xdotool", &["getwindowfocus"]);
    assert_eq!(
        focus_before.trim(),
        persons_window,
        "the person works in their window"
    );
    let before: Vec<Value> = windows(&daemon, None, None).await;
    let reply = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "desktop",
               "args": {"op": "open", "size": [400, 300], "visible": true}}),
    )
    .await;
    assert_eq!(reply["ok"], true, "{reply}\n{}", daemon.log_text());
    assert_eq!(reply["kind"], "xephyr", "{reply}");
    let id = reply["desktop"].as_str().expect("an id").to_string();
    // The person sees it: a new window of the desktop's size on the person's screen.
    let after = windows(&daemon, None, None).await;
    let new: Vec<&Value> = after.iter().filter(|w| !before.contains(w)).collect();
    assert!(
        new.iter().any(|w| w["width"] == 400 && w["height"] == 300),
        "no 400x300 window appeared on the person's screen: {new:?}"
    );
    // Its own screen has its size.
    let shot = on_desktop(&daemon, None, &id, "gui", "screenshot", json!({})).await;
    assert_eq!(screenshot_size(&daemon, &shot), (400, 300), "{shot}");
    assert_eq!(
        person.tool_output("xdotool", &["getwindowfocus"]),
        focus_before,
        "opening a visible desktop took the person's keyboard focus\n{}",
        daemon.log_text()
    );
    let closed = call_as(
        &daemon,
        None,
        json!({"surface": "gui", "command": "desktop", "args": {"op": "close", "id": id}}),
    )
    .await;
    assert_eq!(closed["ok"], true, "{closed}");
    let gone = windows(&daemon, None, None).await;
    assert!(
        !gone.iter().any(|w| w["width"] == 400 && w["height"] == 300),
        "the closed desktop's window stays on the person's screen: {gone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_opening_desktops_without_end_is_stopped_at_its_limit_and_others_are_not() {
    let daemon = Daemon::start_on_desktop("");
    let greedy = daemon.add_agent("greedy");
    let other = daemon.add_agent("other");
    let mut opened = Vec::new();
    for _ in 0..4 {
        opened.push(open_desktop(&daemon, Some(&greedy), [64, 64]).await);
    }
    let fifth = call_as(
        &daemon,
        Some(&greedy),
        json!({"surface": "gui", "command": "desktop",
               "args": {"op": "open", "size": [64, 64], "visible": false}}),
    )
    .await;
    assert_eq!(fifth["ok"], false, "{fifth}");
    let message = fifth["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("at most 4 each") && message.contains("close one first"),
        "{fifth}"
    );
    assert_eq!(
        fifth["error"]["valid"].as_array().map(Vec::len),
        Some(4),
        "the refusal lists the agent's open desktops: {fifth}"
    );
    // Another agent still opens one, and a closed desktop makes room again.
    open_desktop(&daemon, Some(&other), [64, 64]).await;
    let closed = call_as(
        &daemon,
        Some(&greedy),
        json!({"surface": "gui", "command": "desktop",
               "args": {"op": "close", "id": opened[0]}}),
    )
    .await;
    assert_eq!(closed["ok"], true, "{closed}");
    open_desktop(&daemon, Some(&greedy), [64, 64]).await;
}

/// What a hostile program started on an agent's desktop tries, as a script: `reach NAME CMD...`
/// prints `NAME ok` when the command succeeds and `NAME refused` when it fails; `connect NAME
/// ADDRESS` connects a socket (a path, `@name` for an abstract socket, `tcp:PORT` on
/// 127.0.0.1).
const REACH: &str = r#"
reach() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
connect() {
  reach "$1" python3 -c '
import socket, sys
address = sys.argv[1]
if address.startswith("tcp:"):
    socket.create_connection(("127.0.0.1", int(address[4:])), timeout=5)
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + address[1:] if address.startswith("@") else address)
' "$2"
}
"#;

/// What `name` said in a [`REACH`] script's output: `ok` or `refused`.
fn reached(reply: &Value, name: &str) -> String {
    let out = reply["stdout"].as_str().unwrap_or_default();
    out.lines()
        .find(|line| line.split(' ').next() == Some(name))
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or_else(|| panic!("no line for {name}: {reply}"))
        .to_string()
}

/// The X display number of `display` (`:97` → 97).
fn display_number(display: &str) -> String {
    display
        .trim_start_matches(':')
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The person's accessibility bus address, as the person's session bus gives it.
fn persons_accessibility_bus(person: &Desktop) -> String {
    let out = std::process::Command::new("dbus-send")
        .env("DBUS_SESSION_BUS_ADDRESS", &person.dbus_address)
        .args([
            "--session",
            "--print-reply",
            "--dest=org.a11y.Bus",
            "/org/a11y/bus",
            "org.a11y.Bus.GetAddress",
        ])
        .output()
        .expect("dbus-send");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split('"')
        .nth(1)
        .unwrap_or_else(|| panic!("no accessibility bus address in {text:?}"))
        .to_string()
}

/// A `shell run` of `script` after [`REACH`], on `desktop` (`None`: the person's), as `token`'s
/// agent; the reply, which must be a run that ended 0.
async fn reach_from(
    daemon: &Daemon,
    token: Option<&str>,
    desktop: Option<&str>,
    script: &str,
) -> Value {
    let mut call = json!({"surface": "shell", "command": "run",
                          "args": {"script": format!("{REACH}\n{script}")}});
    if let Some(desktop) = desktop {
        call["complications"] = json!({"desktop": desktop});
    }
    let reply = call_as(daemon, token, call).await;
    assert_eq!(reply["ok"], true, "{reply}\n{}", daemon.log_text());
    assert_eq!(reply["exit_code"], 0, "{reply}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_an_agents_desktop_reaches_no_other_display_or_bus() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop("");
    let bob = daemon.add_agent("bob");
    let mine = open_desktop(&daemon, None, [320, 240]).await;
    let his = open_desktop(&daemon, Some(&bob), [320, 240]).await;
    let his_env = reach_from(
        &daemon,
        Some(&bob),
        Some(&his),
        "printf '%s\\n%s\\n' \"$DISPLAY\" \"$DBUS_SESSION_BUS_ADDRESS\"",
    )
    .await;
    let his_env: Vec<String> = his_env["stdout"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    let [his_display, his_bus] = &his_env[..] else {
        panic!("bob's desktop's display and bus: {his_env:?}");
    };
    let person_x = display_number(&person.display);
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("a TCP listener");
    let port = tcp.local_addr().expect("its port").port();
    let a11y = persons_accessibility_bus(person);
    // The hostile program: the person's display by its name, by its abstract socket and by
    // its path; the person's session and accessibility buses; bob's display and bus.
    let attempts = format!(
        "reach person-xprop env DISPLAY={display} xprop -root\n\
         reach person-xdotool env DISPLAY={display} xdotool getmouselocation\n\
         connect person-abstract @/tmp/.X11-unix/X{person_x}\n\
         connect person-path /tmp/.X11-unix/X{person_x}\n\
         reach person-bus dbus-send --bus='{bus}' --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         reach person-a11y dbus-send --bus='{a11y}' --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         reach bob-x env DISPLAY={his_display} xprop -root\n\
         reach bob-bus dbus-send --bus='{his_bus}' --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         reach own-x xdotool getmouselocation\n\
         reach own-bus dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         reach own-a11y dbus-send --bus=\"$AT_SPI_BUS_ADDRESS\" --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         connect tcp tcp:{port}\n",
        display = person.display,
        bus = person.dbus_address,
    );
    let attacks = [
        "person-xprop",
        "person-xdotool",
        "person-abstract",
        "person-path",
        "person-bus",
        "person-a11y",
        "bob-x",
        "bob-bus",
    ];

    // From the person's desktop every one of them is reachable (the person's X server listens
    // on its abstract socket too): each refusal below is the agent's desktop's doing.
    let ordinary = reach_from(&daemon, None, None, &attempts).await;
    for name in attacks {
        assert_eq!(
            reached(&ordinary, name),
            "ok",
            "{name} from an ordinary run: {ordinary}"
        );
    }

    let confined = reach_from(&daemon, None, Some(&mine), &attempts).await;
    for name in attacks {
        assert_eq!(
            reached(&confined, name),
            "refused",
            "{name} reached from a run on the agent's desktop: {confined}"
        );
    }
    for name in ["own-x", "own-bus", "own-a11y"] {
        assert_eq!(reached(&confined, name), "ok", "{name}: {confined}");
    }
    // With Landlock scoping (this kernel has it) the run keeps its network; the fallback, an
    // empty network namespace, does not.
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    let landlock = doctor.to_string().contains("Landlock scoping (ABI");
    let tcp_expected = if landlock { "ok" } else { "refused" };
    assert_eq!(
        reached(&confined, "tcp"),
        tcp_expected,
        "{confined}\n{doctor}"
    );
    drop(tcp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_of_an_agent_confined_to_its_desktop_cannot_name_the_persons_display() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop(
        "[agents.boxed]\ndesktop = \"own\"\ndesktop_visible = false\ndesktop_size = [320, 240]\n",
    );
    let boxed = daemon.add_agent("boxed");
    let attempts = format!(
        "reach person-xprop env DISPLAY={display} xprop -root\n\
         reach person-bus dbus-send --bus='{bus}' --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         reach own-x xprop -root\n",
        display = person.display,
        bus = person.dbus_address,
    );
    // Its calls name no desktop: confinement places the run on its own.
    let confined = reach_from(&daemon, Some(&boxed), None, &attempts).await;
    assert_eq!(reached(&confined, "person-xprop"), "refused", "{confined}");
    assert_eq!(reached(&confined, "person-bus"), "refused", "{confined}");
    assert_eq!(reached(&confined, "own-x"), "ok", "{confined}");
    // The person's default agent, not confined, reaches the person's display as before.
    let free = reach_from(&daemon, None, None, &attempts).await;
    assert_eq!(reached(&free, "person-xprop"), "ok", "{free}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_session_on_an_agents_desktop_reaches_no_other_display() {
    let person = Desktop::shared();
    let daemon = Daemon::start_on_desktop("");
    let mine = open_desktop(&daemon, None, [320, 240]).await;
    let script = format!(
        "{REACH}\nreach person-xprop env DISPLAY={display} xprop -root\n\
         connect person-abstract @/tmp/.X11-unix/X{number}\n\
         reach own-x xprop -root\necho finished\n",
        display = person.display,
        number = display_number(&person.display),
    );
    // The same session on the person's desktop reaches the person's display both ways.
    let persons = session_output(&daemon, None, &script).await;
    assert_eq!(reached(&persons, "person-xprop"), "ok", "{persons}");
    assert_eq!(reached(&persons, "person-abstract"), "ok", "{persons}");
    let confined = session_output(&daemon, Some(&mine), &script).await;
    assert_eq!(reached(&confined, "person-xprop"), "refused", "{confined}");
    assert_eq!(
        reached(&confined, "person-abstract"),
        "refused",
        "{confined}"
    );
    assert_eq!(reached(&confined, "own-x"), "ok", "{confined}");
}

/// What a terminal session running `script` on `desktop` (`None`: the person's) shows until
/// it prints `finished`, as a [`reached`] reply.
async fn session_output(daemon: &Daemon, desktop: Option<&str>, script: &str) -> Value {
    let mut complications = json!({"timeout_ms": 20000});
    if let Some(desktop) = desktop {
        complications["desktop"] = json!(desktop);
    }
    let opened = call_as(
        daemon,
        None,
        json!({"surface": "shell", "command": "open",
               "args": {"argv": ["sh", "-c", script]}, "complications": complications}),
    )
    .await;
    assert_eq!(opened["ok"], true, "{opened}");
    let read = call_as(
        daemon,
        None,
        json!({"surface": "shell", "command": "read",
               "args": {"session": opened["session"], "until": "finished"},
               "complications": complications}),
    )
    .await;
    assert_eq!(read["met"], true, "{read}");
    json!({"stdout": read["output"].as_str().unwrap_or_default().replace('\r', "")})
}

/// A desktop opened while a run on another desktop is under way is out of that run's reach as
/// well: its bus, its private directory and its display, where the run still reaches its own
/// bus; an ordinary run reaches all three (the test can tell). The run signals that its sandbox
/// is made, waits for the test to name the new desktop, then tries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_opened_while_a_desktop_run_waits_is_out_of_its_reach() {
    let _person = Desktop::shared();
    let daemon = Daemon::start_on_desktop("");
    let first = open_desktop(&daemon, None, [320, 240]).await;
    let meeting = tempfile::tempdir_in("/tmp").expect("a directory the runs see");
    let meeting_path = meeting.path().display().to_string();
    // What both runs try of the later desktop, named in files the test writes.
    let attempts = format!(
        "bus=$(cat {meeting_path}/bus); x=$(cat {meeting_path}/x); dir=$(cat {meeting_path}/dir)\n\
         reach later-bus dbus-send --bus=\"$bus\" --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n\
         connect later-bus-path \"$dir/bus\"\n\
         reach later-dir ls \"$dir\"\n\
         reach later-x env DISPLAY=\"$x\" xprop -root\n\
         reach own-bus dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames\n"
    );
    let waiting = daemon.call_task(json!({
        "surface": "shell", "command": "run",
        "args": {"script": format!(
            "{REACH}\ntouch {meeting_path}/started\n\
             while [ ! -e {meeting_path}/ready ]; do sleep 0.05; done\n{attempts}"
        )},
        "complications": {"desktop": first, "timeout_ms": 120000},
    }));
    let started = meeting.path().join("started");
    tokio::task::block_in_place(|| {
        wait_for(
            "the run on the first desktop to start",
            Duration::from_secs(60),
            || started.exists().then_some(()),
        )
    });

    // The second desktop, opened now; its bus and display as a run on it sees them.
    let second = open_desktop(&daemon, None, [320, 240]).await;
    let env = reach_from(
        &daemon,
        None,
        Some(&second),
        "printf '%s\\n%s\\n' \"$DISPLAY\" \"$DBUS_SESSION_BUS_ADDRESS\"",
    )
    .await;
    let env: Vec<String> = env["stdout"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    let [display, bus] = &env[..] else {
        panic!("the second desktop's display and bus: {env:?}");
    };
    let bus_path = bus
        .strip_prefix("unix:path=")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("the second desktop's bus is a path: {bus}"));
    let dir = Path::new(bus_path).parent().expect("the bus's directory");
    std::fs::write(meeting.path().join("bus"), bus).unwrap();
    std::fs::write(meeting.path().join("x"), display).unwrap();
    std::fs::write(meeting.path().join("dir"), dir.display().to_string()).unwrap();
    std::fs::write(meeting.path().join("ready"), "").unwrap();

    let confined = waiting.await.expect("the waiting run's call");
    assert_eq!(confined["ok"], true, "{confined}\n{}", daemon.log_text());
    assert_eq!(confined["exit_code"], 0, "{confined}");
    for name in ["later-bus", "later-bus-path", "later-dir", "later-x"] {
        assert_eq!(
            reached(&confined, name),
            "refused",
            "{name}: a desktop opened while the run waited is in its reach: {confined}"
        );
    }
    assert_eq!(reached(&confined, "own-bus"), "ok", "{confined}");
    let ordinary = reach_from(&daemon, None, None, &attempts).await;
    for name in ["later-bus", "later-bus-path", "later-dir", "later-x"] {
        assert_eq!(reached(&ordinary, name), "ok", "{name}: {ordinary}");
    }
}

/// `[agents.NAME] desktops_on_disconnect = "close"`: an agent's desktops, and what ran on them,
/// end with its last connection (not with one of several); under the default (`keep`) another
/// agent's desktop outlives the connection that opened it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_desktops_end_with_its_last_connection_when_its_config_says_so() {
    let daemon = Daemon::start_on_desktop("[agents.leaver]\ndesktops_on_disconnect = \"close\"\n");
    let leaver = daemon.add_agent("leaver");
    let stayer = daemon.add_agent("stayer");
    // The leaver holds a connection while it works.
    let held = computer_ipc::Client::connect_as(&daemon.socket, Some(&leaver))
        .await
        .expect("the leaver's connection");
    let opened = computer_tests::structured(
        &held
            .call_raw(json!({"surface": "gui", "command": "desktop",
                             "args": {"op": "open", "size": [640, 480], "visible": false}}))
            .await
            .expect("open"),
    );
    assert_eq!(opened["ok"], true, "{opened}");
    let id = opened["desktop"]
        .as_str()
        .expect("a desktop id")
        .to_string();
    let title = "leaver-entry";
    start_app_on(&daemon, Some(&leaver), &id, title).await;
    let app = wait_for("the leaver's app", APP_BOUND, || {
        let pids = pids_running(title);
        (!pids.is_empty()).then_some(pids)
    });
    let list = json!({"surface": "gui", "command": "desktop", "args": {"op": "list"}});
    // Its other connections came and went: the held one keeps the desktop.
    let listed = call_as(&daemon, Some(&leaver), list.clone()).await;
    assert!(
        listed.to_string().contains(&id),
        "the desktop ended with a connection that was not the last: {listed}"
    );
    // The stayer's desktop, opened on a connection that ended at once.
    let kept = open_desktop(&daemon, Some(&stayer), [320, 240]).await;

    held.close().await;
    wait_for("the leaver's app to end", APP_BOUND, || {
        app.iter()
            .all(|pid| !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(*pid))
            .then_some(())
    });
    let gone = wait_for("the leaver's desktop to be gone", APP_BOUND, || {
        let listed = futures_block(call_as(&daemon, Some(&leaver), list.clone()));
        (!listed.to_string().contains(&id)).then_some(listed)
    });
    assert_eq!(gone["ok"], true, "{gone}");
    let stayers = call_as(&daemon, Some(&stayer), list).await;
    assert!(
        stayers.to_string().contains(&kept),
        "the stayer's desktop (keep, the default) ended with its connection: {stayers}"
    );
}

fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}
