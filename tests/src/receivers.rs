//! Where the export suites send receipts, each receiver private to its test: rsyslogd (`imtcp`,
//! plain TCP or TLS, into a file), a journald namespace instance, and an OTLP/HTTP logs
//! collector that decodes with the official OpenTelemetry protobufs; and the check that what
//! arrived is the ledger's chain.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::desktop::spawn_tied;
use crate::{Daemon, try_wait_for};

/// How long a receiver may take to start, and the rows of a test to arrive.
const START_LIMIT: Duration = Duration::from_secs(20);
const ARRIVAL_LIMIT: Duration = Duration::from_secs(30);

/// One receipt row as a receiver got it: its place in the chain and its stored text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrivedRow {
    pub seq: i64,
    pub prev: String,
    pub hash: String,
    pub text: String,
}

/// The rows of 1..=`last` missing from `arrived`.
pub fn missing_rows(arrived: &[ArrivedRow], last: i64) -> Vec<i64> {
    let seen: BTreeSet<i64> = arrived.iter().map(|row| row.seq).collect();
    (1..=last).filter(|seq| !seen.contains(seq)).collect()
}

/// Waits until every row of 1..=`last` is among what `rows` reads from a receiver; past the
/// limit, panics naming the missing rows, `receiver` and what `diagnosis` tells of it.
fn wait_for_rows(
    last: i64,
    receiver: &str,
    rows: impl Fn() -> Vec<ArrivedRow>,
    diagnosis: impl FnOnce() -> String,
) {
    let arrived = try_wait_for(ARRIVAL_LIMIT, || {
        missing_rows(&rows(), last).is_empty().then_some(())
    });
    if arrived.is_none() {
        panic!(
            "rows {:?} of 1..={last} never reached {receiver}; {}",
            missing_rows(&rows(), last),
            diagnosis()
        );
    }
}

/// Asserts that `arrived` (in arrival order) is the ledger's chain through at least `last`: each
/// row's hash covers what arrived (`sha256(prev ‖ text)`) and is the ledger's own, each row's
/// prev is the hash of the row before, and the first arrivals are 1, 2, 3… in order. Rows may
/// come again (delivery is at least once), but only as they came first. Returns how many
/// arrivals were repeats.
pub fn assert_arrived_as_the_ledger_holds(
    daemon: &Daemon,
    arrived: &[ArrivedRow],
    last: i64,
) -> usize {
    let ledger: BTreeMap<i64, Value> = daemon
        .receipts()
        .into_iter()
        .map(|row| (row["seq"].as_i64().expect("a seq"), row))
        .collect();
    let mut firsts = Vec::new();
    let mut chain: BTreeMap<i64, &ArrivedRow> = BTreeMap::new();
    for row in arrived {
        let seq = row.seq;
        let computed = hex::encode(Sha256::digest(format!("{}{}", row.prev, row.text)));
        assert_eq!(
            computed, row.hash,
            "row {seq}: its hash does not cover what arrived"
        );
        let stored = ledger
            .get(&seq)
            .unwrap_or_else(|| panic!("row {seq} arrived, and the ledger has no such row"));
        assert_eq!(
            (&stored["prev_hash"], &stored["hash"]),
            (
                &Value::from(row.prev.as_str()),
                &Value::from(row.hash.as_str())
            ),
            "row {seq} ({} of call {}) is not the ledger's",
            stored["kind"],
            stored["call_id"]
        );
        match chain.get(&seq) {
            Some(first) => assert_eq!(*first, row, "row {seq} came again, different"),
            None => {
                chain.insert(seq, row);
                firsts.push(seq);
            }
        }
    }
    let in_order: Vec<i64> = (1..=firsts.len() as i64).collect();
    assert_eq!(firsts, in_order, "rows did not first arrive in order");
    assert!(
        firsts.len() as i64 >= last,
        "rows {}..={last} never arrived",
        firsts.len() + 1
    );
    for seq in 2..=firsts.len() as i64 {
        assert_eq!(
            chain[&seq].prev,
            chain[&(seq - 1)].hash,
            "row {seq}: the chain breaks"
        );
    }
    arrived.len() - firsts.len()
}

