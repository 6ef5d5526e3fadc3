//! Whether an action on an element took effect, judged from the element as read before and
//! after it: its states, value and name, or its going away. Shared by `ax act` and by the gui
//! surface's read-back of the element under a click (pure, so unit-tested here). Also how a name
//! is quoted, in an element's label here and on `ax` outline lines alike.

use accesskit::Role;

use super::roles::{State, StateSet, role_name};
use crate::{Effect, EffectReport};

/// Longest name or value shown on an outline line.
const TEXT_LIMIT: usize = 120;

/// Quotes a name for an outline line, shortened and on one line.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(TEXT_LIMIT) + 2);
    out.push('"');
    for (n, c) in text.chars().enumerate() {
        if n == TEXT_LIMIT {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One element as read before or after an act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementView {
    pub role: Role,
    pub name: String,
    pub states: StateSet,
    pub value: Option<String>,
}

/// What the act meant to do to the element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// A press, activation or pointer click: its change is the element's to say.
    Press,
    /// A toggle: a checkable element's state flips.
    Toggle,
    /// The element takes the keyboard focus.
    Focus,
    /// Selected, expanded or collapsed, scrolled into view: the toolkit's own wait already ran.
    State,
}

/// States that come and go with any pointer press or focus move, and so say nothing of what a
/// press achieved.
const INCIDENTAL: &[State] = &[
    State::Focused,
    State::Armed,
    State::Active,
    State::Showing,
    State::Visible,
    State::SelectableText,
];

impl ElementView {
    /// `checkBox "Bold"`, as outlines name it.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            role_name(self.role)
        } else {
            format!("{} {}", role_name(self.role), quote(&self.name))
        }
    }

    /// Whether a press flips one of its states (a check box, a radio button, a toggle button).
    pub fn checkable(&self) -> bool {
        matches!(
            self.role,
            Role::CheckBox
                | Role::RadioButton
                | Role::Switch
                | Role::MenuItemCheckBox
                | Role::MenuItemRadio
        ) || self.states.contains(State::Checkable)
            || self.states.contains(State::Checked)
            || self.states.contains(State::Pressed)
    }

    /// Whether the toolkit would take input on it at all.
    pub fn insensitive(&self) -> bool {
        !self.states.contains(State::Enabled) && !self.states.contains(State::Sensitive)
    }

    /// Whether the intended change of `intent` could show on this element: then a read-back
    /// waits (bounded) for it, and its absence is a suspected no-op rather than unverifiable.
    pub fn shows(&self, intent: Intent) -> bool {
        match intent {
            Intent::Press => self.checkable() || self.insensitive(),
            Intent::Toggle | Intent::Focus | Intent::State => true,
        }
    }
}

/// The states gained and lost between two reads, by name, leaving out the incidental ones unless
/// the intent is the focus.
fn state_changes(
    before: StateSet,
    after: StateSet,
    intent: Intent,
) -> (Vec<&'static str>, Vec<&'static str>) {
    let counts = |state: &State| intent == Intent::Focus || !INCIDENTAL.contains(state);
    let gained = after
        .iter()
        .filter(|s| !before.contains(*s) && counts(s))
        .map(State::name)
        .collect();
    let lost = before
        .iter()
        .filter(|s| !after.contains(*s) && counts(s))
        .map(State::name)
        .collect();
    (gained, lost)
}

