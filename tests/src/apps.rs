//! Real applications for the real-apps suite (Linux): launchers for Debian's Chromium, Firefox
//! ESR, LibreOffice, gedit, GNOME Text Editor, gnome-calculator, Thunar and FeatherPad (Qt) on
//! the shared desktop (each in its own process group, with fresh profiles), a wait until an app
//! is on AT-SPI and a check that it still answers there (over D-Bus, outside the daemon), a
//! memory guard that kills an app whose processes grow past a bound and records it, and a local
//! HTTP server whose log of POSTed forms checks a browser's submission from outside the daemon.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::desktop::{Desktop, TestDesktop, spawn_tied};
use crate::{Daemon, try_wait_for};

const MIB: u64 = 1024;
const GIB: u64 = 1024 * MIB;

/// How much memory an app's processes may hold (KiB), and how much they may grow past what they
/// held once started.
#[derive(Debug, Clone, Copy)]
pub struct MemoryBound {
    pub max_rss_kib: u64,
    pub max_growth_kib: u64,
}

impl MemoryBound {
    /// Browsers and the office suite: 1.5 GiB in all, or 1 GiB of growth (a browser starts a
    /// content process per site it opens).
    pub const LARGE: MemoryBound = MemoryBound {
        max_rss_kib: GIB + GIB / 2,
        max_growth_kib: GIB,
    };
    /// Editors, the calculator, the file manager: 400 MiB in all, or 500 MiB of growth.
    pub const SMALL: MemoryBound = MemoryBound {
        max_rss_kib: 400 * MIB,
        max_growth_kib: 500 * MIB,
    };
}

/// A launched real app: its process group (the leader is the program started), the process
/// that registered on AT-SPI, its memory bound and what the guard saw.
pub struct RealApp {
    pub name: String,
    /// The process started, leader of its own process group.
    pub leader: u32,
    /// The process whose AT-SPI application object is this app's (soffice.bin under oosplash,
    /// the browser's main process), set once it registered.
    atspi_pid: Mutex<Option<u32>>,
    bound: MemoryBound,
    /// RSS of the group once it was on AT-SPI; growth is counted from here.
    baseline_kib: Mutex<Option<u64>>,
    peak_kib: Mutex<u64>,
    violation: Mutex<Option<String>>,
    /// Scratch directories the app's profile and settings live in, kept while the app lives.
    pub dir: tempfile::TempDir,
}

impl RealApp {
    /// The pid the daemon's `ax` calls name as `app` (the one on AT-SPI).
    pub fn pid(&self) -> u32 {
        self.atspi_pid.lock().unwrap().unwrap_or(self.leader)
    }

    /// Every live process of the app: its process group and the leader's descendants.
    pub fn processes(&self) -> Vec<u32> {
        app_processes(self.leader)
    }

    /// The memory the app's processes hold together (PSS, see [`rss_kib`]), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.processes().iter().map(|pid| rss_kib(*pid)).sum()
    }

    /// The largest sum the guard saw.
    pub fn peak_kib(&self) -> u64 {
        *self.peak_kib.lock().unwrap()
    }

    /// What the guard recorded against the app, if anything.
    pub fn violation(&self) -> Option<String> {
        self.violation.lock().unwrap().clone()
    }

    /// Whether the started process still runs (a zombie has ended).
    pub fn is_running(&self) -> bool {
        process_state(self.leader).is_some_and(|state| state != 'Z' && state != 'X')
    }

    /// Kills every process of the app.
    pub fn kill(&self) {
        kill_app(self.leader);
    }

    /// The app was not harmed: the guard recorded nothing, its process runs, and its AT-SPI
    /// application answers a call within 5 s (asked over D-Bus by the test, not the daemon).
    pub fn assert_unharmed(&self, desktop: &Desktop) {
        if let Some(violation) = self.violation() {
            panic!("{}: the memory guard stopped it: {violation}", self.name);
        }
        assert!(
            self.is_running(),
            "{} (pid {}) is gone: it exited or was killed during the test",
            self.name,
            self.leader
        );
        let answer = atspi_child_count(desktop, self.pid(), Duration::from_secs(5));
        assert!(
            answer.is_ok(),
            "{} (pid {}) no longer answers AT-SPI within 5 s: {}",
            self.name,
            self.pid(),
            answer.unwrap_err()
        );
    }
}

