//! The protocol the daemon, the containment zygote and a slot's init speak over their
//! SOCK_SEQPACKET sockets: what each message is (one byte of data), the descriptors a run
//! travels with and their order, the encoding of a run's [`Request`] and of the [`Plan`] the
//! zygote is started with, and the helpers that send and receive them. It depends on neither
//! side: `daemon/` (the launcher and its handle on the zygote) and `zygote/` (the zygote's loop,
//! the slots and runs) both build on it.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;

/// The argv\[0\] the daemon's binary is started with to serve as the zygote.
pub(super) const ZYGOTE_NAME: &str = "computer-contain-zygote";

/// What a message on the zygote's socket is, by its one byte of data.
pub(super) const MESSAGE_RUN: u8 = b'R';
/// Daemon to zygote: prepare one more slot and send it over.
pub(super) const MESSAGE_WANT_SLOT: u8 = b'W';
/// Zygote to daemon: a prepared slot's socket.
pub(super) const MESSAGE_SLOT: u8 = b'S';
/// A slot's init to the daemon: everything of the last run is gone; send the next.
pub(super) const MESSAGE_READY: u8 = b'Y';
/// A slot's init to the daemon, on a terminal run's own socket: the master side of the pty it
/// made for the run in the run's devpts.
pub(super) const MESSAGE_TERMINAL: u8 = b'T';

/// Descriptors of one run, in the order they travel.
pub(super) const RUN_FDS: usize = 7;
pub(super) const FD_REQUEST: usize = 0;
pub(super) const FD_STDIN: usize = 1;
pub(super) const FD_STDOUT: usize = 2;
pub(super) const FD_STDERR: usize = 3;
pub(super) const FD_REPORT: usize = 4;
pub(super) const FD_STOP: usize = 5;
/// The run's end of its tools channel when it was given tools (`Request::tools`); otherwise a
/// stand-in that travels unused.
pub(super) const FD_TOOLS: usize = 6;

/// Everything a run's setup needs, prepared once by the daemon and handed to the zygote.
#[derive(Debug, Clone)]
pub(in crate::kit::contain) struct Plan {
    pub(super) rootless: bool,
    pub(super) uid_map: CString,
    pub(super) gid_map: CString,
    /// Directories bind-mounted onto themselves, so that no run can rename them (and with them
    /// a masked path) away and put a directory of its own in their place.
    pub(super) pins: Vec<CString>,
    /// Directories covered by an empty read-only tmpfs.
    pub(super) masked_dirs: Vec<CString>,
    /// Files (and sockets) covered by a read-only bind of an empty file on a read-only tmpfs.
    pub(super) masked_files: Vec<CString>,
    /// Directories inside masked ones bound back, read-only, at their own path (the daemon's
    /// tools for runs).
    pub(super) shown: Vec<CString>,
    /// Paths covered by a read-only clone of themselves where they exist when a slot is made
    /// (a symbolic link is covered where it is named, by its target's content): what runs code
    /// at the person's next login. Outer ones first.
    pub(super) read_only: Vec<CString>,
    /// Directories above `read_only` paths bound onto themselves where they exist, so that no
    /// run can rename one away and put a directory of its own in its place.
    pub(super) read_only_pins: Vec<CString>,
    /// This run gets an empty network namespace.
    pub(super) no_network: bool,
    /// When set, every mount is read-only except these paths.
    pub(super) writable: Option<Vec<CString>>,
    /// A run on a desktop of an agent's own: what of the person's session it must not reach
    /// (from the run's [`Request::desktop`]).
    pub(super) desktop: Option<DesktopLimits>,
    pub(super) described: String,
}

