//! Where the daemon's socket, state and config live, and the checks that keep the socket private.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Socket file name inside the runtime directory.
pub const SOCKET_FILE: &str = "computer.sock";

/// Replaces `/run/user` in the runtime-dir rule. For the test suite only, so that it can play a
/// person's session without touching the machine's real one; nothing else should set it.
pub const TEST_RUN_USER_BASE_ENV: &str = "COMPUTER_TEST_RUN_USER_BASE";

/// The agent socket. One rule, so that every process of a person finds the same daemon whatever
/// environment its host passed it (MCP hosts commonly strip it to `HOME`, `PATH`, `USER`, ...):
///
/// 1. `$COMPUTER_SOCKET`, when set;
/// 2. else `$XDG_RUNTIME_DIR/computer/computer.sock`;
/// 3. else, on Linux, `/run/user/$UID/computer/computer.sock` when `/run/user/$UID` is a directory
///    owned by this user (what `XDG_RUNTIME_DIR` points at in a systemd login session anyway);
///    on macOS, `computer-$UID/computer.sock` in the per-user temporary directory that
///    `confstr(_CS_DARWIN_USER_TEMP_DIR)` names (the `$TMPDIR` launchd gives the session, found
///    without reading the environment);
/// 4. else `/tmp/computer-$UID/computer.sock` (`$TMPDIR` is not read on Linux: a host that strips
///    it must land on the same path as a terminal that sets it).
pub fn socket_path() -> PathBuf {
    if let Some(path) = non_empty_env("COMPUTER_SOCKET") {
        return PathBuf::from(path);
    }
    runtime_dir().join(SOCKET_FILE)
}

/// The control socket, where people answer approvals: `$COMPUTER_CONTROL_SOCKET`, else
/// `control.sock` beside the agent socket (so it follows the same rule). Runs of the shell surface
/// never see either path.
pub fn control_socket_path() -> PathBuf {
    if let Some(path) = non_empty_env("COMPUTER_CONTROL_SOCKET") {
        return PathBuf::from(path);
    }
    socket_path()
        .parent()
        .map(|dir| dir.join("control.sock"))
        .unwrap_or_else(|| PathBuf::from("control.sock"))
}

/// The directory holding the sockets, by steps 2 to 4 of [`socket_path`]'s rule.
fn runtime_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("XDG_RUNTIME_DIR") {
        return PathBuf::from(dir).join("computer");
    }
    if let Some(dir) = session_runtime_dir() {
        return dir.join("computer");
    }
    fallback_runtime_base().join(format!("computer-{}", uid()))
}

/// The login session's runtime directory found without the environment: `/run/user/$UID` on
/// Linux when it exists and is ours. This is also where the session publishes its bus.
#[cfg(target_os = "linux")]
pub fn session_runtime_dir() -> Option<PathBuf> {
    let base = non_empty_env(TEST_RUN_USER_BASE_ENV).unwrap_or_else(|| "/run/user".into());
    let dir = PathBuf::from(base).join(uid().to_string());
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == uid()).then_some(dir)
}

/// macOS has no per-session runtime directory; the per-user temporary directory stands in.
#[cfg(not(target_os = "linux"))]
pub fn session_runtime_dir() -> Option<PathBuf> {
    None
}

#[cfg(target_os = "linux")]
fn fallback_runtime_base() -> PathBuf {
    PathBuf::from("/tmp")
}

#[cfg(target_os = "macos")]
fn fallback_runtime_base() -> PathBuf {
    darwin_user_temp_dir()
        .or_else(|| non_empty_env("TMPDIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn fallback_runtime_base() -> PathBuf {
    non_empty_env("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// The per-user temporary directory (`/var/folders/…/T/`) as the system knows it, whatever
/// `$TMPDIR` says.
#[cfg(target_os = "macos")]
fn darwin_user_temp_dir() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut buf = vec![0u8; 1024];
    // SAFETY: confstr writes at most `buf.len()` bytes, NUL included, into a buffer we own.
    let len = unsafe {
        libc::confstr(
            libc::_CS_DARWIN_USER_TEMP_DIR,
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if len == 0 || len > buf.len() {
        return None;
    }
    buf.truncate(len - 1);
    Some(PathBuf::from(std::ffi::OsString::from_vec(buf)))
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `$COMPUTER_STATE_DIR`, else `$XDG_STATE_HOME/computer`, else `~/.local/state/computer`.
pub fn state_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("COMPUTER_STATE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = non_empty_env("XDG_STATE_HOME") {
        return PathBuf::from(dir).join("computer");
    }
    home_dir().join(".local/state/computer")
}

/// `$COMPUTER_CONFIG`, else `$XDG_CONFIG_HOME/computer/config.toml`, else
/// `~/.config/computer/config.toml`. The file is optional.
pub fn config_path() -> PathBuf {
    if let Some(path) = non_empty_env("COMPUTER_CONFIG") {
        return PathBuf::from(path);
    }
    if let Some(dir) = non_empty_env("XDG_CONFIG_HOME") {
        return PathBuf::from(dir).join("computer/config.toml");
    }
    home_dir().join(".config/computer/config.toml")
}

/// `$HOME`, else the home the user database gives this user (a host that starts the relay with
/// no `HOME` still finds the person's config and state), else `/`.
fn home_dir() -> PathBuf {
    non_empty_env("HOME")
        .map(PathBuf::from)
        .or_else(passwd_home)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// This user's home directory in the user database (`getpwuid_r`).
fn passwd_home() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: every pointer is to memory we own, sized as passed; on success `found` points at
    // `entry`, whose strings point into `buf`, both alive while they are read below.
    let status = unsafe {
        libc::getpwuid_r(
            uid(),
            &mut entry,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: `pw_dir` is a NUL-terminated string inside `buf` (checked non-null above).
    let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
    let dir = std::ffi::OsStr::from_bytes(dir.to_bytes());
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Why a directory that should be private to this user is not.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error(
        "{path} is a symlink; refusing to use it (remove it, or point COMPUTER_SOCKET elsewhere)"
    )]
    Symlink { path: PathBuf },
    #[error("{path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("{path} is owned by uid {owner}, not by this user (uid {uid}); refusing to use it")]
    WrongOwner { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{path} has mode {mode:o}, writable by group or others; run `chmod 700 {path}` or remove it"
    )]
    Writable { path: PathBuf, mode: u32 },
    #[error("cannot create or inspect {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Creates `dir` with mode 0700 if it is missing, then checks that it is a real directory owned by
/// this user and not writable by anyone else. A socket in such a directory cannot be swapped or
/// reached through a path another user controls.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    let io_err = |source| PrivateDirError::Io {
        path: dir.to_path_buf(),
        source,
    };
    match std::fs::symlink_metadata(dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err)?;
        }
        Err(err) => return Err(io_err(err)),
        Ok(_) => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io_err)?;
    if meta.file_type().is_symlink() {
        return Err(PrivateDirError::Symlink {
            path: dir.to_path_buf(),
        });
    }
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid {
        return Err(PrivateDirError::WrongOwner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(PrivateDirError::Writable {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_missing_dir_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn refuses_symlink_and_writable_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            ensure_private_dir(&link),
            Err(PrivateDirError::Symlink { .. })
        ));

        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = ensure_private_dir(&real).unwrap_err();
        assert!(
            matches!(err, PrivateDirError::Writable { mode: 0o777, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("chmod 700"), "{err}");
    }
}
