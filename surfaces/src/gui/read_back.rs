//! Whether a gui act took effect: what the display and AT-SPI tell cheaply, read before the act
//! and again after it (at once when the element signals a change, else polled) until the
//! intended change shows or the readable state has been quiet for the settle wait (bounded by
//! the settle bound). The window list (appeared, closed, moved, resized, retitled, took focus),
//! the pointer, the element under a click and the focused field's text; never a screenshot
//! difference.

use std::sync::Arc;
use std::time::Instant;

use super::desktop::{Desktop, WindowInfo, blocking};
use crate::accessibility::read_back::{self, ElementView, Intent};
use crate::accessibility::{ElementHandle, ElementReader, ElementWatch};
use crate::kit::effect::{READ_BACK_BOUND, READ_BACK_FIRST_POLL, READ_BACK_POLL, READ_BACK_QUIET};

/// How long typed text that has not changed the focused field at all is waited for before the
/// quiet wait may end the read-back: an app busy with its keys shows them late, not never.
const TEXT_FIRST_CHANGE_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);
use crate::{Effect, EffectReport};

/// What an act meant to change, as far as a read-back can tell it.
#[derive(Debug, Clone)]
pub(super) enum Aim {
    /// The pointer at this point.
    Pointer(i32, i32),
    /// A click at this point (`None`: where the pointer is): the element there, and the
    /// windows.
    Click(Option<(i32, i32)>),
    /// Text typed into the focused field (`None`: a secret, never compared).
    Text(Option<String>),
    /// A key combo: the focused field, and the windows.
    Key,
    /// Something the windows may show (a drag, a scroll).
    Windows,
    /// This window active.
    Focus(u32),
}

/// The readable state around an act.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    /// id, title, place and focus of every window; `None` when they could not be read.
    windows: Option<Vec<WindowFacts>>,
    pointer: Option<(i32, i32)>,
    /// The element under the click, `Some(None)` once it is gone.
    element: Option<Option<ElementView>>,
    /// The focused field's text.
    text: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct WindowFacts {
    id: u32,
    title: String,
    place: (i32, i32, u32, u32),
    focused: bool,
}

impl WindowFacts {
    fn of(window: &WindowInfo) -> WindowFacts {
        WindowFacts {
            id: window.id,
            title: window.title.clone(),
            place: (
                window.rect.x,
                window.rect.y,
                window.rect.width,
                window.rect.height,
            ),
            focused: window.focused,
        }
    }

    fn named(&self) -> String {
        format!("window {} {:?}", self.id, self.title)
    }
}

/// What was read before the act, and where to read again.
pub(super) struct Before {
    aim: Aim,
    seen: Seen,
    /// A click where the windows were read and none lies under the point: nothing there can
    /// show it, so the first read after it is the answer (no quiet wait).
    on_no_window: bool,
    element: Option<ElementHandle>,
    field: Option<ElementHandle>,
    /// `field` is the field last typed into or clicked in the focused window, read because the
    /// app reports no focused field: only a change it shows confirms; no change proves nothing.
    field_remembered: bool,
    /// The process of the focused window when typing began: where a focus that moved on (a
    /// paragraph split by a line break, the next cell after Enter) is looked for again.
    focused_pid: Option<u32>,
    /// The change signals of a checkable element under a click, or of the field typed into,
    /// subscribed to before the act: they wake the reads after it as soon as the toolkit
    /// applies the change.
    watch: Option<ElementWatch>,
}

/// A blocking read of the display (see [`blocking`]).
async fn on_display<D: Desktop, T: Send + 'static>(
    conn: &Arc<D>,
    read: impl FnOnce(&D) -> T + Send + 'static,
) -> Option<T> {
    let conn = conn.clone();
    blocking(move || read(&conn)).await.ok()
}

/// The display's part of a read after the act: the windows and, when asked, the pointer.
pub(super) struct DisplayRead {
    windows: Option<Vec<WindowFacts>>,
    pointer: Option<(i32, i32)>,
}

fn display_read<D: Desktop>(conn: &D, wants_pointer: bool) -> DisplayRead {
    let pointer = if wants_pointer && conn.reads_cursor() {
        conn.cursor().ok()
    } else {
        None
    };
    DisplayRead {
        windows: window_facts(conn),
        pointer,
    }
}

