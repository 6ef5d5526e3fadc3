//! One run served by the init: its request read, its terminal made, its program started and
//! waited for, what it left behind counted and killed, and its end reported.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::errno;
use super::super::program::{Launch, pointers, program_main, stack_top};
use crate::kit::contain::linux::report::{Stage, TAG_DONE, report_setup_error, write_record};
use crate::kit::contain::linux::wire::{self, Request};

/// Runs one request in the init, reports its end, and returns once every process of it is
/// gone (the next run must find nothing of this one).
pub(super) unsafe fn serve_run(
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
            report_setup_error(report, Stage::Request, libc::EINVAL);
            return;
        };
        // Resolved only now, below the masks: a directory held open from before them would
        // lead around them.
        if libc::chdir(request.cwd.as_ptr()) != 0 {
            report_setup_error(report, Stage::Cwd, errno());
            return;
        }
        if !take_stdio(&request, &fds) {
            return;
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
            report_setup_error(report.as_raw_fd(), Stage::ForkProgram, errno());
            return;
        }
        let (program_status, stopped) = wait_for_program(program, children, &stop);
        end_run(slot, program, program_status, stopped, report, stop);
        drain(children);
    }
}

/// Makes the run's stdio this process's descriptors 0 to 2, for the program to inherit: a
/// terminal made here when the run asked for one, else the pipes it came with. False when the
/// terminal could not be made or sent (reported to the run).
unsafe fn take_stdio(request: &Request, fds: &[OwnedFd]) -> bool {
    let report = fds[wire::FD_REPORT].as_raw_fd();
    // SAFETY: dup2 and the terminal's system calls on descriptors this process owns.
    unsafe {
        let Some(size) = request.terminal else {
            for (from, to) in [
                (wire::FD_STDIN, 0),
                (wire::FD_STDOUT, 1),
                (wire::FD_STDERR, 2),
            ] {
                libc::dup2(fds[from].as_raw_fd(), to);
            }
            return true;
        };
        // The run's terminal, made here in the run's own devpts: its master side goes back
        // to the daemon over the socket that came as the run's stdin.
        let terminal = match open_terminal(size) {
            Ok(terminal) => terminal,
            Err(errno) => {
                report_setup_error(report, Stage::OpenTerminal, errno);
                return false;
            }
        };
        let sent = wire::send_message(
            fds[wire::FD_STDIN].as_raw_fd(),
            wire::MESSAGE_TERMINAL,
            &[terminal.master.as_raw_fd()],
            libc::MSG_DONTWAIT,
        );
        if let Err(err) = sent {
            report_setup_error(report, Stage::OpenTerminal, err.raw_os_error().unwrap_or(0));
            return false;
        }
        for fd in 0..3 {
            libc::dup2(terminal.slave.as_raw_fd(), fd);
        }
        true
    }
}

/// Waits until the program ends or the daemon stops the run (a byte on, or the closing of,
/// `stop`). Returns the program's wait status, if it ended, and whether the run was stopped.
unsafe fn wait_for_program(program: i32, children: RawFd, stop: &OwnedFd) -> (Option<i32>, bool) {
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
    // SAFETY: poll, waitpid and read on descriptors and buffers this function owns.
    unsafe {
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
    }
    (program_status, stopped)
}

/// Ends what is left of a run whose program ended (or that was stopped), reports the run's end
/// on `report`, and returns once nothing of it is left; the slot is then ready for its next run.
unsafe fn end_run(
    slot: RawFd,
    program: i32,
    mut program_status: Option<i32>,
    stopped: bool,
    report: OwnedFd,
    stop: OwnedFd,
) {
    // SAFETY: waitpid, kill(-1) (which reaches only this PID namespace: the init is its pid 1)
    // and writes on descriptors this process owns.
    unsafe {
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
