//! Desktops of agents' own on a wlroots session: with the suite's headless sway as the person's
//! session, the daemon opens a visible desktop (a sway nested as a window in the person's
//! sway, checked with `swaymsg -t get_tree` on the person's IPC) and a headless one; an app
//! started there by `shell run` gets the desktop's Wayland socket and buses and no X display;
//! typed into through gui (`foot` in raw mode writing what it receives to a file) and a GTK
//! app's text read through ax; screenshots of the size asked for; a program on one agent's sway
//! desktop reaches its own Wayland and IPC sockets and not another agent's; closing, and
//! stopping the daemon, ends the app and sway, and closing ends a client started from outside
//! whose only tie to the desktop is its window there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use computer_tests::desktop::TestDesktop;
use computer_tests::wayland::Sway;
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

/// The suite's tests share one person's sway: one at a time owns its tree.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long an app on a fresh desktop may take to show.
const APP_BOUND: Duration = Duration::from_secs(60);

/// A daemon in the suite's sway session (the person's), with no X display. It runs as root,
/// which sway refuses: its desktops' sways run as the owner of the person's Wayland socket.
fn daemon() -> Daemon {
    Daemon::start_with_env("", &Sway::shared().env(), &["DISPLAY"])
}

async fn on_desktop(
    daemon: &Daemon,
    desktop: &str,
    surface: &str,
    command: &str,
    args: Value,
) -> Value {
    daemon
        .call_raw_once(json!({"surface": surface, "command": command, "args": args,
                              "complications": {"desktop": desktop}}))
        .await
}

/// Opens a desktop; its id, after checking the reply's kind and size.
async fn open(daemon: &Daemon, size: [u32; 2], visible: bool, kind: &str) -> String {
    let reply = daemon
        .call_raw_once(json!({"surface": "gui", "command": "desktop",
                              "args": {"op": "open", "size": size, "visible": visible}}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}\n{}", daemon.log_text());
    assert_eq!(reply["kind"], kind, "{reply}");
    assert_eq!(reply["size"], json!(size), "{reply}");
    reply["desktop"].as_str().expect("a desktop id").to_string()
}

async fn close(daemon: &Daemon, id: &str) {
    let closed = daemon
        .call_raw_once(json!({"surface": "gui", "command": "desktop",
                              "args": {"op": "close", "id": id}}))
        .await;
    assert_eq!(closed["closed"], json!(id), "{closed}");
}

/// Every running sway process (pid) started for an agent's desktop (`COMPUTER_DESKTOP` in its
/// environment), as found from outside the daemon.
fn desktop_sways() -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(pid, comm)| {
            comm == "sway"
                && environ(*pid)
                    .iter()
                    .any(|e| e.starts_with("COMPUTER_DESKTOP="))
        })
        .map(|(pid, _)| pid)
        .collect()
}

fn processes() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            running(pid).then(|| (pid, comm.trim().to_string()))
        })
        .collect()
}

fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` runs (a zombie has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// Every pid whose command line names `needle`.
fn pids_naming(needle: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The width and height of the PNG a screenshot reply holds (inline or as a file).
fn screenshot_size(reply: &Value) -> (u32, u32) {
    if let (Some(w), Some(h)) = (reply["width"].as_u64(), reply["height"].as_u64()) {
        return (w as u32, h as u32);
    }
    let bytes = if let Some(path) = reply["path"].as_str() {
        std::fs::read(path).expect("the screenshot file")
    } else {
        let data = reply["image"]
            .as_str()
            .unwrap_or_else(|| panic!("no image: {reply}"));
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64")
    };
    let image = image::load_from_memory(&bytes).expect("a PNG");
    (image.width(), image.height())
}

/// A file for `foot` to write what it receives into, in a directory of the test's own.
fn typed_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(format!("{name}.typed"));
    (dir, file)
}

/// What a run on the desktop sees of its session's variables.
async fn session_of_a_run(daemon: &Daemon, id: &str) -> Value {
    let reply = on_desktop(
        daemon,
        id,
        "shell",
        "run",
        json!({"script": "printf '%s\\n%s\\n%s\\n%s\\n%s' \"$WAYLAND_DISPLAY\" \"${DISPLAY-unset}\" \"$SWAYSOCK\" \"$XDG_RUNTIME_DIR\" \"$DBUS_SESSION_BUS_ADDRESS\""}),
    )
    .await;
    assert_eq!(reply["ok"], true, "{reply}");
    let stdout = reply["stdout"].as_str().unwrap_or_default().to_string();
    let lines: Vec<&str> = stdout.split('\n').collect();
    assert_eq!(lines.len(), 5, "{stdout:?}");
    json!({"wayland": lines[0], "display": lines[1], "swaysock": lines[2],
           "runtime": lines[3], "bus": lines[4]})
}

/// Starts `foot` on the desktop through a detached `shell run`, in raw mode writing what it
/// receives to `file`; its pids once `cat` has opened the file.
async fn start_foot(daemon: &Daemon, id: &str, app_id: &str, file: &Path) -> Vec<u32> {
    let script = format!("stty raw -echo; exec cat > '{}'", file.display());
    let reply = daemon
        .call_raw_once(json!({"surface": "shell", "command": "run",
               "args": {"argv": ["foot", "--app-id", app_id, "--title", app_id,
                                 "sh", "-c", script]},
               "complications": {"desktop": id, "detach": true}}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    wait_for("foot's cat to open its file", APP_BOUND, || {
        file.exists().then_some(())
    });
    pids_naming(&file.display().to_string())
}

/// Waits until the desktop's gui lists a window of `app_id`.
async fn wait_window(daemon: &Daemon, id: &str, app_id: &str) -> Value {
    tokio::task::block_in_place(|| {
        let runtime = tokio::runtime::Handle::current();
        wait_for(&format!("a window of {app_id} on {id}"), APP_BOUND, || {
            let listed = runtime.block_on(on_desktop(daemon, id, "gui", "windows", json!({})));
            listed["windows"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|w| w["title"] == app_id || w["app"] == app_id)
                .cloned()
        })
    })
}

/// Types `text` on the desktop through gui and waits until foot wrote exactly it.
async fn type_into_foot(daemon: &Daemon, id: &str, file: &Path, text: &str) {
    let typed = on_desktop(daemon, id, "gui", "type", json!({"text": text})).await;
    assert_eq!(typed["ok"], true, "{typed}\n{}", daemon.log_text());
    let got = computer_tests::try_wait_for(Duration::from_secs(10), || {
        (std::fs::read(file).unwrap_or_default() == text.as_bytes()).then_some(())
    });
    assert!(
        got.is_some(),
        "foot on {id} received {:?}, expected {text:?}",
        String::from_utf8_lossy(&std::fs::read(file).unwrap_or_default())
    );
}

/// Asserts a run on the desktop gets its Wayland socket (an absolute path in the desktop's
/// runtime directory), its sway IPC and bus, and no X display nor anything of the person's.
async fn assert_runs_on_the_desktop(daemon: &Daemon, id: &str) {
    let person = Sway::shared();
    let session = session_of_a_run(daemon, id).await;
    let wayland = session["wayland"].as_str().unwrap_or_default();
    let runtime = session["runtime"].as_str().unwrap_or_default();
    assert!(Path::new(wayland).is_absolute(), "{session}");
    assert!(
        wayland.starts_with(runtime) && !runtime.is_empty(),
        "the Wayland socket is not in the desktop's runtime dir: {session}"
    );
    assert_ne!(wayland, person.socket.display().to_string(), "{session}");
    assert_eq!(session["display"], "unset", "{session}");
    assert!(
        session["swaysock"]
            .as_str()
            .is_some_and(|s| s.starts_with(runtime)),
        "{session}"
    );
    assert_ne!(session["bus"], json!(person.dbus_address), "{session}");
    assert!(
        session["bus"].as_str().is_some_and(|b| b.contains(runtime)),
        "{session}"
    );
}

/// Asserts closing the desktop ends `pids` (its app) and its sway, and takes its window off
/// the person's sway.
async fn assert_close_ends_everything(daemon: &Daemon, id: &str, app: &[u32], sway: u32) {
    close(daemon, id).await;
    for &pid in app.iter().chain([&sway]) {
        assert!(!running(pid), "pid {pid} outlived desktop {id}");
    }
    assert!(
        !Sway::shared()
            .views()
            .iter()
            .any(|v| v["pid"].as_u64() == Some(u64::from(sway))),
        "the nested sway's window is still on the person's sway"
    );
    let after = on_desktop(daemon, id, "gui", "windows", json!({})).await;
    assert_eq!(
        after["ok"], false,
        "a closed desktop still answers: {after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visible_desktop_is_a_sway_nested_in_the_persons_sway() {
    let _one = ONE_AT_A_TIME.lock().await;
    let person = Sway::shared();
    let daemon = daemon();
    // A window of the person's, focused: opening the agent's desktop leaves the focus there.
    let (_person_dir, person_file) = typed_file("person");
    let script = format!("stty raw -echo; exec cat > '{}'", person_file.display());
    let persons_app = person.launch("foot", &["--app-id", "person-foot", "sh", "-c", &script]);
    person.wait_view(persons_app.pid());
    let person_focus = || {
        person
            .views()
            .into_iter()
            .find(|v| v["focused"] == true)
            .and_then(|v| v["pid"].as_u64())
    };
    wait_for("the person's foot to have the focus", APP_BOUND, || {
        (person_focus() == Some(u64::from(persons_app.pid()))).then_some(())
    });
    let before = desktop_sways();
    let id = open(&daemon, [800, 600], true, "sway-nested").await;

    // A new sway, shown as one floating window of the size asked for on the person's sway.
    let sway = wait_for("the desktop's sway", APP_BOUND, || {
        desktop_sways()
            .into_iter()
            .find(|pid| !before.contains(pid))
    });
    let window = person.wait_view(sway);
    assert_eq!(window["type"], "floating_con", "{window}");
    assert_eq!(
        (
            window["window_rect"]["width"].as_u64(),
            window["window_rect"]["height"].as_u64()
        ),
        (Some(800), Some(600)),
        "{window}"
    );
    // It runs as the owner of the person's socket, not as root (which sway refuses).
    let owner =
        std::fs::metadata(format!("/proc/{sway}")).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    assert_eq!(
        owner.ok(),
        std::fs::metadata(&person.socket)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
    );

    assert_eq!(
        person_focus(),
        Some(u64::from(persons_app.pid())),
        "the agent's desktop took the person's focus"
    );

    assert_runs_on_the_desktop(&daemon, &id).await;
    let (_dir, file) = typed_file("nested");
    let foot = start_foot(&daemon, &id, "agent-nested-foot", &file).await;
    wait_window(&daemon, &id, "agent-nested-foot").await;
    // The app is on the agent's sway, not the person's.
    assert!(
        !person
            .views()
            .iter()
            .any(|v| v["app_id"] == "agent-nested-foot"),
        "the agent's app shows on the person's sway"
    );
    type_into_foot(&daemon, &id, &file, "typed on a nested sway").await;
    // The person's window got none of it, and keeps the focus.
    assert_eq!(std::fs::read(&person_file).unwrap_or_default(), b"");
    assert_eq!(person_focus(), Some(u64::from(persons_app.pid())));

    let shot = on_desktop(&daemon, &id, "gui", "screenshot", json!({})).await;
    assert_eq!(shot["ok"], true, "{shot}");
    assert_eq!(screenshot_size(&shot), (800, 600), "{shot}");

    let listed = daemon
        .call_raw_once(json!({"surface": "gui", "command": "desktop", "args": {"op": "list"}}))
        .await;
    assert_eq!(listed["desktops"][0]["kind"], "sway-nested", "{listed}");

    assert_close_ends_everything(&daemon, &id, &foot, sway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_desktop_is_a_headless_sway_with_a_gtk_app_read_through_ax() {
    let _one = ONE_AT_A_TIME.lock().await;
    let person = Sway::shared();
    let daemon = daemon();
    let before = desktop_sways();
    let views_before = person.views().len();
    let id = open(&daemon, [640, 480], false, "sway-headless").await;
    let sway = wait_for("the desktop's sway", APP_BOUND, || {
        desktop_sways()
            .into_iter()
            .find(|pid| !before.contains(pid))
    });
    assert!(
        environ(sway).iter().any(|e| e == "WLR_BACKENDS=headless"),
        "{:?}",
        environ(sway)
    );
    assert_runs_on_the_desktop(&daemon, &id).await;

    let (_dir, file) = typed_file("headless");
    let foot = start_foot(&daemon, &id, "agent-headless-foot", &file).await;
    wait_window(&daemon, &id, "agent-headless-foot").await;
    type_into_foot(&daemon, &id, &file, "typed on a headless sway").await;

    let shot = on_desktop(&daemon, &id, "gui", "screenshot", json!({})).await;
    assert_eq!(shot["ok"], true, "{shot}");
    assert_eq!(screenshot_size(&shot), (640, 480), "{shot}");

    // A GTK app on the desktop's Wayland socket registers on its accessibility bus, and its
    // text reads through the desktop's ax.
    let title = "agent-wayland-entry";
    let started = daemon
        .call_raw_once(json!({"surface": "shell", "command": "run",
               "args": {"argv": ["zenity", "--entry", "--title", title,
                                 "--text", "words on wayland"]},
               "complications": {"desktop": id, "detach": true}}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    // The daemon's own wait: it answers once the label is there (or the bound passed).
    let waited = on_desktop(
        &daemon,
        &id,
        "ax",
        "wait",
        json!({"selector": "label \"words on wayland\"", "app": "zenity",
               "timeout_ms": APP_BOUND.as_millis() as u64}),
    )
    .await;
    assert!(
        waited["ok"] == true && waited["met"] == true,
        "zenity's label never read through ax on {id}: {waited}"
    );
    let found = on_desktop(
        &daemon,
        &id,
        "ax",
        "find",
        json!({"selector": "label", "app": "zenity"}),
    )
    .await;
    assert!(found.to_string().contains("words on wayland"), "{found}");
    // Typed into through the desktop's gui (its virtual keyboard, kept for the connection's
    // life), confirmed and read back through its ax.
    let window = wait_window(&daemon, &id, title).await;
    let focused = on_desktop(
        &daemon,
        &id,
        "gui",
        "focus",
        json!({"window": window["id"]}),
    )
    .await;
    assert_eq!(focused["ok"], true, "{focused}");
    let typed = on_desktop(
        &daemon,
        &id,
        "gui",
        "type",
        json!({"text": "gtk on wayland"}),
    )
    .await;
    assert_eq!(typed["ok"], true, "{typed}");
    assert_eq!(typed["effect"], "confirmed", "{typed}");
    let entry = on_desktop(
        &daemon,
        &id,
        "ax",
        "find",
        json!({"selector": "textInput", "app": "zenity", "include": ["value"]}),
    )
    .await;
    assert!(
        entry.to_string().contains("gtk on wayland"),
        "the entry does not read what was typed: {entry}"
    );
    // doctor lists it with its kind.
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert!(
        doctor.to_string().contains("sway-headless"),
        "doctor does not list the sway desktop: {doctor}"
    );
    // The person's sway got no window from any of it.
    assert_eq!(person.views().len(), views_before, "{:?}", person.views());
    let zenity = pids_naming(title);
    assert!(!zenity.is_empty(), "zenity's pid");

    let app: Vec<u32> = foot.into_iter().chain(zenity).collect();
    assert_close_ends_everything(&daemon, &id, &app, sway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_daemon_ends_its_sway_desktops() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut daemon = daemon();
    let before = desktop_sways();
    let id = open(&daemon, [320, 240], false, "sway-headless").await;
    let sway = wait_for("the desktop's sway", APP_BOUND, || {
        desktop_sways()
            .into_iter()
            .find(|pid| !before.contains(pid))
    });
    let (_dir, file) = typed_file("left-running");
    let foot = start_foot(&daemon, &id, "agent-left-foot", &file).await;
    assert!(!foot.is_empty(), "foot's pid");
    daemon.stop_with(libc::SIGTERM);
    for pid in foot.into_iter().chain([sway]) {
        wait_for(
            "the desktop's processes to end with the daemon",
            APP_BOUND,
            || (!running(pid)).then_some(()),
        );
    }
}

/// A program on one sway desktop, as a hostile one would try: connect to each Wayland and
/// sway IPC socket given (`NAME=PATH` arguments); one `NAME ok` or `NAME refused` line each.
const CONNECT_EACH: &str = r#"
for pair in "$@"; do
  name=${pair%%=*}; path=${pair#*=}
  if python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$path" 2>/dev/null
  then echo "$name ok"; else echo "$name refused"; fi
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_one_sway_desktop_reaches_its_own_sockets_and_not_anothers() {
    let _one = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let alice = daemon.add_agent("alice");
    let bob = daemon.add_agent("bob");
    let open_as = |token: String| {
        let daemon = &daemon;
        async move {
            let reply = daemon
                .call_raw_once_as(
                    &token,
                    json!({"surface": "gui", "command": "desktop",
                           "args": {"op": "open", "size": [320, 240], "visible": false}}),
                )
                .await;
            assert_eq!(reply["kind"], "sway-headless", "{reply}");
            reply["desktop"].as_str().expect("a desktop id").to_string()
        }
    };
    let hers = open_as(alice.clone()).await;
    let his = open_as(bob.clone()).await;
    let sockets_of = |token: String, id: String| {
        let daemon = &daemon;
        async move {
            let reply = daemon
                .call_raw_once_as(
                    &token,
                    json!({"surface": "shell", "command": "run",
                           "args": {"script": "printf '%s\\n%s' \"$WAYLAND_DISPLAY\" \"$SWAYSOCK\""},
                           "complications": {"desktop": id}}),
                )
                .await;
            assert_eq!(reply["ok"], true, "{reply}");
            let out = reply["stdout"].as_str().unwrap_or_default().to_string();
            let (wayland, ipc) = out.split_once('\n').expect("two lines");
            (wayland.to_string(), ipc.to_string())
        }
    };
    let (her_wayland, her_ipc) = sockets_of(alice.clone(), hers.clone()).await;
    let (his_wayland, his_ipc) = sockets_of(bob.clone(), his.clone()).await;
    assert_ne!(her_wayland, his_wayland);

    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        CONNECT_EACH.into(),
        "sh".into(),
    ];
    argv.extend([
        format!("own-wayland={his_wayland}"),
        format!("own-ipc={his_ipc}"),
        format!("other-wayland={her_wayland}"),
        format!("other-ipc={her_ipc}"),
    ]);
    let reply = daemon
        .call_raw_once_as(
            &bob,
            json!({"surface": "shell", "command": "run", "args": {"argv": argv},
                   "complications": {"desktop": his}}),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    let said = |name: &str| {
        reply["stdout"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name}: {reply}"))
            .to_string()
    };
    assert_eq!(said("own-wayland"), "ok", "{reply}");
    assert_eq!(said("own-ipc"), "ok", "{reply}");
    assert_eq!(said("other-wayland"), "refused", "{reply}");
    assert_eq!(said("other-ipc"), "refused", "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_from_outside_with_a_window_on_the_desktop_ends_at_close() {
    let _one = ONE_AT_A_TIME.lock().await;
    let daemon = daemon();
    let id = open(&daemon, [320, 240], false, "sway-headless").await;
    let session = session_of_a_run(&daemon, &id).await;
    let socket = PathBuf::from(session["wayland"].as_str().unwrap_or_default());
    // Started by the test, not the daemon, and naming the socket relative to its directory:
    // nothing in its environment names the desktop, only its window on sway does.
    let mut outsider = std::process::Command::new("foot");
    outsider
        .args([
            "--app-id",
            "outsider",
            "sh",
            "-c",
            "trap '' HUP; setsid sleep 617 & wait",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env(
            "XDG_RUNTIME_DIR",
            socket.parent().expect("the socket's directory"),
        )
        .env(
            "WAYLAND_DISPLAY",
            socket.file_name().expect("the socket's name"),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut outsider = computer_tests::desktop::spawn_tied(outsider);
    let pid = outsider.id();
    assert!(
        !environ(pid)
            .iter()
            .any(|e| e.contains(&socket.display().to_string())),
        "the outsider's environment names the socket"
    );
    wait_window(&daemon, &id, "outsider").await;
    // What runs in its terminal has a session of its own and ignores hangups, so foot's end
    // (when sway goes) would not take it: only foot being found by its window on the desktop,
    // and this by descent from foot, ends it.
    let inside = wait_for("the outsider's shell", APP_BOUND, || {
        let pids = pids_naming("sleep 617");
        (!pids.is_empty()).then_some(pids)
    });
    close(&daemon, &id).await;
    let ended = computer_tests::try_wait_for(APP_BOUND, || outsider.try_wait().ok().flatten());
    assert!(
        ended.is_some(),
        "foot (pid {pid}) outlived the desktop it had a window on"
    );
    for pid in inside {
        assert!(
            !running(pid),
            "what ran in the outsider's terminal (pid {pid}) outlived the desktop"
        );
    }
}
