//! Receipts exported to each kind of sink, every one a real receiver: rsyslog over TLS (trusted
//! through `ca_file`, and refused without it), a journald namespace (rows larger than a datagram
//! among them) and an OTLP/HTTP collector decoded with the official protobufs (which refuses the
//! first batches). Every row arrives with its place in the chain, a stopped receiver misses
//! none, and a sink the config cannot name is refused with the value and what would do.

use std::collections::BTreeMap;
use std::time::Duration;

use computer_tests::receivers::{
    Journald, OtlpCollector, Rsyslog, assert_arrived_as_the_ledger_holds, journal_field,
    missing_rows,
};
use computer_tests::{Daemon, RawConnection, computer_bin, echo_calls, shell_run, wait_for};
use serde_json::{Value, json};

/// The most one datagram to the journal carries by default (`net.core.wmem_default`): a larger
/// entry must go through a memfd.
const DATAGRAM_MAX: usize = 212_992;

/// Where the daemon's log ends now: what it says next is read from there (a refused batch
/// earlier may have said a send failed).
fn log_mark(daemon: &Daemon) -> usize {
    daemon.log_text().len()
}

/// The daemon's log since `mark`.
fn log_since(daemon: &Daemon, mark: usize) -> String {
    daemon
        .log_text()
        .get(mark..)
        .unwrap_or_default()
        .to_string()
}

/// Waits for a line of the daemon's log, after `mark`, that says a sink went away (it could not
/// connect, or a send failed) and that `also` accepts; returns that line.
fn wait_for_sink_down(
    daemon: &Daemon,
    mark: usize,
    what: &str,
    also: impl Fn(&str) -> bool,
) -> String {
    wait_for(what, Duration::from_secs(20), || {
        log_since(daemon, mark)
            .lines()
            .find(|line| {
                (line.contains("export sink unreachable") || line.contains("export write failed"))
                    && also(line)
            })
            .map(str::to_string)
    })
}

/// Waits until `computer doctor --json` says `sink` delivered every row through `last`; returns
/// that sink's entry.
fn wait_for_doctor_delivered(daemon: &Daemon, sink: &str, last: i64) -> Value {
    wait_for(
        &format!("doctor to show {sink} delivered through {last}"),
        Duration::from_secs(10),
        || {
            let doctor = daemon.cli(&["doctor", "--json"]).json();
            let entry = doctor["export"][sink].clone();
            (entry["delivered_through"] == last).then_some(entry)
        },
    )
}

/// The ledger's rows by sequence number.
fn ledger(daemon: &Daemon) -> BTreeMap<i64, Value> {
    daemon
        .receipts()
        .into_iter()
        .map(|row| (row["seq"].as_i64().expect("a seq"), row))
        .collect()
}

#[test]
fn receipts_reach_rsyslog_over_tls_in_order_and_resume_after_it_restarts() {
    let mut rsyslog = Rsyslog::start_tls();
    let daemon = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcps://127.0.0.1:{}\"\nca_file = \"{}\"\n",
        rsyslog.port,
        rsyslog.ca_certificate().display()
    ));

    echo_calls(&daemon, 10, "over tls");
    let first = daemon.last_seq();
    assert!(first >= 20, "10 calls wrote {first} rows");
    rsyslog.wait_through(first);
    assert_arrived_as_the_ledger_holds(&daemon, &rsyslog.rows(), first);

    // The receiver stops: the calls go on, and the exporter notices.
    let mark = log_mark(&daemon);
    rsyslog.stop();
    echo_calls(&daemon, 5, "while down");
    wait_for_sink_down(
        &daemon,
        mark,
        "the exporter to notice rsyslogd is gone",
        |_| true,
    );
    let last = daemon.last_seq();

    // It is back on the same port and file: every row it missed arrives, in order, on a new
    // TLS session, from the cursor rather than from the first row.
    rsyslog.resume();
    rsyslog.wait_through(last);
    let again = assert_arrived_as_the_ledger_holds(&daemon, &rsyslog.rows(), last);
    assert!(
        (again as i64) < first,
        "{again} rows came twice: sending restarted from the beginning, not from the cursor"
    );
    let syslog = wait_for_doctor_delivered(&daemon, "syslog", last);
    assert_eq!(syslog["sink"], "syslog", "{syslog}");
    assert_eq!(syslog["behind"], 0, "{syslog}");
    assert_eq!(syslog["falling_behind"], false, "{syslog}");
    assert!(
        syslog["address"]
            .as_str()
            .is_some_and(|address| address.contains(&rsyslog.port.to_string())),
        "{syslog}"
    );
    assert!(
        log_since(&daemon, mark).contains("export sink reachable again"),
        "the log does not say the sink came back"
    );
}

