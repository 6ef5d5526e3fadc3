//! Benchmarks of the gui surface on a private headless sway (wlroots, from the e2e harness)
//! against same-run anchors: screen capture + PNG + sha256 in process vs `grim`, a receipted
//! `gui type` of 32 Unicode characters over the socket vs `wtype`, and a receipted click round
//! trip against the X11 backend's, interleaved. Run with
//! `cargo bench -p computer-daemon --bench wayland`; it prints markdown table rows.

mod common;

// The compositor, its socket and the anchors (grim, wtype) are Linux's: the bench runs there.
#[cfg(target_os = "linux")]
mod linux {

    use std::time::{Duration, Instant};

    use computer_tests::desktop::TestDesktop;
    use computer_tests::wayland::{Sway, TypingTarget};
    use computer_tests::{Daemon, RawConnection};
    use serde_json::{Value, json};

    use crate::common::{ms, p50};

    /// One gui call over a raw connection (no client library in the timing); it must succeed.
    fn gui(raw: &mut RawConnection, command: &str, args: Value) -> Value {
        let (reply, _) =
            raw.call_tool(&json!({"surface": "gui", "command": command, "args": args}));
        assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
        reply["result"].clone()
    }

    pub fn main() {
        // SAFETY: set before any other thread exists; the harness reads it to find the binary.
        unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
        let sway = Sway::shared();
        let target = TypingTarget::launch("bench-typing");

        // (1) Full-screen capture + PNG + sha256, in process, vs grim writing a PNG to stdout.
        for (key, value) in sway.env() {
            // SAFETY: the bench reads no environment from other threads (the harness's spawner
            // thread reads none).
            unsafe { std::env::set_var(key, value) };
        }
        // SAFETY: as above.
        unsafe { std::env::remove_var("DISPLAY") };
        let (_, width, height, _) = computer_surfaces::gui::capture_screen_png().expect("capture");
        let runs = 20;
        let ours: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                let (png, _, _, sha) = computer_surfaces::gui::capture_screen_png().unwrap();
                assert!(!png.is_empty() && sha.len() == 64);
                started.elapsed()
            })
            .collect();
        let grim: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                let out = sway.command("grim").arg("-").output().expect("grim");
                assert!(out.status.success() && !out.stdout.is_empty());
                started.elapsed()
            })
            .collect();
        let (ours, grim) = (p50(ours), p50(grim));

        // (2) Typing 32 characters (Latin, accents, CJK, emoji) into foot: a receipted call over
        // the socket vs wtype (its own virtual keyboard, made per run).
        let daemon = sway.start_daemon("");
        let mut client = RawConnection::connect(&daemon.socket);
        client.initialize("2025-11-25");
        let windows = gui(&mut client, "windows", json!({}));
        let id = windows["structuredContent"]["windows"]
            .as_array()
            .and_then(|list| {
                list.iter()
                    .find(|w| w["pid"].as_u64() == Some(u64::from(target.pid)))
            })
            .map(|w| w["id"].clone())
            .expect("the typing target is listed");
        gui(&mut client, "focus", json!({"window": id}));
        let text = "héllo wörld ✓ 日本語 🙂 ÆØÅ abc12xyz";
        assert_eq!(text.chars().count(), 32);
        let typing_runs = 20;
        let mut expected = Vec::new();
        let typed: Vec<Duration> = (0..typing_runs)
            .map(|_| {
                let started = Instant::now();
                gui(&mut client, "type", json!({"text": text}));
                expected.extend_from_slice(text.as_bytes());
                started.elapsed()
            })
            .collect();
        target.wait_typed(&expected);
        let wtype: Vec<Duration> = (0..typing_runs)
            .map(|_| {
                let started = Instant::now();
                let status = sway.command("wtype").arg(text).status().expect("wtype");
                assert!(status.success());
                started.elapsed()
            })
            .collect();
        let (typed, wtype) = (p50(typed), p50(wtype));

        // (3) A receipted click round trip over the socket, interleaved click for click with the
        // X11 backend's (the same daemon binary on Xvfb + openbox, its own daemon): the two
        // meet the same load, which on a shared machine moves more than either costs.
        let desktop = computer_tests::desktop::Desktop::shared();
        let x11 = Daemon::start_with_env("", &desktop.env(), &["WAYLAND_DISPLAY", "SWAYSOCK"]);
        let mut x11_client = RawConnection::connect(&x11.socket);
        x11_client.initialize("2025-11-25");
        let (x, y) = (1500, 900);
        for _ in 0..20 {
            gui(&mut client, "click", json!({"x": x, "y": y}));
            gui(&mut x11_client, "click", json!({"x": x, "y": y}));
        }
        let mut clicks = Vec::new();
        let mut x11_clicks = Vec::new();
        for i in 0..200 {
            let started = Instant::now();
            gui(&mut client, "click", json!({"x": x + i % 50, "y": y}));
            clicks.push(started.elapsed());
            let started = Instant::now();
            gui(&mut x11_client, "click", json!({"x": x + i % 50, "y": y}));
            x11_clicks.push(started.elapsed());
        }
        let (clicks, x11_clicks) = (p50(clicks), p50(x11_clicks));
        // Where a click's time goes: a receipted call that asks the compositor nothing
        // (`monitors`, answered from what the connection already knows), and a window listing.
        let floor = p50((0..100)
            .map(|_| {
                let started = Instant::now();
                gui(&mut client, "monitors", json!({}));
                started.elapsed()
            })
            .collect());
        let listing = p50((0..100)
            .map(|_| {
                let started = Instant::now();
                gui(&mut client, "windows", json!({}));
                started.elapsed()
            })
            .collect());

        let ratio = |a: f64, b: f64| format!("{:.3}×", a / b);
        println!("| measure | computer | anchor (same run) | ratio | target |");
        println!("|---|---|---|---|---|");
        println!(
            "| {width}×{height} capture + PNG + sha256, wlr-screencopy (p50 of {runs}) | {} | {} (`grim -`) | {} | ≤ 1× |",
            ms(ours),
            ms(grim),
            ratio(ours.as_secs_f64(), grim.as_secs_f64())
        );
        println!(
            "| receipted `gui type` of 32 Unicode characters into foot (p50 of {typing_runs}) | {} | {} (`wtype TEXT`) | {} | ≤ 1× |",
            ms(typed),
            ms(wtype),
            ratio(typed.as_secs_f64(), wtype.as_secs_f64())
        );
        println!(
            "| receipted `gui click` round trip over the socket (p50 of 200) | {} | {} (the X11 backend's, on Xvfb + openbox, interleaved) | {} | ≤ 1.5× X11 |",
            ms(clicks),
            ms(x11_clicks),
            ratio(clicks.as_secs_f64(), x11_clicks.as_secs_f64())
        );
        println!(
            "| receipted `gui monitors` (no compositor round trip; the pipeline's floor, p50 of 100) | {} | — | — | — |",
            ms(floor),
        );
        println!(
            "| receipted `gui windows` (p50 of 100) | {} | — | — | — |",
            ms(listing),
        );
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the Wayland bench runs on Linux, against a headless sway, grim and wtype");
}
