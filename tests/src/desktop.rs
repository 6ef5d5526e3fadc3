//! The desktop the surface suites drive. On Linux a private headless one: Xvfb, an EWMH window
//! manager (openbox), a private D-Bus session bus with AT-SPI enabled, started once per suite
//! (see [`crate::suite`]) and torn down with the test process: every process is spawned from
//! one long-lived thread with PR_SET_PDEATHSIG, so nothing outlives the test process (and
//! nothing holds CI's output pipes open). On macOS the runner's own desktop (the logged-in
//! Aqua session: WindowServer, accessibility, Apple events), which the harness neither starts
//! nor stops; apps it launches end when their [`App`] guard drops.

use std::io::Read;
#[cfg(target_os = "linux")]
use std::io::{BufRead, BufReader};
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
#[cfg(target_os = "linux")]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
#[cfg(target_os = "linux")]
use std::time::Duration;

use crate::Daemon;
#[cfg(target_os = "linux")]
use crate::wait_for;

/// The running desktop's coordinates, for child processes and for the daemon.
#[derive(Debug)]
pub struct Desktop {
    /// Xvfb, the bus and the window manager; they end when a private desktop drops, and die
    /// with the test process (PR_SET_PDEATHSIG). None on macOS, whose desktop is the session's
    /// own.
    _processes: Processes,
    /// `:N` on Linux; empty on macOS (no X display).
    pub display: String,
    /// The private session bus on Linux; empty on macOS.
    pub dbus_address: String,
    /// Where the processes' logs go.
    pub log_dir: PathBuf,
    /// For a desktop with a person ([`Desktop::private_with_a_person`]): the outer X server
    /// whose input reaches this desktop through its own (non-XTEST) devices.
    pub person_display: Option<String>,
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Every child is spawned from this thread: PR_SET_PDEATHSIG fires when the spawning *thread*
/// exits, so it must be one that lives as long as the process.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("desktop-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
                // The channel lives in a static and never closes: park so the thread (and with
                // it the death signal) lasts until the process exits.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawner thread");
        Mutex::new(requests)
    })
}

/// Spawns `command` so that it dies with the test process (on Linux; elsewhere there is no
/// parent-death signal, and only [`App`]'s drop ends it).
pub fn spawn_tied(
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))] mut command: Command,
) -> Child {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and only changes this (child) process's own settings.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    spawner()
        .lock()
        .unwrap()
        .send((command, reply))
        .expect("spawner alive");
    answer.recv().expect("spawner answers").expect("spawn")
}

