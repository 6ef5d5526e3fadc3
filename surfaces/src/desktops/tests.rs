//! Agents' desktops on real components: Xvfb, Xephyr, openbox, dbus-daemon, AT-SPI and a GTK
//! app (zenity), driven through the desktops' own gui and ax surfaces.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use computer_ipc::Complications;
use serde_json::{Value, json};

use super::{AgentDesktop, DesktopKind, DesktopSpec, HostSession, ending};
use crate::{CallContext, Outcome, Surface};

/// How long a condition on a desktop may take to hold (GTK apps start slowly on a loaded
/// machine).
const BOUND: Duration = Duration::from_secs(60);

/// Waits until `check` gives a value; panics naming `what` after [`BOUND`].
fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            started.elapsed() < BOUND,
            "{what} did not happen in {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn context(dir: &Path) -> CallContext {
    CallContext {
        call_id: "c1".into(),
        artifact_dir: dir.to_path_buf(),
        protected: Arc::default(),
        cancel: Default::default(),
        artifact_quota: Arc::new(crate::ArtifactQuota::unlimited()),
        output_bytes: Arc::default(),
        secrets: Default::default(),
        agent: "default".into(),
        tools: None,
        run_ended: None,
        login_files_writable: Vec::new(),
    }
}

/// The desktop's surface named `name` (gui or ax).
fn surface(desktop: &AgentDesktop, name: computer_ipc::SurfaceName) -> Arc<dyn Surface> {
    desktop
        .surfaces()
        .into_iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("the desktop has no {name} surface"))
}

/// One call on a surface, as the daemon makes it (prepare, then run); its outcome.
fn call(surface: &Arc<dyn Surface>, command: &str, args: Value) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let args = args.as_object().cloned().unwrap_or_default();
    let prepared = surface
        .prepare(command, &args, &Complications::default())
        .unwrap_or_else(|e| panic!("{command} refused: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(prepared.run(context(dir.path())))
        .unwrap_or_else(|e| panic!("{command} failed: {e:?}"))
}

/// The windows the desktop's gui lists: (title, pid).
fn gui_windows(desktop: &AgentDesktop) -> Vec<(String, Option<u64>)> {
    let gui = surface(desktop, computer_ipc::SurfaceName::Gui);
    let outcome = call(&gui, "windows", json!({}));
    outcome.fields["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["title"].as_str().unwrap_or("").to_string(),
                w["pid"].as_u64(),
            )
        })
        .collect()
}

