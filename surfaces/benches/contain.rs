//! Containment alone, without the daemon: a contained `/bin/true` from start to its reported
//! end, against the same program spawned and waited for directly, interleaved run by run.

#[cfg(target_os = "linux")]
fn main() {
    computer_surfaces::kit::contain::serve_if_zygote();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    linux::run();
}

#[cfg(not(target_os = "linux"))]
fn main() {}

#[cfg(target_os = "linux")]
mod linux {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use computer_surfaces::kit::contain::{Containment, ContainmentConfig, ExecSpec, RunLimits};

    fn p50(mut samples: Vec<Duration>) -> Duration {
        samples.sort();
        samples[samples.len() / 2]
    }

    pub fn run() {
        let state = tempfile::tempdir().unwrap();
        let containment = Containment::new(&ContainmentConfig {
            enabled: true,
            hidden: vec![state.path().to_path_buf()],
            shown: Vec::new(),
            read_only: Vec::new(),
        });
        assert_eq!(containment.status().mechanism, "namespaces");
        let exec = ExecSpec {
            program: PathBuf::from("/bin/true"),
            argv: vec!["true".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let rounds = std::env::var("COMPUTER_BENCH_ROUNDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(400);
        let (mut contained, mut direct) = (Vec::new(), Vec::new());
        runtime.block_on(async {
            for round in 0..rounds + 50 {
                let started = Instant::now();
                let run = containment
                    .start(&RunLimits::default(), &exec, Path::new("/"), false)
                    .unwrap();
                let mut handle = run.handle;
                let end = handle.done().await.unwrap();
                let took = started.elapsed();
                assert_eq!(end.status, Some(0));
                drop(run.pipes);

                let started = Instant::now();
                let status = tokio::process::Command::new("/bin/true")
                    .env_clear()
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .status()
                    .await
                    .unwrap();
                let direct_took = started.elapsed();
                assert!(status.success());
                if round >= 50 {
                    contained.push(took);
                    direct.push(direct_took);
                }
            }
        });
        let (c, d) = (p50(contained), p50(direct));
        println!(
            "| contained `/bin/true`, start to reported end, p50 | {:.3} ms | spawned and waited for directly: {:.3} ms | {:.2}× |",
            c.as_secs_f64() * 1e3,
            d.as_secs_f64() * 1e3,
            c.as_secs_f64() / d.as_secs_f64()
        );
    }
}
