//! MCP clients nobody here wrote, driving `computer mcp` the way real hosts do: the official
//! Python SDK and the official TypeScript SDK (a current release and one that knows protocol
//! 2024-11-05 only), and hosts from their own packages (Gemini CLI: its `mcp add` and its
//! trusted folders; Claude Code: `mcp add` at user and project scope, the project's approval;
//! Codex: `mcp add`, the config edits, and calls from `codex exec` with a scripted model; the MCP
//! Inspector's CLI mode). Also what a host does to the relay: closing it, dying under
//! it, stripping its environment, cancelling a long run; and the daemon the relay starts.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use computer_tests::{Daemon, RawConnection, computer_bin, try_wait_for, wait_for};
use serde_json::{Value, json};

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python_mcp_client.py")
}

fn require_python_sdk() {
    let found = Command::new(python())
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "the MCP Python SDK is missing: `pip install mcp` (.ci/run installs it)"
    );
}

fn run_python_client(env: &[(&str, PathBuf)]) -> Value {
    let out = Command::new(python())
        .arg(client_script())
        .arg(computer_bin())
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client prints JSON")
}

/// Stops a daemon that `computer mcp` started in the background, found through its lock file.
struct SpawnedDaemon(PathBuf);

impl Drop for SpawnedDaemon {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0)
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

/// Gemini CLI, installed from its own package (pinned in tests/clients/ts), set up exactly as
/// the hosts page says: `gemini mcp add --scope user computer computer mcp` (no `--`), listed but
/// disabled in a folder it does not trust, connected through the relay once the folder is.
#[test]
fn gemini_cli_adds_the_relay_as_the_hosts_page_says_and_connects_in_a_trusted_folder() {
    let gemini = ts_clients().join("node_modules/.bin/gemini");
    assert!(
        gemini.exists(),
        "Gemini CLI is missing from {}: run packaging/install-deps.sh (it runs `npm ci` there)",
        ts_clients().display()
    );
    let daemon = Daemon::start_with_config(computer_tests::ALLOW_ACTS);
    let tmp = tempfile::tempdir().unwrap();
    let (home, folder, bin) = (
        tmp.path().join("home"),
        tmp.path().join("project"),
        tmp.path().join("bin"),
    );
    for dir in [&home, &folder, &bin] {
        std::fs::create_dir_all(dir).unwrap();
    }
    // `computer` on PATH is the build under test, as the person's install would be.
    std::os::unix::fs::symlink(computer_bin(), bin.join("computer")).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let run = |args: &[&str]| {
        let out = Command::new(&gemini)
            .args(args)
            .current_dir(&folder)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .envs(daemon.env())
            .output()
            .expect("run gemini");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "gemini {args:?}: {text}");
        text
    };
    run(&[
        "mcp", "add", "--scope", "user", "computer", "computer", "mcp",
    ]);
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings["mcpServers"]["computer"],
        json!({"command": "computer", "args": ["mcp"]}),
        "{settings}"
    );
    let untrusted = run(&["mcp", "list"]);
    assert!(
        untrusted.contains("computer") && untrusted.contains("Disabled"),
        "an untrusted folder disables the server: {untrusted}"
    );
    let trusted = json!({ folder.to_str().unwrap(): "TRUST_FOLDER" });
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        trusted.to_string(),
    )
    .unwrap();
    let listed = run(&["mcp", "list"]);
    assert!(
        listed.contains("computer") && listed.contains("Connected"),
        "in a trusted folder the relay connects: {listed}"
    );
}

/// A host's own CLI, run as the person would: in `folder`, with a private `HOME`, a `PATH` whose
/// `computer` is the build under test, and this daemon's socket in its environment.
struct HostCli {
    program: PathBuf,
    home: PathBuf,
    path: String,
    daemon_env: Vec<(&'static str, PathBuf)>,
}

impl HostCli {
    /// `program` from tests/clients/ts/node_modules/.bin, checked to be installed.
    fn installed(name: &str, package: &str, root: &Path, daemon: &Daemon) -> HostCli {
        let program = ts_clients().join("node_modules/.bin").join(name);
        assert!(
            program.exists(),
            "{package} is missing from {}: run packaging/install-deps.sh (it runs `npm ci` there)",
            ts_clients().display()
        );
        let (home, bin) = (root.join("home"), root.join("bin"));
        for dir in [&home, &bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // `computer` on PATH is the build under test, as the person's install would be.
        std::os::unix::fs::symlink(computer_bin(), bin.join("computer")).unwrap();
        HostCli {
            program,
            home,
            path: format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            daemon_env: daemon.env(),
        }
    }

    /// Runs the host with `args` in `folder`; returns stdout and stderr, asserting success.
    fn run(&self, folder: &Path, args: &[&str]) -> String {
        let (stdout, stderr) = self.outputs(folder, args);
        format!("{stdout}{stderr}")
    }

    /// Runs the host with `args` in `folder`; returns what it printed as JSON on stdout.
    fn run_json(&self, folder: &Path, args: &[&str]) -> Value {
        let (stdout, stderr) = self.outputs(folder, args);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{args:?} prints JSON ({e}): {stdout}{stderr}"))
    }

    /// Runs the host with `args` in `folder`; returns stdout and stderr apart, asserting success.
    fn outputs(&self, folder: &Path, args: &[&str]) -> (String, String) {
        let out = Command::new(&self.program)
            .args(args)
            .current_dir(folder)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .envs(self.daemon_env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::null())
            .output()
            .expect("run the host");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            out.status.success(),
            "{:?} {args:?}: {stdout}{stderr}",
            self.program
        );
        (stdout, stderr)
    }
}

/// A daemon that logs each MCP connection it serves ("client connected"), so a test can see that
/// a host's relay reached this daemon and not one it started elsewhere.
fn daemon_logging_connections() -> Daemon {
    Daemon::start_with_env(
        computer_tests::ALLOW_ACTS,
        &[("RUST_LOG", "info,computer_daemon::server=debug".into())],
        &["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"],
    )
}

fn connections_served(daemon: &Daemon) -> usize {
    daemon.log_text().matches("client connected").count()
}

/// Waits until the daemon has logged more than `before` connections.
fn wait_for_a_connection(daemon: &Daemon, before: usize, what: &str) {
    wait_for(what, Duration::from_secs(10), || {
        (connections_served(daemon) > before).then_some(())
    });
}

/// Claude Code, installed from its own package (pinned in tests/clients/ts), set up exactly as
/// the hosts page says for every project: `claude mcp add --scope user computer -- computer mcp`
/// writes the user config, and `claude mcp list` and `claude mcp get computer` start the relay,
/// which reaches this daemon, and show it connected; so is the observe-only entry added beside
/// it. No account is needed for either.
#[test]
fn claude_code_adds_the_relay_for_every_project_as_the_hosts_page_says_and_connects() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let claude = HostCli::installed("claude", "Claude Code", tmp.path(), &daemon);
    let folder = tmp.path().join("project");
    std::fs::create_dir_all(&folder).unwrap();

    claude.run(
        &folder,
        &[
            "mcp", "add", "--scope", "user", "computer", "--", "computer", "mcp",
        ],
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(claude.home.join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        config["mcpServers"]["computer"],
        json!({"type": "stdio", "command": "computer", "args": ["mcp"], "env": {}}),
        "{config}"
    );

    let before = connections_served(&daemon);
    let listed = claude.run(&folder, &["mcp", "list"]);
    assert!(
        listed.contains("computer: computer mcp - ✔ Connected"),
        "the relay connects: {listed}"
    );
    wait_for_a_connection(
        &daemon,
        before,
        "claude mcp list's relay reaching the daemon",
    );

    let before = connections_served(&daemon);
    let shown = claude.run(&folder, &["mcp", "get", "computer"]);
    assert!(
        shown.contains("Scope: User config") && shown.contains("Status: ✔ Connected"),
        "{shown}"
    );
    wait_for_a_connection(
        &daemon,
        before,
        "claude mcp get's relay reaching the daemon",
    );

    // The observe-only entry beside it, as README and the hosts page add it for plan mode.
    claude.run(
        &folder,
        &[
            "mcp",
            "add",
            "--scope",
            "user",
            "computer-observe",
            "--",
            "computer",
            "mcp",
            "--observe-only",
        ],
    );
    let listed = claude.run(&folder, &["mcp", "list"]);
    assert!(
        listed.contains("computer: computer mcp - ✔ Connected")
            && listed.contains("computer-observe: computer mcp --observe-only - ✔ Connected"),
        "both entries connect: {listed}"
    );
}

/// Claude Code's project scope, as the hosts page says: `claude mcp add --scope project` writes
/// the project's `.mcp.json`, which waits for the person's approval ("Pending approval", the
/// relay not started) until it is approved. The approval in the project's own
/// `.claude/settings.json` counts only once the person trusted the folder (recorded by Claude
/// Code's trust dialog in `~/.claude.json`); then the relay starts and connects.
#[test]
fn claude_code_project_mcp_json_waits_for_approval_then_connects() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let claude = HostCli::installed("claude", "Claude Code", tmp.path(), &daemon);
    let folder = tmp.path().join("project");
    std::fs::create_dir_all(folder.join(".claude")).unwrap();

