//! Linux containment: runs get user (unless the daemon is root), mount and PID namespaces,
//! set up ahead of them by processes that hold nothing of the daemon's.
//!
//! The processes of a run:
//! - the *zygote*, started from the daemon's binary at start-up (its loop, [`serve_if_zygote`],
//!   is here; the daemon's handle on it is `zygote.rs`), forks *slots* and sends them to the
//!   daemon, which keeps them at hand and hands runs straight to them;
//! - the *supervisor* (in the daemon's PID namespace) unshares the namespaces, forks the init
//!   and waits for it;
//! - the *init* (pid 1 of the run's PID namespace) masks the daemon's paths, mounts a `/proc`
//!   that shows only its runs, and then serves runs one at a time: the request (program, argv,
//!   env, cwd) and the run's descriptors. It changes to the run's directory (after the masks, so
//!   that no directory opened before them leads around them), starts the program, and when the
//!   program ends (or the daemon closes the run's stop pipe) counts what is left, kills it all,
//!   reports, and takes the next run only once nothing of this one is left;
//! - the *program*, a `clone(CLONE_VM | CLONE_VFORK)` child of the init (as posix_spawn's), which
//!   drops what it must not keep and executes what the run asked for.
//!
//! When the init dies the kernel kills every process of its namespace, so nothing a run starts
//! outlives it: not `setsid`, not a double fork. The init dies with the supervisor, the
//! supervisor with the zygote, the zygote with the daemon (`PR_SET_PDEATHSIG` each).
//!
//! A setup step that fails is reported to the run the slot is handed, so a run is refused with
//! the stage that failed rather than started uncontained.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::wire::{self, Plan, Request};
use super::zygote::Zygote;
use super::{ContainError, ExecSpec, RunEnd, RunLimits};

/// Kernel settings and interfaces made read-only in every run, once mounted: a write to
/// `core_pattern` would make the kernel run a program as root outside containment, `sysrq-trigger`
/// reboots, `/sys` holds cgroups, devices and tunables. Those absent on a machine are skipped.
const KERNEL_READ_ONLY: &[&std::ffi::CStr] = &[
    c"/proc/sys",
    c"/proc/sysrq-trigger",
    c"/proc/irq",
    c"/proc/bus",
    c"/proc/fs",
    c"/sys",
];

/// The device nodes a root daemon's run finds in its own `/dev` (as the machine's, when it has
/// them): what ordinary programs open. Disks, consoles, input devices and the like are not
/// there: a run as uid 0 could open every node root owns, capabilities or not.
const OWN_DEV_NODES: &[&std::ffi::CStr] = &[
    c"null", c"zero", c"full", c"random", c"urandom", c"tty", c"ptmx",
];
/// Directories of the machine's `/dev` a root daemon's run finds in its own, bound in whole:
/// shared memory and message queues programs share with the desktop, graphics and sound.
const OWN_DEV_DIRS: &[&std::ffi::CStr] = &[c"shm", c"mqueue", c"dri", c"snd"];
/// Symbolic links of every `/dev`.
const OWN_DEV_LINKS: &[(&std::ffi::CStr, &std::ffi::CStr)] = &[
    (c"fd", c"/proc/self/fd"),
    (c"stdin", c"/proc/self/fd/0"),
    (c"stdout", c"/proc/self/fd/1"),
    (c"stderr", c"/proc/self/fd/2"),
];

/// The empty file every masked file is covered with: on a read-only tmpfs, so that a write to
/// a masked file fails (EROFS) instead of vanishing as one to `/dev/null` would. It is made on
/// `/dev/pts` before the run's own devpts is mounted there, which hides it.
const MASK_FILE_DIR: &std::ffi::CStr = c"/dev/pts";
const MASK_FILE: &std::ffi::CStr = c"/dev/pts/computer-hidden";

/// A record on the report pipe: a tag and three numbers, written in one `write` (atomic, as it
/// is shorter than PIPE_BUF).
const RECORD: usize = 13;
const TAG_DONE: u8 = b'D';
const TAG_ERROR: u8 = b'E';

/// Setup stages, named in errors.
const STAGES: &[&str] = &[
    "unshare",
    "setgroups",
    "uid_map",
    "gid_map",
    "fork of the init",
    "mount propagation",
    "pinning a directory",
    "masking a directory",
    "masking a file",
    "mounting /proc",
    "fork of the program",
    "making mounts read-only",
    "making a path writable",
    "exec of the program",
    "reading the run's request",
    "fork of the supervisor",
    "changing to the working directory",
    "watching for the program's end",
    "taking the terminal as the session's controlling terminal",
    "making the empty file masks are made of",
    "mounting the run's own /dev/pts",
    "making kernel settings read-only",
    "dropping capabilities",
    "opening the run's own terminal",
    "making the run's own /dev",
    "showing the daemon's tools read-only",
    "making login files read-only",
    "joining a keyring of the run's own",
];
const STAGE_UNSHARE: i32 = 0;
const STAGE_SETGROUPS: i32 = 1;
const STAGE_UID_MAP: i32 = 2;
const STAGE_GID_MAP: i32 = 3;
const STAGE_FORK_INIT: i32 = 4;
const STAGE_PROPAGATION: i32 = 5;
const STAGE_PIN: i32 = 6;
const STAGE_MASK_DIR: i32 = 7;
const STAGE_MASK_FILE: i32 = 8;
const STAGE_PROC: i32 = 9;
const STAGE_FORK_PROGRAM: i32 = 10;
const STAGE_READ_ONLY: i32 = 11;
const STAGE_WRITABLE: i32 = 12;
const STAGE_EXEC: i32 = 13;
const STAGE_REQUEST: i32 = 14;
const STAGE_SUPERVISOR: i32 = 15;
const STAGE_CWD: i32 = 16;
const STAGE_SIGNALS: i32 = 17;
const STAGE_TERMINAL: i32 = 18;
const STAGE_MASK_SOURCE: i32 = 19;
const STAGE_DEVPTS: i32 = 20;
const STAGE_KERNEL_READ_ONLY: i32 = 21;
const STAGE_CAPABILITIES: i32 = 22;
const STAGE_OPEN_TERMINAL: i32 = 23;
const STAGE_OWN_DEV: i32 = 24;
const STAGE_SHOW: i32 = 25;
const STAGE_LOGIN_FILES: i32 = 26;
const STAGE_KEYRING: i32 = 27;

/// The exit code of a supervisor or init whose sandbox could not be set up.
const SETUP_FAILED: i32 = 125;

/// How long the daemon waits, at start, for the probe run.
const PROBE_LIMIT_MS: i32 = 10_000;

/// Stack size of the program until its exec.
const PROGRAM_STACK: usize = 64 * 1024;

fn c_string(bytes: &[u8]) -> Result<CString, ContainError> {
    CString::new(bytes).map_err(|_| ContainError::Setup {
        stage: "program and arguments",
        source: io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"),
    })
}

