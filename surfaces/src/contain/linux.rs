//! Linux containment: each run gets new user (unless the daemon is root), mount and PID
//! namespaces, set up in the forked child before the program is executed.
//!
//! Three processes make a run:
//! - the *supervisor* (the daemon's forked child, in the daemon's PID namespace) unshares the
//!   namespaces, starts the init, reports the init's pid, and waits for it;
//! - the *init* (pid 1 of the run's PID namespace) masks the daemon's paths, mounts a `/proc`
//!   that shows only the run, starts the program, and when the program ends (or the daemon asks
//!   with SIGTERM) counts what is left, kills it all and reports;
//! - the *program*, which drops what it must not keep and executes what the run asked for.
//!
//! Only the supervisor is a fork of the daemon. The init and the program are `clone(CLONE_VM)`
//! children on stacks of their own: they share the supervisor's memory rather than copy it
//! again (the program only until its exec, as posix_spawn's child does).
//!
//! When the init dies the kernel kills every process of its namespace, so nothing a run starts
//! outlives it: not `setsid`, not a double fork. The init dies with the supervisor
//! (`PR_SET_PDEATHSIG`), and the supervisor with the daemon.
//!
//! Everything between fork and exec is async-signal-safe: raw system calls on data prepared
//! before the fork, no allocation.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{ContainError, ExecSpec, RunEnd, RunLimits};

/// Capabilities a root daemon's runs lose: those that would undo the masks (mount, setns),
/// reach around them (open_by_handle_at, raw devices) or reach other processes (ptrace).
const ROOT_DROPPED_CAPS: &[u32] = &[
    2,  // CAP_DAC_READ_SEARCH: open_by_handle_at walks around mounts
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    18, // CAP_SYS_CHROOT
    19, // CAP_SYS_PTRACE
    21, // CAP_SYS_ADMIN: mount, umount, setns
    22, // CAP_SYS_BOOT
    27, // CAP_MKNOD
];

/// A record on the report pipe: a tag and three numbers, written in one `write` (atomic, as it
/// is shorter than PIPE_BUF).
const RECORD: usize = 13;
const TAG_INIT: u8 = b'G';
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

/// The exit code of a supervisor whose sandbox could not be set up.
const SETUP_FAILED: i32 = 125;

/// Everything a run's setup needs, prepared once so the forked child only makes system calls.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    rootless: bool,
    uid_map: CString,
    gid_map: CString,
    /// Directories bind-mounted onto themselves, so that no run can rename them (and with them
    /// a masked path) away and put a directory of its own in their place.
    pins: Vec<CString>,
    /// Directories covered by an empty read-only tmpfs.
    masked_dirs: Vec<CString>,
    /// Files (and sockets) covered by a read-only bind of /dev/null.
    masked_files: Vec<CString>,
    /// This run gets an empty network namespace.
    no_network: bool,
    /// When set, every mount is read-only except these paths.
    writable: Option<Vec<CString>>,
    described: String,
}

/// What the program's exec needs, as C data prepared before the fork, and the stacks the init
/// and the program start on. The init and the program are `clone(CLONE_VM)` children of the
/// supervisor: they share its memory (no second copy of the daemon's), and only make system
/// calls.
struct Launch {
    plan: Plan,
    report: RawFd,
    path: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    init_stack: Vec<u8>,
    program_stack: Vec<u8>,
}

// SAFETY: the raw pointers point into the `CString`s the Launch owns; it is only read, by the
// forked supervisor and its clones.
unsafe impl Send for Launch {}
// SAFETY: as above: shared read-only.
unsafe impl Sync for Launch {}

/// Stack sizes of the init (its loop, a 4 KiB directory buffer) and the program (until exec).
const INIT_STACK: usize = 128 * 1024;
const PROGRAM_STACK: usize = 64 * 1024;

fn c_string(bytes: &[u8]) -> Result<CString, ContainError> {
    CString::new(bytes).map_err(|_| ContainError::Setup {
        stage: "program and arguments",
        source: io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"),
    })
}

impl Launch {
    fn new(plan: &Plan, report: RawFd, exec: &ExecSpec) -> Result<Launch, ContainError> {
        let path = c_string(exec.program.as_os_str().as_bytes())?;
        let argv_strings = exec
            .argv
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let env_strings = exec
            .env
            .iter()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c_string(&pair)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pointers = |strings: &[CString]| {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Launch {
            plan: plan.clone(),
            report,
            path,
            argv: pointers(&argv_strings),
            _argv: argv_strings,
            envp: pointers(&env_strings),
            _envp: env_strings,
            init_stack: vec![0; INIT_STACK],
            program_stack: vec![0; PROGRAM_STACK],
        })
    }
}

