//! What runs for an agent's desktop (its servers and where they listen), finding every process
//! that runs on it, and ending them with its servers.
//!
//! A process is on the desktop when its environment names the desktop (its `DISPLAY` or
//! `WAYLAND_DISPLAY`/`SWAYSOCK`, its session or accessibility bus, or `COMPUTER_DESKTOP`), when
//! it is a client of the desktop's X server (the X-Resource extension gives each local client's
//! pid) or has a window on its sway (sway's tree gives each view's pid): a program that cleared
//! its environment is still found while it has a window; or when it descends from such a
//! process (a program started by one that cleared its environment for its child).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use std::path::PathBuf;
use std::process::Child;
use std::sync::Mutex;

/// A server the desktop started, with its log.
pub(super) struct Server {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
}

/// What runs for an open desktop, and what finds and ends it.
pub(super) struct Running {
    pub id: String,
    pub dir: PathBuf,
    pub display: String,
    pub display_number: u32,
    pub dbus_address: String,
    pub atspi_address: String,
    /// A sway desktop's Wayland socket and IPC socket (absolute paths); empty on X11.
    pub wayland_socket: PathBuf,
    pub swaysock: PathBuf,
    /// The window manager, buses and, last, the X server.
    pub servers: Mutex<Vec<Server>>,
    pub ended: bool,
}

impl Running {
    pub(super) fn new(id: String, dir: PathBuf) -> Running {
        Running {
            id,
            dir,
            display: String::new(),
            display_number: 0,
            dbus_address: String::new(),
            atspi_address: String::new(),
            wayland_socket: PathBuf::new(),
            swaysock: PathBuf::new(),
            servers: Mutex::new(Vec::new()),
            ended: false,
        }
    }

    pub fn sockets(&self) -> Vec<PathBuf> {
        let mut sockets = Vec::new();
        if !self.display.is_empty() {
            sockets.push(PathBuf::from(format!(
                "/tmp/.X11-unix/X{}",
                self.display_number
            )));
        }
        for path in [&self.wayland_socket, &self.swaysock] {
            if !path.as_os_str().is_empty() {
                sockets.push(path.clone());
            }
        }
        sockets.extend(socket_path(&self.dbus_address));
        sockets.extend(socket_path(&self.atspi_address));
        sockets.push(self.dir.clone());
        sockets
    }

    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.server_pids();
        for pid in found(self) {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        pids
    }

    pub fn server_pids(&self) -> Vec<u32> {
        let servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        servers.iter().map(|s| s.child.id()).collect()
    }