fn window_facts<D: Desktop>(conn: &D) -> Option<Vec<WindowFacts>> {
    conn.windows()
        .ok()
        .map(|list| list.iter().map(WindowFacts::of).collect())
}

/// The window under a point (the focused one where windows overlap there, as `target_of`
/// picks it) and the focused window: (id, pid) of each.
type Target = Option<(u32, Option<u32>)>;

fn targets(windows: Option<&[WindowInfo]>, at: Option<(i32, i32)>) -> (Target, Target) {
    let Some(windows) = windows else {
        return (None, None);
    };
    let under = at.and_then(|(x, y)| {
        let under: Vec<&WindowInfo> = windows.iter().filter(|w| w.rect.contains(x, y)).collect();
        under.iter().find(|w| w.focused).or(under.last()).copied()
    });
    let focused = windows.iter().find(|w| w.focused);
    let target = |w: &WindowInfo| (w.id, w.pid);
    (under.map(target), focused.map(target))
}

impl Before {
    /// Reads what `aim` will be judged on, before the act.
    pub(super) async fn read<D: Desktop>(
        conn: &Arc<D>,
        reader: &ElementReader,
        aim: Aim,
    ) -> Before {
        let started = Instant::now();
        let deadline = started + READ_BACK_BOUND;
        let click = match aim {
            Aim::Click(at) => Some(at),
            _ => None,
        };
        let wants_field = matches!(aim, Aim::Text(_) | Aim::Key);
        let (windows, point, (under, focused), on_no_window) = on_display(conn, move |conn| {
            let point = match click {
                Some(Some(at)) => Some(at),
                Some(None) if conn.reads_cursor() => conn.cursor().ok(),
                _ => None,
            };
            let windows = conn.windows().ok();
            let on_no_window = match (point, &windows) {
                (Some((x, y)), Some(list)) if conn.places_known() => {
                    !list.iter().any(|w| w.rect.contains(x, y))
                }
                _ => false,
            };
            let facts = windows
                .as_ref()
                .map(|list| list.iter().map(WindowFacts::of).collect());
            (
                facts,
                point,
                targets(windows.as_deref(), point),
                on_no_window,
            )
        })
        .await
        .unwrap_or((None, None, (None, None), false));
        let focused_pid = focused.and_then(|(_, pid)| pid);
        let mut seen = Seen {
            windows,
            pointer: None,
            element: None,
            text: None,
        };
        let displayed = started.elapsed();
        let mut element = None;
        if let (Some(at), Some((window, Some(pid)))) = (point, under)
            && let Some((handle, view)) = reader.element_at(pid, at, deadline).await
        {
            seen.element = Some(Some(view));
            // The agent's keys go to the window clicked, most often to the element clicked.
            reader.remember_field(window, handle.clone());
            element = Some(handle);
        }
        let hit = started.elapsed();
        let mut field = None;
        let mut field_remembered = false;
        if wants_field && let Some((window, Some(pid))) = focused {
            if let Some((handle, text)) = reader.focused_text(pid, deadline).await {
                reader.remember_field(window, handle.clone());
                seen.text = Some(text);
                field = Some(handle);
            } else if let Some(handle) = reader.remembered_field(window)
                && let Some(text) = reader.text(&handle, deadline).await
            {
                seen.text = Some(text);
                field = Some(handle);
                field_remembered = true;
            }
        }
        let mut before = Before {
            aim,
            seen,
            on_no_window,
            element,
            field,
            field_remembered,
            focused_pid,
            watch: None,
        };
        // Subscribed to where a signal can wake the reads: a checkable element under a click,
        // or the field typed into.
        let watched = match before.expects_signal() {
            true => before.element.as_ref(),
            false => before.field.as_ref(),
        };
        if let Some(handle) = watched {
            before.watch = reader.watch(handle, deadline).await;
        }
        tracing::debug!(
            display_us = displayed.as_micros() as u64,
            element_us = (hit - displayed).as_micros() as u64,
            took_us = started.elapsed().as_micros() as u64,
            watched = before.watch.is_some(),
            "gui act read before"
        );
        before
    }

    /// What of the display is read again after the act, on the thread that acted (no hop of
    /// its own): the first read of [`Before::judge_after`].
    pub(super) fn display_after<D: Desktop>(&self, conn: &D) -> DisplayRead {
        display_read(conn, matches!(self.aim, Aim::Pointer(..)))
    }