#[test]
fn a_tls_receiver_with_an_untrusted_certificate_gets_nothing() {
    // The receiver's certificate is self-signed, and the daemon is not told to trust it.
    let rsyslog = Rsyslog::start_tls();
    let daemon = Daemon::start_with_config(&format!(
        "[export]\nsyslog = \"tcps://127.0.0.1:{}\"\n",
        rsyslog.port
    ));

    // The calls themselves are not held up by the sink they cannot reach (echo_calls checks
    // each reply).
    echo_calls(&daemon, 3, "untrusted");
    let line = wait_for_sink_down(
        &daemon,
        0,
        "the log to say the receiver's certificate was refused",
        |line| line.to_lowercase().contains("certificate"),
    );

    assert!(
        rsyslog.rows().is_empty(),
        "receipts reached a receiver whose certificate is not trusted ({line}): {:?}",
        std::fs::read_to_string(rsyslog.received())
    );
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    let syslog = &doctor["export"]["syslog"];
    assert_eq!(syslog["delivered_through"], 0, "{doctor}");
    assert!(
        syslog["behind"].as_i64().is_some_and(|behind| behind > 0),
        "{doctor}"
    );
    let cursor = std::fs::read_to_string(daemon.state.join("export/syslog.cursor")).ok();
    assert!(
        cursor.as_deref().is_none_or(|cursor| cursor.trim() == "0"),
        "the cursor moved: {cursor:?}"
    );
}

#[test]
fn every_receipt_reaches_the_journal_with_its_place_in_the_chain() {
    let mut journal = Journald::start();
    let daemon =
        Daemon::start_with_config(&format!("[export]\njournald = \"{}\"\n", journal.namespace));

    echo_calls(&daemon, 5, "to the journal");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    // A row larger than a datagram may carry: a run whose args are three strings of 100 000
    // characters (one of 300 000 would exceed the kernel's 128 KiB for a single argument).
    let long = "x".repeat(100_000);
    let (reply, _) = raw.call_tool(&shell_run(
        json!({"argv": ["true", long, long, long]}),
        json!({}),
    ));
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
    // And text that needs escaping: a newline and a character beyond ASCII.
    let (reply, _) = raw.call_tool(&shell_run(
        json!({"argv": ["printf", "%s", "first line\nsecond line, ü"]}),
        json!({}),
    ));
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "first line\nsecond line, ü",
        "{reply}"
    );
    let first = daemon.last_seq();
    let rows = ledger(&daemon);
    let (large, _) = rows
        .iter()
        .find(|(_, row)| row["body"].to_string().len() > DATAGRAM_MAX)
        .unwrap_or_else(|| {
            panic!("no row is larger than a datagram: does the ledger shorten a run's argv now?")
        });

    journal.wait_through(first);
    assert_arrived_as_the_ledger_holds(&daemon, &journal.rows(), first);
    for entry in journal.receipt_entries() {
        let field = |name: &str| journal_field(&entry, name).unwrap_or_default();
        let seq: i64 = field("COMPUTER_SEQ")
            .parse()
            .expect("COMPUTER_SEQ a number");
        let row = &rows[&seq];
        assert_eq!(
            [
                field("PRIORITY"),
                field("SYSLOG_FACILITY"),
                field("SYSLOG_IDENTIFIER")
            ],
            ["6", "10", "computer"],
            "row {seq}"
        );
        assert_eq!(
            [
                field("COMPUTER_KIND"),
                field("COMPUTER_CALL"),
                field("COMPUTER_SURFACE"),
                field("COMPUTER_COMMAND")
            ]
            .map(Value::from),
            [
                row["kind"].clone(),
                row["call_id"].clone(),
                row["surface"].clone(),
                row["command"].clone()
            ],
            "row {seq}"
        );
        // The entry's time is the row's, to the millisecond or cut to the second.
        let time = chrono::DateTime::parse_from_rfc3339(&field("COMPUTER_TIME"))
            .unwrap_or_else(|err| panic!("row {seq}: COMPUTER_TIME is not RFC 3339: {err}"));
        let late_by = row["at_ms"].as_i64().unwrap() - time.timestamp_millis();
        assert!(
            (0..1000).contains(&late_by),
            "row {seq}: COMPUTER_TIME {} is not the row's time {}",
            field("COMPUTER_TIME"),
            row["at_ms"]
        );
        if seq == *large {
            assert!(
                field("MESSAGE").len() > DATAGRAM_MAX,
                "the large row {seq} arrived shortened"
            );
        }
    }

    // The journal stops: the calls go on, and the exporter notices.
    let mark = log_mark(&daemon);
    journal.stop();
    echo_calls(&daemon, 5, "journal down");
    wait_for_sink_down(
        &daemon,
        mark,
        "the exporter to notice the journal is gone",
        |_| true,
    );
    let last = daemon.last_seq();

    // Back in the same namespace: every row it missed arrives.
    journal.resume();
    journal.wait_through(last);
    let again = assert_arrived_as_the_ledger_holds(&daemon, &journal.rows(), last);
    assert!(
        (again as i64) < first,
        "{again} rows came twice: sending restarted from the beginning, not from the cursor"
    );
    let journald = wait_for_doctor_delivered(&daemon, "journald", last);
    assert_eq!(journald["behind"], 0, "{journald}");
    assert!(
        log_since(&daemon, mark).contains("export sink reachable again"),
        "the log does not say the sink came back"
    );
}

