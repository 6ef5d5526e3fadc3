//! The contract between the gui surface and a platform backend: geometry, pixels, window and
//! monitor facts, and the `Desktop` (one open connection to the screen and input) and `Backend`
//! (how connections are made and dropped) traits that X11, wlroots Wayland and macOS implement.

use std::sync::Arc;

use super::keys::Combo;
use crate::Availability;

/// A failure talking to the display, in words for the caller. After one, the surface drops the
/// connection so the next call makes a fresh one.
#[derive(Debug)]
pub struct DisplayError(pub String);

impl std::fmt::Display for DisplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type DisplayResult<T> = Result<T, DisplayError>;

/// A captured area as 8-bit RGB.
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// An area in input coordinates: X pixels on X11, global display points on macOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    pub fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.x
            && y >= self.y
            && i64::from(x) < i64::from(self.x) + i64::from(self.width)
            && i64::from(y) < i64::from(self.y) + i64::from(self.height)
    }

    /// The overlap of two rectangles, if any.
    pub fn intersect(&self, other: &Rect) -> Option<Rect> {
        let x0 = self.x.max(other.x);
        let y0 = self.y.max(other.y);
        let x1 = (i64::from(self.x) + i64::from(self.width))
            .min(i64::from(other.x) + i64::from(other.width));
        let y1 = (i64::from(self.y) + i64::from(self.height))
            .min(i64::from(other.y) + i64::from(other.height));
        (x1 > i64::from(x0) && y1 > i64::from(y0)).then(|| Rect {
            x: x0,
            y: y0,
            width: (x1 - i64::from(x0)) as u32,
            height: (y1 - i64::from(y0)) as u32,
        })
    }
}

#[derive(Debug, Clone)]
pub struct MonitorInfo {
    pub index: usize,
    pub name: String,
    pub rect: Rect,
    pub primary: bool,
}

#[derive(Debug, Clone)]
pub struct WindowInfo {
    pub id: u32,
    pub title: String,
    /// The application: the X11 WM_CLASS class, the application's name on macOS.
    pub app: String,
    /// The X11 WM_CLASS instance name (often the program's name); empty where there is none.
    pub instance: String,
    pub pid: Option<u32>,
    pub rect: Rect,
    pub focused: bool,
    pub monitor: Option<usize>,
}

/// What a backend can do here, as commands need it: a backend says which it has
/// ([`Backend::has`]), a gui command which it needs (`Command::NEEDS`), so that no backend
/// names a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Capturing the screen (screenshots, evidence).
    Capture,
    /// Listing the windows, and telling which one has the keyboard focus.
    Windows,
    /// Raising and focusing a window.
    RaiseWindow,
    /// Reading where the pointer is.
    ReadPointer,
    /// Sending pointer input (moves, clicks, drags, scrolls).
    Pointer,
    /// Sending keys.
    Keyboard,
}

/// Mouse buttons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Button {
    Left,
    Middle,
    Right,
}

