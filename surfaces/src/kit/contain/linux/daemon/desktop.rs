//! What a run placed on a desktop of an agent's own must not reach ([`DesktopLimits`]), made by
//! the daemon for each such run from the desktop's own sockets and the person's session as the
//! daemon's environment names it: the X socket it keeps, the person's runtime directory, buses,
//! Wayland and sway sockets and the directory of every desktop's private directory it finds
//! covered (its own desktop's bound back), and how abstract sockets are kept from it (Landlock
//! scoping, else an empty network namespace).

use std::ffi::CString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::super::landlock;
use super::super::wire::DesktopLimits;
use crate::kit::contain::{ContainError, DesktopReach, desktops_dir};

/// Where X servers put their path sockets (`X<display>`).
pub(super) const X11_DIR: &str = "/tmp/.X11-unix";
/// Where ICE (X session management) puts its sockets.
const ICE_DIR: &str = "/tmp/.ICE-unix";
/// How the directory of a daemon's desktops' private directories ([`desktops_dir`]) is named
/// in the temporary directory (then its user's uid).
const DESKTOPS_DIR_PREFIX: &str = "computer-desktops-";

/// Whether this kernel lets runs be kept from abstract sockets by Landlock (asked once).
pub(super) fn landlock_scopes() -> bool {
    static SCOPES: OnceLock<bool> = OnceLock::new();
    *SCOPES.get_or_init(landlock::scopes_abstract_sockets)
}

/// How runs on a desktop of an agent's own are kept from the person's session, for the
/// containment's description (receipts and `doctor`).
pub(super) fn described() -> String {
    let abstract_sockets = if landlock_scopes() {
        format!(
            "abstract sockets outside the run are refused by Landlock scoping (ABI {})",
            landlock::abi()
        )
    } else {
        "this kernel has no Landlock scoping of abstract sockets (Linux 6.12, ABI 6), so such a \
         run gets an empty network namespace instead (no network, no abstract socket)"
            .to_string()
    };
    format!(
        "a run on a desktop of an agent's own reaches that desktop's display and buses only: \
         {X11_DIR} holds its X socket alone, the person's runtime directory, session and \
         accessibility buses, Wayland and sway sockets and the directory of every desktop's \
         private directory (the run's own bound back) are covered, and {abstract_sockets}"
    )
}

/// The limits of a run on the desktop `reach` describes.
pub(super) fn limits_for(reach: &DesktopReach) -> Result<DesktopLimits, ContainError> {
    let c = |path: &Path| {
        CString::new(path.as_os_str().as_bytes()).map_err(|_| ContainError::Setup {
            stage: "placing the run on its desktop",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} holds a NUL byte", path.display()),
            ),
        })
    };
    let own: Vec<PathBuf> = reach.own.iter().map(|p| canonical(p)).collect();
    // The X socket stays where it is named: it is bound back into the tmpfs at that name.
    let x_socket = reach
        .own
        .iter()
        .find(|p| p.parent() == Some(Path::new(X11_DIR)))
        .cloned()
        .unwrap_or_default();
    let own_dirs: Vec<&PathBuf> = own.iter().filter(|p| p.is_dir()).collect();
    let mut candidates: Vec<PathBuf> = person_session_paths();
    for address in &reach.person_buses {
        candidates.extend(bus_socket_paths(address));
    }
    candidates.extend(desktops_dirs());
    let mut hidden: Vec<(PathBuf, bool)> = Vec::new();
    let mut shown: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        let path = canonical(&candidate);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let is_own = own.contains(&path) || own_dirs.iter().any(|d| path.starts_with(d));
        if is_own || path.starts_with(X11_DIR) || !path.is_absolute() {
            continue;
        }
        if meta.is_dir() {
            if holds_what_runs_need(&path) {
                continue;
            }
            // The desktop's own directories inside it are bound back (its private directory
            // inside the directory of every desktop's).
            for dir in &own_dirs {
                if dir.starts_with(&path) && !shown.contains(dir) {
                    shown.push((*dir).clone());
                }
            }
        }
        if !hidden.iter().any(|(p, _)| *p == path) {
            hidden.push((path, meta.is_dir()));
        }
    }
    // Outer paths first; what lies inside a hidden directory is hidden with it.
    hidden.sort_by_key(|(p, _)| p.components().count());
    let all = hidden.clone();
    hidden.retain(|(p, _)| {
        !all.iter()
            .any(|(q, dir)| *dir && q != p && p.starts_with(q))
    });
    let (dirs, files): (Vec<_>, Vec<_>) = hidden.into_iter().partition(|(_, dir)| *dir);
    Ok(DesktopLimits {
        x_socket: c(&x_socket)?,
        hidden_dirs: dirs.iter().map(|(p, _)| c(p)).collect::<Result<_, _>>()?,
        hidden_files: files.iter().map(|(p, _)| c(p)).collect::<Result<_, _>>()?,
        shown: shown.iter().map(|p| c(p)).collect::<Result<_, _>>()?,
        scope_abstract: landlock_scopes(),
    })
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// A directory a run cannot do without, never covered whatever a variable names: `/`, the
/// temporary directory, the home directory, and every directory above them.
fn holds_what_runs_need(dir: &Path) -> bool {
    let needed = [
        Some(PathBuf::from("/tmp")),
        Some(std::env::temp_dir()),
        std::env::var_os("HOME").map(PathBuf::from),
    ];
    needed
        .into_iter()
        .flatten()
        .any(|need| canonical(&need).starts_with(dir))
}