/// This host's name, as gethostname gives it.
fn hostname() -> String {
    let mut name = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    assert_eq!(rc, 0, "gethostname");
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

/// The name of the user this test runs as (the daemon runs as the same).
fn user_name() -> String {
    // SAFETY: getpwuid returns null or a pointer to a static entry, read at once.
    unsafe {
        let entry = libc::getpwuid(libc::geteuid());
        assert!(!entry.is_null(), "no passwd entry for this user");
        std::ffi::CStr::from_ptr((*entry).pw_name)
            .to_string_lossy()
            .into_owned()
    }
}

#[test]
fn receipts_reach_an_otlp_collector_decoded_with_the_official_protobufs() {
    // The collector is unavailable for the first two batches: they must come again.
    let mut collector = OtlpCollector::start(2);
    let daemon = Daemon::start_with_config(&format!("[export]\notlp = \"{}\"\n", collector.url()));

    echo_calls(&daemon, 10, "to otlp");
    let first = daemon.last_seq();
    assert!(first >= 20, "10 calls wrote {first} rows");
    collector.wait_through(first);
    let requests = collector.requests();
    for request in &requests {
        assert_eq!(
            (
                request.method.as_str(),
                request.path.as_str(),
                request.content_type.as_str()
            ),
            ("POST", "/v1/logs", "application/x-protobuf"),
            "{request:?}"
        );
        assert!(request.logs.is_ok(), "{:?}", request.logs);
    }
    let statuses: Vec<u16> = requests.iter().map(|request| request.status).collect();
    assert_eq!(statuses[..2], [503, 503], "{statuses:?}");
    // A refused batch is no delivery: the refused ones and the first acknowledged one all
    // start at row 1.
    let first_seqs: Vec<Option<i64>> = requests[..3]
        .iter()
        .map(|request| Some(request.records().first()?.arrived().seq))
        .collect();
    assert_eq!(first_seqs, [Some(1); 3], "{statuses:?}");
    assert_arrived_as_the_ledger_holds(&daemon, &collector.rows(), first);

    let rows = ledger(&daemon);
    let (host, user) = (hostname(), user_name());
    for record in collector.records() {
        let seq = record.arrived().seq;
        let row = &rows[&seq];
        assert_eq!(
            ["service.name", "host.name", "user.name"].map(|name| record.resource.get(name)),
            [&json!("computer"), &json!(host), &json!(user)].map(Some),
            "row {seq}: {record:?}"
        );
        assert_eq!(record.scope, "computer.receipts", "row {seq}");
        assert_eq!(
            record.time_unix_nano as i64,
            row["at_ms"].as_i64().unwrap() * 1_000_000,
            "row {seq}: its time"
        );
        for (attribute, column) in [
            ("computer.kind", "kind"),
            ("computer.call", "call_id"),
            ("computer.surface", "surface"),
            ("computer.command", "command"),
        ] {
            assert_eq!(
                record.attributes.get(attribute),
                Some(&row[column]),
                "row {seq}: {attribute}"
            );
        }
    }

    // The collector goes away (its port refuses connections): the calls go on, and the
    // exporter notices.
    let port = collector.port;
    let mark = log_mark(&daemon);
    collector.stop();
    echo_calls(&daemon, 5, "collector down");
    wait_for_sink_down(
        &daemon,
        mark,
        "the exporter to notice the collector is gone",
        |_| true,
    );
    let last = daemon.last_seq();

    // A collector is back on the same port: every row the first did not acknowledge arrives.
    let restarted = OtlpCollector::start_on(port, 0);
    let arrived = wait_for(
        "every row at the restarted collector",
        Duration::from_secs(30),
        || {
            let arrived = [collector.rows(), restarted.rows()].concat();
            missing_rows(&arrived, last).is_empty().then_some(arrived)
        },
    );
    let again = assert_arrived_as_the_ledger_holds(&daemon, &arrived, last);
    assert!(
        (again as i64) < first,
        "{again} rows came twice: sending restarted from the beginning, not from the cursor"
    );
    for request in restarted.requests() {
        assert_eq!(request.status, 200, "{request:?}");
    }
    let otlp = wait_for_doctor_delivered(&daemon, "otlp", last);
    assert_eq!(otlp["behind"], 0, "{otlp}");
    assert!(
        log_since(&daemon, mark).contains("export sink reachable again"),
        "the log does not say the sink came back"
    );
}

/// `computer config check` of a config file holding `text`: whether it passed, and stderr.
fn config_check(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let out = std::process::Command::new(computer_bin())
        .args(["config", "check"])
        .env("COMPUTER_CONFIG", &config)
        .env_remove("DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(&*config.to_string_lossy(), "CONFIG");
    (out.status.success(), stderr)
}

/// Whether `text` holds `value` as a word of its own (not `5` inside `column 15`).
fn names(text: &str, value: &str) -> bool {
    text.match_indices(value).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        [before, after]
            .iter()
            .all(|c| !c.is_some_and(char::is_alphanumeric))
    })
}

