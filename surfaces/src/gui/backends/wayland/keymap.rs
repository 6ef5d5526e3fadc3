//! The xkb keymaps the Wayland backend's virtual keyboard uploads: four modifier keys, then one
//! key per keysym a call needs, so any Unicode text types without a layout that holds it. Pure
//! (no Wayland), so the layout of keys and the keymap text are unit-tested.

/// The modifiers every keymap holds, in key order: keysym, xkb modifier name, mask bit.
const MODIFIERS: &[(u32, &str, u32)] = &[
    (0xffe1, "Shift", 1 << 0),
    (0xffe3, "Control", 1 << 2),
    (0xffe9, "Mod1", 1 << 3),
    (0xffeb, "Mod4", 1 << 6),
];

/// The first xkb keycode (8 is the first a keymap may hold; evdev codes are xkb minus 8).
const FIRST_KEYCODE: u32 = 9;
/// The last xkb keycode clients are sure to take: the X11 limit that many toolkits keep.
const LAST_KEYCODE: u32 = 255;

/// How many keysyms besides the modifiers one keymap can hold.
pub const KEY_SLOTS: usize = (LAST_KEYCODE - FIRST_KEYCODE + 1) as usize - MODIFIERS.len();

/// One uploaded layout: the modifier keys, then `keysyms` in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub keysyms: Vec<u32>,
}

impl Layout {
    /// A layout holding `keysyms` (distinct, at most [`KEY_SLOTS`]).
    pub fn new(keysyms: Vec<u32>) -> Layout {
        debug_assert!(keysyms.len() <= KEY_SLOTS);
        Layout { keysyms }
    }

    /// The evdev code (what `zwp_virtual_keyboard_v1.key` takes) of a keysym's key, modifiers
    /// included.
    pub fn key_of(&self, keysym: u32) -> Option<u32> {
        let index = match MODIFIERS.iter().position(|(sym, _, _)| *sym == keysym) {
            Some(index) => index,
            None => MODIFIERS.len() + self.keysyms.iter().position(|s| *s == keysym)?,
        };
        Some(FIRST_KEYCODE + index as u32 - 8)
    }

    /// Whether every keysym has a key here.
    pub fn holds(&self, keysyms: &[u32]) -> bool {
        keysyms.iter().all(|sym| self.key_of(*sym).is_some())
    }

    /// The keymap text in xkb's format (`XKB_KEYMAP_FORMAT_TEXT_V1`), NUL-terminated as the
    /// protocol's `keymap` request expects.
    pub fn text(&self) -> String {
        let keys = MODIFIERS.len() + self.keysyms.len();
        let last = FIRST_KEYCODE + keys as u32 - 1;
        let mut text = String::with_capacity(128 + keys * 64);
        text.push_str("xkb_keymap {\nxkb_keycodes \"computer\" {\n");
        text.push_str(&format!("  minimum = 8;\n  maximum = {};\n", last.max(255)));
        for code in FIRST_KEYCODE..=last {
            text.push_str(&format!("  <K{code}> = {code};\n"));
        }
        // Types and compatibility from the standard set, which resolve on the compositor's side
        // (it hands clients the compiled keymap).
        text.push_str("};\nxkb_types \"computer\" { include \"complete\" };\n");
        text.push_str("xkb_compatibility \"computer\" { include \"complete\" };\n");
        text.push_str("xkb_symbols \"computer\" {\n");
        let all = MODIFIERS
            .iter()
            .map(|(sym, _, _)| *sym)
            .chain(self.keysyms.iter().copied());
        for (index, sym) in all.enumerate() {
            // A keysym as a hexadecimal number: xkb takes every keysym that way, named or not.
            text.push_str(&format!(
                "  key <K{}> {{ [ {sym:#x} ] }};\n",
                FIRST_KEYCODE + index as u32
            ));
        }
        for (index, (_, modifier, _)) in MODIFIERS.iter().enumerate() {
            text.push_str(&format!(
                "  modifier_map {modifier} {{ <K{}> }};\n",
                FIRST_KEYCODE + index as u32
            ));
        }
        text.push_str("};\n};\n\0");
        text
    }
}

/// The modifier mask (as `zwp_virtual_keyboard_v1.modifiers` takes it) of held modifier keysyms.
pub fn modifier_mask(held: &[u32]) -> u32 {
    MODIFIERS
        .iter()
        .filter(|(sym, _, _)| held.contains(sym))
        .fold(0, |mask, (_, _, bit)| mask | bit)
}

/// Whether a keysym is one of the modifiers every layout holds.
pub fn is_modifier(keysym: u32) -> bool {
    MODIFIERS.iter().any(|(sym, _, _)| *sym == keysym)
}

/// Splits `keysyms` into runs whose distinct non-modifier keysyms fit one layout, in order.
pub fn rounds(keysyms: &[u32]) -> Vec<(&[u32], Vec<u32>)> {
    let mut rounds = Vec::new();
    let mut start = 0;
    while start < keysyms.len() {
        let mut distinct: Vec<u32> = Vec::new();
        let mut end = start;
        while end < keysyms.len() {
            let sym = keysyms[end];
            if !is_modifier(sym) && !distinct.contains(&sym) {
                if distinct.len() == KEY_SLOTS {
                    break;
                }
                distinct.push(sym);
            }
            end += 1;
        }
        rounds.push((&keysyms[start..end], distinct));
        start = end;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_keysym_gets_its_own_key_after_the_modifiers() {
        let layout = Layout::new(vec![0x61, 0x0100_00e9, 0x0101_f600]);
        assert_eq!(layout.key_of(0xffe1), Some(1), "shift is the first key");
        assert_eq!(layout.key_of(0xffeb), Some(4));
        assert_eq!(layout.key_of(0x61), Some(5));
        assert_eq!(layout.key_of(0x0101_f600), Some(7));
        assert_eq!(layout.key_of(0x62), None);
        assert!(layout.holds(&[0x61, 0xffe3]));
        assert!(!layout.holds(&[0x61, 0x62]));
    }

    #[test]
    fn the_keymap_text_names_every_key_and_modifier() {
        let text = Layout::new(vec![0x0101_f600]).text();
        assert!(text.contains("<K13> = 13;"), "{text}");
        assert!(text.contains("key <K13> { [ 0x101f600 ] };"), "{text}");
        assert!(text.contains("key <K9> { [ 0xffe1 ] };"), "{text}");
        assert!(text.contains("modifier_map Mod4 { <K12> };"), "{text}");
        assert!(text.ends_with('\0'));
    }

    #[test]
    fn modifier_masks_follow_the_held_keys() {
        assert_eq!(modifier_mask(&[0xffe3, 0xffe1]), 0b101);
        assert_eq!(modifier_mask(&[0xffeb]), 64);
        assert_eq!(modifier_mask(&[]), 0);
    }

    #[test]
    fn long_texts_with_many_symbols_go_in_rounds_that_fit_a_layout() {
        let many: Vec<u32> = (0..KEY_SLOTS as u32 + 10)
            .map(|i| 0x0100_4e00 + i)
            .collect();
        let rounds = rounds(&many);
        assert_eq!(rounds.len(), 2);
        assert_eq!(rounds[0].1.len(), KEY_SLOTS);
        assert_eq!(rounds[1].0.len(), 10);
        let repeated = vec![0x61; 1000];
        assert_eq!(super::rounds(&repeated).len(), 1, "repeats need one key");
    }
}