/// The apps the desktop's ax surface lists on its accessibility bus: (pid, window names).
fn ax_apps(desktop: &AgentDesktop) -> Vec<(Option<u64>, Vec<String>)> {
    let ax = surface(desktop, computer_ipc::SurfaceName::Ax);
    let outcome = call(&ax, "apps", json!({"format": "json"}));
    let text = String::from_utf8(outcome.texts[0].head.clone()).unwrap();
    let list: Vec<Value> = serde_json::from_str(&text).unwrap();
    list.iter()
        .map(|app| {
            let windows = app["windows"]
                .as_array()
                .map(|ws| {
                    ws.iter()
                        .map(|w| w["name"].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default();
            (app["pid"].as_u64(), windows)
        })
        .collect()
}

/// A command on the desktop, as a contained run would get it: its env set, the person's
/// session's variables removed.
fn on(desktop: &AgentDesktop, program: &str) -> Command {
    let mut command = Command::new(program);
    for name in desktop.removed_env() {
        command.env_remove(name);
    }
    command
        .envs(desktop.env().iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// A zenity entry dialog titled `title` on the desktop; it prints what is typed into it.
fn entry_dialog(desktop: &AgentDesktop, title: &str) -> Child {
    on(desktop, "zenity")
        .args(["--entry", "--title", title, "--text", "Type here"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("zenity starts")
}

fn headless(size: (u32, u32)) -> AgentDesktop {
    AgentDesktop::open_in(
        &DesktopSpec {
            size,
            visible: false,
        },
        &HostSession::default(),
    )
    .expect("a headless desktop opens")
}

/// A fresh headless desktop of `size`: its kind and size, a screenshot of that size, its
/// variables and sockets; what it took and holds, reported. Its idle resident memory.
fn assert_fresh(size: (u32, u32)) -> (AgentDesktop, Arc<dyn Surface>, u64) {
    let started = Instant::now();
    let desktop = headless(size);
    let opened = started.elapsed();
    assert_eq!(desktop.kind(), DesktopKind::Xvfb);
    assert_eq!(desktop.size(), size);
    let gui = surface(&desktop, computer_ipc::SurfaceName::Gui);
    let shot = call(&gui, "screenshot", json!({}));
    let first_screenshot = started.elapsed();
    assert_eq!(
        (
            shot.fields["width"].as_u64(),
            shot.fields["height"].as_u64()
        ),
        (Some(u64::from(size.0)), Some(u64::from(size.1))),
        "a screenshot has the desktop's size"
    );
    let idle_bytes = desktop.resident_bytes();
    eprintln!(
        "headless desktop: open {} ms, first screenshot {} ms, resident {} KiB in {} processes",
        opened.as_millis(),
        first_screenshot.as_millis(),
        idle_bytes / 1024,
        desktop.pids().len()
    );
    for pid in desktop.pids() {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let kib = ending::resident_bytes(pid) / 1024;
        eprintln!("  {pid} {}: {kib} KiB", name.trim());
    }
    let env: std::collections::HashMap<_, _> = desktop.env().iter().cloned().collect();
    for name in [
        "DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
        "AT_SPI_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
    ] {
        assert!(env.contains_key(name), "env() sets {name}: {env:?}");
    }
    for socket in desktop.sockets() {
        assert!(socket.exists(), "{} exists", socket.display());
    }
    (desktop, gui, idle_bytes)
}

/// What runs on `desktop` ends at its close: an app, a process that cleared its environment
/// (found as the descendant of one that did not), and its servers.
fn assert_close_ends_everything(desktop: AgentDesktop, idle_bytes: u64) {
    let mut app = entry_dialog(&desktop, "left-open");
    let mut shell = on(&desktop, "sh")
        .args(["-c", "env -i sleep 600 & echo $!; wait"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let cleared: u32 = line.trim().parse().unwrap();
    wait_for("the second dialog's window", || {
        gui_windows(&desktop)
            .iter()
            .any(|(title, _)| title == "left-open")
            .then_some(())
    });
    let found = desktop.pids();
    for pid in [app.id(), shell.id(), cleared] {
        assert!(found.contains(&pid), "pids() has {pid}: {found:?}");
    }
    assert!(desktop.resident_bytes() > idle_bytes);
    let servers = desktop.running.server_pids();
    let closing = Instant::now();
    desktop.close();
    eprintln!("closing took {} ms", closing.elapsed().as_millis());
    assert!(app.try_wait().unwrap().is_some(), "the app ended at close");
    assert!(
        shell.try_wait().unwrap().is_some(),
        "the shell ended at close"
    );
    assert!(
        !ending::alive(cleared),
        "the process with a cleared env ended"
    );
    for pid in servers {
        assert!(!ending::alive(pid), "server {pid} ended at close");
    }
}

#[test]
fn a_headless_desktop_shows_its_app_to_its_own_surfaces_only_and_ends_it_at_close() {
    let (desktop, gui, idle_bytes) = assert_fresh((800, 600));
    // A second desktop stands for the person's (or another agent's): neither sees the other's.
    let other = headless((640, 480));
    let mut app = entry_dialog(&desktop, "agent-dialog");
    let mut others_app = entry_dialog(&other, "other-dialog");
    let pid = u64::from(app.id());
    let others_pid = u64::from(others_app.id());
    wait_for("the dialog's window in the desktop's gui windows", || {
        gui_windows(&desktop)
            .iter()
            .any(|(title, p)| title == "agent-dialog" && *p == Some(pid))
            .then_some(())
    });
    wait_for(
        "the other dialog's window in the other desktop's gui windows",
        || {
            gui_windows(&other)
                .iter()
                .any(|(title, _)| title == "other-dialog")
                .then_some(())
        },
    );
    assert!(
        !gui_windows(&desktop)
            .iter()
            .any(|(title, _)| title == "other-dialog"),
        "a desktop's gui lists no window of another display"
    );
    let apps = wait_for("the dialog on the desktop's accessibility bus", || {
        let apps = ax_apps(&desktop);
        apps.iter()
            .any(|(p, windows)| *p == Some(pid) && windows.iter().any(|w| w == "agent-dialog"))
            .then_some(apps)
    });
    assert!(
        !apps.iter().any(|(p, _)| *p == Some(others_pid)),
        "the other desktop's app is not on this desktop's bus: {apps:?}"
    );
    let others = wait_for("the other dialog on the other bus", || {
        let apps = ax_apps(&other);
        apps.iter()
            .any(|(p, _)| *p == Some(others_pid))
            .then_some(apps)
    });
    assert!(
        !others.iter().any(|(p, _)| *p == Some(pid)),
        "this desktop's app is not on the other's bus: {others:?}"
    );

    // Typing through the desktop's gui lands in its app: zenity prints the entry on Return.
    call(&gui, "type", json!({"text": "typed on its own desktop\n"}));
    let mut printed = String::new();
    app.stdout
        .take()
        .unwrap()
        .read_to_string(&mut printed)
        .unwrap();
    assert_eq!(printed.trim(), "typed on its own desktop");
    assert!(app.wait().unwrap().success());

    assert_close_ends_everything(desktop, idle_bytes);
    assert!(
        others_app.try_wait().unwrap().is_none(),
        "the other desktop's app runs on"
    );
    other.close();
    assert!(others_app.try_wait().unwrap().is_some());
}

#[test]
fn a_visible_desktop_is_a_nested_x_server_shown_on_the_persons_display() {
    // The person's display: a bare desktop of its own here.
    let person = headless((1024, 768));
    let persons_display = person
        .env()
        .iter()
        .find(|(k, _)| k == "DISPLAY")
        .map(|(_, v)| v.clone())
        .unwrap();
    let desktop = AgentDesktop::open_in(
        &DesktopSpec {
            size: (640, 400),
            visible: true,
        },
        &HostSession {
            display: Some(persons_display),
            ..HostSession::default()
        },
    )
    .expect("a visible desktop opens");
    assert_eq!(desktop.kind(), DesktopKind::Xephyr);
    let shown = wait_for("the desktop's window on the person's display", || {
        gui_windows(&person)
            .into_iter()
            .find(|(title, _)| title.starts_with("computer: agent desktop"))
    });
    assert!(
        shown
            .1
            .is_some_and(|pid| desktop.running.server_pids().contains(&(pid as u32)))
    );
    let gui = surface(&desktop, computer_ipc::SurfaceName::Gui);
    let shot = call(&gui, "screenshot", json!({}));
    assert_eq!(
        (
            shot.fields["width"].as_u64(),
            shot.fields["height"].as_u64()
        ),
        (Some(640), Some(400))
    );
    let mut app = entry_dialog(&desktop, "inside-xephyr");
    wait_for("the dialog inside the nested desktop", || {
        gui_windows(&desktop)
            .iter()
            .any(|(title, _)| title == "inside-xephyr")
            .then_some(())
    });
    assert!(
        !gui_windows(&person)
            .iter()
            .any(|(title, _)| title == "inside-xephyr"),
        "the person's display lists only the nested desktop's window, not its apps"
    );
    call(&gui, "type", json!({"text": "nested\n"}));
    let mut printed = String::new();
    app.stdout
        .take()
        .unwrap()
        .read_to_string(&mut printed)
        .unwrap();
    assert_eq!(printed.trim(), "nested");
    assert!(app.wait().unwrap().success());
    desktop.close();
    wait_for(
        "the nested desktop's window gone from the person's display",
        || {
            (!gui_windows(&person)
                .iter()
                .any(|(title, _)| title.starts_with("computer: agent desktop")))
            .then_some(())
        },
    );
}

#[test]
fn a_desktop_of_an_impossible_size_is_refused_before_anything_starts() {
    let refused = AgentDesktop::open_in(
        &DesktopSpec {
            size: (10, 600),
            visible: false,
        },
        &HostSession::default(),
    );
    let Err(why) = refused else {
        panic!("a 10x600 desktop opened");
    };
    assert!(
        matches!(why, super::DesktopError::InvalidSize { width: 10, .. }),
        "{why}"
    );
    assert!(why.to_string().contains("64 to 8192"), "{why}");
}
