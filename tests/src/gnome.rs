//! A private headless GNOME compositor (Mutter) for the GNOME suites, started once per suite
//! (see [`crate::suite`]) and torn down with the test process: a private session bus, then
//! `pipewire` and `wireplumber` on a runtime directory of the suite's own (Mutter's screen
//! casts reach clients over PipeWire), then
//! `mutter --headless --wayland --no-x11 --virtual-monitor 1920x1080`, which owns
//! `org.gnome.Mutter.RemoteDesktop` and `ScreenCast` on that bus. Mutter runs as root (unlike
//! sway). GTK apps reach it with `GDK_BACKEND=wayland` and register on AT-SPI through the bus.
//! A Secret Service (gnome-keyring, unlocked) on the same bus holds the person's consent.
//! Independent checkers: what the apps report (clicks, text, colours they paint).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::desktop::{
    App, Processes, TestDesktop, gi_python, log_dir_for, log_file, private_bus, spawn_tied,
};
use crate::keyring::Keyring;
use crate::wait_for;

/// The running compositor's coordinates.
pub struct Mutter {
    /// The bus, PipeWire, WirePlumber and Mutter; they die with the test process.
    _processes: Processes,
    /// The Secret Service on the compositor's bus.
    pub keyring: Keyring,
    /// The runtime directory (mode 0700) holding `wayland-0` and `pipewire-0`.
    pub runtime_dir: PathBuf,
    /// The private session bus Mutter owns its names on.
    pub dbus_address: String,
    pub log_dir: PathBuf,
}

/// Each suite has its own (the GNOME and portal suites both keep the person's consent in its
/// keychain).
impl TestDesktop for Mutter {
    fn start(suite: &str) -> Mutter {
        let log_dir = log_dir_for("mutter", suite);
        let log = |name: &str| log_file(&log_dir, name);
        let runtime_dir = log_dir.join("runtime");
        std::fs::create_dir_all(&runtime_dir).unwrap();
        std::fs::set_permissions(&runtime_dir, std::fs::Permissions::from_mode(0o700)).unwrap();

        let (dbus, dbus_address) = private_bus(
            None,
            &[("XDG_RUNTIME_DIR", runtime_dir.as_ref())],
            log("dbus.log"),
        );
        let mut processes = vec![dbus];
        let keyring = Keyring::on_bus(&dbus_address);
        let mut compositor = Mutter {
            _processes: Processes::default(),
            keyring,
            runtime_dir: runtime_dir.clone(),
            dbus_address,
            log_dir: log_dir.clone(),
        };
        let daemon = |program: &str, args: &[&str]| {
            let mut command = compositor.command(program);
            command
                .args(args)
                .stdin(Stdio::null())
                .stdout(log(&format!("{program}.out.log")))
                .stderr(log(&format!("{program}.log")));
            spawn_tied(command)
        };
        processes.push(daemon("pipewire", &[]));
        wait_for("PipeWire's socket", Duration::from_secs(30), || {
            runtime_dir.join("pipewire-0").exists().then_some(())
        });
        processes.push(daemon("wireplumber", &[]));
        processes.push(daemon(
            "mutter",
            &[
                "--headless",
                "--wayland",
                "--no-x11",
                "--virtual-monitor",
                "1920x1080",
            ],
        ));
        wait_for(
            "Mutter's Wayland socket and remote-desktop API",
            Duration::from_secs(60),
            || {
                (runtime_dir.join("wayland-0").exists() && compositor.owned(REMOTE_DESKTOP))
                    .then_some(())
            },
        );
        compositor._processes = Processes(processes);
        compositor
    }

    /// Mutter's Wayland socket and runtime directory, the private bus, GNOME's name.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WAYLAND_DISPLAY", "wayland-0".into()),
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
            ("XDG_SESSION_TYPE", "wayland".into()),
            ("XDG_CURRENT_DESKTOP", "GNOME".into()),
            ("DBUS_SESSION_BUS_ADDRESS", self.dbus_address.clone()),
            ("GDK_BACKEND", "wayland".into()),
        ]
    }

    /// The test's X display and a sway IPC socket.
    fn foreign_env(&self) -> &'static [&'static str] {
        &["DISPLAY", "SWAYSOCK"]
    }

    fn log_dir(&self) -> &Path {
        &self.log_dir
    }
}

