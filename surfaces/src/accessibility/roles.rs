//! The accessibility role and state vocabulary, the same on every OS: accesskit's `Role`
//! names, a state set whose names are AT-SPI's (so outlines and selectors read alike whichever
//! backend read the tree), and which states an outline shows by default.

use std::sync::OnceLock;

use accesskit::Role;

/// Declares the states once, in bit order: the enum, the list of all of them and their names.
macro_rules! states {
    ($($state:ident => $name:literal,)*) => {
        /// One state an element may be in. The order is AT-SPI's (`AtspiStateType`), so the
        /// AT-SPI backend takes a state set's two 32-bit words as they come off the bus.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum State {
            $($state,)*
        }

        /// Every state, in bit order.
        const ALL_STATES: &[State] = &[$(State::$state,)*];

        impl State {
            /// The state's name in outlines, selectors and `until` (AT-SPI's spelling).
            pub fn name(self) -> &'static str {
                match self {
                    $(State::$state => $name,)*
                }
            }
        }
    };
}

states! {
    Invalid => "invalid",
    Active => "active",
    Armed => "armed",
    Busy => "busy",
    Checked => "checked",
    Collapsed => "collapsed",
    Defunct => "defunct",
    Editable => "editable",
    Enabled => "enabled",
    Expandable => "expandable",
    Expanded => "expanded",
    Focusable => "focusable",
    Focused => "focused",
    HasTooltip => "has-tooltip",
    Horizontal => "horizontal",
    Iconified => "iconified",
    Modal => "modal",
    MultiLine => "multi-line",
    Multiselectable => "multiselectable",
    Opaque => "opaque",
    Pressed => "pressed",
    Resizable => "resizable",
    Selectable => "selectable",
    Selected => "selected",
    Sensitive => "sensitive",
    Showing => "showing",
    SingleLine => "single-line",
    Stale => "stale",
    Transient => "transient",
    Vertical => "vertical",
    Visible => "visible",
    ManagesDescendants => "manages-descendants",
    Indeterminate => "indeterminate",
    Required => "required",
    Truncated => "truncated",
    Animated => "animated",
    InvalidEntry => "invalid-entry",
    SupportsAutocompletion => "supports-autocompletion",
    SelectableText => "selectable-text",
    IsDefault => "is-default",
    Visited => "visited",
    Checkable => "checkable",
    HasPopup => "has-popup",
    ReadOnly => "read-only",
}

impl State {
    fn from_name(name: &str) -> Option<State> {
        ALL_STATES.iter().copied().find(|s| s.name() == name)
    }

    fn bit(self) -> u64 {
        1 << self as u8
    }
}

/// A set of [`State`]s, one bit each in AT-SPI's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StateSet(u64);

impl FromIterator<State> for StateSet {
    fn from_iter<I: IntoIterator<Item = State>>(states: I) -> StateSet {
        let mut set = StateSet::empty();
        for state in states {
            set.insert(state);
        }
        set
    }
}

impl StateSet {
    pub const fn empty() -> StateSet {
        StateSet(0)
    }

    /// The set AT-SPI's two state words (low, high) describe; bits past the last known state
    /// are dropped.
    pub fn from_bits(bits: u64) -> StateSet {
        StateSet(bits & ((1 << ALL_STATES.len()) - 1))
    }

    pub fn contains(self, state: State) -> bool {
        self.0 & state.bit() != 0
    }

    pub fn insert(&mut self, state: State) {
        self.0 |= state.bit();
    }

    /// The states in the set, in bit order.
    pub fn iter(self) -> impl Iterator<Item = State> {
        ALL_STATES
            .iter()
            .copied()
            .filter(move |s| self.contains(*s))
    }
}

/// accesskit's serialised name of a role (`button`, `checkBox`, `textInput`, ...).
pub fn role_name(role: Role) -> String {
    match serde_json::to_value(role) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{role:?}"),
    }
}