impl Plan {
    pub(super) fn new(
        hidden: &[PathBuf],
        shown: &[PathBuf],
        read_only: &[PathBuf],
    ) -> io::Result<Plan> {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut pins: Vec<PathBuf> = Vec::new();
        for path in hidden {
            // Only what exists can be covered; the daemon names the directory of a file it
            // has not written yet (its config), so that no run can create it.
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            let (target, is_dir) = (path.clone(), meta.is_dir());
            for ancestor in target.ancestors().skip(1) {
                if ancestor != Path::new("/") && !pins.iter().any(|p| p == ancestor) {
                    pins.push(ancestor.to_path_buf());
                }
            }
            if is_dir {
                dirs.push(target);
            } else {
                files.push(target);
            }
        }
        // Outer directories are pinned first; a later bind of an inner one then lands on top.
        pins.sort_by_key(|p| p.components().count());
        let c = |p: &PathBuf| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
        };
        let namespaces = if uid == 0 {
            "mount and PID namespaces per run (no user namespace: the daemon is root, so runs \
             run as root with every capability dropped)"
        } else {
            "user, mount and PID namespaces per run"
        };
        // Every directory above a login file, up to (not) `/`: covered or not, a login file
        // stays where it is named only while no directory above it can be renamed.
        let mut read_only_pins: Vec<PathBuf> = Vec::new();
        for path in read_only {
            for ancestor in path.ancestors().skip(1) {
                if ancestor != Path::new("/") && !read_only_pins.iter().any(|p| p == ancestor) {
                    read_only_pins.push(ancestor.to_path_buf());
                }
            }
        }
        read_only_pins.sort_by_key(|p| p.components().count());
        let mut read_only = read_only.to_vec();
        read_only.sort_by_key(|p| p.components().count());
        let hidden_list: Vec<String> = dirs
            .iter()
            .chain(&files)
            .map(|p| p.display().to_string())
            .collect();
        let shown_list = if shown.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = shown.iter().map(|p| p.display().to_string()).collect();
            format!("; shown read-only: {}", list.join(", "))
        };
        let described = format!(
            "{namespaces}; hidden from runs: {}{shown_list}; \
             a run sees only its own processes and its own \
             terminals (a private /dev/pts), holds no capability, cannot gain privileges \
             (no_new_privs), finds /proc/sys and /sys read-only, finds the files that run code \
             at the next login read-only ({} of them, where they exist), has a kernel keyring \
             of its own, and everything it started is killed when it ends",
            hidden_list.join(", "),
            read_only.len()
        );
        Ok(Plan {
            rootless: uid != 0,
            uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("digits only"),
            gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("digits only"),
            pins: pins.iter().map(c).collect::<io::Result<_>>()?,
            masked_dirs: dirs.iter().map(c).collect::<io::Result<_>>()?,
            masked_files: files.iter().map(c).collect::<io::Result<_>>()?,
            shown: shown.iter().map(c).collect::<io::Result<_>>()?,
            read_only: read_only.iter().map(c).collect::<io::Result<_>>()?,
            read_only_pins: read_only_pins.iter().map(c).collect::<io::Result<_>>()?,
            no_network: false,
            writable: None,
            described,
        })
    }

    /// This plan tightened by one run's limits (in the zygote, for a slot made for that run).
    pub(super) fn with_request_limits(&self, request: &Request) -> Plan {
        Plan {
            no_network: request.no_network,
            writable: request.writable.clone(),
            ..self.clone()
        }
    }

    pub(super) fn describe(&self) -> String {
        self.described.clone()
    }
}

/// The daemon's side of Linux containment: the plan and the zygote that starts runs under it.
#[derive(Debug)]
pub(super) struct Launcher {
    plan: Plan,
    zygote: Arc<Mutex<Zygote>>,
}

/// A run handed to the zygote, with the daemon's ends of its pipes.
pub(super) struct Started {
    pub run: Run,
    pub pipes: Pipes,
}

/// The daemon's ends of a run's pipes.
#[derive(Debug)]
pub(super) struct Pipes {
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Launcher {
    /// Starts the zygote for `plan` and proves, by running one contained process, that this
    /// machine allows what runs will need.
    pub(super) fn new(plan: Plan) -> io::Result<Launcher> {
        let zygote = Zygote::start(&plan)?;
        let launcher = Launcher {
            plan,
            zygote: Arc::new(Mutex::new(zygote)),
        };
        launcher.probe()?;
        Ok(launcher)
    }

    pub(super) fn describe(&self) -> String {
        self.plan.describe()
    }

    fn probe(&self) -> io::Result<()> {
        let exec = ExecSpec {
            program: PathBuf::from("/bin/true"),
            argv: vec!["true".into()],
            env: Vec::new(),
        };
        let started = self
            .start(&RunLimits::default(), &exec, Path::new("/"), false, None)
            .map_err(into_io)?;
        let mut run = started.run;
        let end = run.wait_blocking(PROBE_LIMIT_MS).map_err(into_io)?;
        match end.status {
            Some(0) => Ok(()),
            other => Err(io::Error::other(format!(
                "a contained /bin/true did not exit 0 (wait status {other:?})"
            ))),
        }
    }

    /// Starts `exec` contained, in `cwd`, with `limits`. The run's end (or a setup step that
    /// failed) comes through [`Run::done`].
    pub(super) fn start(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
        tools: Option<&OwnedFd>,
    ) -> Result<Started, ContainError> {
        let prepared = self.prepare(limits, exec, cwd, with_stdin, tools.is_some())?;
        Ok(Started {
            run: prepared.handover.hand_over(self, tools)?,
            pipes: prepared.pipes,
        })
    }

    /// Makes a run ready to start: its request written, its pipes made; nothing is sent and
    /// nothing runs until [`Handover::hand_over`]. A run that takes its tools channel is told so
    /// by its request (`with_tools`) and gets the channel at the hand-over.
    pub(super) fn prepare(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        with_stdin: bool,
        with_tools: bool,
    ) -> Result<Prepared, ContainError> {
        let mut request = request_for(limits, exec, cwd, None)?;
        request.tools = with_tools;
        let (stdout, stdout_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("output pipes"))?;
        let (stderr, stderr_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("output pipes"))?;
        let (stdin, stdin_r) = if with_stdin {
            let (read, write) = pipe(0, libc::O_NONBLOCK).map_err(setup("input pipe"))?;
            (Some(write), read)
        } else {
            let null = std::fs::File::open("/dev/null").map_err(setup("input pipe"))?;
            (None, OwnedFd::from(null))
        };
        Ok(Prepared {
            handover: Handover {
                handing: Handing::of(&request)?,
                theirs: [stdin_r, stdout_w, stderr_w],
            },
            pipes: Pipes {
                stdin,
                stdout,
                stderr,
            },
        })
    }

    /// Starts `exec` contained on a terminal of its own: a pty made by the run's init in the
    /// run's private devpts (so that no other run, and nothing outside, can open its terminal
    /// side), `rows` by `cols`, that is the program's stdin, stdout, stderr and the controlling
    /// terminal of the new session it leads. Returns the run and the pty's master side, which
    /// the init sends back over a socket of this run's.
    pub(super) fn start_terminal(
        &self,
        limits: &RunLimits,
        exec: &ExecSpec,
        cwd: &Path,
        (rows, cols): (u16, u16),
    ) -> Result<(Run, OwnedFd), ContainError> {
        let request = request_for(limits, exec, cwd, Some((rows, cols)))?;
        let (ours, theirs) = wire::seqpacket_pair().map_err(setup("the terminal's socket"))?;
        let mut run = Handing::of(&request)?.launch(self, [&theirs, &theirs, &theirs], None)?;
        drop(theirs);
        // The daemon holds the master after the run ends: the slot's devpts must never serve
        // another run, which could open the pty's terminal side again.
        run.reusable = false;
        match receive_terminal(&ours, PROBE_LIMIT_MS) {
            Some(master) => Ok((run, master)),
            // The init reported why (and closed its end of the socket), or was lost.
            None => Err(match run.wait_blocking(PROBE_LIMIT_MS) {
                Err(err) => err,
                Ok(_) => ContainError::Setup {
                    stage: STAGES[STAGE_OPEN_TERMINAL as usize],
                    source: io::Error::other("the run ended without sending its terminal"),
                },
            }),
        }
    }
}

/// A run made ready by [`Launcher::prepare`], not yet handed to a slot.
#[derive(Debug)]
pub(super) struct Prepared {
    pub handover: Handover,
    pub pipes: Pipes,
}

/// What a slot gets with a prepared run: its request and report pipes, and the run's ends of
/// its stdio (stdin, stdout, stderr).
#[derive(Debug)]
pub(super) struct Handover {
    handing: Handing,
    theirs: [OwnedFd; 3],
}

impl Handover {
    /// Hands the run to a slot of `launcher`'s (with `tools`, when its request said so): from
    /// here on it runs. Its ends of the stdio are closed here once handed: only the run holds
    /// them then, so reads end when its processes are gone.
    pub(super) fn hand_over(
        self,
        launcher: &Launcher,
        tools: Option<&OwnedFd>,
    ) -> Result<Run, ContainError> {
        let [stdin, stdout, stderr] = &self.theirs;
        self.handing
            .launch(launcher, [stdin, stdout, stderr], tools)
    }
}

/// What goes to a slot with a run beside its stdio: the request, and the report and stop pipes
/// (the daemon's ends kept for the run's handle).
#[derive(Debug)]
struct Handing {
    memfd: OwnedFd,
    report: OwnedFd,
    report_w: OwnedFd,
    stop_r: OwnedFd,
    stop: OwnedFd,
    default_limits: bool,
}

impl Handing {
    fn of(request: &Request) -> Result<Handing, ContainError> {
        let memfd = wire::memfd_with(&request.encode()).map_err(setup("the run's request"))?;
        let (report, report_w) = pipe(libc::O_NONBLOCK, 0).map_err(setup("report pipe"))?;
        let (stop_r, stop) = pipe(0, libc::O_NONBLOCK).map_err(setup("stop pipe"))?;
        Ok(Handing {
            memfd,
            report,
            report_w,
            stop_r,
            stop,
            default_limits: request.uses_default_limits(),
        })
    }