    claude.run(
        &folder,
        &[
            "mcp", "add", "--scope", "project", "computer", "--", "computer", "mcp",
        ],
    );
    let mcp_json: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(
        mcp_json,
        json!({"mcpServers": {"computer":
            {"type": "stdio", "command": "computer", "args": ["mcp"], "env": {}}}}),
    );

    let pending = "computer: computer mcp - ⏸ Pending approval";
    let before = connections_served(&daemon);
    let listed = claude.run(&folder, &["mcp", "list"]);
    assert!(listed.contains(pending), "not approved yet: {listed}");

    std::fs::write(
        folder.join(".claude/settings.json"),
        json!({"enabledMcpjsonServers": ["computer"]}).to_string(),
    )
    .unwrap();
    let listed = claude.run(&folder, &["mcp", "list"]);
    assert!(
        listed.contains(pending),
        "a project's own settings do not approve its servers in a folder not trusted: {listed}"
    );
    assert_eq!(
        connections_served(&daemon),
        before,
        "no relay was started for a server waiting for approval"
    );

    // What Claude Code's trust dialog records when the person trusts the folder.
    let config_path = claude.home.join(".claude.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["projects"] = json!({ folder.to_str().unwrap(): {"hasTrustDialogAccepted": true} });
    std::fs::write(&config_path, config.to_string()).unwrap();
    let listed = claude.run(&folder, &["mcp", "list"]);
    assert!(
        listed.contains("computer: computer mcp - ✔ Connected"),
        "approved in a trusted folder, the relay connects: {listed}"
    );
    wait_for_a_connection(
        &daemon,
        before,
        "the project server's relay reaching the daemon",
    );
}

// ---- Codex ----

/// The Codex section of the hosts page: its `sh` command and its `toml` blocks, in order.
fn codex_section_of_the_hosts_page() -> (String, Vec<toml::Table>) {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/guide/hosts.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let (_, section) = text
        .split_once("\n## Codex\n")
        .expect("the hosts page has a Codex part");
    let section = section.split("\n## ").next().unwrap();
    let (mut commands, mut tables) = (Vec::new(), Vec::new());
    let mut blocks = section.split("```").skip(1).step_by(2);
    for block in blocks.by_ref() {
        let (info, body) = block.split_once('\n').unwrap();
        match info {
            "sh" => commands.push(body.trim().to_owned()),
            "toml" => tables.push(toml::from_str(body).unwrap_or_else(|e| panic!("{body}: {e}"))),
            other => panic!("an unexpected {other:?} block in the Codex part: {body}"),
        }
    }
    assert_eq!(
        commands.len(),
        1,
        "one command in the Codex part: {commands:?}"
    );
    (commands.remove(0), tables)
}

/// The `[mcp_servers.NAME]` entry of a Codex config.
fn codex_entry<'a>(config: &'a toml::Table, name: &str) -> &'a toml::Table {
    config["mcp_servers"][name]
        .as_table()
        .unwrap_or_else(|| panic!("no [mcp_servers.{name}] in {config}"))
}

