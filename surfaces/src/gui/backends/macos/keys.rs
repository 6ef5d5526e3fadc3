//! Keys on macOS without touching the OS: the virtual key code (kVK_* in HIToolbox's Events.h)
//! and event flag for each keysym that `keys::parse_combo` produces, and how each character of
//! `gui type` is sent. Pure, so its tables are unit-tested on every platform.

/// CGEventFlags bits (CGEventTypes.h).
pub const FLAG_SHIFT: u64 = 0x0002_0000;
pub const FLAG_CONTROL: u64 = 0x0004_0000;
pub const FLAG_OPTION: u64 = 0x0008_0000;
pub const FLAG_COMMAND: u64 = 0x0010_0000;

/// kVK_Return, kVK_Tab, kVK_Delete (backspace).
pub const KEY_RETURN: u16 = 0x24;
pub const KEY_TAB: u16 = 0x30;
pub const KEY_BACKSPACE: u16 = 0x33;

/// Modifier keysyms (as `keys` names them) → (key code, event flag). X's Super is the Command
/// key on a Mac, Alt is Option.
const MODIFIERS: &[(u32, u16, u64)] = &[
    (0xffe1, 0x38, FLAG_SHIFT),   // Shift_L → kVK_Shift
    (0xffe2, 0x3C, FLAG_SHIFT),   // Shift_R → kVK_RightShift
    (0xffe3, 0x3B, FLAG_CONTROL), // Control_L → kVK_Control
    (0xffe4, 0x3E, FLAG_CONTROL), // Control_R → kVK_RightControl
    (0xffe9, 0x3A, FLAG_OPTION),  // Alt_L → kVK_Option
    (0xffea, 0x3D, FLAG_OPTION),  // Alt_R → kVK_RightOption
    (0xffeb, 0x37, FLAG_COMMAND), // Super_L → kVK_Command
    (0xffec, 0x36, FLAG_COMMAND), // Super_R → kVK_RightCommand
];

/// Named keys: keysym → key code. Keys a Mac keyboard lacks map to their usual stand-ins
/// (Insert is Help, Print is F13, Scroll_Lock F14, Pause F15, Num_Lock the keypad's Clear).
const NAMED: &[(u32, u16)] = &[
    (0xff0d, 0x24), // Return
    (0xff09, 0x30), // Tab
    (0xff1b, 0x35), // Escape
    (0xff08, 0x33), // BackSpace → kVK_Delete
    (0xffff, 0x75), // Delete → kVK_ForwardDelete
    (0xff63, 0x72), // Insert → kVK_Help
    (0xff50, 0x73), // Home
    (0xff57, 0x77), // End
    (0xff55, 0x74), // Page_Up
    (0xff56, 0x79), // Page_Down
    (0xff51, 0x7B), // Left
    (0xff52, 0x7E), // Up
    (0xff53, 0x7C), // Right
    (0xff54, 0x7D), // Down
    (0xff61, 0x69), // Print → F13
    (0xff14, 0x6B), // Scroll_Lock → F14
    (0xff13, 0x71), // Pause → F15
    (0xffe5, 0x39), // Caps_Lock
    (0xff7f, 0x47), // Num_Lock → kVK_ANSI_KeypadClear
];

/// F1..F20 in order (kVK_F1 = 0x7A, ...); the Mac has no F21-F24.
const FUNCTION: [u16; 20] = [
    0x7A, 0x78, 0x63, 0x76, 0x60, 0x61, 0x62, 0x64, 0x65, 0x6D, 0x67, 0x6F, 0x69, 0x6B, 0x71, 0x6A,
    0x40, 0x4F, 0x50, 0x5A,
];

