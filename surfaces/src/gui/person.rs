//! The person takes the wheel: when the person at the desk moves the mouse or presses a key
//! during (or just before) an agent's gui input, further gui input pauses for a quiet time and
//! the call is refused as `interrupted_by_person`. A backend that can tell the person's input
//! from the daemon's own (X11, through XInput2 raw events) reports it here; on the others
//! nothing is reported and nothing pauses.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use computer_ipc::{ErrorCode, ToolError};

/// The quiet time after the person's last input, unless `[gui] person_quiet_ms` says.
pub const DEFAULT_QUIET_MS: u64 = 1500;

/// What the watch knows: the settings and the person's last input.
pub struct PersonWatch {
    enabled: AtomicBool,
    quiet_ms: AtomicU64,
    /// The person's last input, on both clocks (the monotonic one to measure, the wall one to
    /// tell the agent when).
    last: Mutex<Option<(Instant, SystemTime)>>,
}

/// The process's watch (one gui backend per process, as `mod.rs` chooses).
pub fn watch() -> &'static PersonWatch {
    static WATCH: PersonWatch = PersonWatch {
        enabled: AtomicBool::new(true),
        quiet_ms: AtomicU64::new(DEFAULT_QUIET_MS),
        last: Mutex::new(None),
    };
    &WATCH
}

impl PersonWatch {
    /// Takes `[gui] yield_to_person` and `person_quiet_ms`.
    pub fn configure(&self, enabled: bool, quiet_ms: u64) {
        self.enabled.store(enabled, Ordering::Relaxed);
        self.quiet_ms.store(quiet_ms, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Records the person's input, now.
    // Only the X11 backend can tell the person's input apart.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn saw_person(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), SystemTime::now()));
    }

    /// Whether the person's input came after `moment`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn input_since(&self, moment: Instant) -> bool {
        self.last().is_some_and(|(at, _)| at > moment)
    }

    fn last(&self) -> Option<(Instant, SystemTime)> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether gui input is paused now: what input under way looks at between its events
    /// (it began only when it was not, so a pause now means the person's input came since).
    pub fn paused(&self) -> bool {
        self.check().is_err()
    }

    /// Refuses gui input while the person's last input is within the quiet time.
    pub fn check(&self) -> Result<(), ToolError> {
        if !self.enabled() {
            return Ok(());
        }
        let quiet = Duration::from_millis(self.quiet_ms.load(Ordering::Relaxed));
        match self.last() {
            Some((at, wall)) if at.elapsed() < quiet => Err(self.interrupted(at, wall, quiet)),
            _ => Ok(()),
        }
    }

    /// The refusal of input that met the person's, mid-way or before it began.
    pub fn refusal(&self) -> ToolError {
        let quiet = Duration::from_millis(self.quiet_ms.load(Ordering::Relaxed));
        let (at, wall) = self
            .last()
            .unwrap_or_else(|| (Instant::now(), SystemTime::now()));
        self.interrupted(at, wall, quiet)
    }

    fn interrupted(&self, at: Instant, wall: SystemTime, quiet: Duration) -> ToolError {
        let ago = at.elapsed();
        let wait = quiet.saturating_sub(ago);
        ToolError::new(
            ErrorCode::InterruptedByPerson,
            format!(
                "the person at the desk used the mouse or keyboard {} ms ago (at {} UTC), so gui \
                 input pauses for {} ms after it; nothing more was sent. Go on after {} UTC (in \
                 {} ms), and check the screen first: the person may have changed it. ax, shell \
                 and sessions are not paused",
                ago.as_millis(),
                clock(wall),
                quiet.as_millis(),
                clock(wall + quiet),
                wait.as_millis()
            ),
        )
    }
}

/// A wall-clock time of day as HH:MM:SS.mmm (UTC).
fn clock(at: SystemTime) -> String {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let day_ms = since.as_millis() % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_utc_time_of_day() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(86_400_000 + 3_723_045);
        assert_eq!(clock(at), "01:02:03.045");
    }

    #[test]
    fn input_pauses_for_the_quiet_time_only() {
        let watch = PersonWatch {
            enabled: AtomicBool::new(true),
            quiet_ms: AtomicU64::new(60_000),
            last: Mutex::new(None),
        };
        assert!(
            watch.check().is_ok() && !watch.paused(),
            "no person input yet"
        );
        watch.saw_person();
        let refused = watch.check().unwrap_err();
        assert_eq!(refused.code, ErrorCode::InterruptedByPerson);
        assert!(refused.message.contains("pauses for 60000 ms"), "{refused}");
        assert!(watch.paused());
        watch.configure(true, 0);
        assert!(watch.check().is_ok(), "the quiet time is over");
        watch.configure(false, 60_000);
        assert!(watch.check().is_ok(), "turned off");
        assert!(!watch.paused());
    }
}