impl Plan {
    pub(super) fn new(hidden: &[PathBuf]) -> io::Result<Plan> {
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
             lose the mount, ptrace and raw-device capabilities instead)"
        } else {
            "user, mount and PID namespaces per run"
        };
        let hidden_list: Vec<String> = dirs
            .iter()
            .chain(&files)
            .map(|p| p.display().to_string())
            .collect();
        let described = format!(
            "{namespaces}; hidden from runs: {}; a run sees only its own processes, and \
             everything it started is killed when it ends",
            hidden_list.join(", ")
        );
        Ok(Plan {
            rootless: uid != 0,
            uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("digits only"),
            gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("digits only"),
            pins: pins.iter().map(c).collect::<io::Result<_>>()?,
            masked_dirs: dirs.iter().map(c).collect::<io::Result<_>>()?,
            masked_files: files.iter().map(c).collect::<io::Result<_>>()?,
            no_network: false,
            writable: None,
            described,
        })
    }

    /// This plan tightened by one run's limits.
    pub(super) fn with_limits(&self, limits: &RunLimits) -> Result<Plan, ContainError> {
        let mut plan = self.clone();
        plan.no_network = limits.no_network;
        if let Some(paths) = &limits.writable {
            let mut writable = Vec::new();
            for path in paths {
                writable.push(CString::new(path.as_os_str().as_bytes()).map_err(|_| {
                    ContainError::Setup {
                        stage: "writable paths",
                        source: io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a path"),
                    }
                })?);
            }
            plan.writable = Some(writable);
        }
        Ok(plan)
    }

    pub(super) fn describe(&self) -> String {
        self.described.clone()
    }

    /// Runs `true` contained, to prove at start that this machine allows what runs will need.
    pub(super) fn probe(&self) -> io::Result<()> {
        let mut command = std::process::Command::new("/bin/true");
        command
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let exec = ExecSpec {
            program: PathBuf::from("/bin/true"),
            argv: vec!["true".into()],
            env: Vec::new(),
        };
        let mut run = self.prepare(&mut command, &exec).map_err(into_io)?;
        let mut child = command.spawn()?;
        let started = run.started();
        let status = child.wait()?;
        started.map_err(into_io)?;
        // The supervisor is gone, so the init's last word is in the pipe (or never comes).
        let end = match run.done {
            Some(end) => end,
            None => match read_record(&run.report) {
                Some((TAG_DONE, status, killed, stopped)) => run_end(status, killed, stopped),
                Some((TAG_ERROR, stage, errno, _)) => {
                    return Err(into_io(setup_error(stage, errno)));
                }
                _ => return Err(into_io(ContainError::Lost)),
            },
        };
        run.done = Some(end);
        match end.status {
            Some(0) => Ok(()),
            other => Err(io::Error::other(format!(
                "a contained /bin/true did not exit 0 (wait status {other:?}, supervisor {status})"
            ))),
        }
    }

    /// Makes `command`'s child the supervisor of a contained run of `exec` (the command's own
    /// program is never executed; its stdio and working directory are the run's).
    pub(super) fn prepare(
        &self,
        command: &mut std::process::Command,
        exec: &ExecSpec,
    ) -> Result<Run, ContainError> {
        use std::os::unix::process::CommandExt;
        let (read, write) = report_pipe().map_err(|source| ContainError::Setup {
            stage: "report pipe",
            source,
        })?;
        let launch = Box::new(Launch::new(self, write.as_raw_fd(), exec)?);
        // SAFETY: the closure runs in the forked child and only makes async-signal-safe system
        // calls on memory prepared before the fork (see `supervise`).
        unsafe {
            command.pre_exec(move || supervise(&launch));
        }
        Ok(Run {
            report: read,
            report_write: Some(write),
            init_pid: None,
            done: None,
        })
    }
}

/// A contained run as the daemon follows it.
#[derive(Debug)]
pub(super) struct Run {
    report: OwnedFd,
    /// The pipe's write end, held until the child is spawned (the child inherits it), then
    /// closed so that reads end once the run's processes are gone.
    report_write: Option<OwnedFd>,
    init_pid: Option<i32>,
    done: Option<RunEnd>,
}

impl Run {
    pub(super) fn started(&mut self) -> Result<(), ContainError> {
        self.report_write = None;
        // The supervisor writes the init's pid before it lets spawn() return, so the record is
        // in the pipe already (or an error record, or nothing when the supervisor died). A run
        // quick enough can have ended before its supervisor was scheduled again: then the
        // init's final record comes first.
        while let Some(record) = read_record(&self.report) {
            match record {
                (TAG_INIT, pid, _, _) => {
                    self.init_pid = Some(pid);
                    return Ok(());
                }
                (TAG_DONE, status, killed, stopped) => {
                    self.done = Some(run_end(status, killed, stopped))
                }
                (TAG_ERROR, stage, errno, _) => return Err(setup_error(stage, errno)),
                _ => break,
            }
        }
        Err(ContainError::Lost)
    }

