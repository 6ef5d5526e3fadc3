//! What the GNOME (Mutter) and xdg-desktop-portal backends share: both drive a remote-desktop
//! session over D-Bus (absolute pointer motion on a screen-cast stream, Linux button codes,
//! discrete axis steps, keysyms), so the gestures built from those events (clicks, drags,
//! scrolls, typing, key combinations) live here once; both see windows and focus only through
//! AT-SPI; and both run their D-Bus calls on one small runtime of their own, so the blocking
//! `Desktop` methods can be called from any thread (the surface calls some from async tasks).
//!
//! # Layout
//! - `conn`: the connection and backend both are, their `Desktop` and `Backend` written once;
//!   what differs between them is a `Service`.
//! - `session`: the session's screen cast and the slot a connection keeps its session in.
//! - `frames`: the screen-cast stream read over PipeWire.
//! - `kept`: their items in the keychain (GNOME's consent, the portal's restore token).

pub(super) mod conn;
pub(super) mod frames;
pub(super) mod kept;
pub(super) mod session;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::accessibility::WindowReader;
use crate::gui::desktop::{Button, DisplayError, DisplayResult, Rect, WindowInfo};
use crate::gui::keys::{Combo, char_keysym};

/// Linux input codes of the mouse buttons (BTN_LEFT, BTN_RIGHT, BTN_MIDDLE).
const BTN_LEFT: i32 = 0x110;
const BTN_RIGHT: i32 = 0x111;
const BTN_MIDDLE: i32 = 0x112;
/// The keysym the virtual keyboard is primed with. Mutter makes a session's virtual keyboard
/// and pointer on their first event, and clients bind them only when the seat says it has them:
/// the first events of each reach no client (measured with GTK 3 on Mutter 43, directly and
/// through the portal). A lone Shift types nothing, and a relative motion of (0, 0) moves nothing.
const SHIFT_L: u32 = 0xffe1;
/// After the devices are made, the time clients get to bind them (keys sent before are lost:
/// measured 0.3 s too short, 0.5 s enough with GTK 3). Paid once per session, which lasts as
/// long as the backend.
const INPUT_SETTLE: Duration = Duration::from_millis(700);

/// The runtime every D-Bus call of these backends runs on (two threads, made once).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gui-dbus")
            .enable_all()
            .build()
            .expect("a tokio runtime for the gui backends' D-Bus calls")
    })
}

/// Starts `work` on the backends' runtime without waiting for it.
pub fn spawn(work: impl Future<Output = ()> + Send + 'static) {
    runtime().spawn(work);
}

/// Runs `work` on the backends' runtime and waits for it, at most `bound`; a timeout is an
/// error prefixed with `backend`. Safe to call from any thread, async tasks included: the wait
/// is a plain channel receive.
pub fn block_on<T: Send + 'static>(
    backend: &str,
    bound: Duration,
    what: &str,
    work: impl Future<Output = DisplayResult<T>> + Send + 'static,
) -> DisplayResult<T> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let task = runtime().spawn(async move {
        let _ = sender.send(work.await);
    });
    match receiver.recv_timeout(bound) {
        Ok(result) => result,
        Err(_) => {
            task.abort();
            Err(DisplayError(format!(
                "{backend}: {what} did not finish within {bound:?}"
            )))
        }
    }
}

/// A remote-desktop session's input events, each one D-Bus call.
pub trait InputSink: Send + Sync + 'static {
    /// Moves the pointer to (x, y) in screen coordinates; with `wait` false the reply need not
    /// be awaited (a service that keeps a connection's calls in order lets a later awaited call
    /// cover it; a sink whose service may reorder waits anyway).
    fn motion(&self, x: i32, y: i32, wait: bool) -> impl Future<Output = DisplayResult<()>> + Send;
    /// Moves the pointer by (0, 0): makes the virtual pointer without moving it.
    fn nudge(&self) -> impl Future<Output = DisplayResult<()>> + Send;
    /// Presses or releases a Linux button code; `wait` as for `motion`.
    fn button(
        &self,
        code: i32,
        pressed: bool,
        wait: bool,
    ) -> impl Future<Output = DisplayResult<()>> + Send;
    /// Scrolls `steps` notches on `axis` (0 vertical, 1 horizontal).
    fn axis(&self, axis: u32, steps: i32) -> impl Future<Output = DisplayResult<()>> + Send;
    /// Presses or releases a keysym; with `wait` false the reply is not awaited (the service
    /// handles a connection's calls in order, so a later awaited call covers it).
    fn keysym(
        &self,
        keysym: u32,
        pressed: bool,
        wait: bool,
    ) -> impl Future<Output = DisplayResult<()>> + Send;
}

