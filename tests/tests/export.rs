//! Receipts exported to a real rsyslog (`imtcp` into a file): every row of a run of calls
//! arrives in order with its place in the chain; with rsyslog stopped the calls go on, and once
//! it is back (after a daemon restart too) every missing row arrives, in order, from the cursor.

use std::time::Duration;

use computer_tests::receivers::{Rsyslog, assert_arrived_as_the_ledger_holds};
use computer_tests::{Daemon, echo_calls, syslog_frame_seqs, wait_for};

#[test]
fn every_receipt_reaches_rsyslog_in_order_and_a_stopped_receiver_misses_none() {
    let mut rsyslog = Rsyslog::start();
    let mut daemon = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcp://127.0.0.1:{}\"\n",
        rsyslog.port
    ));

    // A run of calls: every row arrives.
    echo_calls(&daemon, 10, "first");
    let first = daemon.last_seq();
    assert!(first >= 20, "10 calls wrote {first} rows");
    rsyslog.wait_through(first);

    // The receiver stops: calls go on (none waits for it), and the log says the sink is down.
    rsyslog.stop();
    echo_calls(&daemon, 10, "while down");
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
    echo_calls(&daemon, 5, "after restart");
    let last = daemon.last_seq();

    // The receiver is back: every row it missed arrives, in order.
    rsyslog.resume();
    rsyslog.wait_through(last);

    // What arrived is the ledger's chain, exactly: each row's hash covers its text and the
    // previous hash, and matches the ledger's own. Rows may come twice (at least once), but
    // their first arrivals are in sequence order.
    let again = assert_arrived_as_the_ledger_holds(&daemon, &rsyslog.rows(), last);
    // The cursor, not a replay from the first row, is where sending resumed: of the rows
    // taken before the stop, at most those still unacknowledged then came again.
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
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert_eq!(
        doctor["export"]["syslog"]["delivered_through"], last,
        "{doctor}"
    );
    assert_eq!(doctor["export"]["syslog"]["behind"], 0, "{doctor}");
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
            echo_calls(&daemon, 10, "unread");
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
