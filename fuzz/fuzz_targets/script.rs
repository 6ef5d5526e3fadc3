//! Fuzzes the shell script reader behind policy (`script_commands`): it is deterministic, and a
//! script reads the same when it is handed to `sh -c`, quoted as a shell would quote it, or run
//! as an argv: the same commands after the shell itself, and opaque in one form only if opaque
//! in the other. A wrapper that hid a command, or a quoting that changed what a script runs,
//! would let policy decide on something other than what runs.
#![no_main]

use computer_surfaces::kit::script::{argv_commands, script_commands};
use libfuzzer_sys::fuzz_target;

/// libFuzzer's panic hook aborts on every panic, caught or not. The reader catches brush-parser's
/// own panics (the script reads as opaque, as in the daemon), so those pass; any other panic
/// still aborts.
fn pass_the_parsers_caught_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_parser = info
                .location()
                .is_some_and(|at| at.file().contains("brush-parser"));
            if !in_parser {
                abort(info);
            }
        }));
    });
}

fuzz_target!(|input: &[u8]| {
    pass_the_parsers_caught_panics();
    let Ok(script) = std::str::from_utf8(input) else {
        return;
    };
    // An argument of a program cannot hold a NUL byte.
    if script.contains('\0') {
        return;
    }
    let found = script_commands(script);
    assert_eq!(
        found,
        script_commands(script),
        "the reading is deterministic"
    );

    let quoted = format!("sh -c '{}'", script.replace('\'', r"'\''"));
    let wrapped = script_commands(&quoted);
    let argv = argv_commands(
        &["sh".to_string(), "-c".to_string(), script.to_string()],
        None,
    );
    for (how, outer) in [("quoted", &wrapped), ("argv", &argv)] {
        // Text the reader refuses before parsing (parentheses nested past its bound, counted
        // inside quotes too) lists no command at all: allowed only when both readings are
        // opaque, which policy never allows unasked.
        if outer.programs.is_empty() {
            assert!(
                outer.opaque.is_some() && found.opaque.is_some(),
                "{how}: no command listed, yet the script is not opaque"
            );
            continue;
        }
        assert_eq!(
            outer.programs.first().map(Vec::as_slice),
            Some(["sh".to_string(), "-c".to_string(), script.to_string()].as_slice()),
            "{how}: the shell itself comes first, with the script as one word"
        );
        if found.opaque.is_some() {
            assert!(
                outer.opaque.is_some(),
                "{how}: an opaque script stays opaque"
            );
        }
        // One level deeper may pass the nesting limit; only then may the forms differ.
        if outer.opaque.is_none() {
            assert_eq!(
                &outer.programs[1..],
                found.programs.as_slice(),
                "{how}: the same commands"
            );
        }
    }
});
