//! Masking of secret values wherever output could carry them: the value as it is and in every
//! encoding programs commonly print it in, also when it is split across the chunks of a stream.
//!
//! The forms masked, after GitHub Actions' log masker: raw; each line of a multi-line value;
//! base64 (standard and URL-safe alphabets) at all three alignments, padded or not; hex (either
//! case); URL-encoded (either hex case, `+` or `%20` for a space); JSON-escaped (as serde and as
//! Python's `ensure_ascii` write it); XML/HTML-escaped. One Aho-Corasick automaton finds them
//! all in a single pass, leftmost-longest, so a longer form wins over a shorter one inside it.
//!
//! A base64 form is masked whole: besides the characters the value alone decides, the first
//! and last characters it shares with the bytes around it (which carry 2 or 4 of its bits) and
//! the padding after it. Those characters take every value the neighbouring bytes could give
//! them, so each alignment adds a few variants of the form (at most 16 × 17).

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine;

/// Forms shorter than this are not masked on their own (a one-character line of a multi-line
/// value would otherwise blank every occurrence of that character); the raw value always is.
pub const MIN_FORM: usize = 4;

/// The secrets one call resolved, ready to mask anything the call produces.
pub struct Masker {
    automaton: Option<AhoCorasick>,
    /// The forms, for telling whether held-back bytes could still grow into one (zeroed when
    /// dropped; the automaton's own copy cannot be).
    patterns: Vec<zeroize::Zeroizing<Vec<u8>>>,
    /// For each pattern of the automaton, what replaces it.
    replacements: Vec<Vec<u8>>,
    /// The longest pattern: a stream holds back one byte less than this.
    longest: usize,
}

impl std::fmt::Debug for Masker {
    // Never the patterns: they are the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masker")
            .field("patterns", &self.replacements.len())
            .finish()
    }
}

impl Masker {
    /// A masker for `secrets`, each given as (name, value); an occurrence of a value in any form
    /// becomes `[masked NAME]`.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Masker {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut replacements: Vec<Vec<u8>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            let replacement = format!("[masked {name}]").into_bytes();
            for form in forms(value) {
                if seen.insert(form.clone()) {
                    patterns.push(form);
                    replacements.push(replacement.clone());
                }
            }
        }
        // The set's copies of the forms are secrets too.
        for form in seen.drain() {
            drop(zeroize::Zeroizing::new(form));
        }
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        let automaton = (!patterns.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(AhoCorasickKind::DFA))
                .build(&patterns)
                // A DFA over a few hundred short patterns stays far below the builder's limits;
                // should it not, the contiguous NFA masks the same, only slower.
                .or_else(|_| {
                    AhoCorasick::builder()
                        .match_kind(MatchKind::LeftmostLongest)
                        .build(&patterns)
                })
                .expect("a leftmost-longest automaton over non-empty patterns")
        });
        Masker {
            automaton,
            patterns: patterns.into_iter().map(zeroize::Zeroizing::new).collect(),
            replacements,
            longest,
        }
    }

    /// Whether `tail` is the start of a form without being all of it: more bytes could make it
    /// one.
    fn could_grow_into_a_form(&self, tail: &[u8]) -> bool {
        self.patterns
            .iter()
            .any(|form| form.len() > tail.len() && form.starts_with(tail))
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// `text` with every form of every secret replaced.
    pub fn mask(&self, text: &[u8]) -> Vec<u8> {
        let Some(automaton) = &self.automaton else {
            return text.to_vec();
        };
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        for found in automaton.find_iter(text) {
            out.extend_from_slice(&text[at..found.start()]);
            out.extend_from_slice(&self.replacements[found.pattern().as_usize()]);
            at = found.end();
        }
        out.extend_from_slice(&text[at..]);
        out
    }

    /// `text` masked, as a string (invalid UTF-8 replaced).
    pub fn mask_str(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.mask(text.as_bytes())).into_owned()
    }

    /// A rendered screen masked: every form anywhere, and also the start of a form at the end
    /// of a row and the end of a form at the start of a row (at least [`MIN_FORM`] bytes). A
    /// screen cuts what it shows: a row narrowed by a resize ends inside a value, and a value
    /// whose first row scrolled away starts a row with its tail; either would show all of the
    /// value but a little.
    pub fn mask_screen(&self, screen: &str) -> String {
        let masked = self.mask_str(screen);
        if self.automaton.is_none() {
            return masked;
        }
        let rows: Vec<String> = masked
            .split('\n')
            .map(|row| String::from_utf8_lossy(&self.mask_row_edges(row.as_bytes())).into_owned())
            .collect();
        rows.join("\n")
    }

    fn mask_row_edges(&self, row: &[u8]) -> Vec<u8> {
        let mut head: Option<(usize, &[u8])> = None;
        let mut tail: Option<(usize, &[u8])> = None;
        for (form, replacement) in self.patterns.iter().zip(&self.replacements) {
            for cut in (MIN_FORM..form.len()).rev() {
                if head.is_none_or(|(len, _)| cut > len)
                    && row.starts_with(&form[form.len() - cut..])
                {
                    head = Some((cut, replacement));
                }
                if tail.is_none_or(|(len, _)| cut > len) && row.ends_with(&form[..cut]) {
                    tail = Some((cut, replacement));
                }
            }
        }
        let start = head.map_or(0, |(len, _)| len);
        let end = tail
            .map_or(row.len(), |(len, _)| row.len() - len)
            .max(start);
        let mut out = Vec::with_capacity(row.len());
        if let Some((_, replacement)) = head {
            out.extend_from_slice(replacement);
        }
        out.extend_from_slice(&row[start..end]);
        if let Some((_, replacement)) = tail
            && end < row.len()
        {
            out.extend_from_slice(replacement);
        }
        out
    }

    /// A masker for a stream whose chunks may split a secret anywhere.
    pub fn stream(&self) -> StreamMask<'_> {
        self.resume(Vec::new())
    }

    /// A stream that goes on from what an earlier one held back ([`StreamMask::into_held`]):
    /// for an owner that keeps the masker behind an `Arc` and cannot keep a borrow.
    pub fn resume(&self, held: Vec<u8>) -> StreamMask<'_> {
        StreamMask {
            masker: self,
            pending: held,
        }
    }
}

