//! `computer mcp`: an MCP server on stdio that relays every byte to the daemon's socket, starting
//! a daemon in the background when none answers. The daemon does all the work, so stdio clients
//! take exactly the same path as socket clients. The relay lives exactly as long as its host: it
//! leaves as soon as its stdin ends or its parent dies, and closing its socket is what tells the
//! daemon to cancel the calls left running.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use computer_ipc::client::connect_stream;
use computer_ipc::paths;
use interprocess::local_socket::tokio::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::exit;

/// How long to wait for a freshly started daemon to accept connections.
const SPAWN_WAIT: Duration = Duration::from_secs(15);

/// At most this long is spent handing the host the replies already received once it has left:
/// a host that closed stdin but stopped reading stdout must not keep the relay alive.
const FINAL_DELIVERY_LIMIT: Duration = Duration::from_millis(50);

/// How often the parent is looked at where it cannot be waited on (no pidfd).
const PARENT_POLL: Duration = Duration::from_millis(20);

/// How long the systemd user manager gets to tell the session's environment.
const SESSION_ENV_WAIT: Duration = Duration::from_secs(2);

pub async fn run(no_spawn: bool, observe_only: bool) -> u8 {
    // Watch the host from the start: one that dies while a daemon starts must not leave us behind.
    let host = HostWatch::start();
    let socket = paths::socket_path();
    let stream = match connect_stream(&socket).await {
        Ok(stream) => stream,
        Err(err) if no_spawn => {
            eprintln!("error: {err}");
            return exit::UNAVAILABLE;
        }
        Err(_) => match spawn_and_connect(&socket).await {
            Ok(stream) => stream,
            Err(message) => {
                eprintln!("error: {message}");
                return exit::UNAVAILABLE;
            }
        },
    };
    // Everything owed to the host is written and flushed when this returns; the runtime is shut
    // down in the background (stdin's blocking read cannot be interrupted), and the socket closes
    // with the process, which tells the daemon to cancel what the host left running.
    relay(stream, host, observe_only).await
}

async fn relay(stream: Stream, host: HostWatch, observe_only: bool) -> u8 {
    let Stream::UdSocket(ref inner) = stream;
    let socket_fd = std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(inner));
    let (mut from_daemon, mut to_daemon) = tokio::io::split(stream);
    // The MCP client's config hands the bridge its agent token, and the host's entry may ask
    // for an observe-only connection: the daemon reads both on the first line, before anything
    // of the host's, so nothing the host sends can change them.
    let token = std::env::var("COMPUTER_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    if token.is_some() || observe_only {
        let line = computer_ipc::client::hello_line(token.as_deref(), observe_only);
        if let Err(err) = to_daemon.write_all(&line).await {
            eprintln!("error: cannot reach the daemon: {err}");
            return exit::UNAVAILABLE;
        }
    }

    // Requests go up until stdin ends; whatever was read before the end is still sent.
    let upstream = async {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
    };
    let leaving = async {
        tokio::select! {
            _ = upstream => {}
            _ = host.gone() => {}
        }
    };
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    let mut handshake = Handshake::default();
    tokio::pin!(leaving);
    // Ends with whether the host left (stdin ended, parent died); otherwise the daemon closed
    // the connection or nobody reads stdout any more.
    let host_left = loop {
        // Only the read is ever cut short: a reply being written is written whole.
        let read = tokio::select! {
            biased;
            read = from_daemon.read(&mut buf) => read,
            _ = &mut leaving => break true,
        };
        let n = match read {
            Ok(0) | Err(_) => break false,
            Ok(n) => n,
        };
        handshake.look(&buf[..n]);
        if stdout.write_all(&buf[..n]).await.is_err() || stdout.flush().await.is_err() {
            break false;
        }
    };
    if host_left {
        // Replies that reached the socket before the host left are still the host's: hand them
        // over, without waiting for any that have not arrived.
        let _ = tokio::time::timeout(
            FINAL_DELIVERY_LIMIT,
            deliver_received(socket_fd, &mut stdout, &mut buf),
        )
        .await;
    }
    exit::OK
}