/// Printable ASCII on the US (ANSI) layout: character → (key code, needs shift).
const ASCII: &[(char, u16, bool)] = &[
    ('a', 0x00, false),
    ('s', 0x01, false),
    ('d', 0x02, false),
    ('f', 0x03, false),
    ('h', 0x04, false),
    ('g', 0x05, false),
    ('z', 0x06, false),
    ('x', 0x07, false),
    ('c', 0x08, false),
    ('v', 0x09, false),
    ('b', 0x0B, false),
    ('q', 0x0C, false),
    ('w', 0x0D, false),
    ('e', 0x0E, false),
    ('r', 0x0F, false),
    ('y', 0x10, false),
    ('t', 0x11, false),
    ('1', 0x12, false),
    ('2', 0x13, false),
    ('3', 0x14, false),
    ('4', 0x15, false),
    ('6', 0x16, false),
    ('5', 0x17, false),
    ('=', 0x18, false),
    ('9', 0x19, false),
    ('7', 0x1A, false),
    ('-', 0x1B, false),
    ('8', 0x1C, false),
    ('0', 0x1D, false),
    (']', 0x1E, false),
    ('o', 0x1F, false),
    ('u', 0x20, false),
    ('[', 0x21, false),
    ('i', 0x22, false),
    ('p', 0x23, false),
    ('l', 0x25, false),
    ('j', 0x26, false),
    ('\'', 0x27, false),
    ('k', 0x28, false),
    (';', 0x29, false),
    ('\\', 0x2A, false),
    (',', 0x2B, false),
    ('/', 0x2C, false),
    ('n', 0x2D, false),
    ('m', 0x2E, false),
    ('.', 0x2F, false),
    ('`', 0x32, false),
    (' ', 0x31, false),
    ('!', 0x12, true),
    ('@', 0x13, true),
    ('#', 0x14, true),
    ('$', 0x15, true),
    ('%', 0x17, true),
    ('^', 0x16, true),
    ('&', 0x1A, true),
    ('*', 0x1C, true),
    ('(', 0x19, true),
    (')', 0x1D, true),
    ('_', 0x1B, true),
    ('+', 0x18, true),
    ('{', 0x21, true),
    ('}', 0x1E, true),
    ('|', 0x2A, true),
    (':', 0x29, true),
    ('"', 0x27, true),
    ('<', 0x2B, true),
    ('>', 0x2F, true),
    ('?', 0x2C, true),
    ('~', 0x32, true),
];

/// The key code and flag of a modifier keysym.
pub fn modifier(keysym: u32) -> Option<(u16, u64)> {
    MODIFIERS
        .iter()
        .find(|(sym, _, _)| *sym == keysym)
        .map(|(_, code, flag)| (*code, *flag))
}

/// How a combo's key is pressed on macOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComboKey {
    pub code: u16,
    /// Shift is part of the key (`ctrl+?` on a US layout is ctrl+shift+/).
    pub shift: bool,
    /// The character the key stands for, attached to the event as its Unicode string so that
    /// apps reading characters (not key positions) see it on any layout.
    pub text: Option<char>,
}

/// The key code for a combo's key keysym.
pub fn combo_key(keysym: u32) -> Option<ComboKey> {
    if let Some((_, code)) = NAMED.iter().find(|(sym, _)| *sym == keysym) {
        return Some(ComboKey {
            code: *code,
            shift: false,
            text: None,
        });
    }
    if let Some((code, _)) = modifier(keysym) {
        return Some(ComboKey {
            code,
            shift: false,
            text: None,
        });
    }
    if (0xffbe..0xffbe + FUNCTION.len() as u32).contains(&keysym) {
        return Some(ComboKey {
            code: FUNCTION[(keysym - 0xffbe) as usize],
            shift: false,
            text: None,
        });
    }
    let c = keysym_char(keysym)?;
    let lower = c.to_lowercase().next().unwrap_or(c);
    match ASCII.iter().find(|(ch, _, _)| *ch == lower) {
        Some((_, code, shift)) => Some(ComboKey {
            code: *code,
            shift: *shift || lower != c,
            text: Some(c),
        }),
        // A character off the US layout: sent as text on a neutral key.
        None => Some(ComboKey {
            code: 0,
            shift: false,
            text: Some(c),
        }),
    }
}