/// A model Codex can be pointed at without an account (a model provider of the person's own is
/// Codex's documented way to use another model): a Responses API endpoint on 127.0.0.1 that
/// answers each request with the next scripted turn, streamed as server-sent events, and keeps
/// what Codex sent, tool results included.
struct ScriptedModel {
    port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedModel {
    /// Serves `turns` in order, then a closing message for any later request, until dropped.
    fn serve(turns: Vec<Vec<Value>>) -> ScriptedModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&requests);
        let server = std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                // Dropping the model knocks with an empty connection: the end.
                let Some((request_line, body)) = read_http_request(&stream) else {
                    return;
                };
                let reply = if request_line.starts_with("POST ")
                    && request_line.contains("/responses")
                {
                    let mut kept = kept.lock().unwrap();
                    kept.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                    let turn = kept.len() - 1;
                    let events = turns
                        .get(turn)
                        .cloned()
                        .unwrap_or_else(|| closing_turn(turn));
                    let stream: String = events
                        .iter()
                        .map(|event| {
                            format!(
                                "event: {}\ndata: {event}\n\n",
                                event["type"].as_str().unwrap()
                            )
                        })
                        .collect();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{stream}",
                        stream.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .into()
                };
                let _ = (&stream).write_all(reply.as_bytes());
            }
        });
        ScriptedModel {
            port,
            requests,
            server: Some(server),
        }
    }

    /// `-c` settings that make `codex` use this model.
    fn codex_settings(&self) -> Vec<String> {
        vec![
            "-c".into(),
            "model_provider=\"scripted\"".into(),
            "-c".into(),
            format!(
                "model_providers.scripted={{name=\"scripted\",base_url=\"http://127.0.0.1:{}/v1\",wire_api=\"responses\"}}",
                self.port
            ),
            "-m".into(),
            "scripted".into(),
        ]
    }

    /// What Codex handed the model as the result of call `call_id`: its text, parts joined.
    fn tool_output(&self, call_id: &str) -> String {
        let requests = self.requests.lock().unwrap();
        let output = requests
            .iter()
            .flat_map(|request| request["input"].as_array().into_iter().flatten())
            .find(|item| item["type"] == "function_call_output" && item["call_id"] == call_id)
            .map(|item| item["output"].clone())
            .unwrap_or_else(|| panic!("Codex sent no result of {call_id}"));
        match output {
            Value::String(text) => text,
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => panic!("{call_id}: an unexpected output {other}"),
        }
    }

    /// The tool's JSON reply inside Codex's result text ("Wall time: …\nOutput:\n{…}").
    fn tool_reply(&self, call_id: &str) -> Value {
        let text = self.tool_output(call_id);
        let json = text
            .split_once("Output:\n")
            .map_or(text.as_str(), |(_, json)| json);
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{call_id}: {e}: {text}"))
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// One HTTP request: its request line and body, or None when the peer sent nothing.
fn read_http_request(stream: &std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    std::io::Read::read_exact(&mut reader, &mut body).ok()?;
    Some((request_line, body))
}

/// Usage figures a Responses turn ends with.
fn turn_completed(turn: usize) -> Value {
    json!({"type": "response.completed", "response": {"id": format!("turn{turn}"), "usage": {
        "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
        "output_tokens_details": null, "total_tokens": 2}}})
}

/// A model turn that calls functions: `(call id, namespace or "", function, arguments)`.
fn calling_turn(turn: usize, calls: &[(&str, &str, &str, Value)]) -> Vec<Value> {
    let mut events =
        vec![json!({"type": "response.created", "response": {"id": format!("turn{turn}")}})];
    for (call_id, namespace, name, arguments) in calls {
        let mut item = json!({"type": "function_call", "id": format!("item-{call_id}"),
            "call_id": call_id, "name": name, "arguments": arguments.to_string()});
        if !namespace.is_empty() {
            item["namespace"] = json!(namespace);
        }
        events.push(json!({"type": "response.output_item.done", "item": item}));
    }
    events.push(turn_completed(turn));
    events
}

/// The model's last word: a message, no call.
fn closing_turn(turn: usize) -> Vec<Value> {
    vec![
        json!({"type": "response.created", "response": {"id": format!("turn{turn}")}}),
        json!({"type": "response.output_item.done", "item": {"type": "message", "role": "assistant",
            "id": format!("message{turn}"), "content": [{"type": "output_text", "text": "done"}]}}),
        turn_completed(turn),
    ]
}

/// `COMPUTER` through the Codex server `server` (Codex names its namespace `mcp__` and the
/// server's name with `-` as `_`).
fn computer_call(
    call_id: &'static str,
    server: &str,
    call: Value,
) -> (&'static str, String, Value) {
    (call_id, format!("mcp__{}", server.replace('-', "_")), call)
}

/// Codex, installed from its own package (pinned in tests/clients/ts), in a private `HOME`, set up
/// exactly as the hosts page says: its `codex mcp add` line, then the page's edits of
/// `~/.codex/config.toml` (the timeout, the observe-only entry).
struct Codex {
    cli: HostCli,
    folder: PathBuf,
    config: PathBuf,
    /// The page's three `toml` blocks: the full entry with its timeout, the observe-only entry,
    /// the full entry that leaves approval to the daemon.
    page: [toml::Table; 3],
    socket: PathBuf,
}

impl Codex {
    fn set_up_as_the_hosts_page_says(root: &Path, daemon: &Daemon) -> Codex {
        let cli = HostCli::installed("codex", "Codex", root, daemon);
        let folder = root.join("project");
        std::fs::create_dir_all(&folder).unwrap();
        let (add, tables) = codex_section_of_the_hosts_page();
        let page: [toml::Table; 3] = tables
            .try_into()
            .unwrap_or_else(|tables| panic!("three toml blocks in the Codex part: {tables:?}"));
        let args: Vec<&str> = add.split_whitespace().collect();
        assert_eq!(args[0], "codex", "{add}");
        cli.run(&folder, &args[1..]);
        let codex = Codex {
            config: cli.home.join(".codex/config.toml"),
            cli,
            folder,
            page,
            socket: daemon.socket.clone(),
        };
        // The page's entry is what `codex mcp add` wrote, plus the timeout.
        let written = codex.read_config();
        let mut expected = codex_entry(&codex.page[0], "computer").clone();
        assert_eq!(
            expected.remove("tool_timeout_sec"),
            Some(toml::Value::Integer(300))
        );
        assert_eq!(*codex_entry(&written, "computer"), expected, "{written}");
        codex.edit_as_the_page_says(0);
        codex.edit_as_the_page_says(1);
        codex
    }

    fn read_config(&self) -> toml::Table {
        toml::from_str(&std::fs::read_to_string(&self.config).unwrap()).unwrap()
    }

    /// Puts the entries of the page's `toml` block `block` into the config, as a person would.
    fn edit_as_the_page_says(&self, block: usize) {
        let mut config = self.read_config();
        let servers = config["mcp_servers"].as_table_mut().unwrap();
        for (name, entry) in self.page[block]["mcp_servers"].as_table().unwrap() {
            servers.insert(name.clone(), entry.clone());
        }
        std::fs::write(&self.config, toml::to_string(&config).unwrap()).unwrap();
    }

    /// `codex exec` with `model`: stdout and stderr (Codex's warnings included). Only the
    /// scripted model is reached: no plugin or app sync, no analytics (whose host Codex would
    /// otherwise look up). The one setting beyond the page's is `env_vars`, so that the relay
    /// finds this test's daemon rather than the person's.
    fn exec(&self, model: &ScriptedModel) -> String {
        let out = Command::new(&self.cli.program)
            .args(["exec", "--skip-git-repo-check", "--strict-config"])
            .args(["-c", "analytics.enabled=false"])
            .args(["--disable", "plugins", "--disable", "remote_plugin"])
            .args(["--disable", "apps"])
            .args(model.codex_settings())
            .args(["-c", r#"mcp_servers.computer.env_vars=["COMPUTER_SOCKET"]"#])
            .args([
                "-c",
                r#"mcp_servers.computer-observe.env_vars=["COMPUTER_SOCKET"]"#,
            ])
            .arg("use the computer")
            .current_dir(&self.folder)
            .env_clear()
            .env("HOME", &self.cli.home)
            .env("PATH", &self.cli.path)
            // Warnings, and what Codex's MCP client logs of a server's stderr.
            .env("RUST_LOG", "warn,codex_rmcp_client=info")
            .env("COMPUTER_SOCKET", &self.socket)
            .stdin(Stdio::null())
            .output()
            .expect("run codex exec");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "codex exec: {text}");
        text
    }
}

/// After the hosts page's `codex mcp add` and edits, `codex mcp list` shows both entries and
/// `--json` their timeout, and `codex mcp get computer --json` the full entry with it.
#[test]
fn codex_mcp_list_and_get_show_the_hosts_pages_entries_with_their_timeout() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let codex = Codex::set_up_as_the_hosts_page_says(tmp.path(), &daemon);
    let run = |args: &[&str]| codex.cli.run(&codex.folder, args);
    let run_json = |args: &[&str]| codex.cli.run_json(&codex.folder, args);

    let listed = run(&["mcp", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("computer ") && line.contains("enabled"))
            && listed
                .lines()
                .any(|line| line.starts_with("computer-observe ") && line.contains("enabled")),
        "{listed}"
    );
    let listed = run_json(&["mcp", "list", "--json"]);
    let timeouts: Vec<(&str, &Value)> = listed
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|server| {
            (
                server["name"].as_str().unwrap(),
                &server["tool_timeout_sec"],
            )
        })
        .collect();
    assert_eq!(
        timeouts,
        [
            ("computer", &json!(300.0)),
            ("computer-observe", &json!(300.0))
        ],
        "{listed}"
    );
    let shown = run_json(&["mcp", "get", "computer", "--json"]);
    assert_eq!(
        (
            &shown["transport"]["command"],
            &shown["transport"]["args"],
            &shown["tool_timeout_sec"]
        ),
        (&json!("computer"), &json!(["mcp"]), &json!(300.0)),
        "{shown}"
    );
}

/// The hosts page's other place for the entry, a project's `.codex/config.toml`: Codex ignores it
/// in a folder the person has not trusted, and reads it once the folder is (what Codex's trust
/// prompt records in `~/.codex/config.toml`).
#[test]
fn codex_reads_a_projects_entry_only_in_a_trusted_folder() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let cli = HostCli::installed("codex", "Codex", tmp.path(), &daemon);
    let folder = tmp.path().join("project");
    std::fs::create_dir_all(folder.join(".codex")).unwrap();
    let (_, page) = codex_section_of_the_hosts_page();
    std::fs::write(
        folder.join(".codex/config.toml"),
        toml::to_string(&page[0]).unwrap(),
    )
    .unwrap();
    let names = |listed: &Value| -> Vec<(String, Value)> {
        listed
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|server| {
                (
                    server["name"].as_str().unwrap().to_owned(),
                    server["tool_timeout_sec"].clone(),
                )
            })
            .collect()
    };
    let untrusted = cli.run_json(&folder, &["mcp", "list", "--json"]);
    assert_eq!(names(&untrusted), [], "{untrusted}");

    std::fs::create_dir_all(cli.home.join(".codex")).unwrap();
    let mut trust = toml::Table::new();
    trust.insert(
        "projects".into(),
        toml::Value::Table(toml::Table::from_iter([(
            folder.to_str().unwrap().to_owned(),
            toml::Value::Table(toml::Table::from_iter([(
                "trust_level".to_owned(),
                toml::Value::String("trusted".into()),
            )])),
        )])),
    );
    std::fs::write(
        cli.home.join(".codex/config.toml"),
        toml::to_string(&trust).unwrap(),
    )
    .unwrap();
    let trusted = cli.run_json(&folder, &["mcp", "list", "--json"]);
    assert_eq!(
        names(&trusted),
        [("computer".to_owned(), json!(300.0))],
        "{trusted}"
    );
}