/// Masks a stream chunk by chunk: what could still be the start of a secret is held back until
/// the next chunk (or the end) tells.
pub struct StreamMask<'a> {
    masker: &'a Masker,
    pending: Vec<u8>,
}

impl StreamMask<'_> {
    /// Takes the next chunk; returns what can be let through now, masked.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len() + self.pending.len());
        self.push_with(chunk, |part| out.extend_from_slice(part));
        out
    }

    /// Takes the next chunk and hands what can be let through now, masked, to `emit` in pieces,
    /// without copying the chunk (what is held back, at most the longest form less one byte,
    /// is).
    pub fn push_with(&mut self, chunk: &[u8], mut emit: impl FnMut(&[u8])) {
        let Some(automaton) = &self.masker.automaton else {
            emit(chunk);
            return;
        };
        let longest = self.masker.longest;
        let replacement = |pattern: aho_corasick::PatternID| {
            self.masker.replacements[pattern.as_usize()].as_slice()
        };
        if chunk.len() < longest {
            // Short chunks: held back together, decided as the stream goes on.
            self.pending.extend_from_slice(chunk);
            let safe = self.pending.len().saturating_sub(longest - 1);
            let mut at = 0;
            for found in automaton.find_iter(&self.pending) {
                if found.start() >= safe {
                    break;
                }
                emit(&self.pending[at..found.start()]);
                emit(replacement(found.pattern()));
                at = found.end();
            }
            let keep_from = at.max(safe);
            emit(&self.pending[at..keep_from]);
            self.pending.drain(..keep_from);
            return;
        }
        // Matches that start in what was held back end within it and the chunk's first
        // `longest` bytes: decided on a small joined copy.
        let held = self.pending.len();
        let mut resume = 0;
        if held > 0 {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(&chunk[..longest]);
            let mut at = 0;
            for found in automaton.find_iter(&joined) {
                if found.start() >= held {
                    break;
                }
                emit(&joined[at..found.start()]);
                emit(replacement(found.pattern()));
                at = found.end();
            }
            emit(&joined[at.min(held)..held]);
            resume = at.max(held) - held;
        }
        // The chunk itself, in place: a match starting before `safe` is known whole.
        let safe = chunk.len() - (longest - 1);
        let mut at = resume;
        let input = aho_corasick::Input::new(chunk).span(resume..chunk.len());
        for found in automaton.find_iter(input) {
            if found.start() >= safe {
                break;
            }
            emit(&chunk[at..found.start()]);
            emit(replacement(found.pattern()));
            at = found.end();
        }
        let keep_from = at.max(safe);
        emit(&chunk[at.min(keep_from)..keep_from]);
        self.pending.clear();
        self.pending.extend_from_slice(&chunk[keep_from..]);
    }

    /// Lets through, masked, what is held back that cannot be the start of a form: for a reader
    /// that wants output as soon as it is known to be safe (a terminal's prompt), not only once
    /// more output comes. What stays held back could still grow into a form.
    pub fn release_settled(&mut self, mut emit: impl FnMut(&[u8])) {
        let Some(automaton) = &self.masker.automaton else {
            return;
        };
        let held = &self.pending;
        let live = (0..held.len())
            .find(|&i| self.masker.could_grow_into_a_form(&held[i..]))
            .unwrap_or(held.len());
        // A match that starts before `live` is whole: more bytes cannot lengthen it (that would
        // make its start live), nor can a match start earlier.
        let mut at = 0;
        for found in automaton.find_iter(held.as_slice()) {
            if found.start() >= live {
                break;
            }
            emit(&held[at..found.start()]);
            emit(&self.masker.replacements[found.pattern().as_usize()]);
            at = found.end();
        }
        let upto = at.max(live);
        emit(&held[at..upto]);
        self.pending.drain(..upto);
    }

    /// What is held back, to go on later with [`Masker::resume`].
    pub fn into_held(self) -> Vec<u8> {
        self.pending
    }

    /// The end of the stream: what was held back, masked.
    pub fn finish(self) -> Vec<u8> {
        self.masker.mask(&self.pending)
    }
}

