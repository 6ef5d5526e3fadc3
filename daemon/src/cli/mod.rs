//! The `computer` command line: `serve`, `call`, `tools`, `receipts`, `mcp`, `doctor`, `service`...
//!
//! Every subcommand that acts goes through the daemon's socket; only reading receipts and probing
//! surfaces happen locally.

mod agents;
/// Public for the desktop approval window, which shows requests in the same words.
pub mod approve;
mod bridge;
mod call;
mod doctor;
mod receipts;
mod secrets;
mod serve;
mod service;

use std::process::ExitCode;

use std::io::IsTerminal;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Exit statuses of the `computer` command.
pub mod exit {
    pub const OK: u8 = 0;
    /// The action ran and failed, or a check did not pass.
    pub const FAILED: u8 = 1;
    /// The request was malformed (bad flags, bad JSON, an invalid call).
    pub const USAGE: u8 = 2;
    /// The daemon could not be reached or could not start.
    pub const UNAVAILABLE: u8 = 69;
}

#[derive(Debug, Parser)]
#[command(
    name = "computer",
    version,
    about = "Lets agents act on this desktop through one receipted tool"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The clap definition of the whole command line (for the generated CLI reference).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon in the foreground.
    Serve,
    /// Make one COMPUTER call through the daemon, e.g. `computer call shell run -- ls -la`.
    Call(call::CallArgs),
    /// Print the tool definition as an ecosystem expects it; inside a run given tools, the
    /// commands the run may call (`--format json`: with their args' schemas).
    Tools {
        #[arg(long, default_value = "mcp", value_parser = ["mcp", "openai", "anthropic", "json"])]
        format: String,
    },
    /// Read and check the receipts ledger.
    #[command(subcommand)]
    Receipts(receipts::ReceiptsCommand),
    /// Write the book's generated pages (tool, configuration and command-line references,
    /// llms.txt) under DIR, e.g. `computer docs --out docs/src`.
    #[command(hide = true)]
    Docs {
        #[arg(long, value_name = "DIR")]
        out: std::path::PathBuf,
    },
    /// Serve MCP on stdio, relaying to the daemon (started in the background if none runs).
    Mcp {
        /// Fail instead of starting a daemon when none is running.
        #[arg(long)]
        no_spawn: bool,
        /// Serve the tool read-only: only the commands that observe are offered, annotated
        /// readOnlyHint, and the daemon refuses anything that acts on this connection (for
        /// hosts that run read-only tools without asking: Codex's writes mode, plan modes).
        #[arg(long)]
        observe_only: bool,
    },
    /// Say which surfaces work here, and for those that do not, why and how to fix it.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Mint, list and revoke agent tokens.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Answer pending approvals interactively in this terminal (or, with --window, in a window).
    Approve {
        /// Open the desktop approval window (`computer-approval-window` beside this program).
        #[arg(long)]
        window: bool,
    },
    /// List, allow or deny pending approvals (for scripts).
    #[command(subcommand)]
    Approvals(approve::ApprovalsCommand),
    /// Explain which rule decides a call: `computer policy explain --args JSON`.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Check the config file and report the first error with its line.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Put a value into the keychain for agents to use by reference.
    #[command(subcommand)]
    Secrets(secrets::SecretsCommand),
    /// Install, remove or inspect the daemon as a user service of the graphical session.
    #[command(subcommand)]
    Service(service::ServiceCommand),
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Show what the daemon would do with a call (a COMPUTER call as JSON): the error it would
    /// refuse it with, or the decision and the rule behind it.
    Explain {
        #[arg(long, value_name = "JSON")]
        args: String,
        /// The agent the call comes from (its scope applies); `default` when not given.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the config file.
    Check,
}

/// An example for every subcommand's `--help`, keyed by its path; a test checks none is
/// missing.
const EXAMPLES: &[(&str, &str)] = &[
    ("serve", "computer serve"),
    (
        "call",
        "computer call shell run -- ls -la\n  \
         computer call gui screenshot --json\n  \
         computer call ax find --args '{\"app\": \"gedit\", \"selector\": \"button\"}'",
    ),
    ("tools", "computer tools --format anthropic"),
    ("receipts", "computer receipts list --since 10m"),
    (
        "receipts list",
        "computer receipts list --since 2h --surface shell\n  computer receipts list --json | head",
    ),
    (
        "receipts show",
        "computer receipts show 0193a4c2-7b1e-7f00-8a3d-5c2e1f0b9d41",
    ),
    ("receipts verify", "computer receipts verify --json"),
    (
        "receipts export",
        "computer receipts export > receipts.jsonl",
    ),
    (
        "mcp",
        "computer mcp   # as the command of an MCP client's server entry",
    ),
    ("doctor", "computer doctor --json"),
    (
        "secrets",
        "computer secrets set keychain://github.com/deploy-bot",
    ),
    (
        "secrets set",
        "computer secrets set keychain://github.com/deploy-bot   # asks, without echo\n  \
         printf %s \"$TOKEN\" | computer secrets set keychain://ci/token --label 'CI token'",
    ),
    ("agents", "computer agents add ci-bot --surfaces shell"),
    (
        "agents add",
        "computer agents add ci-bot --surfaces shell,ax",
    ),
    ("agents list", "computer agents list"),
    ("agents remove", "computer agents remove ci-bot"),
    ("approve", "computer approve\n  computer approve --window"),
    ("approvals", "computer approvals list --json"),
    ("approvals list", "computer approvals list --json"),
    (
        "approvals allow",
        "computer approvals allow 12 --expect 0193a4c2-7b1e-7f00-8a3d-5c2e1f0b9d41",
    ),
    (
        "approvals deny",
        "computer approvals deny 12 --expect 0193a4c2-7b1e-7f00-8a3d-5c2e1f0b9d41",
    ),
    (
        "policy",
        "computer policy explain --args '{\"surface\": \"shell\", \"command\": \"run\", \"args\": {\"argv\": [\"rm\", \"-rf\", \"build\"]}}'",
    ),
    (
        "policy explain",
        "computer policy explain --args '{\"surface\": \"shell\", \"command\": \"run\", \"args\": {\"script\": \"git status\"}}'",
    ),
    ("config", "computer config check"),
    ("config check", "computer config check"),
    ("service", "computer service install"),
];

