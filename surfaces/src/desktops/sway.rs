//! Starting an agent's sway desktop on a wlroots Wayland session: sway nested as a window in
//! the person's sway (`WLR_BACKENDS=wayland`, floated there at the size asked for, without
//! taking the person's keyboard focus), or headless
//! (`WLR_BACKENDS=headless`) when it is not to be seen; then the same private session bus and
//! accessibility bus as the X11 kinds, and the gui and ax surfaces bound to them.
//!
//! sway refuses to run as root. A daemon running as the person (the usual way) starts it as
//! itself; a daemon running as root starts it as the owner of the person's Wayland socket (the
//! person, whose session it shows in) and refuses when that owner is root too. sway gets a
//! runtime directory of its own inside the desktop's private directory (its Wayland and IPC
//! sockets live there), a private config (one output of the size asked for, no bar, no
//! Xwayland), and nothing of the person's session but, nested, the person's Wayland socket.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use super::ending::Running;
use super::linux::{
    Starting, atspi_launcher, new_id, private_dir, program, server_command, start_buses, tail,
};
use super::{AgentDesktop, DesktopError, DesktopKind, DesktopSpec, HostSession};
use crate::gui::SwayIpc;

/// The kind of sway desktop for `spec` in the person's session: a nested one to show, a
/// headless one not to; None when the session is not a wlroots (sway) one.
pub(super) fn kind_for(spec: &DesktopSpec, host: &HostSession) -> Option<DesktopKind> {
    let wlroots = host.wayland_display.is_some() && host.swaysock.is_some();
    wlroots.then_some(if spec.visible {
        DesktopKind::SwayNested
    } else {
        DesktopKind::SwayHeadless
    })
}

/// The person's Wayland socket as an absolute path (`WAYLAND_DISPLAY` is a name in
/// `XDG_RUNTIME_DIR` unless it is a path).
fn person_socket(host: &HostSession) -> Option<PathBuf> {
    let name = PathBuf::from(host.wayland_display.as_ref()?);
    if name.is_absolute() {
        return Some(name);
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty())?;
    Some(PathBuf::from(runtime).join(name))
}

/// The user sway runs as when it is not this process's own.
#[derive(Debug, Clone)]
struct RunAs {
    uid: u32,
    gid: u32,
    name: String,
    home: PathBuf,
}

/// Who starts sway: None (this process's user) unless the daemon runs as root, which sway
/// refuses; then the owner of the person's Wayland socket.
fn run_as(kind: DesktopKind, socket: &Path) -> Result<Option<RunAs>, DesktopError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let refused = |why: String| {
        DesktopError::Unsupported(format!(
            "an agent's {kind} desktop is a sway, and sway refuses to run as root: the daemon \
             runs as root, so sway would run as the owner of the person's Wayland socket {}, \
             but {why}. Run the daemon as the person whose session it is (a user service), or \
             open the desktop on an X display (DISPLAY set, no SWAYSOCK) to get Xvfb or Xephyr",
            socket.display()
        ))
    };
    let owner = std::fs::metadata(socket)
        .map_err(|err| refused(format!("it cannot be read ({err})")))?
        .uid();
    if owner == 0 {
        return Err(refused("root owns it".into()));
    }
    user(owner)
        .map(Some)
        .ok_or_else(|| refused(format!("its owner (uid {owner}) has no passwd entry")))
}

/// The passwd entry of `uid`.
fn user(uid: u32) -> Option<RunAs> {
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r fills it with pointers into
    // `buffer`, which outlives every read below.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the length given.
    let status = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() {
        return None;
    }
    // SAFETY: on success pw_name and pw_dir point to NUL-terminated strings in `buffer`.
    let text = |ptr: *const libc::c_char| unsafe {
        std::ffi::CStr::from_ptr(ptr).to_string_lossy().into_owned()
    };
    Some(RunAs {
        uid,
        gid: entry.pw_gid,
        name: text(entry.pw_name),
        home: PathBuf::from(text(entry.pw_dir)),
    })
}

/// sway's config: one output of `size` (whatever the backend names it), no bar (none is
/// configured), no Xwayland, no borders or title bars (a window's content starts at its tile's
/// corner).
fn config(size: (u32, u32)) -> String {
    let (width, height) = size;
    format!(
        "output * mode --custom {width}x{height}\n\
         xwayland disable\n\
         default_border none\n\
         default_floating_border none\n\
         font pango:monospace 1\n\
         titlebar_border_thickness 0\n\
         titlebar_padding 1\n"
    )
}