/// Every form of `value` that is masked (not deduplicated).
fn forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![value.to_vec()];
    let mut add = |form: Vec<u8>| {
        if form.len() >= MIN_FORM && form != value {
            forms.push(form);
        }
    };
    if value.contains(&b'\n') {
        for line in value.split(|b| *b == b'\n') {
            add(line.strip_suffix(b"\r").unwrap_or(line).to_vec());
        }
    }
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ] {
        for offset in 0..3 {
            let core = base64_core(engine, value, offset);
            // A form too short to mask alone stays unmasked with its edges too.
            if core.len() >= MIN_FORM {
                for whole in base64_whole(engine, value, offset) {
                    add(whole);
                }
            }
            add(core);
        }
    }
    add(hex::encode(value).into_bytes());
    add(hex::encode_upper(value).into_bytes());
    for (lower, plus) in [(false, false), (true, false), (false, true), (true, true)] {
        add(url_encoded(value, lower, plus));
    }
    if let Ok(text) = std::str::from_utf8(value) {
        let json = serde_json::to_string(text).unwrap_or_default();
        add(json.as_bytes()[1..json.len() - 1].to_vec());
        add(json_ascii(text).into_bytes());
        add(xml_escaped(text, "&#39;").into_bytes());
        add(xml_escaped(text, "&apos;").into_bytes());
        add(xml_escaped(text, "&#x27;").into_bytes());
    }
    forms
}

/// The part of the base64 of `value`, preceded by `offset` unknown bytes, that depends on `value`
/// alone: whatever precedes it in a stream, these characters appear when `value` is encoded
/// from that alignment, padded or not.
fn base64_core(engine: &base64::engine::GeneralPurpose, value: &[u8], offset: usize) -> Vec<u8> {
    let mut shifted = vec![0u8; offset];
    shifted.extend_from_slice(value);
    let encoded = engine.encode(&shifted);
    let first = (offset * 8).div_ceil(6);
    let last = (shifted.len() * 8) / 6;
    if first >= last {
        return Vec::new();
    }
    encoded.as_bytes()[first..last].to_vec()
}