/// What a run placed on a desktop of an agent's own may not reach, and the one X socket it
/// keeps: made by the daemon, applied by the slot's init after the plan's own masks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct DesktopLimits {
    /// The run's desktop's X socket, in `/tmp/.X11-unix`: that directory is covered by an empty
    /// tmpfs and this socket alone bound back, so no other display (the person's, another
    /// desktop's, one opened later) is there.
    pub x_socket: CString,
    /// Directories covered by an empty read-only tmpfs: the person's runtime directory, the
    /// directory of every desktop's private directory.
    pub hidden_dirs: Vec<CString>,
    /// Sockets (and files) covered by an empty file: the person's buses, Wayland and sway.
    pub hidden_files: Vec<CString>,
    /// The desktop's own directories inside a hidden one (its private directory, inside the
    /// directory of every desktop's), bound back as they are: writable where the run may write.
    pub shown: Vec<CString>,
    /// Abstract sockets bound outside the run are refused to it by Landlock scoping. False only
    /// where the kernel has no such scoping: the run's request then asks for an empty network
    /// namespace (`no_network`) instead, whose abstract socket namespace is empty.
    pub scope_abstract: bool,
}

/// What one run asks for, as it crosses to the zygote and on to a slot's init.
#[derive(Debug, Default)]
pub(super) struct Request {
    pub no_network: bool,
    pub writable: Option<Vec<CString>>,
    /// Login files the plan makes read-only that this run finds writable (the person's yes).
    pub login_files_writable: Vec<CString>,
    /// When set (rows, columns), the run's init makes a pty of that size in the run's own
    /// devpts, sends its master side back over the socket that travels as the run's stdin, and
    /// the program leads a session of its own with the terminal side as its controlling
    /// terminal, stdin, stdout and stderr, as a terminal session's shell must.
    pub terminal: Option<(u16, u16)>,
    /// The program inherits [`FD_TOOLS`] as `computer_ipc::tools::TOOLS_FD`.
    pub tools: bool,
    pub program: CString,
    pub cwd: CString,
    pub argv: Vec<CString>,
    /// `NAME=value` pairs.
    pub env: Vec<CString>,
    /// The run is placed on a desktop of an agent's own (a slot made for it alone).
    pub desktop: Option<DesktopLimits>,
}

impl Request {
    pub fn uses_default_limits(&self) -> bool {
        !self.no_network
            && self.writable.is_none()
            && self.login_files_writable.is_empty()
            && self.desktop.is_none()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.flag(self.no_network);
        out.flag(self.writable.is_some());
        out.list(self.writable.as_deref().unwrap_or_default());
        out.list(&self.login_files_writable);
        out.flag(self.terminal.is_some());
        let (rows, cols) = self.terminal.unwrap_or_default();
        out.number(u32::from(rows));
        out.number(u32::from(cols));
        out.flag(self.tools);
        out.bytes(self.program.as_bytes());
        out.bytes(self.cwd.as_bytes());
        out.list(&self.argv);
        out.list(&self.env);
        out.flag(self.desktop.is_some());
        let desktop = self.desktop.clone().unwrap_or_default();
        out.bytes(desktop.x_socket.as_bytes());
        out.list(&desktop.hidden_dirs);
        out.list(&desktop.hidden_files);
        out.list(&desktop.shown);
        out.flag(desktop.scope_abstract);
        out.0
    }

    pub fn decode(bytes: &[u8]) -> Option<Request> {
        let mut input = Reader(bytes);
        let no_network = input.flag()?;
        let has_writable = input.flag()?;
        let writable = input.list()?;
        let login_files_writable = input.list()?;
        let has_terminal = input.flag()?;
        let rows = u16::try_from(input.number()?).ok()?;
        let cols = u16::try_from(input.number()?).ok()?;
        let tools = input.flag()?;
        let program = input.c_string()?;
        let cwd = input.c_string()?;
        let argv = input.list()?;
        let env = input.list()?;
        let has_desktop = input.flag()?;
        let desktop = DesktopLimits {
            x_socket: input.c_string()?,
            hidden_dirs: input.list()?,
            hidden_files: input.list()?,
            shown: input.list()?,
            scope_abstract: input.flag()?,
        };
        let request = Request {
            no_network,
            writable: has_writable.then_some(writable),
            login_files_writable,
            terminal: has_terminal.then_some((rows, cols)),
            tools,
            program,
            cwd,
            argv,
            env,
            desktop: has_desktop.then_some(desktop),
        };
        input.0.is_empty().then_some(request)
    }

