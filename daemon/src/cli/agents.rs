//! `computer agents add|list|remove`: a person's tool for minting and revoking agent tokens.
//! Refused when run by a process that descends from the running daemon (that is, by an agent
//! through a surface).

use computer_ipc::{SurfaceName, paths};
use serde_json::json;

use super::exit;
use crate::guard::agents::{Agent, AgentStore, check_name, mint_token, store_path, token_digest};

#[derive(Debug, clap::Subcommand)]
pub enum AgentsCommand {
    /// Mint a token for a new agent; it is printed once. `--surfaces shell,gui` narrows its scope.
    Add {
        name: String,
        #[arg(long, value_delimiter = ',')]
        surfaces: Option<Vec<String>>,
    },
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke an agent's token.
    Remove { name: String },
}

/// Refuses when this process runs under the daemon named by the socket's lock file.
fn refuse_if_under_daemon() -> Result<(), String> {
    let lock = crate::server::lock_path(&paths::socket_path());
    let Ok(text) = std::fs::read_to_string(&lock) else {
        return Ok(());
    };
    let Ok(daemon_pid) = text.trim().parse::<i32>() else {
        return Ok(());
    };
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    match crate::guard::ancestry::descends_from(me, daemon_pid) {
        Ok(false) => Ok(()),
        Ok(true) => Err("agents are managed by a person, not through the daemon's surfaces".into()),
        Err(err) => Err(format!("cannot check who is asking: {err}")),
    }
}

pub fn run(command: AgentsCommand) -> u8 {
    if let Err(message) = refuse_if_under_daemon() {
        eprintln!("error: {message}");
        return exit::FAILED;
    }
    let state = paths::state_dir();
    if let Err(err) = paths::ensure_private_dir(&state) {
        eprintln!("error: {err}");
        return exit::FAILED;
    }
    let path = store_path(&state);
    let mut store = match AgentStore::load(&path) {
        Ok(store) => store,
        Err(message) => {
            eprintln!("error: {message}");
            return exit::FAILED;
        }
    };
    match command {
        AgentsCommand::Add { name, surfaces } => {
            if let Err(message) = check_name(&name) {
                eprintln!("error: {message}");
                return exit::USAGE;
            }
            if store.agents.iter().any(|a| a.name == name) {
                eprintln!(
                    "error: an agent named `{name}` exists; remove it first to mint a new token"
                );
                return exit::USAGE;
            }
            let surfaces = match surfaces {
                None => None,
                Some(names) => {
                    let mut parsed = Vec::new();
                    for surface in names {
                        match SurfaceName::parse(&surface) {
                            Some(s) => parsed.push(s),
                            None => {
                                let valid: Vec<&str> =
                                    SurfaceName::ALL.iter().map(|s| s.as_str()).collect();
                                eprintln!(
                                    "error: unknown surface `{surface}`; valid: {}",
                                    valid.join(", ")
                                );
                                return exit::USAGE;
                            }
                        }
                    }
                    Some(parsed)
                }
            };
            let token = match mint_token() {
                Ok(token) => token,
                Err(message) => {
                    eprintln!("error: {message}");
                    return exit::FAILED;
                }
            };
            store.agents.push(Agent {
                name: name.clone(),
                token_sha256: token_digest(&token),
                surfaces,
                created_ms: crate::guard::approval::now_ms(),
            });
            if let Err(message) = store.save(&path) {
                eprintln!("error: {message}");
                return exit::FAILED;
            }
            eprintln!("agent `{name}` added; its token (shown once, give it as COMPUTER_TOKEN):");
            println!("{token}");
            exit::OK
        }
        AgentsCommand::List { json } => {
            for agent in &store.agents {
                let scope = agent
                    .surfaces
                    .as_ref()
                    .map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","))
                    .unwrap_or_else(|| "all".into());
                if json {
                    println!(
                        "{}",
                        json!({"name": agent.name, "surfaces": agent.surfaces, "created_ms": agent.created_ms})
                    );
                } else {
                    println!("{:<24} surfaces: {scope}", agent.name);
                }
            }
            exit::OK
        }
        AgentsCommand::Remove { name } => {
            let before = store.agents.len();
            store.agents.retain(|a| a.name != name);
            if store.agents.len() == before {
                eprintln!("error: no agent named `{name}`");
                return exit::FAILED;
            }
            if let Err(message) = store.save(&path) {
                eprintln!("error: {message}");
                return exit::FAILED;
            }
            println!("agent `{name}` removed; its token no longer works");
            exit::OK
        }
    }
}