/// Every way the base64 of `value`, preceded by `offset` bytes, can read from its first
/// character that holds a bit of `value` to its last, padding included: the character it shares
/// with the byte before it takes each value those bytes' last bits give it, and the one it shares
/// with the byte after it each value that byte's first bits give it, or none (the data ends:
/// zero bits, then the padding when the engine pads).
fn base64_whole(
    engine: &base64::engine::GeneralPurpose,
    value: &[u8],
    offset: usize,
) -> Vec<Vec<u8>> {
    let start = offset * 8 / 6;
    let end = ((offset + value.len()) * 8).div_ceil(6);
    // Bits of the byte before `value` that share its first character, and of the byte after
    // that share its last.
    let before_bits = 2 * offset;
    let after_bits = match (offset + value.len()) % 3 {
        0 => 0,
        1 => 4,
        _ => 2,
    };
    let mut forms = Vec::new();
    for before in 0..1u16 << before_bits {
        let mut data = vec![0u8; offset];
        if let Some(last) = data.last_mut() {
            *last = before as u8;
        }
        data.extend_from_slice(value);
        if after_bits == 0 {
            forms.push(engine.encode(&data).as_bytes()[start..end].to_vec());
            continue;
        }
        // The data ends with the value: the padding belongs to it.
        forms.push(engine.encode(&data).as_bytes()[start..].to_vec());
        for after in 0..1u16 << after_bits {
            data.push((after << (8 - after_bits)) as u8);
            forms.push(engine.encode(&data).as_bytes()[start..end].to_vec());
            data.pop();
        }
    }
    forms
}

/// Percent-encoding of every byte outside RFC 3986's unreserved set; `lower` hex digits, and a
/// space as `+` (HTML forms) when `plus`.
fn url_encoded(value: &[u8], lower: bool, plus: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() * 3);
    for &byte in value {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte),
            b' ' if plus => out.push(b'+'),
            _ if lower => out.extend_from_slice(format!("%{byte:02x}").as_bytes()),
            _ => out.extend_from_slice(format!("%{byte:02X}").as_bytes()),
        }
    }
    out
}