/// Processes in `leader`'s process group, and its descendants (which may have left the group).
pub fn app_processes(leader: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state, ppid, pgrp.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(ppid), Some(pgrp)) = (
            fields.get(1).and_then(|f| f.parse::<u32>().ok()),
            fields.get(2).and_then(|f| f.parse::<u32>().ok()),
        ) else {
            continue;
        };
        parent_of.push((pid, ppid, pgrp));
    }
    let mut found: HashSet<u32> = parent_of
        .iter()
        .filter(|(pid, _, pgrp)| *pgrp == leader || *pid == leader)
        .map(|(pid, _, _)| *pid)
        .collect();
    loop {
        let before = found.len();
        for (pid, ppid, _) in &parent_of {
            if found.contains(ppid) {
                found.insert(*pid);
            }
        }
        if found.len() == before {
            break;
        }
    }
    let mut found: Vec<u32> = found.into_iter().collect();
    found.sort_unstable();
    found
}

/// A process's share of memory in KiB: its PSS (pages shared between an app's processes, as a
/// browser's are, counted once over them), else its VmRSS where smaps_rollup is unreadable.
fn rss_kib(pid: u32) -> u64 {
    let field = |file: &str, name: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix(name))
                    .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            })
    };
    field("smaps_rollup", "Pss:")
        .or_else(|| field("status", "VmRSS:"))
        .unwrap_or(0)
}

fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

