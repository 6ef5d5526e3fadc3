//! Key names and combos for `gui key` and characters for `gui type`: parsing "ctrl+shift+t" into
//! modifier keysyms and one key keysym, and the keysym of any Unicode character. Pure (no X).

/// Modifier names a combo may use, and the keysym each presses.
const MODIFIERS: &[(&str, u32)] = &[
    ("ctrl", 0xffe3),
    ("control", 0xffe3),
    ("shift", 0xffe1),
    ("alt", 0xffe9),
    // Toolkits call the "Windows"/command key super or meta; on X it is Super_L.
    ("super", 0xffeb),
    ("meta", 0xffeb),
    ("win", 0xffeb),
    ("cmd", 0xffeb),
];

/// Named keys (matched case-insensitively), with their X keysyms.
const NAMED: &[(&str, u32)] = &[
    ("Return", 0xff0d),
    ("Enter", 0xff0d),
    ("Tab", 0xff09),
    ("Escape", 0xff1b),
    ("Esc", 0xff1b),
    ("BackSpace", 0xff08),
    ("Delete", 0xffff),
    ("Del", 0xffff),
    ("Insert", 0xff63),
    ("Home", 0xff50),
    ("End", 0xff57),
    ("Page_Up", 0xff55),
    ("PageUp", 0xff55),
    ("Prior", 0xff55),
    ("Page_Down", 0xff56),
    ("PageDown", 0xff56),
    ("Next", 0xff56),
    ("Left", 0xff51),
    ("Up", 0xff52),
    ("Right", 0xff53),
    ("Down", 0xff54),
    ("space", 0x0020),
    ("Menu", 0xff67),
    ("Print", 0xff61),
    ("Pause", 0xff13),
    ("Caps_Lock", 0xffe5),
    ("Num_Lock", 0xff7f),
    ("Scroll_Lock", 0xff14),
    ("plus", 0x002b),
    ("minus", 0x002d),
    ("comma", 0x002c),
    ("period", 0x002e),
    ("slash", 0x002f),
    ("backslash", 0x005c),
    ("semicolon", 0x003b),
    ("apostrophe", 0x0027),
    ("grave", 0x0060),
    ("equal", 0x003d),
    ("bracketleft", 0x005b),
    ("bracketright", 0x005d),
    ("Control_L", 0xffe3),
    ("Control_R", 0xffe4),
    ("Shift_L", 0xffe1),
    ("Shift_R", 0xffe2),
    ("Alt_L", 0xffe9),
    ("Alt_R", 0xffea),
    ("Super_L", 0xffeb),
    ("Super_R", 0xffec),
];

/// A parsed combo: modifiers held (in order) around one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combo {
    pub modifiers: Vec<u32>,
    pub key: u32,
}

/// Why a combo did not parse, with the choices to offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComboError {
    pub message: String,
    pub valid: Vec<String>,
}

/// Parses `ctrl+shift+t`, `alt+F4`, `Return`, `ctrl+plus` or a single character like `é`.
pub fn parse_combo(combo: &str) -> Result<Combo, ComboError> {
    let parts: Vec<&str> = combo.split('+').collect();
    // "ctrl++" means ctrl and the plus key: the last part is empty then.
    let (mods, key) = match parts.split_last() {
        Some((last, rest)) if last.is_empty() && !rest.is_empty() => (&rest[..rest.len() - 1], "+"),
        Some((last, rest)) => (rest, *last),
        None => (&parts[..0], ""),
    };
    let mut modifiers = Vec::new();
    for name in mods {
        let lower = name.trim().to_ascii_lowercase();
        match MODIFIERS.iter().find(|(n, _)| *n == lower) {
            Some((_, sym)) => modifiers.push(*sym),
            None => {
                return Err(ComboError {
                    message: format!("`{name}` is not a modifier in `{combo}`"),
                    valid: MODIFIERS.iter().map(|(n, _)| n.to_string()).collect(),
                });
            }
        }
    }
    match key_keysym(key.trim()) {
        Some(key) => Ok(Combo { modifiers, key }),
        None => Err(ComboError {
            message: format!(
                "`{key}` is not a key name: use a single character, F1-F24, or a name"
            ),
            valid: NAMED.iter().take(24).map(|(n, _)| n.to_string()).collect(),
        }),
    }
}

/// The keysym of a key named in a combo.
fn key_keysym(name: &str) -> Option<u32> {
    if let Some((_, sym)) = NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
        return Some(*sym);
    }
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        // A letter names the key, whose keysym is the lower-case one; shift is a modifier.
        return Some(char_keysym(c.to_lowercase().next().unwrap_or(c)));
    }
    let upper = name.to_ascii_uppercase();
    if let Some(n) = upper.strip_prefix('F').and_then(|n| n.parse::<u32>().ok())
        && (1..=24).contains(&n)
    {
        // F1 is 0xffbe and the F keys are consecutive.
        return Some(0xffbe + n - 1);
    }
    None
}

/// The keysym that types `c`: Latin-1 characters are their own keysyms; everything else is
/// 0x01000000 + the code point; newline and tab are the Return and Tab keys.
pub fn char_keysym(c: char) -> u32 {
    match c {
        '\n' | '\r' => 0xff0d,
        '\t' => 0xff09,
        '\u{8}' => 0xff08,
        c if (' '..='~').contains(&c) || ('\u{a0}'..='\u{ff}').contains(&c) => c as u32,
        c => 0x0100_0000 | c as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combos_parse_into_modifiers_and_a_key() {
        assert_eq!(
            parse_combo("ctrl+shift+t").unwrap(),
            Combo {
                modifiers: vec![0xffe3, 0xffe1],
                key: 't' as u32
            }
        );
        assert_eq!(parse_combo("alt+F4").unwrap().key, 0xffc1);
        assert_eq!(parse_combo("Return").unwrap().key, 0xff0d);
        assert_eq!(parse_combo("return").unwrap().key, 0xff0d);
        assert_eq!(parse_combo("ctrl++").unwrap().key, '+' as u32);
        assert_eq!(parse_combo("ctrl+T").unwrap().key, 't' as u32);
        assert_eq!(parse_combo("Ω").unwrap().key, 0x0100_03c9);
    }

    #[test]
    fn bad_combos_name_the_part() {
        let err = parse_combo("hyper+x").unwrap_err();
        assert!(err.message.contains("hyper"), "{err:?}");
        assert!(err.valid.contains(&"ctrl".to_string()));
        let err = parse_combo("ctrl+Retrun").unwrap_err();
        assert!(err.message.contains("Retrun"), "{err:?}");
        assert!(parse_combo("").is_err());
        assert!(parse_combo("F25").is_err());
    }

    #[test]
    fn characters_map_to_keysyms() {
        assert_eq!(char_keysym('a'), 0x61);
        assert_eq!(char_keysym('é'), 0xe9);
        assert_eq!(char_keysym('✓'), 0x0100_2713);
        assert_eq!(char_keysym('\n'), 0xff0d);
    }
}
