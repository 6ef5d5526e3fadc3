//! Benchmarks of the gui surface on a private headless GNOME compositor (Mutter 43, from the e2e
//! harness) against same-run anchors: a screen capture + PNG + sha256 in process (the latest
//! frame of the backend's screen cast) vs `gst-launch-1.0 pipewiresrc` writing one frame of an
//! independent screen cast as a PNG; a receipted `gui screenshot` over the socket; a receipted
//! `gui type` of 32 ASCII characters; and a receipted click round trip against the X11
//! backend's, interleaved. Run with
//! `cargo bench -p computer-daemon --bench gnome`; it prints markdown table rows.

mod common;

// Mutter, PipeWire and the anchor (gst-launch) are Linux's: the bench runs there.
#[cfg(target_os = "linux")]
mod linux {

    use std::time::{Duration, Instant};

    use computer_tests::desktop::TestDesktop;
    use computer_tests::gnome::{IndependentCast, Mutter, Probe};
    use computer_tests::{Daemon, RawConnection, wait_for};
    use serde_json::{Value, json};

    use crate::common::{ms, p50};

    /// One gui call over a raw connection (no client library in the timing); it must succeed.
    fn gui(raw: &mut RawConnection, command: &str, args: Value) -> Value {
        let (reply, _) =
            raw.call_tool(&json!({"surface": "gui", "command": command, "args": args}));
        assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
        reply["result"].clone()
    }

    /// The person's consent, kept in the fixture's keychain: the first screenshot asks, and the
    /// bench answers as the person would (`computer approvals allow`). The in-process backend
    /// reads the same keychain.
    fn grant_consent(daemon: &Daemon) {
        let socket = daemon.socket.clone();
        let call = std::thread::spawn(move || {
            let mut client = RawConnection::connect(&socket);
            client.initialize("2025-11-25");
            gui(&mut client, "screenshot", json!({}))
        });
        let pending = wait_for("the consent to be asked", Duration::from_secs(30), || {
            daemon
                .pending_approvals()
                .into_iter()
                .find(|r| r.to_string().contains("consent needed"))
        });
        let allowed = daemon.cli(&["approvals", "allow", &pending["id"].to_string()]);
        assert!(allowed.status.success(), "{}", allowed.stderr);
        call.join().expect("the consented screenshot");
    }

    pub fn main() {
        // SAFETY: set before any other thread exists; the harness reads it to find the binary.
        unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
        let mutter = Mutter::shared();
        let probe = Probe::launch("bench-gnome");
        let daemon = mutter.start_daemon("");
        grant_consent(&daemon);

        // (1) Full-screen capture + PNG + sha256, in process, vs gst-launch writing a PNG.
        for (key, value) in mutter.env() {
            // SAFETY: the bench reads no environment from other threads (the harness's spawner
            // thread reads none).
            unsafe { std::env::set_var(key, value) };
        }
        // SAFETY: as above.
        unsafe { std::env::remove_var("DISPLAY") };
        // The first capture starts the remote-desktop session (once per backend).
        let started = Instant::now();
        let (_, width, height, _) = computer_surfaces::gui::capture_screen_png().expect("capture");
        let first = started.elapsed();
        let runs = 20;
        let ours: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                let (png, _, _, sha) = computer_surfaces::gui::capture_screen_png().unwrap();
                assert!(!png.is_empty() && sha.len() == 64);
                started.elapsed()
            })
            .collect();
        let cast = IndependentCast::start();
        let file = mutter.log_dir.join("bench-gst.png");
        let gst: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                assert!(!cast.capture(&file).is_empty());
                started.elapsed()
            })
            .collect();
        let (ours, gst) = (p50(ours), p50(gst));

        // (2) Receipted calls over the socket: a screenshot, typing, a click.
        let mut client = RawConnection::connect(&daemon.socket);
        client.initialize("2025-11-25");
        gui(&mut client, "screenshot", json!({}));
        let shots: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                gui(&mut client, "screenshot", json!({}));
                started.elapsed()
            })
            .collect();
        let text = "The quick brown fox jumps over 1";
        assert_eq!(text.len(), 32);
        let typed: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                gui(&mut client, "type", json!({"text": text}));
                started.elapsed()
            })
            .collect();
        let want = text.repeat(runs);
        probe.wait_for_line("the typed text", |v| v["text"] == want.as_str());
        // The click, interleaved click for click with the X11 backend's (the same daemon binary
        // on Xvfb + openbox, its own daemon), so that both meet the same load.
        let desktop = computer_tests::desktop::Desktop::shared();
        let x11 = Daemon::start_with_env(
            "",
            &desktop.env(),
            &["WAYLAND_DISPLAY", "SWAYSOCK", "XDG_RUNTIME_DIR"],
        );
        let mut x11_client = RawConnection::connect(&x11.socket);
        x11_client.initialize("2025-11-25");
        let (x, y) = (1000, 700);
        for _ in 0..10 {
            gui(&mut client, "click", json!({"x": x, "y": y}));
            gui(&mut x11_client, "click", json!({"x": x, "y": y}));
        }
        let mut clicks = Vec::new();
        let mut x11_clicks = Vec::new();
        for i in 0..100 {
            let started = Instant::now();
            gui(&mut client, "click", json!({"x": x + i % 50, "y": y}));
            clicks.push(started.elapsed());
            let started = Instant::now();
            gui(&mut x11_client, "click", json!({"x": x + i % 50, "y": y}));
            x11_clicks.push(started.elapsed());
        }
        let (shots, typed) = (p50(shots), p50(typed));
        let (clicks, x11_clicks) = (p50(clicks), p50(x11_clicks));

        let ratio = |a: f64, b: f64| format!("{:.3}×", a / b);
        println!("| measure | computer | anchor (same run) | ratio | target |");
        println!("|---|---|---|---|---|");
        println!(
            "| {width}×{height} capture + PNG + sha256, Mutter screen cast over PipeWire (p50 of {runs}) | {} | {} (`gst-launch-1.0 pipewiresrc … num-buffers=1 ! videoconvert ! pngenc`) | {} | ≤ 1× |",
            ms(ours),
            ms(gst),
            ratio(ours.as_secs_f64(), gst.as_secs_f64())
        );
        println!(
            "| first capture, starting the remote-desktop session (once per daemon) | {} | — | — | — |",
            ms(first)
        );
        println!(
            "| receipted `gui screenshot` over the socket (p50 of {runs}) | {} | — (compare the X11 and wlroots rows) | — | ≤ 1.5× X11 |",
            ms(shots)
        );
        println!(
            "| receipted `gui type` of 32 ASCII characters, focus confirmed over AT-SPI (p50 of {runs}) | {} | — | — | — |",
            ms(typed)
        );
        println!(
            "| receipted `gui click` round trip over the socket (p50 of 100) | {} | {} (the X11 backend's, on Xvfb + openbox, interleaved) | {} | ≤ 1.5× X11 |",
            ms(clicks),
            ms(x11_clicks),
            ratio(clicks.as_secs_f64(), x11_clicks.as_secs_f64())
        );
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the GNOME bench runs on Linux, against a headless Mutter, PipeWire and gst-launch");
}
