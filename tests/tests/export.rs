//! Receipts exported to a real rsyslog (`imtcp` into a file): every row of a run of calls
//! arrives in order with its place in the chain; with rsyslog stopped the calls go on, and once
//! it is back (after a daemon restart too) every missing row arrives, in order, from the cursor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use computer_tests::desktop::spawn_tied;
use computer_tests::{Daemon, RawConnection, shell_run, syslog_frame_seqs, wait_for};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A private rsyslogd: TCP input on 127.0.0.1, every message written to a file as its
/// structured data and its text.
struct Rsyslog {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<Child>,
}

impl Rsyslog {
    fn start() -> Rsyslog {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let mut rsyslog = Rsyslog {
            dir: tempfile::tempdir().unwrap(),
            port,
            process: None,
        };
        rsyslog.resume();
        rsyslog
    }

    /// Starts rsyslogd (again) on the same port and file.
    fn resume(&mut self) {
        let rsyslogd = Path::new("/usr/sbin/rsyslogd");
        assert!(
            rsyslogd.exists(),
            "/usr/sbin/rsyslogd is missing: packaging/install-deps.sh installs rsyslog"
        );
        let dir = self.dir.path();
        let config = dir.join("rsyslog.conf");
        std::fs::write(
            &config,
            format!(
                "global(workDirectory=\"{dir}\" maxMessageSize=\"4m\")\n\
                 module(load=\"imtcp\")\n\
                 template(name=\"receipt\" type=\"string\" string=\"%structured-data% %msg%\\n\")\n\
                 input(type=\"imtcp\" port=\"{port}\" address=\"127.0.0.1\")\n\
                 *.* action(type=\"omfile\" file=\"{dir}/received.log\" template=\"receipt\")\n",
                dir = dir.display(),
                port = self.port
            ),
        )
        .unwrap();
        let mut command = Command::new(rsyslogd);
        command
            .args(["-n", "-f"])
            .arg(&config)
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("rsyslogd.log")).unwrap());
        self.process = Some(spawn_tied(command));
        let port = self.port;
        wait_for("rsyslogd to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
    }

    /// Stops rsyslogd (SIGTERM) and waits for it.
    fn stop(&mut self) {
        let mut child = self.process.take().expect("rsyslogd runs");
        // SAFETY: kill with a pid of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap();
    }

    fn received(&self) -> PathBuf {
        self.dir.path().join("received.log")
    }

    /// Every receipt received so far: (seq, prev, hash, text), in arrival order.
    fn rows(&self) -> Vec<(i64, String, String, String)> {
        std::fs::read_to_string(self.received())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (data, text) = line.split_once("] ")?;
                let param = |name: &str| {
                    let start = data.find(&format!(" {name}=\""))? + name.len() + 3;
                    let end = data[start..].find('"')? + start;
                    Some(data[start..end].to_string())
                };
                Some((
                    param("seq")?.parse().ok()?,
                    param("prev")?,
                    param("hash")?,
                    text.to_string(),
                ))
            })
            .collect()
    }

    /// Waits until every row up to `last` has arrived.
    fn wait_through(&self, last: i64) {
        wait_for(
            &format!("rows 1..={last} at rsyslog"),
            Duration::from_secs(30),
            || {
                let seen: std::collections::BTreeSet<i64> =
                    self.rows().iter().map(|r| r.0).collect();
                (1..=last).all(|seq| seen.contains(&seq)).then_some(())
            },
        );
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn calls(daemon: &Daemon, n: usize, word: &str) {
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    for i in 0..n {
        let (reply, _) = raw.call_tool(&shell_run(
            json!({"argv": ["echo", format!("{word} {i}")]}),
            json!({}),
        ));
        assert_eq!(
            reply["result"]["structuredContent"]["stdout"],
            format!("{word} {i}\n"),
            "{reply}"
        );
    }
}

#[test]
fn every_receipt_reaches_rsyslog_in_order_and_a_stopped_receiver_misses_none() {
    let mut rsyslog = Rsyslog::start();
    let mut daemon = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{}\"\n",
        rsyslog.port
    ));

    // A run of calls: every row arrives.
    calls(&daemon, 10, "first");
    let first = daemon.last_seq();
    assert!(first >= 20, "10 calls wrote {first} rows");
    rsyslog.wait_through(first);

    // The receiver stops: calls go on (none waits for it), and the log says the sink is down.
    rsyslog.stop();
    calls(&daemon, 10, "while down");
    wait_for(
        "the exporter to notice the sink is gone",
        Duration::from_secs(20),
        || {
            let log = daemon.log_text();
            (log.contains("export sink unreachable") || log.contains("export write failed"))
                .then_some(())
        },
    );
    // And the daemon restarts meanwhile: the cursor is on disk, not in its memory.
    daemon.stop_with(libc::SIGTERM);
    daemon.restart();
    calls(&daemon, 5, "after restart");
    let last = daemon.last_seq();

    // The receiver is back: every row it missed arrives, in order.
    rsyslog.resume();
    rsyslog.wait_through(last);

    // What arrived is the ledger's chain, exactly: each row's hash covers its text and the
    // previous hash, and matches the ledger's own. Rows may come twice (at least once), but
    // their first arrivals are in sequence order.
    let ledger: BTreeMap<i64, Value> = daemon
        .receipts()
        .into_iter()
        .map(|row| (row["seq"].as_i64().unwrap(), row))
        .collect();
    let mut firsts = Vec::new();
    let mut hashes = BTreeMap::new();
    for (seq, prev, hash, text) in rsyslog.rows() {
        let computed = hex::encode(Sha256::digest(format!("{prev}{text}")));
        assert_eq!(
            computed, hash,
            "row {seq}: its hash does not cover what arrived"
        );
        assert_eq!(
            ledger[&seq]["hash"], hash,
            "row {seq} is not the ledger's: {}",
            ledger[&seq]
        );
        if hashes.insert(seq, (prev, hash)).is_none() {
            firsts.push(seq);
        }
    }
    // The cursor, not a replay from the first row, is where sending resumed: of the rows
    // taken before the stop, at most those still unacknowledged then came again.
    let again = rsyslog.rows().len() - firsts.len();
    assert!(
        (again as i64) < first,
        "{again} rows came twice: sending restarted from the beginning, not from the cursor"
    );
    let cursor = daemon.state.join("export/syslog.cursor");
    wait_for(
        "the cursor at the last row",
        Duration::from_secs(10),
        || (std::fs::read_to_string(&cursor).ok()?.trim() == last.to_string()).then_some(()),
    );
    let expected: Vec<i64> = (1..=last).collect();
    assert_eq!(firsts, expected, "rows did not first arrive in order");
    for seq in 2..=last {
        assert_eq!(
            hashes[&seq].0,
            hashes[&(seq - 1)].1,
            "row {seq}: the chain breaks"
        );
    }
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert_eq!(doctor["export"]["delivered_through"], last, "{doctor}");
    assert_eq!(doctor["export"]["behind"], 0, "{doctor}");
    assert!(
        daemon.log_text().contains("export sink reachable again"),
        "the log does not say the sink came back"
    );
}