    /// Reads again after the act until the intended change shows, or nothing readable has
    /// changed for the settle wait, within the settle bound; then judges. `first` is the
    /// display as read right after the act, if it was.
    pub(super) async fn judge_after<D: Desktop>(
        &mut self,
        conn: &Arc<D>,
        reader: &ElementReader,
        mut first: Option<DisplayRead>,
    ) -> EffectReport {
        let started = Instant::now();
        let deadline = started + READ_BACK_BOUND;
        let mut last: Option<Seen> = None;
        let mut last_change = started;
        // Read again soon at first (a toolkit applies most changes within a few milliseconds),
        // then less often, up to the settle wait's poll.
        let mut pause = READ_BACK_FIRST_POLL;
        let mut reads = 0;
        // An element whose change is expected signals it when the toolkit applies it: waiting
        // for that first spares the read that would most often find it not changed yet.
        let expects_signal = self.expects_signal();
        if let Some(watch) = self.watch.as_mut()
            && expects_signal
        {
            watch.changed_within(READ_BACK_POLL).await;
        }
        let report = loop {
            let now = self.read_again(conn, reader, deadline, first.take()).await;
            reads += 1;
            let report = self.judge(&now, started);
            if self.on_no_window {
                break report;
            }
            let intended = matches!(report.effect, Effect::Confirmed);
            // Typed text that has not shown at all yet may still be on its way: a busy app
            // (LibreOffice) takes its keys in its own time, so quiet means nothing until then.
            let text_untouched = matches!(self.aim, Aim::Text(_))
                && now.text.is_some()
                && now.text == self.seen.text
                && started.elapsed() < TEXT_FIRST_CHANGE_WAIT;
            if last.as_ref() != Some(&now) {
                last_change = Instant::now();
                last = Some(now);
            }
            if intended
                || (last_change.elapsed() >= READ_BACK_QUIET && !text_untouched)
                || started.elapsed() + READ_BACK_POLL >= READ_BACK_BOUND
            {
                break report;
            }
            match self.watch.as_mut() {
                Some(watch) => watch.changed_within(pause).await,
                None => tokio::time::sleep(pause).await,
            }
            pause = (pause * 2).min(READ_BACK_POLL);
        };
        let report = match (&self.aim, report.effect) {
            (Aim::Text(typed), effect) if effect != Effect::Confirmed => self
                .with_moved_focus(reader, deadline, typed.as_deref(), last.as_ref(), started)
                .await
                .unwrap_or(report),
            _ => report,
        };
        tracing::debug!(
            effect = ?report.effect,
            reads,
            watched = self.watch.is_some(),
            change_signals = self.watch.as_mut().map_or(0, ElementWatch::signals),
            took_us = started.elapsed().as_micros() as u64,
            "gui act read back"
        );
        report
    }

    /// Typed text judged again where the focus moved on while typing: the field typed into
    /// and the field that has the focus now, read as one (a line break that split a paragraph
    /// into two, Enter that moved to the next cell). `None` when the focus did not move or the
    /// field it moved to cannot be read.
    async fn with_moved_focus(
        &self,
        reader: &ElementReader,
        deadline: Instant,
        typed: Option<&str>,
        last: Option<&Seen>,
        started: Instant,
    ) -> Option<EffectReport> {
        let (Some(before), Some(pid)) = (&self.seen.text, self.focused_pid) else {
            return None;
        };
        let (now_field, now_text) = reader.focused_text(pid, deadline).await?;
        if self.field.as_ref() == Some(&now_field) {
            return None;
        }
        let typed_into = last.and_then(|seen| seen.text.as_deref()).unwrap_or(before);
        let joined = format!("{typed_into}\n{now_text}");
        let within = format!("within {} ms", started.elapsed().as_millis());
        let report = text_landed(before, &joined, typed, &within);
        (report.effect == Effect::Confirmed).then(|| {
            EffectReport::new(
                Effect::Confirmed,
                format!(
                    "{}, read across the field typed into and the one the focus moved on to",
                    report.evidence
                ),
            )
        })
    }