/// Whether something on this machine listens on 127.0.0.1:`port` over TCP, read from
/// /proc/net/tcp: a TLS port is asked without a connection, which would make handshake noise.
fn listening_on_loopback(port: u16) -> bool {
    let address = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // `sl local_address rem_address st …`: state 0A is LISTEN.
            fields.get(1) == Some(&address.as_str()) && fields.get(3) == Some(&"0A")
        })
}

/// A port on 127.0.0.1 free a moment ago, for a receiver that is stopped and started on it.
fn free_port() -> u16 {
    let probe = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    probe.local_addr().expect("probe address").port()
}

/// A private rsyslogd: TCP input on 127.0.0.1 (plain or TLS with a self-signed certificate),
/// every message written to `received.log` as its structured data and its text; rsyslogd's own
/// messages (TLS errors among them) go to `rsyslogd.messages` beside it.
pub struct Rsyslog {
    dir: tempfile::TempDir,
    pub port: u16,
    process: Option<Child>,
}

impl Rsyslog {
    /// A receiver of plain TCP.
    pub fn start() -> Rsyslog {
        Rsyslog::start_with(false)
    }

    /// A receiver of TLS, whose certificate (for CN and IP 127.0.0.1 and DNS localhost) is
    /// self-signed: trusted only by a sender given [`Rsyslog::certificate`].
    pub fn start_tls() -> Rsyslog {
        Rsyslog::start_with(true)
    }