/// `codex exec` with a scripted model on 127.0.0.1 (no account), Codex set up as the hosts page
/// says, calls as a model would: an observation through the observe-only entry runs and is
/// receipted; an act through it is refused by the daemon; the same act through the full entry
/// is failed by Codex itself (its own approval, with nobody to ask) and never reaches the
/// daemon, until the page's `default_tools_approval_mode` line, after which it runs and is
/// receipted. Codex's resource tools list none, Codex logs no warning about the server, and its
/// log holds the relay's line naming the config the running daemon read.
#[test]
fn codex_exec_calls_through_the_observe_only_and_the_full_entry_each_receipted() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let codex = Codex::set_up_as_the_hosts_page_says(tmp.path(), &daemon);
    let echo =
        json!({"surface": "shell", "command": "run", "args": {"argv": ["echo", "from codex"]}});
    let calls = [
        computer_call(
            "observe",
            "computer-observe",
            json!({"surface": "shell", "command": "list"}),
        ),
        computer_call("act-observe-only", "computer-observe", echo.clone()),
        computer_call("act", "computer", echo.clone()),
    ];
    let resources = [
        (
            "resources",
            "",
            "list_mcp_resources",
            json!({"server": "computer"}),
        ),
        (
            "templates",
            "",
            "list_mcp_resource_templates",
            json!({"server": "computer"}),
        ),
    ];
    let turns = calls
        .iter()
        .enumerate()
        .map(|(turn, (id, namespace, call))| {
            calling_turn(turn, &[(id, namespace, "COMPUTER", call.clone())])
        })
        .chain([calling_turn(calls.len(), &resources)])
        .collect();
    let model = ScriptedModel::serve(turns);
    let before = connections_served(&daemon);
    let said = codex.exec(&model);
    assert!(
        connections_served(&daemon) >= before + 2,
        "both entries' relays reached this daemon"
    );

    let observed = model.tool_reply("observe");
    assert_eq!(
        (&observed["ok"], &observed["sessions"]),
        (&json!(true), &json!([])),
        "{observed}"
    );
    let intent = daemon.receipt_row(&observed["receipt"], "intent");
    assert_eq!(
        (&intent["surface"], &intent["command"]),
        (&json!("shell"), &json!("list")),
        "{intent}"
    );
    assert_eq!(
        daemon.receipt_row(&observed["receipt"], "result")["body"]["ok"],
        true
    );

    let refused = model.tool_reply("act-observe-only");
    assert_eq!(refused["error"]["code"], "denied", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("observe-only"),
        "{refused}"
    );
    let result = daemon.receipt_row(&refused["receipt"], "result");
    assert_eq!(result["body"]["ok"], false, "{result}");

    let gated = model.tool_output("act");
    assert!(
        gated.contains("MCP tool call requires approval"),
        "Codex gates the full entry: {gated}"
    );
    let runs_asked = daemon
        .receipts()
        .iter()
        .filter(|row| row["kind"] == "intent" && row["command"] == "run")
        .count();
    assert_eq!(
        runs_asked, 1,
        "only the observe-only entry's act reached the daemon (and was refused there)"
    );

    assert_eq!(
        model.tool_reply("resources"),
        json!({"server": "computer", "resources": []})
    );
    assert_eq!(
        model.tool_reply("templates"),
        json!({"server": "computer", "resourceTemplates": []})
    );
    // The relay's line naming the config the running daemon read, in Codex's log.
    assert!(
        said.contains(&format!(
            "MCP server stderr (computer): computer mcp: the running daemon (pid {}) read its \
             config from {}",
            daemon.pid(),
            daemon.config.display()
        )),
        "{said}"
    );
    let warnings: Vec<&str> = said
        .lines()
        .filter(|line| {
            (line.contains(" WARN ") || line.contains(" ERROR ")) && line.contains("computer")
        })
        .collect();
    assert!(
        warnings.is_empty(),
        "Codex warned about the server: {warnings:?}\n{said}"
    );
    drop(model);

    // The page's line that leaves the decision to the daemon: the act runs, receipted.
    codex.edit_as_the_page_says(2);
    let (id, namespace, call) = &calls[2];
    let model = ScriptedModel::serve(vec![calling_turn(
        0,
        &[(id, namespace, "COMPUTER", call.clone())],
    )]);
    codex.exec(&model);
    let ran = model.tool_reply("act");
    assert_eq!(
        (&ran["ok"], &ran["stdout"]),
        (&json!(true), &json!("from codex\n")),
        "{ran}"
    );
    let intent = daemon.receipt_row(&ran["receipt"], "intent");
    assert_eq!(
        (&intent["surface"], &intent["command"]),
        (&json!("shell"), &json!("run")),
        "{intent}"
    );
    assert_eq!(
        intent["body"]["args"]["args"]["argv"],
        json!(["echo", "from codex"]),
        "{intent}"
    );
    daemon.assert_chain_holds();
}

/// Why the hosts page has Codex's `tool_timeout_sec` kept above the approval wait: Codex cuts a
/// call off at that timeout even while it waits for the person (a hard limit, not reset by the
/// daemon's progress notifications), and the request the person was asked is withdrawn, not left
/// pending (Codex cancels the call, and its relay goes when Codex exits).
#[test]
fn codex_cuts_a_call_waiting_for_approval_at_its_tool_timeout_and_the_request_is_withdrawn() {
    let daemon = Daemon::start_with_config("[defaults]\nact = \"ask\"\n");
    let tmp = tempfile::tempdir().unwrap();
    let codex = Codex::set_up_as_the_hosts_page_says(tmp.path(), &daemon);
    codex.edit_as_the_page_says(2);
    let mut config = codex.read_config();
    config["mcp_servers"]["computer"]
        .as_table_mut()
        .unwrap()
        .insert("tool_timeout_sec".into(), toml::Value::Integer(2));
    std::fs::write(&codex.config, toml::to_string(&config).unwrap()).unwrap();

    let (id, namespace, call) = computer_call(
        "asked",
        "computer",
        json!({"surface": "shell", "command": "run", "args": {"argv": ["echo", "asked"]}}),
    );
    let model = ScriptedModel::serve(vec![calling_turn(0, &[(id, &namespace, "COMPUTER", call)])]);
    codex.exec(&model);
    let cut = model.tool_output("asked");
    assert!(
        cut.contains("timed out awaiting tools/call after 2s"),
        "Codex cut the call at its timeout: {cut}"
    );
    let intent = daemon
        .receipts()
        .into_iter()
        .find(|row| row["kind"] == "intent" && row["command"] == "run")
        .expect("the call reached the daemon");
    assert_eq!(intent["body"]["policy"]["decision"], "ask", "{intent}");
    wait_for(
        "the request to be withdrawn",
        Duration::from_secs(10),
        || daemon.pending_approvals().is_empty().then_some(()),
    );
    let answered = daemon
        .receipts()
        .into_iter()
        .find(|row| {
            row["call_id"] == intent["call_id"] && row["body"]["approval"]["outcome"] == "denied"
        })
        .expect("the request's end is receipted");
    assert_eq!(
        answered["body"]["approval"]["reason"], "the agent went away while waiting",
        "{answered}"
    );
}

