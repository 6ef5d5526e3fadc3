//! Role and state vocabulary: AT-SPI roles mapped onto accesskit's `Role` (so Linux and macOS
//! trees read alike), their serialised names, and which states an outline shows by default.

use accesskit::Role;
use atspi::{Role as AtspiRole, State, StateSet};

/// The accesskit role for an AT-SPI role, refined by states where AT-SPI is coarser.
pub fn map_role(role: AtspiRole, states: StateSet) -> Role {
    use AtspiRole as A;
    match role {
        A::Invalid | A::Unknown | A::Extended | A::Ruler => Role::Unknown,
        A::AcceleratorLabel | A::Label | A::Static => Role::Label,
        A::Alert | A::Notification => Role::Alert,
        A::Animation | A::Arrow | A::Icon | A::Image | A::ImageMap | A::DesktopIcon => Role::Image,
        A::Calendar => Role::Grid,
        A::Canvas | A::DrawingArea => Role::Canvas,
        A::CheckBox => Role::CheckBox,
        A::CheckMenuItem => Role::MenuItemCheckBox,
        A::ColorChooser => Role::ColorWell,
        A::ColumnHeader | A::TableColumnHeader => Role::ColumnHeader,
        A::ComboBox => Role::ComboBox,
        A::Autocomplete => Role::EditableComboBox,
        A::DateEditor => Role::DateInput,
        A::DesktopFrame | A::Frame | A::Window | A::InputMethodWindow => Role::Window,
        A::Dial | A::Slider => Role::Slider,
        A::Dialog | A::OptionPane => Role::Dialog,
        A::DirectoryPane
        | A::FileChooser
        | A::FontChooser
        | A::GlassPane
        | A::InternalFrame
        | A::LayeredPane
        | A::Panel
        | A::RootPane
        | A::SplitPane
        | A::Viewport => Role::Pane,
        A::Filler | A::FocusTraversable | A::RedundantObject | A::Subscript | A::Superscript => {
            Role::GenericContainer
        }
        A::HTMLContainer
        | A::DocumentFrame
        | A::DocumentSpreadsheet
        | A::DocumentPresentation
        | A::DocumentText
        | A::DocumentEmail => Role::Document,
        A::DocumentWeb => Role::RootWebArea,
        A::List => Role::List,
        A::ListBox => Role::ListBox,
        A::ListItem => Role::ListItem,
        A::Menu | A::PopupMenu => Role::Menu,
        A::MenuBar => Role::MenuBar,
        A::MenuItem | A::TearoffMenuItem => Role::MenuItem,
        A::PageTab => Role::Tab,
        A::PageTabList => Role::TabList,
        A::PasswordText => Role::PasswordInput,
        A::ProgressBar => Role::ProgressIndicator,
        A::Button | A::ToggleButton | A::PushButtonMenu => Role::Button,
        A::RadioButton => Role::RadioButton,
        A::RadioMenuItem => Role::MenuItemRadio,
        A::RowHeader | A::TableRowHeader => Role::RowHeader,
        A::ScrollBar => Role::ScrollBar,
        A::ScrollPane => Role::ScrollView,
        A::Separator => Role::Splitter,
        A::SpinButton => Role::SpinButton,
        A::StatusBar | A::InfoBar => Role::Status,
        A::Table => Role::Table,
        A::TableCell => Role::Cell,
        A::TableRow => Role::Row,
        A::Terminal => Role::Terminal,
        A::Text | A::Entry | A::Editbar => {
            if states.contains(State::MultiLine) {
                Role::MultilineTextInput
            } else {
                Role::TextInput
            }
        }
        A::ToolBar => Role::Toolbar,
        A::ToolTip => Role::Tooltip,
        A::Tree => Role::Tree,
        A::TreeTable => Role::TreeGrid,
        A::TreeItem => Role::TreeItem,
        A::Header => Role::Header,
        A::Footer => Role::Footer,
        A::Paragraph => Role::Paragraph,
        A::Application => Role::Application,
        A::Embedded => Role::EmbeddedObject,
        A::CHART => Role::Figure,
        A::Caption => Role::Caption,
        A::Heading => Role::Heading,
        A::Page | A::Section => Role::Section,
        A::Form => Role::Form,
        A::Link => Role::Link,
        A::Comment => Role::Comment,
        A::Grouping => Role::Group,
        A::LevelBar | A::Rating => Role::Meter,
        A::TitleBar => Role::TitleBar,
        A::BlockQuote => Role::Blockquote,
        A::Audio => Role::Audio,
        A::Video => Role::Video,
        A::Definition | A::DescriptionValue => Role::Definition,
        A::Article => Role::Article,
        A::Landmark => Role::Region,
        A::Log => Role::Log,
        A::Marquee => Role::Marquee,
        A::Math | A::MathFraction | A::MathRoot => Role::Math,
        A::Timer => Role::Timer,
        A::DescriptionList => Role::DescriptionList,
        A::DescriptionTerm => Role::Term,
        A::Footnote => Role::DocFootnote,
        A::ContentDeletion => Role::ContentDeletion,
        A::ContentInsertion => Role::ContentInsertion,
        A::Mark => Role::Mark,
        A::Suggestion => Role::Suggestion,
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

/// Every role name a selector may use, folded: the accesskit names this mapping produces, and
/// AT-SPI's own names (`push button`) for those who know them.
pub fn known_role_names() -> Vec<String> {
    let mut names: Vec<String> = (0..=130u32)
        .filter_map(|n| AtspiRole::try_from(n).ok())
        .flat_map(|role| {
            [
                fold(&role_name(map_role(role, StateSet::empty()))),
                fold(&role_name(map_role(role, StateSet::new(State::MultiLine)))),
                fold(role.name()),
            ]
        })
        .collect();
    names.sort();
    names.dedup();
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
/// enabled (AT-SPI reports the positive state; its absence is what matters).
pub fn key_states(states: StateSet, role: Role) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = KEY_STATES
        .iter()
        .filter(|state| states.contains(**state))
        .map(State::to_static_str)
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

/// Every state in the set, by AT-SPI name.
pub fn all_states(states: StateSet) -> Vec<&'static str> {
    states.iter().map(|state| state.to_static_str()).collect()
}

/// The AT-SPI state a selector's `[name]` refers to (`disabled` and `collapsed` are derived).
pub fn parse_state(name: &str) -> Option<StateQuery> {
    match name {
        "disabled" => return Some(StateQuery::Disabled),
        "collapsed" => return Some(StateQuery::Collapsed),
        _ => {}
    }
    let state = State::from(name);
    (state != State::Invalid || name == "invalid").then_some(StateQuery::Is(state))
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
    fn roles_serialise_as_accesskit_names() {
        assert_eq!(
            role_name(map_role(AtspiRole::Button, StateSet::empty())),
            "button"
        );
        assert_eq!(
            role_name(map_role(AtspiRole::CheckBox, StateSet::empty())),
            "checkBox"
        );
        assert_eq!(
            role_name(map_role(AtspiRole::Text, StateSet::empty())),
            "textInput"
        );
        assert_eq!(
            role_name(map_role(AtspiRole::Frame, StateSet::empty())),
            "window"
        );
        assert!(known_role_names().contains(&"checkbox".to_string()));
    }

    #[test]
    fn states_parse_by_atspi_name() {
        assert_eq!(parse_state("focused"), Some(StateQuery::Is(State::Focused)));
        assert_eq!(parse_state("disabled"), Some(StateQuery::Disabled));
        assert_eq!(parse_state("nonsense"), None);
    }
}