/// One open connection to the screen and the input devices. Every method blocks; the surface
/// calls them through [`blocking`].
pub trait Desktop: Send + Sync + 'static {
    /// A raw capture: cheap to compare (for the settle wait), converted to RGB when kept.
    type Frame: Send;

    /// The whole screen (every monitor) in input coordinates; points outside it are refused.
    fn screen(&self) -> DisplayResult<Rect>;
    /// Captures `area` (input coordinates) at the display's own resolution, which may hold more
    /// pixels than the area has units (a Retina display has two per point).
    fn grab(&self, area: Rect) -> DisplayResult<Self::Frame>;
    fn same_frame(a: &Self::Frame, b: &Self::Frame) -> bool;
    fn to_rgb(&self, frame: &Self::Frame) -> Rgb;
    fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>>;
    fn window_ids(&self) -> DisplayResult<Vec<u32>>;
    fn windows(&self) -> DisplayResult<Vec<WindowInfo>>;
    /// The managed windows' ids from bottom to top, where the backend can tell (None: then the
    /// focused window counts as on top, and later listed ones above earlier ones).
    fn stacking(&self) -> DisplayResult<Option<Vec<u32>>> {
        Ok(None)
    }
    /// The managed window that keystrokes sent now would reach, if that can be told.
    fn keyboard_target(&self) -> DisplayResult<Option<u32>> {
        Ok(self.windows()?.iter().find(|w| w.focused).map(|w| w.id))
    }
    /// Whether keys are refused while `keyboard_target` cannot tell their window. On X11 keys
    /// may go to an unknown window unless a terminal is open; on Wayland the focus may be on
    /// a surface no protocol lists (a panel, a lock screen), so keys go only to a known window.
    fn focus_must_be_known(&self) -> bool {
        false
    }
    /// How an agent gives a window the focus on this backend, for the errors that ask it to.
    fn how_to_focus(&self) -> &'static str {
        "focus a window first (`gui focus`)"
    }
    /// Whether the backend knows `window`'s process and place: where it does not (a Wayland
    /// compositor that tells neither), input near it is refused while approvers are connected,
    /// since the window may be one of theirs.
    fn knows_owner(&self, _window: &WindowInfo) -> bool {
        true
    }
    /// Whether `windows` gives every window's place: where it does not (GNOME, whose windows
    /// come from AT-SPI without positions, and not every window is there), pointer input is
    /// refused while approvers are connected, since the point may lie on one of theirs.
    fn places_known(&self) -> bool {
        true
    }
    /// Whether `cursor` can read the pointer position (no Wayland protocol lets a client).
    fn reads_cursor(&self) -> bool {
        true
    }
    fn cursor(&self) -> DisplayResult<(i32, i32)>;
    fn move_to(&self, x: i32, y: i32) -> DisplayResult<()>;
    /// Clicks `count` times, at `at` or where the pointer is.
    fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()>;
    /// Presses at `from`, moves through intermediate points with the button held, releases at
    /// `to`: toolkits start a drag only after motion while pressed.
    fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()>;
    /// Scrolls by notches (+down/right), at `at` or where the pointer is.
    fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()>;
    /// Why `text` cannot be typed here, before any key is sent (the GNOME backend reaches only
    /// the keys of the session's layout); None when it can.
    fn untypable(&self, _text: &str) -> Option<String> {
        None
    }
    /// Types `text` exactly (any Unicode; "\n" is Return, "\t" Tab, "\u{8}" BackSpace).
    fn type_text(&self, text: &str) -> DisplayResult<()>;
    fn press_combo(&self, combo: &Combo) -> DisplayResult<()>;
    /// Raises and focuses a window; whether it is focused afterwards.
    fn focus(&self, window: u32) -> DisplayResult<bool>;
    /// Whether input here pauses for the person's own (`[gui] yield_to_person`): not on an
    /// agent's own desktop, where no person's hands are.
    fn yields_to_person(&self) -> bool {
        true
    }
}

/// How a platform makes, shares and drops its connection.
pub trait Backend: Send + Sync + 'static {
    type Conn: Desktop;

    /// The connection, or why there is none (in words a person can act on).
    fn conn(&self) -> Result<Arc<Self::Conn>, Availability>;
    /// Drops a connection that failed, so the next use makes a new one.
    fn forget(&self, broken: &Arc<Self::Conn>);
    /// Whether this backend has `capability` here (what the compositor offers); the tool
    /// lists only the commands whose needs it meets.
    fn has(&self, _capability: Capability) -> bool {
        true
    }
    /// A question a person must answer before a command that needs `needs` may run here,
    /// whatever the rules say (the GNOME backend's consent to start its remote-desktop
    /// session); None when nothing needs asking.
    fn consent_needed(&self, _needs: &[Capability]) -> DisplayResult<Option<String>> {
        Ok(None)
    }
    /// Keeps the answer to that question: called when a call that asked it runs, which only a
    /// person's approval lets happen.
    fn grant_consent(&self) -> DisplayResult<()> {
        Ok(())
    }
    fn availability(&self) -> Availability {
        match self.conn() {
            Ok(_) => Availability::Ready,
            Err(why) => why,
        }
    }
}

/// Display work running in place at once, at most (see [`blocking`]).
const IN_PLACE_AT_ONCE: usize = 1;

