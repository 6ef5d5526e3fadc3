//! Policy: who is calling, and whether a call is allowed, denied or asked of a person. Declared
//! rules over defaults by risk; deny wins, then ask, then allow. Paths that hold the daemon's own
//! config and state are protected from the shell surface whatever the rules say.
//!
//! # Layout
//! - [`caller`]: the caller and the input policy decides on; decisions; the `Policy` trait.
//! - [`rules`]: rules and matching, and `RulePolicy`, which decides by them.
//! - [`paths`]: a call's words read as paths, for the checks below.
//! - [`protected`]: protected paths, login files and the daemon's own controls.
//! - `tests`: policy's own tests.

mod caller;
mod paths;
mod protected;
mod rules;
#[cfg(test)]
mod tests;

pub use caller::*;
pub use rules::*;
