//! The `computer` command line: `serve`, `call`, `tools`, `receipts`, `mcp`, `doctor`.
//!
//! Every subcommand that acts goes through the daemon's socket; only reading receipts and probing
//! surfaces happen locally.

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
}

pub fn main() -> ExitCode {
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

fn tools(format: &str) -> u8 {
    let config = match load_config() {
        Ok(config) => config,
        Err(status) => return status,
    };
    let registry = computer_surfaces::Registry::for_this_platform(&config.surface_limits());
    let tool = crate::schema::tool(&registry);
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::schema::render(&tool, format)).unwrap_or_default()
    );
    exit::OK
}