/// Looks at the first lines the daemon sends (its answer to `initialize` among them) for what it
/// says of itself, and says on stderr (the host's log) which config file the daemon read.
#[derive(Default)]
struct Handshake {
    line: Vec<u8>,
    lines_seen: usize,
    done: bool,
}

impl Handshake {
    /// The most lines, and bytes of one line, looked at before giving up.
    const LINES: usize = 4;
    const LINE_BYTES: usize = 256 * 1024;

    fn look(&mut self, mut bytes: &[u8]) {
        while !self.done && !bytes.is_empty() {
            let end = bytes.iter().position(|b| *b == b'\n');
            let take = end.map_or(bytes.len(), |i| i + 1);
            if self.line.len() + take > Self::LINE_BYTES {
                self.done = true;
                return;
            }
            self.line.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if end.is_none() {
                return;
            }
            let line = std::mem::take(&mut self.line);
            self.lines_seen += 1;
            self.done = self.lines_seen >= Self::LINES;
            let Ok(message) = serde_json::from_slice::<serde_json::Value>(&line) else {
                continue;
            };
            let facts = &message["result"]["_meta"][computer_ipc::control::DAEMON_META_KEY];
            if let Ok(facts) =
                serde_json::from_value::<computer_ipc::control::DaemonFacts>(facts.clone())
            {
                eprintln!("computer mcp: {}", facts.config_sentence());
                self.done = true;
            } else if message["result"].get("serverInfo").is_some() {
                self.done = true;
            }
        }
    }
}

/// Writes to stdout what the socket holds right now, without waiting for more.
async fn deliver_received(fd: RawFd, stdout: &mut tokio::io::Stdout, buf: &mut [u8]) {
    loop {
        // SAFETY: `fd` is the daemon connection, open until this process exits; nothing else
        // reads it any more; `buf` is ours and `recv` writes at most `buf.len()` bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n <= 0 {
            break;
        }
        let n = n as usize;
        if stdout.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = stdout.flush().await;
}

/// The process that started the relay (the MCP host), watched for its exit.
struct HostWatch {
    parent: libc::pid_t,
}

impl HostWatch {
    fn start() -> HostWatch {
        // SAFETY: getppid has no preconditions and cannot fail.
        HostWatch {
            parent: unsafe { libc::getppid() },
        }
    }

    /// Resolves once the host is gone. A relay whose parent is already init (started detached
    /// on purpose) has no host to follow and relies on its stdin alone.
    async fn gone(&self) {
        if self.parent <= 1 {
            return std::future::pending().await;
        }
        #[cfg(target_os = "linux")]
        if let Some(watch) = self.parent_pidfd() {
            // Checked after the pidfd exists: had the parent died before, the pid might name
            // another process by now, but we would have been re-parented already.
            // SAFETY: getppid has no preconditions and cannot fail.
            if unsafe { libc::getppid() } != self.parent {
                return;
            }
            let _ = watch.readable().await;
            return;
        }
        // Elsewhere (macOS) or without pidfds: the parent changes when the host dies and the
        // relay is re-parented.
        let mut tick = tokio::time::interval(PARENT_POLL);
        loop {
            tick.tick().await;
            // SAFETY: getppid has no preconditions and cannot fail.
            if unsafe { libc::getppid() } != self.parent {
                return;
            }
        }
    }

    /// A pidfd of the parent: readable the moment it exits, with no polling.
    #[cfg(target_os = "linux")]
    fn parent_pidfd(&self) -> Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.parent, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: the descriptor was just created for us and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // SAFETY: the AsyncFd owns the OwnedFd, which stays open and unchanged until it drops.
        unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }
        .ok()
    }
}

