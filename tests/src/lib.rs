//! The end-to-end harness: starts the real `computer` binary on a private socket and state dir,
//! waits until it answers, and gives tests clients, the CLI and raw sockets to it.
//!
//! # Layout
//! - this file: [`Daemon`], [`RawConnection`], [`wait_for`].
//! - [`apps`]: real applications (browsers, office, GTK4 apps) for the real-apps suite (Linux).
//! - [`desktop`]: the desktop surface suites drive: a private headless one on Linux (Xvfb,
//!   openbox, D-Bus, AT-SPI), the session's own on macOS.
//! - [`keyring`]: a real Secret Service (gnome-keyring) on a private bus, for the keychain suite.
//! - [`wayland`]: a private headless sway (wlroots) for the Wayland suite (Linux).
//! - [`gnome`]: a private headless Mutter with PipeWire for the GNOME suite (Linux).
//! - [`receivers`]: where the export suites send receipts: a private rsyslogd (TCP or TLS), a
//!   journald namespace, an OTLP/HTTP collector; and the check that what arrived is the chain.
//! - [`suite`]: which suite a call comes from, and what the harness keeps once per suite (the
//!   suites share one test process).

#[cfg(target_os = "linux")]
pub mod apps;
pub mod desktop;
#[cfg(target_os = "linux")]
pub mod gnome;
#[cfg(target_os = "linux")]
pub mod keyring;
pub mod receivers;
pub mod suite;
#[cfg(target_os = "linux")]
pub mod wayland;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use computer_ipc::Client;
use serde_json::Value;

/// Whether a daemon on `socket` answers an `initialize` now (a connection of its own, closed).
fn answers(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let request = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"harness","version":"0"}}}"#;
    if writeln!(stream, "{request}").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.contains("\"result\"")
}

/// The `computer` binary under test: `$COMPUTER_BIN`, else the one cargo built beside this test.
pub fn computer_bin() -> PathBuf {
    built_bin("COMPUTER_BIN", "computer", "computer-daemon")
}

/// The desktop approval window under test: `$COMPUTER_APPROVAL_WINDOW_BIN`, else the one cargo
/// built beside this test (where `computer approve --window` also looks for it).
pub fn approval_window_bin() -> PathBuf {
    built_bin(
        "COMPUTER_APPROVAL_WINDOW_BIN",
        "computer-approval-window",
        "computer-approval-window",
    )
}

/// `$override_var`, else the binary `name` of workspace package `package` from this profile.
fn built_bin(override_var: &str, name: &str, package: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(override_var) {
        return PathBuf::from(path);
    }
    // Test executables live in target/<profile>/deps; the binaries in target/<profile>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p {package}` (cargo test --workspace does)",
        bin.display()
    );
    bin
}

