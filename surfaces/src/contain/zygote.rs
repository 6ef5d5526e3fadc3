//! The containment zygote: a small process started from the daemon's own binary at start-up,
//! before any run, that forks the *slots* runs are served in (a supervisor and its init, with a
//! run's namespaces and mounts prepared ahead). Forking it costs a fraction of forking the daemon
//! (one thread, a few MiB, none of the daemon's memory).
//!
//! The zygote takes input only from the socket the daemon handed it as its stdin; it is not
//! dumpable, has an empty environment, and dies with the daemon (`PR_SET_PDEATHSIG`, and the end
//! of that socket). What crosses the socket, each message one byte and descriptors: the daemon
//! asks for a slot and the zygote sends the slot's socket back (the daemon then hands runs to
//! the slot itself); or, for a run with stricter limits or when no slot was at hand, the run
//! itself (a memfd with the request, its stdin, stdout, stderr, report pipe and stop pipe),
//! handed on unchanged to a slot made for it.
//!
//! A slot's init tells the daemon over the slot's socket when it can take the next run
//! ([`MESSAGE_READY`]): at once when a run left nothing behind (before it reports the run's
//! end), else once everything the run left has died. A slot whose leftovers do not die (a
//! process stuck in uninterruptible sleep on a hung mount) is set aside, not handed a run that
//! would wait on it.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;

use super::linux::{self, Plan};

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

/// How many prepared slots the daemon asks for ahead: one for the next run, one for a run
/// beside it.
const READY_SLOTS: usize = 2;

/// How many idle slots the daemon keeps after a burst of runs side by side; more are let go.
const MAX_IDLE_SLOTS: usize = 4;

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

/// What one run asks for, as it crosses to the zygote and on to a slot's init.
#[derive(Debug, Default)]
pub(super) struct Request {
    pub no_network: bool,
    pub writable: Option<Vec<CString>>,
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
}

impl Request {
    pub fn uses_default_limits(&self) -> bool {
        !self.no_network && self.writable.is_none()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.flag(self.no_network);
        out.flag(self.writable.is_some());
        out.list(self.writable.as_deref().unwrap_or_default());
        out.flag(self.terminal.is_some());
        let (rows, cols) = self.terminal.unwrap_or_default();
        out.number(u32::from(rows));
        out.number(u32::from(cols));
        out.flag(self.tools);
        out.bytes(self.program.as_bytes());
        out.bytes(self.cwd.as_bytes());
        out.list(&self.argv);
        out.list(&self.env);
        out.0
    }

