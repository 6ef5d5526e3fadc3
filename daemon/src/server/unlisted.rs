//! Listening sockets whose address names no path of the daemon's (Linux).
//!
//! `/proc/net/unix` lists every Unix socket of the reader's network namespace with the address it
//! was bound to, and the server end of each connection carries its listener's address (the
//! kernel makes that end in the client's namespace, so no namespace of the daemon's hides it).
//! So the socket is bound through the directory's descriptor (`/proc/self/fd/N/…`) under a name
//! that says nothing, and then renamed to its path: clients find it by path as before, and what
//! the list shows is `/proc/self/fd/N/.listening-…`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A socket listening at `path` (mode 0600, set before `bind`, so the file is born private), bound
/// under a name that does not say where; `None` where this system gives no `/proc/self/fd` (the
/// caller then binds the path itself).
pub fn listen(path: &Path) -> io::Result<Option<OwnedFd>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file in a directory", path.display()),
        ));
    };
    let dir = std::fs::File::open(dir)?;
    let neutral = format!(".listening-{}", std::process::id());
    let through_fd = format!("/proc/self/fd/{}/{neutral}", dir.as_raw_fd());
    if !Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).is_dir() {
        return Ok(None);
    }
    let socket = stream_socket()?;
    let _ = unlink_at(&dir, &neutral);
    bind_and_listen(&socket, through_fd.as_bytes())?;
    if let Err(err) = rename_at(&dir, &neutral, name.as_bytes()) {
        let _ = unlink_at(&dir, &neutral);
        return Err(err);
    }
    Ok(Some(socket))
}

fn stream_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind_and_listen(socket: &OwnedFd, address_text: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_un is plain data.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if address_text.len() >= address.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the socket's address is too long",
        ));
    }
    for (slot, byte) in address.sun_path.iter_mut().zip(address_text) {
        *slot = *byte as libc::c_char;
    }
    let length = std::mem::size_of::<libc::sa_family_t>() + address_text.len() + 1;
    let fd = socket.as_raw_fd();
    // SAFETY: fchmod, bind and listen on a socket we own, with an address built above.
    let failed = unsafe {
        libc::fchmod(fd, 0o600) != 0
            || libc::bind(fd, (&raw const address).cast(), length as libc::socklen_t) != 0
            || libc::listen(fd, libc::SOMAXCONN) != 0
    };
    if failed {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a name"))
}

/// Renames `from` to `to` inside `dir`, replacing nothing: the caller cleared `to`, and a file
/// that appeared there since is left alone (the rename fails).
fn rename_at(dir: &std::fs::File, from: &str, to: &[u8]) -> io::Result<()> {
    let (from, to) = (c_name(from.as_bytes())?, c_name(to)?);
    let fd = dir.as_raw_fd();
    // SAFETY: renameat2 with NUL-terminated names relative to a directory we hold open.
    let renamed =
        unsafe { libc::renameat2(fd, from.as_ptr(), fd, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if renamed != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn unlink_at(dir: &std::fs::File, name: &str) -> io::Result<()> {
    let name = c_name(name.as_bytes())?;
    // SAFETY: unlinkat with a NUL-terminated name relative to a directory we hold open.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_list_names_no_path_yet_clients_connect_by_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let socket = listen(&path)
            .unwrap()
            .expect("this machine has /proc/self/fd");
        let client = std::os::unix::net::UnixStream::connect(&path).expect("connects by path");
        let listing = std::fs::read_to_string("/proc/net/unix").unwrap();
        let dir_text = dir.path().to_str().unwrap();
        assert!(
            !listing.contains(dir_text) && !listing.contains("daemon.sock"),
            "the socket list names the path:\n{listing}"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no name left behind"
        );
        drop((client, socket));
    }
}