/// The processes a test desktop (or bus) runs, ended when it drops, the last started first
/// (a shared one lives in a static, as long as the test process).
#[derive(Debug, Default)]
pub(crate) struct Processes(pub(crate) Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for process in self.0.iter_mut().rev() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

impl Desktop {
    /// A desktop of the test's own, for what would disturb the shared one (a grabbed or stopped
    /// X server); it ends when dropped.
    pub fn private() -> Desktop {
        Desktop::start(&private_label())
    }

    /// A private desktop whose input devices are not XTEST ones, as a person's mouse and
    /// keyboard are not: its X server is Xephyr, shown full-size at 0,0 on a bare Xvfb of its
    /// own; input sent to that outer server ([`Desktop::person_command`]) reaches this desktop
    /// through Xephyr's own devices, as from a hand on the desk. XTEST input sent to this
    /// desktop (the daemon's, `xdotool` here) comes from its XTEST devices as on any server.
    #[cfg(target_os = "linux")]
    pub fn private_with_a_person() -> Desktop {
        Desktop::start_on(&private_label(), true)
    }

    /// Elsewhere the desk is the session's own, where no input can be told the person's by
    /// construction: the suites that need one are Linux's.
    #[cfg(not(target_os = "linux"))]
    pub fn private_with_a_person() -> Desktop {
        panic!(
            "a desktop with a person's own input devices (Xephyr inside Xvfb) exists on Linux only"
        )
    }

    /// A command on the outer server of a desktop with a person: `xdotool` there is the
    /// person's hand (pointer moves at the same coordinates, clicks, keys to the focused
    /// window).
    pub fn person_command(&self, program: &str) -> Command {
        let outer = self
            .person_display
            .as_ref()
            .expect("a desktop made with Desktop::private_with_a_person");
        let mut command = Command::new(program);
        command
            .env("DISPLAY", outer)
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        command
    }

    /// The session's own desktop: there is nothing to start, only a place for logs. Surface
    /// suites on macOS need a logged-in GUI session (GitHub's macOS runners have one).
    #[cfg(target_os = "macos")]
    fn start_on_this_platform(label: &str) -> Desktop {
        Desktop {
            _processes: Processes::default(),
            display: String::new(),
            dbus_address: String::new(),
            log_dir: log_dir_for("desktop", label),
            person_display: None,
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    fn start_on_this_platform(_label: &str) -> Desktop {
        panic!(
            "the test desktop exists on Linux (Xvfb, openbox, AT-SPI) and macOS (the session's \
             own) only"
        )
    }

    #[cfg(target_os = "linux")]
    fn start_on_this_platform(label: &str) -> Desktop {
        Desktop::start_on(label, false)
    }

    /// Starts an X server (`Xvfb`, or `Xephyr` inside `outer`) on a free display; returns it
    /// and the display once it answers.
    #[cfg(target_os = "linux")]
    fn start_x_server(outer: Option<&str>, log: Stdio) -> (Child, String) {
        // The server picks a free display and writes its number to the fd we give it.
        let (read_end, write_end) = pipe();
        let mut server = match outer {
            None => {
                let mut xvfb = Command::new("Xvfb");
                xvfb.args(["-screen", "0", "1920x1080x24"]);
                xvfb
            }
            Some(outer) => {
                let mut xephyr = Command::new("Xephyr");
                // Not grabbing the outer server's input: the test's hand there stays free.
                xephyr
                    .args(["-screen", "1920x1080x24", "-no-host-grab"])
                    .env("DISPLAY", outer);
                xephyr
            }
        };
        server
            .args(["-displayfd", &write_end.as_raw_fd().to_string()])
            .args(["-nolisten", "tcp"]);
        let keep_fd = write_end.as_raw_fd();
        // SAFETY: fcntl on an fd we own, in the child before exec, to let it survive exec.
        unsafe {
            server.pre_exec(move || {
                let flags = libc::fcntl(keep_fd, libc::F_GETFD);
                libc::fcntl(keep_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                Ok(())
            });
        }
        server
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let server = spawn_tied(server);
        drop(write_end);
        let mut number = String::new();
        BufReader::new(std::fs::File::from(read_end))
            .read_line(&mut number)
            .expect("the X server writes its display number");
        let display = format!(":{}", number.trim());
        wait_for("the X server", Duration::from_secs(60), || {
            Command::new("xdpyinfo")
                .args(["-display", &display])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .ok()
                .filter(|s| s.success())
        });
        (server, display)
    }

    /// The desktop, on Xvfb or (`with_a_person`) on Xephyr inside a bare Xvfb.
    #[cfg(target_os = "linux")]
    fn start_on(label: &str, with_a_person: bool) -> Desktop {
        let log_dir = log_dir_for("desktop", label);
        let log = |name: &str| log_file(&log_dir, name);

        let mut servers = Vec::new();
        let mut person_display = None;
        if with_a_person {
            let (outer, outer_display) = Desktop::start_x_server(None, log("xvfb-outer.log"));
            servers.push(outer);
            person_display = Some(outer_display);
        }
        let (xvfb, display) = Desktop::start_x_server(
            person_display.as_deref(),
            log(if with_a_person {
                "xephyr.log"
            } else {
                "xvfb.log"
            }),
        );

        // A private session bus, before any GTK app, so none autolaunches a stray one.
        let (dbus, dbus_address) =
            private_bus(None, &[("DISPLAY", display.as_ref())], log("dbus.log"));

        // openbox has been seen (rarely, on a loaded machine) to come up without ever setting
        // its EWMH check window; a window manager that is gone or silent after a while is
        // replaced, a few times at most.
        let start_openbox = || {
            let mut openbox = Command::new("openbox");
            openbox
                .env("DISPLAY", &display)
                .env("DBUS_SESSION_BUS_ADDRESS", &dbus_address)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log("openbox.log"));
            spawn_tied(openbox)
        };
        let wm_ready = || {
            Command::new("xprop")
                .args(["-display", &display, "-root", "_NET_SUPPORTING_WM_CHECK"])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("window id"))
        };
        let mut openbox = start_openbox();
        for attempt in 1..=4 {
            let ready = crate::try_wait_for(Duration::from_secs(15), || wm_ready().then_some(()));
            if ready.is_some() {
                break;
            }
            assert!(
                attempt < 4,
                "the window manager never came up on {display} (openbox: {:?}; root's \
                 _NET_SUPPORTING_WM_CHECK: {:?}; logs in {})",
                openbox.try_wait(),
                Command::new("xprop")
                    .args(["-display", &display, "-root", "_NET_SUPPORTING_WM_CHECK"])
                    .output()
                    .map(|out| String::from_utf8_lossy(&out.stdout).into_owned()
                        + &String::from_utf8_lossy(&out.stderr)),
                log_dir.display()
            );
            let _ = openbox.kill();
            let _ = openbox.wait();
            openbox = start_openbox();
        }

        servers.extend([xvfb, dbus, openbox]);
        let desktop = Desktop {
            _processes: Processes(servers),
            display,
            dbus_address,
            log_dir,
            person_display,
        };
        // AccessKit-based apps (egui) register on AT-SPI only once this is set.
        let status = desktop
            .command("dbus-send")
            .args([
                "--session",
                "--print-reply",
                "--dest=org.a11y.Bus",
                "/org/a11y/bus",
                "org.freedesktop.DBus.Properties.Set",
                "string:org.a11y.Status",
                "string:IsEnabled",
                "variant:boolean:true",
            ])
            .stdout(Stdio::null())
            .status()
            .expect("dbus-send");
        assert!(
            status.success(),
            "could not enable AT-SPI on the private bus"
        );
        desktop
    }

    /// A connection of the test's own to the desktop's X server, and its root window (Linux:
    /// macOS has no X display).
    pub fn x_connection(&self) -> (x11rb::rust_connection::RustConnection, u32) {
        use x11rb::connection::Connection;
        let (conn, screen) =
            x11rb::connect(Some(&self.display)).expect("connect to the desktop's X server");
        let root = conn.setup().roots[screen].root;
        (conn, root)
    }

    /// A window's place and size as xwininfo reads them, from outside the daemon:
    /// (x, y, width, height).
    pub fn xwininfo_bounds(&self, window: &str) -> (i64, i64, i64, i64) {
        let out = self.tool_output("xwininfo", &["-id", window]);
        let get = |label: &str| -> i64 {
            out.lines()
                .find_map(|l| l.trim().strip_prefix(label))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("xwininfo has no {label}: {out}"))
        };
        (
            get("Absolute upper-left X:"),
            get("Absolute upper-left Y:"),
            get("Width:"),
            get("Height:"),
        )
    }
}

impl TestDesktop for Desktop {
    fn start(label: &str) -> Desktop {
        Desktop::start_on_this_platform(label)
    }

    /// The X display, the private bus and the X11 session's markers on Linux; nothing on macOS,
    /// where every process of the session is on the desktop.
    fn env(&self) -> Vec<(&'static str, String)> {
        if cfg!(target_os = "macos") {
            return Vec::new();
        }
        vec![
            ("DISPLAY", self.display.clone()),
            ("DBUS_SESSION_BUS_ADDRESS", self.dbus_address.clone()),
            ("XDG_SESSION_TYPE", "x11".into()),
            ("GDK_BACKEND", "x11".into()),
            ("NO_AT_BRIDGE", "0".into()),
        ]
    }

    /// A Wayland display of the test's own session (and on macOS, where the desktop is the
    /// session's own, an X display or bus of the test's environment as well).
    fn foreign_env(&self) -> &'static [&'static str] {
        if cfg!(target_os = "macos") {
            &["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
        } else {
            &["WAYLAND_DISPLAY"]
        }
    }

    fn log_dir(&self) -> &Path {
        &self.log_dir
    }
}

/// What a suite needs from any test desktop (the X11 [`Desktop`], sway's
/// [`crate::wayland::Sway`], GNOME's [`crate::gnome::Mutter`]): the environment that puts a
/// process on it and on no other, commands and long-lived apps there, where its processes log,
/// and a daemon that serves it. One per suite ([`TestDesktop::shared`]), or one of the test's
/// own ([`TestDesktop::start`]).
pub trait TestDesktop {
    /// Starts one, its processes' logs in a folder named after `label`; its processes end when
    /// it drops, or with the test process at the latest.
    fn start(label: &str) -> Self
    where
        Self: Sized;

    /// The environment that puts a process (an app, a tool or the daemon) on this desktop.
    fn env(&self) -> Vec<(&'static str, String)>;

    /// Variables of the test's own environment that a process on this desktop must not
    /// inherit: what would put it on another desktop as well.
    fn foreign_env(&self) -> &'static [&'static str];

    /// Where this desktop's processes (and the apps launched on it) log.
    fn log_dir(&self) -> &Path;

    /// The one shared by the calling suite's tests (see [`crate::suite`]), started on first
    /// use: each suite has its own, as when each was a test process of its own.
    #[track_caller]
    fn shared() -> &'static Self
    where
        Self: Sized + Send + Sync + 'static,
    {
        Self::shared_of(crate::suite::calling_suite())
    }

    /// The one shared by `suite`'s tests, for harness code that serves one suite.
    fn shared_of(suite: &str) -> &'static Self
    where
        Self: Sized + Send + Sync + 'static,
    {
        crate::suite::per_suite(suite, || Self::start(suite))
    }

    /// A command that runs on this desktop (not tied to the test's lifetime; use
    /// [`TestDesktop::launch`] for long-lived apps).
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.envs(self.env());
        for name in self.foreign_env() {
            command.env_remove(name);
        }
        command
    }

    /// Starts a long-lived application on this desktop, its stderr in [`TestDesktop::log_dir`];
    /// it dies when the returned guard drops, or with the test process at the latest.
    fn launch(&self, program: &str, args: &[&str]) -> App {
        launch_app(self.command(program), self.log_dir(), args)
    }

    /// What a tool (xdotool, xwininfo, swaymsg ...) prints on this desktop, trimmed; it must
    /// succeed.
    fn tool_output(&self, program: &str, args: &[&str]) -> String {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(out.status.success(), "{program} {args:?} failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A daemon (config `toml`, as [`Daemon::start_with`]) that serves this desktop: it has the
    /// desktop's environment and none of [`TestDesktop::foreign_env`].
    fn start_daemon(&self, toml: &str) -> Daemon {
        self.start_daemon_with(toml, &[])
    }

    /// [`TestDesktop::start_daemon`] with `extra` variables, which win over the desktop's own.
    fn start_daemon_with(&self, toml: &str, extra: &[(&str, String)]) -> Daemon {
        let mut env: Vec<(&str, String)> = self.env();
        env.extend_from_slice(extra);
        Daemon::start_with_env(toml, &env, self.foreign_env())
    }
}

/// Where a test desktop's processes log, made: one folder per desktop (`kind`: `desktop`,
/// `sway`, `mutter`; `label`: the suite's name, or `private-N`), as the suites' desktops live
/// side by side in one test process.
pub(crate) fn log_dir_for(kind: &str, label: &str) -> PathBuf {
    let log_dir =
        std::env::temp_dir().join(format!("computer-{kind}-{}-{label}", std::process::id()));
    std::fs::create_dir_all(&log_dir).unwrap();
    log_dir
}

/// A new log file `name` in `dir`, as a child's output.
#[cfg(target_os = "linux")]
pub(crate) fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(name)).expect("log file"))
}