/// The MCP Inspector, installed from its own package (pinned in tests/clients/ts), in its CLI
/// mode exactly as the hosts page runs it (`npx @modelcontextprotocol/inspector --cli computer
/// mcp ...`): `tools/list` lists `COMPUTER`, the page's `help` call answers, and an observe call
/// (`shell list`) is the call the daemon receipted. The Inspector starts the relay with a
/// minimal environment, so this daemon's socket is given with its `-e` (a person's daemon is
/// found at its usual place without it); the relay's line naming the daemon's config reaches
/// the Inspector's stderr.
#[test]
fn the_mcp_inspector_cli_lists_the_tool_and_makes_a_receipted_call() {
    let daemon = daemon_logging_connections();
    let tmp = tempfile::tempdir().unwrap();
    let inspector = HostCli::installed("inspector", "The MCP Inspector", tmp.path(), &daemon);
    let socket = format!("COMPUTER_SOCKET={}", daemon.socket.display());
    let run = |method_args: &[&str]| -> (Value, String) {
        let out = Command::new("npx")
            .args([
                "@modelcontextprotocol/inspector",
                "--cli",
                "computer",
                "mcp",
            ])
            .args(["-e", &socket])
            .args(method_args)
            .current_dir(ts_clients())
            .env_clear()
            .env("HOME", &inspector.home)
            .env("PATH", &inspector.path)
            .stdin(Stdio::null())
            .output()
            .expect("run npx (Node.js and npm)");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "inspector {method_args:?}: {stderr}");
        let reply = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "the Inspector prints JSON ({err}): {}{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (reply, stderr)
    };

    let (listed, stderr) = run(&["--method", "tools/list"]);
    let tools: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(tools, ["COMPUTER"], "{listed}");
    assert!(
        stderr.contains(&format!(
            "computer mcp: the running daemon (pid {}) read its config from {}",
            daemon.pid(),
            daemon.config.display()
        )),
        "the relay names the running daemon's config in the host's log: {stderr}"
    );

    let tool_call = ["--method", "tools/call", "--tool-name", "COMPUTER"];
    let (help, _) = run(&[
        &tool_call[..],
        &["--tool-arg", "surface=shell", "--tool-arg", "command=help"],
    ]
    .concat());
    assert_eq!(help["isError"], false, "{help}");
    assert!(
        help["structuredContent"]["help"]
            .as_str()
            .is_some_and(|text| text.contains("- shell.run {")),
        "{help}"
    );

    let (listed_sessions, _) = run(&[
        &tool_call[..],
        &["--tool-arg", "surface=shell", "--tool-arg", "command=list"],
    ]
    .concat());
    assert_eq!(listed_sessions["isError"], false, "{listed_sessions}");
    assert_eq!(
        listed_sessions["structuredContent"]["sessions"],
        json!([]),
        "{listed_sessions}"
    );
    let receipt = &listed_sessions["structuredContent"]["receipt"];
    assert_eq!(listed_sessions["_meta"]["receipt"], *receipt);
    let intent = daemon.receipt_row(receipt, "intent");
    assert_eq!(
        (
            &intent["surface"],
            &intent["command"],
            &intent["body"]["risk"]
        ),
        (&json!("shell"), &json!("list"), &json!("observe")),
        "{intent}"
    );
    let result = daemon.receipt_row(receipt, "result");
    assert_eq!(result["body"]["ok"], true, "{result}");
    assert_eq!(result["body"]["fields"]["sessions"], json!([]), "{result}");
    daemon.assert_chain_holds();
}

#[test]
fn python_sdk_through_the_bridge_starts_a_daemon_and_runs_a_receipted_call() {
    require_python_sdk();
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("run/computer.sock");
    std::fs::write(tmp.path().join("config.toml"), computer_tests::ALLOW_ACTS).unwrap();
    let env = [
        ("COMPUTER_SOCKET", socket.clone()),
        ("COMPUTER_STATE_DIR", tmp.path().join("state")),
        ("COMPUTER_CONFIG", tmp.path().join("config.toml")),
    ];
    let _daemon = SpawnedDaemon(tmp.path().join("run/computer.sock.lock"));
    let report = run_python_client(&env);
    assert_eq!(report["tools"], serde_json::json!(["COMPUTER"]));
    assert_eq!(report["server"], "computer");
    assert_eq!(report["is_error"], false);
    assert_eq!(report["structured"]["stdout"], "from python\n");
    // The SDK read the output schema and held every reply to it (it raises on a mismatch).
    assert_eq!(
        report["output_schema"]["required"],
        json!(["ok"]),
        "{report}"
    );
    assert_eq!(report["schemas_valid"], true, "{report}");
    assert_eq!(report["failed"]["error"]["path"], "args.argv", "{report}");
    assert!(
        report["help"]["help"]
            .as_str()
            .is_some_and(|h| h.contains("- shell.run {")),
        "{report}"
    );
    assert!(socket.exists(), "the bridge left a daemon serving");

    let receipt = report["structured"]["receipt"].as_str().unwrap();
    let cli = |args: &[&str]| {
        Command::new(computer_bin())
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .output()
            .unwrap()
    };
    let shown = cli(&["receipts", "show", receipt]);
    assert!(shown.status.success());
    let rows: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(rows[1]["body"]["ok"], true);
    assert!(cli(&["receipts", "verify"]).status.success());
}

#[test]
fn python_sdk_through_the_bridge_uses_a_running_daemon() {
    require_python_sdk();
    let daemon = Daemon::start();
    let report = run_python_client(&daemon.env());
    assert_eq!(report["structured"]["ok"], true);
    assert!(
        ["2025-06-18", "2025-11-25"].contains(&report["protocol_version"].as_str().unwrap()),
        "{report}"
    );
    // The echo's intent and result, beside the failed call's and the help call's rows.
    let rows: Vec<Value> = daemon
        .receipts()
        .into_iter()
        .filter(|row| row["call_id"] == report["structured"]["receipt"])
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    daemon.assert_chain_holds();
}

#[test]
fn the_bridge_without_spawning_says_no_daemon_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(computer_bin())
        .args(["mcp", "--no-spawn"])
        .env("COMPUTER_SOCKET", tmp.path().join("none.sock"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no daemon is listening") && stderr.contains("computer serve"),
        "{stderr}"
    );
}

// ---- the official TypeScript SDK ----

/// The directory holding the pinned SDK releases (`packaging/install-deps.sh` runs `npm ci`).
fn ts_clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/ts")
}

fn node() -> String {
    std::env::var("NODE").unwrap_or_else(|_| "node".into())
}

fn require_typescript_sdk() {
    let sdk = ts_clients().join("node_modules/@modelcontextprotocol/sdk/package.json");
    let old = ts_clients().join("node_modules/sdk-2024-11-05/package.json");
    assert!(
        sdk.exists() && old.exists(),
        "the MCP TypeScript SDK is missing from {}: run packaging/install-deps.sh (it runs `npm ci` there)",
        ts_clients().display()
    );
}

/// `node client.mjs SCENARIO computer` in an environment of exactly `env`, with piped stdio.
fn ts_client(scenario: &str, env: &[(&str, PathBuf)]) -> Child {
    require_typescript_sdk();
    Command::new(node())
        .current_dir(ts_clients())
        .arg("client.mjs")
        .arg(scenario)
        .arg(computer_bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node (install Node.js 18 or later)")
}

/// Reads JSON lines from a client until one has `key`.
fn read_until(lines: &mut BufReader<ChildStdout>, key: &str) -> Value {
    loop {
        let mut line = String::new();
        let n = lines
            .read_line(&mut line)
            .expect("read the client's output");
        assert!(n > 0, "the client ended before printing `{key}`");
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("client printed {line:?}: {err}"));
        if value.get(key).is_some() {
            return value;
        }
    }
}

