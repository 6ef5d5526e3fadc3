//! The price of exporting receipts: a receipted `shell run true` round trip through a daemon
//! that exports every row to a syslog sink, and through one whose sink is down, against one that
//! does not export (same run, alternating blocks), and how fast rows reach the sink while 32 clients call at once, against how fast the
//! ledger takes them. The sink is a TCP listener in this process that reads the octet-counted
//! frames and notes the highest sequence number. Run with
//! `cargo bench -p computer-daemon --bench export`; it prints markdown table rows.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use computer_tests::{Daemon, RawConnection, shell_run, syslog_frame_seqs, wait_for};
use serde_json::json;

const BLOCK: usize = 25;
const BLOCKS: usize = 16;

/// A syslog receiver that reads and counts: the highest `seq` and the frames taken.
struct Sink {
    port: u16,
    highest: Arc<AtomicI64>,
}

impl Sink {
    fn start() -> Sink {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let highest = Arc::new(AtomicI64::new(0));
        let noted = highest.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let noted = noted.clone();
                std::thread::spawn(move || read_frames(stream, &noted));
            }
        });
        Sink { port, highest }
    }
}

/// Reads `LEN SP MESSAGE` frames until the sender closes, noting each message's `seq`.
fn read_frames(mut stream: std::net::TcpStream, highest: &AtomicI64) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let Ok(n) = stream.read(&mut chunk) else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let (seqs, at) = syslog_frame_seqs(&buf);
        if let Some(&seq) = seqs.iter().max() {
            highest.fetch_max(seq, Ordering::Relaxed);
        }
        buf.drain(..at);
    }
}

fn call(raw: &mut RawConnection) {
    let (reply, _) = raw.call_tool(&shell_run(json!({"argv": ["true"]}), json!({})));
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
}

fn connect(daemon: &Daemon) -> RawConnection {
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p) as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // SAFETY: set before any other thread exists; the harness reads it to find the binary.
    unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
    let sink = Sink::start();
    let exporting = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{}\"\n",
        sink.port
    ));
    let plain = Daemon::start_with_config("");
    // A sink that is down: nothing listens on its port, so the exporter is refused and retries.
    let down_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let stranded = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{down_port}\"\n"
    ));
    let (mut on, mut off, mut down) = (connect(&exporting), connect(&plain), connect(&stranded));
    for _ in 0..50 {
        call(&mut on);
        call(&mut off);
        call(&mut down);
    }
    let (mut with_export, mut without, mut sink_down) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..BLOCKS {
        for (conn, samples) in [
            (&mut on, &mut with_export),
            (&mut off, &mut without),
            (&mut down, &mut sink_down),
        ] {
            for _ in 0..BLOCK {
                let started = Instant::now();
                call(conn);
                samples.push(started.elapsed());
            }
        }
    }
    let (on_p50, off_p50) = (
        percentile(&mut with_export, 0.5),
        percentile(&mut without, 0.5),
    );
    let (on_p99, off_p99) = (
        percentile(&mut with_export, 0.99),
        percentile(&mut without, 0.99),
    );
    let (down_p50, down_p99) = (
        percentile(&mut sink_down, 0.5),
        percentile(&mut sink_down, 0.99),
    );
    assert!(
        stranded.last_seq() > 0,
        "the daemon whose sink is down still receipts its calls"
    );

    // 32 clients at once: the ledger's rate, and the sink's until it holds every row.
    let before = exporting.last_seq();
    wait_for("the sink to catch up", Duration::from_secs(60), || {
        (sink.highest.load(Ordering::Relaxed) >= before).then_some(())
    });
    let (clients, each) = (32, 50);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                let mut raw = connect(&exporting);
                for _ in 0..each {
                    call(&mut raw);
                }
            });
        }
    });
    let written_in = started.elapsed();
    let last = exporting.last_seq();
    wait_for("every row at the sink", Duration::from_secs(120), || {
        (sink.highest.load(Ordering::Relaxed) >= last).then_some(())
    });
    let exported_in = started.elapsed();
    let rows = (last - before) as f64;

    println!("| measure | with export | anchor (same run) | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| receipted `shell run true` round trip, export to a syslog sink on, p50 / p99 ({} calls) | {} / {} | the same, export off: {} / {} | {:.3}× | ≤ 1.05× |",
        BLOCK * BLOCKS,
        ms(on_p50),
        ms(on_p99),
        ms(off_p50),
        ms(off_p99),
        on_p50.as_secs_f64() / off_p50.as_secs_f64()
    );
    println!(
        "| the same, its syslog sink down (nothing listens; the exporter retries with backoff), p50 / p99 | {} / {} | export off: {} / {} | {:.3}× | ≤ 1.05× |",
        ms(down_p50),
        ms(down_p99),
        ms(off_p50),
        ms(off_p99),
        down_p50.as_secs_f64() / off_p50.as_secs_f64()
    );
    println!(
        "| rows exported per second, {clients} clients × {each} calls ({rows} rows; until the last is at the sink) | {:.0}/s | rows the ledger took per second meanwhile: {:.0}/s | {:.3}× | keeps up |",
        rows / exported_in.as_secs_f64(),
        rows / written_in.as_secs_f64(),
        written_in.as_secs_f64() / exported_in.as_secs_f64()
    );
}