/// A JSON string's inside as Python's `json.dumps` writes it by default: every non-ASCII
/// character as `\uXXXX` (surrogate pairs beyond the BMP).
fn json_ascii(text: &str) -> String {
    let escaped = serde_json::to_string(text).unwrap_or_default();
    let inner = &escaped[1..escaped.len() - 1];
    let mut out = String::with_capacity(inner.len());
    for c in inner.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// XML/HTML escaping of the five special characters, the apostrophe written as `apostrophe`.
fn xml_escaped(text: &str, apostrophe: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str(apostrophe),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECRET: &str = "s3cr3t-t0k3n/with&<odd>'chars\" é";

    fn masker() -> Masker {
        Masker::new([("API_TOKEN", SECRET.as_bytes())])
    }

    fn assert_masked(form: &[u8], what: &str) {
        let text = [b"before ".as_slice(), form, b" after"].concat();
        let masked = String::from_utf8(masker().mask(&text)).unwrap();
        assert_eq!(
            masked,
            "before [masked API_TOKEN] after",
            "{what}: {}",
            String::from_utf8_lossy(form)
        );
    }

    #[test]
    fn every_encoding_is_masked() {
        let value = SECRET.as_bytes();
        assert_masked(value, "raw");
        assert_masked(hex::encode(value).as_bytes(), "hex");
        assert_masked(hex::encode_upper(value).as_bytes(), "HEX");
        assert_masked(&url_encoded(value, false, false), "url");
        assert_masked(&url_encoded(value, true, true), "url, lower, plus");
        let json = serde_json::to_string(SECRET).unwrap();
        assert_masked(&json.as_bytes()[1..json.len() - 1], "json");
        assert_masked(json_ascii(SECRET).as_bytes(), "json ascii");
        assert_masked(xml_escaped(SECRET, "&#39;").as_bytes(), "html");
        assert_masked(xml_escaped(SECRET, "&apos;").as_bytes(), "xml");
    }

    #[test]
    fn base64_is_masked_at_every_alignment_padded_or_not() {
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            for prefix in ["", "a", "ab", "abc", "Authorization: Basic "] {
                let encoded = engine.encode([prefix.as_bytes(), SECRET.as_bytes()].concat());
                let masked = masker().mask_str(&encoded);
                assert!(
                    masked.contains("[masked API_TOKEN]"),
                    "prefix {prefix:?}: {encoded} -> {masked}"
                );
                // Nothing of the core is left: at most the characters mixing in the prefix or
                // padding remain beside the mask.
                let left = masked.replace("[masked API_TOKEN]", "");
                assert!(
                    left.len() <= engine.encode(prefix).len() + 4,
                    "prefix {prefix:?}: {masked}"
                );
            }
        }
    }

    /// `value`'s base64 between `prefix` and `suffix`, masked: exactly the characters that hold
    /// none of `value`'s bits are left, the padding after it going with it.
    fn check_base64_masked_whole(
        engine: &base64::engine::GeneralPurpose,
        value: &[u8],
        prefix: &[u8],
        suffix: &[u8],
    ) -> Result<(), String> {
        let masker = Masker::new([("API_TOKEN", value)]);
        let encoded = engine.encode([prefix, value, suffix].concat());
        let before = &encoded[..prefix.len() * 8 / 6];
        let after = if suffix.is_empty() {
            ""
        } else {
            &encoded[((prefix.len() + value.len()) * 8).div_ceil(6)..]
        };
        let masked = masker.mask_str(&encoded);
        let expected = format!("{before}[masked API_TOKEN]{after}");
        if masked == expected {
            Ok(())
        } else {
            Err(format!(
                "prefix {prefix:?}, suffix {suffix:?}: {encoded} -> {masked}, not {expected}"
            ))
        }
    }

    const ENGINES: [&base64::engine::GeneralPurpose; 4] = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];

    #[test]
    fn a_base64_form_leaves_no_character_that_holds_a_bit_of_the_value() {
        // The report: the last characters and the padding stayed beside the mask.
        let value = b"abcd-token";
        assert_eq!(
            base64::engine::general_purpose::STANDARD.encode(value),
            "YWJjZC10b2tlbg=="
        );
        assert_eq!(
            Masker::new([("API_TOKEN", value.as_slice())]).mask_str("YWJjZC10b2tlbg=="),
            "[masked API_TOKEN]"
        );
        for engine in ENGINES {
            for prefix in ["", "a", "ab", "abc", "abcd"] {
                for suffix in ["", "x", "xy", "xyz", "\u{7f}\0"] {
                    check_base64_masked_whole(
                        engine,
                        SECRET.as_bytes(),
                        prefix.as_bytes(),
                        suffix.as_bytes(),
                    )
                    .unwrap();
                }
            }
        }
    }

    #[test]
    fn each_line_of_a_multi_line_value_is_masked_alone() {
        let key =
            "-----BEGIN KEY-----\r\nMIIEvQIBADANBgkq\r\nhkiG9w0BAQEFAASC\r\n-----END KEY-----";
        let masker = Masker::new([("KEY", key.as_bytes())]);
        let printed = "line two alone: hkiG9w0BAQEFAASC, and whole:\n".to_string() + key;
        let masked = masker.mask_str(&printed);
        assert_eq!(
            masked,
            "line two alone: [masked KEY], and whole:\n[masked KEY]"
        );
    }

    #[test]
    fn short_lines_and_empty_values_do_not_blank_the_output() {
        let masker = Masker::new([("A", b"x\nlonger-line".as_slice()), ("E", b"".as_slice())]);
        assert_eq!(masker.mask_str("x marks the spot"), "x marks the spot");
        assert_eq!(masker.mask_str("a longer-line"), "a [masked A]");
    }

    #[test]
    fn several_secrets_are_told_apart() {
        let masker = Masker::new([
            ("ONE", b"first-secret-value".as_slice()),
            ("TWO", b"second-secret-value".as_slice()),
        ]);
        assert_eq!(
            masker.mask_str("second-secret-value then first-secret-value"),
            "[masked TWO] then [masked ONE]"
        );
    }

    #[test]
    fn a_masker_never_shows_its_secrets_in_debug_output() {
        assert!(!format!("{:?}", masker()).contains("s3cr3t"));
    }

    proptest! {
        /// Whatever the chunking, a stream masks exactly as the whole text does.
        #[test]
        fn chunked_streams_mask_as_the_whole_does(
            noise in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            at in 0usize..200,
        ) {
            let masker = masker();
            let at = at.min(noise.len());
            let mut text = noise[..at].to_vec();
            text.extend_from_slice(SECRET.as_bytes());
            text.extend_from_slice(&noise[at..]);
            text.extend_from_slice(hex::encode(SECRET).as_bytes());
            let whole = masker.mask(&text);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut stream = masker.stream();
            let mut out = Vec::new();
            let mut from = 0;
            for cut in cuts {
                out.extend(stream.push(&text[from..cut]));
                from = cut;
            }
            out.extend(stream.push(&text[from..]));
            out.extend(stream.finish());
            prop_assert_eq!(&out, &whole);
            let needle = SECRET.as_bytes();
            prop_assert!(!out.windows(needle.len()).any(|w| w == needle));
        }

        /// Whatever the value and the bytes around it, its base64 is masked whole, in every
        /// alphabet, padded or not.
        #[test]
        fn base64_is_masked_whole_at_every_alignment(
            value in proptest::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 4..40),
            prefix in proptest::collection::vec(any::<u8>(), 0..6),
            suffix in proptest::collection::vec(any::<u8>(), 0..6),
            engine in 0usize..4,
        ) {
            let checked = check_base64_masked_whole(ENGINES[engine], &value, &prefix, &suffix);
            prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
        }

        /// Releasing what is settled after every chunk masks as the whole text does too.
        #[test]
        fn released_streams_mask_as_the_whole_does(
            noise in proptest::collection::vec(prop_oneof![Just(b's'), Just(b'3'), Just(b' '), any::<u8>()], 0..200),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            at in 0usize..200,
        ) {
            let masker = masker();
            let at = at.min(noise.len());
            let mut text = noise[..at].to_vec();
            text.extend_from_slice(SECRET.as_bytes());
            text.extend_from_slice(&noise[at..]);
            let whole = masker.mask(&text);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut stream = masker.stream();
            let mut out = Vec::new();
            let mut from = 0;
            for cut in cuts {
                out.extend(stream.push(&text[from..cut]));
                stream.release_settled(|part| out.extend_from_slice(part));
                from = cut;
            }
            out.extend(stream.push(&text[from..]));
            stream.release_settled(|part| out.extend_from_slice(part));
            out.extend(stream.finish());
            prop_assert_eq!(&out, &whole);
        }
    }

    #[test]
    fn a_screen_row_cut_inside_a_value_shows_none_of_it() {
        let masker = Masker::new([("PW", b"hunter2-value".as_slice())]);
        assert_eq!(
            masker.mask_screen("$ export T=hunter2-val\n2-value rest\nhunter2-value"),
            "$ export T=[masked PW]\n[masked PW] rest\n[masked PW]"
        );
        assert_eq!(
            masker.mask_screen("hun\nplain row\n"),
            "hun\nplain row\n",
            "fewer than MIN_FORM bytes, and rows without any, stay"
        );
    }

    #[test]
    fn a_prompt_after_a_secret_is_let_through_at_once_and_a_secret_s_start_is_held() {
        let masker = masker();
        let mut stream = masker.stream();
        let mut out = stream.push(format!("{SECRET}\r\nPassword: ").as_bytes());
        stream.release_settled(|part| out.extend_from_slice(part));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[masked API_TOKEN]\r\nPassword: "
        );
        let mut out = stream.push(b"next s3cr");
        stream.release_settled(|part| out.extend_from_slice(part));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "next ",
            "the start of a secret stays held"
        );
        let mut out = stream.push(b"ew");
        stream.release_settled(|part| out.extend_from_slice(part));
        assert_eq!(String::from_utf8(out).unwrap(), "s3crew");
    }
}