    pub fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        end(self);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The path of a `unix:path=` D-Bus address.
fn socket_path(address: &str) -> Option<PathBuf> {
    address
        .strip_prefix("unix:path=")
        .map(|rest| PathBuf::from(rest.split(',').next().unwrap_or(rest)))
}

/// How long processes get to end after SIGTERM, and after SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Every process on the desktop now, its servers excepted, and never this process.
pub(super) fn found(running: &Running) -> Vec<u32> {
    let me = std::process::id();
    let servers: HashSet<u32> = running.server_pids().into_iter().collect();
    let mut marks: Vec<Vec<u8>> = vec![format!("COMPUTER_DESKTOP={}", running.id).into_bytes()];
    if !running.display.is_empty() {
        marks.push(format!("DISPLAY={}", running.display).into_bytes());
        marks.push(format!("DISPLAY={}.0", running.display).into_bytes());
    }
    let wayland = running.wayland_socket.display().to_string();
    let swaysock = running.swaysock.display().to_string();
    for (name, value) in [
        ("DBUS_SESSION_BUS_ADDRESS", &running.dbus_address),
        ("AT_SPI_BUS_ADDRESS", &running.atspi_address),
        ("WAYLAND_DISPLAY", &wayland),
        ("SWAYSOCK", &swaysock),
    ] {
        if !value.is_empty() {
            marks.push(format!("{name}={value}").into_bytes());
        }
    }
    let table = processes();
    let mut on: HashSet<u32> = table
        .keys()
        .copied()
        .filter(|pid| environ_names(*pid, &marks))
        .collect();
    if !running.display.is_empty() {
        on.extend(x_client_pids(&running.display));
    }
    if !running.swaysock.as_os_str().is_empty() {
        on.extend(sway_client_pids(&running.swaysock));
    }
    // This process is a client of the display (its gui surface), and whatever it started
    // (other desktops' servers among them) is not on this one by descent.
    on.remove(&me);
    // Descendants of any process on it, or of its servers (what the buses start).
    let mut roots: Vec<u32> = on.iter().copied().chain(servers.iter().copied()).collect();
    while let Some(parent) = roots.pop() {
        for (&pid, &ppid) in &table {
            if ppid == parent && on.insert(pid) {
                roots.push(pid);
            }
        }
    }
    on.retain(|pid| *pid != me && *pid > 1 && !servers.contains(pid) && alive(*pid));
    let mut pids: Vec<u32> = on.into_iter().collect();
    pids.sort_unstable();
    pids
}

/// Ends what runs on the desktop, then its servers (the X server last), waiting for each.
pub(super) fn end(running: &mut Running) {
    let apps = found(running);
    signal_and_wait(&apps);
    // Closing apps may have started others (a crash reporter): once more.
    let late = found(running);
    signal_and_wait(&late);
    let mut servers =
        std::mem::take(&mut *running.servers.lock().unwrap_or_else(|e| e.into_inner()));
    // Servers are kept newest first; the X server was started first and ends last.
    for server in &mut servers {
        let pid = server.child.id();
        signal(pid, libc::SIGTERM);
        wait_gone(&[pid], TERM_GRACE);
        if !matches!(server.child.try_wait(), Ok(Some(_))) {
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
        // Waited for: the reaper of adopted orphans may have this pid again.
        crate::kit::spawn::own_children().remove(&pid);
        // Its process group: what it started that did not die with it.
        // SAFETY: kill on a process group this desktop made (process_group(0) at spawn).
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    }
    tracing::info!(
        desktop = %running.id,
        ended = apps.len() + late.len(),
        "an agent's own desktop is closed; every process on it ended"
    );
}

/// SIGTERM, a grace, SIGKILL for what is left, and a wait until none is left.
fn signal_and_wait(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    for &pid in pids {
        signal(pid, libc::SIGTERM);
    }
    if wait_gone(pids, TERM_GRACE) {
        return;
    }
    for &pid in pids {
        if alive(pid) {
            signal(pid, libc::SIGKILL);
        }
    }
    if !wait_gone(pids, KILL_GRACE) {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        tracing::warn!(?left, "processes of an agent's desktop outlived SIGKILL");
    }
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory effects; a pid gone since is answered ESRCH.
    unsafe { libc::kill(pid as i32, signal) };
}

/// Waits until none of `pids` is alive, at most `bound`; whether none is. Each exit is an event
/// (a pidfd becomes readable when its process ends, child or not), so nothing is polled on a
/// timer.
fn wait_gone(pids: &[u32], bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    // A pid that has no pidfd is gone already (ESRCH); on a kernel without pidfd_open (before
    // 5.3) nothing is waited for: what is alive is read at once, and the caller kills it.
    let mut fds: Vec<std::os::fd::OwnedFd> = pids.iter().filter_map(|pid| pidfd(*pid)).collect();
    while !fds.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .map(|fd| libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(fd),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: poll on descriptors this function owns, for as many entries as the vector holds.
        let ready =
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
        let mut index = 0;
        fds.retain(|_| {
            let ended = polled[index].revents != 0;
            index += 1;
            !ended
        });
    }
    !pids.iter().any(|p| alive(*p))
}

/// A descriptor that becomes readable when `pid` ends; `None` when it has ended already (or the
/// kernel has no pidfd_open, as [`wait_gone`] says).
fn pidfd(pid: u32) -> Option<std::os::fd::OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just made for this process and nothing else owns it.
    Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
}

/// Whether `pid` runs (a zombie has ended: only its parent's wait is left).
pub(super) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Every process now: pid → parent pid.
fn processes() -> HashMap<u32, u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Whether `pid`'s environment holds one of `marks` as a whole entry.
fn environ_names(pid: u32, marks: &[Vec<u8>]) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|b| *b == 0)
        .any(|entry| marks.iter().any(|mark| entry == mark.as_slice()))
}

/// The pids of the local clients of the X server at `display` (X-Resource), this process's own
/// connection not among them.
fn x_client_pids(display: &str) -> Vec<u32> {
    use x11rb::protocol::res::{ClientIdMask, ClientIdSpec, ConnectionExt as _};
    let Ok((conn, _)) = x11rb::connect(Some(display)) else {
        return Vec::new();
    };
    let spec = ClientIdSpec {
        client: 0,
        mask: ClientIdMask::LOCAL_CLIENT_PID,
    };
    let Ok(Ok(reply)) = conn.res_query_client_ids(&[spec]).map(|c| c.reply()) else {
        return Vec::new();
    };
    reply
        .ids
        .iter()
        .filter(|id| id.spec.mask.contains(ClientIdMask::LOCAL_CLIENT_PID))
        .filter_map(|id| id.value.first().copied())
        .collect()
}

/// The pids of the windows' clients of the sway at `swaysock` (its IPC's tree, which has each
/// view's pid from its socket's credentials: a program cannot clear it as it can its
/// environment).
fn sway_client_pids(swaysock: &std::path::Path) -> Vec<u32> {
    crate::gui::SwayIpc::new(swaysock.to_path_buf())
        .views()
        .map(|views| views.iter().filter_map(|view| view.pid).collect())
        .unwrap_or_default()
}

/// A process's resident memory (VmRSS), in bytes; 0 when it is gone.
pub(super) fn resident_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let kb = line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?;
                kb.trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kb| kb * 1024)
}
