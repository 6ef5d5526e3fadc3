//! A shell run with one secret through the real daemon (socket, policy, both receipts, keychain
//! lookup over D-Bus, masking of its output) against its anchor measured in the same run: what a
//! person would do by hand, `secret-tool lookup` and then the same command with the value in its
//! environment. Also the same run without the secret, for the cost the secret adds. Starts its
//! own Xvfb, session bus and gnome-keyring (unlocked, in a temporary home: the suite's
//! `computer_tests::keyring` fixture).
//! Run: `cargo bench -p computer-daemon --bench secrets`.

mod common;

// The anchor and the fixture are gnome-keyring's: the bench runs where it does.
#[cfg(target_os = "linux")]
mod linux {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use computer_tests::desktop::{Desktop, TestDesktop};
    use computer_tests::keyring::Keyring;
    use computer_tests::{Daemon, shell_run};
    use serde_json::{Value, json};

    use crate::common::{load_average, median};

    const RUNS: usize = 30;
    const VALUE: &str = "bench-token-0123456789abcdef";

    fn secret_tool(desktop: &Desktop, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        let mut child = desktop
            .command("secret-tool")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("secret-tool");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    async fn call_ms(daemon: &Daemon, request: Value) -> (f64, Value) {
        let client = daemon.client().await;
        let started = Instant::now();
        let result = client.call_raw(request).await.expect("call");
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        client.close().await;
        (ms, computer_tests::structured(&result))
    }

    pub async fn run() {
        let desktop = Desktop::shared();
        // Its own keyring, unlocked, on the desktop's bus (the daemon and secret-tool use that bus).
        let keyring = Keyring::on_bus(&desktop.dbus_address);
        let store = [
            "store", "--label", "bench", "service", "bench", "username", "token",
        ];
        assert!(
            secret_tool(desktop, &store, Some(VALUE)).status.success(),
            "secret-tool store"
        );

        let daemon = desktop
            .start_daemon("[[rules]]\nsecrets = [\"keychain://bench/*\"]\ndecision = \"allow\"\n");
        let with_secret = shell_run(
            json!({"argv": ["printenv", "T"]}),
            json!({"secrets": {"T": "keychain://bench/token"}}),
        );
        let without = shell_run(json!({"argv": ["printenv", "HOME"]}), json!({}));
        // Warm both paths (first D-Bus connection, first zygote slot).
        for _ in 0..3 {
            let (_, out) = call_ms(&daemon, with_secret.clone()).await;
            assert_eq!(out["stdout"], "[masked T]\n", "{out}");
            call_ms(&daemon, without.clone()).await;
        }

        let (mut anchor, mut secret, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let started = Instant::now();
            let looked_up = secret_tool(
                desktop,
                &["lookup", "service", "bench", "username", "token"],
                None,
            );
            let value = String::from_utf8(looked_up.stdout).unwrap();
            let printed = Command::new("printenv")
                .arg("T")
                .env("T", &value)
                .output()
                .unwrap();
            anchor.push(started.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(printed.stdout, format!("{VALUE}\n").as_bytes());

            secret.push(call_ms(&daemon, with_secret.clone()).await.0);
            plain.push(call_ms(&daemon, without.clone()).await.0);
        }
        let (anchor, secret, plain) = (median(anchor), median(secret), median(plain));
        println!("load average: {}", load_average());
        println!("| measure | median | anchor (same run) | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| shell run with one secret (`printenv T`, `secrets: {{T: keychain://…}}`) through the daemon | {secret:.1} ms | `secret-tool lookup` + `printenv T` spawned directly: {anchor:.1} ms | {:.2}x |",
            secret / anchor
        );
        println!(
            "| the same run without the secret (`printenv HOME`) | {plain:.1} ms | — | the secret adds {:.1} ms |",
            secret - plain
        );
        drop(keyring);
    }
}

#[cfg(target_os = "linux")]
#[tokio::main(flavor = "multi_thread")]
async fn main() {
    linux::run().await;
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the secrets bench runs on Linux, against gnome-keyring and secret-tool");
}