    /// Hands the request and the run's stdio to the zygote; returns the daemon's side of it.
    fn launch(
        self,
        launcher: &Launcher,
        stdio: [&OwnedFd; 3],
        tools: Option<&OwnedFd>,
    ) -> Result<Run, ContainError> {
        let Handing {
            memfd,
            report,
            report_w,
            stop_r,
            stop,
            default_limits,
        } = self;
        let fds = [
            memfd.as_raw_fd(),
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
            report_w.as_raw_fd(),
            stop_r.as_raw_fd(),
            // Without tools the request's memfd stands in: the init hands it to nobody.
            tools.unwrap_or(&memfd).as_raw_fd(),
        ];
        let slot = {
            let mut zygote = launcher
                .zygote
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match zygote.launch(&fds, default_limits) {
                Ok(slot) => slot,
                Err(err) => {
                    // A zygote that is gone (killed from outside the runs: none can see it)
                    // is started again once; if that fails too, the run is refused.
                    if !matches!(
                        err.raw_os_error(),
                        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED)
                    ) {
                        return Err(setup("handing the run to the containment zygote")(err));
                    }
                    tracing::warn!(error = %err, "the containment zygote is gone; starting another");
                    *zygote = Zygote::start(&launcher.plan)
                        .map_err(setup("starting the containment zygote again"))?;
                    zygote
                        .launch(&fds, default_limits)
                        .map_err(setup("handing the run to the containment zygote"))?
                }
            }
        };
        // Only the run holds the other ends now (the caller drops its stdio ends): reads end
        // when its processes are gone.
        drop((memfd, report_w, stop_r));
        Ok(Run {
            report,
            stop: Some(stop),
            done: None,
            slot,
            reusable: true,
            zygote: Some(launcher.zygote.clone()),
        })
    }
}

/// Waits (at most `limit_ms`) for the master side of a run's terminal on `socket`; `None` when
/// the run's init closed its end without sending it.
fn receive_terminal(socket: &OwnedFd, limit_ms: i32) -> Option<OwnedFd> {
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll reads and writes the one pollfd we own.
        let ready = unsafe { libc::poll(&mut poll, 1, limit_ms) };
        if ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if ready <= 0 {
            return None;
        }
        return match wire::recv_message(socket.as_raw_fd(), libc::MSG_DONTWAIT) {
            Ok(Some((wire::MESSAGE_TERMINAL, fds))) if fds.len() == 1 => fds.into_iter().next(),
            _ => None,
        };
    }
}

/// A setup failure at `stage`, from an io error.
fn setup(stage: &'static str) -> impl Fn(io::Error) -> ContainError {
    move |source: io::Error| ContainError::Setup { stage, source }
}

/// The request for one run, as it travels to its slot.
fn request_for(
    limits: &RunLimits,
    exec: &ExecSpec,
    cwd: &Path,
    terminal: Option<(u16, u16)>,
) -> Result<Request, ContainError> {
    Ok(Request {
        no_network: limits.no_network,
        writable: match &limits.writable {
            Some(paths) => Some(
                paths
                    .iter()
                    .map(|p| c_string(p.as_os_str().as_bytes()))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        },
        terminal,
        tools: false,
        program: c_string(exec.program.as_os_str().as_bytes())?,
        cwd: c_string(cwd.as_os_str().as_bytes())?,
        argv: exec
            .argv
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<Result<_, _>>()?,
        env: exec
            .env
            .iter()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c_string(&pair)
            })
            .collect::<Result<_, _>>()?,
    })
}

/// A pipe, close-on-exec, with `read_flags` and `write_flags` (O_NONBLOCK) on its two ends.
fn pipe(read_flags: i32, write_flags: i32) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for (fd, flags) in [(&read, read_flags), (&write, write_flags)] {
        // SAFETY: fcntl on a descriptor we own.
        if flags != 0 && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((read, write))
}

/// A contained run as the daemon follows it.
#[derive(Debug)]
pub(super) struct Run {
    report: OwnedFd,
    /// The write end of the run's stop pipe: a byte, or its closing, tells the init to end the
    /// run (no pid is ever signalled, so none can be reused in between).
    stop: Option<OwnedFd>,
    done: Option<RunEnd>,
    /// The slot the run was handed to directly, given back when the run ends cleanly.
    slot: Option<OwnedFd>,
    /// Whether its slot may serve another run (not after a terminal run: see `start_terminal`).
    reusable: bool,
    /// Told once the run has ended: its slot comes back, or a new one is asked for.
    zygote: Option<Arc<Mutex<Zygote>>>,
}