    /// Whether the watched element is one whose intended change it would signal: a checkable,
    /// sensitive element under a click (its states change; text changes are not signalled).
    fn expects_signal(&self) -> bool {
        match (&self.aim, &self.seen.element) {
            (Aim::Click(_), Some(Some(view))) => view.checkable() && !view.insensitive(),
            _ => false,
        }
    }

    async fn read_again<D: Desktop>(
        &self,
        conn: &Arc<D>,
        reader: &ElementReader,
        deadline: Instant,
        display: Option<DisplayRead>,
    ) -> Seen {
        let DisplayRead { windows, pointer } = match display {
            Some(read) => read,
            None => {
                let wants_pointer = matches!(self.aim, Aim::Pointer(..));
                on_display(conn, move |conn| display_read(conn, wants_pointer))
                    .await
                    .unwrap_or(DisplayRead {
                        windows: None,
                        pointer: None,
                    })
            }
        };
        let element = match (&self.element, &self.seen.element) {
            // The change awaited shows in its states: one call, not the whole element.
            (Some(handle), Some(Some(before))) if self.expects_signal() => {
                reader.states(handle, deadline).await.map(|states| {
                    states.map(|states| ElementView {
                        states,
                        ..before.clone()
                    })
                })
            }
            (Some(handle), _) => reader.view(handle, deadline).await,
            (None, _) => None,
        };
        let text = match &self.field {
            Some(handle) => reader.text(handle, deadline).await,
            None => None,
        };
        Seen {
            windows,
            pointer,
            element,
            text,
        }
    }

    /// The effect shown by `after` against what was read before.
    fn judge(&self, after: &Seen, started: Instant) -> EffectReport {
        let within = format!("within {} ms", started.elapsed().as_millis());
        let windows = window_changes(self.seen.windows.as_deref(), after.windows.as_deref());
        match &self.aim {
            Aim::Pointer(x, y) => pointer_at((*x, *y), after.pointer),
            Aim::Focus(id) => focused(*id, after.windows.as_deref(), &within),
            Aim::Text(typed) => self.text_typed(typed.as_deref(), after, &windows, &within),
            Aim::Key => self.key_pressed(after, &windows, &within),
            Aim::Click(..) => self.clicked(after, &windows, &within),
            Aim::Windows if windows.is_empty() => nothing_readable(&within),
            Aim::Windows => windows_changed(&windows),
        }
    }

    /// Typed text: what the focused field read before and after, else what the windows show
    /// (never as confirmation: keys arrived somewhere, not that the text landed).
    fn text_typed(
        &self,
        typed: Option<&str>,
        after: &Seen,
        windows: &[String],
        within: &str,
    ) -> EffectReport {
        if let (Some(before), Some(now)) = (&self.seen.text, &after.text) {
            let report = text_landed(before, now, typed, within);
            let report = match typed {
                Some(typed) => submitted(typed, report),
                None => report,
            };
            return match (self.field_remembered, report.effect) {
                (false, _) => report,
                (true, Effect::Confirmed) => EffectReport::new(
                    Effect::Confirmed,
                    format!(
                        "{} (the field last typed into or clicked in this window: the app reports no focused field)",
                        report.evidence
                    ),
                ),
                (true, _) => EffectReport::new(
                    Effect::Unverifiable,
                    format!(
                        "the app reports no focused field, and the field last typed into or clicked in this window does not show the text ({})",
                        report.evidence
                    ),
                ),
            };
        }
        let seen = if windows.is_empty() {
            format!("no window appeared, closed, moved or took focus {within}")
        } else {
            format!("meanwhile {}", windows.join("; "))
        };
        EffectReport::new(
            Effect::Unverifiable,
            format!("no focused field could be read through AT-SPI; {seen}"),
        )
    }

    /// A key combo: a window that changed, else the focused field's text that changed.
    fn key_pressed(&self, after: &Seen, windows: &[String], within: &str) -> EffectReport {
        if !windows.is_empty() {
            return windows_changed(windows);
        }
        if let (Some(before), Some(now)) = (&self.seen.text, &after.text)
            && before != now
        {
            return EffectReport::new(Effect::Confirmed, "the focused field's text changed");
        }
        EffectReport::new(
            Effect::Unverifiable,
            format!(
                "nothing readable shows it: no window appeared, closed, moved, was retitled or \
                 took focus {within}{}",
                if self.seen.text.is_some() {
                    ", and the focused field's text did not change"
                } else {
                    ""
                }
            ),
        )
    }