    fn start_with(tls: bool) -> Rsyslog {
        let rsyslogd = Path::new("/usr/sbin/rsyslogd");
        assert!(
            rsyslogd.exists(),
            "/usr/sbin/rsyslogd is missing: packaging/install-deps.sh installs rsyslog"
        );
        let mut rsyslog = Rsyslog {
            dir: tempfile::tempdir().expect("tempdir"),
            port: free_port(),
            process: None,
        };
        let dir = rsyslog.dir.path().display().to_string();
        let tls_options = if tls {
            rsyslog.make_certificate();
            format!(
                " StreamDriver.Name=\"gtls\" StreamDriver.Mode=\"1\" StreamDriver.AuthMode=\"anon\"\n      \
                 StreamDriver.CertFile=\"{dir}/cert.pem\" StreamDriver.KeyFile=\"{dir}/key.pem\" \
                 StreamDriver.CAFile=\"{dir}/ca.pem\""
            )
        } else {
            String::new()
        };
        // Receipts have a ruleset of their own, so that rsyslogd's messages about itself
        // (processed as any other) land in a file of their own.
        std::fs::write(
            rsyslog.config(),
            format!(
                "global(workDirectory=\"{dir}\" maxMessageSize=\"4m\" processInternalMessages=\"on\")\n\
                 module(load=\"imtcp\")\n\
                 template(name=\"receipt\" type=\"string\" string=\"%structured-data% %msg%\\n\")\n\
                 ruleset(name=\"receipts\") {{ action(type=\"omfile\" file=\"{dir}/received.log\" template=\"receipt\") }}\n\
                 input(type=\"imtcp\" address=\"127.0.0.1\" port=\"{port}\" ruleset=\"receipts\"{tls_options})\n\
                 *.* action(type=\"omfile\" file=\"{dir}/rsyslogd.messages\")\n",
                port = rsyslog.port
            ),
        )
        .expect("write rsyslog.conf");
        // rsyslogd runs on with a config it could not take in full: check it first.
        let check = Command::new(rsyslogd)
            .arg("-N1")
            .arg("-f")
            .arg(rsyslog.config())
            .output()
            .expect("run rsyslogd -N1");
        assert!(
            check.status.success(),
            "rsyslogd refuses the config: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        rsyslog.resume();
        rsyslog
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("rsyslog.conf")
    }

    /// A certificate authority of the test's own (`ca.pem`) and the receiver's certificate
    /// signed by it for 127.0.0.1 and localhost (`cert.pem`, `key.pem`), as a team's private CA
    /// would issue it: a TLS client refuses a CA certificate presented as the server's own.
    fn make_certificate(&self) {
        let dir = self.dir.path();
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        let steps: [&[&str]; 3] = [
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "365",
                "-subj",
                "/CN=computer test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "key.pem",
                "-out",
                "leaf.csr",
            ],
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-set_serial",
                "2",
                "-days",
                "365",
                "-extfile",
                "leaf.ext",
                "-out",
                "cert.pem",
            ],
        ];
        for args in steps {
            let made = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("openssl is missing: packaging/install-deps.sh installs it");
            assert!(
                made.status.success(),
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&made.stderr)
            );
        }
    }

    /// The authority that signed the receiver's certificate (PEM), for a sender's `ca_file`.
    pub fn ca_certificate(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Starts rsyslogd (again) on the same port and file, and waits until it listens.
    pub fn resume(&mut self) {
        assert!(self.process.is_none(), "rsyslogd already runs");
        let dir = self.dir.path();
        let mut command = Command::new("/usr/sbin/rsyslogd");
        command
            .args(["-n", "-f"])
            .arg(self.config())
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("rsyslogd.log")).expect("rsyslogd.log"));
        self.process = Some(spawn_tied(command));
        let port = self.port;
        let listening = try_wait_for(START_LIMIT, || {
            if let Some(status) = self.process.as_mut()?.try_wait().ok().flatten() {
                panic!("rsyslogd exited at start ({status}): {}", self.messages());
            }
            listening_on_loopback(port).then_some(())
        });
        if listening.is_none() {
            panic!(
                "rsyslogd does not listen on 127.0.0.1:{port}: {}",
                self.messages()
            );
        }
    }

    /// Stops rsyslogd (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        let mut child = self.process.take().expect("rsyslogd runs");
        // SAFETY: kill with a pid of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().expect("wait for rsyslogd");
    }

    pub fn received(&self) -> PathBuf {
        self.dir.path().join("received.log")
    }

    /// What rsyslogd said on stderr and about itself, for a failure's message.
    pub fn messages(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.path().join(name));
        format!(
            "stderr: {}\nits messages: {}",
            read("rsyslogd.log").unwrap_or_default(),
            read("rsyslogd.messages").unwrap_or_default()
        )
    }

    /// Every receipt received so far, in arrival order.
    pub fn rows(&self) -> Vec<ArrivedRow> {
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
                Some(ArrivedRow {
                    seq: param("seq")?.parse().ok()?,
                    prev: param("prev")?,
                    hash: param("hash")?,
                    text: text.to_string(),
                })
            })
            .collect()
    }

    /// Waits until every row up to `last` has arrived.
    pub fn wait_through(&self, last: i64) {
        wait_for_rows(last, "rsyslogd", || self.rows(), || self.messages());
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

/// A private journald: a namespace instance (`systemd-journald NAME`, run as root without
/// systemd) listening on `/run/systemd/journal.NAME/socket`, keeping its journal in memory
/// (`/run/log/journal/MACHINE.NAME`), read back with `journalctl --namespace=NAME`. Each value
/// names a namespace of its own (the test process's pid and a count), removed when it drops.
pub struct Journald {
    pub namespace: String,
    dir: tempfile::TempDir,
    process: Option<Child>,
}

impl Journald {
    pub fn start() -> Journald {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let journald = Path::new("/lib/systemd/systemd-journald");
        assert!(
            journald.exists(),
            "{} is missing: packaging/install-deps.sh installs systemd",
            journald.display()
        );
        let namespace = format!(
            "computer-test-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        );
        let mut journal = Journald {
            namespace,
            dir: tempfile::tempdir().expect("tempdir"),
            process: None,
        };
        let config = journal.config_dir();
        std::fs::create_dir_all(&config).expect("journald conf.d");
        // In memory, nothing under /var/log; and no rate limit, which would drop a burst of rows.
        std::fs::write(
            config.join("test.conf"),
            "[Journal]\nStorage=volatile\nRateLimitIntervalSec=0\n",
        )
        .expect("write the journald config");
        journal.resume();
        journal
    }

    /// The socket the daemon's `journald = "NAME"` sends to.
    pub fn socket(&self) -> PathBuf {
        self.runtime_dir().join("socket")
    }

    fn runtime_dir(&self) -> PathBuf {
        PathBuf::from(format!("/run/systemd/journal.{}", self.namespace))
    }

    fn config_dir(&self) -> PathBuf {
        PathBuf::from(format!("/run/systemd/journald@{}.conf.d", self.namespace))
    }

    /// Starts journald (again) in the same namespace, and waits until it says it is ready
    /// (sd_notify `READY=1`): its socket file may be a stale one an earlier run left.
    pub fn resume(&mut self) {
        assert!(self.process.is_none(), "journald already runs");
        let _ = std::fs::remove_dir_all(self.runtime_dir());
        let notify_path = self.dir.path().join("notify");
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
        notify.set_nonblocking(true).expect("nonblocking notify");
        let mut command = Command::new("/lib/systemd/systemd-journald");
        command
            .arg(&self.namespace)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.log()).expect("journald.log"));
        self.process = Some(spawn_tied(command));
        let mut said = String::new();
        let ready = try_wait_for(START_LIMIT, || {
            if let Some(status) = self.process.as_mut()?.try_wait().ok().flatten() {
                panic!(
                    "journald {} exited at start ({status}): {}",
                    self.namespace,
                    std::fs::read_to_string(self.log()).unwrap_or_default()
                );
            }
            let mut message = [0u8; 4096];
            while let Ok(n) = notify.recv(&mut message) {
                said.push_str(&String::from_utf8_lossy(&message[..n]));
                said.push('\n');
            }
            said.lines().any(|line| line == "READY=1").then_some(())
        });
        if ready.is_none() {
            panic!(
                "journald {} never said READY=1 (it said {said:?}): {}",
                self.namespace,
                std::fs::read_to_string(self.log()).unwrap_or_default()
            );
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("journald.log")
    }

    /// Stops journald (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        let mut child = self.process.take().expect("journald runs");
        // SAFETY: kill with a pid of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().expect("wait for journald");
    }

    /// Every entry of the namespace's journal, oldest first, as journalctl's JSON shows it
    /// (`--all`: fields over 4 KiB in full rather than null).
    pub fn entries(&self) -> Vec<serde_json::Map<String, Value>> {
        let out = Command::new("journalctl")
            .arg(format!("--namespace={}", self.namespace))
            .args(["--output=json", "--all", "--no-pager", "--quiet"])
            .output()
            .expect("run journalctl");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("journalctl printed no JSON object ({err})"))
            })
            .collect()
    }

    /// The entries that carry a receipt (a `COMPUTER_SEQ`), in the journal's order.
    pub fn receipt_entries(&self) -> Vec<serde_json::Map<String, Value>> {
        self.entries()
            .into_iter()
            .filter(|entry| entry.contains_key("COMPUTER_SEQ"))
            .collect()
    }

    /// Every receipt in the journal, in the journal's order.
    pub fn rows(&self) -> Vec<ArrivedRow> {
        self.receipt_entries()
            .iter()
            .map(|entry| {
                let field = |name: &str| {
                    journal_field(entry, name)
                        .unwrap_or_else(|| panic!("a receipt entry without {name}"))
                };
                ArrivedRow {
                    seq: field("COMPUTER_SEQ")
                        .parse()
                        .expect("COMPUTER_SEQ a number"),
                    prev: field("COMPUTER_PREV"),
                    hash: field("COMPUTER_HASH"),
                    text: field("MESSAGE"),
                }
            })
            .collect()
    }

    /// Waits until every row up to `last` is in the journal.
    pub fn wait_through(&self, last: i64) {
        wait_for_rows(
            last,
            &format!("journal {}", self.namespace),
            || self.rows(),
            || std::fs::read_to_string(self.log()).unwrap_or_default(),
        );
    }
}