/// The character a keysym stands for (Latin-1 keysyms are their code points; Unicode keysyms
/// are 0x01000000 + the code point).
fn keysym_char(keysym: u32) -> Option<char> {
    match keysym {
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(keysym),
        k if k & 0xff00_0000 == 0x0100_0000 => char::from_u32(k & 0x00ff_ffff),
        _ => None,
    }
}

/// How `gui type` sends one character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    /// A real key: apps handle line breaks, tabs and backspace by key, not by character.
    Key(u16),
    /// A key event carrying the character as its Unicode string (CGEventKeyboardSetUnicodeString),
    /// which types any character whatever the keyboard layout.
    Text(char),
}

pub fn typed(c: char) -> Typed {
    match c {
        '\n' | '\r' => Typed::Key(KEY_RETURN),
        '\t' => Typed::Key(KEY_TAB),
        '\u{8}' => Typed::Key(KEY_BACKSPACE),
        c => Typed::Text(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gui::keys::parse_combo;

    #[test]
    fn combos_map_to_mac_key_codes_and_flags() {
        let combo = parse_combo("cmd+shift+t").unwrap();
        let flags: Vec<u64> = combo
            .modifiers
            .iter()
            .map(|m| modifier(*m).unwrap().1)
            .collect();
        assert_eq!(flags, [FLAG_COMMAND, FLAG_SHIFT]);
        assert_eq!(
            combo_key(combo.key),
            Some(ComboKey {
                code: 0x11,
                shift: false,
                text: Some('t')
            })
        );
        assert_eq!(
            combo_key(parse_combo("Return").unwrap().key).unwrap().code,
            0x24
        );
        assert_eq!(
            combo_key(parse_combo("alt+F4").unwrap().key).unwrap().code,
            0x76
        );
        assert_eq!(
            combo_key(parse_combo("F12").unwrap().key).unwrap().code,
            0x6F
        );
        assert_eq!(
            combo_key(parse_combo("Delete").unwrap().key).unwrap().code,
            0x75
        );
        assert_eq!(
            combo_key(parse_combo("ctrl+Left").unwrap().key)
                .unwrap()
                .code,
            0x7B
        );
        assert_eq!(
            modifier(parse_combo("alt+x").unwrap().modifiers[0]).unwrap(),
            (0x3A, FLAG_OPTION)
        );
        // Shifted symbols hold shift on their base key.
        assert_eq!(
            combo_key(parse_combo("ctrl+?").unwrap().key),
            Some(ComboKey {
                code: 0x2C,
                shift: true,
                text: Some('?')
            })
        );
        // Off the US layout: the character travels as text.
        assert_eq!(
            combo_key(parse_combo("é").unwrap().key).unwrap().text,
            Some('é')
        );
        assert_eq!(combo_key(parse_combo("F21").unwrap().key), None);
    }

    #[test]
    fn every_ascii_character_has_exactly_one_key() {
        for c in ' '..='~' {
            let keys: Vec<_> = ASCII.iter().filter(|(ch, _, _)| *ch == c).collect();
            let expected = usize::from(!c.is_ascii_uppercase());
            assert_eq!(keys.len(), expected, "{c:?}");
        }
        assert!(combo_key('A' as u32).unwrap().shift);
    }

    #[test]
    fn line_breaks_tabs_and_backspace_are_keys_the_rest_is_text() {
        assert_eq!(typed('\n'), Typed::Key(KEY_RETURN));
        assert_eq!(typed('\t'), Typed::Key(KEY_TAB));
        assert_eq!(typed('\u{8}'), Typed::Key(KEY_BACKSPACE));
        assert_eq!(typed('日'), Typed::Text('日'));
        assert_eq!(typed('a'), Typed::Text('a'));
    }
}