    pub(super) fn stop(&self) {
        if let Some(pid) = self.init_pid {
            // SIGTERM is the init's cue to count, kill and report; it waits for it with the
            // signal blocked, so the kernel delivers it even to a namespace's init.
            // SAFETY: kill only sends a signal.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }

    pub(super) async fn done(&mut self) -> Result<RunEnd, ContainError> {
        if let Some(done) = self.done {
            return Ok(done);
        }
        self.report_write = None;
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
                    return Ok(end);
                }
                Next::Record((TAG_ERROR, stage, errno, _)) => {
                    // The init is gone (or going): its pid must not be signalled again.
                    self.init_pid = None;
                    return Err(setup_error(stage, errno));
                }
                Next::Record(_) => continue,
                Next::Empty => guard.clear_ready(),
                // Every writer is gone without a last word: the init was killed, and its pid
                // may belong to another process by now.
                Next::End => {
                    self.init_pid = None;
                    return Err(ContainError::Lost);
                }
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
        // A run dropped before it finished (its call went away): end it.
        if self.done.is_none() {
            self.stop();
        }
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

fn report_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
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

fn read_record(fd: &OwnedFd) -> Option<(u8, i32, i32, i32)> {
    match next_record(fd) {
        Next::Record(record) => Some(record),
        Next::Empty | Next::End => None,
    }
}

// ---- Between fork and exec: system calls only. ----

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

/// Reports a failed stage and ends this process.
fn fail(report: RawFd, stage: i32) -> ! {
    write_record(report, TAG_ERROR, stage, errno(), 0);
    // SAFETY: _exit ends the process without running anything of the parent's.
    unsafe { libc::_exit(SETUP_FAILED) }
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

/// The supervisor: runs in the daemon's forked child, and never returns.
fn supervise(launch: &Launch) -> io::Result<()> {
    let (plan, report) = (&launch.plan, launch.report);
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if plan.rootless {
        flags |= libc::CLONE_NEWUSER;
    }
    if plan.no_network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: system calls on data prepared before the fork; see the module comment.
    unsafe {
        // The supervisor dies with the daemon; its init with it, and with the init the run.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::unshare(flags) != 0 {
            fail(report, STAGE_UNSHARE);
        }
        if plan.rootless {
            // The daemon is not dumpable, which makes its /proc/self files root's: this child
            // may write its own maps only while dumpable, and is made undumpable again below.
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            if !write_file(b"/proc/self/setgroups\0", b"deny") {
                fail(report, STAGE_SETGROUPS);
            }
            if !write_file(b"/proc/self/uid_map\0", plan.uid_map.as_bytes()) {
                fail(report, STAGE_UID_MAP);
            }
            if !write_file(b"/proc/self/gid_map\0", plan.gid_map.as_bytes()) {
                fail(report, STAGE_GID_MAP);
            }
        }
        // The supervisor and the init hold a copy of the daemon's memory: it must stay
        // unreadable to the run, and the daemon's environment is wiped from it besides (a root
        // run reads a non-dumpable root process's /proc/PID/environ all the same).
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        wipe_environment();
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        // The init shares this process's memory (no second copy of the daemon's) and runs on
        // its own stack; it is pid 1 of the new PID namespace.
        let init = libc::clone(
            init_main,
            stack_top(&launch.init_stack),
            libc::CLONE_VM | libc::SIGCHLD,
            launch as *const Launch as *mut libc::c_void,
        );
        if init < 0 {
            fail(report, STAGE_FORK_INIT);
        }
        write_record(report, TAG_INIT, init, 0, 0);
        // Nothing of the daemon's stays open here: not the run's pipes, not the standard
        // library's exec-error pipe (spawn() returns once every copy of it is closed).
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

/// The highest 16-byte-aligned address of `stack` (stacks grow down on every Linux target).
fn stack_top(stack: &[u8]) -> *mut libc::c_void {
    let end = stack.as_ptr() as usize + stack.len();
    (end & !15) as *mut libc::c_void
}

extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Launch the supervisor passed, alive in the shared memory.
    unsafe { run_init(&*(arg as *const Launch)) }
}

extern "C" fn program_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Launch, alive in the shared memory; the init waits for the exec
    // (CLONE_VFORK).
    unsafe {
        let launch = &*(arg as *const Launch);
        prepare_program(&launch.plan);
        libc::execve(
            launch.path.as_ptr(),
            launch.argv.as_ptr(),
            launch.envp.as_ptr(),
        );
        write_record(launch.report, TAG_ERROR, STAGE_EXEC, errno(), 0);
        libc::_exit(127);
    }
}

/// Overwrites this process's copy of the environment strings with zeros. The program is not
/// affected: the standard library hands it the environment the surface built, from its own
/// memory, and `prepare` requires that environment to be explicit.
unsafe fn wipe_environment() {
    unsafe extern "C" {
        static mut environ: *const *mut libc::c_char;
    }
    // SAFETY: `environ` is a NULL-terminated array of NUL-terminated strings; this process is a
    // single-threaded fork that only overwrites its own copy of them.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = *entry;
            let len = libc::strlen(text);
            std::ptr::write_bytes(text, 0, len);
            entry = entry.add(1);
        }
    }
}

/// The init: pid 1 of the run. Never returns.
///
/// # Safety
/// Called between fork and exec only.
unsafe fn run_init(launch: &Launch) -> ! {
    let (plan, report) = (&launch.plan, launch.report);
    // SAFETY: system calls on data prepared before the fork.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::prctl(libc::PR_SET_NAME, c"computer-init".as_ptr());
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
            fail(report, STAGE_PROPAGATION);
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
                fail(report, STAGE_PIN);
            }
        }
        for dir in &plan.masked_dirs {
            let options = c"size=4k,mode=0500";
            if libc::mount(
                c"computer-hidden".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            ) != 0
            {
                fail(report, STAGE_MASK_DIR);
            }
        }
        for file in &plan.masked_files {
            if libc::mount(
                c"/dev/null".as_ptr(),
                file.as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
                || libc::mount(
                    none,
                    file.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                    std::ptr::null(),
                ) != 0
            {
                fail(report, STAGE_MASK_FILE);
            }
        }
        if let Some(writable) = &plan.writable {
            // Everything read-only, then each writable path a fresh bind with the flag cleared.
            if set_read_only(c"/", true) != 0 {
                fail(report, STAGE_READ_ONLY);
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
                    fail(report, STAGE_WRITABLE);
                }
            }
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            fail(report, STAGE_PROC);
        }
        // The program shares the init's memory until its exec (as posix_spawn's child does);
        // the init is suspended until that exec.
        let program = libc::clone(
            program_main,
            stack_top(&launch.program_stack),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            launch as *const Launch as *mut libc::c_void,
        );
        if program < 0 {
            fail(report, STAGE_FORK_PROGRAM);
        }
        // The init keeps only the report pipe: the run's output pipes close when the run's
        // processes do.
        let report_fd = report as u32;
        close_from(0, report_fd.saturating_sub(1), 0);
        close_from(report_fd + 1, u32::MAX, 0);

        let mut wanted: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wanted);
        libc::sigaddset(&mut wanted, libc::SIGCHLD);
        libc::sigaddset(&mut wanted, libc::SIGTERM);
        let mut program_status: Option<i32> = None;
        let mut stopped = false;
        while program_status.is_none() && !stopped {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let signal = libc::sigwaitinfo(&wanted, &mut info);
            if signal == libc::SIGTERM {
                stopped = true;
            }
            reap(program, &mut program_status);
        }
        // What is left now was started by the run and outlived its program (or the program
        // itself, when the run was stopped): count it, then end it all.
        let left = count_processes();
        libc::kill(-1, libc::SIGKILL);
        reap(program, &mut program_status);
        write_record(
            report,
            TAG_DONE,
            program_status.unwrap_or(libc::SIGKILL),
            left,
            i32::from(stopped),
        );
        libc::_exit(0);
    }
}