/// sway's runtime directory inside the desktop's private one, owned by whoever runs sway. When
/// that is another user, the private directory lets it pass through (0711: nothing in it can
/// be listed).
fn runtime_dir(dir: &Path, run_as: Option<&RunAs>) -> Result<PathBuf, DesktopError> {
    let failed = |path: &Path, err: std::io::Error| DesktopError::PrivateDir {
        path: path.to_path_buf(),
        why: err.to_string(),
    };
    let runtime = dir.join("sway");
    std::fs::create_dir(&runtime).map_err(|err| failed(&runtime, err))?;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .map_err(|err| failed(&runtime, err))?;
    if let Some(user) = run_as {
        std::os::unix::fs::chown(&runtime, Some(user.uid), Some(user.gid))
            .map_err(|err| failed(&runtime, err))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
            .map_err(|err| failed(dir, err))?;
    }
    Ok(runtime)
}

/// Lets the daemon's runs reach sway's sockets when sway runs as another user: a run holds no
/// capability, so root's own override of file permissions is gone, and sway's runtime
/// directory (0700) and sockets (0755: connecting needs write) are the other user's. The
/// directory becomes passable (0711: nothing in it can be listed) and the sockets the
/// daemon's user's (sway keeps listening on them; it unlinks them from its own directory at
/// exit).
fn hand_sockets_to_the_daemon(runtime: &Path, sockets: &[&Path]) -> Result<(), DesktopError> {
    let failed = |path: &Path, err: std::io::Error| DesktopError::PrivateDir {
        path: path.to_path_buf(),
        why: err.to_string(),
    };
    std::fs::set_permissions(runtime, std::fs::Permissions::from_mode(0o711))
        .map_err(|err| failed(runtime, err))?;
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    for socket in sockets {
        std::os::unix::fs::chown(socket, Some(uid), Some(gid))
            .and_then(|()| std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o700)))
            .map_err(|err| failed(socket, err))?;
    }
    Ok(())
}

/// The Wayland socket and the IPC socket sway made in `runtime`, once both exist.
fn sway_sockets(runtime: &Path) -> Option<(PathBuf, PathBuf)> {
    let names: Vec<String> = std::fs::read_dir(runtime)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .collect();
    let socket = names
        .iter()
        .find(|n| n.starts_with("wayland-") && !n.ends_with(".lock"))?;
    let ipc = names
        .iter()
        .find(|n| n.starts_with("sway-ipc.") && n.ends_with(".sock"))?;
    Some((runtime.join(socket), runtime.join(ipc)))
}