/// Polls `check` until it returns `Some`, or gives up with `None` after `limit`.
pub fn try_wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Polls `check` until it returns `Some`, or panics with `what` after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Live processes whose command line starts with `prefix`, from this machine's /proc (a
/// contained run's pids are its own namespace's, so its processes are found by what they run).
pub fn processes_started_with(prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.starts_with(prefix) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

/// Config that lets acts run without asking a person.
pub const ALLOW_ACTS: &str = "[defaults]\nact = \"allow\"\n";

/// A daemon with its own socket, state and config in a temporary directory.
pub struct Daemon {
    child: Option<Child>,
    extra_env: Vec<(String, String)>,
    /// Variables of the test's environment the daemon and its CLI must not inherit.
    removed_env: Vec<String>,
    /// RLIMIT_NOFILE for the daemon process, when a test wants it low.
    open_files: Option<u64>,
    pub root: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Daemon {
    /// Starts a daemon with embedded defaults.
    pub fn start() -> Daemon {
        Daemon::start_with_config("")
    }

    /// Starts a daemon whose config file holds `toml`.
    pub fn start_with_config(toml: &str) -> Daemon {
        Daemon::start_with(toml, &[])
    }

    /// Starts a daemon on the calling suite's shared headless desktop (see
    /// [`desktop::Desktop::shared`]).
    #[track_caller]
    pub fn start_on_desktop(toml: &str) -> Daemon {
        use desktop::TestDesktop;
        desktop::Desktop::shared().start_daemon(toml)
    }

    /// Starts a daemon whose config holds `toml` and whose environment adds `env`. Unless `toml`
    /// has its own `[defaults]`, acts are allowed: suites that are not about policy must never
    /// wait for a person.
    /// Without `env`, the daemon gets no display or session bus from the test's environment, so
    /// suites that are not about the desktop see the same surfaces on every machine.
    pub fn start_with(toml: &str, env: &[(&str, String)]) -> Daemon {
        let remove: &[&str] = if env.is_empty() {
            &["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
        } else {
            &[]
        };
        Daemon::start_with_env(toml, env, remove)
    }

    /// Like [`Daemon::start_with`], and the daemon (and CLI runs against it) lack `remove`.
    pub fn start_with_env(toml: &str, env: &[(&str, String)], remove: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let toml = if toml.contains("[defaults]") {
            toml.to_string()
        } else {
            format!("{ALLOW_ACTS}{toml}")
        };
        std::fs::write(root.join("config.toml"), toml).expect("write config");
        let mut daemon = Daemon {
            child: None,
            extra_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            removed_env: remove.iter().map(|k| k.to_string()).collect(),
            open_files: None,
            socket: root.join("run/computer.sock"),
            state: root.join("state"),
            config: root.join("config.toml"),
            log: root.join("daemon.log"),
            root,
            _dir: Some(dir),
        };
        daemon.spawn();
        daemon
    }

    /// Starts a daemon (config `toml`, as [`Daemon::start_with_config`]) whose process may hold
    /// at most `limit` open files.
    pub fn start_with_open_file_limit(toml: &str, limit: u64) -> Daemon {
        let mut daemon = Daemon::start_with_config(toml);
        daemon.stop_with(libc::SIGTERM);
        // The log holds the limited daemon's lines only: the first start may have been stopped
        // anywhere in its own, and a test counts what the limited one says.
        std::fs::File::create(&daemon.log).expect("empty the daemon log");
        daemon.open_files = Some(limit);
        daemon.restart();
        daemon
    }

    /// Starts the daemon process again on the same socket and state, and returns once it
    /// answers a request: its socket takes connections a little earlier, before its ledger is
    /// open and the calls a killed daemon left are closed, which is what a test reads next.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the daemon before restarting it");
        self.spawn();
        let socket = self.socket.clone();
        wait_for(
            "the restarted daemon to answer",
            Duration::from_secs(30),
            || answers(&socket).then_some(()),
        );
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("daemon log");
        let mut command = self.command();
        command.arg("serve").stdout(Stdio::null()).stderr(log);
        if let Some(limit) = self.open_files {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches only the child being started.
            unsafe {
                command.pre_exec(move || {
                    let rlimit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("spawn computer serve");
        self.child = Some(child);
        let socket = self.socket.clone();
        wait_for(
            "the daemon to accept connections",
            Duration::from_secs(30),
            || {
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!(
                        "the daemon exited at start ({status}):\n{}",
                        self.log_text()
                    );
                }
                UnixStream::connect(&socket).ok().map(|_| ())
            },
        );
    }

    /// The environment that points a `computer` process at this daemon.
    pub fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("COMPUTER_SOCKET", self.socket.clone()),
            ("COMPUTER_CONTROL_SOCKET", self.control_socket()),
            ("COMPUTER_STATE_DIR", self.state.clone()),
            ("COMPUTER_CONFIG", self.config.clone()),
        ]
    }

    /// A `computer` command aimed at this daemon.
    pub fn command(&self) -> Command {
        let mut command = Command::new(computer_bin());
        // The test's own RUST_LOG never reaches the daemon; a test that wants one passes it.
        command
            .envs(self.env())
            .env_remove("RUST_LOG")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)));
        for key in &self.removed_env {
            command.env_remove(key);
        }
        command
    }

    /// Runs `computer ARGS...` to completion.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        let output = self.command().args(args).output().expect("run computer");
        CliOutput {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Adds an agent as a person does (`computer agents add NAME`); its token.
    pub fn add_agent(&self, name: &str) -> String {
        self.add_agent_with(&["agents", "add", name])
    }

    /// Adds an agent whose calls may use only `surfaces` (comma-separated, as
    /// `computer agents add NAME --surfaces` takes them); its token.
    pub fn add_agent_for_surfaces(&self, name: &str, surfaces: &str) -> String {
        self.add_agent_with(&["agents", "add", name, "--surfaces", surfaces])
    }

    fn add_agent_with(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "computer {args:?}: {}", out.stderr);
        out.stdout.trim().to_string()
    }

    /// `computer doctor --json`'s entry for `surface` (its availability, backend and reason).
    pub fn doctor_surface(&self, surface: &str) -> Value {
        let doctor = self.cli(&["doctor", "--json"]).json();
        doctor["surfaces"]
            .as_array()
            .and_then(|surfaces| surfaces.iter().find(|s| s["surface"] == surface))
            .cloned()
            .unwrap_or_else(|| panic!("doctor lists no {surface} surface: {doctor}"))
    }

    pub fn control_socket(&self) -> PathBuf {
        self.socket.with_file_name("control.sock")
    }

    /// One request on the control socket, as an approver speaks it; the daemon's reply.
    pub fn control_request(&self, request: &Value) -> Value {
        use std::io::Read;
        let mut stream = UnixStream::connect(self.control_socket()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.write_all(format!("{request}\n").as_bytes()).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        serde_json::from_str(reply.lines().next().expect("a reply line")).unwrap()
    }

    /// The `gui windows` entry of the window titled `title` that process `pid` shows, once it
    /// is there (blocking).
    pub fn wait_for_window(&self, pid: u32, title: &str) -> Value {
        wait_for(
            &format!("the window {title:?} of pid {pid}"),
            Duration::from_secs(30),
            || {
                let windows = self.call_json("gui", "windows", "{}");
                windows["windows"]
                    .as_array()?
                    .iter()
                    .find(|w| w["pid"] == pid && w["title"] == title)
                    .cloned()
            },
        )
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.socket)
            .await
            .unwrap_or_else(|err| panic!("connect: {err}\n{}", self.log_text()))
    }

    /// One call on a connection of its own, opened and closed around it: the reply as the
    /// structured content shows it.
    pub async fn call_once(&self, surface: &str, command: &str, args: Value) -> Value {
        self.call_raw_once(
            serde_json::json!({"surface": surface, "command": command, "args": args}),
        )
        .await
    }

    /// One call with the tool's whole `arguments` (a single call with its complications, or
    /// `steps`) on a connection of its own: the reply as the structured content shows it.
    pub async fn call_raw_once(&self, arguments: Value) -> Value {
        structured(&self.call_result_once(arguments).await)
    }

    /// [`Daemon::call_raw_once`]'s whole MCP result: the text the model reads, the structured
    /// content, `isError` and `_meta`.
    pub async fn call_result_once(&self, arguments: Value) -> rmcp::model::CallToolResult {
        Daemon::call_then_close(self.client().await, arguments).await
    }

    /// [`Daemon::call_raw_once`] on a connection that presents `token` (an agent's).
    pub async fn call_raw_once_as(&self, token: &str, arguments: Value) -> Value {
        let client = Client::connect_as(&self.socket, Some(token))
            .await
            .unwrap_or_else(|err| panic!("connect with a token: {err}\n{}", self.log_text()));
        structured(&Daemon::call_then_close(client, arguments).await)
    }

    /// [`Daemon::call_raw_once`] on a task of its own, for a call that waits (for a person's
    /// answer, a dialog) while the test goes on.
    pub fn call_task(&self, arguments: Value) -> tokio::task::JoinHandle<Value> {
        let socket = self.socket.clone();
        tokio::spawn(async move {
            let client = Client::connect(&socket).await.expect("connect");
            structured(&Daemon::call_then_close(client, arguments).await)
        })
    }

    async fn call_then_close(client: Client, arguments: Value) -> rmcp::model::CallToolResult {
        let result = client.call_raw(arguments).await.expect("call");
        client.close().await;
        result
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("daemon running").id() as i32
    }

    /// Sends `signal` and waits for the daemon to exit.
    pub fn stop_with(&mut self, signal: i32) -> ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        child.wait().expect("wait for daemon")
    }

    /// Whether the daemon process still runs, or how it ended, for a failure's message.
    pub fn try_status(&mut self) -> String {
        match self.child.as_mut().map(|child| child.try_wait()) {
            Some(Ok(None)) => "still running".into(),
            Some(Ok(Some(status))) => format!("ended, {status}"),
            Some(Err(err)) => format!("unknown: {err}"),
            None => "not started".into(),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (at most 10 s) until the daemon's log holds `line`: what it says once a part of it
    /// is ready.
    pub fn wait_for_log(&self, line: &str) {
        wait_for(
            &format!("the daemon to log {line:?}"),
            Duration::from_secs(10),
            || self.log_text().contains(line).then_some(()),
        );
    }

    /// CPU time the daemon has used so far (user and system), from /proc/PID/stat.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).expect("stat");
        // Fields after the command name (which may hold spaces) start at the state, field 3;
        // utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')').expect("comm") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }

    /// How many descriptors the daemon has open.
    pub fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("fd dir")
            .count()
    }

    /// A field of /proc/PID/status in KiB, e.g. `VmRSS` or `VmHWM`.
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc status"))
    }

    /// Every receipt row, through `computer receipts export`.
    pub fn receipts(&self) -> Vec<Value> {
        let out = self.cli(&["receipts", "export"]);
        assert!(out.status.success(), "receipts export: {}", out.stderr);
        out.stdout
            .lines()
            .map(|line| serde_json::from_str(line).expect("receipt row is JSON"))
            .collect()
    }

    /// The ledger's last sequence number (0 when it is empty).
    pub fn last_seq(&self) -> i64 {
        self.receipts()
            .iter()
            .filter_map(|row| row["seq"].as_i64())
            .max()
            .unwrap_or(0)
    }

    /// The receipt row of `kind` ("intent" or "result") for the call whose receipt id is given:
    /// the last one written (a call asked for approval has an intent as asked, then one with the
    /// answer).
    pub fn receipt_row(&self, receipt: &Value, kind: &str) -> Value {
        self.receipts()
            .into_iter()
            .rev()
            .find(|r| r["call_id"] == *receipt && r["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} receipt for {receipt}"))
    }

    /// The pending approvals, through `computer approvals list --json`.
    pub fn pending_approvals(&self) -> Vec<Value> {
        let out = self.cli(&["approvals", "list", "--json"]);
        assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
        out.json()["pending"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The pending approval whose action names `file` (waited for, bounded).
    pub fn pending_for(&self, file: &Path) -> Value {
        let path = file.to_str().expect("a UTF-8 path");
        wait_for("the request to be pending", Duration::from_secs(20), || {
            self.pending_approvals()
                .into_iter()
                .find(|r| r["action"].as_str().is_some_and(|a| a.contains(path)))
        })
    }

    /// `shell run touch FILE` on its own task, which the daemon's death may leave unanswered.
    pub fn touch_until_the_daemon_dies(&self, file: &Path) {
        let socket = self.socket.clone();
        let file = file.to_path_buf();
        tokio::spawn(async move {
            let client = Client::connect(&socket).await.ok()?;
            client
                .call_raw(shell_run(
                    serde_json::json!({"argv": ["touch", file]}),
                    serde_json::json!({}),
                ))
                .await
                .ok()
        });
    }

    /// One `shell run` through `computer call`, with `args` and `complications`; its JSON reply.
    pub fn shell_run_json(&self, args: &Value, complications: &Value) -> Value {
        let cli = shell_run_cli(args, complications);
        let cli: Vec<&str> = cli.iter().map(String::as_str).collect();
        self.cli(&cli).json()
    }

    /// One call through `computer call SURFACE COMMAND --json --args ARGS`; its JSON reply.
    pub fn call_json(&self, surface: &str, command: &str, args: &str) -> Value {
        self.cli(&["call", surface, command, "--json", "--args", args])
            .json()
    }

    /// One call through `computer call SURFACE COMMAND --json` with its args and complications,
    /// as the agent whose token is given (`None`: the default agent); its JSON reply.
    pub fn call_json_as(
        &self,
        token: Option<&str>,
        surface: &str,
        command: &str,
        args: &Value,
        complications: &Value,
    ) -> Value {
        let mut cli = self.command();
        if let Some(token) = token {
            cli.env("COMPUTER_TOKEN", token);
        }
        let out = cli
            .args(["call", surface, command, "--json", "--args"])
            .arg(args.to_string())
            .arg("--complications")
            .arg(complications.to_string())
            .output()
            .expect("run computer call");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "{surface} {command}: not JSON ({err}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Asserts that a reply is the approver protection's refusal, receipted as such.
    pub fn assert_refused_as_targeting_an_approver(&self, reply: &Value, what: &str) {
        assert_eq!(reply["ok"], false, "{what} went through: {reply}");
        assert_eq!(reply["error"]["code"], "denied", "{what}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("approver"), "{what}: {message}");
        let result = self.receipt_row(&reply["receipt"], "result");
        assert_eq!(
            result["body"]["refused"], "targets_approver",
            "{what}: {result}"
        );
    }

    /// Asserts that `computer receipts verify` passes, returning its report.
    pub fn assert_chain_holds(&self) -> Value {
        let out = self.cli(&["receipts", "verify", "--json"]);
        assert!(
            out.status.success(),
            "chain broken: {}{}",
            out.stdout,
            out.stderr
        );
        serde_json::from_str(&out.stdout).expect("verify --json")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct CliOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|err| {
            panic!("not JSON ({err}): {}\nstderr: {}", self.stdout, self.stderr)
        })
    }
}

/// A line-oriented raw connection, for speaking (and mis-speaking) JSON-RPC by hand.
pub struct RawConnection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: i64,
}

impl RawConnection {
    pub fn connect(socket: &Path) -> RawConnection {
        let stream = UnixStream::connect(socket).expect("connect raw");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        RawConnection {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
            next_id: 0,
        }
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("json");
        line.push(b'\n');
        self.send_bytes(&line).expect("send");
    }

    /// The next line as JSON, or `None` at end of stream.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")),
            ),
            Err(err) => panic!("raw read failed: {err}"),
        }
    }

    /// Reads until the response with `id` arrives (skipping notifications).
    pub fn recv_response(&mut self, id: i64) -> Value {
        loop {
            let message = self.recv().expect("connection closed before the response");
            if message.get("id") == Some(&Value::from(id)) {
                return message;
            }
        }
    }

    /// A `tools/call` of the one tool, answered by the next line (a client library would add its
    /// own task hops to what benchmarks time). Returns the response and its bytes on the wire.
    pub fn call_tool(&mut self, arguments: &Value) -> (Value, usize) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "COMPUTER", "arguments": arguments}
        }));
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("raw read failed");
        let reply: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
        assert_eq!(reply["id"], id, "not the response to call {id}: {reply}");
        (reply, line.len())
    }

    /// The MCP handshake at `version`; returns the initialize result.
    pub fn initialize(&mut self, version: &str) -> Value {
        self.send(&serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw-test", "version": "0"}}
        }));
        let response = self.recv_response(0);
        self.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        response
    }

    pub fn shutdown_write(&self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Write);
    }
}