impl Drop for Journald {
    fn drop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(self.runtime_dir());
        let _ = std::fs::remove_dir_all(self.config_dir());
        let suffix = format!(".{}", self.namespace);
        for entry in std::fs::read_dir("/run/log/journal").into_iter().flatten() {
            let Ok(entry) = entry else { continue };
            if entry.file_name().to_string_lossy().ends_with(&suffix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// A field of a journal entry as text. journalctl's JSON gives a field as a string, or as an
/// array of byte values when it holds control characters or is not UTF-8; a field given more
/// than once in an entry (an array of those) is a fault here.
pub fn journal_field(entry: &serde_json::Map<String, Value>, name: &str) -> Option<String> {
    match entry.get(name)? {
        Value::String(text) => Some(text.clone()),
        Value::Array(items) if items.iter().all(Value::is_u64) => {
            let bytes: Vec<u8> = items
                .iter()
                .map(|byte| {
                    byte.as_u64()
                        .and_then(|b| u8::try_from(b).ok())
                        .expect("a byte")
                })
                .collect();
            Some(
                String::from_utf8(bytes).unwrap_or_else(|err| panic!("{name} is not UTF-8: {err}")),
            )
        }
        Value::Array(values) => panic!("{name} is given {} times in one entry", values.len()),
        Value::Null => panic!("journalctl left out {name} (too large to show?)"),
        other => Some(other.to_string()),
    }
}

/// One request an [`OtlpCollector`] took: where it was posted, as what, how it was answered,
/// and what its body decoded to (or why it did not).
#[derive(Debug, Clone)]
pub struct OtlpRequest {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub status: u16,
    pub logs: Result<ExportLogsServiceRequest, String>,
}

impl OtlpRequest {
    /// The log records the request carried, in order (none when it did not decode).
    pub fn records(&self) -> Vec<OtlpRecord> {
        let mut records = Vec::new();
        let Ok(logs) = &self.logs else {
            return records;
        };
        for resource_logs in &logs.resource_logs {
            let resource = resource_logs
                .resource
                .as_ref()
                .map(|resource| attributes_json(&resource.attributes))
                .unwrap_or_default();
            for scope_logs in &resource_logs.scope_logs {
                let scope = scope_logs
                    .scope
                    .as_ref()
                    .map(|scope| scope.name.clone())
                    .unwrap_or_default();
                for record in &scope_logs.log_records {
                    records.push(OtlpRecord {
                        resource: resource.clone(),
                        scope: scope.clone(),
                        time_unix_nano: record.time_unix_nano,
                        body: any_value_json(record.body.as_ref()),
                        attributes: attributes_json(&record.attributes),
                    });
                }
            }
        }
        records
    }
}

/// A log record as the collector decoded it, beside its resource's attributes and its scope's
/// name. Values as JSON: a string value as a string, an int value as a number.
#[derive(Debug, Clone)]
pub struct OtlpRecord {
    pub resource: BTreeMap<String, Value>,
    pub scope: String,
    pub time_unix_nano: u64,
    pub body: Value,
    pub attributes: BTreeMap<String, Value>,
}

impl OtlpRecord {
    /// The receipt this record carries.
    pub fn arrived(&self) -> ArrivedRow {
        let text = |name: &str| {
            self.attributes
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{name} is no string value: {self:?}"))
                .to_string()
        };
        ArrivedRow {
            seq: self
                .attributes
                .get("computer.seq")
                .and_then(Value::as_i64)
                .unwrap_or_else(|| panic!("computer.seq is no int value: {self:?}")),
            prev: text("computer.prev"),
            hash: text("computer.hash"),
            text: self
                .body
                .as_str()
                .unwrap_or_else(|| panic!("the body is no string value: {self:?}"))
                .to_string(),
        }
    }
}

fn any_value_json(value: Option<&AnyValue>) -> Value {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => Value::from(text.as_str()),
        Some(any_value::Value::IntValue(number)) => Value::from(*number),
        Some(any_value::Value::BoolValue(flag)) => Value::from(*flag),
        Some(other) => Value::from(format!("{other:?}")),
        None => Value::Null,
    }
}

fn attributes_json(attributes: &[KeyValue]) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for attribute in attributes {
        let earlier = map.insert(
            attribute.key.clone(),
            any_value_json(attribute.value.as_ref()),
        );
        assert!(earlier.is_none(), "attribute {} given twice", attribute.key);
    }
    map
}

/// What a collector shares with the threads that serve its connections.
#[derive(Default)]
struct Collected {
    requests: Mutex<Vec<OtlpRequest>>,
    /// Requests answered so far, for refusing the first few.
    answered: AtomicUsize,
}

/// An OpenTelemetry collector of logs over OTLP/HTTP on 127.0.0.1: HTTP/1.1 with keep-alive,
/// bodies by Content-Length or chunked, each decoded as an `ExportLogsServiceRequest`. It
/// answers the first `refuse_first` requests 503 (unavailable, to be retried), then 200 with an
/// empty `ExportLogsServiceResponse`; a body that does not decode gets 400.
pub struct OtlpCollector {
    pub port: u16,
    collected: Arc<Collected>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
    closing: Arc<AtomicBool>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl OtlpCollector {
    /// A collector on a port of its own.
    pub fn start(refuse_first: usize) -> OtlpCollector {
        OtlpCollector::start_on(0, refuse_first)
    }

    /// A collector on `port` (0: any free one).
    pub fn start_on(port: u16, refuse_first: usize) -> OtlpCollector {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|err| panic!("bind the collector on port {port}: {err}"));
        let mut collector = OtlpCollector {
            port: listener.local_addr().expect("collector address").port(),
            collected: Arc::default(),
            connections: Arc::default(),
            closing: Arc::default(),
            acceptor: None,
        };
        let collected = collector.collected.clone();
        let connections = collector.connections.clone();
        let closing = collector.closing.clone();
        collector.acceptor = Some(std::thread::spawn(move || {
            for stream in listener.incoming() {
                if closing.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(clone) = stream.try_clone() {
                    connections.lock().unwrap().push(clone);
                }
                let collected = collected.clone();
                std::thread::spawn(move || serve_otlp(stream, &collected, refuse_first));
            }
        }));
        collector
    }

