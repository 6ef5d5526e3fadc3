//! `computer serve`: the daemon in the foreground, with embedded defaults when no config exists.

use std::os::unix::fs::DirBuilderExt;

use anyhow::Context;
use computer_ipc::paths;
use computer_surfaces::Registry;

use super::exit;
use crate::gateway::Gateway;
use crate::policy::AllowAll;
use crate::receipts::Ledger;

pub async fn run() -> u8 {
    match serve().await {
        Ok(()) => exit::OK,
        Err(err) => {
            eprintln!("error: {err:#}");
            exit::UNAVAILABLE
        }
    }
}

async fn serve() -> anyhow::Result<()> {
    let config_path = paths::config_path();
    let config = crate::config::Config::load(&config_path)?;
    let socket_path = paths::socket_path();
    let state_dir = paths::state_dir();
    paths::ensure_private_dir(&state_dir)?;
    let artifact_dir = state_dir.join("artifacts");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&artifact_dir)
        .with_context(|| format!("cannot create {}", artifact_dir.display()))?;

    // Bind first: a second daemon must refuse before touching the ledger.
    let socket = crate::server::bind(&socket_path)?;
    let ledger = Ledger::open(&state_dir.join("receipts.sqlite"))?;
    let interrupted = ledger.close_interrupted().await?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "closed calls left unfinished by a previous daemon"
        );
    }
    let registry = Registry::for_this_platform(&config.surface_limits());
    let gateway = Gateway::new(registry, Box::new(AllowAll), ledger, artifact_dir);
    tracing::info!(
        config = %config_path.display(),
        state = %state_dir.display(),
        "computer {} starting",
        env!("CARGO_PKG_VERSION")
    );
    crate::server::run(socket, gateway, config.server.clone(), shutdown_signal()).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::error!("cannot install signal handlers; stop the daemon with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}
