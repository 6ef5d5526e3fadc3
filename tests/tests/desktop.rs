//! The headless desktop harness itself: the X server, window manager, session bus and AT-SPI
//! answer clients other than ours.

use computer_tests::desktop::{Desktop, TestDesktop};

#[test]
fn the_shared_desktop_is_up_with_a_window_manager_and_accessibility() {
    let desktop = Desktop::shared();
    let out = desktop.command("xdpyinfo").output().unwrap();
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains("XTEST"), "XTEST missing:\n{info}");
    assert!(info.contains("1920x1080"), "{info}");
    let out = desktop
        .command("dbus-send")
        .args([
            "--session",
            "--print-reply",
            "--dest=org.a11y.Bus",
            "/org/a11y/bus",
            "org.freedesktop.DBus.Properties.Get",
            "string:org.a11y.Status",
            "string:IsEnabled",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("boolean true"));
}