    /// Reads a request from the memfd it travels in (from its start: the zygote and the init
    /// share the memfd's offset).
    pub fn read_from(memfd: &OwnedFd) -> Option<Request> {
        let file = std::fs::File::from(memfd.try_clone().ok()?);
        let len = file.metadata().ok()?.len();
        // Bounded by what the daemon accepts in one request line.
        if len > 16 * 1024 * 1024 {
            return None;
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0).ok()?;
        Request::decode(&bytes)
    }
}

impl Plan {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.flag(self.rootless);
        out.bytes(self.uid_map.as_bytes());
        out.bytes(self.gid_map.as_bytes());
        out.list(&self.pins);
        out.list(&self.masked_dirs);
        out.list(&self.masked_files);
        out.list(&self.shown);
        out.list(&self.read_only);
        out.list(&self.read_only_pins);
        out.0
    }

    pub(super) fn decode(bytes: &[u8]) -> Option<Plan> {
        let mut input = Reader(bytes);
        let plan = Plan {
            rootless: input.flag()?,
            uid_map: input.c_string()?,
            gid_map: input.c_string()?,
            pins: input.list()?,
            masked_dirs: input.list()?,
            masked_files: input.list()?,
            shown: input.list()?,
            read_only: input.list()?,
            read_only_pins: input.list()?,
            no_network: false,
            writable: None,
            desktop: None,
            described: String::new(),
        };
        input.0.is_empty().then_some(plan)
    }
}

