//! Starting an agent's X11 desktop: the X server (Xvfb, or Xephyr on the person's display), a
//! private session bus (dbus-daemon), the accessibility bus (at-spi-bus-launcher) and the window
//! manager (openbox), each waited for until it answers, and the surfaces bound to them; the
//! person's keyboard focus given back when their window manager hands it to a visible desktop's
//! window.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use super::ending::{Running, Server};
use super::{AgentDesktop, DesktopError, DesktopKind, DesktopSpec, HostSession};
use crate::kit::contain::desktops_dir;
use crate::kit::spawn::own_children;

/// How long one server may take to answer.
const START_BOUND: Duration = Duration::from_secs(20);
/// How often a start that gives no event to wait on is looked at again.
const POLL: Duration = Duration::from_millis(10);

/// Where at-spi-bus-launcher lives on the distributions this runs on.
const ATSPI_LAUNCHERS: &[&str] = &[
    "/usr/libexec/at-spi-bus-launcher",
    "/usr/lib/at-spi2-core/at-spi-bus-launcher",
    "/usr/lib/at-spi-bus-launcher",
    "/usr/lib64/at-spi-bus-launcher",
];

/// A program on PATH (or at one of `paths`), or why it is missing.
pub(super) fn program(
    name: &'static str,
    package: &'static str,
    kind: DesktopKind,
) -> Result<PathBuf, DesktopError> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    found.ok_or(DesktopError::MissingProgram {
        program: name,
        package,
        kind,
    })
}

pub(super) fn atspi_launcher(kind: DesktopKind) -> Result<PathBuf, DesktopError> {
    ATSPI_LAUNCHERS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or(DesktopError::MissingProgram {
            program: "at-spi-bus-launcher",
            package: "at-spi2-core",
            kind,
        })
}