/// Opens a sway desktop (see [`AgentDesktop::open_in`]).
pub(super) fn open(
    spec: &DesktopSpec,
    host: &HostSession,
    kind: DesktopKind,
) -> Result<AgentDesktop, DesktopError> {
    let sway = program("sway", "sway", kind)?;
    let dbus = program("dbus-daemon", "dbus-daemon", kind)?;
    let atspi = atspi_launcher(kind)?;
    let person = required_person_socket(host, kind)?;
    let run_as = run_as(kind, &person)?;
    let id = new_id();
    let dir = private_dir(&id)?;
    let mut starting = Starting {
        running: Running::new(id.clone(), dir.clone()),
    };
    let runtime = runtime_dir(&dir, run_as.as_ref())?;
    let config_path = write_config(&runtime, spec.size)?;

    let mut env = vec![("COMPUTER_DESKTOP".to_string(), id.clone())];
    let what = match kind {
        DesktopKind::SwayNested => "the nested compositor (sway in the person's sway)",
        _ => "the headless compositor (sway)",
    };
    let log = dir.join("sway.log");
    let sway_env = sway_env(&env, kind, &runtime, &person);
    let command = sway_command(&sway, &sway_env, &config_path, run_as.as_ref(), &log)?;
    starting.start("sway", what, command, log.clone())?;
    let sway_pid = starting.servers()[0].child.id();
    let person_ipc = match kind {
        DesktopKind::SwayNested => host.swaysock.as_ref().map(|p| SwayIpc::new(p.into())),
        _ => None,
    };
    let nested = person_ipc.as_ref().map(|person| (person, sway_pid));
    if let Some((person, sway_pid)) = nested {
        keep_the_persons_focus(person, sway_pid);
    }
    let (socket, swaysock) = wait_for_sway_sockets(&starting, what, &runtime)?;
    if run_as.is_some() {
        hand_sockets_to_the_daemon(&runtime, &[&socket, &swaysock])?;
    }
    starting.running.wayland_socket = socket.clone();
    starting.running.swaysock = swaysock.clone();
    let own_ipc = SwayIpc::new(swaysock.clone());
    wait_for_the_size(&starting, what, &own_ipc, nested, spec.size, &log)?;

    env.push(("WAYLAND_DISPLAY".into(), socket.display().to_string()));
    env.push(("SWAYSOCK".into(), swaysock.display().to_string()));
    env.push(("XDG_RUNTIME_DIR".into(), dir.display().to_string()));
    let atspi_address = start_buses(&mut starting, &dbus, &atspi, &mut env)?;
    env.extend(wayland_toolkit_env());
    let (gui, evidence) = crate::gui::on_wayland_socket(&socket, Some(&swaysock), &atspi_address);
    let keyboard = crate::ax::Keyboard::over(gui.clone());
    let ax = crate::ax::surface_on_bus(&atspi_address, Some(keyboard));
    tracing::info!(
        desktop = %id,
        opened = %format!("{kind} at {}", socket.display()),
        runs_as = run_as.as_ref().map_or("the daemon's user", |u| u.name.as_str()),
        "an agent's own desktop is open"
    );
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

/// The person's Wayland socket, or why an agent's sway desktop cannot be opened without it.
fn required_person_socket(host: &HostSession, kind: DesktopKind) -> Result<PathBuf, DesktopError> {
    person_socket(host).ok_or_else(|| {
        DesktopError::Unsupported(format!(
            "an agent's {kind} desktop needs the person's Wayland socket: WAYLAND_DISPLAY={} \
             is a name, and XDG_RUNTIME_DIR is not set to find it in",
            host.wayland_display.as_deref().unwrap_or_default()
        ))
    })
}

/// Writes sway's [`config`] for an output of `size` into its runtime directory (0644: sway may
/// run as another user); its path.
fn write_config(runtime: &Path, size: (u32, u32)) -> Result<PathBuf, DesktopError> {
    let config_path = runtime.join("config");
    std::fs::write(&config_path, config(size))
        .and_then(|()| {
            std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o644))
        })
        .map_err(|err| DesktopError::PrivateDir {
            path: config_path.clone(),
            why: err.to_string(),
        })?;
    Ok(config_path)
}

/// sway's environment: the desktop's `env`, its own runtime directory, software rendering, and
/// its backend: a window on the person's Wayland socket (nested) or none (headless).
fn sway_env(
    env: &[(String, String)],
    kind: DesktopKind,
    runtime: &Path,
    person: &Path,
) -> Vec<(String, String)> {
    let mut sway_env = env.to_vec();
    sway_env.push(("XDG_RUNTIME_DIR".into(), runtime.display().to_string()));
    // Software rendering: no GPU is needed (nor always reachable) for a desktop of this size.
    sway_env.push(("WLR_RENDERER".into(), "pixman".into()));
    if kind == DesktopKind::SwayNested {
        sway_env.push(("WLR_BACKENDS".into(), "wayland".into()));
        sway_env.push(("WAYLAND_DISPLAY".into(), person.display().to_string()));
    } else {
        sway_env.push(("WLR_BACKENDS".into(), "headless".into()));
        sway_env.push(("WLR_LIBINPUT_NO_DEVICES".into(), "1".into()));
    }
    sway_env
}

/// The command that starts sway with `config`, logging to `log`, as `run_as` when given (with
/// that user's HOME, USER and LOGNAME).
fn sway_command(
    sway: &Path,
    sway_env: &[(String, String)],
    config: &Path,
    run_as: Option<&RunAs>,
    log: &Path,
) -> Result<std::process::Command, DesktopError> {
    let mut command = server_command(sway, sway_env, log)?;
    command.arg("-c").arg(config).current_dir("/");
    if let Some(user) = run_as {
        command
            .uid(user.uid)
            .gid(user.gid)
            .env("HOME", &user.home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name);
    }
    Ok(command)
}

/// Tells the person's sway not to focus the nested sway's window (process `sway_pid`). Said
/// before its window maps (sway takes a while to start): the person's keyboard focus stays
/// where it is; the person clicks into the window to type there.
fn keep_the_persons_focus(person: &SwayIpc, sway_pid: u32) {
    if let Err(why) = person.run(&format!("no_focus [pid={sway_pid}]")) {
        tracing::debug!(%why, "the nested sway's window may take the person's focus");
    }
}