/// The effect of an act on an element read before it (`before`) and after it (`after`, `None`
/// when it went away). `done`: the toolkit took the action.
pub fn judge(
    intent: Intent,
    before: &ElementView,
    after: Option<&ElementView>,
    done: bool,
) -> EffectReport {
    let label = before.label();
    let Some(after) = after else {
        return EffectReport::new(
            Effect::Confirmed,
            format!("{label} went away after the action (its window closed or it was removed)"),
        );
    };
    let (gained, lost) = state_changes(before.states, after.states, intent);
    let mut changes = Vec::new();
    if !gained.is_empty() {
        changes.push(format!("reads {}", gained.join(", ")));
    }
    if !lost.is_empty() {
        changes.push(format!("no longer reads {}", lost.join(", ")));
    }
    if before.name != after.name {
        changes.push(format!("is now named {}", quote(&after.name)));
    }
    if before.value != after.value {
        changes.push("shows a new value".to_string());
    }
    if !changes.is_empty() {
        return EffectReport::new(
            Effect::Confirmed,
            format!("{label} {} (it did not before)", changes.join("; ")),
        );
    }
    if intent == Intent::Focus && after.states.contains(State::Focused) {
        return EffectReport::new(Effect::Confirmed, format!("{label} reads focused"));
    }
    // States any press or focus move changes (`focused`, `armed` ...) are told, not counted.
    let incidental: Vec<String> = after
        .states
        .iter()
        .filter(|s| !before.states.contains(*s))
        .map(|s| format!("+{}", s.name()))
        .chain(
            before
                .states
                .iter()
                .filter(|s| !after.states.contains(*s))
                .map(|s| format!("-{}", s.name())),
        )
        .collect();
    let nothing = match incidental.is_empty() {
        true => "nothing about it changed".to_string(),
        false => format!(
            "nothing about it changed but states any press or focus move changes ({})",
            incidental.join(", ")
        ),
    };
    if before.insensitive() {
        return EffectReport::new(
            Effect::SuspectedNoop,
            format!("{label} is insensitive and {nothing}"),
        );
    }
    if !done {
        return EffectReport::new(
            Effect::SuspectedNoop,
            format!("the app refused the action on {label}, and {nothing}"),
        );
    }
    if before.shows(intent) {
        return EffectReport::new(
            Effect::SuspectedNoop,
            format!("{label}: {nothing} (its value and name read as before)"),
        );
    }
    EffectReport::new(
        Effect::Unverifiable,
        format!("{label} has no state this action changes, and {nothing}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(role: Role, name: &str, states: &[State]) -> ElementView {
        let mut set = StateSet::empty();
        for state in states {
            set.insert(*state);
        }
        ElementView {
            role,
            name: name.into(),
            states: set,
            value: None,
        }
    }

    #[test]
    fn a_check_box_that_reads_checked_is_confirmed() {
        let before = view(Role::CheckBox, "Bold", &[State::Enabled, State::Sensitive]);
        let after = view(
            Role::CheckBox,
            "Bold",
            &[
                State::Enabled,
                State::Sensitive,
                State::Checked,
                State::Focused,
            ],
        );
        let report = judge(Intent::Press, &before, Some(&after), true);
        assert_eq!(report.effect, Effect::Confirmed);
        assert_eq!(
            report.evidence,
            "checkBox \"Bold\" reads checked (it did not before)"
        );
    }

    #[test]
    fn states_any_press_changes_are_told_and_not_counted() {
        let before = view(Role::MenuItem, "File", &[State::Enabled, State::Sensitive]);
        let after = view(
            Role::MenuItem,
            "File",
            &[State::Enabled, State::Sensitive, State::Focused],
        );
        let report = judge(Intent::Press, &before, Some(&after), true);
        assert_eq!(report.effect, Effect::Unverifiable, "{report:?}");
        assert!(
            report
                .evidence
                .contains("but states any press or focus move changes (+focused)"),
            "{report:?}"
        );
    }

    #[test]
    fn an_insensitive_button_that_did_not_change_is_a_suspected_noop() {
        let before = view(Role::Button, "Disabled", &[State::Showing]);
        let report = judge(Intent::Press, &before, Some(&before.clone()), false);
        assert_eq!(report.effect, Effect::SuspectedNoop, "{report:?}");
    }

    #[test]
    fn a_push_button_whose_effect_lies_elsewhere_is_unverifiable() {
        let before = view(
            Role::Button,
            "Say Hello",
            &[State::Enabled, State::Sensitive],
        );
        let mut after = before.clone();
        after.states.insert(State::Focused);
        let report = judge(Intent::Press, &before, Some(&after), true);
        assert_eq!(report.effect, Effect::Unverifiable, "{report:?}");
    }

    #[test]
    fn an_element_that_went_away_is_confirmed_and_focus_counts_for_focus() {
        let before = view(Role::Button, "Close", &[State::Enabled]);
        assert_eq!(
            judge(Intent::Press, &before, None, true).effect,
            Effect::Confirmed
        );
        let mut after = before.clone();
        after.states.insert(State::Focused);
        assert_eq!(
            judge(Intent::Focus, &before, Some(&after), true).effect,
            Effect::Confirmed
        );
    }
}