/// Runs a scenario to its report.
fn ts_report(scenario: &str, env: &[(&str, PathBuf)]) -> Value {
    let mut child = ts_client(scenario, env);
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let report = read_until(&mut lines, "report")["report"].clone();
    assert!(child.wait().unwrap().success(), "{scenario} client failed");
    report
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[test]
fn typescript_sdk_initializes_lists_calls_and_closes_the_relay_at_once() {
    let daemon = Daemon::start();
    let report = ts_report("tour", &daemon.env());
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_eq!(report["server"], "computer");
    assert_eq!(report["tools"], json!(["COMPUTER"]));

    let echo = &report["echo"];
    assert_eq!(echo["is_error"], false, "{echo}");
    assert_eq!(echo["structured"]["stdout"], "from typescript\n");
    // The text carries the same JSON less what the model needs not read: `ok` when true and
    // the receipt id (which structuredContent and `_meta` keep).
    let mut lean = echo["structured"].clone();
    lean.as_object_mut().unwrap().remove("ok");
    lean.as_object_mut().unwrap().remove("receipt");
    assert_eq!(
        lean, echo["text_json"],
        "text content carries the same JSON"
    );

    let bad = &report["bad_surface"]["structured"];
    assert_eq!(report["bad_surface"]["is_error"], true);
    assert_eq!(bad["error"]["code"], "invalid_call", "{bad}");
    assert_eq!(bad["error"]["path"], "surface");
    assert_eq!(bad["error"]["valid"], json!(["shell"]));
    let bad = &report["bad_field"]["structured"];
    assert_eq!(bad["error"]["path"], "args.cwd", "{bad}");
    assert!(
        bad["error"]["valid"]
            .as_array()
            .unwrap()
            .contains(&json!("argv"))
    );
    // The SDK read the output schema and held every reply to it (a mismatch throws): a wrongly
    // typed argument names its field, `help` answers, a multi-step call's selected reply.
    assert_eq!(
        report["output_schema"]["required"],
        json!(["ok"]),
        "{report}"
    );
    let bad = &report["bad_type"]["structured"];
    assert_eq!(bad["error"]["code"], "invalid_call", "{bad}");
    assert_eq!(bad["error"]["path"], "args.argv", "{bad}");
    let help = &report["help"]["structured"];
    assert!(
        help["help"]
            .as_str()
            .is_some_and(|h| h.starts_with("- shell.run {")),
        "{help}"
    );
    let steps = &report["steps"]["structured"];
    assert_eq!(steps["ok"], true, "{steps}");
    let unknown = &report["unknown_tool"]["result"]["structured"];
    assert_eq!(unknown["error"]["path"], "name", "{report}");
    assert_eq!(unknown["error"]["valid"], json!(["COMPUTER"]));

    let concurrent = report["concurrent"].as_array().unwrap();
    assert_eq!(concurrent.len(), 20);
    for (i, stdout) in concurrent.iter().enumerate() {
        assert_eq!(stdout, &json!(format!("call {i}\n")), "{report}");
    }

    // Closing is the host ending stdin and waiting for the relay to exit: the relay must not wait
    // for the daemon. Bounded by the spec'd figure, as the median of five closes so that one slow
    // scheduling slice on a loaded machine does not decide.
    let closes: Vec<f64> = report["close_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(closes.len(), 5);
    assert!(median(closes.clone()) < 100.0, "closes took {closes:?} ms");
    assert_eq!(
        report["relay_gone_after_close"],
        json!([true, true, true, true, true])
    );

    // The daemon keeps serving after its clients leave, and every call was receipted.
    let after = daemon.call_json("shell", "run", r#"{"argv":["echo","after"]}"#);
    assert_eq!(after["stdout"], "after\n", "{after}");
    let results = daemon
        .receipts()
        .into_iter()
        .filter(|r| r["kind"] == "result")
        .count();
    // echo, three invalid calls, `help`, two steps and their call, an unknown tool, 20
    // concurrent, 4 `true`, and the last echo.
    assert_eq!(results, 1 + 3 + 1 + 3 + 1 + 20 + 4 + 1);
    daemon.assert_chain_holds();
}

#[test]
fn an_sdk_that_knows_only_2024_11_05_connects_and_calls() {
    let daemon = Daemon::start();
    let report = ts_report("old", &daemon.env());
    assert_eq!(report["protocol_version"], "2024-11-05", "{report}");
    // The 2024-11-05 tool has a name, a description and an input schema, nothing later.
    assert_eq!(
        report["tool_keys"],
        json!(["description", "inputSchema", "name"])
    );
    let echo = &report["echo"];
    assert_eq!(echo["is_error"], false, "{echo}");
    assert_eq!(
        echo["structured"],
        Value::Null,
        "no structuredContent before 2025-06-18"
    );
    assert_eq!(echo["text_json"]["stdout"], "from 2024-11-05\n", "{echo}");
    assert_eq!(echo["is_error"], false);

    // The same call on the same daemon under 2025-06-18 carries structuredContent equal to the
    // text plus `ok` and the receipt id (which the older revision finds in `_meta`).
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-06-18");
    let (reply, _) = raw.call_tool(&computer_tests::shell_run(
        json!({"argv": ["echo", "from 2025-06-18"]}),
        json!({}),
    ));
    let text: Value =
        serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let mut lean = reply["result"]["structuredContent"].clone();
    lean.as_object_mut().unwrap().remove("ok");
    let receipt = lean.as_object_mut().unwrap().remove("receipt").unwrap();
    assert_eq!(lean, text, "{reply}");
    assert_eq!(reply["result"]["_meta"]["receipt"], receipt, "{reply}");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2024-11-05");
    let (reply, _) = raw.call_tool(&computer_tests::shell_run(
        json!({"argv": ["false"]}),
        json!({}),
    ));
    assert!(
        reply["result"].get("structuredContent").is_none(),
        "{reply}"
    );
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text: Value =
        serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["exit_code"], 1, "{text}");
}

// ---- the relay's lifetime ----

/// Whether `pid` has exited (gone, or a zombie its new parent has not reaped yet).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn the_relay_leaves_when_its_host_dies_even_with_stdin_open() {
    let daemon = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("relay-stdin");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    // The host: a shell that starts the relay reading the fifo, prints its pid and waits on its
    // own stdin. We keep the fifo open for writing, so the relay's stdin never ends: only the
    // host's death can tell it to leave.
    let mut host = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#""$0" mcp --no-spawn < "$1" & echo $!; read line"#)
        .arg(computer_bin())
        .arg(&fifo)
        .envs(daemon.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut relay_stdin = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut out = BufReader::new(host.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let relay: u32 = line.trim().parse().unwrap();
    relay_stdin
        .write_all(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}"#)
        .unwrap();
    relay_stdin.write_all(b"\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"protocolVersion\":\"2025-06-18\""),
        "{line}"
    );
    assert!(!exited(relay), "the relay is serving");

    host.kill().unwrap();
    host.wait().unwrap();
    wait_for(
        "the relay to leave with its host",
        Duration::from_secs(5),
        || exited(relay).then_some(()),
    );
    // The daemon saw the connection close and goes on serving others.
    let after = daemon.call_json("shell", "run", r#"{"argv":["echo","still serving"]}"#);
    assert_eq!(after["stdout"], "still serving\n", "{after}");
    drop(relay_stdin);
}

#[test]
fn a_reply_already_on_its_way_is_delivered_after_stdin_ends() {
    let daemon = Daemon::start();
    let mut relay = daemon
        .command()
        .args(["mcp", "--no-spawn"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_relay = relay.stdin.take().unwrap();
    let mut from_relay = BufReader::new(relay.stdout.take().unwrap());
    to_relay
        .write_all(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"slow reader","version":"0"}}}"#)
        .unwrap();
    to_relay.write_all(b"\n").unwrap();
    let mut line = String::new();
    from_relay.read_line(&mut line).unwrap();
    // A reply larger than the pipe to the host (64 KiB): the relay is still writing it when the
    // host, having read its first bytes, closes stdin.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "COMPUTER", "arguments": computer_tests::shell_run(
            json!({"script": "head -c 40000 /dev/zero | tr '\\0' a"}),
            json!({"return": {"max_bytes": 40000}}))}});
    let mut bytes = serde_json::to_vec(&call).unwrap();
    bytes.push(b'\n');
    to_relay.write_all(&bytes).unwrap();
    let mut first = [0u8; 4096];
    std::io::Read::read_exact(&mut from_relay, &mut first).unwrap();
    drop(to_relay);
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut from_relay, &mut rest).unwrap();
    assert!(relay.wait().unwrap().success());
    let mut whole = first.to_vec();
    whole.extend(rest);
    let reply: Value = serde_json::from_slice(whole.trim_ascii_end())
        .unwrap_or_else(|err| panic!("the reply was cut ({} bytes): {err}", whole.len()));
    assert_eq!(reply["id"], 1);
    let stdout = reply["result"]["structuredContent"]["stdout"]
        .as_str()
        .unwrap();
    assert_eq!(stdout.len(), 40000, "{}", &stdout[..100]);
}

// ---- cancellation of a long run ----

/// `sleep 30` processes that descend from `ancestor`.
fn sleeps_under(ancestor: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline == b"sleep\x0030\x00" && !exited(pid) && descends_from(pid, ancestor) {
            found.push(pid);
        }
    }
    found
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        match parent_of(pid) {
            Some(parent) if parent == ancestor => return true,
            Some(parent) if parent > 1 => pid = parent,
            _ => return false,
        }
    }
    false
}

/// Kills what a test left running under the daemon, whatever the test's outcome.
struct KillSleepsUnder(u32);