/// The command line with each subcommand's example in its `--help` (those that carry their own
/// keep it).
fn command_with_examples() -> clap::Command {
    fn add(command: clap::Command, path: &str) -> clap::Command {
        let mut command = command;
        if command.get_after_help().is_none()
            && let Some((_, example)) = EXAMPLES.iter().find(|(key, _)| *key == path)
        {
            let label = if example.contains('\n') {
                "Examples"
            } else {
                "Example"
            };
            command = command.after_help(format!("{label}:\n  {example}"));
        }
        let names: Vec<String> = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_string())
            .collect();
        for name in names {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path} {name}")
            };
            command = command.mut_subcommand(&name, |sub| add(sub, &child));
        }
        command
    }
    add(Cli::command(), "")
}

pub fn main() -> ExitCode {
    // Before anything else (no thread, no argument parsing): this binary also serves as the
    // containment zygote that the daemon starts for its runs.
    computer_surfaces::kit::contain::serve_if_zygote();
    let cli = match Cli::from_arg_matches(&command_with_examples().get_matches()) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    // `call` talks to the daemon first and resets this once it has hung up; the daemon and the
    // relay keep ignoring SIGPIPE: a peer that hangs up is an error they handle, not a reason
    // to die.
    if !matches!(
        cli.command,
        Command::Serve | Command::Mcp { .. } | Command::Call(_)
    ) {
        end_quietly_on_closed_pipe();
    }
    // The daemon reports its own lifecycle; client commands stay quiet unless something is wrong.
    init_logging(match cli.command {
        Command::Serve => "warn,computer_daemon=info,computer_surfaces=info",
        _ => "error",
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let status = runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve::run().await,
            Command::Call(args) => call::run(args).await,
            Command::Tools { format } => match call::tools_in_run(&format) {
                Some(status) => status,
                None => tools(&format),
            },
            Command::Receipts(command) => receipts::run(command),
            Command::Mcp {
                no_spawn,
                observe_only,
            } => bridge::run(no_spawn, observe_only).await,
            Command::Doctor { json } => doctor::run(json).await,
            Command::Docs { out } => match crate::docs::write(&out) {
                Ok(()) => exit::OK,
                Err(err) => {
                    eprintln!(
                        "error: cannot write the pages under {}: {err}",
                        out.display()
                    );
                    exit::FAILED
                }
            },
            Command::Agents(command) => agents::run(command),
            Command::Secrets(command) => secrets::run(command).await,
            Command::Approve { window: true } => approve::open_window(),
            Command::Approve { window: false } => approve::approve().await,
            Command::Approvals(command) => approve::approvals(command).await,
            Command::Policy(PolicyCommand::Explain { args, agent }) => {
                explain(&args, agent.as_deref())
            }
            Command::Config(ConfigCommand::Check) => config_check(),
            Command::Service(command) => service::run(command).await,
        }
    });
    // Stdio readers may still block on a terminal; they must not keep the process alive.
    runtime.shutdown_background();
    ExitCode::from(status)
}

