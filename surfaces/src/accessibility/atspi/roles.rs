//! AT-SPI's roles mapped onto accesskit's `Role` (so Linux and macOS trees read alike), AT-SPI's
//! own role names, and its state words read into the shared state set.

use std::sync::OnceLock;

use accesskit::Role;
use atspi::Role as AtspiRole;

use crate::accessibility::roles::{State, StateSet, fold};

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

/// AT-SPI's own role names (`push button`), folded, which `roles` and selectors accept beside
/// the accesskit names.
pub fn native_role_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = (0..=130u32)
            .filter_map(|n| AtspiRole::try_from(n).ok())
            .map(|role| fold(role.name()))
            .collect();
        names.sort();
        names.dedup();
        names
    })
}

/// Our state set from AT-SPI's two 32-bit state words (the bit order is the same).
pub fn state_set(words: &[u32]) -> StateSet {
    let bits = words.first().copied().unwrap_or(0) as u64
        | (words.get(1).copied().unwrap_or(0) as u64) << 32;
    StateSet::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accessibility::roles::{accesskit_role_names, all_states, role_name};

    #[test]
    fn roles_serialise_as_accesskit_names() {
        let name = |role| role_name(map_role(role, StateSet::empty()));
        assert_eq!(name(AtspiRole::Button), "button");
        assert_eq!(name(AtspiRole::CheckBox), "checkBox");
        assert_eq!(name(AtspiRole::Text), "textInput");
        assert_eq!(name(AtspiRole::Frame), "window");
        assert!(native_role_names().contains(&"pushbuttonmenu".to_string()));
        // Every role this mapping produces is one the shared vocabulary accepts.
        let mut multi = StateSet::empty();
        multi.insert(State::MultiLine);
        for role in (0..=130u32).filter_map(|n| AtspiRole::try_from(n).ok()) {
            for states in [StateSet::empty(), multi] {
                let name = fold(&role_name(map_role(role, states)));
                assert!(accesskit_role_names().contains(&name), "{name}");
            }
        }
    }

    #[test]
    fn state_words_read_in_atspi_bit_order() {
        // Each of our states has the bit AT-SPI gives it, so the words pass through unchanged.
        for n in 0..44u32 {
            let bits = 1u64 << n;
            let ours = state_set(&[bits as u32, (bits >> 32) as u32]);
            let theirs = atspi::StateSet::from_bits(bits).expect("a known AT-SPI state");
            let theirs: Vec<&str> = theirs.iter().map(|s| s.to_static_str()).collect();
            assert_eq!(all_states(ours), theirs, "bit {n}");
        }
    }
}