fn kill_app(leader: u32) {
    // SAFETY: kill only sends signals, to processes this suite started.
    unsafe {
        libc::kill(-(leader as i32), libc::SIGKILL);
        for pid in app_processes(leader) {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

/// The suite these apps serve, whose desktop they start on (the browsers are kept for the
/// process, so every suite that used them would share them and that desktop).
const SUITE: &str = "real_apps";

/// Every app launched by this process, for the guard and for the kill at exit.
fn launched() -> &'static Mutex<Vec<Arc<RealApp>>> {
    static LAUNCHED: OnceLock<Mutex<Vec<Arc<RealApp>>>> = OnceLock::new();
    LAUNCHED.get_or_init(|| {
        // Apps held in statics are never dropped: their groups are killed when the test process
        // exits (the leaders also die with it, by their parent-death signal; their children
        // would not).
        extern "C" fn kill_every_app() {
            if let Some(apps) = LAUNCHED_FOR_EXIT.get()
                && let Ok(apps) = apps.lock()
            {
                for leader in apps.iter() {
                    kill_app(*leader);
                }
            }
        }
        // SAFETY: registering a plain function to run at exit.
        unsafe { libc::atexit(kill_every_app) };
        start_guard();
        Mutex::new(Vec::new())
    })
}

static LAUNCHED_FOR_EXIT: OnceLock<Mutex<Vec<u32>>> = OnceLock::new();

/// The memory guard: samples each app's RSS every 200 ms; an app past its bound is killed (its
/// whole group) and the violation recorded, so a runaway app cannot take the machine.
fn start_guard() {
    std::thread::Builder::new()
        .name("memory-guard".into())
        .spawn(|| {
            loop {
                let apps: Vec<Arc<RealApp>> = launched().lock().unwrap().clone();
                for app in apps {
                    if app.violation.lock().unwrap().is_some() {
                        continue;
                    }
                    let rss = app.rss_kib();
                    {
                        let mut peak = app.peak_kib.lock().unwrap();
                        *peak = (*peak).max(rss);
                    }
                    let baseline = *app.baseline_kib.lock().unwrap();
                    let over_total = rss > app.bound.max_rss_kib;
                    let over_growth =
                        baseline.is_some_and(|base| rss > base + app.bound.max_growth_kib);
                    if over_total || over_growth {
                        app.kill();
                        *app.violation.lock().unwrap() = Some(format!(
                            "its processes held {} MiB (started at {} MiB; bound {} MiB, or \
                             {} MiB of growth): killed",
                            rss / MIB,
                            baseline.unwrap_or(0) / MIB,
                            app.bound.max_rss_kib / MIB,
                            app.bound.max_growth_kib / MIB
                        ));
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .expect("memory guard thread");
}

/// What a launcher passes: program, arguments, extra environment, where the app's settings live.
pub struct Launch<'a> {
    pub name: &'a str,
    pub program: &'a str,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub bound: MemoryBound,
    pub dir: tempfile::TempDir,
}

/// Starts an app on the shared desktop in its own process group, with fresh settings
/// directories under its scratch dir, watched by the memory guard; returns once it is on
/// AT-SPI with a window (at most `startup`).
pub fn launch(launch: Launch<'_>, startup: Duration) -> Arc<RealApp> {
    let desktop = Desktop::shared_of(SUITE);
    let root = launch.dir.path().to_path_buf();
    let mut command = desktop.command(launch.program);
    for sub in ["config", "data", "cache", "runtime"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::set_permissions(
        root.join("runtime"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    command
        .args(&launch.args)
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env("XDG_DATA_HOME", root.join("data"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .env("XDG_RUNTIME_DIR", root.join("runtime"))
        // No dconf service on the private bus: settings live in memory for the app's life.
        .env("GSETTINGS_BACKEND", "memory")
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(desktop.log_dir.join(format!("{}.log", launch.name))).unwrap(),
        ))
        .process_group(0);
    let child = spawn_tied(command);
    let leader = child.id();
    // The child is reaped by nobody until exit: a zombie then reads as ended.
    std::mem::forget(child);
    LAUNCHED_FOR_EXIT
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap()
        .push(leader);
    let app = Arc::new(RealApp {
        name: launch.name.to_string(),
        leader,
        atspi_pid: Mutex::new(None),
        bound: launch.bound,
        baseline_kib: Mutex::new(None),
        peak_kib: Mutex::new(0),
        violation: Mutex::new(None),
        dir: launch.dir,
    });
    launched().lock().unwrap().push(app.clone());
    let started = Instant::now();
    let pid = try_wait_for(startup, || {
        assert!(
            app.is_running(),
            "{} exited while starting (log: {})",
            app.name,
            desktop.log_dir.join(format!("{}.log", app.name)).display()
        );
        app.processes().into_iter().find(|pid| {
            atspi_child_count(desktop, *pid, Duration::from_secs(2)).is_ok_and(|count| count > 0)
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "{} did not show a window on AT-SPI within {startup:?} (processes {:?}; log {})",
            app.name,
            app.processes(),
            desktop.log_dir.join(format!("{}.log", app.name)).display()
        )
    });
    *app.atspi_pid.lock().unwrap() = Some(pid);
    *app.baseline_kib.lock().unwrap() = Some(app.rss_kib());
    eprintln!(
        "{} on AT-SPI as pid {pid} after {:?}, {} MiB",
        app.name,
        started.elapsed(),
        app.rss_kib() / MIB
    );
    app
}

fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir")
}

/// Chromium with web content on AT-SPI, a fresh profile, nothing fetched on its own.
pub fn chromium() -> &'static Arc<RealApp> {
    static APP: OnceLock<Arc<RealApp>> = OnceLock::new();
    APP.get_or_init(|| {
        let dir = scratch("real-apps-chromium-");
        let profile = dir.path().join("profile");
        let mut args: Vec<String> = [
            "--force-renderer-accessibility",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--password-store=basic",
            "--disable-features=Translate,MediaRouter",
            "--window-position=0,0",
            "--window-size=1280,900",
        ]
        .map(String::from)
        .to_vec();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            args.push("--no-sandbox".into());
        }
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push("about:blank".into());
        launch(
            Launch {
                name: "chromium",
                program: "chromium",
                args,
                env: Vec::new(),
                bound: MemoryBound::LARGE,
                dir,
            },
            Duration::from_secs(90),
        )
    })
}

/// Firefox ESR with accessibility forced on and first-run pages off, in a fresh profile.
pub fn firefox() -> &'static Arc<RealApp> {
    static APP: OnceLock<Arc<RealApp>> = OnceLock::new();
    APP.get_or_init(|| {
        let dir = scratch("real-apps-firefox-");
        let profile = dir.path().join("profile");
        std::fs::create_dir_all(&profile).unwrap();
        let prefs = [
            ("accessibility.force_disabled", "0"),
            ("browser.shell.checkDefaultBrowser", "false"),
            ("browser.startup.homepage_override.mstone", "\"ignore\""),
            ("startup.homepage_welcome_url", "\"about:blank\""),
            ("startup.homepage_welcome_url.additional", "\"\""),
            ("browser.startup.page", "0"),
            ("browser.aboutwelcome.enabled", "false"),
            ("trailhead.firstrun.didSeeAboutWelcome", "true"),
            ("datareporting.policy.dataSubmissionEnabled", "false"),
            ("datareporting.policy.firstRunURL", "\"\""),
            ("toolkit.telemetry.reportingpolicy.firstRun", "false"),
            ("app.update.enabled", "false"),
            ("app.normandy.enabled", "false"),
            ("browser.newtabpage.enabled", "false"),
            ("browser.translations.automaticallyPopup", "false"),
            ("browser.formfill.enable", "false"),
            ("signon.rememberSignons", "false"),
            ("network.captive-portal-service.enabled", "false"),
            ("browser.safebrowsing.malware.enabled", "false"),
            ("browser.safebrowsing.phishing.enabled", "false"),
            ("extensions.update.enabled", "false"),
            ("browser.tabs.warnOnClose", "false"),
            ("dom.security.https_only_mode", "false"),
            ("dom.security.https_first", "false"),
        ];
        let user_js: String = prefs
            .iter()
            .map(|(key, value)| format!("user_pref(\"{key}\", {value});\n"))
            .collect();
        std::fs::write(profile.join("user.js"), user_js).unwrap();
        launch(
            Launch {
                name: "firefox",
                program: "firefox-esr",
                args: vec![
                    "--no-remote".into(),
                    "--profile".into(),
                    profile.display().to_string(),
                    "--width=1280".into(),
                    "--height=900".into(),
                    "about:blank".into(),
                ],
                env: vec![("MOZ_CRASHREPORTER_DISABLE".into(), "1".into())],
                bound: MemoryBound::LARGE,
                dir,
            },
            Duration::from_secs(90),
        )
    })
}

/// LibreOffice with its GTK3 plugin (the x11 plugin exposes no AT-SPI) and a fresh user
/// installation, opening an empty document of `kind` (`--calc`, `--writer`). Each call is an
/// instance of its own, so a harmed Calc cannot take Writer with it.
pub fn libreoffice(kind: &str) -> Arc<RealApp> {
    let dir = scratch("real-apps-libreoffice-");
    let user = dir.path().join("user");
    let name = format!("libreoffice{kind}");
    launch(
        Launch {
            name: &name,
            program: "soffice",
            args: vec![
                format!("-env:UserInstallation=file://{}", user.display()),
                "--norestore".into(),
                "--nologo".into(),
                kind.into(),
            ],
            env: vec![("SAL_USE_VCLPLUGIN".into(), "gtk3".into())],
            bound: MemoryBound::LARGE,
            dir,
        },
        Duration::from_secs(120),
    )
}

/// FeatherPad, a Qt5 editor, told to register on AT-SPI whatever org.a11y.Status says; on X
/// (xcb) whatever session the host has; with Qt's generic theme, so its file dialog is Qt's own
/// widgets (not a GTK or portal one, whichever platform themes are installed).
pub fn featherpad() -> Arc<RealApp> {
    // Qt 5 gives up on AT-SPI for good when the a11y bus it is told of is not up yet (the bus
    // launcher starts it on the first request for its address): ask for it first.
    if let Err(err) = a11y_address(Desktop::shared_of(SUITE)) {
        panic!("the desktop's a11y bus has no address for FeatherPad: {err}");
    }
    launch(
        Launch {
            name: "featherpad",
            program: "featherpad",
            args: Vec::new(),
            env: [
                ("QT_LINUX_ACCESSIBILITY_ALWAYS_ON", "1"),
                ("QT_ACCESSIBILITY", "1"),
                ("QT_QPA_PLATFORM", "xcb"),
                ("QT_QPA_PLATFORMTHEME", "generic"),
            ]
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .to_vec(),
            bound: MemoryBound::SMALL,
            dir: scratch("real-apps-featherpad-"),
        },
        Duration::from_secs(60),
    )
}

/// A small GTK app started with `args`, its settings fresh.
pub fn small_app(name: &str, program: &str, args: &[&str]) -> Arc<RealApp> {
    launch(
        Launch {
            name,
            program,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            bound: MemoryBound::SMALL,
            dir: scratch(&format!("real-apps-{name}-")),
        },
        Duration::from_secs(60),
    )
}

/// The a11y bus of the desktop (asked of `org.a11y.Bus` on its session bus).
fn a11y_address(desktop: &Desktop) -> Result<String, String> {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    if let Some(address) = ADDRESS.get() {
        return Ok(address.clone());
    }
    let out = desktop
        .command("gdbus")
        .args([
            "call",
            "--session",
            "--dest",
            "org.a11y.Bus",
            "--object-path",
            "/org/a11y/bus",
            "--method",
            "org.a11y.Bus.GetAddress",
        ])
        .output()
        .map_err(|err| format!("gdbus: {err}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // ('unix:path=/tmp/...,guid=...',)
    let address = text
        .split('\'')
        .nth(1)
        .ok_or_else(|| format!("no a11y bus address in {text:?}"))?
        .to_string();
    Ok(ADDRESS.get_or_init(|| address).clone())
}

/// How many children the AT-SPI application object of process `pid` has (its windows), asked
/// over D-Bus within `limit`: an app that does not answer, or is not on AT-SPI, is an error.
pub fn atspi_child_count(desktop: &Desktop, pid: u32, limit: Duration) -> Result<i32, String> {
    let address = a11y_address(desktop)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| err.to_string())?;
    runtime.block_on(async {
        tokio::time::timeout(limit, async {
            let bus = zbus::connection::Builder::address(address.as_str())
                .map_err(|err| err.to_string())?
                .build()
                .await
                .map_err(|err| format!("a11y bus: {err}"))?;
            let registry = bus
                .call_method(
                    Some("org.a11y.atspi.Registry"),
                    "/org/a11y/atspi/accessible/root",
                    Some("org.a11y.atspi.Accessible"),
                    "GetChildren",
                    &(),
                )
                .await
                .map_err(|err| format!("registry: {err}"))?;
            let apps: Vec<(String, zbus::zvariant::OwnedObjectPath)> = registry
                .body()
                .deserialize()
                .map_err(|err| format!("registry children: {err}"))?;
            for (name, path) in apps {
                let owner = bus
                    .call_method(
                        Some("org.freedesktop.DBus"),
                        "/org/freedesktop/DBus",
                        Some("org.freedesktop.DBus"),
                        "GetConnectionUnixProcessID",
                        &(name.as_str(),),
                    )
                    .await;
                let Ok(owner) = owner else { continue };
                if owner.body().deserialize::<u32>().ok() != Some(pid) {
                    continue;
                }
                let reply = bus
                    .call_method(
                        Some(name.as_str()),
                        path.as_str(),
                        Some("org.freedesktop.DBus.Properties"),
                        "Get",
                        &("org.a11y.atspi.Accessible", "ChildCount"),
                    )
                    .await
                    .map_err(|err| format!("pid {pid}'s ChildCount: {err}"))?;
                let value: zbus::zvariant::OwnedValue = reply
                    .body()
                    .deserialize()
                    .map_err(|err| format!("pid {pid}'s ChildCount: {err}"))?;
                return i32::try_from(value).map_err(|err| format!("ChildCount: {err}"));
            }
            Err(format!("pid {pid} is not on AT-SPI"))
        })
        .await
        .unwrap_or_else(|_| Err(format!("pid {pid} did not answer within {limit:?}")))
    })
}

/// One daemon call through `computer call SURFACE COMMAND --json --args ARGS`, given at most
/// `limit` to return (a call that hangs is an error reply of the test's own, `code:
/// "test_timeout"`, not a hung suite).
pub fn call(daemon: &Daemon, surface: &str, command: &str, args: Value, limit: Duration) -> Value {
    let mut child = daemon
        .command()
        .args([
            "call",
            surface,
            command,
            "--json",
            "--args",
            &args.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run computer call");
    let started = Instant::now();
    let finished = try_wait_for(limit, || child.try_wait().ok().flatten());
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return json!({"ok": false, "error": {"code": "test_timeout", "message": format!(
            "{surface} {command} {args} did not return within {limit:?}")}});
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .ok();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .ok();
    let reply: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        json!({"ok": false, "error": {"code": "test_unparsed", "message": format!(
            "stdout {stdout:?} stderr {stderr:?}")}})
    });
    eprintln!(
        "[{:>6} ms] {surface} {command} {args}\n    -> {}",
        started.elapsed().as_millis(),
        shorten(&reply.to_string(), 600)
    );
    reply
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The `gui windows` entry of a window of `app` whose title contains `title`, once there.
pub fn wait_window(daemon: &Daemon, app: &RealApp, title: &str, limit: Duration) -> Value {
    let mut last = Value::Null;
    try_wait_for(limit, || {
        let processes = app.processes();
        last = call(daemon, "gui", "windows", json!({}), Duration::from_secs(30));
        last["windows"].as_array()?.iter().find_map(|window| {
            let pid = window["pid"].as_u64()? as u32;
            let named = window["title"].as_str()?.contains(title);
            (processes.contains(&pid) && named).then(|| window.clone())
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no window of {} titled ~{title:?} within {limit:?}; windows: {last}",
            app.name
        )
    })
}

/// A POSTed form as the server received it.
#[derive(Debug, Clone)]
pub struct Posted {
    pub path: String,
    pub body: String,
}

/// A local HTTP server for the browsers: `GET /form/TAG` is an order form posting to
/// `/submit/TAG`, `GET /table` a table of prices; every POST is logged.
pub struct WebServer {
    pub port: u16,
    posted: Arc<Mutex<Vec<Posted>>>,
}

/// The table page's rows, as the page shows them.
pub const PRICE_ROWS: [[&str; 3]; 3] = [
    ["Apple", "1.20", "Fruit"],
    ["Bread", "2.75", "Bakery"],
    ["Cheese", "7.40", "Dairy"],
];

impl WebServer {
    /// The suite's one server, started on first use.
    pub fn shared() -> &'static WebServer {
        static SERVER: OnceLock<WebServer> = OnceLock::new();
        SERVER.get_or_init(|| {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
            let port = listener.local_addr().unwrap().port();
            let posted = Arc::new(Mutex::new(Vec::new()));
            let log = posted.clone();
            std::thread::Builder::new()
                .name("web-server".into())
                .spawn(move || {
                    for stream in listener.incoming().flatten() {
                        let log = log.clone();
                        std::thread::spawn(move || serve(stream, &log));
                    }
                })
                .expect("web server thread");
            WebServer { port, posted }
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The bodies POSTed to `path` so far.
    pub fn posted_to(&self, path: &str) -> Vec<String> {
        self.posted
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.path == path)
            .map(|p| p.body.clone())
            .collect()
    }
}

fn form_page(tag: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Order form {tag}</title></head>
<body><h1>Order</h1>
<form method="post" action="/submit/{tag}">
<p><label for="name">Full name</label> <input id="name" name="name" type="text"></p>
<p><input id="gift" name="gift" type="checkbox" value="yes"> <label for="gift">Gift wrap</label></p>
<p><label for="size">Size</label> <select id="size" name="size">
<option value="s">Small</option><option value="m">Medium</option><option value="l">Large</option>
</select></p>
<p><button type="submit">Submit order</button></p>
</form></body></html>"#
    )
}

fn table_page() -> String {
    let rows: String = PRICE_ROWS
        .iter()
        .map(|[item, price, aisle]| {
            format!("<tr><td>{item}</td><td>{price}</td><td>{aisle}</td></tr>\n")
        })
        .collect();
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Price list</title></head>
<body><h1>Prices</h1>
<table border="1"><caption>Prices</caption>
<thead><tr><th>Item</th><th>Price</th><th>Aisle</th></tr></thead>
<tbody>
{rows}</tbody></table></body></html>"#
    )
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Posted>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((key, value)) = header.split_once(':')
            && key.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let (status, page) = match (method.as_str(), path.as_str()) {
        ("GET", "/table") => ("200 OK", table_page()),
        ("GET", form) if form.starts_with("/form/") => ("200 OK", form_page(&form[6..])),
        ("POST", submit) if submit.starts_with("/submit/") => {
            log.lock().unwrap().push(Posted {
                path: submit.to_string(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            (
                "200 OK",
                "<!DOCTYPE html><html><head><title>Order received</title></head>\
                 <body><p>Thank you</p></body></html>"
                    .to_string(),
            )
        }
        _ => ("404 Not Found", "<html><body>not here</body></html>".into()),
    };
    let mut stream = &stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
}

/// The paragraphs (text:p and text:h) of an OpenDocument file's content.xml, and its raw
/// content.xml, read with Python's zipfile (outside the daemon and the app).
pub fn odf_content(file: &Path) -> (Vec<String>, String) {
    let script = r#"
import sys, zipfile, json
import xml.etree.ElementTree as ET
xml = zipfile.ZipFile(sys.argv[1]).read("content.xml").decode()
ns = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
root = ET.fromstring(xml)
paras = ["".join(p.itertext()) for p in root.iter() if p.tag in (ns + "p", ns + "h")]
print(json.dumps({"paragraphs": paras, "xml": xml}))
"#;
    let out = Command::new(crate::desktop::gi_python())
        .args(["-c", script])
        .arg(file)
        .output()
        .expect("python3");
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "could not read {} as OpenDocument: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let paragraphs = parsed["paragraphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (paragraphs, parsed["xml"].as_str().unwrap().to_string())
}

/// Waits until `file` exists and its size has held for a moment (a save finished), at most
/// `limit`; whether it did.
pub fn wait_saved(file: &Path, limit: Duration) -> bool {
    let mut last_size = None;
    try_wait_for(limit, || {
        let size = std::fs::metadata(file).ok()?.len();
        let settled = last_size == Some(size) && size > 0;
        last_size = Some(size);
        settled.then_some(())
    })
    .is_some()
}

/// A directory for files the apps save, removed with the guard.
pub fn out_dir(prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = scratch(prefix);
    let path = dir.path().to_path_buf();
    (dir, path)
}
