//! Benchmarks of the gui surface against same-run anchors on a private headless desktop (Xvfb +
//! openbox, from the e2e harness): screen capture + PNG + sha256 in process vs ImageMagick
//! `import`, a receipted click over the socket vs `xdotool`, the model-visible bytes of a
//! structured gui result vs an inline screenshot, and the daemon's memory: idle, after 100
//! screenshots and a minute later (buffers returned, not kept), with its process tree, and the
//! cost of an act's effect read-back (a click with it against the same click without, and against
//! the app's own reaction: the click sent straight to the X server and the app's state-change
//! signal heard by a listener that knew what to wait for). Run with
//! `cargo bench -p computer-daemon --bench gui`; it prints markdown table rows.

mod common;

use std::time::{Duration, Instant};

use computer_tests::desktop::{Desktop, TestDesktop};
use computer_tests::{Daemon, RawConnection};
use serde_json::{Value, json};

use crate::common::{ms, p50};

/// One gui call over a raw connection (no client library in the timing); it must succeed.
fn gui(raw: &mut RawConnection, command: &str, args: Value, complications: Value) -> Value {
    let (reply, _) = raw.call_tool(&json!({"surface": "gui", "command": command,
        "args": args, "complications": complications}));
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
    reply["result"].clone()
}

/// A process's resident set, KiB: all of it, its anonymous part and its file-backed part
/// (`VmRSS`, `RssAnon`, `RssFile` + `RssShmem`).
struct Memory {
    rss: u64,
    anon: u64,
    file: u64,
}

impl Memory {
    fn of(pid: i32) -> Memory {
        let status = format!("/proc/{pid}/status");
        Memory {
            rss: status_kib(&status, "VmRSS:"),
            anon: status_kib(&status, "RssAnon:"),
            file: status_kib(&status, "RssFile:") + status_kib(&status, "RssShmem:"),
        }
    }
}

/// The proportional set size of a process and every descendant, KiB: shared pages (the binary
/// the daemon and its containment zygote share) counted once across them.
fn tree_pss_kib(pid: i32) -> u64 {
    let mut total = status_kib(&format!("/proc/{pid}/smaps_rollup"), "Pss:");
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
        total += tree_pss_kib(child);
    }
    total
}

