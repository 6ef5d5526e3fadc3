//! macOS accessibility vocabulary, without touching the OS: AXRole/AXSubrole mapped onto
//! accesskit's `Role` (so macOS and Linux trees read alike), AX attributes onto the shared
//! states, and which AX actions carry out each `ax act` action. Pure, so it is unit-tested on
//! every platform.

use accesskit::Role;

use crate::accessibility::roles::{State, StateSet};

/// The accesskit role for an AXRole, refined by its AXSubrole.
pub fn map_role(role: &str, subrole: Option<&str>) -> Role {
    match (role, subrole.unwrap_or("")) {
        ("AXApplication", _) => Role::Application,
        ("AXWindow", "AXDialog" | "AXSystemDialog" | "AXFloatingWindow") => Role::Dialog,
        ("AXWindow", _) => Role::Window,
        ("AXSheet", _) => Role::Dialog,
        ("AXDrawer" | "AXSplitGroup", _) => Role::Pane,
        ("AXButton", _) | ("AXMenuButton", _) | ("AXDockItem", _) => Role::Button,
        ("AXCheckBox", "AXSwitch" | "AXToggle") => Role::Switch,
        ("AXCheckBox", _) => Role::CheckBox,
        ("AXRadioButton", "AXTabButton") => Role::Tab,
        ("AXRadioButton", _) => Role::RadioButton,
        ("AXRadioGroup", _) => Role::RadioGroup,
        ("AXTabGroup", _) => Role::TabList,
        ("AXTextField", "AXSecureTextField") => Role::PasswordInput,
        ("AXTextField", "AXSearchField") => Role::SearchInput,
        ("AXTextField", _) => Role::TextInput,
        ("AXTextArea", _) => Role::MultilineTextInput,
        ("AXComboBox", _) => Role::EditableComboBox,
        ("AXPopUpButton", _) => Role::ComboBox,
        ("AXStaticText", _) => Role::Label,
        ("AXHeading", _) => Role::Heading,
        ("AXLink", _) => Role::Link,
        ("AXImage", _) => Role::Image,
        ("AXGroup", _) => Role::Group,
        ("AXLayoutArea" | "AXLayoutItem" | "AXMatte" | "AXGrowArea", _) => Role::GenericContainer,
        ("AXScrollArea", _) => Role::ScrollView,
        ("AXScrollBar", _) => Role::ScrollBar,
        ("AXSlider", _) => Role::Slider,
        ("AXIncrementor" | "AXStepper", _) => Role::SpinButton,
        ("AXProgressIndicator" | "AXBusyIndicator", _) => Role::ProgressIndicator,
        ("AXLevelIndicator" | "AXRelevanceIndicator", _) => Role::Meter,
        ("AXMenuBar", _) => Role::MenuBar,
        ("AXMenuBarItem", _) => Role::MenuItem,
        ("AXMenu", _) => Role::Menu,
        ("AXMenuItem", _) => Role::MenuItem,
        ("AXToolbar", _) => Role::Toolbar,
        ("AXTable", _) => Role::Table,
        ("AXGrid", _) => Role::Grid,
        ("AXOutline" | "AXBrowser", _) => Role::Tree,
        ("AXRow", "AXOutlineRow") => Role::TreeItem,
        ("AXRow", _) => Role::Row,
        ("AXColumn", _) => Role::GenericContainer,
        ("AXCell", _) => Role::Cell,
        ("AXList", _) => Role::List,
        ("AXSplitter", _) => Role::Splitter,
        ("AXDisclosureTriangle", _) => Role::DisclosureTriangle,
        ("AXWebArea", _) => Role::RootWebArea,
        ("AXColorWell", _) => Role::ColorWell,
        ("AXDateField" | "AXTimeField", _) => Role::DateInput,
        ("AXHelpTag", _) => Role::Tooltip,
        _ => Role::Unknown,
    }
}

/// What was read of an element, as the states are derived from it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts {
    /// AXEnabled (absent on elements that cannot be disabled).
    pub enabled: Option<bool>,
    pub focused: bool,
    /// AXFocused is settable.
    pub focusable: bool,
    /// AXValue of a checkbox, switch or radio button: 0, 1, or 2 (mixed).
    pub check: Option<i64>,
    pub selected: bool,
    /// AXExpanded (or AXDisclosing for disclosure triangles and outline rows).
    pub expanded: Option<bool>,
    /// AXMain of a window, or AXFrontmost of an app.
    pub active: bool,
    pub modal: bool,
    pub editable: bool,
    pub multiline: bool,
}