    /// The URL the daemon's `otlp` posts to.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/logs", self.port)
    }

    /// Every request taken so far, in the order answered.
    pub fn requests(&self) -> Vec<OtlpRequest> {
        self.collected.requests.lock().unwrap().clone()
    }

    /// The log records of the requests answered 2xx (the ones acknowledged), in order.
    pub fn records(&self) -> Vec<OtlpRecord> {
        self.requests()
            .iter()
            .filter(|request| (200..300).contains(&request.status))
            .flat_map(OtlpRequest::records)
            .collect()
    }

    /// Every receipt acknowledged so far, in arrival order.
    pub fn rows(&self) -> Vec<ArrivedRow> {
        self.records().iter().map(OtlpRecord::arrived).collect()
    }

    /// Waits until every row up to `last` has been acknowledged.
    pub fn wait_through(&self, last: i64) {
        let answered = || {
            let answers: Vec<String> = self
                .requests()
                .iter()
                .map(|request| {
                    format!(
                        "{} {} ({}): {}, {}",
                        request.method,
                        request.path,
                        request.content_type,
                        request.status,
                        match &request.logs {
                            Ok(logs) => format!("{} resource logs", logs.resource_logs.len()),
                            Err(err) => err.clone(),
                        }
                    )
                })
                .collect();
            format!("it answered {answers:#?}")
        };
        wait_for_rows(last, "the OTLP collector", || self.rows(), answered);
    }