impl Drop for KillSleepsUnder {
    fn drop(&mut self) {
        for pid in sleeps_under(self.0) {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

const ALLOW_SHELL_RUNS: &str = "[defaults]\nact = \"ask\"\n\n[[rules]]\nsurface = \"shell\"\ncommand = \"run\"\ndecision = \"allow\"\n";

/// The result receipt of the `sleep 30` call, once written.
fn sleep_result(daemon: &Daemon) -> Value {
    wait_for(
        "the cancelled call's result receipt",
        Duration::from_secs(10),
        || {
            let rows = daemon.receipts();
            let intent = rows.iter().find(|r| {
                r["kind"] == "intent" && r["body"]["args"]["args"]["argv"] == json!(["sleep", "30"])
            })?;
            rows.iter()
                .find(|r| r["kind"] == "result" && r["call_id"] == intent["call_id"])
                .cloned()
        },
    )
}

// These two hold the contract of cancellation (a run's processes killed, `cancelled` in the
// result receipt, no reply) that the gateway implements.
#[test]
fn typescript_sdk_cancelling_a_long_run_kills_it_and_the_receipt_says_so() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL_RUNS);
    let _cleanup = KillSleepsUnder(daemon.pid() as u32);
    let mut client = ts_client("cancel", &daemon.env());
    let mut lines = BufReader::new(client.stdout.take().unwrap());
    read_until(&mut lines, "event");
    wait_for("the run to start", Duration::from_secs(30), || {
        (!sleeps_under(daemon.pid() as u32).is_empty()).then_some(())
    });
    client
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"abort\n")
        .unwrap();
    let report = read_until(&mut lines, "report")["report"].clone();
    assert!(client.wait().unwrap().success());
    assert!(report["outcome"]["rejected"].is_string(), "{report}");
    assert_eq!(
        report["after"]["structured"]["stdout"], "still here\n",
        "the session still works after a cancel: {report}"
    );

    let left = try_wait_for(Duration::from_secs(10), || {
        sleeps_under(daemon.pid() as u32).is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "sleep 30 still runs after the cancel: {:?}",
        sleeps_under(daemon.pid() as u32)
    );
    let result = sleep_result(&daemon);
    assert_eq!(result["body"]["ok"], false, "{result}");
    assert_eq!(result["body"]["cancelled"]["by"], "client", "{result}");
    daemon.assert_chain_holds();
}

#[test]
fn a_host_that_dies_mid_run_takes_its_relay_and_its_run_with_it() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL_RUNS);
    let _cleanup = KillSleepsUnder(daemon.pid() as u32);
    let mut client = ts_client("hang", &daemon.env());
    let mut lines = BufReader::new(client.stdout.take().unwrap());
    let relay = read_until(&mut lines, "event")["relay_pid"]
        .as_u64()
        .unwrap() as u32;
    wait_for("the run to start", Duration::from_secs(30), || {
        (!sleeps_under(daemon.pid() as u32).is_empty()).then_some(())
    });
    client.kill().unwrap();
    client.wait().unwrap();
    wait_for(
        "the relay to leave with its host",
        Duration::from_secs(5),
        || exited(relay).then_some(()),
    );
    let left = try_wait_for(Duration::from_secs(10), || {
        sleeps_under(daemon.pid() as u32).is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "sleep 30 outlived the host that asked for it"
    );
    let result = sleep_result(&daemon);
    assert_eq!(result["body"]["ok"], false, "{result}");
    assert_eq!(result["body"]["cancelled"]["by"], "disconnect", "{result}");
}

#[test]
fn a_cancelled_call_gets_no_reply_and_the_connection_goes_on() {
    let daemon = Daemon::start_with_config(ALLOW_SHELL_RUNS);
    let _cleanup = KillSleepsUnder(daemon.pid() as u32);
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "COMPUTER", "arguments": computer_tests::shell_run(json!({"argv": ["sleep", "30"]}), json!({}))}}));
    wait_for("the run to start", Duration::from_secs(30), || {
        (!sleeps_under(daemon.pid() as u32).is_empty()).then_some(())
    });
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "changed my mind"}}),
    );
    let result = sleep_result(&daemon);
    assert_eq!(result["body"]["cancelled"]["by"], "client", "{result}");
    // Calls after it are answered; the cancelled one never is, up to the connection's end.
    let (after, _) = raw.call_tool(&computer_tests::shell_run(
        json!({"argv": ["echo", "next"]}),
        json!({}),
    ));
    assert_eq!(
        after["result"]["structuredContent"]["stdout"], "next\n",
        "{after}"
    );
    raw.shutdown_write();
    while let Some(message) = raw.recv() {
        assert_ne!(
            message.get("id"),
            Some(&json!(5)),
            "a cancelled call was answered: {message}"
        );
    }
    assert!(
        sleeps_under(daemon.pid() as u32).is_empty(),
        "the cancelled run still runs"
    );
}

// ---- one daemon per person, found from any environment ----

/// A person's session played in a temporary directory: `base` stands in for `/run/user`, the
/// runtime dir is `base/UID`, and `home` is `$HOME`.
struct Session {
    _dir: tempfile::TempDir,
    base: PathBuf,
    runtime: PathBuf,
    home: PathBuf,
}

impl Session {
    fn new() -> Session {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("run-user");
        // SAFETY: getuid has no preconditions.
        let runtime = base.join(unsafe { libc::getuid() }.to_string());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&runtime)
            .unwrap();
        let home = dir.path().join("home");
        let config = home.join(".config/computer");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), computer_tests::ALLOW_ACTS).unwrap();
        Session {
            base,
            runtime,
            home,
            _dir: dir,
        }
    }

    /// The environment a host that strips everything passes (the TypeScript SDK's default),
    /// plus the test-only stand-in for `/run/user`.
    fn stripped_env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("HOME", self.home.clone()),
            ("LOGNAME", "tester".into()),
            ("USER", "tester".into()),
            ("SHELL", "/bin/sh".into()),
            ("TERM", "dumb".into()),
            ("PATH", std::env::var_os("PATH").unwrap_or_default().into()),
            ("COMPUTER_TEST_RUN_USER_BASE", self.base.clone()),
        ]
    }

    /// `computer ARGS` in exactly `env`.
    fn computer(&self, env: &[(&str, PathBuf)]) -> Command {
        let mut command = Command::new(computer_bin());
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .current_dir(&self.home);
        command
    }

    fn socket(&self) -> PathBuf {
        self.runtime.join("computer/computer.sock")
    }

    fn state(&self) -> PathBuf {
        self.home.join(".local/state/computer")
    }

    /// The pid of the daemon holding the state dir.
    fn daemon_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.state().join("daemon.lock")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }
}

/// Stops a daemon by pid when the test ends.
struct StopDaemon(Option<i32>);

impl Drop for StopDaemon {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

#[test]
fn a_host_with_a_stripped_environment_reaches_the_terminals_daemon() {
    let session = Session::new();
    // The person's terminal: a desktop session's environment.
    let terminal = vec![
        ("HOME", session.home.clone()),
        ("PATH", std::env::var_os("PATH").unwrap_or_default().into()),
        ("XDG_RUNTIME_DIR", session.runtime.clone()),
        ("TMPDIR", session.home.clone()),
        ("COMPUTER_TEST_RUN_USER_BASE", session.base.clone()),
    ];
    let mut daemon = session
        .computer(&terminal)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _stop = StopDaemon(Some(daemon.id() as i32));
    wait_for("the terminal's daemon", Duration::from_secs(30), || {
        if let Ok(Some(status)) = daemon.try_wait() {
            panic!("the daemon exited at start: {status}");
        }
        std::os::unix::net::UnixStream::connect(session.socket())
            .ok()
            .map(|_| ())
    });

    let host = session.stripped_env();
    let report = ts_report("stripped", &host);
    assert_eq!(
        report["env_keys"],
        json!([
            "COMPUTER_TEST_RUN_USER_BASE",
            "HOME",
            "LOGNAME",
            "PATH",
            "SHELL",
            "TERM",
            "USER"
        ]),
        "{report}"
    );
    assert_eq!(
        report["echo"]["structured"]["stdout"], "stripped host\n",
        "{report}"
    );

    // The call went to the terminal's daemon: its ledger has the receipt, its pid still holds
    // the state dir, and no second daemon was started.
    let receipt = report["echo"]["structured"]["receipt"].as_str().unwrap();
    let shown = session
        .computer(&terminal)
        .args(["receipts", "show", receipt])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let rows: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        rows[0]["body"]["caller"]["pid"], report["relay_pid"],
        "{rows}"
    );
    assert_eq!(session.daemon_pid(), Some(daemon.id() as i32));
    let log = std::fs::read_to_string(session.state().join("daemon.log")).unwrap_or_default();
    assert!(!log.contains("started a daemon"), "{log}");