#[test]
fn a_sink_the_config_cannot_name_is_refused_with_the_value_and_what_would_do() {
    for (line, value, valid) in [
        (
            "syslog = \"udp://h:1\"",
            "udp://h:1",
            &["tcp://", "tcps://"][..],
        ),
        (
            "otlp = \"ftp://h/v1/logs\"",
            "ftp://h/v1/logs",
            &["http://", "https://"][..],
        ),
        ("journald = 5", "5", &["true", "namespace"][..]),
    ] {
        let (passed, stderr) = config_check(&format!("[export]\n{line}\n"));
        assert!(!passed, "`{line}` passed the check");
        assert!(stderr.contains("line 2"), "`{line}`: {stderr}");
        // What the error says, without the quoted config line under it (which names the value
        // whatever the message is).
        let said: String = stderr
            .lines()
            .filter(|text| {
                !text
                    .trim_start()
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim_start()
                    .starts_with('|')
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            names(&said, value),
            "`{line}`: the error does not name {value}: {stderr}"
        );
        for form in valid {
            assert!(
                said.contains(form),
                "`{line}`: the error does not say {form} would do: {stderr}"
            );
        }
    }

    // A ca_file that is not there, or holds no certificate, is refused when the config is
    // checked, not first noticed by the sink at start.
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not-a-certificate.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    for (path, says) in [
        (dir.path().join("missing.pem"), "could not be read"),
        (not_pem, "holds no certificate"),
    ] {
        let (passed, stderr) = config_check(&format!(
            "[export]\nsyslog = \"tcps://127.0.0.1:6514\"\nca_file = \"{}\"\n",
            path.display()
        ));
        assert!(!passed, "{}: passed the check", path.display());
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains(says),
            "{}: {stderr}",
            path.display()
        );
    }

    // Each sink as the contract names it passes.
    for config in [
        "[export]\nsyslog = \"tcps://logs.example:6514\"\njournald = true\notlp = \"https://collector.example:4318/v1/logs\"\nbacklog_warn = 100\nwrite_timeout_ms = 1000\n",
        "[export]\nsyslog = \"tcp://127.0.0.1:514\"\njournald = \"audit\"\notlp = \"http://127.0.0.1:4318/v1/logs\"\n",
    ] {
        let (passed, stderr) = config_check(config);
        assert!(passed, "{config}: {stderr}");
    }
}

#[test]
fn doctor_shows_no_export_when_no_sink_is_named() {
    let daemon = Daemon::start();
    let doctor = daemon.cli(&["doctor", "--json"]).json();
    assert!(
        doctor.get("export").is_some_and(Value::is_null),
        "export is not null: {doctor}"
    );
}