/// Waits until sway has made its Wayland and IPC sockets in `runtime` and answers on its IPC
/// with at least one output; the two sockets.
fn wait_for_sway_sockets(
    starting: &Starting,
    what: &'static str,
    runtime: &Path,
) -> Result<(PathBuf, PathBuf), DesktopError> {
    starting.wait_for(what, || {
        let (socket, ipc) = sway_sockets(runtime)?;
        SwayIpc::new(ipc.clone())
            .output_sizes()
            .ok()
            .filter(|outputs| !outputs.is_empty())
            .map(|_| (socket, ipc))
    })
}

/// Waits until every output of the agent's sway (`own_ipc`) has `size` and, nested (`nested`:
/// the person's sway and the nested sway's pid), its window on the person's sway is fitted to
/// it and stays so for [`SETTLED`]. Waited out, the error says what size the output has
/// instead, with the end of sway's `log`.
fn wait_for_the_size(
    starting: &Starting,
    what: &'static str,
    own_ipc: &SwayIpc,
    nested: Option<(&SwayIpc, u32)>,
    size: (u32, u32),
    log: &Path,
) -> Result<(), DesktopError> {
    let mut fitted = None;
    let mut fits_since = None;
    let sized = starting.wait_for("the agent desktop's output to take its size", || {
        let outputs = own_ipc.output_sizes().ok()?;
        let output_fits = outputs.iter().all(|(_, output)| *output == size);
        let window_fits = nested
            .is_none_or(|(person, sway_pid)| fit_on_person(person, sway_pid, size, &mut fitted));
        if !(output_fits && window_fits) {
            fits_since = None;
            return None;
        }
        // Nested, the output has the size asked for before the person's sway first sizes its
        // window: it must still have it a moment after the window is seen to fit.
        let since = *fits_since.get_or_insert_with(std::time::Instant::now);
        (nested.is_none() || since.elapsed() >= SETTLED).then_some(())
    });
    match sized {
        // Waited out: say what size it has instead (sway's exit is said as it is).
        Err(DesktopError::Timeout { after, .. }) => {
            let outputs = own_ipc.output_sizes().unwrap_or_default();
            Err(DesktopError::Start {
                what,
                why: format!(
                    "its output is {outputs:?} after {} ms, not {}x{}{}",
                    after.as_millis(),
                    size.0,
                    size.1,
                    if nested.is_some() {
                        " (the person's sway did not float or resize its window)"
                    } else {
                        ""
                    }
                ),
                log: tail(log),
            })
        }
        other => other,
    }
}

