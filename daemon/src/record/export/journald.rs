//! The journald sink: each row as one journal entry, sent with the journal's native protocol (a
//! datagram of `FIELD=value` lines to its socket; a row too large for a datagram goes in a sealed
//! memfd, as the journal's own clients send large entries).
//!
//! A row counts as taken once its datagram is in the journal's socket: the kernel then holds it
//! for journald, which reads it even if it was busy. What journald does not read before it dies
//! is lost to it, and `COMPUTER_SEQ` shows the gap.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::{Row, Sink};

pub const NAME: &str = "journald";

/// Which journal: the system's, or a namespace of it (`systemd-journald@NAME`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct JournaldTarget {
    pub namespace: Option<String>,
}

impl JournaldTarget {
    /// The journal's native socket.
    pub fn socket(&self) -> PathBuf {
        match &self.namespace {
            None => PathBuf::from("/run/systemd/journal/socket"),
            Some(name) => PathBuf::from(format!("/run/systemd/journal.{name}/socket")),
        }
    }
}

impl fmt::Display for JournaldTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            None => write!(f, "the system journal"),
            Some(name) => write!(f, "journal namespace {name}"),
        }
    }
}

/// Written back as it is read: `true` for the system journal, `"NAME"` for a namespace.
impl serde::Serialize for JournaldTarget {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.namespace {
            None => serializer.serialize_bool(true),
            Some(name) => serializer.serialize_str(name),
        }
    }
}

impl TryFrom<toml::Value> for JournaldTarget {
    type Error = String;

    fn try_from(value: toml::Value) -> Result<Self, String> {
        let valid = "valid: true (the system journal) or \"NAME\" (the journal namespace NAME, \
                     letters, digits, `-`, `_` and `.`)";
        if !cfg!(target_os = "linux") {
            return Err(format!(
                "journald exists on Linux only; on this system use `syslog` or `otlp` ({valid})"
            ));
        }
        let namespace = match value {
            toml::Value::Boolean(true) => None,
            toml::Value::String(name)
                if !name.is_empty()
                    && !name.starts_with('.')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                Some(name)
            }
            toml::Value::Boolean(false) => {
                return Err(format!(
                    "journald = false: leave the key out to export nowhere; {valid}"
                ));
            }
            other => return Err(format!("journald = {other} is not a journal; {valid}")),
        };
        Ok(JournaldTarget { namespace })
    }
}

/// The journald sink.
pub(super) struct Journald {
    target: JournaldTarget,
}

impl Journald {
    pub fn new(target: &JournaldTarget) -> Journald {
        Journald {
            target: target.clone(),
        }
    }
}

/// A datagram socket connected to the journal, and the last row it handed over.
pub(super) struct Journal {
    socket: tokio::net::UnixDatagram,
    taken: Option<i64>,
}

impl Sink for Journald {
    type Conn = Journal;

    fn name(&self) -> &'static str {
        NAME
    }

    fn address(&self) -> String {
        format!("{} ({})", self.target, self.target.socket().display())
    }

    async fn connect(&self) -> std::io::Result<Journal> {
        let socket = tokio::net::UnixDatagram::unbound()?;
        socket.connect(self.target.socket())?;
        Ok(Journal {
            socket,
            taken: None,
        })
    }

    async fn send(&self, conn: &mut Journal, rows: &[Row]) -> std::io::Result<()> {
        for row in rows {
            let entry = entry(row);
            match conn.socket.send(&entry).await {
                Ok(_) => {}
                Err(err) if err.raw_os_error() == Some(libc::EMSGSIZE) => {
                    send_in_memfd(&conn.socket, &entry).await?;
                }
                Err(err) => return Err(err),
            }
            conn.taken = Some(row.seq);
        }
        Ok(())
    }

    fn acknowledged(&self, conn: &mut Journal) -> Option<i64> {
        conn.taken.take()
    }

    /// A datagram socket has no peer to lose until a send finds it gone.
    async fn closed(&self, _conn: &mut Journal) -> bool {
        false
    }
}