fn status_kib(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    // SAFETY: set before any other thread exists; the harness reads it to find the binary.
    unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
    let desktop = Desktop::shared();
    let _xterm = desktop.launch(
        "xterm",
        &["-title", "bench-xterm", "-geometry", "80x24+50+50"],
    );
    computer_tests::wait_for("the xterm window", Duration::from_secs(20), || {
        let out = desktop
            .command("xdotool")
            .args(["search", "--name", "^bench-xterm$"])
            .output()
            .ok()?;
        (!out.stdout.is_empty()).then_some(())
    });

    // (1) Full-screen capture + PNG + sha256, in process, vs ImageMagick `import`.
    // SAFETY: the bench is still single-threaded apart from the harness's spawner thread, which
    // reads no environment.
    unsafe { std::env::set_var("DISPLAY", &desktop.display) };
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
    let import: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let out = desktop
                .command("import")
                .args(["-window", "root", "png:-"])
                .output()
                .expect("ImageMagick import");
            assert!(out.status.success() && !out.stdout.is_empty());
            started.elapsed()
        })
        .collect();
    let (ours, import) = (p50(ours), p50(import));

    // (2) A receipted click over the socket with the real daemon (its defaults: facts stated,
    // the effect read back) vs xdotool. The point has no window under it, as a click on a bare
    // desktop; (5) measures the read-back where there is something to read.
    let daemon = Daemon::start_on_desktop("");
    let mut client = RawConnection::connect(&daemon.socket);
    client.initialize("2025-11-25");
    // Idle: started, one connection made, containment proven (a run through it).
    let (_, _) = client.call_tool(&json!({"surface": "shell", "command": "run",
        "args": {"argv": ["true"]}}));
    let idle = Memory::of(daemon.pid());
    let idle_tree_pss = tree_pss_kib(daemon.pid());
    let (x, y) = (700, 400);
    for _ in 0..20 {
        gui(&mut client, "click", json!({"x": x, "y": y}), json!({}));
    }
    let clicks: Vec<Duration> = (0..200)
        .map(|i| {
            let started = Instant::now();
            gui(
                &mut client,
                "click",
                json!({"x": x + i % 50, "y": y}),
                json!({}),
            );
            started.elapsed()
        })
        .collect();
    let xdotool: Vec<Duration> = (0..50)
        .map(|i| {
            let started = Instant::now();
            let status = desktop
                .command("xdotool")
                .args(["mousemove", &(x + i % 50).to_string(), &y.to_string()])
                .args(["click", "--delay", "0", "1"])
                .status()
                .expect("xdotool");
            assert!(status.success());
            started.elapsed()
        })
        .collect();
    let (clicks, xdotool) = (p50(clicks), p50(xdotool));

    // (3) Model-visible bytes: structured results vs the same step answered with a screenshot.
    let visible = |result: &Value| serde_json::to_vec(result).unwrap().len();
    let windows = visible(&gui(&mut client, "windows", json!({}), json!({})));
    let click = visible(&gui(
        &mut client,
        "click",
        json!({"x": x, "y": y}),
        json!({}),
    ));
    let shot = visible(&gui(
        &mut client,
        "screenshot",
        json!({"max_dim": 1280}),
        json!({"return": {"image": true}}),
    ));

    // (4) Memory after 100 full-screen screenshots (each captured, scaled, PNG-encoded and
    // hashed), at once and a minute later: what the daemon keeps of them. Split in two: its
    // anonymous memory (buffers, what it must give back) and its file-backed pages, which grow
    // once, by the code of the screenshot path that the first shot maps in (laid out apart from
    // the idle code, it is not resident before; measured after that first shot too).
    gui(&mut client, "screenshot", json!({}), json!({}));
    let one_shot = Memory::of(daemon.pid());
    for _ in 0..99 {
        gui(&mut client, "screenshot", json!({}), json!({}));
    }
    let after_shots = Memory::of(daemon.pid());
    std::thread::sleep(Duration::from_secs(60));
    let minute_later = Memory::of(daemon.pid());

    // (5) The effect read-back's cost: a click on the GTK test app's check button (its state
    // read back through AT-SPI, confirmed once it flips) and a click on a plain area (no window
    // there: judged on the first read after it), each through a daemon that reads back (the
    // default) and one that does not, alternating, same run.
    let mut reader = client;
    let not_reading = Daemon::start_on_desktop("[gui]\nread_back = false\n");
    let mut client = RawConnection::connect(&not_reading.socket);
    client.initialize("2025-11-25");
    let app = computer_tests::desktop::TestApp::launch("Effect Bench");
    let read = computer_tests::wait_for("the app on AT-SPI", Duration::from_secs(20), || {
        let (reply, _) = reader.call_tool(&json!({"surface": "ax", "command": "read",
            "args": {"app": app.pid(), "selector": "checkBox \"Dark mode\""}}));
        reply["result"]["structuredContent"]["bounds"]
            .as_array()
            .map(|b| b.iter().map(|v| v.as_i64().unwrap()).collect::<Vec<i64>>())
    });
    let (check_x, check_y) = (read[0] + read[2] / 2, read[1] + read[3] / 2);
    #[cfg(target_os = "linux")]
    let mut reaction = AppReaction::listen(desktop);
    #[cfg(target_os = "linux")]
    let mut app_reaction = Vec::new();
    let mut effects = std::collections::BTreeMap::new();
    let mut timed = |raw: &mut RawConnection, at: (i64, i64)| {
        let started = Instant::now();
        let result = gui(raw, "click", json!({"x": at.0, "y": at.1}), json!({}));
        let elapsed = started.elapsed();
        let effect = result["structuredContent"]["effect"]
            .as_str()
            .unwrap_or("")
            .to_string();
        *effects.entry(effect).or_insert(0) += 1;
        elapsed
    };
    let (mut check_on, mut check_off, mut plain_on, mut plain_off) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..30 {
        check_on.push(timed(&mut reader, (check_x, check_y)));
        #[cfg(target_os = "linux")]
        reaction.settled();
        check_off.push(timed(&mut client, (check_x, check_y)));
        // The click without read-back returns before the app took it: its signal is awaited
        // (untimed) so that it is not taken for the next click's.
        #[cfg(target_os = "linux")]
        {
            reaction.settled();
            app_reaction.push(reaction.click((check_x, check_y)));
        }
    }
    // The screen's bottom right corner: no window there.
    let plain = (i64::from(width) - 30, i64::from(height) - 30);
    for i in 0..10 {
        plain_on.push(timed(&mut reader, (plain.0 + i, plain.1)));
        plain_off.push(timed(&mut client, (plain.0 + i, plain.1)));
    }
    drop(app);
    #[cfg(target_os = "linux")]
    reaction.finish();
    let (check_on, check_off, plain_on, plain_off) =
        (p50(check_on), p50(check_off), p50(plain_on), p50(plain_off));

    let ratio = |a: f64, b: f64| format!("{:.3}×", a / b);
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!("| measure | computer | anchor (same run) | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| {width}×{height} capture + PNG + sha256 (p50 of {runs}) | {} | {} (`import -window root png:-`) | {} | ≤ 0.2× |",
        ms(ours),
        ms(import),
        ratio(ours.as_secs_f64(), import.as_secs_f64())
    );
    println!(
        "| receipted `gui click` round trip over the socket, defaults (facts stated, effect read back; p50 of 200) | {} | {} (`xdotool mousemove X Y click --delay 0 1`, p50 of 50) | {} | p50 ≤ 0.8 ms |",
        ms(clicks),
        ms(xdotool),
        ratio(clicks.as_secs_f64(), xdotool.as_secs_f64())
    );
    println!(
        "| model-visible bytes: `gui windows` result | {windows} B | {shot} B (screenshot inline, base64 PNG, max_dim 1280) | {} | smaller |",
        ratio(windows as f64, shot as f64)
    );
    println!(
        "| model-visible bytes: `gui click` result | {click} B | {shot} B (same step answered with an inline screenshot) | {} | smaller |",
        ratio(click as f64, shot as f64)
    );
    println!(
        "| `gui click` on a check button, effect read back (p50 of 30; effects seen: {effects:?}) | {} | {} (same click, `[gui] read_back = false`, p50 of 30) | {} | ≤ 1.3× |",
        ms(check_on),
        ms(check_off),
        ratio(check_on.as_secs_f64(), check_off.as_secs_f64())
    );
    #[cfg(target_os = "linux")]
    {
        let app_reaction = p50(app_reaction);
        println!(
            "| `gui click` on a check button, effect read back (p50 of 30), against the app's own reaction | {} | {} (the same click sent by XTest from the bench, to the app's `checked` state-change signal on a subscription made beforehand; p50 of 30) | {} | — |",
            ms(check_on),
            ms(app_reaction),
            ratio(check_on.as_secs_f64(), app_reaction.as_secs_f64())
        );
    }
    println!(
        "| `gui click` on a plain area, effect read back (p50 of 10) | {} | {} (same click, read-back off, p50 of 10) | {} | ≤ 1.3× |",
        ms(plain_on),
        ms(plain_off),
        ratio(plain_on.as_secs_f64(), plain_off.as_secs_f64())
    );
    println!("| daemon RSS idle | {} | — | — | ≤ 12 MiB |", mib(idle.rss));
    println!(
        "| PSS of the daemon's process tree idle (daemon, containment zygote, its slots) | {} | — | — | ≤ 20 MiB |",
        mib(idle_tree_pss)
    );
    println!(
        "| daemon RSS after 100 screenshots / one minute later | {} / {} | idle: {} | +{} a minute later | within 2 MiB of idle |",
        mib(after_shots.rss),
        mib(minute_later.rss),
        mib(idle.rss),
        mib(minute_later.rss.saturating_sub(idle.rss))
    );
    println!(
        "| of which anonymous (buffers): idle / after 100 screenshots / one minute later | {} / {} / {} | idle: {} | +{} a minute later | within 2 MiB of idle |",
        mib(idle.anon),
        mib(after_shots.anon),
        mib(minute_later.anon),
        mib(idle.anon),
        mib(minute_later.anon.saturating_sub(idle.anon))
    );
    println!(
        "| of which file-backed (code): idle / after the first screenshot / after 100 / one minute later | {} / {} / {} / {} | after the first: {} | +{} over the first | no growth after the first |",
        mib(idle.file),
        mib(one_shot.file),
        mib(after_shots.file),
        mib(minute_later.file),
        mib(one_shot.file),
        mib(minute_later.file.saturating_sub(one_shot.file))
    );
}