/// A private D-Bus bus (`dbus-daemon --session`, or the bus `config` file says), with `env`
/// added, its stderr to `log`; it dies with the test process. The bus and its address.
#[cfg(target_os = "linux")]
pub(crate) fn private_bus(
    config: Option<&Path>,
    env: &[(&str, &std::ffi::OsStr)],
    log: Stdio,
) -> (Child, String) {
    let mut dbus = Command::new("dbus-daemon");
    match config {
        None => dbus.arg("--session"),
        Some(config) => dbus.arg(format!("--config-file={}", config.display())),
    };
    dbus.args(["--nofork", "--print-address=1"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut dbus = spawn_tied(dbus);
    let mut address = String::new();
    BufReader::new(dbus.stdout.take().expect("dbus-daemon's stdout is piped"))
        .read_line(&mut address)
        .expect("dbus-daemon prints its address");
    (dbus, address.trim().to_string())
}

/// A label no other private desktop of this process has.
fn private_label() -> String {
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let number = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("private-{number}")
}

/// Starts `command` (a program on some test desktop) as a long-lived app with `args`, its
/// stdout piped and its stderr in `log_dir` under the program's name; it dies when the guard
/// drops, or with the test process at the latest.
pub fn launch_app(mut command: Command, log_dir: &Path, args: &[&str]) -> App {
    let program = command.get_program().to_string_lossy().into_owned();
    let log = log_dir.join(format!("{program}.log"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()));
    App(spawn_tied(command))
}

/// A launched application; killed on drop.
pub struct App(pub Child);

impl App {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The JSON lines the app prints, as they come (a thread of their own reads its stdout);
    /// lines that are not JSON are left out.
    pub fn json_lines(&mut self) -> mpsc::Receiver<serde_json::Value> {
        self.json_lines_where(|_, _| true)
    }

    /// [`App::json_lines`] without a line that repeats the one before it: GTK under Xvfb reports
    /// each button press twice (xdotool's clicks too).
    pub fn json_lines_without_repeats(&mut self) -> mpsc::Receiver<serde_json::Value> {
        self.json_lines_where(|line, before| Some(line) != before)
    }

    /// The JSON lines for which `keep(line, the line before)` holds.
    fn json_lines_where(
        &mut self,
        keep: impl Fn(&str, Option<&str>) -> bool + Send + 'static,
    ) -> mpsc::Receiver<serde_json::Value> {
        use std::io::BufRead;
        let stdout = self.0.stdout.take().expect("the app's stdout is piped");
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            let mut before: Option<String> = None;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                // Read to the end even with nobody receiving: a full pipe would stop the app.
                if keep(&line, before.as_deref())
                    && let Ok(value) = serde_json::from_str(&line)
                {
                    let _ = lines.send(value);
                }
                before = Some(line);
            }
        });
        received
    }

    /// Reads the app's stdout to the end (after it exits).
    pub fn stdout_text(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut out) = self.0.stdout.take() {
            let _ = out.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(target_os = "linux")]
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds we then own; O_CLOEXEC keeps them out of other children.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2 failed");
    // SAFETY: both fds were just created and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// The Python with GTK and AT-SPI bindings: the distribution's (python3-gi is a system package),