    /// Closes the port (a connection to it is refused from now on) and every connection.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.closing.store(true, Ordering::SeqCst);
        // The acceptor sits in accept(): a connection of our own wakes it to see it is closing.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        acceptor.join().expect("the collector's acceptor");
        for connection in self.connections.lock().unwrap().drain(..) {
            let _ = connection.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for OtlpCollector {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An HTTP/1.1 request as the collector reads it.
struct HttpRequest {
    method: String,
    path: String,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

fn serve_otlp(stream: TcpStream, collected: &Collected, refuse_first: usize) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reader);
    let mut writer = stream;
    loop {
        let request = match read_http_request(&mut reader, &mut writer) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                collected.requests.lock().unwrap().push(OtlpRequest {
                    method: String::new(),
                    path: String::new(),
                    content_type: String::new(),
                    status: 400,
                    logs: Err(format!(
                        "not an HTTP request the collector could read: {err}"
                    )),
                });
                let _ = writer.write_all(&http_response(400, "Bad Request", &[], true));
                return;
            }
        };
        let logs = ExportLogsServiceRequest::decode(request.body.as_slice())
            .map_err(|err| format!("the body is no ExportLogsServiceRequest: {err}"));
        let status = if collected.answered.fetch_add(1, Ordering::SeqCst) < refuse_first {
            503
        } else if logs.is_ok() {
            200
        } else {
            400
        };
        let close = request
            .header("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"));
        // Recorded before the answer: once the sender has its 200, the records are here.
        collected.requests.lock().unwrap().push(OtlpRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            content_type: request
                .header("content-type")
                .unwrap_or_default()
                .to_string(),
            status,
            logs,
        });
        let response = match status {
            200 => http_response(
                200,
                "OK",
                &ExportLogsServiceResponse::default().encode_to_vec(),
                close,
            ),
            503 => http_response(503, "Service Unavailable", &[], close),
            _ => http_response(400, "Bad Request", &[], close),
        };
        if writer.write_all(&response).is_err() || close {
            return;
        }
    }
}