impl Run {
    /// Once the run has ended (`clean`: its init reported its end) or was given up: its slot
    /// goes back to those at hand, or is let go and another asked for.
    fn release_slot(&mut self, clean: bool) {
        let Some(zygote) = self.zygote.take() else {
            return;
        };
        let mut zygote = zygote
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match self.slot.take() {
            Some(slot) if clean && self.reusable => zygote.give_back(slot),
            // Its init ends when it finds the socket closed.
            _ => {}
        }
        // A zygote that is gone is started again by the next run that needs it.
        let _ = zygote.ask_for_slots();
    }

    pub(super) fn stop(&self) {
        if let Some(stop) = &self.stop {
            // SAFETY: writes one byte of ours to a descriptor we own; a full pipe (the run was
            // told already) or a gone reader is fine.
            unsafe {
                libc::write(stop.as_raw_fd(), b"x".as_ptr().cast(), 1);
            }
        }
    }

    /// Waits, blocking, for the run's end (used only at start, outside any run).
    fn wait_blocking(&mut self, limit_ms: i32) -> Result<RunEnd, ContainError> {
        let mut poll = libc::pollfd {
            fd: self.report.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: poll reads and writes the one pollfd we own.
            let ready = unsafe { libc::poll(&mut poll, 1, limit_ms) };
            if ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if ready <= 0 {
                return Err(ContainError::Lost);
            }
            return match next_record(&self.report) {
                Next::Record((TAG_DONE, status, killed, stopped)) => {
                    let end = run_end(status, killed, stopped);
                    self.done = Some(end);
                    self.release_slot(true);
                    Ok(end)
                }
                Next::Record((TAG_ERROR, stage, errno, _)) => Err(setup_error(stage, errno)),
                Next::Record(_) | Next::End => Err(ContainError::Lost),
                Next::Empty => continue,
            };
        }
    }

    pub(super) async fn done(&mut self) -> Result<RunEnd, ContainError> {
        if let Some(done) = self.done {
            return Ok(done);
        }
        let lost = |source: io::Error| ContainError::Setup {
            stage: "report pipe",
            source,
        };
        let watched = self.report.try_clone().map_err(lost)?;
        // SAFETY: the AsyncFd owns `watched`, an open descriptor of its own that nothing else
        // closes or replaces while it lives.
        let readable = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(watched, tokio::io::Interest::READABLE)
        }
        .map_err(|err| lost(err.into()))?;
        loop {
            let mut guard = readable.readable().await.map_err(lost)?;
            match next_record(&self.report) {
                Next::Record((TAG_DONE, status, killed, stopped)) => {
                    let end = run_end(status, killed, stopped);
                    self.done = Some(end);
                    self.release_slot(true);
                    return Ok(end);
                }
                Next::Record((TAG_ERROR, stage, errno, _)) => {
                    return Err(setup_error(stage, errno));
                }
                Next::Record(_) => continue,
                Next::Empty => guard.clear_ready(),
                // Every writer is gone without a last word: the init was killed.
                Next::End => return Err(ContainError::Lost),
            }
        }
    }
}

fn run_end(status: i32, killed: i32, stopped: i32) -> RunEnd {
    RunEnd {
        status: (stopped == 0).then_some(status),
        killed: killed.max(0) as u32,
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // A run dropped before it finished (its call went away): end it. Closing the stop pipe
        // says the same once this returns.
        if self.done.is_none() {
            self.stop();
        }
        self.release_slot(false);
    }
}

fn into_io(err: ContainError) -> io::Error {
    io::Error::other(err.to_string())
}

fn setup_error(stage: i32, errno: i32) -> ContainError {
    ContainError::Setup {
        stage: usize::try_from(stage)
            .ok()
            .and_then(|i| STAGES.get(i))
            .copied()
            .unwrap_or("setup"),
        source: io::Error::from_raw_os_error(errno),
    }
}

/// What the report pipe holds next.
enum Next {
    Record((u8, i32, i32, i32)),
    /// Nothing yet.
    Empty,
    /// Every writer has closed it.
    End,
}

fn next_record(fd: &OwnedFd) -> Next {
    let mut buf = [0u8; RECORD];
    // SAFETY: reads into a buffer we own, of its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), RECORD) };
    if n == 0 {
        return Next::End;
    }
    if n != RECORD as isize {
        // Records are written whole (shorter than PIPE_BUF), so a short read is "nothing".
        return Next::Empty;
    }
    let number = |at: usize| i32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    Next::Record((buf[0], number(1), number(5), number(9)))
}

// ---- Records and system-call helpers, used on both sides. ----

fn write_record(fd: RawFd, tag: u8, a: i32, b: i32, c: i32) {
    let mut buf = [0u8; RECORD];
    buf[0] = tag;
    buf[1..5].copy_from_slice(&a.to_le_bytes());
    buf[5..9].copy_from_slice(&b.to_le_bytes());
    buf[9..13].copy_from_slice(&c.to_le_bytes());
    // SAFETY: writes our own buffer.
    unsafe {
        libc::write(fd, buf.as_ptr().cast(), RECORD);
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn write_file(path: &[u8], text: &[u8]) -> bool {
    // SAFETY: `path` is NUL-terminated; the buffer is ours.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, text.as_ptr().cast(), text.len()) == text.len() as isize;
        libc::close(fd);
        ok
    }
}

fn close_from(first: u32, last: u32, flags: u32) {
    if first > last {
        return;
    }
    // SAFETY: close_range only closes (or marks) descriptors of this process.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, last, flags);
    }
}

// ---- The zygote's side: its loop, a slot's supervisor, its init and the program. ----

/// Reports a setup stage that failed on `report`: the run that meets it is refused.
fn report_setup_error(report: RawFd, stage: i32, errno: i32) {
    write_record(report, TAG_ERROR, stage, errno, 0);
}