    /// A click: the element under the point judged as pressed, else the windows that changed.
    fn clicked(&self, after: &Seen, windows: &[String], within: &str) -> EffectReport {
        let element = match (&self.seen.element, &after.element) {
            (Some(Some(before)), Some(now)) => {
                Some(read_back::judge(Intent::Press, before, now.as_ref(), true))
            }
            _ => None,
        };
        match element {
            Some(report) if report.effect == Effect::Confirmed => report,
            _ if !windows.is_empty() => windows_changed(windows),
            Some(report) => EffectReport::new(
                report.effect,
                format!("{}; no window changed {within}", report.evidence),
            ),
            None if self.on_no_window => EffectReport::new(
                Effect::Unverifiable,
                "no window lies under the point, so nothing readable there can show the click; \
                 no window appeared, closed, moved, was retitled or took focus right after it",
            ),
            None => nothing_readable(within),
        }
    }
}

/// A pointer move: where the pointer reads now (`None`: the backend cannot read it).
fn pointer_at((x, y): (i32, i32), now: Option<(i32, i32)>) -> EffectReport {
    match now {
        Some(at) if at == (x, y) => {
            EffectReport::new(Effect::Confirmed, format!("the pointer reads ({x},{y})"))
        }
        Some((ax, ay)) => EffectReport::new(
            Effect::SuspectedNoop,
            format!("the pointer reads ({ax},{ay}), not ({x},{y})"),
        ),
        None => EffectReport::new(
            Effect::Unverifiable,
            "the pointer's position cannot be read on this backend",
        ),
    }
}

/// A focus: which window is active now (`None`: the windows could not be read back).
fn focused(id: u32, windows: Option<&[WindowFacts]>, within: &str) -> EffectReport {
    let Some(list) = windows else {
        return EffectReport::new(Effect::Unverifiable, "the windows could not be read back");
    };
    match list.iter().find(|w| w.focused) {
        Some(w) if w.id == id => EffectReport::new(
            Effect::Confirmed,
            format!("{} is the active window", w.named()),
        ),
        Some(w) => EffectReport::new(
            Effect::SuspectedNoop,
            format!("the active window is {}, not window {id}", w.named()),
        ),
        None => EffectReport::new(
            Effect::SuspectedNoop,
            format!("no window is active {within}, not window {id}"),
        ),
    }
}

/// What the windows show, as confirmation of an act that changes windows.
fn windows_changed(windows: &[String]) -> EffectReport {
    EffectReport::new(Effect::Confirmed, windows.join("; "))
}

fn nothing_readable(within: &str) -> EffectReport {
    EffectReport::new(
        Effect::Unverifiable,
        format!(
            "nothing readable shows it: no accessible element there, and no window appeared, \
             closed, moved, was retitled or took focus {within}"
        ),
    )
}

/// Whether typed text landed in the focused field, read before and after (never quoting it:
/// the text may be private).
fn text_landed(before: &str, now: &str, typed: Option<&str>, within: &str) -> EffectReport {
    let Some(typed) = typed else {
        // A secret: only whether the field changed is told.
        return if now != before {
            EffectReport::new(Effect::Confirmed, "the focused field changed")
        } else {
            EffectReport::new(
                Effect::SuspectedNoop,
                format!("the focused field did not change {within}"),
            )
        };
    };
    if now == before {
        return EffectReport::new(
            Effect::SuspectedNoop,
            format!("the focused field's text did not change {within}"),
        );
    }
    let (typed_read, now_read) = (as_fields_read(typed), as_fields_read(now));
    if typed_read.is_empty() || now_read.contains(&typed_read) {
        return EffectReport::new(
            Effect::Confirmed,
            if now_read.ends_with(&typed_read) {
                "the focused field's text ends with the typed text"
            } else {
                "the focused field's text holds the typed text"
            },
        );
    }
    // Apps correct what is typed (LibreOffice capitalises a sentence's first letter).
    if now_read.to_lowercase().contains(&typed_read.to_lowercase()) {
        return EffectReport::new(
            Effect::Confirmed,
            "the focused field's text holds the typed text, with the letter case the app gave it",
        );
    }
    // Line breaks and tabs may move the focus or end the field instead of landing: each run of
    // text between them is looked for, in order.
    let typed_lower = typed_read.to_lowercase();
    let runs: Vec<&str> = typed_lower
        .split(|c: char| c.is_control())
        .filter(|run| !run.is_empty())
        .collect();
    if runs.len() > 1 && holds_in_order(&now_read.to_lowercase(), &runs) {
        return EffectReport::new(
            Effect::Confirmed,
            "the focused field's text holds each line of the typed text in order, without the \
             line breaks or tabs between them",
        );
    }
    // A spreadsheet cell shows a formula's result, never the formula typed.
    if typed_read.trim_start().starts_with('=') {
        return EffectReport::new(
            Effect::Unverifiable,
            "the focused field changed, but it shows a formula's result, not what was typed; \
             read the cell's value to check it",
        );
    }
    let printable: String = typed_read.chars().filter(|c| !c.is_control()).collect();
    let now_printable: String = now_read.chars().filter(|c| !c.is_control()).collect();
    let landed = (1..printable.chars().count())
        .rev()
        .map(|n| printable.chars().take(n).collect::<String>())
        .find(|head| now_printable.ends_with(head.as_str()))
        .map_or(0, |head| head.chars().count());
    EffectReport::new(
        Effect::Partial,
        if landed > 0 {
            format!(
                "the focused field's text ends with the first {landed} of {} typed characters",
                printable.chars().count()
            )
        } else {
            "the focused field's text changed but does not hold the typed text".to_string()
        },
    )
}