/// Length-prefixed fields, little-endian.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn flag(&mut self, value: bool) {
        self.0.push(u8::from(value));
    }

    fn number(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn list(&mut self, items: &[CString]) {
        self.0
            .extend_from_slice(&(items.len() as u32).to_le_bytes());
        for item in items {
            self.bytes(item.as_bytes());
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn number(&mut self) -> Option<usize> {
        let raw = self.take(4)?;
        Some(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize)
    }

    fn flag(&mut self) -> Option<bool> {
        match self.take(1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }

    fn c_string(&mut self) -> Option<CString> {
        let len = self.number()?;
        CString::new(self.take(len)?).ok()
    }

    fn list(&mut self) -> Option<Vec<CString>> {
        let count = self.number()?;
        // Every item takes at least its 4-byte length: a count beyond that is malformed.
        if count > self.0.len() / 4 {
            return None;
        }
        (0..count).map(|_| self.c_string()).collect()
    }
}

/// Writes `bytes` into a new memfd, to travel as a descriptor.
pub(super) fn memfd_with(bytes: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create takes a NUL-terminated name and returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"computer-run".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone()?).write_all_at(bytes, 0)?;
    Ok(fd)
}

/// Sends `fds` over a SOCK_SEQPACKET socket, in one message of kind `tag` (a run's
/// descriptors unless said otherwise).
pub(super) fn send_fds(socket: RawFd, fds: &[RawFd]) -> io::Result<()> {
    send_message(socket, MESSAGE_RUN, fds, 0)
}

/// Sends one message: the byte `tag` and `fds` (none is fine), with `flags` (MSG_DONTWAIT).
pub(super) fn send_message(socket: RawFd, tag: u8, fds: &[RawFd], flags: i32) -> io::Result<()> {
    computer_ipc::fdpass::send_message(socket, tag, fds, flags)
}

/// Receives one message of descriptors (close-on-exec) from a SOCK_SEQPACKET socket; `None`
/// when the peer has closed it.
pub(super) fn recv_fds(socket: RawFd) -> io::Result<Option<Vec<OwnedFd>>> {
    Ok(recv_message(socket, 0)?.map(|(_, fds)| fds))
}

/// Receives one message, its kind and its descriptors (close-on-exec), with `flags`
/// (MSG_DONTWAIT: `WouldBlock` when none is waiting); `None` when the peer has closed it.
pub(super) fn recv_message(socket: RawFd, flags: i32) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    computer_ipc::fdpass::recv_message(socket, RUN_FDS, flags)
}

/// A connected pair of SOCK_SEQPACKET sockets, close-on-exec.
pub(super) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two new descriptors into the array we own.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    fn c(text: &str) -> CString {
        CString::new(text).unwrap()
    }

    #[test]
    fn a_request_round_trips_and_anything_else_is_refused() {
        let request = Request {
            no_network: true,
            writable: Some(vec![c("/tmp/a"), c("/home/p/work")]),
            login_files_writable: vec![c("/home/p/.bashrc")],
            terminal: Some((30, 100)),
            tools: true,
            program: c("/bin/sh"),
            cwd: c("/home/p"),
            argv: vec![c("sh"), c("-c"), c("echo é; true")],
            env: vec![c("PATH=/usr/bin:/bin"), c("EMPTY=")],
            desktop: Some(DesktopLimits {
                x_socket: c("/tmp/.X11-unix/X100"),
                hidden_dirs: vec![c("/run/user/1000"), c("/tmp/computer-desktops-0")],
                hidden_files: vec![c("/tmp/dbus-abc")],
                shown: vec![c("/tmp/computer-desktops-0/computer-desktop-1-1-cd")],
                scope_abstract: true,
            }),
        };
        let bytes = request.encode();
        let back = Request::decode(&bytes).expect("decodes");
        assert_eq!(back.encode(), bytes);
        assert_eq!(back.writable, request.writable);
        assert_eq!(back.login_files_writable, request.login_files_writable);
        assert_eq!(back.argv, request.argv);
        assert_eq!(back.env, request.env);
        assert_eq!(back.terminal, Some((30, 100)));
        assert!(back.tools);
        assert_eq!(back.desktop, request.desktop);
        assert!(!back.uses_default_limits());
        // A desktop alone is a limit of its own: the run gets a slot made for it.
        let on_desktop = Request {
            program: c("/bin/true"),
            cwd: c("/"),
            desktop: Some(DesktopLimits::default()),
            ..Request::default()
        };
        let back = Request::decode(&on_desktop.encode()).expect("decodes");
        assert_eq!(back.desktop, Some(DesktopLimits::default()));
        assert!(!back.uses_default_limits());

        let plain = Request {
            program: c("/bin/true"),
            cwd: c("/"),
            ..Request::default()
        };
        let back = Request::decode(&plain.encode()).expect("decodes");
        assert!(back.writable.is_none() && back.desktop.is_none() && back.uses_default_limits());

        // Cut short anywhere, padded, a flag other than 0 or 1, a count beyond the bytes, a NUL
        // inside a string: each is refused, never read past its end.
        for cut in 0..bytes.len() {
            assert!(Request::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(Request::decode(&padded).is_none());
        let mut bad_flag = bytes.clone();
        bad_flag[0] = 2;
        assert!(Request::decode(&bad_flag).is_none());
        let mut huge_count = bytes.clone();
        huge_count[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Request::decode(&huge_count).is_none());
        let mut with_nul = Writer::default();
        with_nul.flag(false);
        with_nul.flag(false);
        with_nul.0.extend_from_slice(&0u32.to_le_bytes());
        with_nul.0.extend_from_slice(&0u32.to_le_bytes());
        with_nul.flag(false);
        with_nul.number(0);
        with_nul.number(0);
        with_nul.bytes(b"/bin/t\0rue");
        assert!(Request::decode(&with_nul.0).is_none());
    }

    #[test]
    fn a_request_travels_in_a_memfd_and_descriptors_over_a_socket() {
        let request = Request {
            program: c("/bin/true"),
            cwd: c("/"),
            argv: vec![c("true")],
            ..Request::default()
        };
        let memfd = memfd_with(&request.encode()).unwrap();
        let (ours, theirs) = seqpacket_pair().unwrap();
        send_fds(ours.as_raw_fd(), &[memfd.as_raw_fd()]).unwrap();
        let received = recv_fds(theirs.as_raw_fd()).unwrap().expect("a message");
        assert_eq!(received.len(), 1);
        let back = Request::read_from(&received[0]).expect("the request");
        assert_eq!(back.encode(), request.encode());
        drop(ours);
        assert!(
            recv_fds(theirs.as_raw_fd()).unwrap().is_none(),
            "end of socket"
        );
    }
}