/// A role name folded for comparison: lower case without `_`, `-` or spaces, so `checkBox`,
/// `check_box` and AT-SPI's `check box` compare equal.
pub fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Every accesskit role name, folded and sorted: what selectors and `roles` accept on any OS
/// (each backend may accept its own native names besides).
pub fn accesskit_role_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = variant_names::<Role>().iter().map(|n| fold(n)).collect();
        names.sort();
        names.dedup();
        names
    })
}

/// The variant names serde knows for an enum (as serialised), read by asking serde to
/// deserialise one from a deserializer that only records the names it is offered. accesskit has
/// no list of its roles; this keeps ours whole when accesskit adds some.
fn variant_names<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    struct Recorder<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Recorder<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("only enums are read here"))
        }
        fn deserialize_enum<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = variants;
            Err(serde::de::Error::custom("names recorded"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
            ignored_any
        }
    }
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Recorder(&mut names));
    names
}

/// States worth a model's attention on every outline line; the rest only with `include: states`.
const KEY_STATES: &[State] = &[
    State::Focused,
    State::Focusable,
    State::Checked,
    State::Pressed,
    State::Selected,
    State::Expanded,
    State::Indeterminate,
    State::Modal,
    State::Active,
];

/// The states an outline line shows: the key states, plus `disabled` for widgets that are not
/// enabled (the sets hold the positive state; its absence is what matters).
pub fn key_states(states: StateSet, role: Role) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = KEY_STATES
        .iter()
        .filter(|state| states.contains(**state))
        .map(|state| state.name())
        .collect();
    if states.contains(State::Expandable) && !states.contains(State::Expanded) {
        out.push("collapsed");
    }
    let interactive = !matches!(
        role,
        Role::Pane
            | Role::GenericContainer
            | Role::Label
            | Role::Window
            | Role::Application
            | Role::Image
            | Role::Splitter
    );
    if interactive && !states.contains(State::Enabled) && !states.contains(State::Sensitive) {
        out.push("disabled");
    }
    out
}

/// Every state in the set, by name.
pub fn all_states(states: StateSet) -> Vec<&'static str> {
    states.iter().map(State::name).collect()
}

/// The state a selector's `[name]` refers to (`disabled` and `collapsed` are derived).
pub fn parse_state(name: &str) -> Option<StateQuery> {
    match name {
        "disabled" => Some(StateQuery::Disabled),
        "collapsed" => Some(StateQuery::Collapsed),
        _ => State::from_name(name).map(StateQuery::Is),
    }
}

/// A state as selectors test it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StateQuery {
    Is(State),
    Disabled,
    Collapsed,
}

impl StateQuery {
    pub fn holds(self, states: StateSet) -> bool {
        match self {
            StateQuery::Is(state) => states.contains(state),
            StateQuery::Disabled => {
                !states.contains(State::Enabled) && !states.contains(State::Sensitive)
            }
            StateQuery::Collapsed => {
                states.contains(State::Collapsed)
                    || (states.contains(State::Expandable) && !states.contains(State::Expanded))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesskit_names_are_all_listed() {
        let names = accesskit_role_names();
        for name in [
            "button",
            "checkbox",
            "textinput",
            "window",
            "menuitem",
            "unknown",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
        assert!(names.len() > 100, "only {} role names", names.len());
        assert_eq!(role_name(Role::CheckBox), "checkBox");
    }

    #[test]
    fn states_parse_by_name_and_iterate_in_bit_order() {
        assert_eq!(parse_state("focused"), Some(StateQuery::Is(State::Focused)));
        assert_eq!(
            parse_state("read-only"),
            Some(StateQuery::Is(State::ReadOnly))
        );
        assert_eq!(parse_state("disabled"), Some(StateQuery::Disabled));
        assert_eq!(parse_state("nonsense"), None);
        let mut set = StateSet::empty();
        set.insert(State::Showing);
        set.insert(State::Active);
        assert_eq!(all_states(set), ["active", "showing"]);
        assert_eq!(StateSet::from_bits(u64::MAX).iter().count(), 44);
    }
}