/// Serves as the zygote when this process was started as one; returns otherwise. Call first
/// thing in `main`, before any thread is started.
pub fn serve_if_zygote() {
    if std::env::args_os().next().as_deref() != Some(OsStr::new(wire::ZYGOTE_NAME)) {
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
    let plan = match wire::recv_fds(daemon) {
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
        let (kind, fds) = match wire::recv_message(daemon, 0) {
            Ok(Some(message)) => message,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            // The daemon is gone: so is every reason to exist.
            Ok(None) | Err(_) => return 0,
        };
        if kind == wire::MESSAGE_WANT_SLOT {
            // A slot for the daemon to keep at hand; the zygote keeps no copy of its socket. A
            // slot that cannot be made is answered all the same, with no descriptor, so the
            // daemon stops waiting for it (its runs then come here instead).
            let _ = match spawn_slot(&plan) {
                Ok(slot) => wire::send_message(daemon, wire::MESSAGE_SLOT, &[slot.as_raw_fd()], 0),
                Err(_) => wire::send_message(daemon, wire::MESSAGE_SLOT, &[], 0),
            };
            continue;
        }
        if kind != wire::MESSAGE_RUN || fds.len() != wire::RUN_FDS {
            continue;
        }
        let Some(request) = Request::read_from(&fds[wire::FD_REQUEST]) else {
            report_setup_error(
                fds[wire::FD_REPORT].as_raw_fd(),
                STAGE_REQUEST,
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
        let handed = spawn_slot(slot_plan.as_ref().unwrap_or(&plan))
            .and_then(|slot| wire::send_fds(slot.as_raw_fd(), &raw));
        if let Err(err) = handed {
            report_setup_error(
                fds[wire::FD_REPORT].as_raw_fd(),
                STAGE_SUPERVISOR,
                err.raw_os_error().unwrap_or(libc::EIO),
            );
        }
    }
}

/// Forks a slot for `plan` (in the zygote): a supervisor that prepares a run's sandbox and
/// whose init then waits for the run on the returned socket.
fn spawn_slot(plan: &Plan) -> io::Result<OwnedFd> {
    let (ours, theirs) = wire::seqpacket_pair()?;
    // SAFETY: getpid cannot fail.
    let zygote = unsafe { libc::getpid() };
    // SAFETY: the zygote is single-threaded, so its child may do anything it could.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let slot = theirs.as_raw_fd();
            std::mem::forget(theirs);
            supervise(plan, slot, zygote)
        }
        _ => Ok(ours),
    }
}

/// Waits for the run this slot was meant for, reports `stage` (with the errno it failed with)
/// to it, and ends this process.
fn fail_later(slot: RawFd, stage: i32) -> ! {
    let errno = errno();
    if let Ok(Some(fds)) = wire::recv_fds(slot)
        && let Some(report) = fds.get(wire::FD_REPORT)
    {
        report_setup_error(report.as_raw_fd(), stage, errno);
    }
    // SAFETY: _exit ends the process at once.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// The supervisor: a fork of the zygote. Never returns.
fn supervise(plan: &Plan, slot: RawFd, zygote: i32) -> ! {
    // SAFETY: system calls of this single-threaded process on its own data.
    unsafe {
        // The supervisor dies with the zygote; its init with it, and with the init the run.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != zygote {
            libc::_exit(SETUP_FAILED);
        }
        // The zygote ignores these (SIGPIPE as every Rust program does): runs get the defaults.
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // Nothing of the zygote's stays open: stdio is /dev/null until the run brings its own.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null != fd {
                libc::dup2(null, fd);
            }
        }
        let slot_fd = slot as u32;
        close_from(3, slot_fd.saturating_sub(1), 0);
        close_from(slot_fd + 1, u32::MAX, 0);

        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        if plan.rootless {
            flags |= libc::CLONE_NEWUSER;
        }
        if plan.no_network {
            flags |= libc::CLONE_NEWNET;
        }
        if libc::unshare(flags) != 0 {
            fail_later(slot, STAGE_UNSHARE);
        }
        if plan.rootless {
            // The zygote is not dumpable, which makes its /proc/self files root's: this child
            // may write its own maps only while dumpable, and is made undumpable again below.
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            if !write_file(b"/proc/self/setgroups\0", b"deny") {
                fail_later(slot, STAGE_SETGROUPS);
            }
            if !write_file(b"/proc/self/uid_map\0", plan.uid_map.as_bytes()) {
                fail_later(slot, STAGE_UID_MAP);
            }
            if !write_file(b"/proc/self/gid_map\0", plan.gid_map.as_bytes()) {
                fail_later(slot, STAGE_GID_MAP);
            }
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        let init = libc::fork();
        if init < 0 {
            fail_later(slot, STAGE_FORK_INIT);
        }
        if init == 0 {
            run_init(plan, slot);
        }
        close_from(0, u32::MAX, 0);
        let mut status = 0;
        loop {
            let waited = libc::waitpid(init, &mut status, libc::__WALL);
            if waited == init || waited < 0 {
                break;
            }
        }
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        libc::_exit(code);
    }
}

/// What the program's clone needs: C data made before it, read until the exec.
struct Launch<'a> {
    terminal: bool,
    report: RawFd,
    /// The run's end of its tools channel, inherited as `TOOLS_FD`; -1 without tools.
    tools: RawFd,
    path: &'a CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The highest 16-byte-aligned address of `stack` (stacks grow down on every Linux target).
fn stack_top(stack: &[u8]) -> *mut libc::c_void {
    let end = stack.as_ptr() as usize + stack.len();
    (end & !15) as *mut libc::c_void
}

extern "C" fn program_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Launch, alive in the shared memory; the init waits for the exec
    // (CLONE_VFORK).
    unsafe {
        let launch = &*(arg as *const Launch);
        prepare_program();
        let mut report = launch.report;
        if launch.tools >= 0 {
            // The one descriptor a run inherits beyond its stdio: its tools channel, at the
            // number the run is told. The report pipe moves out of its way first (this is the
            // program's own descriptor table: the init's is untouched).
            let tools_fd = computer_ipc::tools::TOOLS_FD;
            if report == tools_fd {
                report = libc::fcntl(report, libc::F_DUPFD_CLOEXEC, tools_fd + 1);
            }
            let inherited = if launch.tools == tools_fd {
                libc::fcntl(tools_fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(launch.tools, tools_fd)
            };
            if report < 0 || inherited < 0 {
                write_record(launch.report, TAG_ERROR, STAGE_EXEC, errno(), 0);
                libc::_exit(127);
            }
        }
        // A session keyring of the run's own, empty: keys the daemon's session holds (root's,
        // for a root daemon) are not the run's, and keys the run adds are gone with it. Only
        // where the kernel has no keyrings at all does the run go on without; an ordinary
        // user's run also where the user's key quota is spent (its keyring is the user's own).
        if libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        ) < 0
            && errno() != libc::ENOSYS
            && libc::getuid() == 0
        {
            write_record(report, TAG_ERROR, STAGE_KEYRING, errno(), 0);
            libc::_exit(127);
        }
        if launch.terminal && (libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0) {
            write_record(report, TAG_ERROR, STAGE_TERMINAL, errno(), 0);
            libc::_exit(127);
        }
        libc::execve(
            launch.path.as_ptr(),
            launch.argv.as_ptr(),
            launch.envp.as_ptr(),
        );
        write_record(report, TAG_ERROR, STAGE_EXEC, errno(), 0);
        libc::_exit(127);
    }
}