/// A row as a journal entry: the stored text (what the hash covers) as `MESSAGE`, the row's
/// place in the chain as `COMPUTER_*` fields, and syslog's facility and severity for audit
/// records (`authpriv`, `info`).
fn entry(row: &Row) -> Vec<u8> {
    let time = chrono::DateTime::from_timestamp_millis(row.at_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    let mut out = Vec::with_capacity(row.text.len() + 512);
    for (name, value) in [
        ("MESSAGE", row.text.as_str()),
        ("PRIORITY", "6"),
        ("SYSLOG_FACILITY", "10"),
        ("SYSLOG_IDENTIFIER", "computer"),
        ("COMPUTER_SEQ", &row.seq.to_string()),
        ("COMPUTER_KIND", &row.kind),
        ("COMPUTER_CALL", &row.call_id),
        ("COMPUTER_SURFACE", &row.surface),
        ("COMPUTER_COMMAND", &row.command),
        ("COMPUTER_PREV", &row.prev_hash),
        ("COMPUTER_HASH", &row.hash),
        ("COMPUTER_TIME", &time),
    ] {
        field(&mut out, name, value.as_bytes());
    }
    out
}

/// One field in the native protocol: `NAME=value\n`, or, for a value with a newline, the name,
/// a newline, the value's length as 64-bit little endian, the value and a newline.
fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    if value.contains(&b'\n') {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        out.push(b'=');
    }
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// Sends `entry` the way the journal takes entries larger than a datagram: written to a memfd,
/// sealed so it cannot change, and the descriptor passed alone in an empty datagram.
#[cfg(target_os = "linux")]
async fn send_in_memfd(socket: &tokio::net::UnixDatagram, entry: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: a NUL-terminated name and flags; the descriptor returned is checked and owned.
    let fd = unsafe {
        libc::memfd_create(
            c"computer-receipt".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(memfd.try_clone()?).write_all(entry)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS on a memfd we own, with an int argument.
    if unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    socket
        .async_io(tokio::io::Interest::WRITABLE, || {
            send_descriptor(socket.as_raw_fd(), memfd.as_raw_fd())
        })
        .await
}

/// One `sendmsg` of an empty datagram carrying `fd` (SCM_RIGHTS).
#[cfg(target_os = "linux")]
fn send_descriptor(socket: std::os::fd::RawFd, fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    // u64 elements keep the control buffer aligned for `cmsghdr`.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; the fields set below point into live buffers.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the control buffer holds one header and an int (CMSG_SPACE of an int), so
    // CMSG_FIRSTHDR is non-null and CMSG_DATA has room for the descriptor.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>(), fd);
    }
    // SAFETY: a connected socket and a message whose pointers are valid for the call.
    let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
async fn send_in_memfd(_socket: &tokio::net::UnixDatagram, _entry: &[u8]) -> std::io::Result<()> {
    Err(std::io::Error::other("journald exists on Linux only"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_a_newline_carry_their_length() {
        let mut out = Vec::new();
        field(&mut out, "A", b"one");
        field(&mut out, "B", b"x\ny");
        let mut expected = b"A=one\nB\n".to_vec();
        expected.extend_from_slice(&3u64.to_le_bytes());
        expected.extend_from_slice(b"x\ny\n");
        assert_eq!(out, expected);
    }

    #[test]
    fn journal_targets_are_checked_with_what_would_be_valid() {
        let parse = |text: &str| {
            let table: toml::Table = format!("v = {text}").parse().unwrap();
            JournaldTarget::try_from(table["v"].clone())
        };
        assert_eq!(parse("true").unwrap().namespace, None);
        let audit = parse("\"audit\"").unwrap();
        assert_eq!(
            audit.socket(),
            PathBuf::from("/run/systemd/journal.audit/socket")
        );
        for bad in ["false", "5", "\"../x\"", "\"\"", "\"a/b\""] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("valid:"), "{bad}: {err}");
        }
    }
}
