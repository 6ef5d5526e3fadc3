//! Masking throughput: 64 MiB of command output holding 10 secrets in assorted encodings, pushed
//! through a stream masker in 64 KiB chunks, against the same output through what capture does
//! to every byte today (sha256) — side by side in one run.
//!
//! `cargo bench -p computer-surfaces --bench mask`

use std::time::{Duration, Instant};

use base64::Engine;
use computer_surfaces::kit::mask::Masker;
use sha2::{Digest, Sha256};

const SIZE: usize = 64 << 20;
const CHUNK: usize = 64 << 10;
const RUNS: usize = 5;

fn main() {
    let secrets: Vec<(String, Vec<u8>)> = (0..10)
        .map(|i| {
            (
                format!("SECRET_{i}"),
                format!("tok_{i}_{:x}", 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1)).into_bytes(),
            )
        })
        .collect();
    let output = sample_output(&secrets);
    let masker = Masker::new(secrets.iter().map(|(n, v)| (n.as_str(), v.as_slice())));

    let mut plain = Vec::new();
    let mut masked = Vec::new();
    for _ in 0..RUNS {
        plain.push(time(|| {
            let mut hash = Sha256::new();
            for chunk in output.chunks(CHUNK) {
                hash.update(chunk);
            }
            std::hint::black_box(hash.finalize());
        }));
        masked.push(time(|| {
            let mut hash = Sha256::new();
            let mut stream = masker.stream();
            for chunk in output.chunks(CHUNK) {
                stream.push_with(chunk, |part| hash.update(part));
            }
            hash.update(stream.finish());
            std::hint::black_box(hash.finalize());
        }));
    }
    let mask_only = {
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            runs.push(time(|| {
                let mut stream = masker.stream();
                let mut out = 0;
                for chunk in output.chunks(CHUNK) {
                    stream.push_with(chunk, |part| out += part.len());
                }
                std::hint::black_box(out + stream.finish().len());
            }));
        }
        median(runs)
    };
    let (plain, masked) = (median(plain), median(masked));
    // The masking did its work: every printed secret is gone, in every form the output used.
    let once = masker.mask(&output);
    let marks = once.windows(8).filter(|w| w == b"[masked ").count();
    for (_, value) in &secrets {
        assert!(
            !once.windows(value.len()).any(|w| w == value.as_slice()),
            "a secret survived masking"
        );
    }
    let printed = output
        .split(|b| *b == b'\n')
        .filter(|l| {
            l.starts_with(b"token=")
                || l.starts_with(b"auth:")
                || l.starts_with(b"{\"key")
                || l.starts_with(b"url=")
        })
        .count();
    assert_eq!(marks, printed, "one mask per printed secret");
    let mut streamed = Vec::with_capacity(output.len());
    let mut stream = masker.stream();
    for chunk in output.chunks(CHUNK) {
        stream.push_with(chunk, |part| streamed.extend_from_slice(part));
    }
    streamed.extend(stream.finish());
    assert!(
        streamed == once,
        "the stream masks as the whole output does"
    );
    let mbps = |d: Duration| SIZE as f64 / d.as_secs_f64() / 1e6;
    println!(
        "masking 64 MiB, 10 secrets, {} KiB chunks, median of {RUNS}; {marks} secrets masked",
        CHUNK >> 10
    );
    println!(
        "  masking alone:              {:>8.1} ms  {:>7.0} MB/s  (target >= 200 MB/s)",
        ms(mask_only),
        mbps(mask_only)
    );
    println!(
        "  capture's hash, unmasked:   {:>8.1} ms  {:>7.0} MB/s  (anchor)",
        ms(plain),
        mbps(plain)
    );
    println!(
        "  capture's hash, masked:     {:>8.1} ms  {:>7.0} MB/s  ratio {:.2}x (target <= 1.3x)",
        ms(masked),
        mbps(masked),
        masked.as_secs_f64() / plain.as_secs_f64()
    );
}

/// Log-like lines; every ~2000th line prints one of the secrets in one of its encodings.
fn sample_output(secrets: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SIZE + 256);
    let mut n: u64 = 0;
    while out.len() < SIZE {
        n += 1;
        let line = if n.is_multiple_of(2000) {
            let (_, value) = &secrets[(n / 2000 % 10) as usize];
            match n / 2000 % 4 {
                0 => format!("token={}\n", String::from_utf8_lossy(value)),
                1 => format!(
                    "auth: Basic {}\n",
                    base64::engine::general_purpose::STANDARD
                        .encode([b"user:".as_slice(), value].concat())
                ),
                2 => format!("{{\"key\":\"{}\"}}\n", hex::encode(value)),
                _ => format!("url=https://x/?t={}\n", String::from_utf8_lossy(value)),
            }
        } else {
            format!(
                "2026-12-01T00:00:{:02}Z INFO worker-{} processed item {} in {} ms\n",
                n % 60,
                n % 8,
                n.wrapping_mul(2_654_435_761) % 1_000_000,
                n % 97
            )
        };
        out.extend_from_slice(line.as_bytes());
    }
    out.truncate(SIZE);
    out
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