async fn spawn_and_connect(socket: &Path) -> Result<Stream, String> {
    let exe =
        std::env::current_exe().map_err(|err| format!("cannot find this program's path: {err}"))?;
    let state_dir = paths::state_dir();
    paths::ensure_private_dir(&state_dir).map_err(|err| err.to_string())?;
    let log_path = state_dir.join("daemon.log");
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|err| format!("cannot open {}: {err}", log_path.display()))?;
    let environment = daemon_environment().await;
    let mut daemon = std::process::Command::new(exe);
    daemon
        .arg("serve")
        // The host's environment holds what it was given for its agents (tokens, API keys): the
        // daemon starts from nothing but what it needs.
        .env_clear()
        .envs(environment.vars.iter().map(|(k, v)| (k, v)))
        // Where the systemd user unit starts it too; the host's cwd is no business of the daemon.
        .current_dir(
            environment
                .get("HOME")
                .map(PathBuf::from)
                .filter(|home| home.is_dir())
                .unwrap_or_else(|| PathBuf::from("/")),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.try_clone().map_err(|err| err.to_string())?)
        // Its own process group: the MCP client's terminal signals must not stop the daemon.
        .process_group(0);
    let mut child = daemon
        .spawn()
        .map_err(|err| format!("cannot start the daemon: {err}"))?;
    {
        use std::io::Write;
        let _ = writeln!(
            log,
            "computer mcp: started a daemon (pid {}) with {}",
            child.id(),
            environment.describe()
        );
    }
    tracing::info!(pid = child.id(), log = %log_path.display(), "started a daemon in the background");

    let deadline = tokio::time::Instant::now() + SPAWN_WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Ok(stream) = connect_stream(socket).await {
            // Reap the child in the background if it ever exits, so it leaves no zombie.
            std::thread::spawn(move || child.wait());
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Another bridge may have won the race to start one; its daemon is as good as ours.
            if let Ok(stream) = connect_stream(socket).await {
                return Ok(stream);
            }
            return Err(format!(
                "the daemon exited at start ({status}); see {}",
                log_path.display()
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the daemon did not answer on {} within {}s; see {}",
                socket.display(),
                SPAWN_WAIT.as_secs(),
                log_path.display()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// What a daemon started by the relay runs with, and where its session variables came from.
struct DaemonEnvironment {
    vars: Vec<(OsString, OsString)>,
    /// Where the display and bus were found, for the daemon's log.
    sources: Vec<String>,
}

impl DaemonEnvironment {
    fn get(&self, name: &str) -> Option<&OsString> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn set(&mut self, name: &str, value: OsString) {
        self.vars.retain(|(k, _)| k != name);
        self.vars.push((name.into(), value));
    }

    fn describe(&self) -> String {
        let mut names: Vec<String> = self
            .vars
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut text = format!("only {}", names.join(" "));
        if !self.sources.is_empty() {
            text.push_str(&format!("; {}", self.sources.join("; ")));
        }
        if self.get("DISPLAY").is_none() && self.get("WAYLAND_DISPLAY").is_none() {
            text.push_str(
                "; no display found (the session published none to the systemd user manager): \
                 gui and ax stay unavailable until the daemon runs from the desktop session \
                 (`computer service install`)",
            );
        }
        text
    }
}

/// Session variables: taken from where the graphical session publishes them, which wins over
/// whatever the host passed.
const SESSION_VARS: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_TYPE",
    "XDG_CURRENT_DESKTOP",
];

/// Where the config and the state are: the host's when it names any, else the session's.
const CONFIG_VARS: &[&str] = &[
    "COMPUTER_CONFIG",
    "COMPUTER_STATE_DIR",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
];

/// Whether the daemon may take `name` from the host: locations, identity, locale, session, and
/// the daemon's own settings. Never `COMPUTER_TOKEN`: that is the agent's credential, not the
/// daemon's.
fn daemon_may_inherit(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "RUST_LOG",
    ];
    if name == "COMPUTER_TOKEN" {
        return false;
    }
    EXACT.contains(&name)
        || SESSION_VARS.contains(&name)
        || name.starts_with("LC_")
        || name.starts_with("XDG_")
        || name.starts_with("COMPUTER_")
}

/// The minimal environment for a daemon the relay starts: what it needs from the host, then the
/// session's display and bus from the systemd user manager and the session's runtime dir.
async fn daemon_environment() -> DaemonEnvironment {
    let mut env = DaemonEnvironment {
        vars: std::env::vars_os()
            .filter(|(k, _)| k.to_str().is_some_and(daemon_may_inherit))
            .collect(),
        sources: Vec::new(),
    };
    let runtime_dir = env
        .get("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .or_else(paths::session_runtime_dir);
    if let Some(dir) = &runtime_dir {
        let published = systemd_user_environment(dir).await;
        let mut taken = Vec::new();
        // Where the session keeps the config and state, when the host passed none of it: the
        // daemon then reads the config the person's session names, not a default beside it.
        let host_named_them = CONFIG_VARS.iter().any(|name| env.get(name).is_some());
        for (name, value) in published {
            let wanted = SESSION_VARS.contains(&name.as_str())
                || (!host_named_them && CONFIG_VARS.contains(&name.as_str()));
            if wanted {
                env.set(&name, value.into());
                taken.push(name);
            }
        }
        if !taken.is_empty() {
            env.sources
                .push(format!("{} from the systemd user manager", taken.join(" ")));
        }
        if env.get("XDG_RUNTIME_DIR").is_none() {
            env.set("XDG_RUNTIME_DIR", dir.clone().into());
        }
        let bus = dir.join("bus");
        if env.get("DBUS_SESSION_BUS_ADDRESS").is_none() && is_socket(&bus) {
            env.set(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", bus.display()).into(),
            );
            env.sources
                .push(format!("the session bus at {}", bus.display()));
        }
    }
    env
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// `systemctl --user show-environment` against the user manager of `runtime_dir`: what the
/// desktop session exported to it (DISPLAY, WAYLAND_DISPLAY, ...). Empty where there is no
/// systemd, no user manager, or no answer in time.
async fn systemd_user_environment(runtime_dir: &Path) -> Vec<(String, String)> {
    let mut command = tokio::process::Command::new("systemctl");
    command
        .args(["--user", "show-environment"])
        .env_clear()
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let Ok(Ok(output)) = tokio::time::timeout(SESSION_ENV_WAIT, command.output()).await else {
        return Vec::new();
    };
    if !output.status.success() {
        return Vec::new();
    }
    parse_environment_block(&String::from_utf8_lossy(&output.stdout))
}

/// `NAME=value` lines as `systemctl show-environment` prints them. Values with special
/// characters come $'…'-quoted; those are not session variables we take, so they are skipped.
fn parse_environment_block(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(_, value)| !value.starts_with("$'"))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_inherits_locations_and_session_never_secrets() {
        for name in [
            "PATH",
            "HOME",
            "DISPLAY",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_STATE_HOME",
            "LC_ALL",
            "COMPUTER_CONFIG",
        ] {
            assert!(daemon_may_inherit(name), "{name}");
        }
        for name in [
            "COMPUTER_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "SSH_AUTH_SOCK",
            "AWS_SECRET_ACCESS_KEY",
            "LD_PRELOAD",
        ] {
            assert!(!daemon_may_inherit(name), "{name}");
        }
    }

    #[test]
    fn session_environment_lines_are_read_and_quoted_values_skipped() {
        let parsed = parse_environment_block(
            "DISPLAY=:0\nWAYLAND_DISPLAY=wayland-0\nMOTD=$'a\\nb'\nnot a line\n",
        );
        assert_eq!(
            parsed,
            vec![
                ("DISPLAY".to_string(), ":0".to_string()),
                ("WAYLAND_DISPLAY".to_string(), "wayland-0".to_string()),
            ]
        );
    }
}