/// A name no other desktop of any process has.
pub(super) fn new_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the private directories a process that died left (its desktops' servers ended with
/// it): `computer-desktop-<pid>-<n>-<hex>` whose pid no longer runs, in the directory of every
/// desktop's and, where an earlier version put them, in the temporary directory.
fn remove_left_dirs() {
    for place in [desktops_dir(), std::env::temp_dir()] {
        let Ok(entries) = std::fs::read_dir(place) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name
                .to_str()
                .and_then(|n| n.strip_prefix("computer-desktop-"))
            else {
                continue;
            };
            let parts: Vec<&str> = rest.split('-').collect();
            let ours = matches!(parts.as_slice(), [pid, n, hex]
                if pid.parse::<u32>().is_ok()
                    && n.parse::<u64>().is_ok()
                    && !hex.is_empty()
                    && hex.chars().all(|c| c.is_ascii_hexdigit()));
            let dead = parts
                .first()
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if ours && dead {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// The directory every desktop's private directory is made in ([`desktops_dir`]): made mode
/// 0711 when missing (passable, so that a sway desktop's user reaches its runtime directory
/// inside; nothing in it can be listed), and refused when it is not a directory of this user's
/// that only this user may write (another user could have made it first in a shared `/tmp`).
fn desktops_parent() -> Result<PathBuf, DesktopError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let path = desktops_dir();
    let failed = |why: String| DesktopError::PrivateDir {
        path: path.clone(),
        why,
    };
    match std::fs::DirBuilder::new().mode(0o711).create(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(failed(err.to_string())),
    }
    let meta = std::fs::symlink_metadata(&path).map_err(|err| failed(err.to_string()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(failed(format!(
            "it is not a directory of this user's (uid {me}): remove it, and open the desktop \
             again"
        )));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o711))
            .map_err(|err| failed(err.to_string()))?;
    }
    Ok(path)
}

/// The desktop's private directory (mode 0700), inside the directory of every desktop's: its
/// runtime dir, its buses' sockets, its logs.
pub(super) fn private_dir(id: &str) -> Result<PathBuf, DesktopError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = desktops_parent()?;
    remove_left_dirs();
    let path = parent.join(format!("computer-desktop-{id}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|err| DesktopError::PrivateDir {
            path: path.clone(),
            why: err.to_string(),
        })?;
    Ok(path)
}

/// The last lines of a log, for an error.
pub(super) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(6).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Spawns on one long-lived thread, so that PR_SET_PDEATHSIG (which fires when the spawning
/// thread ends, not the process) ends the servers only with the daemon. Each server is one of
/// the children the daemon waits for itself ([`own_children`]): the daemon's reaper of adopted
/// orphans must leave its exit to [`super::ending`], which waits for it at close.
fn spawn(command: Command) -> std::io::Result<Child> {
    let mut own = own_children();
    let child = spawn_on_the_spawner(command)?;
    own.insert(child.id());
    Ok(child)
}

fn spawn_on_the_spawner(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: Mutex<Option<mpsc::Sender<Request>>> = Mutex::new(None);
    let mut command = command;
    // SAFETY: prctl is async-signal-safe and changes only the child's own settings.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    let sent = {
        let mut spawner = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
        let sender = spawner.get_or_insert_with(|| {
            let (requests, incoming) = mpsc::channel::<Request>();
            let started = std::thread::Builder::new()
                .name("desktop-spawner".into())
                .spawn(move || {
                    for (mut command, reply) in incoming {
                        let _ = reply.send(command.spawn());
                    }
                });
            if let Err(why) = started {
                tracing::warn!(%why, "cannot start the desktop spawner thread");
            }
            requests
        });
        sender.send((command, reply.clone()))
    };
    if let Err(mpsc::SendError((mut command, _))) = sent {
        // The spawner thread is gone: spawn here (PDEATHSIG then follows this thread).
        return command.spawn();
    }
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the desktop spawner thread is gone"))?
}

/// A command for one of the desktop's own processes: the desktop's environment, a fresh one
/// otherwise (nothing of the person's session), stdin closed, stderr to its log.
pub(super) fn server_command(
    program: &Path,
    env: &[(String, String)],
    log: &Path,
) -> Result<Command, DesktopError> {
    // Its owner's alone: a sway desktop's private directory may be passable by sway's user.
    let log_file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(log)
        .map_err(|err| DesktopError::PrivateDir {
            path: log.to_path_buf(),
            why: err.to_string(),
        })?;
    let mut command = Command::new(program);
    command.env_clear();
    for name in ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "SHELL"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0);
    Ok(command)
}

/// What is started so far: all of it ends if a later step fails (the drop), and none of it when
/// [`Starting::opened`] hands it over.
pub(super) struct Starting {
    pub(super) running: Running,
}

impl Starting {
    /// Spawns one of the desktop's servers; it is ended with the rest.
    pub(super) fn start(
        &mut self,
        name: &'static str,
        what: &'static str,
        command: Command,
        log: PathBuf,
    ) -> Result<(), DesktopError> {
        let child = spawn(command).map_err(|err| DesktopError::Start {
            what,
            why: format!("{name} could not be started: {err}"),
            log: String::new(),
        })?;
        self.servers().insert(0, Server { name, child, log });
        Ok(())
    }

    pub(super) fn servers(&self) -> std::sync::MutexGuard<'_, Vec<Server>> {
        self.running
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for `ready` to give a value, or fails with the newest server's log after the
    /// bound or when it exits first.
    pub(super) fn wait_for<T>(
        &self,
        what: &'static str,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Result<T, DesktopError> {
        let started = Instant::now();
        loop {
            if let Some(value) = ready() {
                return Ok(value);
            }
            let mut servers = self.servers();
            let server = servers.first_mut();
            if let Some(server) = &server
                && started.elapsed() > START_BOUND
            {
                return Err(DesktopError::Timeout {
                    what,
                    after: START_BOUND,
                    log: tail(&server.log),
                });
            }
            if let Some(server) = server
                && let Ok(Some(status)) = server.child.try_wait()
            {
                return Err(DesktopError::Start {
                    what,
                    why: format!("{} exited ({status})", server.name),
                    log: tail(&server.log),
                });
            }
            drop(servers);
            std::thread::sleep(POLL);
        }
    }

