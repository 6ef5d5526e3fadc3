//! Contained runs without the daemon: a run on a terminal (the program leads its own session
//! with the pty as its controlling terminal, and what it leaves behind dies with the run), a
//! sandbox reused by the next run only once nothing of the last one is left, and a run placed
//! on a desktop of an agent's own reaching that desktop's sockets alone (with Landlock, and,
//! in a copy of this binary where Landlock is made to fail, with an empty network namespace).

#[cfg(target_os = "linux")]
fn main() {
    computer_surfaces::kit::contain::serve_if_zygote();
    if std::env::args().nth(1).as_deref() == Some(linux::WITHOUT_LANDLOCK) {
        linux::a_desktop_run_without_landlock_gets_an_empty_network_namespace();
        return;
    }
    linux::a_contained_run_owns_its_terminal_and_leaves_nothing_behind();
    linux::a_reused_sandbox_holds_nothing_of_the_run_before();
    linux::a_run_makes_ptys_of_its_own_in_any_sandbox();
    linux::a_run_asked_for_while_containment_is_proven_waits_for_the_proof();
    linux::a_run_on_a_desktop_reaches_that_desktop_alone();
    linux::a_run_on_a_desktop_still_reads_the_daemons_tools_under_a_covered_directory();
    linux::the_fallback_without_landlock_is_checked_in_a_copy_of_this_binary();
    println!("contained_runs: ok");
}

