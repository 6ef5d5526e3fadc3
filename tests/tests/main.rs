//! The end-to-end suites, built as one test binary: each suite is a module here, one file of
//! this folder named for its area (`gui` is `gui.rs`), and docs/src/dev/testing.md says which
//! suite covers which feature. One binary links the dependency tree once, where a binary per
//! suite linked it once each.
//!
//! The suites share this process, and tests of different suites run at the same time (on
//! `--test-threads`, the machine's cores by default). What a suite's tests share is the
//! suite's own: the desktop, compositor or keyring the harness starts is one per suite
//! (`computer_tests::suite`), and a suite's statics (the locks that take turns on its desktop)
//! are its module's. No suite sets environment variables, changes the working directory or
//! counts the test process's own children or files, and the processes a test looks for are
//! found by a command line no other suite runs.
//!
//! Run one suite, or one test:
//!
//! ```text
//! cargo test -p computer-tests --test suite gui::
//! cargo test -p computer-tests --test suite gui::typed_unicode
//! ```
//!
//! To add a suite: a file `NAME.rs` here that opens with a `//!` line saying what it covers, a
//! `mod NAME;` line below in alphabetical order (with the suite's `#[cfg(...)]` on that line
//! when it is for one platform, not as a `#![cfg]` in the file), and its row in
//! docs/src/dev/testing.md. Its harness calls (`Desktop::shared()`, `TestApp::launch`, ...)
//! find the suite by the file they are called from.

mod abuse;
mod agent_desktops;
#[cfg(target_os = "linux")]
mod agent_desktops_wayland;
mod agent_pointer;
mod agents;
#[cfg(not(target_os = "macos"))]
mod applescript;
mod approval_window;
mod approvals;
mod approver_protection;
mod ax;
mod cli;
mod containment;
mod desktop;
mod docs;
mod effects;
mod export;
mod export_sinks;
mod facts;
#[cfg(target_os = "linux")]
mod gnome;
mod gui;
mod house_rules;
mod jobs;
#[cfg(target_os = "linux")]
mod keychain;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod layout;
mod lifecycle;
#[cfg(target_os = "macos")]
mod macos;
mod mcp_clients;
mod observe_only;
mod pipeline;
mod policy;
#[cfg(target_os = "linux")]
mod portal;
mod protocol;
#[cfg(target_os = "linux")]
mod real_apps;
mod receipts;
mod remote;
mod replies;
#[cfg(target_os = "linux")]
mod secrets;
#[cfg(target_os = "linux")]
mod seen;
mod sessions;
mod shell;
mod steps;
mod terminal_typing;
#[cfg(target_os = "linux")]
mod tools;
#[cfg(target_os = "linux")]
mod wayland;

/// Every file of this folder is a suite declared above: with one binary, cargo no longer
/// builds a file on its own, so a suite left out would silently never run.
#[test]
fn every_file_here_is_a_declared_suite() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("main.rs");
    let undeclared: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/tests")
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let suite = name.strip_suffix(".rs").unwrap_or(&name).to_string();
            (suite != "main" && !main.lines().any(|line| line == format!("mod {suite};")))
                .then_some(name)
        })
        .collect();
    assert!(
        undeclared.is_empty(),
        "tests/tests/{undeclared:?} is not a suite of the test binary: add `mod NAME;` to \
         tests/tests/main.rs (see its module doc)"
    );
}