/// The init: pid 1 of the run, a fork of the supervisor. Prepares the sandbox, waits for its
/// run, runs it. Never returns.
fn run_init(plan: &Plan, slot: RawFd) -> ! {
    // SAFETY: system calls of this single-threaded process on its own data.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::prctl(libc::PR_SET_NAME, c"computer-init".as_ptr());
        // `kill(-1)` below must only ever reach this namespace.
        if libc::getpid() != 1 {
            libc::_exit(SETUP_FAILED);
        }
        let none = std::ptr::null::<libc::c_char>();
        // Mounts made here must never propagate back to the daemon's namespace.
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            fail_later(slot, STAGE_PROPAGATION);
        }
        for pin in &plan.pins {
            if libc::mount(
                pin.as_ptr(),
                pin.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                fail_later(slot, STAGE_PIN);
            }
        }
        // Held from before the masks, which hide their paths; bound back after them.
        let shown = open_shown(plan, slot);
        for dir in &plan.masked_dirs {
            let options = c"size=4k,mode=0500";
            let holds_shown = plan.shown.iter().any(|s| lies_inside(s, dir));
            // A mask that holds a shown directory stays writable until its mount points exist.
            let read_only = if holds_shown { 0 } else { libc::MS_RDONLY };
            if libc::mount(
                c"computer-hidden".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                read_only | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            ) != 0
            {
                fail_later(slot, STAGE_MASK_DIR);
            }
            if holds_shown {
                make_mount_points(plan, dir, slot);
            }
        }
        if !plan.masked_files.is_empty() {
            // An empty file on a tmpfs made read-only (its superblock, not only this mount),
            // so that every bind of it refuses writes, whatever a writable limit clears.
            if libc::mount(
                c"computer-hidden".as_ptr(),
                MASK_FILE_DIR.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=0500".as_ptr().cast(),
            ) != 0
            {
                fail_later(slot, STAGE_MASK_SOURCE);
            }
            let made = libc::open(
                MASK_FILE.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                0o400,
            );
            if made < 0 {
                fail_later(slot, STAGE_MASK_SOURCE);
            }
            libc::close(made);
            if libc::mount(
                none,
                MASK_FILE_DIR.as_ptr(),
                none,
                libc::MS_REMOUNT
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV
                    | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                fail_later(slot, STAGE_MASK_SOURCE);
            }
        }
        for file in &plan.masked_files {
            if libc::mount(
                MASK_FILE.as_ptr(),
                file.as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
                || libc::mount(
                    none,
                    file.as_ptr(),
                    none,
                    libc::MS_BIND
                        | libc::MS_REMOUNT
                        | libc::MS_RDONLY
                        | libc::MS_NOSUID
                        | libc::MS_NODEV
                        | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) != 0
            {
                fail_later(slot, STAGE_MASK_FILE);
            }
        }
        if !plan.rootless && !own_dev() {
            fail_later(slot, STAGE_OWN_DEV);
        }
        // The run's own terminals: a devpts instance of its own on /dev/pts (hiding the empty
        // file above), its ptmx as /dev/ptmx. No pty of another run, of a session, or of the
        // person's is there to open.
        if libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
        ) != 0
            || libc::mount(
                c"/dev/pts/ptmx".as_ptr(),
                c"/dev/ptmx".as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
        {
            fail_later(slot, STAGE_DEVPTS);
        }
        if let Some(writable) = &plan.writable {
            // Everything read-only, then each writable path a fresh bind with the flag cleared.
            if set_read_only(c"/", true) != 0 {
                fail_later(slot, STAGE_READ_ONLY);
            }
            for path in writable {
                if libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
                    || set_read_only(path, false) != 0
                {
                    fail_later(slot, STAGE_WRITABLE);
                }
            }
        }
        // After the writable paths (whose recursive binds would otherwise clear the flag), and
        // before /proc is the run's (the held directories are reached through the daemon's).
        bind_shown(plan, shown, slot);
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            fail_later(slot, STAGE_PROC);
        }
        // After the writable paths, so that none of them can make these writable again.
        for path in KERNEL_READ_ONLY {
            if libc::access(path.as_ptr(), libc::F_OK) != 0 {
                continue;
            }
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
                || set_read_only(path, true) != 0
            {
                fail_later(slot, STAGE_KERNEL_READ_ONLY);
            }
        }
        // After the writable paths too: no writable limit a call asks for reaches them.
        if !cover_login_files(plan) {
            fail_later(slot, STAGE_LOGIN_FILES);
        }
        // Nothing more to mount: from here on the init, and every run it serves, holds no
        // capability and can gain none (no setuid bit or file capability counts).
        if !drop_all_capabilities() {
            fail_later(slot, STAGE_CAPABILITIES);
        }
        // What the run will need, made while nothing waits on it: the watch on the program's
        // end, and the stack its clone starts on (touched now, so its pages are not faulted in
        // on the run's path).
        let mut wanted: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wanted);
        libc::sigaddset(&mut wanted, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &wanted, std::ptr::null_mut());
        let children = libc::signalfd(-1, &wanted, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if children < 0 {
            fail_later(slot, STAGE_SIGNALS);
        }
        let stack = vec![1u8; PROGRAM_STACK];
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        // The sandbox is ready: serve runs, one at a time, until the slot's socket closes. A
        // run is handed here only once everything of the one before it is gone.
        loop {
            let fds = match wire::recv_fds(slot) {
                Ok(Some(fds)) if fds.len() == wire::RUN_FDS => fds,
                Ok(Some(_)) => continue,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                _ => libc::_exit(0),
            };
            serve_run(slot, fds, children, null, &stack);
        }
    }
}