    pub fn decode(bytes: &[u8]) -> Option<Request> {
        let mut input = Reader(bytes);
        let no_network = input.flag()?;
        let has_writable = input.flag()?;
        let writable = input.list()?;
        let has_terminal = input.flag()?;
        let rows = u16::try_from(input.number()?).ok()?;
        let cols = u16::try_from(input.number()?).ok()?;
        let tools = input.flag()?;
        let request = Request {
            no_network,
            writable: has_writable.then_some(writable),
            terminal: has_terminal.then_some((rows, cols)),
            tools,
            program: input.c_string()?,
            cwd: input.c_string()?,
            argv: input.list()?,
            env: input.list()?,
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
    fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.flag(self.rootless);
        out.bytes(self.uid_map.as_bytes());
        out.bytes(self.gid_map.as_bytes());
        out.list(&self.pins);
        out.list(&self.masked_dirs);
        out.list(&self.masked_files);
        out.0
    }

    fn decode(bytes: &[u8]) -> Option<Plan> {
        let mut input = Reader(bytes);
        let plan = Plan {
            rootless: input.flag()?,
            uid_map: input.c_string()?,
            gid_map: input.c_string()?,
            pins: input.list()?,
            masked_dirs: input.list()?,
            masked_files: input.list()?,
            no_network: false,
            writable: None,
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

/// The daemon's handle on its zygote, and the slots it has prepared and sent over.
#[derive(Debug)]
pub(super) struct Zygote {
    socket: OwnedFd,
    process: std::process::Child,
    /// Prepared slots at hand: a run with the default limits goes straight to the first, with
    /// no hop through the zygote on its way.
    slots: SlotsAtHand,
    /// Slots asked for and not yet received.
    asked: usize,
}

/// A slot at hand, by its socket.
#[derive(Debug)]
struct Slot {
    socket: OwnedFd,
    /// It served a run: its init says [`MESSAGE_READY`] before it takes another.
    served: bool,
}

/// Whether a slot that served a run can take the next one.
enum Readiness {
    Ready,
    /// Still ending what the last run left behind.
    Busy,
    /// Its init is gone.
    Gone,
}

/// The slots the daemon holds: those that can take a run now, and those still ending what
/// their last run left behind.
#[derive(Debug, Default)]
struct SlotsAtHand {
    ready: std::collections::VecDeque<Slot>,
    /// Set aside until their init says it is ready; at most [`MAX_IDLE_SLOTS`], oldest let go
    /// first.
    busy: std::collections::VecDeque<Slot>,
}

impl SlotsAtHand {
    /// A slot fresh from the zygote: its init takes the first run as soon as it is prepared.
    fn add_fresh(&mut self, socket: OwnedFd) {
        self.ready.push_back(Slot {
            socket,
            served: false,
        });
    }

    /// A slot whose run ended cleanly, kept unless enough are at hand.
    fn give_back(&mut self, socket: OwnedFd) {
        if self.ready.len() < MAX_IDLE_SLOTS {
            self.ready.push_back(Slot {
                socket,
                served: true,
            });
        }
    }

    fn len(&self) -> usize {
        self.ready.len()
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Hands `fds` to the first slot that can take them now; that slot's socket, or `None`
    /// when none can. Slots still busy are set aside, and those that have become ready since
    /// are used again.
    fn hand(&mut self, fds: &[RawFd; RUN_FDS]) -> Option<OwnedFd> {
        let mut still_busy = std::collections::VecDeque::new();
        while let Some(slot) = self.busy.pop_front() {
            match readiness(&slot.socket) {
                Readiness::Ready => self.ready.push_front(Slot {
                    socket: slot.socket,
                    served: false,
                }),
                Readiness::Busy => still_busy.push_back(slot),
                Readiness::Gone => {}
            }
        }
        self.busy = still_busy;
        while let Some(mut slot) = self.ready.pop_front() {
            if slot.served {
                match readiness(&slot.socket) {
                    Readiness::Ready => slot.served = false,
                    Readiness::Busy => {
                        self.busy.push_back(slot);
                        continue;
                    }
                    Readiness::Gone => continue,
                }
            }
            // A slot whose init is gone (its zygote was killed) refuses: try the next.
            if send_fds(slot.socket.as_raw_fd(), fds).is_ok() {
                self.let_go_of_the_stuck();
                return Some(slot.socket);
            }
        }
        self.let_go_of_the_stuck();
        None
    }

    /// Keeps at most [`MAX_IDLE_SLOTS`] busy slots, letting the oldest go: their inits end once
    /// what holds them does.
    fn let_go_of_the_stuck(&mut self) {
        while self.busy.len() > MAX_IDLE_SLOTS {
            self.busy.pop_front();
        }
    }
}

/// Takes a slot's ready message if its init has sent it, without waiting.
fn readiness(socket: &OwnedFd) -> Readiness {
    loop {
        match recv_message(socket.as_raw_fd(), libc::MSG_DONTWAIT) {
            Ok(Some((MESSAGE_READY, _))) => return Readiness::Ready,
            Ok(Some(_)) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Readiness::Busy,
            Ok(None) | Err(_) => return Readiness::Gone,
        }
    }
}

impl Zygote {
    /// Starts the zygote from this process's own binary and hands it `plan`. Call from the
    /// thread that lives as long as the daemon (the zygote dies when that thread ends).
    pub fn start(plan: &Plan) -> io::Result<Zygote> {
        let (ours, theirs) = seqpacket_pair()?;
        // SAFETY: getpid cannot fail.
        let daemon = unsafe { libc::getpid() };
        let mut command = std::process::Command::new("/proc/self/exe");
        command
            .arg0(ZYGOTE_NAME)
            .env_clear()
            .current_dir("/")
            .stdin(std::process::Stdio::from(theirs))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit());
        // SAFETY: prctl and getppid are async-signal-safe and touch no memory of ours.
        unsafe {
            command.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != daemon {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let process = command.spawn()?;
        let mut zygote = Zygote {
            socket: ours,
            process,
            slots: SlotsAtHand::default(),
            asked: 0,
        };
        let plan = memfd_with(&plan.encode())?;
        send_fds(zygote.socket.as_raw_fd(), &[plan.as_raw_fd()])?;
        zygote.ask_for_slots()?;
        Ok(zygote)
    }

    /// Hands one run's descriptors to a slot at hand, returning that slot (to be given back
    /// once the run has ended cleanly); or, for stricter limits or with no slot at hand, to the
    /// zygote, which prepares one for this run alone.
    ///
    /// A run that takes the last slot at hand asks for another at once, so that a run beside
    /// it finds one ready.
    pub fn launch(
        &mut self,
        fds: &[RawFd; RUN_FDS],
        default_limits: bool,
    ) -> io::Result<Option<OwnedFd>> {
        if default_limits {
            self.take_sent_slots()?;
            if let Some(slot) = self.slots.hand(fds) {
                if self.slots.is_empty() && self.asked == 0 {
                    send_message(self.socket.as_raw_fd(), MESSAGE_WANT_SLOT, &[], 0)?;
                    self.asked += 1;
                }
                return Ok(Some(slot));
            }
        }
        send_fds(self.socket.as_raw_fd(), fds)?;
        Ok(None)
    }

    /// Takes back the slot of a run that ended cleanly (its init reported, and serves the
    /// next run only once everything of this one is gone, which it says), unless enough are
    /// at hand.
    pub fn give_back(&mut self, slot: OwnedFd) {
        self.slots.give_back(slot);
    }

    /// Takes the slots the zygote has sent since the last run, without waiting.
    fn take_sent_slots(&mut self) -> io::Result<()> {
        loop {
            match recv_message(self.socket.as_raw_fd(), libc::MSG_DONTWAIT) {
                Ok(Some((MESSAGE_SLOT, fds))) => {
                    self.asked = self.asked.saturating_sub(1);
                    if let Some(slot) = fds.into_iter().next() {
                        self.slots.add_fresh(slot);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => return Err(io::Error::from_raw_os_error(libc::EPIPE)),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Asks the zygote for as many slots as keep [`READY_SLOTS`] at hand.
    pub fn ask_for_slots(&mut self) -> io::Result<()> {
        while self.slots.len() + self.asked < READY_SLOTS {
            send_message(self.socket.as_raw_fd(), MESSAGE_WANT_SLOT, &[], 0)?;
            self.asked += 1;
        }
        Ok(())
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // Its slots and their inits die with it (PR_SET_PDEATHSIG).
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Serves as the zygote when this process was started as one; returns otherwise. Call first
/// thing in `main`, before any thread is started.
pub fn serve_if_zygote() {
    if std::env::args_os().next().as_deref() != Some(OsStr::new(ZYGOTE_NAME)) {
        return;
    }
    std::process::exit(serve());
}

fn serve() -> i32 {
    // SAFETY: process-wide settings of this single-threaded process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        // Out of the daemon's session: no terminal, no signal meant for its process group.
        libc::setsid();
        // Slots end on their own; the kernel reaps them.
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    let daemon: RawFd = 0;
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes an int into the variable we own.
    let is_socket = unsafe {
        libc::getsockopt(
            daemon,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    } == 0;
    if !is_socket || kind != libc::SOCK_SEQPACKET {
        eprintln!("error: the containment zygote is started by `computer serve`, not by hand");
        return 2;
    }
    let plan = match recv_fds(daemon) {
        Ok(Some(fds)) if fds.len() == 1 => {
            let file = std::fs::File::from(fds.into_iter().next().expect("one descriptor"));
            let mut bytes = Vec::new();
            let read = file
                .metadata()
                .and_then(|meta| {
                    bytes.resize(meta.len() as usize, 0);
                    file.read_exact_at(&mut bytes, 0)
                })
                .is_ok();
            match read.then(|| Plan::decode(&bytes)).flatten() {
                Some(plan) => plan,
                None => return 2,
            }
        }
        _ => return 2,
    };
    loop {
        let (kind, fds) = match recv_message(daemon, 0) {
            Ok(Some(message)) => message,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            // The daemon is gone: so is every reason to exist.
            Ok(None) | Err(_) => return 0,
        };
        if kind == MESSAGE_WANT_SLOT {
            // A slot for the daemon to keep at hand; the zygote keeps no copy of its socket. A
            // slot that cannot be made is answered all the same, with no descriptor, so the
            // daemon stops waiting for it (its runs then come here instead).
            let _ = match linux::spawn_slot(&plan) {
                Ok(slot) => send_message(daemon, MESSAGE_SLOT, &[slot.as_raw_fd()], 0),
                Err(_) => send_message(daemon, MESSAGE_SLOT, &[], 0),
            };
            continue;
        }
        if kind != MESSAGE_RUN || fds.len() != RUN_FDS {
            continue;
        }
        let Some(request) = Request::read_from(&fds[FD_REQUEST]) else {
            linux::report_setup_error(
                fds[FD_REPORT].as_raw_fd(),
                linux::STAGE_REQUEST,
                libc::EINVAL,
            );
            continue;
        };
        let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        // A run reaches the zygote when it asks for stricter limits (a slot made for it alone)
        // or when the daemon had no prepared slot at hand.
        let slot_plan = if request.uses_default_limits() {
            None
        } else {
            Some(plan.with_request_limits(&request))
        };
        let handed = linux::spawn_slot(slot_plan.as_ref().unwrap_or(&plan))
            .and_then(|slot| send_fds(slot.as_raw_fd(), &raw));
        if let Err(err) = handed {
            linux::report_setup_error(
                fds[FD_REPORT].as_raw_fd(),
                linux::STAGE_SUPERVISOR,
                err.raw_os_error().unwrap_or(libc::EIO),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's descriptors for the slot tests (what they are does not matter: they travel).
    fn run_fds() -> (Vec<OwnedFd>, [RawFd; RUN_FDS]) {
        let owned: Vec<OwnedFd> = (0..RUN_FDS)
            .map(|_| std::fs::File::open("/dev/null").unwrap().into())
            .collect();
        let raw = std::array::from_fn(|i| owned[i].as_raw_fd());
        (owned, raw)
    }

    /// The init's side received a run.
    fn got_run(init: &OwnedFd) -> bool {
        matches!(
            recv_message(init.as_raw_fd(), libc::MSG_DONTWAIT),
            Ok(Some((MESSAGE_RUN, fds))) if fds.len() == RUN_FDS
        )
    }

    #[test]
    fn a_slot_that_served_a_run_takes_the_next_only_once_its_init_is_ready() {
        let (_owned, fds) = run_fds();
        let (ours, init) = seqpacket_pair().unwrap();
        let mut slots = SlotsAtHand::default();
        // Fresh from the zygote: handed a run at once.
        slots.add_fresh(ours);
        let ours = slots.hand(&fds).expect("a fresh slot takes a run");
        assert!(got_run(&init));

        // Given back, its leftovers still dying: set aside, not handed the run.
        slots.give_back(ours);
        assert!(
            slots.hand(&fds).is_none(),
            "a busy slot is not handed a run"
        );
        assert!(!got_run(&init), "nothing reached the busy slot");
        assert_eq!((slots.len(), slots.busy.len()), (0, 1));

        // Its init says it is ready: the next run goes to it.
        send_message(init.as_raw_fd(), MESSAGE_READY, &[], 0).unwrap();
        let ours = slots
            .hand(&fds)
            .expect("a slot that became ready takes a run");
        assert!(got_run(&init));

        // Ready before it was given back (the clean case): handed the next run straight away.
        send_message(init.as_raw_fd(), MESSAGE_READY, &[], 0).unwrap();
        slots.give_back(ours);
        assert!(slots.hand(&fds).is_some());
        assert!(got_run(&init));
    }

    #[test]
    fn slots_whose_init_is_gone_are_let_go_and_stuck_ones_are_bounded() {
        let (_owned, fds) = run_fds();
        let mut slots = SlotsAtHand::default();
        let (gone, init) = seqpacket_pair().unwrap();
        drop(init);
        slots.give_back(gone);
        let (fresh, fresh_init) = seqpacket_pair().unwrap();
        slots.add_fresh(fresh);
        assert!(
            slots.hand(&fds).is_some(),
            "the live slot after the gone one"
        );
        assert!(got_run(&fresh_init));
        assert_eq!(
            (slots.len(), slots.busy.len()),
            (0, 0),
            "the gone slot is let go"
        );

        let mut inits = Vec::new();
        for _ in 0..MAX_IDLE_SLOTS + 2 {
            let (ours, init) = seqpacket_pair().unwrap();
            inits.push(init);
            slots.busy.push_back(Slot {
                socket: ours,
                served: true,
            });
        }
        let (ours, _init) = seqpacket_pair().unwrap();
        slots.give_back(ours);
        assert!(slots.hand(&fds).is_none());
        assert!(
            slots.busy.len() <= MAX_IDLE_SLOTS,
            "{} slots set aside",
            slots.busy.len()
        );
    }

    fn c(text: &str) -> CString {
        CString::new(text).unwrap()
    }

    #[test]
    fn a_request_round_trips_and_anything_else_is_refused() {
        let request = Request {
            no_network: true,
            writable: Some(vec![c("/tmp/a"), c("/home/p/work")]),
            terminal: Some((30, 100)),
            tools: true,
            program: c("/bin/sh"),
            cwd: c("/home/p"),
            argv: vec![c("sh"), c("-c"), c("echo é; true")],
            env: vec![c("PATH=/usr/bin:/bin"), c("EMPTY=")],
        };
        let bytes = request.encode();
        let back = Request::decode(&bytes).expect("decodes");
        assert_eq!(back.encode(), bytes);
        assert_eq!(back.writable, request.writable);
        assert_eq!(back.argv, request.argv);
        assert_eq!(back.env, request.env);
        assert_eq!(back.terminal, Some((30, 100)));
        assert!(back.tools);
        assert!(!back.uses_default_limits());

        let plain = Request {
            program: c("/bin/true"),
            cwd: c("/"),
            ..Request::default()
        };
        let back = Request::decode(&plain.encode()).expect("decodes");
        assert!(back.writable.is_none() && back.uses_default_limits());

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
