//! Which suite a harness call comes from, and what the harness keeps once per suite. Every
//! suite is a module of the one test binary (a file under `tests/tests/`), and tests of
//! different suites run at the same time in that one process; a desktop, a compositor and the
//! like are therefore started once per suite, as when each suite was a process of its own, so
//! no suite's windows, focus or grabs reach another's tests.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::panic::Location;
use std::path::{Component, Path};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The suite of the code that called the caller: the file or folder under `tests/tests/` that
/// the `#[track_caller]` chain leads to (`gui` for `tests/tests/gui.rs`), or the calling file's
/// name elsewhere (a bench of its own, `daemon/benches/gui.rs`, is `gui`). Harness code under
/// `tests/src/` has no suite of its own: a call from there is a harness bug, which this names.
#[track_caller]
pub fn calling_suite() -> &'static str {
    let file = Location::caller().file();
    suite_of_file(file).unwrap_or_else(|| {
        panic!(
            "{file} is harness code, not a suite: it must pass its caller's suite on (a \
             #[track_caller] function, or the *_of(suite) form)"
        )
    })
}

/// The suite a source file belongs to: the component after the crate's `tests/tests/` folder,
/// or else the file's own name, without `.rs`; None for the harness's own files.
fn suite_of_file(file: &'static str) -> Option<&'static str> {
    let parts: Vec<&'static str> = Path::new(file)
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    let pair_at = |pair: [&str; 2]| parts.windows(2).rposition(|two| two == pair);
    if pair_at(["tests", "src"]).is_some() {
        return None;
    }
    let suite = match pair_at(["tests", "tests"]) {
        Some(suites_dir) => parts.get(suites_dir + 2)?,
        None => parts.last()?,
    };
    Some(suite.strip_suffix(".rs").unwrap_or(suite))
}

/// The one `T` of `suite`, started by `start` on first use and kept for the life of the test
/// process (its processes die with it). Suites starting theirs at the same time do not wait
/// for each other; a `start` that panics leaves the slot empty for the next caller.
pub fn per_suite<T: Send + Sync + 'static>(suite: &str, start: impl FnOnce() -> T) -> &'static T {
    type Slots = HashMap<(TypeId, String), &'static (dyn Any + Send + Sync)>;
    static SLOTS: OnceLock<Mutex<Slots>> = OnceLock::new();
    let slot: &'static (dyn Any + Send + Sync) = *SLOTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry((TypeId::of::<T>(), suite.to_string()))
        .or_insert_with(|| Box::leak(Box::new(OnceLock::<T>::new())));
    slot.downcast_ref::<OnceLock<T>>()
        .expect("a slot holds the type it is keyed by")
        .get_or_init(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_is_the_file_or_folder_under_tests_tests() {
        assert_eq!(suite_of_file("tests/tests/gui.rs"), Some("gui"));
        assert_eq!(
            suite_of_file("/w/main/tests/tests/real_apps.rs"),
            Some("real_apps")
        );
        assert_eq!(suite_of_file("tests/tests/gui/pointer.rs"), Some("gui"));
        assert_eq!(
            suite_of_file("daemon/benches/real_apps.rs"),
            Some("real_apps")
        );
        assert_eq!(suite_of_file("tests/src/gnome.rs"), None);
        assert_eq!(suite_of_file("tests/tests"), None);
    }

    #[test]
    fn each_suite_gets_its_own_value_and_keeps_it() {
        let first = per_suite("alpha", || String::from("alpha's"));
        let again = per_suite("alpha", || String::from("never started"));
        let other = per_suite("beta", || String::from("beta's"));
        assert!(std::ptr::eq(first, again));
        assert_eq!(again, "alpha's");
        assert_eq!(other, "beta's");
    }
}