#[cfg(not(target_os = "linux"))]
fn main() {}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{Read, Write};
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use computer_surfaces::kit::contain::{
        Containment, ContainmentConfig, DesktopReach, ExecSpec, RunLimits, desktops_dir,
    };
    use tokio::io::AsyncReadExt;

    fn containment(state: &Path) -> Containment {
        let containment = Containment::new(&ContainmentConfig {
            enabled: true,
            hidden: vec![state.to_path_buf()],
            shown: Vec::new(),
            read_only: Vec::new(),
        });
        assert_eq!(
            containment.status().mechanism,
            "namespaces",
            "{}",
            containment.status().detail
        );
        containment
    }

    /// A directory made where the daemon makes a desktop's private directory (inside
    /// [`desktops_dir`], made 0711 as the daemon makes it when missing).
    fn desktop_dir() -> tempfile::TempDir {
        use std::os::unix::fs::DirBuilderExt;
        let parent = desktops_dir();
        if !parent.exists() {
            std::fs::DirBuilder::new()
                .mode(0o711)
                .create(&parent)
                .unwrap();
        }
        tempfile::Builder::new()
            .prefix("computer-desktop-")
            .tempdir_in(parent)
            .unwrap()
    }

    fn sh(script: &str) -> ExecSpec {
        ExecSpec {
            program: PathBuf::from("/bin/sh"),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        }
    }

    /// Runs `script` contained; returns its stdout and how many processes its end killed.
    async fn run(containment: &Containment, script: &str) -> (String, u32) {
        let started = containment
            .start(&RunLimits::default(), &sh(script), Path::new("/"), false)
            .expect("started");
        let mut handle = started.handle;
        let mut stdout = started.pipes.stdout;
        let mut out = String::new();
        let (end, _) = tokio::join!(handle.done(), stdout.read_to_string(&mut out));
        let end = end.expect("the run reports its end");
        assert_eq!(end.status, Some(0), "{script}: {out}");
        (out, end.killed)
    }

    /// A daemon proves containment in the background: a run asked for at once waits for the
    /// proof and then runs contained (its own PID namespace: it is pid 1's child there).
    pub fn a_run_asked_for_while_containment_is_proven_waits_for_the_proof() {
        let state = tempfile::tempdir().unwrap();
        let containment = Containment::proving(&ContainmentConfig {
            enabled: true,
            hidden: vec![state.path().to_path_buf()],
            shown: Vec::new(),
            read_only: Vec::new(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (out, _) = runtime.block_on(run(&containment, "echo $$; ls /proc | grep -c '^[0-9]'"));
        let status = containment
            .status_now()
            .expect("the proof is in once a run started");
        assert_eq!(status.mechanism, "namespaces", "{}", status.detail);
        let mut lines = out.lines();
        let pid: u32 = lines.next().unwrap().parse().unwrap();
        assert!(pid < 10, "the run sees its own PID namespace: {out}");
        // The hidden state dir is masked: what it holds is not there inside the run.
        std::fs::write(state.path().join("secret"), "x").unwrap();
        let (listing, _) = runtime.block_on(run(
            &containment,
            &format!("ls -A {} | wc -l", state.path().display()),
        ));
        assert_eq!(listing.trim(), "0", "{listing}");
    }

    pub fn a_reused_sandbox_holds_nothing_of_the_run_before() {
        let state = tempfile::tempdir().unwrap();
        let containment = containment(state.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // Each run leaves a process behind; every later run in the same sandbox (the same
            // PID namespace) must find none of them, and the slot must indeed be reused.
            let mut namespaces = Vec::new();
            for round in 0..6 {
                let (out, killed) = run(
                    &containment,
                    "readlink /proc/self/ns/pid; \
                     for p in /proc/[0-9]*; do read -r c < $p/comm && echo \"comm $c\"; done; \
                     setsid -f sleep 1000",
                )
                .await;
                assert_eq!(killed, 1, "round {round}: the left sleep was killed: {out}");
                assert!(
                    !out.contains("comm sleep"),
                    "round {round}: a process of an earlier run is still there: {out}"
                );
                namespaces.push(out.lines().next().unwrap_or_default().to_string());
            }
            namespaces.sort();
            namespaces.dedup();
            assert!(
                namespaces.len() < 6,
                "six sequential runs used six sandboxes: {namespaces:?}"
            );
        });
    }

    /// `script` makes a pty in the run's own devpts, from a run without a terminal and from a
    /// terminal run in a stricter sandbox (everything read-only but one directory, no network).
    pub fn a_run_makes_ptys_of_its_own_in_any_sandbox() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let containment = containment(state.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (out, _) = runtime.block_on(run(&containment, "script -qc tty /dev/null"));
        assert_eq!(out.trim(), "/dev/pts/0", "{out:?}");

        let strict = RunLimits {
            no_network: true,
            writable: Some(vec![work.path().to_path_buf()]),
            ..Default::default()
        };
        let (mut run, master) = containment
            .start_terminal(
                &strict,
                &sh("script -qc 'echo inner=$(tty)' /dev/null; echo outer=$(tty)"),
                Path::new("/"),
                (24, 80),
            )
            .expect("started");
        let mut master = std::fs::File::from(master);
        let mut seen = String::new();
        read_until(&mut master, &mut seen, "outer=/dev/pts/0");
        assert!(seen.contains("inner=/dev/pts/1"), "{seen:?}");
        let end = runtime
            .block_on(run.done())
            .expect("the run reports its end");
        assert_eq!(end.status, Some(0), "{seen:?}");
    }

    /// Reads the master until `needle` shows up (bounded); returns all read so far.
    fn read_until(master: &mut std::fs::File, seen: &mut String, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 4096];
        while !seen.contains(needle) {
            assert!(Instant::now() < deadline, "no {needle:?} in {seen:?}");
            match master.read(&mut buf) {
                Ok(0) | Err(_) => panic!("terminal closed before {needle:?}; saw {seen:?}"),
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
    }

    pub fn a_contained_run_owns_its_terminal_and_leaves_nothing_behind() {
        let state = tempfile::tempdir().unwrap();
        let containment = containment(state.path());
        // /dev/tty opens only for a process with a controlling terminal; its terminal is the
        // only pty in the run's own /dev/pts, and `tty` names it; the setsid'd sleep must not
        // outlive the run. The sleep says `detached` once it is in its own session: until
        // then it is in the terminal's foreground group, and the shell's exit would hang it up
        // (SIGHUP) before the run could count it.
        let script = "exec 3</dev/tty && echo ctty-ok; echo \"tty=$(tty)\"; \
                      echo \"pts=$(ls /dev/pts | tr '\\n' ' ')\"; stty size; \
                      setsid -f sh -c 'echo detached; exec sleep 1000'; read line; \
                      echo \"got $line\"";
        let (mut run, master) = containment
            .start_terminal(&RunLimits::default(), &sh(script), Path::new("/"), (24, 91))
            .expect("started");
        let mut master = std::fs::File::from(master);
        let mut seen = String::new();
        read_until(&mut master, &mut seen, "ctty-ok");
        read_until(&mut master, &mut seen, "24 91");
        read_until(&mut master, &mut seen, "detached");
        assert!(seen.contains("tty=/dev/pts/0"), "{seen:?}");
        assert!(seen.contains("pts=0 ptmx "), "{seen:?}");
        master.write_all(b"hello\n").unwrap();
        read_until(&mut master, &mut seen, "got hello");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let end = runtime
            .block_on(run.done())
            .expect("the run reports its end");
        assert_eq!(end.status, Some(0), "sh exited 0; saw {seen:?}");
        assert_eq!(end.killed, 1, "the setsid'd sleep was left, and killed");
    }

    /// What a hostile program on an agent's desktop would try, as a script: connect to each
    /// `NAME=ADDRESS` (a path, `@name` for an abstract socket, `tcp:PORT` on 127.0.0.1) and
    /// print `NAME ok` or `NAME refused`.
    const CONNECT: &str = r#"
import socket, sys
for arg in sys.argv[1:]:
    if arg == "wait":
        print("waiting", flush=True)
        sys.stdin.readline()
        continue
    name, address = arg.split("=", 1)
    try:
        if address.startswith("tcp:"):
            s = socket.create_connection(("127.0.0.1", int(address[4:])), timeout=5)
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0" + address[1:] if address.startswith("@") else address)
        print(name, "ok")
    except OSError as err:
        print(name, "refused", err)
"#;

    /// A run on a desktop reaches its X socket, its bus and TCP; not another display's socket
    /// in /tmp/.X11-unix, an abstract socket of the host, the person's bus, or another
    /// desktop's private directory, whether they were there when the run's sandbox was made or
    /// came while it ran (a desktop opened meanwhile). The same connections from an ordinary
    /// run all succeed: the test can tell.
    pub fn a_run_on_a_desktop_reaches_that_desktop_alone() {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        let state = tempfile::tempdir().unwrap();
        let containment = containment(state.path());
        let pid = std::process::id();
        let x11 = Path::new("/tmp/.X11-unix");
        if !x11.exists() {
            std::fs::create_dir(x11).unwrap();
            std::fs::set_permissions(x11, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
                .unwrap();
        }
        let free_display = |from: u32| {
            (from..from + 1000)
                .find(|n| !x11.join(format!("X{n}")).exists())
                .unwrap()
        };
        let own_x = x11.join(format!("X{}", free_display(6000)));
        let own_x_listener = UnixListener::bind(&own_x).unwrap();
        let other_x = x11.join(format!("X{}", free_display(7000)));
        let _other_x_listener = UnixListener::bind(&other_x).unwrap();
        let abstract_name = format!("computer-test-person-display-{pid}");
        let _abstract_listener =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap())
                .unwrap();
        let own_dir = desktop_dir();
        let _own_bus = UnixListener::bind(own_dir.path().join("bus")).unwrap();
        let other_dir = desktop_dir();
        let _other_bus = UnixListener::bind(other_dir.path().join("bus")).unwrap();
        let person = tempfile::tempdir().unwrap();
        let person_bus = person.path().join("bus");
        let _person_bus = UnixListener::bind(&person_bus).unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();

        let reach = DesktopReach {
            own: vec![
                own_x.clone(),
                own_dir.path().join("bus"),
                own_dir.path().to_path_buf(),
            ],
            person_buses: vec![format!("unix:path={}", person_bus.display())],
        };
        let on_desktop = RunLimits {
            desktop: Some(reach),
            ..RunLimits::default()
        };
        let targets = [
            ("own-x", own_x.display().to_string()),
            ("own-bus", own_dir.path().join("bus").display().to_string()),
            ("other-x", other_x.display().to_string()),
            ("abstract", format!("@{abstract_name}")),
            ("person-bus", person_bus.display().to_string()),
            (
                "other-bus",
                other_dir.path().join("bus").display().to_string(),
            ),
            ("tcp", format!("tcp:{port}")),
        ];
        // A display and a desktop that come while a run waits: the X socket, and the desktop's
        // private directory with its bus (made by the run's wait, gone with `Later`).
        struct Later {
            x: PathBuf,
            desktop: PathBuf,
        }
        impl Drop for Later {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.x);
                let _ = std::fs::remove_dir_all(&self.desktop);
            }
        }
        let exec = |later: Option<&Later>| {
            let mut argv: Vec<std::ffi::OsString> =
                vec!["python3".into(), "-c".into(), CONNECT.into()];
            argv.extend(targets.iter().map(|(n, a)| format!("{n}={a}").into()));
            if let Some(later) = later {
                argv.push("wait".into());
                argv.push(format!("later-x={}", later.x.display()).into());
                let bus = later.desktop.join("bus");
                argv.push(format!("later-bus={}", bus.display()).into());
                let own_bus = own_dir.path().join("bus");
                argv.push(format!("own-bus-later={}", own_bus.display()).into());
            }
            ExecSpec {
                program: PathBuf::from("/usr/bin/python3"),
                argv,
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // With `later`, the run waits (on its stdin) once it has tried the rest, a display is
        // bound at `later.x` and a desktop's directory made with its bus while it waits, and
        // then it tries those.
        let output = |limits: &RunLimits, later: Option<&Later>| {
            runtime.block_on(async {
                use tokio::io::AsyncWriteExt;
                let started = containment
                    .start(limits, &exec(later), Path::new("/"), later.is_some())
                    .expect("started");
                let mut handle = started.handle;
                let mut stdout = started.pipes.stdout;
                let mut out = String::new();
                let mut _later_listener = None;
                if let (Some(later), Some(mut stdin)) = (later, started.pipes.stdin) {
                    let mut buf = [0u8; 4096];
                    while !out.contains("waiting") {
                        let n = stdout.read(&mut buf).await.unwrap();
                        assert!(n > 0, "the run ended before it waited: {out}");
                        out.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                    std::fs::create_dir(&later.desktop).unwrap();
                    _later_listener = Some((
                        UnixListener::bind(&later.x).unwrap(),
                        UnixListener::bind(later.desktop.join("bus")).unwrap(),
                    ));
                    stdin.write_all(b"go\n").await.unwrap();
                }
                let mut rest = String::new();
                let (end, _) = tokio::join!(handle.done(), stdout.read_to_string(&mut rest));
                out.push_str(&rest);
                let end = end.expect("the run reports its end");
                assert_eq!(end.status, Some(0), "{out}");
                out
            })
        };
        let said = |out: &str, name: &str| {
            out.lines()
                .find(|line| line.split(' ').next() == Some(name))
                .map(|line| line.split(' ').nth(1).unwrap_or_default().to_string())
                .unwrap_or_else(|| panic!("no line for {name} in {out}"))
        };

        // An ordinary run reaches every one of them: each refusal below is the desktop's.
        let ordinary = output(&RunLimits::default(), None);
        for (name, _) in &targets {
            assert_eq!(said(&ordinary, name), "ok", "an ordinary run: {ordinary}");
        }
        // On the desktop, and on it with everything read-only but /tmp (whose recursive
        // bind must carry the masks inside it along).
        let writable_tmp = RunLimits {
            writable: Some(vec![PathBuf::from("/tmp")]),
            ..on_desktop.clone()
        };
        for limits in [&writable_tmp, &on_desktop] {
            let confined = output(limits, None);
            for name in ["own-x", "own-bus"] {
                assert_eq!(said(&confined, name), "ok", "{limits:?}: {confined}");
            }
            for name in ["other-x", "abstract", "person-bus", "other-bus"] {
                assert_eq!(said(&confined, name), "refused", "{limits:?}: {confined}");
            }
        }
        let confined = output(&on_desktop, None);
        let landlock = containment
            .status()
            .detail
            .contains("Landlock scoping (ABI");
        let tcp_expected = if landlock { "ok" } else { "refused" };
        assert_eq!(said(&confined, "tcp"), tcp_expected, "{confined}");

        // A display and a desktop that appear while a run on a desktop is under way stay out
        // of its reach too (/tmp/.X11-unix is the run's own, and so is the directory of every
        // desktop's, its own desktop's directory alone in it), where an ordinary run reaches
        // them; the run's own bus still answers after the wait.
        let later = || Later {
            x: x11.join(format!("X{}", free_display(8000))),
            desktop: desktops_dir().join(format!("computer-desktop-{pid}-later")),
        };
        for limits in [&on_desktop, &writable_tmp] {
            let confined = output(limits, Some(&later()));
            assert_eq!(said(&confined, "later-x"), "refused", "{confined}");
            assert_eq!(said(&confined, "later-bus"), "refused", "{confined}");
            assert_eq!(said(&confined, "own-bus-later"), "ok", "{confined}");
        }
        let ordinary = output(&RunLimits::default(), Some(&later()));
        for name in ["later-x", "later-bus", "own-bus-later"] {
            assert_eq!(said(&ordinary, name), "ok", "{ordinary}");
        }
        drop(own_x_listener);
        for path in [&own_x, &other_x] {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The argument that makes this binary check the fallback for a kernel without Landlock.
    pub const WITHOUT_LANDLOCK: &str = "--without-landlock";

    /// Runs this binary again with [`WITHOUT_LANDLOCK`]: the fallback needs a process whose
    /// every Landlock call fails from its start (the daemon's side asks the kernel once).
    pub fn the_fallback_without_landlock_is_checked_in_a_copy_of_this_binary() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .arg(WITHOUT_LANDLOCK)
            .status()
            .expect("this binary started again");
        assert!(status.success(), "the fallback without Landlock: {status}");
    }

    /// Where the kernel has no Landlock (made so here by a seccomp filter under which
    /// `landlock_create_ruleset` fails with ENOSYS, inherited by the zygote and every run), a
    /// run on a desktop still reaches no abstract socket of the host: it gets an empty network
    /// namespace, which the containment's description says. Its own desktop still answers.
    pub fn a_desktop_run_without_landlock_gets_an_empty_network_namespace() {
        deny_landlock();
        let state = tempfile::tempdir().unwrap();
        let detail = containment(state.path()).status().detail.clone();
        assert!(
            detail.contains("empty network namespace instead"),
            "the description does not say so: {detail}"
        );
        // The same connections as with Landlock: the abstract socket and TCP are refused (no
        // network at all), the desktop's own sockets answer.
        a_run_on_a_desktop_reaches_that_desktop_alone();
    }

    /// Makes every `landlock_create_ruleset` of this thread, and of what it starts, fail with
    /// ENOSYS, as on a kernel without Landlock.
    fn deny_landlock() {
        const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
        const IS: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
        const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
        let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let filter = [
            op(LOAD, 0, 0, 0),
            op(IS, 0, 1, libc::SYS_landlock_create_ruleset as u32),
            op(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        let program = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr().cast_mut(),
        };
        // SAFETY: prctl reads the program, which lives until it returns.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            assert_eq!(
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &raw const program
                ),
                0,
                "{}",
                std::io::Error::last_os_error()
            );
        }
    }

    /// The daemon's tools for runs stay shown to a run on a desktop even where a directory it
    /// finds covered (here another desktop's) holds the daemon's hidden state dir and the tools
    /// inside it: the desktop's cover comes after the plan's masks and keeps their mount points.
    pub fn a_run_on_a_desktop_still_reads_the_daemons_tools_under_a_covered_directory() {
        let other_desktop = desktop_dir();
        let state = other_desktop.path().join("state");
        let tools = state.join("run-tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::write(tools.join("computer"), "the tools\n").unwrap();
        std::fs::write(
            other_desktop.path().join("bus-log"),
            "the other desktop's\n",
        )
        .unwrap();
        let containment = Containment::new(&ContainmentConfig {
            enabled: true,
            hidden: vec![state.clone()],
            shown: vec![tools.clone()],
            read_only: Vec::new(),
        });
        assert_eq!(containment.status().mechanism, "namespaces");
        let on_desktop = RunLimits {
            desktop: Some(DesktopReach::default()),
            ..RunLimits::default()
        };
        let script = format!(
            "cat {tools}/computer; ls -A {other}",
            tools = tools.display(),
            other = other_desktop.path().display()
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = runtime.block_on(async {
            let started = containment
                .start(&on_desktop, &sh(&script), Path::new("/"), false)
                .expect("started");
            let mut handle = started.handle;
            let mut stdout = started.pipes.stdout;
            let mut out = String::new();
            let (end, _) = tokio::join!(handle.done(), stdout.read_to_string(&mut out));
            assert_eq!(end.expect("its end").status, Some(0), "{out}");
            out
        });
        assert!(out.contains("the tools"), "{out}");
        assert!(
            !out.contains("bus-log"),
            "the other desktop's files show: {out}"
        );
        let (ordinary, _) = runtime.block_on(run(&containment, &script));
        assert!(ordinary.contains("bus-log"), "{ordinary}");
    }
}
