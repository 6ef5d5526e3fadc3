//! Benchmarks of the keychain surface against a same-run anchor: `keychain get` (the reference
//! and metadata, no value) and `keychain exists` through the real daemon (socket, policy, both
//! receipts) against `secret-tool lookup` of the same item, all on one gnome-keyring on a
//! private bus; plus the store call alone, in process, to show what the Secret Service costs.
//! Run: `cargo bench -p computer-daemon --bench keychain`; it prints the table recorded in
//! BENCHMARKS.md.

mod common;

// The anchor and the fixture are gnome-keyring's: the bench runs where it does.
#[cfg(target_os = "linux")]
mod linux {
    use std::sync::Arc;
    use std::time::Instant;

    use computer_surfaces::kit::secret_store::{
        STORE_DEADLINE, SecretRef, call_with_deadline, system_store,
    };
    use computer_tests::Daemon;
    use computer_tests::keyring::Keyring;
    use serde_json::json;

    use crate::common::{load_average, median};

    const RUNS: usize = 40;

    /// Median wall time (ms) of one call over a connection opened beforehand.
    async fn timed_calls(daemon: &Daemon, command: &str) -> f64 {
        let client = daemon.client().await;
        let call = json!({"surface": "keychain", "command": command,
                          "args": {"reference": "keychain://bench.example/ci"}});
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            let result = client.call_raw(call.clone()).await.expect("call");
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            let out = computer_tests::structured(&result);
            assert_eq!(out["ok"], true, "{out}");
        }
        client.close().await;
        median(times)
    }

    pub async fn run() {
        // SAFETY: set before any thread of ours reads the environment.
        unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
        let load_before = load_average();
        let keyring = Keyring::start();
        let (stored, _) = keyring.secret_tool(
            &[
                "store",
                "--label",
                "Bench",
                "service",
                "bench.example",
                "username",
                "ci",
            ],
            "bench-value",
        );
        assert!(stored, "secret-tool store");
        let daemon = Daemon::start_with("", &keyring.env());

        let get_ms = timed_calls(&daemon, "get").await;
        let exists_ms = timed_calls(&daemon, "exists").await;

        let mut lookup = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            let (found, value) = keyring.secret_tool(
                &["lookup", "service", "bench.example", "username", "ci"],
                "",
            );
            lookup.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(found && value == "bench-value");
        }
        let lookup_ms = median(lookup);

        // The store alone, in this process, on the same bus (the daemon's cost without the socket,
        // policy and receipts): the value itself, resolved as other surfaces will resolve it.
        for (key, value) in keyring.env() {
            // SAFETY: no other thread of ours reads the environment while this runs.
            unsafe { std::env::set_var(key, value) };
        }
        let store = system_store();
        let reference = Arc::new(SecretRef::parse("keychain://bench.example/ci").unwrap());
        let mut resolved = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let reference = reference.clone();
            let started = Instant::now();
            call_with_deadline(&store, STORE_DEADLINE, move |store| store.get(&reference))
                .await
                .expect("store get");
            resolved.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let store_ms = median(resolved);

        println!("| what | median ms | vs `secret-tool lookup` |");
        println!("| --- | ---: | ---: |");
        println!(
            "| `secret-tool lookup` (a process per lookup; the anchor) | {lookup_ms:.2} | 1.00x |"
        );
        println!(
            "| `keychain get` (reference + metadata, through the daemon) | {get_ms:.2} | {:.2}x |",
            get_ms / lookup_ms
        );
        println!(
            "| `keychain exists` (through the daemon) | {exists_ms:.2} | {:.2}x |",
            exists_ms / lookup_ms
        );
        println!(
            "| store `get` of the value, in process (what a resolving surface pays) | {store_ms:.2} | {:.2}x |",
            store_ms / lookup_ms
        );
        println!();
        println!(
            "{RUNS} runs each; load average before {load_before}, after {}",
            load_average()
        );
    }
}

#[cfg(target_os = "linux")]
#[tokio::main]
async fn main() {
    linux::run().await;
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the keychain bench runs on Linux, against gnome-keyring and secret-tool");
}
