//! The daemon's handle on the containment zygote ([`Zygote`]): starting it, the slots it sends
//! and which of them can take the next run.
//!
//! The containment zygote is a small process started from the daemon's own binary at start-up,
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
//!
//! The zygote's own loop (`serve_if_zygote`) lives in `zygote/`, beside the slot code it runs;
//! what crosses the sockets is in `wire.rs`. This module uses only `wire.rs` of the zygote's
//! protocol, and the zygote's side nothing of the daemon's.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;

use super::super::wire::{
    MESSAGE_READY, MESSAGE_SLOT, MESSAGE_WANT_SLOT, Plan, RUN_FDS, ZYGOTE_NAME, memfd_with,
    recv_message, send_fds, send_message, seqpacket_pair,
};

/// How many prepared slots the daemon asks for ahead: one for the next run, one for a run
/// beside it.
const READY_SLOTS: usize = 2;

/// How many idle slots the daemon keeps after a burst of runs side by side; more are let go.
const MAX_IDLE_SLOTS: usize = 4;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::contain::linux::wire::MESSAGE_RUN;

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
}