/// Typed text that ended with a line break into a field that does not hold it afterwards: the
/// break may have submitted the field, which the app then rewrote (a browser's address bar
/// shows the page's address as it formats it), so what it holds says nothing either way.
fn submitted(typed: &str, report: EffectReport) -> EffectReport {
    if report.effect == Effect::Partial && typed.trim_end_matches([' ', '\t']).ends_with('\n') {
        EffectReport::new(
            Effect::Unverifiable,
            "the focused field's text changed but does not hold the typed text, which ended \
             with a line break: the field may have been submitted and rewritten",
        )
    } else {
        report
    }
}

/// Text as fields read it back: `\r\n` and `\r` as `\n`, the paragraph separator (U+2029)
/// as `\n`, and the object replacement character (U+FFFC, an embedded object) left out.
fn as_fields_read(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .filter_map(|c| match c {
            '\r' | '\u{2029}' => Some('\n'),
            '\u{fffc}' => None,
            c => Some(c),
        })
        .collect()
}

/// Whether `text` holds every one of `runs`, each after the one before it.
fn holds_in_order(text: &str, runs: &[&str]) -> bool {
    let mut rest = text;
    for run in runs {
        match rest.find(run) {
            Some(at) => rest = &rest[at + run.len()..],
            None => return false,
        }
    }
    true
}