impl Mutter {
    /// Whether `name` has an owner on the compositor's bus (asked with `dbus-send`).
    pub fn owned(&self, name: &str) -> bool {
        self.command("dbus-send")
            .args([
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                &format!("string:{name}"),
            ])
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("boolean true"))
    }
}

/// An independent screen cast of Mutter's primary monitor (`tests/clients/mutter_screencast.py`,
/// a session of its own): `gst-launch-1.0 pipewiresrc` takes frames from its PipeWire node.
pub struct IndependentCast {
    app: App,
    mutter: &'static Mutter,
    pub node: u32,
}

impl IndependentCast {
    /// A cast of the calling suite's compositor.
    #[track_caller]
    pub fn start() -> IndependentCast {
        let mutter = Mutter::shared();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/mutter_screencast.py");
        let mut command = mutter.command(&gi_python());
        command
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(mutter.log_dir.join("mutter_screencast.log")).unwrap(),
            ));
        let mut app = App(spawn_tied(command));
        let mut line = String::new();
        BufReader::new(app.0.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the screen cast prints its node");
        let node = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("a PipeWire node id, not {line:?}"));
        IndependentCast { app, mutter, node }
    }

    /// One frame through `gst-launch-1.0 pipewiresrc path=NODE num-buffers=1`, as a PNG file.
    pub fn capture(&self, path: &std::path::Path) -> Vec<u8> {
        let status = self
            .mutter
            .command("gst-launch-1.0")
            .args(["-q", "pipewiresrc"])
            .arg(format!("path={}", self.node))
            .args([
                "num-buffers=1",
                "!",
                "videoconvert",
                "!",
                "pngenc",
                "!",
                "filesink",
            ])
            .arg(format!("location={}", path.display()))
            .stdout(Stdio::null())
            .status()
            .expect("gst-launch-1.0 runs");
        assert!(status.success(), "gst-launch-1.0 failed");
        std::fs::read(path).expect("gst-launch's png")
    }

    pub fn pid(&self) -> u32 {
        self.app.pid()
    }
}

/// `secret-tool ARGS` on the calling suite's compositor's bus (an independent view of the
/// keychain); its stdout and stderr.
#[track_caller]
pub fn secret_tool(args: &[&str]) -> String {
    let out = Mutter::shared()
        .command("secret-tool")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("secret-tool runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Mutter's remote-desktop service name.
pub const REMOTE_DESKTOP: &str = "org.gnome.Mutter.RemoteDesktop";

/// Where the probe app paints its colour patches (screen coordinates: it is fullscreen).
pub const RED_PATCH: (i32, i32, i32, i32) = (200, 300, 200, 100);
pub const BLUE_PATCH: (i32, i32, i32, i32) = (1500, 800, 160, 120);

/// `tests/clients/gtk_fullscreen_probe.py` on the shared Mutter: a fullscreen GTK window on
/// Wayland (so its own coordinates are the screen's) with a text entry that has the keyboard
/// focus; it paints two colour patches and reports, one JSON line each, every button press
/// with its point and every change of the entry's text.
pub struct Probe {
    app: App,
    pub title: String,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Probe {
    /// The probe on the calling suite's compositor.
    #[track_caller]
    pub fn launch(title: &str) -> Probe {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/gtk_fullscreen_probe.py");
        let python = gi_python();
        // Through `env` (which execs, keeping the pid).
        let mut app =
            Mutter::shared().launch("env", &[python.as_str(), script.to_str().unwrap(), title]);
        let out = app.0.stdout.take().expect("stdout piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(value);
                }
            }
        });
        let probe = Probe {
            app,
            title: title.into(),
            lines,
        };
        probe.wait_for_line("the probe to draw its first frame", |v| v["drawn"] == true);
        probe
    }

    pub fn pid(&self) -> u32 {
        self.app.pid()
    }

    /// Waits (bounded) for a reported line that `matches`; returns it.
    pub fn wait_for_line(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        wait_for(what, Duration::from_secs(20), || {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .find(|v| matches(v))
                .cloned()
        })
    }

    /// Every line reported so far.
    pub fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// The entry's text as last reported.
    pub fn text(&self) -> Option<String> {
        self.lines()
            .iter()
            .rev()
            .find_map(|v| v["text"].as_str().map(str::to_string))
    }
}

