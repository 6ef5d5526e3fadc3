//! Contained runs without the daemon: a run on a terminal (the program leads its own session
//! with the pty as its controlling terminal, and what it leaves behind dies with the run), and
//! a sandbox reused by the next run only once nothing of the last one is left.

#[cfg(target_os = "linux")]
fn main() {
    computer_surfaces::kit::contain::serve_if_zygote();
    linux::a_contained_run_owns_its_terminal_and_leaves_nothing_behind();
    linux::a_reused_sandbox_holds_nothing_of_the_run_before();
    linux::a_run_makes_ptys_of_its_own_in_any_sandbox();
    linux::a_run_asked_for_while_containment_is_proven_waits_for_the_proof();
    println!("contained_runs: ok");
}

#[cfg(not(target_os = "linux"))]
fn main() {}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{Read, Write};
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use computer_surfaces::kit::contain::{Containment, ContainmentConfig, ExecSpec, RunLimits};
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
}