/// The states an element's facts amount to.
pub fn states(facts: Facts) -> StateSet {
    let mut set = StateSet::empty();
    let mut add = |on: bool, state: State| {
        if on {
            set.insert(state);
        }
    };
    let enabled = facts.enabled != Some(false);
    add(enabled, State::Enabled);
    add(enabled, State::Sensitive);
    add(facts.focused, State::Focused);
    add(facts.focusable, State::Focusable);
    add(facts.check.is_some(), State::Checkable);
    add(facts.check == Some(1), State::Checked);
    add(facts.check == Some(2), State::Indeterminate);
    add(facts.selected, State::Selected);
    add(facts.expanded.is_some(), State::Expandable);
    add(facts.expanded == Some(true), State::Expanded);
    add(facts.expanded == Some(false), State::Collapsed);
    add(facts.active, State::Active);
    add(facts.modal, State::Modal);
    add(facts.editable, State::Editable);
    add(facts.multiline, State::MultiLine);
    add(facts.editable && !facts.multiline, State::SingleLine);
    add(true, State::Visible);
    add(true, State::Showing);
    set
}

/// Whether an AXRole holds a checked state in its AXValue.
pub fn is_checkable(role: &str) -> bool {
    matches!(role, "AXCheckBox" | "AXRadioButton" | "AXMenuItem")
}

/// Whether an AXRole is text a person edits.
pub fn is_text_input(role: &str) -> bool {
    matches!(role, "AXTextField" | "AXTextArea" | "AXComboBox")
}

/// An AX action name as outlines show it: `AXPress` → `press`, `AXShowMenu` → `showMenu`.
pub fn action_label(name: &str) -> String {
    let bare = name.strip_prefix("AX").unwrap_or(name);
    let mut chars = bare.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The AX actions that carry out `press`, `activate` and `toggle`, in order of preference.
pub fn press_actions(what: &str) -> &'static [&'static str] {
    match what {
        "activate" => &["AXConfirm", "AXPress", "AXPick", "AXOpen"],
        "toggle" => &["AXPress", "AXPick"],
        _ => &["AXPress", "AXConfirm", "AXPick", "AXOpen", "AXShowMenu"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accessibility::roles::role_name;

    #[test]
    fn ax_roles_read_like_the_linux_ones() {
        let name = |role, sub| role_name(map_role(role, sub));
        assert_eq!(name("AXButton", None), "button");
        assert_eq!(name("AXCheckBox", None), "checkBox");
        assert_eq!(name("AXCheckBox", Some("AXSwitch")), "switch");
        assert_eq!(name("AXTextField", None), "textInput");
        assert_eq!(
            name("AXTextField", Some("AXSecureTextField")),
            "passwordInput"
        );
        assert_eq!(name("AXTextArea", None), "multilineTextInput");
        assert_eq!(name("AXWindow", Some("AXStandardWindow")), "window");
        assert_eq!(name("AXWindow", Some("AXDialog")), "dialog");
        assert_eq!(name("AXRadioButton", Some("AXTabButton")), "tab");
        assert_eq!(name("AXMenuItem", None), "menuItem");
        assert_eq!(name("AXStaticText", None), "label");
        assert_eq!(name("AXPopUpButton", None), "comboBox");
        assert_eq!(name("AXRow", Some("AXOutlineRow")), "treeItem");
        assert_eq!(name("AXSomethingNew", None), "unknown");
    }

    #[test]
    fn facts_become_the_states_selectors_test() {
        let set = states(Facts {
            enabled: Some(true),
            focused: true,
            focusable: true,
            check: Some(1),
            ..Facts::default()
        });
        for state in [
            State::Enabled,
            State::Focused,
            State::Focusable,
            State::Checked,
        ] {
            assert!(set.contains(state), "{state:?}");
        }
        let disabled = states(Facts {
            enabled: Some(false),
            expanded: Some(false),
            ..Facts::default()
        });
        assert!(!disabled.contains(State::Enabled) && !disabled.contains(State::Sensitive));
        assert!(disabled.contains(State::Expandable) && !disabled.contains(State::Expanded));
        let mixed = states(Facts {
            check: Some(2),
            ..Facts::default()
        });
        assert!(mixed.contains(State::Indeterminate) && !mixed.contains(State::Checked));
    }

    #[test]
    fn actions_are_labelled_and_chosen() {
        assert_eq!(action_label("AXPress"), "press");
        assert_eq!(action_label("AXShowMenu"), "showMenu");
        assert_eq!(press_actions("activate")[0], "AXConfirm");
        assert_eq!(press_actions("press")[0], "AXPress");
        assert!(is_checkable("AXCheckBox") && !is_checkable("AXButton"));
        assert!(is_text_input("AXTextArea"));
    }
}