/// What changed between two window lists, in words; empty when nothing did or either is
/// unknown.
fn window_changes(before: Option<&[WindowFacts]>, after: Option<&[WindowFacts]>) -> Vec<String> {
    let (Some(before), Some(after)) = (before, after) else {
        return Vec::new();
    };
    let mut changes = Vec::new();
    for w in after {
        match before.iter().find(|b| b.id == w.id) {
            None => changes.push(format!("{} appeared", w.named())),
            Some(b) => {
                if b.title != w.title {
                    changes.push(format!(
                        "window {} is now titled {:?} (was {:?})",
                        w.id, w.title, b.title
                    ));
                }
                if (b.place.0, b.place.1) != (w.place.0, w.place.1) {
                    changes.push(format!(
                        "{} moved to ({},{})",
                        w.named(),
                        w.place.0,
                        w.place.1
                    ));
                }
                if (b.place.2, b.place.3) != (w.place.2, w.place.3) {
                    changes.push(format!(
                        "{} was resized to {}x{}",
                        w.named(),
                        w.place.2,
                        w.place.3
                    ));
                }
                if w.focused && !b.focused {
                    changes.push(format!("{} took the focus", w.named()));
                }
            }
        }
    }
    for b in before
        .iter()
        .filter(|b| !after.iter().any(|w| w.id == b.id))
    {
        changes.push(format!("{} closed", b.named()));
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u32, title: &str, focused: bool) -> WindowFacts {
        WindowFacts {
            id,
            title: title.into(),
            place: (0, 0, 100, 100),
            focused,
        }
    }

    #[test]
    fn a_window_that_appeared_and_took_the_focus_is_told() {
        let before = [window(1, "Main", true)];
        let after = [window(1, "Main", false), window(2, "Open File", true)];
        assert_eq!(
            window_changes(Some(&before), Some(&after)),
            ["window 2 \"Open File\" appeared"]
        );
        assert!(window_changes(Some(&before), Some(&before)).is_empty());
        assert!(window_changes(None, Some(&after)).is_empty());
    }

    #[test]
    fn typing_where_no_field_reads_is_unverifiable_even_when_a_window_changed() {
        let seen = |windows: Vec<WindowFacts>| Seen {
            windows: Some(windows),
            pointer: None,
            element: None,
            text: None,
        };
        let typed = Before {
            aim: Aim::Text(Some("hello".into())),
            seen: seen(vec![window(1, "Main", true), window(2, "Old", false)]),
            on_no_window: false,
            element: None,
            field: None,
            field_remembered: false,
            focused_pid: None,
            watch: None,
        };
        // The focus moved and a window closed: keys went somewhere, the text may not have.
        let after = seen(vec![window(1, "Main", false)]);
        let report = typed.judge(&after, Instant::now());
        assert_eq!(report.effect, Effect::Unverifiable, "{report:?}");
        assert!(report.evidence.contains("closed"), "{report:?}");
        assert!(!report.evidence.contains("hello"), "{report:?}");
        // A key combo is judged on the windows: that a window closed is what it shows.
        let key = Before {
            aim: Aim::Key,
            ..typed
        };
        assert_eq!(key.judge(&after, Instant::now()).effect, Effect::Confirmed);
    }

    #[test]
    fn typed_text_is_judged_without_quoting_it() {
        let ok = text_landed("ab", "abhello", Some("hello"), "within 5 ms");
        assert_eq!(ok.effect, Effect::Confirmed);
        assert!(!ok.evidence.contains("hello"));
        let part = text_landed("", "hel", Some("hello"), "within 5 ms");
        assert_eq!(part.effect, Effect::Partial, "{part:?}");
        assert!(part.evidence.contains("first 3 of 5"), "{part:?}");
        let none = text_landed("x", "x", Some("hello"), "within 5 ms");
        assert_eq!(none.effect, Effect::SuspectedNoop);
        // Several lines land as typed in a text view, and line by line in a field that takes
        // no line breaks; a CRLF field and a paragraph separator read as line breaks too.
        let lines = text_landed("", "one\ntwo\n", Some("one\ntwo\n"), "within 5 ms");
        assert_eq!(lines.effect, Effect::Confirmed, "{lines:?}");
        let crlf = text_landed("", "one\r\ntwo", Some("one\ntwo"), "within 5 ms");
        assert_eq!(crlf.effect, Effect::Confirmed, "{crlf:?}");
        let paragraphs = text_landed("", "one\u{2029}two", Some("one\ntwo"), "within 5 ms");
        assert_eq!(paragraphs.effect, Effect::Confirmed, "{paragraphs:?}");
        let flat = text_landed("", "onetwo", Some("one\ntwo"), "within 5 ms");
        assert_eq!(flat.effect, Effect::Confirmed, "{flat:?}");
        assert!(flat.evidence.contains("each line"), "{flat:?}");
        // Out of order, or the second line missing, is not what was typed.
        let swapped = text_landed("", "two one", Some("one\ntwo"), "within 5 ms");
        assert_ne!(swapped.effect, Effect::Confirmed, "{swapped:?}");
        // A line break that submitted a field the app then rewrote says nothing either way.
        let rewritten = text_landed("", "example.org/a", Some("http://example.org/a\n"), "");
        assert_eq!(rewritten.effect, Effect::Partial, "{rewritten:?}");
        let told = submitted("http://example.org/a\n", rewritten);
        assert_eq!(told.effect, Effect::Unverifiable, "{told:?}");
        let half = text_landed("", "one", Some("one\ntwo"), "within 5 ms");
        assert_eq!(half.effect, Effect::Partial, "{half:?}");
        let secret = text_landed("", "s3cret", None, "within 5 ms");
        assert_eq!(secret.effect, Effect::Confirmed);
        assert_eq!(secret.evidence, "the focused field changed");
    }
}
