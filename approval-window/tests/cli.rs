//! The window's command line without a desktop: it refuses to start with an error that says
//! what is missing and where to answer instead. (Being an integration test of this package, it
//! also makes `cargo test` build the binary that the end-to-end suites start.)

use std::process::Command;

#[test]
fn without_a_display_it_says_so_and_points_to_the_terminal_approver() {
    let out = Command::new(env!("CARGO_BIN_EXE_computer-approval-window"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("COMPUTER_CONTROL_SOCKET", "/nonexistent/control.sock")
        .output()
        .expect("run computer-approval-window");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("no graphical session") && stderr.contains("computer approve"),
        "{stderr}"
    );
}

#[test]
fn help_names_the_control_socket_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_computer-approval-window"))
        .arg("--help")
        .output()
        .expect("run computer-approval-window --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--control-socket"), "{help}");
}