/// The person's session as the daemon's environment names it: the runtime directory (the
/// session bus, the accessibility bus, Wayland, sway, PipeWire and the rest, where a session has
/// one), the session and accessibility buses' socket paths, the Wayland and sway sockets, the
/// accessibility bus's directory where there is no runtime directory, ICE's sockets.
fn person_session_paths() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let runtime = var("XDG_RUNTIME_DIR").map(PathBuf::from);
    let mut paths: Vec<PathBuf> = runtime.iter().cloned().collect();
    for bus in ["DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS"] {
        if let Some(address) = std::env::var(bus).ok().filter(|v| !v.is_empty()) {
            paths.extend(bus_socket_paths(&address));
        }
    }
    if let Some(wayland) = var("WAYLAND_DISPLAY").map(PathBuf::from) {
        match (&runtime, wayland.is_absolute()) {
            (_, true) => paths.push(wayland),
            (Some(runtime), false) => paths.push(runtime.join(wayland)),
            (None, false) => {}
        }
    }
    paths.extend(
        ["SWAYSOCK", "I3SOCK"]
            .iter()
            .filter_map(|n| var(n).map(PathBuf::from)),
    );
    // at-spi-bus-launcher's directory when the session has no runtime directory.
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")));
    paths.extend(cache.map(|cache| cache.join("at-spi")));
    paths.push(PathBuf::from(ICE_DIR));
    paths
}

/// The socket paths a D-Bus address names (`unix:path=`), its escapes undone. `abstract=`
/// sockets are left to the abstract sockets' scoping; `dir=` and `tmpdir=` name where a server
/// was told to listen, not its socket.
pub(super) fn bus_socket_paths(address: &str) -> Vec<PathBuf> {
    address
        .split(';')
        .filter_map(|one| one.strip_prefix("unix:"))
        .flat_map(|keys| keys.split(','))
        .filter_map(|pair| pair.strip_prefix("path="))
        .map(|escaped| PathBuf::from(std::ffi::OsString::from_vec(unescape(escaped))))
        .collect()
}

/// A D-Bus address value with its `%XX` escapes undone.
fn unescape(value: &str) -> Vec<u8> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    out
}

/// The directories that hold desktops' private directories (each of which holds that
/// desktop's session and accessibility buses): the daemon's own ([`desktops_dir`]), covered
/// whole, so that a desktop opened after the run started is out of its reach too, and those
/// of other users' daemons found in the temporary directory.
fn desktops_dirs() -> Vec<PathBuf> {
    let own = desktops_dir();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return vec![own];
    };
    let others = entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .as_bytes()
                .starts_with(DESKTOPS_DIR_PREFIX.as_bytes())
        })
        .map(|entry| entry.path())
        .filter(|path| *path != own);
    std::iter::once(own.clone()).chain(others).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bus_address_names_its_socket_paths_and_no_others() {
        assert_eq!(
            bus_socket_paths("unix:path=/run/user/1000/bus"),
            vec![PathBuf::from("/run/user/1000/bus")]
        );
        assert_eq!(
            bus_socket_paths("unix:path=/tmp/a%20b,guid=12;unix:abstract=/tmp/dbus-x,guid=3"),
            vec![PathBuf::from("/tmp/a b")]
        );
        assert!(bus_socket_paths("unix:tmpdir=/tmp").is_empty());
        assert!(bus_socket_paths("tcp:host=localhost,port=1").is_empty());
    }

    #[test]
    fn a_desktop_run_covers_every_desktops_directory_and_binds_back_its_own() {
        let parent = desktops_dir();
        std::fs::create_dir_all(&parent).unwrap();
        let own_dir = parent.join(format!("computer-desktop-{}-1-aa", std::process::id()));
        std::fs::create_dir_all(&own_dir).unwrap();
        let reach = DesktopReach {
            own: vec![
                PathBuf::from("/tmp/.X11-unix/X4242"),
                own_dir.join("bus"),
                own_dir.clone(),
            ],
            person_buses: vec!["unix:path=/nonexistent/bus".into()],
        };
        let limits = limits_for(&reach).expect("limits");
        let _ = std::fs::remove_dir(&own_dir);
        assert_eq!(limits.x_socket.as_bytes(), b"/tmp/.X11-unix/X4242");
        let bytes = |p: &Path| canonical(p).as_os_str().as_bytes().to_vec();
        let dirs: Vec<&[u8]> = limits.hidden_dirs.iter().map(|d| d.as_bytes()).collect();
        // The parent whole: a desktop opened later, whatever its name, is inside it.
        assert!(dirs.contains(&bytes(&parent).as_slice()), "{dirs:?}");
        assert!(!dirs.contains(&bytes(&own_dir).as_slice()), "{dirs:?}");
        let shown: Vec<&[u8]> = limits.shown.iter().map(|d| d.as_bytes()).collect();
        assert_eq!(shown, vec![bytes(&own_dir).as_slice()]);
        for path in limits.hidden_dirs.iter().chain(&limits.hidden_files) {
            let path = Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
            assert!(!holds_what_runs_need(path) || !path.is_dir(), "{path:?}");
            assert!(!path.starts_with(X11_DIR), "{path:?}");
        }
    }
}