/// xdg-desktop-portal (1.16) with xdg-desktop-portal-gnome (43) on the shared Mutter's bus, for
/// the portal suite: the gnome portal backend serves RemoteDesktop and ScreenCast on top of
/// Mutter's API and shows its consent dialog as a GTK window on that Mutter, which
/// `tests/clients/portal_dialog.py` answers through AT-SPI as a person would. Started once per
/// suite; both die with the test process.
pub struct Portal {
    _processes: Processes,
    /// The compositor whose bus the portal is on.
    mutter: &'static Mutter,
    /// The process showing the dialog.
    pub dialog_pid: u32,
}

impl Portal {
    /// The portal on the calling suite's compositor, started on first use.
    #[track_caller]
    pub fn shared() -> &'static Portal {
        let suite = crate::suite::calling_suite();
        crate::suite::per_suite(suite, || Portal::start(Mutter::shared_of(suite)))
    }

    fn start(mutter: &'static Mutter) -> Portal {
        let daemon = |program: &str| {
            // Started here rather than activated by the bus: the bus daemon's environment has
            // no WAYLAND_DISPLAY, and the dialog must reach Mutter.
            let mut command = mutter.command(program);
            let name = program.rsplit('/').next().unwrap_or(program);
            command
                .arg("--replace")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(
                    std::fs::File::create(mutter.log_dir.join(format!("{name}.log"))).unwrap(),
                ));
            spawn_tied(command)
        };
        let backend = daemon("/usr/libexec/xdg-desktop-portal-gnome");
        wait_for(
            "xdg-desktop-portal-gnome on the bus",
            Duration::from_secs(30),
            || {
                mutter
                    .owned("org.freedesktop.impl.portal.desktop.gnome")
                    .then_some(())
            },
        );
        let portal = daemon("/usr/libexec/xdg-desktop-portal");
        wait_for(
            "xdg-desktop-portal on the bus",
            Duration::from_secs(30),
            || mutter.owned("org.freedesktop.portal.Desktop").then_some(()),
        );
        Portal {
            mutter,
            dialog_pid: backend.id(),
            _processes: Processes(vec![backend, portal]),
        }
    }

    /// Answers the portal's remote-desktop dialog as a person would (through AT-SPI):
    /// `share` with remote interaction allowed or not, or `cancel`. Waits (bounded) for the
    /// dialog; its JSON report.
    pub fn answer(&self, answer: &str, allow_input: bool) -> Value {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/portal_dialog.py");
        let run = || {
            let mut command = self.mutter.command(&gi_python());
            command
                .arg(&script)
                .arg(self.dialog_pid.to_string())
                .arg(answer);
            if allow_input {
                command.arg("--allow-input");
            }
            command
                .stdin(Stdio::null())
                .output()
                .expect("portal_dialog.py runs")
        };
        // libatspi through PyGObject now and then dies of SIGSEGV while a new GTK 4 dialog
        // builds its tree; the dialog is still there, unanswered, for the next try.
        let mut out = run();
        for _ in 0..3 {
            if out.status.code().is_some() {
                break;
            }
            out = run();
        }
        let report = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(report.trim()).unwrap_or_else(|_| {
            panic!(
                "portal_dialog.py ({}): {report} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Whether the dialog is showing now (one look, no wait).
    pub fn dialog_showing(&self) -> bool {
        let report = self.answer("look", false);
        report["showing"] == true
    }
}
