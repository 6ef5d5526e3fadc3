//! A contained run as the daemon follows it: the records its init reports, the stop pipe that
//! ends it, and the slot it gives back when it ends.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use super::super::report::{Next, Stage, TAG_DONE, TAG_ERROR, next_record};
use super::zygote_handle::Zygote;
use crate::kit::contain::{ContainError, RunEnd};

/// A contained run as the daemon follows it.
#[derive(Debug)]
pub(in crate::kit::contain) struct Run {
    pub(super) report: OwnedFd,
    /// The write end of the run's stop pipe: a byte, or its closing, tells the init to end the
    /// run (no pid is ever signalled, so none can be reused in between).
    pub(super) stop: Option<OwnedFd>,
    pub(super) done: Option<RunEnd>,
    /// The slot the run was handed to directly, given back when the run ends cleanly.
    pub(super) slot: Option<OwnedFd>,
    /// Whether its slot may serve another run (not after a terminal run: see `start_terminal`).
    pub(super) reusable: bool,
    /// Told once the run has ended: its slot comes back, or a new one is asked for.
    pub(super) zygote: Option<Arc<Mutex<Zygote>>>,
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

    pub(in crate::kit::contain) fn stop(&self) {
        if let Some(stop) = &self.stop {
            // SAFETY: writes one byte of ours to a descriptor we own; a full pipe (the run was
            // told already) or a gone reader is fine.
            unsafe {
                libc::write(stop.as_raw_fd(), b"x".as_ptr().cast(), 1);
            }
        }
    }

    /// Waits, blocking, for the run's end (used only at start, outside any run).
    pub(super) fn wait_blocking(&mut self, limit_ms: i32) -> Result<RunEnd, ContainError> {
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

    pub(in crate::kit::contain) async fn done(&mut self) -> Result<RunEnd, ContainError> {
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

fn setup_error(stage: i32, errno: i32) -> ContainError {
    ContainError::Setup {
        stage: Stage::from_number(stage).map_or("setup", Stage::name),
        source: io::Error::from_raw_os_error(errno),
    }
}
