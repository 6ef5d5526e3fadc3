//! The price of exporting receipts: a receipted `shell run true` round trip through daemons
//! that export every row to each kind of sink, and through one whose sink is down, against one
//! that does not export (same run, alternating blocks); and how fast rows reach each sink while
//! 32 clients call at once, against how fast the ledger takes them. The syslog sink is a TCP
//! listener in this process that reads the octet-counted frames; the OTLP sink the suite's
//! collector, which decodes every request; the journal a private journald namespace read back
//! with `journalctl` (so its rate is read through polls of it, each a few tens of ms). Run with
//! `cargo bench -p computer-daemon --bench export`; it prints markdown table rows.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use computer_tests::receivers::{Journald, OtlpCollector};
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

/// A sink a daemon exports to, and how to read the highest row that reached it.
struct Exported<'a> {
    name: &'static str,
    daemon: Daemon,
    highest: Box<dyn Fn() -> i64 + Sync + 'a>,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // SAFETY: set before any other thread exists; the harness reads it to find the binary.
    unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
    let syslog = Sink::start();
    let collector = OtlpCollector::start(0);
    let journal = Journald::start();
    let sinks = [
        Exported {
            name: "syslog (TCP)",
            daemon: Daemon::start_with_config(&format!(
                "[export]\nsyslog = \"tcp://127.0.0.1:{}\"\n",
                syslog.port
            )),
            highest: Box::new(|| syslog.highest.load(Ordering::Relaxed)),
        },
        Exported {
            name: "OTLP/HTTP",
            daemon: Daemon::start_with_config(&format!(
                "[export]\notlp = \"{}\"\n",
                collector.url()
            )),
            highest: Box::new(|| {
                let records = collector.records();
                records.iter().map(|r| r.arrived().seq).max().unwrap_or(0)
            }),
        },
        Exported {
            name: "journald",
            daemon: Daemon::start_with_config(&format!(
                "[export]\njournald = \"{}\"\n",
                journal.namespace
            )),
            highest: Box::new(|| journal.rows().iter().map(|r| r.seq).max().unwrap_or(0)),
        },
    ];
    let plain = Daemon::start_with_config("");
    // A sink that is down: nothing listens on its port, so the exporter is refused and retries.
    let down_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let stranded = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{down_port}\"\n"
    ));

    // Round trips, alternating blocks: each exporting daemon, the stranded one, and the plain
    // one (the anchor).
    let mut daemons: Vec<&Daemon> = sinks.iter().map(|sink| &sink.daemon).collect();
    daemons.push(&stranded);
    daemons.push(&plain);
    let mut conns: Vec<RawConnection> = daemons.iter().map(|daemon| connect(daemon)).collect();
    for _ in 0..50 {
        for conn in &mut conns {
            call(conn);
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); conns.len()];
    for _ in 0..BLOCKS {
        for (conn, samples) in conns.iter_mut().zip(&mut samples) {
            for _ in 0..BLOCK {
                let started = Instant::now();
                call(conn);
                samples.push(started.elapsed());
            }
        }
    }
    let quantiles: Vec<(Duration, Duration)> = samples
        .iter_mut()
        .map(|s| (percentile(s, 0.5), percentile(s, 0.99)))
        .collect();
    let (off_p50, off_p99) = quantiles[quantiles.len() - 1];
    assert!(
        stranded.last_seq() > 0,
        "the daemon whose sink is down still receipts its calls"
    );

    println!("| measure | with export | anchor (same run) | ratio | target |");
    println!("|---|---|---|---|---|");
    let labels = sinks
        .iter()
        .map(|sink| format!("export on, sink {}", sink.name))
        .chain([
            "its syslog sink down (nothing listens; the exporter retries with backoff)".to_string(),
        ]);
    for (label, (p50, p99)) in labels.zip(&quantiles) {
        println!(
            "| receipted `shell run true` round trip, {label}, p50 / p99 ({} calls) | {} / {} | the same, export off: {} / {} | {:.3}× | ≤ 1.05× |",
            BLOCK * BLOCKS,
            ms(*p50),
            ms(*p99),
            ms(off_p50),
            ms(off_p99),
            p50.as_secs_f64() / off_p50.as_secs_f64()
        );
    }

    // 32 clients at once, against each sink in turn: the ledger's rate, and the sink's until it
    // holds every row.
    let (clients, each) = (32, 50);
    for sink in &sinks {
        let before = sink.daemon.last_seq();
        wait_for("the sink to catch up", Duration::from_secs(60), || {
            ((sink.highest)() >= before).then_some(())
        });
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..clients {
                scope.spawn(|| {
                    let mut raw = connect(&sink.daemon);
                    for _ in 0..each {
                        call(&mut raw);
                    }
                });
            }
        });
        let written_in = started.elapsed();
        let last = sink.daemon.last_seq();
        wait_for("every row at the sink", Duration::from_secs(120), || {
            ((sink.highest)() >= last).then_some(())
        });
        let exported_in = started.elapsed();
        let rows = (last - before) as f64;
        println!(
            "| rows exported per second to {}, {clients} clients × {each} calls ({rows} rows; until the last is at the sink) | {:.0}/s | rows the ledger took per second meanwhile: {:.0}/s | {:.3}× | keeps up |",
            sink.name,
            rows / exported_in.as_secs_f64(),
            rows / written_in.as_secs_f64(),
            written_in.as_secs_f64() / exported_in.as_secs_f64()
        );
    }
}