/// The floor under any read-back of a toggle: how soon the app itself says it took a click. The
/// click goes straight to the X server (XTest, as the daemon sends it) and the time runs until
/// the app's `object:state-changed:checked` signal reaches a listener subscribed to it before,
/// on the accessibility bus: no hit test, no read, no receipt, only the app's reaction.
#[cfg(target_os = "linux")]
struct AppReaction {
    signals: zbus::MessageStream,
    // Kept open: the subscription lives on it.
    _bus: zbus::Connection,
    x: x11rb::rust_connection::RustConnection,
    root: u32,
    runtime: tokio::runtime::Runtime,
}

#[cfg(target_os = "linux")]
impl AppReaction {
    fn listen(desktop: &Desktop) -> AppReaction {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let session = desktop
            .env()
            .into_iter()
            .find(|(name, _)| *name == "DBUS_SESSION_BUS_ADDRESS")
            .expect("the desktop's session bus")
            .1;
        let (bus, signals) = runtime.block_on(async {
            let session = zbus::connection::Builder::address(session.as_str())
                .unwrap()
                .build()
                .await
                .expect("the session bus");
            let reply = session
                .call_method(
                    Some("org.a11y.Bus"),
                    "/org/a11y/bus",
                    Some("org.a11y.Bus"),
                    "GetAddress",
                    &(),
                )
                .await
                .expect("the accessibility bus's address");
            let address: String = reply.body().deserialize().unwrap();
            let bus = zbus::connection::Builder::address(address.as_str())
                .unwrap()
                .build()
                .await
                .expect("the accessibility bus");
            let rule = zbus::MatchRule::builder()
                .msg_type(zbus::message::Type::Signal)
                .interface("org.a11y.atspi.Event.Object")
                .and_then(|b| b.member("StateChanged"))
                .and_then(|b| b.arg(0, "checked"))
                .unwrap()
                .build();
            let signals = zbus::MessageStream::for_match_rule(rule, &bus, Some(64))
                .await
                .expect("a subscription to state changes");
            (bus, signals)
        });
        let (x, root) = desktop.x_connection();
        AppReaction {
            runtime,
            signals,
            _bus: bus,
            x,
            root,
        }
    }