/// Runs one request in the init, reports its end, and returns once every process of it is
/// gone (the next run must find nothing of this one).
unsafe fn serve_run(
    slot: RawFd,
    mut fds: Vec<OwnedFd>,
    children: RawFd,
    null: RawFd,
    stack: &[u8],
) {
    // SAFETY: system calls of this single-threaded process on descriptors it owns.
    unsafe {
        let report = fds[wire::FD_REPORT].as_raw_fd();
        let Some(request) = Request::read_from(&fds[wire::FD_REQUEST]) else {
            report_setup_error(report, STAGE_REQUEST, libc::EINVAL);
            return;
        };
        // Resolved only now, below the masks: a directory held open from before them would
        // lead around them.
        if libc::chdir(request.cwd.as_ptr()) != 0 {
            report_setup_error(report, STAGE_CWD, errno());
            return;
        }
        if let Some(size) = request.terminal {
            // The run's terminal, made here in the run's own devpts: its master side goes back
            // to the daemon over the socket that came as the run's stdin.
            let terminal = match open_terminal(size) {
                Ok(terminal) => terminal,
                Err(errno) => {
                    report_setup_error(report, STAGE_OPEN_TERMINAL, errno);
                    return;
                }
            };
            let sent = wire::send_message(
                fds[wire::FD_STDIN].as_raw_fd(),
                wire::MESSAGE_TERMINAL,
                &[terminal.master.as_raw_fd()],
                libc::MSG_DONTWAIT,
            );
            if let Err(err) = sent {
                report_setup_error(report, STAGE_OPEN_TERMINAL, err.raw_os_error().unwrap_or(0));
                return;
            }
            for fd in 0..3 {
                libc::dup2(terminal.slave.as_raw_fd(), fd);
            }
        } else {
            for (from, to) in [
                (wire::FD_STDIN, 0),
                (wire::FD_STDOUT, 1),
                (wire::FD_STDERR, 2),
            ] {
                libc::dup2(fds[from].as_raw_fd(), to);
            }
        }
        let launch = Launch {
            terminal: request.terminal.is_some(),
            report,
            tools: if request.tools {
                fds[wire::FD_TOOLS].as_raw_fd()
            } else {
                -1
            },
            path: &request.program,
            argv: pointers(&request.argv),
            envp: pointers(&request.env),
        };
        // The program shares the init's memory until its exec (as posix_spawn's child does);
        // the init is suspended until that exec.
        let program = libc::clone(
            program_main,
            stack_top(stack),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &launch as *const Launch as *mut libc::c_void,
        );
        // The init keeps only the run's report and stop pipes: the run's stdio closes when
        // the run's processes do.
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        let stop = fds.remove(wire::FD_STOP);
        let report = fds.remove(wire::FD_REPORT);
        drop(fds);
        if program < 0 {
            report_setup_error(report.as_raw_fd(), STAGE_FORK_PROGRAM, errno());
            return;
        }

        let mut program_status: Option<i32> = None;
        let mut stopped = false;
        let mut watched = [
            libc::pollfd {
                fd: children,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        reap(program, &mut program_status);
        while program_status.is_none() && !stopped {
            if libc::poll(watched.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if watched[1].revents != 0 {
                // A byte, or the daemon's end closed: the run ends now.
                stopped = true;
            }
            if watched[0].revents != 0 {
                drain(children);
            }
            reap(program, &mut program_status);
        }
        // What is left now was started by the run and outlived its program (or the program
        // itself, when the run was stopped): count it, then end it all. Every process of the
        // namespace descends from the init (orphans are re-parented to it), so an init without
        // children has nothing left to count or kill: the common case skips both.
        let remaining = reap(program, &mut program_status);
        if !remaining {
            // Nothing is left to end: ready for the next run before the daemon even hears of
            // this one's end, so the slot it gets back can take a run at once.
            say_ready(slot);
        }
        let left = if remaining {
            let left = count_processes();
            libc::kill(-1, libc::SIGKILL);
            left
        } else {
            0
        };
        write_record(
            report.as_raw_fd(),
            TAG_DONE,
            program_status.unwrap_or(libc::SIGKILL),
            left,
            i32::from(stopped),
        );
        drop((report, stop));
        // Reported; now wait until all of it is really gone (SIGKILL is not instant), killing
        // again whatever a fork in flight may have added.
        if remaining {
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, 0);
                if pid < 0 {
                    if errno() == libc::ECHILD {
                        break;
                    }
                    continue;
                }
                libc::kill(-1, libc::SIGKILL);
            }
            say_ready(slot);
        }
        drain(children);
    }
}

/// Tells the daemon this slot can take its next run. A daemon that let the slot go is not
/// listening: the slot's init ends at its next read.
fn say_ready(slot: RawFd) {
    let _ = wire::send_message(slot, wire::MESSAGE_READY, &[], libc::MSG_DONTWAIT);
}

/// Reads a non-blocking signalfd empty.
unsafe fn drain(signals: RawFd) {
    let mut info = [0u8; 128];
    // SAFETY: reads into our buffer.
    while unsafe { libc::read(signals, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

/// Covers `/dev` with a read-only tmpfs holding only [`OWN_DEV_NODES`] (made anew with the
/// machine's numbers and modes), [`OWN_DEV_DIRS`] (bound from the machine's), the usual links
/// and an empty `pts` for the run's devpts. For a root daemon's runs (in the init, which still
/// holds the capabilities to make nodes). Whether it all held.
unsafe fn own_dev() -> bool {
    // SAFETY: system calls on paths and descriptors of this function; stat buffers we own.
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        // The machine's /dev, reachable through this descriptor once covered.
        let machine = libc::open(
            c"/dev".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if machine < 0 {
            return false;
        }
        let machine = OwnedFd::from_raw_fd(machine);
        let mut nodes = Vec::new();
        for name in OWN_DEV_NODES {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstatat(machine.as_raw_fd(), name.as_ptr(), &mut stat, 0) == 0
                && stat.st_mode & libc::S_IFMT == libc::S_IFCHR
            {
                nodes.push((*name, stat.st_mode, stat.st_rdev));
            }
        }
        if libc::mount(
            c"computer-dev".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"size=64k,mode=0755".as_ptr().cast(),
        ) != 0
        {
            return false;
        }
        let dev = libc::open(
            c"/dev".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dev < 0 {
            return false;
        }
        let dev = OwnedFd::from_raw_fd(dev);
        for (name, mode, rdev) in nodes {
            if libc::mknodat(dev.as_raw_fd(), name.as_ptr(), mode, rdev) != 0 {
                return false;
            }
            // mknod applies the umask; the machine's mode is what programs expect.
            if libc::fchmodat(dev.as_raw_fd(), name.as_ptr(), mode & 0o7777, 0) != 0 {
                return false;
            }
        }
        for (name, target) in OWN_DEV_LINKS {
            if libc::symlinkat(target.as_ptr(), dev.as_raw_fd(), name.as_ptr()) != 0 {
                return false;
            }
        }
        if libc::mkdirat(dev.as_raw_fd(), c"pts".as_ptr(), 0o755) != 0 {
            return false;
        }
        for name in OWN_DEV_DIRS {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstatat(machine.as_raw_fd(), name.as_ptr(), &mut stat, 0) != 0
                || stat.st_mode & libc::S_IFMT != libc::S_IFDIR
            {
                continue;
            }
            let from = CString::new(format!(
                "/proc/self/fd/{}/{}",
                machine.as_raw_fd(),
                name.to_string_lossy()
            ))
            .expect("no NUL");
            let to = CString::new(format!("/dev/{}", name.to_string_lossy())).expect("no NUL");
            if libc::mkdirat(dev.as_raw_fd(), name.as_ptr(), 0o755) != 0
                || libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
            {
                return false;
            }
        }
        // Nothing can be added to it: no node, no hard link to one.
        libc::mount(
            none,
            c"/dev".as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
            std::ptr::null(),
        ) == 0
    }
}

/// Whether `path` lies strictly inside the directory `dir`.
fn lies_inside(path: &std::ffi::CStr, dir: &std::ffi::CStr) -> bool {
    let (path, dir) = (path.to_bytes(), dir.to_bytes());
    path.len() > dir.len() + 1 && path.starts_with(dir) && path[dir.len()] == b'/'
}

// The daemon's tools, shown read-only inside its hidden state dir: the masks would hide them,
// so each shown directory is opened first (`open_shown`), its mount point made inside the
// mask's tmpfs before that is made read-only (`make_mount_points`), and the directory bound
// there read-only once every other mount is in place (`bind_shown`). A run then reads the same
// path as the daemon wrote, and can change nothing in it.

/// Opens every shown directory (not through a symbolic link) before the masks hide it.
unsafe fn open_shown(plan: &Plan, slot: RawFd) -> Vec<RawFd> {
    plan.shown
        .iter()
        .map(|path| {
            // SAFETY: open of a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                fail_later(slot, STAGE_SHOW);
            }
            fd
        })
        .collect()
}

/// Makes, on the mask of `dir` (a writable tmpfs still), the directories the shown paths
/// inside it are bound onto, then makes the mask read-only.
unsafe fn make_mount_points(plan: &Plan, dir: &std::ffi::CStr, slot: RawFd) {
    for path in plan.shown.iter().filter(|s| lies_inside(s, dir)) {
        let bytes = path.to_bytes();
        let inner = bytes[dir.to_bytes().len() + 1..]
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(i, _)| dir.to_bytes().len() + 1 + i)
            .chain([bytes.len()]);
        for end in inner {
            let Ok(step) = CString::new(&bytes[..end]) else {
                fail_later(slot, STAGE_SHOW);
            };
            // SAFETY: mkdir of a NUL-terminated path.
            if unsafe { libc::mkdir(step.as_ptr(), 0o500) } != 0 && errno() != libc::EEXIST {
                fail_later(slot, STAGE_SHOW);
            }
        }
    }
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: a remount of the tmpfs just mounted at `dir`.
    if unsafe {
        libc::mount(
            none,
            dir.as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } != 0
    {
        fail_later(slot, STAGE_MASK_DIR);
    }
}

/// Binds each shown directory, through the descriptor held since before the masks, onto its
/// own path, read-only.
unsafe fn bind_shown(plan: &Plan, held: Vec<RawFd>, slot: RawFd) {
    for (path, fd) in plan.shown.iter().zip(held) {
        let Ok(source) = CString::new(format!("/proc/self/fd/{fd}")) else {
            fail_later(slot, STAGE_SHOW);
        };
        // SAFETY: a bind mount of two NUL-terminated paths; the descriptor is ours.
        unsafe {
            if libc::mount(
                source.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
                || set_read_only(path, true) != 0
            {
                fail_later(slot, STAGE_SHOW);
            }
            libc::close(fd);
        }
    }
}

/// `keyctl` operation: join a new anonymous session keyring.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Flags of the mount API calls below (linux/mount.h, linux/fcntl.h).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// A detached read-only copy of the mount tree at `path` (its target, for a symbolic link).
/// `Ok(None)` when nothing is there (a dangling link included).
unsafe fn read_only_clone(path: &std::ffi::CStr) -> Result<Option<OwnedFd>, ()> {
    // SAFETY: system calls on a path we own and a descriptor they return.
    unsafe {
        let tree = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        );
        if tree < 0 {
            return match errno() {
                libc::ENOENT | libc::ENOTDIR => Ok(None),
                _ => Err(()),
            };
        }
        let tree = OwnedFd::from_raw_fd(tree as RawFd);
        if set_read_only_at(
            tree.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH as libc::c_uint,
            true,
        ) != 0
        {
            return Err(());
        }
        Ok(Some(tree))
    }
}

/// Puts the detached tree `tree` at `path`, without following a symbolic link there: the link
/// itself is covered (it can be neither removed nor pointed elsewhere while covered).
unsafe fn attach(tree: &OwnedFd, path: &std::ffi::CStr) -> bool {
    // SAFETY: move_mount on a descriptor we own and a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0
    }
}

/// Makes the plan's login files read-only in this mount namespace, where they exist: each is
/// covered by a read-only copy of itself, and every directory above them is bound onto itself
/// (renaming a mount point fails, so none can be moved away and replaced). Nothing is made in
/// the person's files here: a path that does not exist is left alone. Whether it all held.
unsafe fn cover_login_files(plan: &Plan) -> bool {
    // SAFETY: mount calls on NUL-terminated paths of the plan.
    unsafe {
        let none = std::ptr::null::<libc::c_char>();
        for dir in &plan.read_only_pins {
            if libc::mount(
                dir.as_ptr(),
                dir.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
                && !matches!(errno(), libc::ENOENT | libc::ENOTDIR)
            {
                return false;
            }
        }
        for path in &plan.read_only {
            match read_only_clone(path) {
                Ok(None) => {}
                Ok(Some(tree)) => {
                    if !attach(&tree, path) {
                        return false;
                    }
                }
                Err(()) => return false,
            }
        }
        true
    }
}

/// Sets or clears the read-only flag on the mount at `path` and every mount beneath it.
unsafe fn set_read_only(path: &std::ffi::CStr, read_only: bool) -> libc::c_long {
    // SAFETY: as set_read_only_at's.
    unsafe { set_read_only_at(libc::AT_FDCWD, path, 0, read_only) }
}

/// As [`set_read_only`], for `path` from `dir` with `flags` (`AT_EMPTY_PATH`: `dir` itself).
unsafe fn set_read_only_at(
    dir: RawFd,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    read_only: bool,
) -> libc::c_long {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads the structure we own, of the size we give.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            path.as_ptr(),
            AT_RECURSIVE | flags,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// Reaps every exited child; records the program's status when it is among them. Returns
/// whether any child is left (alive, or not yet reapable).
unsafe fn reap(program: i32, program_status: &mut Option<i32>) -> bool {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes into our status.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid < 0 {
            return errno() != libc::ECHILD;
        }
        if pid == 0 {
            return true;
        }
        if pid == program && program_status.is_none() {
            *program_status = Some(status);
        }
    }
}

/// Live processes of this PID namespace other than the init, from the run's own `/proc`.
unsafe fn count_processes() -> i32 {
    // SAFETY: open/getdents64/close on a stack buffer.
    unsafe {
        let fd = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let mut count = 0;
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at < n as usize {
                // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                let name = &buf[at + 19..at + reclen];
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                let name = &name[..end];
                if !name.is_empty() && name.iter().all(u8::is_ascii_digit) && name != b"1" {
                    count += 1;
                }
                at += reclen;
            }
        }
        libc::close(fd);
        count
    }
}

/// The program's last steps before exec: a clean signal mask, no descriptor beyond stdin,
/// stdout and stderr. (It holds no capability already: the init dropped them all.)
unsafe fn prepare_program() {
    // SAFETY: system calls only.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Close-on-exec rather than close: the report pipe must stay open until the exec, to
        // tell of its failure.
        close_from(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    }
}

/// A pty made in this process's devpts (the run's own): its master side and its terminal side,
/// both close-on-exec and neither this process's controlling terminal.
struct Terminal {
    master: OwnedFd,
    slave: OwnedFd,
}

/// Opens a new pty of `(rows, cols)` through `/dev/ptmx`; the errno of the step that failed.
unsafe fn open_terminal((rows, cols): (u16, u16)) -> Result<Terminal, i32> {
    // SAFETY: open and ioctls on descriptors this function owns, with arguments of the types
    // the kernel expects.
    unsafe {
        let master = libc::open(
            c"/dev/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if master < 0 {
            return Err(errno());
        }
        let master = OwnedFd::from_raw_fd(master);
        let unlock: libc::c_int = 0;
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        if libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) != 0
            || libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) != 0
        {
            return Err(errno());
        }
        // The terminal side opened from the master itself: no path lookup to go astray.
        let slave = libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(errno());
        }
        Ok(Terminal {
            master,
            slave: OwnedFd::from_raw_fd(slave),
        })
    }
}

/// Drops every capability of this process, from its bounding, ambient, inheritable, permitted
/// and effective sets, and sets `no_new_privs`: what it starts (as root too) holds none and can
/// gain none, by a setuid program or file capabilities. Whether it all held.
fn drop_all_capabilities() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: prctl with integer arguments; capset reads the structures we own, laid out as
    // the kernel's.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return false;
        }
        // Every capability the kernel knows, until it says there is no such one. The bounding
        // set goes first: dropping from it needs CAP_SETPCAP, which the capset below removes.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                if errno() == libc::EINVAL {
                    break;
                }
                return false;
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return false;
        }
        libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) == 0
    }
}