    /// Like [`Starting::wait_for`], but the newest server's exit gives `Ok(None)` (it is
    /// reaped) rather than an error.
    fn wait_for_or_exit<T>(
        &self,
        what: &'static str,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Result<Option<T>, DesktopError> {
        self.wait_for(what, || {
            if let Some(value) = ready() {
                return Some(Some(value));
            }
            let gone = self
                .servers()
                .first_mut()
                .is_some_and(|s| matches!(s.child.try_wait(), Ok(Some(_))));
            gone.then_some(None)
        })
    }

    /// What runs, handed over to the open desktop.
    pub(super) fn opened(mut self) -> Running {
        let mut nothing = Running::new(String::new(), PathBuf::new());
        nothing.ended = true;
        std::mem::replace(&mut self.running, nothing)
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        self.running.end();
    }
}

/// The programs a kind of desktop runs, found before anything starts.
struct Programs {
    x_server: PathBuf,
    dbus: PathBuf,
    openbox: PathBuf,
    atspi: PathBuf,
}

impl Programs {
    fn find(kind: DesktopKind) -> Result<Programs, DesktopError> {
        Ok(Programs {
            x_server: match kind {
                DesktopKind::Xephyr => program("Xephyr", "xserver-xephyr", kind)?,
                _ => program("Xvfb", "xvfb", kind)?,
            },
            dbus: program("dbus-daemon", "dbus-daemon", kind)?,
            openbox: program("openbox", "openbox", kind)?,
            atspi: atspi_launcher(kind)?,
        })
    }
}

