//! The report pipe a slot's init (and the program, until its exec) tells the daemon on how a
//! run went: fixed-size records of a tag and three numbers, and the setup [`Stage`]s a run is
//! refused at, each named once with the number it crosses the pipe as.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// A record on the report pipe: a tag and three numbers, written in one `write` (atomic, as it
/// is shorter than PIPE_BUF).
pub(super) const RECORD: usize = 13;
pub(super) const TAG_DONE: u8 = b'D';
pub(super) const TAG_ERROR: u8 = b'E';

/// Writes the [`Stage`] enum: each stage once, with the number it crosses the report pipe as
/// and the name a refused run's error gives it.
macro_rules! stages {
    ($($stage:ident = $number:literal: $name:literal,)*) => {
        /// A setup stage of a slot or a run, named in the error of a run refused at it. Its
        /// number is what the zygote's side writes on the report pipe and the daemon's side
        /// reads: a number is never reused for another stage.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(i32)]
        pub(super) enum Stage {
            $($stage = $number,)*
        }

        impl Stage {
            /// Every stage, in the order of their numbers.
            #[cfg(test)]
            const ALL: &[Stage] = &[$(Stage::$stage,)*];

            /// What the stage does, as a refused run's error names it.
            pub(super) fn name(self) -> &'static str {
                match self {
                    $(Stage::$stage => $name,)*
                }
            }

            /// The stage a record's number names; `None` for a number no stage has.
            pub(super) fn from_number(number: i32) -> Option<Stage> {
                match number {
                    $($number => Some(Stage::$stage),)*
                    _ => None,
                }
            }
        }
    };
}

stages! {
    Unshare = 0: "unshare",
    Setgroups = 1: "setgroups",
    UidMap = 2: "uid_map",
    GidMap = 3: "gid_map",
    ForkInit = 4: "fork of the init",
    Propagation = 5: "mount propagation",
    Pin = 6: "pinning a directory",
    MaskDir = 7: "masking a directory",
    MaskFile = 8: "masking a file",
    Proc = 9: "mounting /proc",
    ForkProgram = 10: "fork of the program",
    ReadOnly = 11: "making mounts read-only",
    Writable = 12: "making a path writable",
    Exec = 13: "exec of the program",
    Request = 14: "reading the run's request",
    Supervisor = 15: "fork of the supervisor",
    Cwd = 16: "changing to the working directory",
    Signals = 17: "watching for the program's end",
    Terminal = 18: "taking the terminal as the session's controlling terminal",
    MaskSource = 19: "making the empty file masks are made of",
    Devpts = 20: "mounting the run's own /dev/pts",
    KernelReadOnly = 21: "making kernel settings read-only",
    Capabilities = 22: "dropping capabilities",
    OpenTerminal = 23: "opening the run's own terminal",
    OwnDev = 24: "making the run's own /dev",
    Show = 25: "showing the daemon's tools read-only",
    LoginFiles = 26: "making login files read-only",
    Keyring = 27: "joining a keyring of the run's own",
    DesktopX11 = 28: "showing the run its desktop's X socket alone",
    Landlock = 29: "keeping the run from abstract sockets (Landlock scoping)",
    DesktopDir = 30: "showing the run its desktop's private directory alone among desktops'",
}

/// What the report pipe holds next.
pub(super) enum Next {
    Record((u8, i32, i32, i32)),
    /// Nothing yet.
    Empty,
    /// Every writer has closed it.
    End,
}

pub(super) fn next_record(fd: &OwnedFd) -> Next {
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

pub(super) fn write_record(fd: RawFd, tag: u8, a: i32, b: i32, c: i32) {
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

/// Reports a setup stage that failed on `report`: the run that meets it is refused.
pub(super) fn report_setup_error(report: RawFd, stage: Stage, errno: i32) {
    write_record(report, TAG_ERROR, stage as i32, errno, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_is_read_back_from_its_number_and_no_other_number_is_a_stage() {
        for &stage in Stage::ALL {
            assert_eq!(Stage::from_number(stage as i32), Some(stage));
            assert!(!stage.name().is_empty());
        }
        assert_eq!(Stage::from_number(-1), None);
        assert_eq!(Stage::from_number(Stage::ALL.len() as i32), None);
    }
}