    /// Takes the subscription back inside the runtime, which zbus needs to send the request.
    fn finish(self) {
        let AppReaction {
            signals,
            _bus,
            runtime,
            ..
        } = self;
        let entered = runtime.enter();
        drop(signals);
        drop(_bus);
        drop(entered);
    }

    /// Waits (untimed) for the signal of a click made by someone else, then drops any signal
    /// still queued, so that the next timed click waits for its own.
    fn settled(&mut self) {
        use futures::{FutureExt, StreamExt};
        self.next_signal();
        while let Some(Some(_)) = self.signals.next().now_or_never() {}
    }

    fn next_signal(&mut self) {
        let signals = &mut self.signals;
        self.runtime.block_on(async {
            use futures::StreamExt;
            tokio::time::timeout(Duration::from_secs(5), signals.next())
                .await
                .expect("the app's checked signal within 5 s")
                .expect("the subscription open")
                .expect("a signal");
        });
    }

    /// One click at `at` and the time until the app signals its check button's change.
    fn click(&mut self, at: (i64, i64)) -> Duration {
        use x11rb::connection::Connection;
        use x11rb::protocol::xproto::{
            BUTTON_PRESS_EVENT, BUTTON_RELEASE_EVENT, MOTION_NOTIFY_EVENT,
        };
        use x11rb::protocol::xtest::ConnectionExt;
        let (x, y) = (at.0 as i16, at.1 as i16);
        let started = Instant::now();
        self.x
            .xtest_fake_input(MOTION_NOTIFY_EVENT, 0, 0, self.root, x, y, 0)
            .unwrap();
        self.x
            .xtest_fake_input(BUTTON_PRESS_EVENT, 1, 0, self.root, 0, 0, 0)
            .unwrap();
        self.x
            .xtest_fake_input(BUTTON_RELEASE_EVENT, 1, 0, self.root, 0, 0, 0)
            .unwrap();
        self.x.flush().unwrap();
        self.next_signal();
        started.elapsed()
    }
}