/// Makes the session's virtual keyboard and pointer and gives clients time to bind them.
pub async fn prime(sink: &impl InputSink) -> DisplayResult<()> {
    sink.keysym(SHIFT_L, true, true).await?;
    sink.keysym(SHIFT_L, false, true).await?;
    sink.nudge().await?;
    tokio::time::sleep(INPUT_SETTLE).await;
    Ok(())
}

fn button_code(button: Button) -> i32 {
    match button {
        Button::Left => BTN_LEFT,
        Button::Right => BTN_RIGHT,
        Button::Middle => BTN_MIDDLE,
    }
}

pub async fn click(
    sink: &impl InputSink,
    at: Option<(i32, i32)>,
    button: Button,
    count: u32,
) -> DisplayResult<()> {
    // Sent in order without waiting for each reply, then the last awaited: one wait for the
    // service's main loop per click, not one per event.
    if let Some((x, y)) = at {
        sink.motion(x, y, count == 0).await?;
    }
    for n in 1..=count {
        sink.button(button_code(button), true, false).await?;
        sink.button(button_code(button), false, n == count).await?;
    }
    Ok(())
}

pub async fn drag(
    sink: &impl InputSink,
    from: (i32, i32),
    to: (i32, i32),
    button: Button,
) -> DisplayResult<()> {
    sink.motion(from.0, from.1, true).await?;
    sink.button(button_code(button), true, true).await?;
    const STEPS: i32 = 8;
    for step in 1..=STEPS {
        let x = from.0 + (to.0 - from.0) * step / STEPS;
        let y = from.1 + (to.1 - from.1) * step / STEPS;
        sink.motion(x, y, true).await?;
    }
    sink.button(button_code(button), false, true).await
}

pub async fn scroll(
    sink: &impl InputSink,
    at: Option<(i32, i32)>,
    dx: i32,
    dy: i32,
) -> DisplayResult<()> {
    if let Some((x, y)) = at {
        sink.motion(x, y, true).await?;
    }
    if dy != 0 {
        sink.axis(0, dy).await?;
    }
    if dx != 0 {
        sink.axis(1, dx).await?;
    }
    Ok(())
}

/// Sends key events in order without waiting for each reply, then waits for the last one.
pub async fn keys(sink: &impl InputSink, events: &[(u32, bool)]) -> DisplayResult<()> {
    let Some((last, before)) = events.split_last() else {
        return Ok(());
    };
    for &(keysym, pressed) in before {
        sink.keysym(keysym, pressed, false).await?;
    }
    sink.keysym(last.0, last.1, true).await
}

/// The press and release of each character of `text`, or which characters cannot be typed.
/// Mutter 43 (and KWin's fake input, which the portal also drives) types a keysym only if the
/// session's keyboard layout has a key for it (Mutter warns "No keycode found" and drops the
/// rest), and every layout has the printable ASCII characters; anything else is refused before
/// a key is sent, never typed in part. `through` names the call the keys go through.
pub fn text_events(text: &str, desktop: &str, through: &str) -> DisplayResult<Vec<(u32, bool)>> {
    let untypable: Vec<String> = text
        .chars()
        .filter(|c| !(c.is_ascii_graphic() || matches!(c, ' ' | '\n' | '\r' | '\t' | '\u{8}')))
        .map(|c| format!("{:?} (U+{:04X})", c, c as u32))
        .collect();
    if !untypable.is_empty() {
        return Err(DisplayError(format!(
            "on {desktop} the gui surface types printable ASCII, Return, Tab and BackSpace only: \
             {through} reaches only keys the session's layout has. Cannot type {}; nothing was \
             typed. For other text use `ax set_value` on the field",
            untypable.join(", ")
        )));
    }
    Ok(text
        .chars()
        .map(char_keysym)
        .flat_map(|keysym| [(keysym, true), (keysym, false)])
        .collect())
}