/// Sets or clears the read-only flag on the mount at `path` and every mount beneath it.
unsafe fn set_read_only(path: &std::ffi::CStr, read_only: bool) -> libc::c_long {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
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
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// Reaps every exited child; records the program's status when it is among them.
unsafe fn reap(program: i32, program_status: &mut Option<i32>) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes into our status.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            break;
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

/// The program's last steps before exec: a clean signal mask, no capability that would undo
/// the masks, no descriptor beyond stdin, stdout and stderr.
unsafe fn prepare_program(plan: &Plan) {
    // SAFETY: system calls only.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if !plan.rootless {
            for &cap in ROOT_DROPPED_CAPS {
                libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong);
            }
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            drop_effective(ROOT_DROPPED_CAPS);
        }
        // Close-on-exec rather than close: the report pipe must stay open until the exec, to
        // tell of its failure.
        close_from(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    }
}

/// Removes `caps` from this process's effective, permitted and inheritable sets; with them out
/// of the bounding set too, an exec as root does not regain them.
unsafe fn drop_effective(caps: &[u32]) {
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
    let mut data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget/capset read and write the structures we own, laid out as the kernel's.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return;
        }
        for &cap in caps {
            let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
            data[word].effective &= !bit;
            data[word].permitted &= !bit;
            data[word].inheritable &= !bit;
        }
        libc::syscall(libc::SYS_capset, &mut header, data.as_ptr());
    }
}