/// What makes toolkits in the desktop draw on Wayland and expose their accessibility.
fn wayland_toolkit_env() -> [(String, String); 9] {
    [
        ("XDG_SESSION_TYPE", "wayland"),
        ("XDG_CURRENT_DESKTOP", "sway"),
        ("GDK_BACKEND", "wayland"),
        ("QT_QPA_PLATFORM", "wayland"),
        ("SDL_VIDEODRIVER", "wayland"),
        ("MOZ_ENABLE_WAYLAND", "1"),
        ("NO_AT_BRIDGE", "0"),
        ("QT_ACCESSIBILITY", "1"),
        ("QT_LINUX_ACCESSIBILITY_ALWAYS_ON", "1"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
}

/// How long a nested sway's output and window must keep the size asked for before it is open.
const SETTLED: std::time::Duration = std::time::Duration::from_millis(100);
/// How often the nested sway's window is fitted again while it has another size.
const FIT_AGAIN: std::time::Duration = std::time::Duration::from_millis(250);

/// Fits the nested sway's window on the person's sway (found by its pid, through the person's
/// IPC) to `size`: floating, since a tiled window is resized to its tile and the desktop with
/// it, and with its content (the window less the person's borders) of `size`; whether it is
/// so now. Fitted again every [`FIT_AGAIN`] while it is not: the person's sway may still be
/// applying the tile's size when the window is first floated.
fn fit_on_person(
    person: &SwayIpc,
    pid: u32,
    size: (u32, u32),
    fitted: &mut Option<std::time::Instant>,
) -> bool {
    let Ok(tree) = person.tree() else {
        return false;
    };
    let Some(view) = view_of(&tree, pid) else {
        return false;
    };
    let side = |node: &serde_json::Value, key: &str| node[key].as_i64().unwrap_or(0);
    let floating = view["type"] == "floating_con";
    if floating
        && side(&view["window_rect"], "width") == i64::from(size.0)
        && side(&view["window_rect"], "height") == i64::from(size.1)
    {
        return true;
    }
    if fitted.is_some_and(|at| at.elapsed() < FIT_AGAIN) {
        return false;
    }
    *fitted = Some(std::time::Instant::now());
    let command = if !floating {
        format!("[pid={pid}] floating enable")
    } else {
        // `resize set` sizes the container, borders and title bar included; the tree's rect
        // holds the borders, its deco_rect the title bar.
        let width =
            i64::from(size.0) + side(&view["rect"], "width") - side(&view["window_rect"], "width");
        let height = i64::from(size.1) + side(&view["rect"], "height")
            - side(&view["window_rect"], "height")
            + side(&view["deco_rect"], "height");
        format!("[pid={pid}] resize set width {width} px height {height} px")
    };
    if let Err(why) = person.run(&command) {
        tracing::debug!(%why, "fitting the nested sway's window on the person's sway");
    }
    false
}

/// The view of process `pid` in a sway tree.
fn view_of(node: &serde_json::Value, pid: u32) -> Option<&serde_json::Value> {
    if node["pid"].as_u64() == Some(u64::from(pid)) {
        return Some(node);
    }
    ["nodes", "floating_nodes"]
        .iter()
        .flat_map(|key| node[*key].as_array().into_iter().flatten())
        .find_map(|child| view_of(child, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(wayland: Option<&str>, swaysock: Option<&str>) -> HostSession {
        HostSession {
            display: Some(":0".into()),
            wayland_display: wayland.map(str::to_string),
            swaysock: swaysock.map(str::to_string),
        }
    }

    #[test]
    fn a_sway_session_gets_a_nested_or_headless_sway_and_others_none() {
        let visible = DesktopSpec {
            size: (800, 600),
            visible: true,
        };
        let hidden = DesktopSpec {
            visible: false,
            ..visible.clone()
        };
        let sway = host(Some("wayland-1"), Some("/run/sway.sock"));
        assert_eq!(kind_for(&visible, &sway), Some(DesktopKind::SwayNested));
        assert_eq!(kind_for(&hidden, &sway), Some(DesktopKind::SwayHeadless));
        // Another Wayland compositor (no SWAYSOCK), or X11 alone: the X11 kinds.
        assert_eq!(kind_for(&visible, &host(Some("wayland-1"), None)), None);
        assert_eq!(kind_for(&visible, &host(None, None)), None);
    }

    #[test]
    fn the_config_sizes_every_output_and_starts_no_bar_or_xwayland() {
        let text = config((1024, 640));
        assert!(text.contains("output * mode --custom 1024x640\n"), "{text}");
        assert!(text.contains("xwayland disable\n"), "{text}");
        assert!(!text.contains("bar {"), "{text}");
    }

    #[test]
    fn a_root_daemon_runs_sway_as_the_sockets_owner_and_refuses_a_root_owned_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("wayland-1");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            // Not root: sway runs as the daemon's own user, whoever owns the socket.
            assert!(
                run_as(DesktopKind::SwayHeadless, &socket)
                    .unwrap()
                    .is_none()
            );
            return;
        }
        let refused = run_as(DesktopKind::SwayNested, &socket)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("sway refuses to run as root") && refused.contains("root owns it"),
            "{refused}"
        );
        assert!(
            refused.contains("Run the daemon as the person"),
            "{refused}"
        );
        // A socket of the person's (here `nobody`): sway runs as them.
        const NOBODY: u32 = 65534;
        std::os::unix::fs::chown(&socket, Some(NOBODY), None).unwrap();
        let user = run_as(DesktopKind::SwayNested, &socket)
            .unwrap()
            .expect("a user to run sway as");
        assert_eq!(user.uid, NOBODY);
        assert_eq!(user.name, "nobody");
    }

    #[test]
    fn an_absolute_socket_path_is_taken_as_it_is() {
        let absolute = host(Some("/run/user/1000/wayland-1"), Some("/s"));
        assert_eq!(
            person_socket(&absolute),
            Some(PathBuf::from("/run/user/1000/wayland-1"))
        );
    }
}