    // The CLI with the same stripped environment finds it too.
    let doctor = session
        .computer(&host)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(doctor["socket"], json!(session.socket()), "{doctor}");
    assert_eq!(doctor["daemon_pid"], daemon.id(), "{doctor}");
}

#[test]
fn a_daemon_the_relay_starts_gets_the_sessions_bus_and_none_of_the_hosts_secrets() {
    let session = Session::new();
    // The session publishes its bus at RUNTIME/bus.
    let bus_path = session.runtime.join("bus");
    let _bus = std::os::unix::net::UnixListener::bind(&bus_path).unwrap();
    let mut host = session.stripped_env();
    // An agent token for the relay (minted before any daemon runs), and a secret of the host's.
    let minted = session
        .computer(&host)
        .args(["agents", "add", "host-agent"])
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_string();
    host.push(("COMPUTER_TOKEN", token.clone().into()));
    host.push(("OPENAI_API_KEY", "sk-host-secret-do-not-leak".into()));

    let mut relay = session
        .computer(&host)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stop = StopDaemon(None);
    let mut to_relay = relay.stdin.take().unwrap();
    let mut from_relay = BufReader::new(relay.stdout.take().unwrap());
    let mut exchange = |message: Value| -> Value {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        to_relay.write_all(&line).unwrap();
        let mut reply = String::new();
        from_relay.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|err| panic!("{reply:?}: {err}"))
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stripped-host", "version": "0"}}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "computer", "{init}");
    stop.0 = session.daemon_pid();
    assert!(
        stop.0.is_some(),
        "the relay started a daemon holding the state dir"
    );
    let listed = exchange(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let description = listed["result"]["tools"][0]["description"]
        .as_str()
        .unwrap()
        .to_string();
    let called = exchange(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "COMPUTER", "arguments": {"surface": "shell", "command": "run",
        "args": {"argv": ["sh", "-c", "echo ${OPENAI_API_KEY:-no key}"]}}}}),
    );
    assert_eq!(
        called["result"]["structuredContent"]["stdout"], "no key\n",
        "{called}"
    );
    drop(to_relay);
    relay.wait().unwrap();
    // The token reached the daemon the way it should: on the relay's first line, not in its
    // environment.
    let receipt = called["result"]["structuredContent"]["receipt"]
        .as_str()
        .unwrap();
    let shown = session
        .computer(&host)
        .args(["receipts", "show", receipt])
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(rows[0]["body"]["caller"]["agent"], "host-agent", "{rows}");

    let pid = stop.0.unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let has = |prefix: &str| environ.iter().any(|v| v.starts_with(prefix));
    assert!(!has("OPENAI_API_KEY="), "{environ:?}");
    assert!(!has("COMPUTER_TOKEN="), "{environ:?}");
    assert!(!environ.iter().any(|v| v.contains(&token)), "{environ:?}");
    assert!(!has("TERM="), "only what the daemon needs: {environ:?}");
    assert!(has("HOME=") && has("PATH=") && has("USER="), "{environ:?}");
    let bus = format!("DBUS_SESSION_BUS_ADDRESS=unix:path={}", bus_path.display());
    assert!(environ.contains(&bus), "{environ:?}");
    let runtime = format!("XDG_RUNTIME_DIR={}", session.runtime.display());
    assert!(environ.contains(&runtime), "{environ:?}");

    // No display could be found: the daemon's log, the tool description and doctor say why gui
    // is missing and what fixes it.
    let log = std::fs::read_to_string(session.state().join("daemon.log")).unwrap();
    assert!(
        log.contains("started a daemon") && log.contains("no display found"),
        "{log}"
    );
    assert!(!log.contains("sk-host-secret"), "{log}");
    assert!(
        description.contains("Unavailable here: gui"),
        "{description}"
    );
    let doctor = session.computer(&host).arg("doctor").output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor.contains("gui") && doctor.contains("DISPLAY"),
        "{doctor}"
    );
    assert!(doctor.contains("computer service install"), "{doctor}");
}

#[test]
fn a_second_daemon_on_the_same_state_dir_refuses_naming_the_first() {
    let daemon = Daemon::start();
    let other_socket = daemon.root.join("elsewhere/computer.sock");
    let out = daemon
        .command()
        .env("COMPUTER_SOCKET", &other_socket)
        .env(
            "COMPUTER_CONTROL_SOCKET",
            other_socket.with_file_name("control.sock"),
        )
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("pid {}", daemon.pid()))
            && stderr.contains(&daemon.socket.display().to_string())
            && stderr.contains("state dir"),
        "{stderr}"
    );
    assert!(!other_socket.exists(), "the second daemon bound nothing");
    // The first is unharmed.
    let after = daemon.call_json("shell", "run", r#"{"argv":["echo","first"]}"#);
    assert_eq!(after["stdout"], "first\n", "{after}");
}

#[test]
fn the_relay_doctor_and_approve_name_the_config_the_running_daemon_read_and_resources_list_empty() {
    let session = Session::new();
    let host = session.stripped_env();
    let mut relay = session
        .computer(&host)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stop = StopDaemon(None);
    let mut to_relay = relay.stdin.take().unwrap();
    let mut from_relay = BufReader::new(relay.stdout.take().unwrap());
    let mut exchange = |message: Value| -> Value {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        to_relay.write_all(&line).unwrap();
        let mut reply = String::new();
        from_relay.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|err| panic!("{reply:?}: {err}"))
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stripped-host", "version": "0"}}}),
    );
    stop.0 = session.daemon_pid();
    // The host passed no XDG_CONFIG_HOME: the daemon read the file under HOME, and says so.
    let config = session.home.join(".config/computer/config.toml");
    let facts = &init["result"]["_meta"]["computer/daemon"];
    assert_eq!(facts["config"], json!(config), "{init}");
    assert_eq!(facts["config_exists"], true, "{init}");
    assert_eq!(facts["pid"], json!(stop.0.unwrap()), "{init}");
    // Resources: none, listed as such (hosts that ask on every connection log no error).
    assert!(
        init["result"]["capabilities"]["resources"].is_object(),
        "{init}"
    );
    let resources = exchange(json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}));
    assert_eq!(resources["result"]["resources"], json!([]), "{resources}");
    let templates =
        exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/templates/list"}));
    assert_eq!(
        templates["result"]["resourceTemplates"],
        json!([]),
        "{templates}"
    );
    drop(to_relay);
    let out = relay.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("read its config from {}", config.display())),
        "{said}"
    );

    // A terminal whose XDG_CONFIG_HOME names another file: doctor names both, and which one the
    // running daemon read.
    let mut terminal = host.clone();
    let elsewhere = session.home.join("elsewhere");
    terminal.push(("XDG_CONFIG_HOME", elsewhere.clone()));
    let doctor = session.computer(&terminal).arg("doctor").output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor.contains(&format!("read its config from {}", config.display()))
            && doctor.contains(&format!(
                "not {} as this terminal's environment names it",
                elsewhere.join("computer/config.toml").display()
            )),
        "{doctor}"
    );
    let doctor = session
        .computer(&terminal)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(doctor["config"]["daemon_read"], json!(config), "{doctor}");
    // `computer approve` says it first: its answers are decided under that file.
    let approve = session
        .computer(&terminal)
        .arg("approve")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let approve = String::from_utf8_lossy(&approve.stdout);
    assert_eq!(
        approve.lines().next(),
        Some(
            format!(
                "the running daemon (pid {}) read its config from {}",
                stop.0.unwrap(),
                config.display()
            )
            .as_str()
        ),
        "{approve}"
    );
}
