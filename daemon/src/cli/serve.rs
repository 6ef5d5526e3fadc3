//! `computer serve`: the daemon in the foreground, with embedded defaults when no config exists.

use std::os::unix::fs::DirBuilderExt;

use anyhow::Context;
use computer_ipc::paths;
use computer_surfaces::{ArtifactQuota, Registry};

use super::exit;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::approval::Approvals;
use crate::config::Config;
use crate::gateway::Gateway;
use crate::policy::RulePolicy;
use crate::ratelimit::RateLimiter;
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

    // Bind first: a second daemon must refuse before touching the ledger. The control socket
    // comes right after, under the same lock.
    let socket = crate::server::bind(&socket_path)?;
    let control = crate::control::bind(&paths::control_socket_path())?;
    let ledger = Ledger::open(&state_dir.join("receipts.sqlite"))?;
    let interrupted = ledger.close_interrupted().await?;
    let receipts = ledger.clone();
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "closed calls left unfinished by a previous daemon"
        );
    }
    let quota = ArtifactQuota::counting(&artifact_dir, config.artifacts.quota_bytes)
        .with_context(|| format!("cannot count the artifacts in {}", artifact_dir.display()))?;
    let registry =
        Registry::for_this_platform(&config.surface_limits()).with_artifact_quota(Arc::new(quota));
    let protected = protected_paths(&config_path, &state_dir);
    let approvals = Arc::new(Approvals::new(
        config.approval.timeout.0,
        config.approval.session_idle.0,
        config.approval.session_max.0,
    ));
    let gateway = Gateway::new(
        registry,
        Arc::new(rule_policy(&config, &protected)),
        approvals.clone(),
        rate_limiter(&config),
        ledger,
        artifact_dir,
    );
    tokio::spawn(control.run(approvals));
    // Adopting what shell runs detach keeps it recognisable as the daemon's descendant.
    match crate::reaper::become_subreaper() {
        Ok(()) => {
            tokio::spawn(crate::reaper::reap_adopted_orphans());
        }
        Err(err) => tracing::warn!(
            error = %err,
            "not a child subreaper: descendants a run detaches are not recognised as the daemon's"
        ),
    }
    tokio::spawn(reload_on_sighup(
        gateway.clone(),
        config_path.clone(),
        protected,
    ));
    tracing::info!(
        config = %config_path.display(),
        state = %state_dir.display(),
        "computer {} starting",
        env!("CARGO_PKG_VERSION")
    );
    let served =
        crate::server::run(socket, gateway, config.server.clone(), shutdown_signal()).await;
    receipts
        .close()
        .await
        .context("closing the receipts ledger")?;
    served
}

/// What no shell run may name: the daemon's own config and state (in the spelling given and the
/// canonical one).
fn protected_paths(config_path: &Path, state_dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for path in [config_path, state_dir] {
        paths.push(path.to_path_buf());
        if let Ok(canonical) = path.canonicalize()
            && canonical != path
        {
            paths.push(canonical);
        }
    }
    paths
}

fn rule_policy(config: &Config, protected: &[PathBuf]) -> RulePolicy {
    RulePolicy {
        defaults: config.defaults.clone(),
        rules: config.rules.clone(),
        protected: protected.to_vec(),
    }
}

fn rate_limiter(config: &Config) -> RateLimiter {
    RateLimiter::new(config.limits.calls, config.limits.window.0)
}

/// SIGHUP re-reads the config: new rules, defaults and limits apply to calls decided from then
/// on. A config with errors is refused (logged) and the rules in force stay.
async fn reload_on_sighup(gateway: Arc<Gateway>, config_path: PathBuf, protected: Vec<PathBuf>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot watch SIGHUP; config changes need a restart");
        return;
    };
    while hangup.recv().await.is_some() {
        match Config::load(&config_path) {
            Ok(config) => {
                gateway.set_policy(
                    Arc::new(rule_policy(&config, &protected)),
                    rate_limiter(&config),
                );
                tracing::info!(config = %config_path.display(), rules = config.rules.len(), "SIGHUP: config reloaded");
            }
            Err(err) => {
                tracing::error!(error = %err, "SIGHUP: config refused; the rules in force stay")
            }
        }
    }
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