/// The receipt id of a tool result, where a client finds it: `_meta.receipt` (every revision),
/// which must agree with `structuredContent.receipt`. Never in the text the model reads.
pub fn receipt_of(result: &rmcp::model::CallToolResult) -> String {
    let meta = result
        .meta
        .as_ref()
        .and_then(|meta| meta.get("receipt"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no _meta.receipt in {result:?}"))
        .to_string();
    if let Some(structured) = &result.structured_content {
        assert_eq!(structured["receipt"], meta.as_str(), "{result:?}");
    }
    meta
}

/// Structured content of a tool result.
pub fn structured(result: &rmcp::model::CallToolResult) -> Value {
    result
        .structured_content
        .clone()
        .expect("structured content")
}

/// A surface's reference, as its `help` command returns it: one line per command
/// (`- gui.click {args} (act) → fields`), then its complications and how replies read.
pub async fn help(client: &Client, surface: &str) -> String {
    let result = client
        .call_raw(serde_json::json!({"surface": surface, "command": "help"}))
        .await
        .expect("help call");
    let reply = structured(&result);
    reply["help"]
        .as_str()
        .unwrap_or_else(|| panic!("{surface} help: {reply}"))
        .to_string()
}

/// The commands `help` lists for a surface, by name (`click`, `type`, ...).
pub async fn listed_commands(client: &Client, surface: &str) -> Vec<String> {
    let prefix = format!("- {surface}.");
    help(client, surface)
        .await
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| rest.split(' ').next())
        .flat_map(|names| names.split('|').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// The `computer` arguments of one `shell run` with `args` and `complications`, JSON reply.
pub fn shell_run_cli(args: &Value, complications: &Value) -> Vec<String> {
    [
        "call",
        "shell",
        "run",
        "--json",
        "--args",
        &args.to_string(),
        "--complications",
        &complications.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// A `shell run` call with the given args and complications.
pub fn shell_run(args: Value, complications: Value) -> Value {
    serde_json::json!({"surface": "shell", "command": "run", "args": args, "complications": complications})
}

/// `n` calls of `shell run echo "WORD I"` on one connection, each checked to have echoed: two
/// receipt rows each, for suites that count rows.
pub fn echo_calls(daemon: &Daemon, n: usize, word: &str) {
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    for i in 0..n {
        let (reply, _) = raw.call_tool(&shell_run(
            serde_json::json!({"argv": ["echo", format!("{word} {i}")]}),
            serde_json::json!({}),
        ));
        assert_eq!(
            reply["result"]["structuredContent"]["stdout"],
            format!("{word} {i}\n"),
            "{reply}"
        );
    }
}

/// Starts `shell run touch FILE` on its own task, so a test can answer its approval meanwhile.
pub fn touch_task(daemon: &Daemon, file: &Path) -> tokio::task::JoinHandle<Value> {
    daemon.call_task(shell_run(
        serde_json::json!({"argv": ["touch", file]}),
        serde_json::json!({}),
    ))
}

/// The `seq` of each whole octet-counted syslog frame (RFC 6587) at the start of `bytes`, as the
/// daemon's receipts export sends them, and how many bytes those frames took (a frame cut short
/// at the end is left for more bytes to complete).
pub fn syslog_frame_seqs(bytes: &[u8]) -> (Vec<i64>, usize) {
    let mut seqs = Vec::new();
    let mut at = 0;
    while let Some(space) = bytes[at..].iter().position(|b| *b == b' ') {
        let Some(len) = std::str::from_utf8(&bytes[at..at + space])
            .ok()
            .and_then(|len| len.parse::<usize>().ok())
        else {
            break;
        };
        let start = at + space + 1;
        if bytes.len() < start + len {
            break;
        }
        let message = String::from_utf8_lossy(&bytes[start..start + len]);
        let seq = message
            .split_once(" seq=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .and_then(|(seq, _)| seq.parse().ok())
            .unwrap_or_else(|| panic!("a receipt message without a seq: {message}"));
        seqs.push(seq);
        at = start + len;
    }
    (seqs, at)
}