fn http_response(status: u16, reason: &str, body: &[u8], close: bool) -> Vec<u8> {
    let mut response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    response.extend_from_slice(body);
    response
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// The next request on a connection; `None` when the sender closed it between requests.
fn read_http_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> std::io::Result<Option<HttpRequest>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path), Some(_version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("request line {line:?}")));
    };
    let mut request = HttpRequest {
        method: method.to_string(),
        path: path.to_string(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Err(invalid("the headers end early".into()));
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| invalid(format!("header {header:?}")))?;
        request
            .headers
            .push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    if request
        .header("expect")
        .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let digits = size.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(digits, 16)
                .map_err(|_| invalid(format!("chunk size {size:?}")))?;
            if size == 0 {
                // Trailers, if any, up to the empty line.
                loop {
                    let mut trailer = String::new();
                    if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = request.body.len();
            request.body.resize(start + size, 0);
            reader.read_exact(&mut request.body[start..])?;
            let mut end = [0u8; 2];
            reader.read_exact(&mut end)?;
            if &end != b"\r\n" {
                return Err(invalid("a chunk not ended by CRLF".into()));
            }
        }
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| invalid(format!("Content-Length {length:?}")))?;
        request.body.resize(length, 0);
        reader.read_exact(&mut request.body)?;
    }
    Ok(Some(request))
}