/// The events of a key combination: modifiers down, the key down and up, modifiers up.
pub fn combo_events(combo: &Combo) -> Vec<(u32, bool)> {
    combo
        .modifiers
        .iter()
        .map(|&m| (m, true))
        .chain([(combo.key, true), (combo.key, false)])
        .chain(combo.modifiers.iter().rev().map(|&m| (m, false)))
        .collect()
}

/// Windows as AT-SPI lists them, with ids that stay the same window across calls. Neither
/// Mutter nor the portal lists windows to clients, so apps without an accessibility tree are
/// not seen, and places are unknown (AT-SPI's extents are window-local on Wayland).
pub struct AtspiWindows {
    reader: Arc<WindowReader>,
    /// Window ids by AT-SPI accessible.
    ids: Mutex<HashMap<(String, String), u32>>,
}

impl AtspiWindows {
    pub fn new() -> AtspiWindows {
        AtspiWindows {
            reader: Arc::new(WindowReader::new()),
            ids: Mutex::new(HashMap::new()),
        }
    }

    /// The windows AT-SPI lists now; errors are prefixed with `backend`.
    pub fn windows(&self, backend: &'static str) -> DisplayResult<Vec<WindowInfo>> {
        let reader = self.reader.clone();
        let listed = block_on(
            backend,
            Duration::from_secs(3),
            "listing windows over AT-SPI",
            async move {
                reader
                    .windows(Instant::now() + Duration::from_millis(2500))
                    .await
                    .map_err(|err| DisplayError(format!("{backend}: {err}")))
            },
        )?;
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.retain(|key, _| listed.iter().any(|w| &w.key == key));
        let mut next = ids.values().max().copied().unwrap_or(0) + 1;
        Ok(listed
            .into_iter()
            .map(|w| {
                let id = *ids.entry(w.key.clone()).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
                WindowInfo {
                    id,
                    title: w.title,
                    app: w.app,
                    instance: String::new(),
                    pid: w.pid,
                    // Unknown: AT-SPI's extents are window-local on Wayland, and the compositor
                    // tells clients no window positions.
                    rect: Rect {
                        x: 0,
                        y: 0,
                        width: 0,
                        height: 0,
                    },
                    focused: w.active,
                    monitor: None,
                }
            })
            .collect())
    }

    /// The one window AT-SPI says is active; None when none is, or when several say so (keys
    /// are then refused: the backends that use this say the focus must be known).
    pub fn keyboard_target(&self, backend: &'static str) -> DisplayResult<Option<u32>> {
        let windows = self.windows(backend)?;
        let mut active = windows.iter().filter(|w| w.focused);
        Ok(match (active.next(), active.next()) {
            (Some(only), None) => Some(only.id),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_text_types_and_other_characters_are_refused_whole() {
        let typed = text_events("Hi!\n", "GNOME", "NotifyKeyboardKeysym").unwrap();
        let keysyms: Vec<u32> = typed.iter().filter(|e| e.1).map(|e| e.0).collect();
        assert_eq!(keysyms, vec!['H' as u32, 'i' as u32, '!' as u32, 0xff0d]);
        assert_eq!(typed.len(), 8, "each key pressed and released");
        let refused = text_events("café €", "GNOME", "NotifyKeyboardKeysym")
            .unwrap_err()
            .0;
        assert!(refused.contains("'é' (U+00E9)"), "{refused}");
        assert!(refused.contains("'€' (U+20AC)"), "{refused}");
        assert!(refused.contains("nothing was typed"), "{refused}");
    }

    #[test]
    fn a_combination_releases_its_modifiers_in_reverse() {
        let combo = Combo {
            modifiers: vec![0xffe3, 0xffe1],
            key: 'a' as u32,
        };
        assert_eq!(
            combo_events(&combo),
            vec![
                (0xffe3, true),
                (0xffe1, true),
                ('a' as u32, true),
                ('a' as u32, false),
                (0xffe1, false),
                (0xffe3, false)
            ]
        );
    }
}