/// Opens an X11 desktop (see [`AgentDesktop::open_in`], which opens a sway one on a sway
/// session instead).
pub(super) fn open(spec: &DesktopSpec, host: &HostSession) -> Result<AgentDesktop, DesktopError> {
    let kind = match (&host.display, spec.visible) {
        (Some(_), true) => DesktopKind::Xephyr,
        _ => DesktopKind::Xvfb,
    };
    let programs = Programs::find(kind)?;
    // The person's keyboard focus before a window of the desktop's is shown to them.
    let persons_focus = match (kind, &host.display) {
        (DesktopKind::Xephyr, Some(outer)) => core_focus(outer),
        _ => None,
    };
    let id = new_id();
    let dir = private_dir(&id)?;
    let mut starting = Starting {
        running: Running::new(id.clone(), dir.clone()),
    };
    let mut env = vec![("COMPUTER_DESKTOP".to_string(), id.clone())];
    let number = start_x_server(&mut starting, &programs.x_server, kind, spec, host, &env)?;
    let display = format!(":{number}");
    starting.running.display = display.clone();
    starting.running.display_number = number;
    env.push(("DISPLAY".into(), display.clone()));
    env.push(("XDG_RUNTIME_DIR".into(), dir.display().to_string()));

    let atspi_address = start_buses(&mut starting, &programs.dbus, &programs.atspi, &mut env)?;

    start_window_manager(&mut starting, &programs.openbox, &env, &display)?;

    env.extend(
        [
            ("XDG_SESSION_TYPE", "x11"),
            ("GDK_BACKEND", "x11"),
            ("QT_QPA_PLATFORM", "xcb"),
            ("NO_AT_BRIDGE", "0"),
            ("QT_ACCESSIBILITY", "1"),
            ("QT_LINUX_ACCESSIBILITY_ALWAYS_ON", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let (gui, evidence) = crate::gui::on_x_display(&display, &atspi_address);
    let keyboard = crate::ax::Keyboard::over(gui.clone());
    let ax = crate::ax::surface_on_bus(&atspi_address, Some(keyboard));
    if let (Some(had), Some(outer)) = (persons_focus, &host.display) {
        give_back_persons_focus(outer, had, &window_title(&id));
    }
    let opened = format!("{kind} on {display}");
    tracing::info!(desktop = %id, %opened, "an agent's own desktop is open");
    Ok(AgentDesktop {
        kind,
        size: spec.size,
        env,
        gui,
        ax,
        evidence,
        running: starting.opened(),
    })
}

/// Starts the session bus and the accessibility bus on it (with accessibility switched on),
/// each in the desktop's private directory, and adds their addresses to `env`; the
/// accessibility bus's address.
pub(super) fn start_buses(
    starting: &mut Starting,
    dbus: &Path,
    atspi: &Path,
    env: &mut Vec<(String, String)>,
) -> Result<String, DesktopError> {
    let dbus_address = start_session_bus(starting, dbus, env)?;
    starting.running.dbus_address = dbus_address.clone();
    env.push(("DBUS_SESSION_BUS_ADDRESS".into(), dbus_address.clone()));

    let log = starting.running.dir.join("at-spi-bus-launcher.log");
    let mut command = server_command(atspi, env, &log)?;
    command.arg("--launch-immediately");
    let what = "the accessibility bus (at-spi-bus-launcher)";
    starting.start("at-spi-bus-launcher", what, command, log)?;
    let atspi_address = starting.wait_for(what, || accessibility_address(&dbus_address))?;
    starting.running.atspi_address = atspi_address.clone();
    env.push(("AT_SPI_BUS_ADDRESS".into(), atspi_address.clone()));
    Ok(atspi_address)
}

/// The first display number tried: clear of the ones people's sessions and test harnesses
/// pick (from :0 up).
const FIRST_DISPLAY: u32 = 100;
/// How many display numbers are tried before giving up.
const DISPLAY_TRIES: u32 = 50;

/// Starts the X server; its display number once it accepts connections. It listens on its
/// socket file only (no abstract socket, no TCP), which a sandbox can allow or not; so the
/// number is chosen here (the server's own `-displayfd` choice sees only abstract sockets and
/// would take a number in use) and the server's lock file says whether it got it.
fn start_x_server(
    starting: &mut Starting,
    program: &Path,
    kind: DesktopKind,
    spec: &DesktopSpec,
    host: &HostSession,
    env: &[(String, String)],
) -> Result<u32, DesktopError> {
    let what = match kind {
        DesktopKind::Xephyr => "the nested X server (Xephyr)",
        _ => "the virtual X server (Xvfb)",
    };
    let mut refused = String::new();
    for number in (FIRST_DISPLAY..).take(DISPLAY_TRIES as usize) {
        let lock = PathBuf::from(format!("/tmp/.X{number}-lock"));
        let socket = PathBuf::from(format!("/tmp/.X11-unix/X{number}"));
        if lock.exists() || socket.exists() {
            continue;
        }
        let command = x_server_command(starting, program, kind, spec, host, env, number)?;
        let name = if kind == DesktopKind::Xephyr {
            "Xephyr"
        } else {
            "Xvfb"
        };
        let log = starting.running.dir.join("xserver.log");
        starting.start(name, what, command, log.clone())?;
        let display = format!(":{number}");
        let got = starting.wait_for_or_exit(what, || {
            let ours = std::fs::read_to_string(&lock)
                .ok()
                .and_then(|pid| pid.trim().parse::<u32>().ok());
            (ours == starting_pid(starting) && x11rb::connect(Some(&display)).is_ok()).then_some(())
        })?;
        if got.is_some() {
            return Ok(number);
        }
        // Another server took the number first: the next one.
        refused = tail(&log);
        starting.servers().remove(0);
    }
    Err(DesktopError::Start {
        what,
        why: format!(
            "no free display from :{FIRST_DISPLAY} to :{}",
            FIRST_DISPLAY + DISPLAY_TRIES - 1
        ),
        log: refused,
    })
}

/// The newest server's pid.
fn starting_pid(starting: &Starting) -> Option<u32> {
    starting.servers().first().map(|s| s.child.id())
}

/// The X server's command line for display `number`.
fn x_server_command(
    starting: &Starting,
    program: &Path,
    kind: DesktopKind,
    spec: &DesktopSpec,
    host: &HostSession,
    env: &[(String, String)],
    number: u32,
) -> Result<Command, DesktopError> {
    let (width, height) = spec.size;
    let log = starting.running.dir.join("xserver.log");
    let mut env = env.to_vec();
    if let (DesktopKind::Xephyr, Some(outer)) = (kind, &host.display) {
        env.push(("DISPLAY".into(), outer.clone()));
    }
    let mut command = server_command(program, &env, &log)?;
    command.arg(format!(":{number}"));
    match kind {
        DesktopKind::Xephyr => command.args([
            "-screen",
            &format!("{width}x{height}x24"),
            // The person's keyboard and pointer are never grabbed by the window.
            "-no-host-grab",
            "-title",
            &window_title(&starting.running.id),
        ]),
        _ => command.args(["-screen", "0", &format!("{width}x{height}x24")]),
    };
    // No reset when the last client leaves: a client connecting during one is dropped (the
    // readiness checks here connect and leave).
    command.args(["-noreset", "-nolisten", "tcp", "-nolisten", "local"]);
    Ok(command)
}

/// Starts the window manager (EWMH: the gui surface's window list, and focus). openbox has been
/// seen, rarely and on a loaded machine, to exit or never publish its EWMH properties: it is
/// started again, up to three times.
fn start_window_manager(
    starting: &mut Starting,
    program: &Path,
    env: &[(String, String)],
    display: &str,
) -> Result<(), DesktopError> {
    let what = "the window manager (openbox)";
    let log = starting.running.dir.join("openbox.log");
    let mut attempt = 1;
    loop {
        let command = server_command(program, env, &log)?;
        starting.start("openbox", what, command, log.clone())?;
        match starting.wait_for(what, || window_manager_ready(display).then_some(())) {
            Ok(()) => return Ok(()),
            Err(why) if attempt >= 3 => return Err(why),
            Err(why) => {
                tracing::warn!(%why, attempt, "the agent desktop's window manager is started again");
                let mut failed = starting.servers().remove(0);
                let _ = failed.child.kill();
                let _ = failed.child.wait();
                attempt += 1;
            }
        }
    }
}

/// Starts the session bus on a socket file in the private directory; its address.
fn start_session_bus(
    starting: &mut Starting,
    program: &Path,
    env: &[(String, String)],
) -> Result<String, DesktopError> {
    let what = "the session bus (dbus-daemon)";
    let dir = starting.running.dir.clone();
    let log = dir.join("dbus.log");
    let mut command = server_command(program, env, &log)?;
    command
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address=unix:path={}", dir.join("bus").display()))
        .stdout(Stdio::piped());
    starting.start("dbus-daemon", what, command, log.clone())?;
    let stdout = starting.servers()[0].child.stdout.take();
    let mut address = String::new();
    if let Some(stdout) = stdout {
        let _ = BufReader::new(stdout).read_line(&mut address);
    }
    let address = address.trim().to_string();
    if address.is_empty() {
        return Err(DesktopError::Start {
            what,
            why: "it printed no address".into(),
            log: tail(&log),
        });
    }
    Ok(address)
}

/// The accessibility bus's address, once org.a11y.Bus answers on the session bus (and with
/// accessibility switched on, which AccessKit-based apps wait for).
fn accessibility_address(session: &str) -> Option<String> {
    let session = session.to_string();
    crate::kit::on_own_runtime(async move {
        let conn = zbus::connection::Builder::address(session.as_str())
            .ok()?
            .build()
            .await
            .ok()?;
        // Only once the launcher started here owns the name: asking before would have the bus
        // activate a second launcher of its own.
        let owned = crate::accessibility::atspi::accessibility_bus_running(&conn).await?;
        if !owned {
            return None;
        }
        let address = crate::accessibility::atspi::accessibility_bus_address(&conn)
            .await
            .ok()?;
        conn.call_method(
            Some("org.a11y.Bus"),
            "/org/a11y/bus",
            Some("org.freedesktop.DBus.Properties"),
            "Set",
            &(
                "org.a11y.Status",
                "IsEnabled",
                zbus::zvariant::Value::from(true),
            ),
        )
        .await
        .ok()?;
        Some(address).filter(|a| !a.is_empty())
    })
}

/// Whether a window manager runs on `display`: it set `_NET_SUPPORTING_WM_CHECK` and
/// publishes `_NET_CLIENT_LIST` (openbox sets the second a little after the first, and the gui
/// surface's listing needs it).
fn window_manager_ready(display: &str) -> bool {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
    let Ok((conn, screen)) = x11rb::connect(Some(display)) else {
        return false;
    };
    let root = conn.setup().roots[screen].root;
    let set = |name: &[u8]| {
        let atom = match conn.intern_atom(true, name).map(|c| c.reply()) {
            Ok(Ok(reply)) if reply.atom != 0 => reply.atom,
            _ => return false,
        };
        conn.get_property(false, root, atom, AtomEnum::WINDOW, 0, 1)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|reply| reply.type_ != u32::from(AtomEnum::NONE))
    };
    set(b"_NET_SUPPORTING_WM_CHECK") && set(b"_NET_CLIENT_LIST")
}

/// The title of a visible desktop's window on the person's screen.
fn window_title(id: &str) -> String {
    format!("computer: agent desktop {id}")
}

/// The core keyboard focus on the X display `display`, if it can be read.
fn core_focus(display: &str) -> Option<u32> {
    use x11rb::protocol::xproto::ConnectionExt as _;
    let (conn, _) = x11rb::connect(Some(display)).ok()?;
    Some(conn.get_input_focus().ok()?.reply().ok()?.focus)
}

/// Gives the person's keyboard back to `had` when the person's window manager focused the
/// desktop's window (titled `title`) as it mapped: the window manager asked to activate it
/// (so that its own idea of the focus is right) and the core focus set at once, as the gui
/// surface gives it back from an agent's dialog. The person clicks into the desktop to type
/// there.
fn give_back_persons_focus(display: &str, had: u32, title: &str) {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{ClientMessageEvent, ConnectionExt as _, EventMask, InputFocus};
    let Ok((conn, screen)) = x11rb::connect(Some(display)) else {
        return;
    };
    let root = conn.setup().roots[screen].root;
    let Some(now) = conn
        .get_input_focus()
        .ok()
        .and_then(|c| c.reply().ok())
        .map(|r| r.focus)
    else {
        return;
    };
    if now == had || !is_titled_or_inside(&conn, now, root, title) {
        return;
    }
    tracing::info!(
        window = had,
        "the person's window manager gave an agent's desktop window the person's keyboard; \
         given back"
    );
    // 0 is None, 1 PointerRoot: no window to activate, only the core focus to put back.
    if had > 1
        && let Ok(active) = conn
            .intern_atom(false, b"_NET_ACTIVE_WINDOW")
            .map_err(|_| ())
            .and_then(|c| c.reply().map_err(|_| ()))
    {
        // Source 2: a pager acting for the user, which window managers honour at once.
        let event = ClientMessageEvent::new(32, had, active.atom, [2, 0, 0, 0, 0]);
        let _ = conn.send_event(
            false,
            root,
            EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
            event,
        );
    }
    let focus = match had {
        0 => InputFocus::NONE,
        1 => InputFocus::POINTER_ROOT,
        _ => InputFocus::PARENT,
    };
    // A window closed meanwhile takes no focus: nothing to give back to.
    if let Ok(cookie) = conn.set_input_focus(focus, had, x11rb::CURRENT_TIME) {
        let _ = cookie.check();
    }
    let _ = conn.flush();
}

/// Whether `window`, or a window it lies in (its window manager's frame, up to the root), has
/// `title` as its name (Xephyr may add to the title it was given).
fn is_titled_or_inside(
    conn: &impl x11rb::connection::Connection,
    window: u32,
    root: u32,
    title: &str,
) -> bool {
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
    let mut at = window;
    // A tree deeper than this is no window manager's.
    for _ in 0..16 {
        if at <= 1 || at == root {
            return false;
        }
        let named = conn
            .get_property(false, at, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 256)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|r| String::from_utf8_lossy(&r.value).contains(title));
        if named {
            return true;
        }
        match conn.query_tree(at).ok().and_then(|c| c.reply().ok()) {
            Some(tree) => at = tree.parent,
            None => return false,
        }
    }
    false
}
