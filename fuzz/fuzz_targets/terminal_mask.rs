//! Fuzzes a session's terminal with a secret to mask: output of any shape (escape sequences,
//! queries, resizes, the secret's own forms cut and interleaved with escapes, chunked anywhere,
//! a second masker taking over mid-stream) goes through the emulator, and neither the log that
//! `read` serves nor the screen that `screen` renders ever holds the secret raw, in hex or in
//! base64 at any alignment.
#![no_main]

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use computer_surfaces::kit::mask::{MIN_FORM, Masker};
use computer_surfaces::shell::session::fuzzing::FuzzTerminal;
use libfuzzer_sys::fuzz_target;

/// Secrets are drawn from a small alphabet so that the rest of the input meets them often.
const ALPHABET: &[u8] = b"abcdefgh0123-_/+";
/// Separates the operations in the input.
const NEXT: u8 = 0xff;
/// An operation that resizes the terminal: `[RESIZE, rows, cols]`.
const RESIZE: u8 = 0xfe;
/// An operation that writes one form of the secret, the rest of the operation inside it:
/// `[FORM, which, bytes...]`.
const FORM: u8 = 0xfd;
/// An operation that hands the terminal a new masker (the secret, and one more).
const REMASK: u8 = 0xfc;

fuzz_target!(|input: &[u8]| {
    let Some((&length, rest)) = input.split_first() else {
        return;
    };
    let length = 4 + usize::from(length % 13);
    if rest.len() < length + 2 {
        return;
    }
    let (secret, rest) = rest.split_at(length);
    let secret: Vec<u8> = secret
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()])
        .collect();
    let (size, ops) = rest.split_at(2);
    let mut terminal = FuzzTerminal::new(
        u16::from(size[0] % 40) + 1,
        u16::from(size[1] % 120) + 1,
        1 << 16,
    );
    terminal.mask_with(Arc::new(Masker::new([("S", secret.as_slice())])));
    let forms = forms(&secret);

    for op in ops.split(|b| *b == NEXT) {
        match op {
            [RESIZE, rows, cols, ..] => {
                terminal.resize(u16::from(*rows % 40) + 1, u16::from(*cols % 120) + 1);
                check(
                    &terminal.screen_text().into_bytes(),
                    &forms,
                    "screen after a resize",
                );
            }
            [FORM, which, inside @ ..] => {
                let form = &forms[usize::from(*which) % forms.len()];
                let cut = inside.len() % (form.len() + 1);
                let bytes = [&form[..cut], inside, &form[cut..]].concat();
                terminal.feed(&bytes);
            }
            [REMASK, ..] => terminal.mask_with(Arc::new(Masker::new([
                ("S", secret.as_slice()),
                ("T", b"other-value".as_slice()),
            ]))),
            bytes => {
                terminal.feed(bytes);
            }
        }
    }
    check(&terminal.log_text(), &forms, "log");
    check(&terminal.screen_text().into_bytes(), &forms, "screen");
    terminal.finish();
    check(&terminal.log_text(), &forms, "log after the end");
});

/// The forms of the secret that must never show: raw, hex, and the characters of its base64
/// that it alone decides at each alignment.
fn forms(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![secret.to_vec()];
    forms.push(hex::encode(secret).into_bytes());
    forms.push(hex::encode_upper(secret).into_bytes());
    for offset in 0..3 {
        let mut shifted = vec![0u8; offset];
        shifted.extend_from_slice(secret);
        let encoded = STANDARD.encode(&shifted);
        let first = (offset * 8).div_ceil(6);
        let last = shifted.len() * 8 / 6;
        let core = encoded.as_bytes()[first..last].to_vec();
        if core.len() >= MIN_FORM {
            forms.push(core);
        }
    }
    forms
}

fn check(shown: &[u8], forms: &[Vec<u8>], what: &str) {
    // What the masks put in is not the secret, even where it shares letters with it.
    let mut text = Vec::with_capacity(shown.len());
    let mut at = 0;
    while at < shown.len() {
        if let Some(marker) = [&b"[masked S]"[..], &b"[masked T]"[..]]
            .into_iter()
            .find(|m| shown[at..].starts_with(m))
        {
            text.push(0);
            at += marker.len();
        } else {
            text.push(shown[at]);
            at += 1;
        }
    }
    for form in forms {
        assert!(
            !text.windows(form.len()).any(|w| w == form.as_slice()),
            "{what} shows {:?}: {:?}",
            String::from_utf8_lossy(form),
            String::from_utf8_lossy(shown)
        );
    }
}