/// Reads what `stream` holds until it has been quiet for a moment or ends.
fn drain(stream: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    bytes
}

#[test]
fn a_receiver_that_stops_reading_is_dropped_after_the_write_timeout_and_nothing_is_lost() {
    use std::os::fd::AsRawFd;
    // A receiver with the smallest buffers TCP allows: a connection to it fills after a few
    // rows, and then it takes nothing, as a receiver that hung would.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    for (level, option, value) in [
        (libc::SOL_SOCKET, libc::SO_RCVBUF, 1024),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG, 536),
    ] {
        let value: libc::c_int = value;
        // SAFETY: a valid socket, and a pointer to an int with its size.
        let rc = unsafe {
            libc::setsockopt(
                listener.as_raw_fd(),
                level,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt {option}");
    }
    let port = listener.local_addr().unwrap().port();
    let daemon = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{port}\"\nwrite_timeout_ms = 300\n"
    ));
    let (mut hung, _) = listener.accept().unwrap();

    // Calls go on while the receiver takes nothing, until the exporter gives up on it.
    let mut made = 0;
    wait_for(
        "the exporter to drop the receiver that takes nothing",
        Duration::from_secs(60),
        || {
            calls(&daemon, 10, "unread");
            made += 10;
            daemon
                .log_text()
                .contains("took nothing for the write timeout")
                .then_some(())
        },
    );
    let last = daemon.last_seq();
    assert!(last >= 2 * made, "{made} calls wrote {last} rows");

    // It reconnects. What the hung receiver's TCP stack acknowledged is in its buffer; every
    // other row comes on the new connection: none is lost, and each arrives in order.
    let (mut second, _) = listener.accept().unwrap();
    let taken = syslog_frame_seqs(&drain(&mut hung)).0;
    let mut rest = Vec::new();
    let arrived = wait_for(
        "every row on the new connection",
        Duration::from_secs(30),
        || {
            rest.extend(drain(&mut second));
            let (seqs, _) = syslog_frame_seqs(&rest);
            (seqs.last() >= Some(&last)).then_some(seqs)
        },
    );
    assert!(!taken.is_empty(), "the hung receiver took no row at all");
    assert!(
        arrived.windows(2).all(|pair| pair[0] < pair[1]),
        "rows out of order on the new connection"
    );
    let mut seen: Vec<i64> = taken.iter().chain(&arrived).copied().collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, (1..=last).collect::<Vec<i64>>(), "rows were lost");
    assert!(
        arrived[0] <= taken.last().unwrap() + 1,
        "the new connection began after a gap: {} then {}",
        taken.last().unwrap(),
        arrived[0]
    );
}
