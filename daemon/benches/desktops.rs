//! Benchmarks of desktops of the agents' own (`gui desktop`, `complications.desktop`) against
//! same-run anchors on a private headless desktop (the person's: Xvfb + openbox, from the
//! harness): an act on the agent's desktop against the same act on the person's (`gui click` and
//! `gui type` into a zenity entry, a `gui screenshot` of the same size; `xdotool` on each display
//! beside them); the time to open a headless desktop and to its first screenshot against a bare
//! `Xvfb -displayfd` and one ImageMagick `import` of it, with the open split into its parts (read
//! off the creation times of the logs each server is started with); the memory of an open
//! desktop (doctor's `resident_bytes`, each of its processes, the daemon's own growth) against a
//! bare Xvfb's; and how often the person's pointer and focus moved in 100 acts of the agent on
//! its desktop. Run with `cargo bench -p computer-daemon --bench desktops`; it prints markdown
//! tables.

// Desktops of agents' own are Linux's (Xvfb, openbox, AT-SPI): the bench runs there.
#[cfg(target_os = "linux")]
mod linux {
    use std::io::{BufRead, BufReader};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant, SystemTime};

    use computer_tests::desktop::{App, Desktop, TestDesktop};
    use computer_tests::{Daemon, RawConnection, try_wait_for, wait_for};
    use serde_json::{Value, json};

    /// The size of every desktop here: the person's (the harness's Xvfb), so that screenshots of
    /// both are of equal size.
    const SIZE: [u32; 2] = [1920, 1080];
    /// Fresh desktops opened (and bare Xvfbs started) for the open figures.
    const OPENS: usize = 7;
    /// Timed acts of each kind on each desktop, alternating between them.
    const ACTS: usize = 40;
    /// How long an app on a fresh desktop may take to show (GTK starts slowly on a loaded
    /// machine).
    const APP_BOUND: Duration = Duration::from_secs(60);

    /// One call over the raw connection; its structured reply, which must not be an error.
    fn call(raw: &mut RawConnection, arguments: Value) -> Value {
        let (reply, _) = raw.call_tool(&arguments);
        assert_ne!(
            reply["result"]["isError"],
            json!(true),
            "{arguments}: {reply}"
        );
        reply["result"]["structuredContent"].clone()
    }

    /// The same, timed from the request's first byte to the reply's last.
    fn timed(raw: &mut RawConnection, arguments: Value) -> (Duration, Value) {
        let started = Instant::now();
        let reply = call(raw, arguments);
        (started.elapsed(), reply)
    }

    /// A gui call on `desktop` (`None`: the person's).
    fn gui(command: &str, args: Value, desktop: Option<&str>) -> Value {
        let mut call = json!({"surface": "gui", "command": command, "args": args});
        if let Some(desktop) = desktop {
            call["complications"] = json!({"desktop": desktop});
        }
        call
    }

    fn p50(mut samples: Vec<Duration>) -> Duration {
        samples.sort();
        samples[samples.len() / 2]
    }

    fn ms(d: Duration) -> String {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }

    fn ratio(ours: Duration, anchor: Duration) -> String {
        format!("{:.2}×", ours.as_secs_f64() / anchor.as_secs_f64())
    }

    fn mib(kib: u64) -> String {
        format!("{:.1} MiB", kib as f64 / 1024.0)
    }

    fn load_average() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn status_kib(pid: u32, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find(|line| line.starts_with(field))
            .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    }

    /// A desktop's private directory (`computer-desktop-<daemon pid>-…` in the directory of
    /// every desktop's, holding its servers' logs): the one the daemon has open now. The bench
    /// keeps at most one open when it looks.
    fn private_dir(daemon_pid: i32) -> PathBuf {
        let prefix = format!("computer-desktop-{daemon_pid}-");
        let dirs: Vec<PathBuf> = std::fs::read_dir(computer_surfaces::kit::contain::desktops_dir())
            .expect("the directory of every desktop's private directory")
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
            .map(|entry| entry.path())
            .collect();
        assert_eq!(dirs.len(), 1, "one open desktop's directory: {dirs:?}");
        dirs.into_iter().next().unwrap()
    }

    /// When a file was created: each of a desktop's servers gets its log created right before
    /// it is started, and only once the one before answers.
    fn created(path: &Path) -> SystemTime {
        std::fs::metadata(path)
            .and_then(|m| m.created())
            .unwrap_or_else(|err| panic!("the creation time of {}: {err}", path.display()))
    }

    fn between(earlier: SystemTime, later: SystemTime) -> Duration {
        later.duration_since(earlier).unwrap_or_default()
    }

    /// The processes of a desktop whose private directory is `dir`: every one whose environment
    /// holds its `COMPUTER_DESKTOP` (its servers and what runs on it); their name and VmRSS, KiB.
    fn processes_of(dir: &Path) -> Vec<(u32, String, u64)> {
        let id = dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("computer-desktop-")
            .to_string();
        let needle = format!("COMPUTER_DESKTOP={id}");
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            let holds = environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes());
            if holds {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                found.push((pid, name, status_kib(pid, "VmRSS:")));
            }
        }
        found.sort_by_key(|process| std::cmp::Reverse(process.2));
        found
    }

    /// The X display of the desktop whose private directory is `dir`: its X server's argument.
    fn display_of(dir: &Path) -> String {
        let server = processes_of(dir)
            .into_iter()
            .find(|(_, name, _)| name == "Xvfb")
            .expect("the desktop's Xvfb");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.0)).unwrap();
        cmdline
            .split(|b| *b == 0)
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .find(|arg| arg.starts_with(':'))
            .expect("the X server's display argument")
    }

    /// The anchor for an open: a bare Xvfb of the same size, ready when it writes its display
    /// number to `-displayfd`, and one `import -window root` of it; the time to each, and the
    /// server's VmRSS (KiB) after the shot.
    fn bare_xvfb_and_one_import() -> (Duration, Duration, u64) {
        let (read_end, write_end) = pipe();
        let mut server = Command::new("Xvfb");
        server
            .args(["-screen", "0", &format!("{}x{}x24", SIZE[0], SIZE[1])])
            .args(["-displayfd", &write_end.as_raw_fd().to_string()])
            .args(["-nolisten", "tcp", "-noreset"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let keep = write_end.as_raw_fd();
        // SAFETY: fcntl on an fd we own, in the child before exec, so that it survives exec.
        unsafe {
            server.pre_exec(move || {
                let flags = libc::fcntl(keep, libc::F_GETFD);
                libc::fcntl(keep, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                Ok(())
            });
        }
        let started = Instant::now();
        let mut server = server.spawn().expect("Xvfb");
        drop(write_end);
        let mut number = String::new();
        BufReader::new(std::fs::File::from(read_end))
            .read_line(&mut number)
            .expect("Xvfb writes its display number");
        let ready = started.elapsed();
        let out = Command::new("import")
            .args(["-display", &format!(":{}", number.trim())])
            .args(["-window", "root", "png:-"])
            .output()
            .expect("ImageMagick import");
        let shot = started.elapsed();
        assert!(out.status.success() && !out.stdout.is_empty(), "{out:?}");
        let rss = status_kib(server.id(), "VmRSS:");
        let _ = server.kill();
        let _ = server.wait();
        (ready, shot, rss)
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fds we then own.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "pipe2");
        // SAFETY: both fds were just created and are owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// The centre of the first match of an `ax find` reply, whose outline line gives its
    /// bounds as `@X,Y WxH`.
    fn centre_of_first(found: &Value) -> Option<(i64, i64)> {
        let line = found["matches"].as_str()?.lines().next()?;
        let bounds = line.split_once('@')?.1;
        let (place, size) = bounds.split_once(' ')?;
        let size = size.split_whitespace().next()?;
        let (x, y) = place.split_once(',')?;
        let (w, h) = size.split_once('x')?;
        let number = |s: &str| s.parse::<i64>().ok();
        Some((number(x)? + number(w)? / 2, number(y)? + number(h)? / 2))
    }

    /// The zenity entry titled `title` on `desktop` (`None`: the person's): waits for its window
    /// in the gui listing, then for its text input on the desktop's accessibility bus; the
    /// input's centre.
    fn entry_on(raw: &mut RawConnection, desktop: Option<&str>, title: &str) -> (i64, i64) {
        wait_for(&format!("{title} listed"), APP_BOUND, || {
            let listed = call(raw, gui("windows", json!({}), desktop));
            listed["windows"]
                .as_array()?
                .iter()
                .any(|w| w["title"] == title)
                .then_some(())
        });
        let mut last = Value::Null;
        let found = try_wait_for(APP_BOUND, || {
            let mut find = json!({"surface": "ax", "command": "find",
                "args": {"selector": "textInput", "app": "zenity", "include": ["bounds"]}});
            if let Some(desktop) = desktop {
                find["complications"] = json!({"desktop": desktop});
            }
            let (reply, _) = raw.call_tool(&find);
            let centre = (reply["result"]["isError"] != json!(true))
                .then(|| centre_of_first(&reply["result"]["structuredContent"]))
                .flatten();
            last = reply;
            centre
        });
        found.unwrap_or_else(|| {
            panic!(
                "{title}'s entry not found on AT-SPI within {APP_BOUND:?}; the last reply: {last}"
            )
        })
    }

    /// The person's pointer position and focused window, read from outside the daemon.
    fn person_pointer_and_focus(person: &Desktop) -> (String, String) {
        (
            person.tool_output("xdotool", &["getmouselocation"]),
            person.tool_output("xdotool", &["getwindowfocus"]),
        )
    }

    /// `xdotool mousemove X Y click 1` on `display`, timed.
    fn xdotool_click(display: &str, at: (i64, i64)) -> Duration {
        let started = Instant::now();
        let status = Command::new("xdotool")
            .env("DISPLAY", display)
            .args(["mousemove", &at.0.to_string(), &at.1.to_string()])
            .args(["click", "--delay", "0", "1"])
            .stdout(Stdio::null())
            .status()
            .expect("xdotool");
        assert!(status.success());
        started.elapsed()
    }

    /// Polls `processes` (pid, name, _) until each has ended (gone or a zombie); when each did,
    /// counted from `since`, by name (a second of the same name gets `#2`).
    fn watch_ending(processes: Vec<(u32, String, u64)>, since: Instant) -> Vec<(String, Duration)> {
        let mut left: Vec<(u32, String)> = Vec::new();
        for (pid, name, _) in processes {
            let same = left.iter().filter(|(_, n)| n.starts_with(&name)).count();
            let name = if same == 0 {
                name
            } else {
                format!("{name} #{}", same + 1)
            };
            left.push((pid, name));
        }
        let mut ended = Vec::new();
        while !left.is_empty() && since.elapsed() < Duration::from_secs(30) {
            left.retain(|(pid, name)| {
                let running = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|stat| {
                        let state = stat
                            .rsplit_once(')')?
                            .1
                            .split_whitespace()
                            .next()?
                            .to_string();
                        Some(state != "Z" && state != "X")
                    })
                    .unwrap_or(false);
                if !running {
                    ended.push((name.clone(), since.elapsed()));
                }
                running
            });
            std::thread::sleep(Duration::from_millis(5));
        }
        ended
    }

    /// The parts of one open, from the bench's request to the reply.
    #[derive(Default)]
    struct OpenParts {
        /// Request to the X server's start: the pipeline, policy, the write-ahead receipt, the
        /// private directory.
        before_x: Vec<Duration>,
        /// The X server started until it takes connections on its display.
        x_server: Vec<Duration>,
        /// The session bus started until it printed its address.
        session_bus: Vec<Duration>,
        /// at-spi-bus-launcher started until org.a11y.Bus answers with the accessibility bus.
        accessibility_bus: Vec<Duration>,
        /// openbox started until it publishes its EWMH properties, the surfaces bound, the
        /// reply's receipt.
        window_manager_and_reply: Vec<Duration>,
    }

    pub fn main() {
        // SAFETY: set before any other thread exists; the harness reads it to find the binary.
        unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
        let load_before = load_average();
        let person = Desktop::shared();
        let daemon = Daemon::start_on_desktop("");
        let mut raw = RawConnection::connect(&daemon.socket);
        raw.initialize("2025-11-25");
        call(
            &mut raw,
            json!({"surface": "shell", "command": "run", "args": {"argv": ["true"]}}),
        );
        let daemon_idle_kib = daemon.memory_kib("VmRSS");
        let open = json!({"surface": "gui", "command": "desktop",
            "args": {"op": "open", "size": SIZE, "visible": false}});
        let close = |raw: &mut RawConnection, id: &str| {
            let closed = call(
                raw,
                json!({"surface": "gui", "command": "desktop",
                       "args": {"op": "close", "id": id}}),
            );
            assert_eq!(closed["closed"], json!(id), "{closed}");
        };

        // (2) Open to reply and to the first screenshot, headless; split by the creation times
        // of the logs each server is started with (the next is made once the one before
        // answers). Against a bare Xvfb and one `import`, alternating.
        let (mut opens, mut first_shots, mut to_first_shot, mut closes) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut parts = OpenParts::default();
        let mut endings: std::collections::BTreeMap<String, Vec<Duration>> = Default::default();
        let (mut xvfb_ready, mut xvfb_shot, mut xvfb_rss) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..OPENS {
            let asked = SystemTime::now();
            let (open_took, opened) = timed(&mut raw, open.clone());
            let id = opened["desktop"]
                .as_str()
                .expect("a desktop id")
                .to_string();
            assert_eq!(opened["kind"], "xvfb", "{opened}");
            let (shot_took, shot) = timed(&mut raw, gui("screenshot", json!({}), Some(&id)));
            assert!(shot["width"].as_u64().is_some(), "{shot}");
            opens.push(open_took);
            first_shots.push(shot_took);
            to_first_shot.push(open_took + shot_took);

            let dir = private_dir(daemon.pid());
            let x_started = created(&dir.join("xserver.log"));
            let bus_started = created(&dir.join("dbus.log"));
            let atspi_started = created(&dir.join("at-spi-bus-launcher.log"));
            let wm_started = created(&dir.join("openbox.log"));
            let replied = asked + open_took;
            parts.before_x.push(between(asked, x_started));
            parts.x_server.push(between(x_started, bus_started));
            parts.session_bus.push(between(bus_started, atspi_started));
            parts
                .accessibility_bus
                .push(between(atspi_started, wm_started));
            parts
                .window_manager_and_reply
                .push(between(wm_started, replied));

            // Each of its processes watched from outside while it closes: when it ended.
            let watched = processes_of(&dir);
            let started = Instant::now();
            let watcher = std::thread::spawn(move || watch_ending(watched, started));
            close(&mut raw, &id);
            closes.push(started.elapsed());
            for (name, ended) in watcher.join().expect("the watcher") {
                endings.entry(name).or_default().push(ended);
            }

            let (ready, shot, rss) = bare_xvfb_and_one_import();
            xvfb_ready.push(ready);
            xvfb_shot.push(shot);
            xvfb_rss.push(rss);
        }
        let daemon_after_opens_kib = daemon.memory_kib("VmRSS");

        // (3) One desktop kept open: its memory idle (after its first screenshot), per process,
        // as doctor says it, and the daemon's growth.
        let opened = call(&mut raw, open.clone());
        let id = opened["desktop"].as_str().unwrap().to_string();
        call(&mut raw, gui("screenshot", json!({}), Some(&id)));
        let dir = private_dir(daemon.pid());
        let display = display_of(&dir);
        let idle_processes = processes_of(&dir);
        let doctor_bytes = |daemon: &Daemon| {
            let doctor = daemon.cli(&["doctor", "--json"]).json();
            doctor["desktops"]
                .as_array()
                .and_then(|d| d.iter().find(|d| d["id"] == json!(id)))
                .and_then(|d| d["resident_bytes"].as_u64())
                .unwrap_or_else(|| panic!("doctor lists no {id}: {doctor}"))
        };
        let doctor_idle = doctor_bytes(&daemon);
        let daemon_one_open_kib = daemon.memory_kib("VmRSS");

        // (1) The same acts on the agent's desktop and the person's: a zenity entry on each
        // (the agent's started by a detached `shell run` there, the person's directly).
        let title = "bench-agent-entry";
        let started = call(
            &mut raw,
            json!({"surface": "shell", "command": "run",
                   "args": {"argv": ["zenity", "--entry", "--title", title, "--text", "name"]},
                   "complications": {"desktop": id, "detach": true}}),
        );
        assert!(started.is_object(), "{started}");
        let persons_title = "bench-person-entry";
        let _persons_app: App = person.launch(
            "zenity",
            &["--entry", "--title", persons_title, "--text", "name"],
        );
        let own_entry = entry_on(&mut raw, Some(&id), title);
        let shared_entry = entry_on(&mut raw, None, persons_title);
        let doctor_with_app = doctor_bytes(&daemon);
        let with_app_processes = processes_of(&dir);
        // Which signals each process starts with blocked (inherited across exec): one started
        // with SIGTERM (bit 15, 0x4000) blocked waits out a close's grace.
        let blocked: std::collections::BTreeMap<u32, String> = with_app_processes
            .iter()
            .map(|(pid, _, _)| {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let mask = status
                    .lines()
                    .find_map(|l| l.strip_prefix("SigBlk:"))
                    .unwrap_or("?")
                    .trim()
                    .to_string();
                (*pid, mask)
            })
            .collect();

        let on = |shared: bool| if shared { None } else { Some(id.as_str()) };
        let entry = |shared: bool| if shared { shared_entry } else { own_entry };
        // Warm both paths (the first act on a desktop connects its backends).
        for shared in [true, false] {
            for _ in 0..3 {
                let (x, y) = entry(shared);
                call(&mut raw, gui("click", json!({"x": x, "y": y}), on(shared)));
                call(&mut raw, gui("type", json!({"text": "w"}), on(shared)));
                call(&mut raw, gui("screenshot", json!({}), on(shared)));
            }
        }
        let mut clicks = [Vec::new(), Vec::new()];
        let mut types = [Vec::new(), Vec::new()];
        let mut shots = [Vec::new(), Vec::new()];
        let mut effects = [
            std::collections::BTreeMap::new(),
            std::collections::BTreeMap::new(),
        ];
        for i in 0..ACTS {
            // Alternate which goes first, so that neither always follows the other.
            let order = if i % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for shared in order {
                let slot = usize::from(!shared);
                let (x, y) = entry(shared);
                let (took, _) = timed(&mut raw, gui("click", json!({"x": x, "y": y}), on(shared)));
                clicks[slot].push(took);
                let (took, typed) = timed(&mut raw, gui("type", json!({"text": "ab"}), on(shared)));
                types[slot].push(took);
                let effect = typed["effect"].as_str().unwrap_or("").to_string();
                *effects[slot].entry(effect).or_insert(0) += 1;
                let (took, shot) = timed(&mut raw, gui("screenshot", json!({}), on(shared)));
                assert!(shot["width"].as_u64().is_some(), "{shot}");
                shots[slot].push(took);
            }
        }
        let shot_size = {
            let shot = call(&mut raw, gui("screenshot", json!({}), on(false)));
            let persons = call(&mut raw, gui("screenshot", json!({}), on(true)));
            assert_eq!(
                (&shot["width"], &shot["height"]),
                (&persons["width"], &persons["height"]),
                "screenshots of unequal size: {shot} / {persons}"
            );
            format!("{}×{}", shot["width"], shot["height"])
        };

        // (4) 100 acts of the agent on its desktop (clicks into its entry, typing, keys), the
        // person's pointer and focus read from outside before and after each.
        let mut moved = 0;
        let mut moves = Vec::new();
        for i in 0..100 {
            let before = person_pointer_and_focus(person);
            let act = match i % 3 {
                0 => gui(
                    "click",
                    json!({"x": own_entry.0, "y": own_entry.1}),
                    on(false),
                ),
                1 => gui("type", json!({"text": "q"}), on(false)),
                _ => gui("key", json!({"combo": "BackSpace"}), on(false)),
            };
            call(&mut raw, act);
            let after = person_pointer_and_focus(person);
            if after != before {
                moved += 1;
                moves.push((before, after));
            }
        }

        // xdotool on each display, last: input from outside the daemon is a person's to its
        // person watch, which would pause the timed acts above.
        let (mut xdotool_shared, mut xdotool_own) = (Vec::new(), Vec::new());
        for _ in 0..ACTS {
            xdotool_shared.push(xdotool_click(&person.display, shared_entry));
            xdotool_own.push(xdotool_click(&display, own_entry));
        }

        close(&mut raw, &id);
        let daemon_closed_kib = daemon.memory_kib("VmRSS");
        let daemon_log = daemon.log_text();
        let load_after = load_average();

        let [own_click, shared_click] = clicks.map(p50);
        let [own_type, shared_type] = types.map(p50);
        let [own_shot, shared_shot] = shots.map(p50);
        let (xdotool_shared, xdotool_own) = (p50(xdotool_shared), p50(xdotool_own));
        let open_p50 = p50(opens.clone());
        let close_p50 = p50(closes.clone());
        let to_first_shot_p50 = p50(to_first_shot.clone());
        let (xvfb_ready_p50, xvfb_shot_p50) = (p50(xvfb_ready.clone()), p50(xvfb_shot.clone()));
        let spread = |samples: &[Duration]| {
            let min = samples.iter().min().unwrap();
            let max = samples.iter().max().unwrap();
            format!("{}–{}", ms(*min), ms(*max))
        };

        println!("load average before: {load_before}; after: {load_after}");
        println!();
        println!("| measure | agent's own desktop | anchor (same run) | ratio | target |");
        println!("|---|---|---|---|---|");
        println!(
            "| receipted `gui click` into a zenity entry, p50 of {ACTS} | {} | the same click on the person's desktop: {} | {} | ≤ 1.1× |",
            ms(own_click),
            ms(shared_click),
            ratio(own_click, shared_click)
        );
        println!(
            "| the same click by `xdotool mousemove X Y click --delay 0 1`, p50 of {ACTS} | {} (on the agent's display) | {} (on the person's) | {} | — |",
            ms(xdotool_own),
            ms(xdotool_shared),
            ratio(xdotool_own, xdotool_shared)
        );
        println!(
            "| receipted `gui type` of 2 characters into the entry, read back, p50 of {ACTS} (effects: {:?}) | {} | the same on the person's desktop: {} (effects: {:?}) | {} | ≤ 1.1× |",
            effects[0],
            ms(own_type),
            ms(shared_type),
            effects[1],
            ratio(own_type, shared_type)
        );
        println!(
            "| receipted `gui screenshot` of a {}×{} screen (returned at {shot_size}), p50 of {ACTS} | {} | the same on the person's desktop: {} | {} | ≤ 1.1× |",
            SIZE[0],
            SIZE[1],
            ms(own_shot),
            ms(shared_shot),
            ratio(own_shot, shared_shot)
        );
        println!(
            "| `gui desktop open`, headless {}×{}, request to reply, p50 of {OPENS} ({}) | {} | bare `Xvfb -displayfd` of the same size, spawn to its display number: {} ({}) | {} | — |",
            SIZE[0],
            SIZE[1],
            spread(&opens),
            ms(open_p50),
            ms(xvfb_ready_p50),
            spread(&xvfb_ready),
            ratio(open_p50, xvfb_ready_p50)
        );
        println!(
            "| open + first `gui screenshot` on it, p50 of {OPENS} ({}; the screenshot alone {}) | {} | bare Xvfb + one `import -window root png:-`: {} ({}) | {} | ≤ 500 ms |",
            spread(&to_first_shot),
            ms(p50(first_shots)),
            ms(to_first_shot_p50),
            ms(xvfb_shot_p50),
            spread(&xvfb_shot),
            ratio(to_first_shot_p50, xvfb_shot_p50)
        );
        println!(
            "| `gui desktop close`, p50 of {OPENS} | {} | — | — | — |",
            ms(close_p50)
        );
        let xvfb_rss_median = {
            let mut sorted = xvfb_rss.clone();
            sorted.sort();
            sorted[sorted.len() / 2]
        };
        println!(
            "| memory of an open desktop, idle after its first screenshot (doctor's `resident_bytes`: VmRSS summed over its processes) | {} | a bare Xvfb of the same size after one `import`: {} | {:.2}× | — |",
            mib(doctor_idle / 1024),
            mib(xvfb_rss_median),
            doctor_idle as f64 / 1024.0 / xvfb_rss_median as f64
        );
        println!(
            "| the same with the zenity entry running on it | {} | — | — | — |",
            mib(doctor_with_app / 1024)
        );
        println!(
            "| daemon VmRSS: idle / after {OPENS} opens and closes / one desktop open / after it closed | {} / {} / {} / {} | idle: {} | +{} with one open | — |",
            mib(daemon_idle_kib),
            mib(daemon_after_opens_kib),
            mib(daemon_one_open_kib),
            mib(daemon_closed_kib),
            mib(daemon_idle_kib),
            mib(daemon_one_open_kib.saturating_sub(daemon_after_opens_kib))
        );
        println!(
            "| the person's pointer or focus moved (`xdotool getmouselocation`, `getwindowfocus` before and after each act), in 100 acts on the agent's desktop (click, type, key) | {moved} times | — | — | 0 |"
        );
        for (before, after) in &moves {
            println!("moved: {before:?} -> {after:?}");
        }

        println!();
        println!(
            "Where an open's time goes (p50 of {OPENS}; each part ends where the next server's log is created):"
        );
        println!();
        println!("| part | p50 | min–max |");
        println!("|---|---|---|");
        for (name, samples) in [
            (
                "request to the X server's start (pipeline, policy, write-ahead receipt, private directory)",
                &parts.before_x,
            ),
            ("Xvfb started until it takes connections", &parts.x_server),
            (
                "session bus (dbus-daemon) started until it printed its address",
                &parts.session_bus,
            ),
            (
                "at-spi-bus-launcher started until org.a11y.Bus answers (accessibility bus up, enabled)",
                &parts.accessibility_bus,
            ),
            (
                "openbox started until it publishes _NET_SUPPORTING_WM_CHECK and _NET_CLIENT_LIST, surfaces bound, reply",
                &parts.window_manager_and_reply,
            ),
        ] {
            println!(
                "| {name} | {} | {} |",
                ms(p50(samples.clone())),
                spread(samples)
            );
        }

        println!();
        println!(
            "When each process of a desktop ended, counted from the `close` request (p50 of {OPENS}; close replied at {}):",
            ms(close_p50)
        );
        println!();
        println!("| process | ended after, p50 | min–max |");
        println!("|---|---|---|");
        let mut by_end: Vec<(&String, &Vec<Duration>)> = endings.iter().collect();
        by_end.sort_by_key(|(_, samples)| p50(samples.to_vec()));
        for (name, samples) in by_end {
            println!(
                "| {name} | {} | {} |",
                ms(p50(samples.clone())),
                spread(samples)
            );
        }

        println!();
        println!("An idle desktop's processes (VmRSS), then with the zenity entry running:");
        println!();
        println!("| process | idle | with zenity | signals blocked (`SigBlk`) |");
        println!("|---|---|---|---|");
        for (pid, name, kib) in &idle_processes {
            let with = with_app_processes
                .iter()
                .find(|(p, _, _)| p == pid)
                .map(|(_, _, k)| mib(*k))
                .unwrap_or_else(|| "—".into());
            let blocked = blocked.get(pid).map(String::as_str).unwrap_or("?");
            println!("| {name} | {} | {with} | {blocked} |", mib(*kib));
        }
        for (pid, name, kib) in &with_app_processes {
            if !idle_processes.iter().any(|(p, _, _)| p == pid) {
                let blocked = blocked.get(pid).map(String::as_str).unwrap_or("?");
                println!("| {name} | — | {} | {blocked} |", mib(*kib));
            }
        }
        // What the daemon said of its desktops (a close's `ended` count, a process that
        // outlived SIGKILL).
        for line in daemon_log.lines().filter(|l| l.contains("desktop")) {
            eprintln!("daemon: {line}");
        }
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the desktops bench runs on Linux, where agents' own desktops are X servers");
}
