//! The `computer` command line: `serve`, `call`, `tools`, `receipts`, `mcp`, `doctor`.
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
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon in the foreground.
    Serve,
    /// Make one COMPUTER call through the daemon, e.g. `computer call shell run -- ls -la`.
    Call(call::CallArgs),
    /// Print the tool definition as an ecosystem expects it.
    Tools {
        #[arg(long, default_value = "mcp", value_parser = ["mcp", "openai", "anthropic"])]
        format: String,
    },
    /// Read and check the receipts ledger.
    #[command(subcommand)]
    Receipts(receipts::ReceiptsCommand),
    /// Serve MCP on stdio, relaying to the daemon (started in the background if none runs).
    Mcp {
        /// Fail instead of starting a daemon when none is running.
        #[arg(long)]
        no_spawn: bool,
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
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Show the decision for a call (a COMPUTER call as JSON) and the rule behind it.
    Explain {
        #[arg(long, value_name = "JSON")]
        args: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the config file.
    Check,
}

pub fn main() -> ExitCode {
    // Before anything else (no thread, no argument parsing): this binary also serves as the
    // containment zygote that the daemon starts for its runs.
    computer_surfaces::contain::serve_if_zygote();
    let cli = Cli::parse();
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
            Command::Tools { format } => tools(&format),
            Command::Receipts(command) => receipts::run(command),
            Command::Mcp { no_spawn } => bridge::run(no_spawn).await,
            Command::Doctor { json } => doctor::run(json).await,
            Command::Agents(command) => agents::run(command),
            Command::Approve { window: true } => approve::open_window(),
            Command::Approve { window: false } => approve::approve().await,
            Command::Approvals(command) => approve::approvals(command).await,
            Command::Policy(PolicyCommand::Explain { args }) => explain(&args),
            Command::Config(ConfigCommand::Check) => config_check(),
        }
    });
    // Stdio readers may still block on a terminal; they must not keep the process alive.
    runtime.shutdown_background();
    ExitCode::from(status)
}

fn init_logging(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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
    match crate::config::Config::load(&path) {
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

/// Decides a call the way the daemon would (same rules, defaults and protected paths) and says
/// which rule decided and why, without running anything.
fn explain(call_json: &str) -> u8 {
    let config = match load_config() {
        Ok(config) => config,
        Err(status) => return status,
    };
    let call: computer_ipc::ComputerCall = match serde_json::from_str(call_json) {
        Ok(call) => call,
        Err(err) => {
            eprintln!("error: --args is not a COMPUTER call: {err}");
            return exit::USAGE;
        }
    };
    let registry = computer_surfaces::Registry::for_this_platform(&config.surface_limits());
    let Some(surface) = registry.get(call.surface) else {
        eprintln!("error: the {} surface is not in this build", call.surface);
        return exit::USAGE;
    };
    let action = match surface.prepare(&call.command, &call.args, &call.complications) {
        Ok(action) => action,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::USAGE;
        }
    };
    // The daemon's own inputs: its protected paths (both spellings), its rules and loader
    // variables, its facts and its decision code.
    let protected = crate::cli::serve::protected_paths(
        &computer_ipc::paths::config_path(),
        &computer_ipc::paths::state_dir(),
    );
    let policy = crate::policy::RulePolicy::from_config(&config, &protected);
    let caller = crate::policy::Caller {
        uid: 0,
        pid: None,
        agent: "default".into(),
        surfaces: None,
    };
    let described = action.describe();
    let facts = action.facts();
    let decision = crate::policy::Policy::decide(
        &policy,
        &crate::policy::PolicyInput::of(&caller, &call, &described, action.risk(), &facts),
    );
    let rule_text = decision
        .rule()
        .strip_prefix("rules[")
        .and_then(|i| i.strip_suffix(']'))
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| config.rules.get(i))
        .map(|rule| format!("{rule:?}"));
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "action": described,
            "facts": facts,
            "risk": action.risk(),
            "decision": decision,
            "rule": rule_text,
        }))
        .unwrap_or_default()
    );
    exit::OK
}

fn tools(format: &str) -> u8 {
    let config = match load_config() {
        Ok(config) => config,
        Err(status) => return status,
    };
    let registry = computer_surfaces::Registry::for_this_platform(&config.surface_limits());
    let tool = crate::schema::tool(&registry, None);
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::schema::render(&tool, format)).unwrap_or_default()
    );
    exit::OK
}