/// not whatever `python3` a version manager puts first on PATH.
pub fn gi_python() -> String {
    std::env::var("GI_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".into()
        } else {
            "python3".into()
        }
    })
}

/// The GTK test app (`tests/clients/gtk_test_app.py`) on the shared desktop, its stdout
/// collected line by line.
pub struct TestApp {
    app: App,
    lines: std::sync::Arc<Mutex<Vec<String>>>,
}

impl TestApp {
    /// The app on the calling suite's shared desktop.
    #[track_caller]
    pub fn launch(title: &str) -> TestApp {
        TestApp::launch_with(title, &[])
    }

    /// The app with extra arguments (`--more` adds the widgets for the other actions).
    #[track_caller]
    pub fn launch_with(title: &str, extra: &[&str]) -> TestApp {
        TestApp::launch_on(Desktop::shared(), title, extra)
    }

    /// The app on `desktop`, with extra arguments.
    pub fn launch_on(desktop: &impl TestDesktop, title: &str, extra: &[&str]) -> TestApp {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/gtk_test_app.py");
        // Through `env` (which execs, keeping the pid): the harness names logs after the program.
        let python = gi_python();
        let mut args = vec![python.as_str(), script.to_str().unwrap(), title];
        args.extend_from_slice(extra);
        let mut app = desktop.launch("env", &args);
        let out = app.0.stdout.take().expect("stdout piped");
        let lines = std::sync::Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let test_app = TestApp { app, lines };
        test_app.wait_line("ready");
        test_app
    }

    pub fn pid(&self) -> u32 {
        self.app.pid()
    }

    /// The lines printed so far that start with `prefix`.
    pub fn lines_starting(&self, prefix: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits until the app has printed the line `want`.
    pub fn wait_line(&self, want: &str) {
        crate::wait_for(
            &format!("the app to print {want:?}"),
            std::time::Duration::from_secs(20),
            || {
                self.lines
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|l| l == want)
                    .then_some(())
            },
        );
    }
}