/// Display work running in place now.
static IN_PLACE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs blocking display work (requests to the display server, waits for its replies) for the
/// calling task, and hands back what it returned or, if it panicked, the panic's message.
///
/// On a multi-thread runtime (the daemon's) the work runs on the task's own thread
/// (`block_in_place`: the worker hands its other tasks to another thread first, off the
/// call's path), not on the blocking pool: a click then wakes no blocking thread and no worker
/// when it is done, two of the few thread hand-offs a click costs (BENCHMARKS.md). What that
/// gives up: the task cannot be dropped while the display holds the work, so a call cancelled
/// while a stuck display server holds it answers when the server does, not after the cancel
/// grace (the work itself could not be stopped either way).
///
/// Work that comes while another runs in place goes to the blocking pool, like all of it on a
/// current-thread runtime (tests), which cannot lend its only thread. The worker's hand-off
/// needs a free thread of the pool: with a display server that holds every call (stopped, or
/// grabbed by a client) and the pool full of them, each work in place would keep a worker
/// from the runtime's other calls; one at a time keeps that to one worker at most.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    use std::sync::atomic::Ordering;
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread = Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread);
    let in_place = multi_thread
        && IN_PLACE
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                (running < IN_PLACE_AT_ONCE).then_some(running + 1)
            })
            .is_ok();
    if !in_place {
        return tokio::task::spawn_blocking(work)
            .await
            .map_err(|err| err.to_string());
    }
    /// Gives the place back however the work ends.
    struct Place;
    impl Drop for Place {
        fn drop(&mut self) {
            IN_PLACE.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let _place = Place;
    tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|panic| {
            panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into())
        })
}

#[cfg(test)]
mod tests {
    use super::blocking;

    /// The tests that look at which thread ran the work, one at a time: work in place is
    /// counted for the whole process.
    static IN_PLACE_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn on_the_daemons_runtime_display_work_runs_on_the_calling_thread() {
        let _one_at_a_time = IN_PLACE_TESTS.lock().await;
        let call = tokio::spawn(async {
            let caller = std::thread::current().id();
            // The runtime's only worker is the one waiting here: the other task answers only
            // if the worker handed its tasks to another thread before the work began.
            let (send, receive) = std::sync::mpsc::channel();
            tokio::spawn(async move { send.send(7).unwrap() });
            let (ran_on, answer) =
                blocking(move || (std::thread::current().id(), receive.recv().unwrap()))
                    .await
                    .unwrap();
            (caller, ran_on, answer)
        });
        let (caller, ran_on, answer) = call.await.unwrap();
        assert_eq!(ran_on, caller);
        assert_eq!(answer, 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_that_comes_while_another_runs_in_place_goes_to_the_pool() {
        let _one_at_a_time = IN_PLACE_TESTS.lock().await;
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, is_running) = tokio::sync::oneshot::channel();
        let first = tokio::spawn(async move {
            let caller = std::thread::current().id();
            let ran_on = blocking(move || {
                started.send(()).unwrap();
                held.recv().unwrap();
                std::thread::current().id()
            })
            .await
            .unwrap();
            (caller, ran_on)
        });
        is_running.await.unwrap();
        let second = tokio::spawn(async {
            let caller = std::thread::current().id();
            (
                caller,
                blocking(|| std::thread::current().id()).await.unwrap(),
            )
        });
        let (caller, ran_on) = second.await.unwrap();
        assert_ne!(ran_on, caller, "a second work at once ran in place");
        release.send(()).unwrap();
        let (caller, ran_on) = first.await.unwrap();
        assert_eq!(ran_on, caller);
        // The first gave its place back.
        let third = tokio::spawn(async {
            let caller = std::thread::current().id();
            (
                caller,
                blocking(|| std::thread::current().id()).await.unwrap(),
            )
        });
        let (caller, ran_on) = third.await.unwrap();
        assert_eq!(ran_on, caller);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_lends_the_work_to_the_blocking_pool() {
        let caller = std::thread::current().id();
        let ran_on = blocking(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, caller);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_display_work_comes_back_as_its_message() {
        let _one_at_a_time = IN_PLACE_TESTS.lock().await;
        let err = blocking(|| -> u8 { panic!("the display said no") })
            .await
            .unwrap_err();
        assert!(err.contains("the display said no"), "{err}");
        let err = blocking(|| -> u8 { panic!("{} formatted", "also") })
            .await
            .unwrap_err();
        assert!(err.contains("also formatted"), "{err}");
    }
}