/// From now on, printing to a pipe whose reader left (`| head`) ends the process quietly, as
/// Unix tools do, instead of a "Broken pipe" panic. Only for a process that no longer writes to
/// the daemon's sockets: there a hang-up must stay an error to report.
pub(crate) fn end_quietly_on_closed_pipe() {
    // SAFETY: restores a signal's default disposition; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn init_logging(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Log lines are masked with the secrets of the calls running as they are written.
        .with_writer(crate::record::secrets::MaskedLog)
        // Colour codes only for a person's terminal: a log file or journal gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Loads the config for commands that need it, printing a clear error on failure.
fn load_config() -> Result<crate::config::Config, u8> {
    let path = computer_ipc::paths::config_path();
    crate::config::Config::load(&path).map_err(|err| {
        eprintln!("error: {err}");
        exit::USAGE
    })
}

fn config_check() -> u8 {
    let path = computer_ipc::paths::config_path();
    // Each surface checks its own section.
    let checked = crate::config::Config::load(&path).and_then(|config| {
        config
            .registry(&path.display().to_string(), &config.surface_limits())
            .map(|_| config)
    });
    match checked {
        Ok(config) if path.exists() => {
            println!("{}: valid ({} rules)", path.display(), config.rules.len());
            exit::OK
        }
        Ok(_) => {
            println!("{}: absent; the embedded defaults apply", path.display());
            exit::OK
        }
        Err(err) => {
            eprintln!("error: {err}");
            exit::FAILED
        }
    }
}

/// Takes a call through the daemon's own decide stage (`stages.rs`: decode, scope, surface,
/// complications, the surface's checks, the caller check, facts, policy) with the daemon's rules
/// and protected paths, for the named agent, and says what the daemon would do: the error it
/// would refuse the call with, or the decision and the rule behind it. Nothing runs. What it
/// cannot know is the daemon's live state: its sessions, jobs, rate limit and grants.
fn explain(call_json: &str, agent: Option<&str>) -> u8 {
    let config = match load_config() {
        Ok(config) => config,
        Err(status) => return status,
    };
    let raw: serde_json::Value = match serde_json::from_str(call_json) {
        Ok(raw) => raw,
        Err(err) => {
            eprintln!("error: --args is not JSON: {err}");
            return exit::USAGE;
        }
    };
    let caller = match explained_caller(agent) {
        Ok(caller) => caller,
        Err(message) => {
            eprintln!("error: {message}");
            return exit::USAGE;
        }
    };
    let registry = match config.registry("config", &config.surface_limits()) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::USAGE;
        }
    };
    // The daemon's own inputs: its protected paths (both spellings), its rules and loader
    // variables.
    let protected = crate::cli::serve::protected_paths(
        &computer_ipc::paths::config_path(),
        &computer_ipc::paths::state_dir(),
    );
    let policy = config.rule_policy(&protected);
    let deciding = crate::call::stages::Deciding {
        registry: &registry,
        policy: &policy,
        desktops: None,
        tools: std::sync::Arc::new(crate::call::tools::ToolRules {
            config: config.tools.clone(),
            served: crate::call::own::served_commands(),
        }),
    };
    let print = |value: serde_json::Value| {
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    };
    let decided = deciding.decode(&raw).and_then(|call| {
        let surface = deciding.reach(&caller, &call)?;
        if crate::call::own::is_job_call(&call) {
            return Ok(None);
        }
        crate::call::jobs::detach_honoured(&call)?;
        deciding.judge(&caller, surface, &call, &raw).map(Some)
    });
    let decided = match decided {
        Ok(Some(decided)) => decided,
        Ok(None) => {
            print(serde_json::json!({
                "agent": caller.agent,
                "action": "job",
                "risk": computer_surfaces::Risk::Observe,
                "decision": crate::call::jobs::decision(),
            }));
            return exit::OK;
        }
        Err(error) => {
            print(serde_json::json!({"agent": caller.agent, "error": error}));
            return exit::FAILED;
        }
    };
    let rule_text = decided
        .decision
        .rule()
        .strip_prefix("rules[")
        .and_then(|i| i.strip_suffix(']'))
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| config.rules.get(i))
        .map(|rule| format!("{rule:?}"));
    print(serde_json::json!({
        "agent": caller.agent,
        "action": decided.described,
        "facts": decided.facts,
        "risk": decided.action.risk(),
        "decision": decided.decision,
        "rule": rule_text,
    }));
    exit::OK
}

/// The caller `policy explain` decides for: the named agent with its scope, as its token would
/// make it, or the `default` agent with every surface.
fn explained_caller(agent: Option<&str>) -> Result<crate::guard::policy::Caller, String> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let caller = |agent: &str, surfaces| crate::guard::policy::Caller {
        uid,
        pid: None,
        agent: agent.to_string(),
        surfaces,
        observe_only: false,
    };
    let Some(name) = agent.filter(|name| *name != "default") else {
        return Ok(caller("default", None));
    };
    let path = crate::guard::agents::store_path(&computer_ipc::paths::state_dir());
    let store = crate::guard::agents::AgentStore::load(&path)?;
    match store.agents.iter().find(|agent| agent.name == name) {
        Some(agent) => Ok(caller(&agent.name, agent.surfaces.clone())),
        None => {
            let names: Vec<&str> = store.agents.iter().map(|a| a.name.as_str()).collect();
            Err(format!(
                "no agent `{name}`; agents: default{}{}",
                if names.is_empty() { "" } else { ", " },
                names.join(", ")
            ))
        }
    }
}

fn tools(format: &str) -> u8 {
    let config = match load_config() {
        Ok(config) => config,
        Err(status) => return status,
    };
    let registry = match config.registry("config", &config.surface_limits()) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::USAGE;
        }
    };
    let tool = crate::call::schema::tool(&registry, None);
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::call::schema::render(&tool, format))
            .unwrap_or_default()
    );
    exit::OK
}
