//! `computer serve`: the daemon in the foreground, with embedded defaults when no config exists.

use std::os::unix::fs::DirBuilderExt;

use anyhow::Context;
use computer_ipc::paths;
use computer_surfaces::ArtifactQuota;

use super::exit;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::call::gateway::Gateway;
use crate::config::{Config, ContainmentMode};
use crate::guard::approval::Approvals;
use crate::guard::policy::RulePolicy;
use crate::guard::ratelimit::RateLimiter;
use crate::record::receipts::{Ledger, MAX_BATCH};
use computer_surfaces::kit::contain::{Containment, ContainmentConfig};

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
    forbid_inspection();
    return_large_buffers();
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

    // Lock the state dir, then bind: a second daemon must refuse before touching the ledger,
    // whichever socket it was pointed at. The control socket comes right after, under the lock.
    let _state_lock = lock_state_dir(&state_dir, &socket_path)?;
    let socket = crate::server::bind(&socket_path)?;
    let control = crate::server::control::bind(&paths::control_socket_path())?;
    // Under the lock, before containment is set up (which shows it to runs, read-only).
    crate::call::tools::prepare_dir(&state_dir).with_context(|| {
        format!(
            "cannot write the tools for runs into {}",
            state_dir
                .join(crate::call::tools::RUN_TOOLS_DIR_NAME)
                .display()
        )
    })?;
    // Opened and checked on its writer thread while the surfaces are built; nothing is
    // accepted before it holds.
    let opening = Ledger::start(&state_dir.join("receipts.sqlite"), MAX_BATCH);
    if !config_path.exists()
        && let Some(dir) = config_path.parent()
    {
        // Created (empty) so it can be hidden from runs: none can then write a config there.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let quota = ArtifactQuota::counting(&artifact_dir, config.artifacts.quota_bytes)
        .with_context(|| format!("cannot count the artifacts in {}", artifact_dir.display()))?;
    let protected = protected_paths(&config_path, &state_dir);
    let mut limits = config.surface_limits();
    // Proven in the background: the socket answers at once, runs wait for the proof.
    let contained = Arc::new(Containment::proving(&containment_config(
        &config,
        &config_path,
        &state_dir,
    )));
    limits.shell.containment = contained.clone();
    tokio::task::spawn_blocking(move || {
        let status = contained.status();
        if status.allows_runs() {
            tracing::info!(containment = status.mechanism, detail = %status.detail, "runs are contained");
        } else {
            tracing::error!(containment = status.mechanism, detail = %status.detail, "runs are refused");
        }
    });
    let registry = config
        .registry(&config_path.display().to_string(), &limits)?
        .with_artifact_quota(Arc::new(quota));
    let approvals = Arc::new(Approvals::new(
        config.approval.timeout.0,
        config.approval.session_idle.0,
        config.approval.session_max.0,
    ));
    // Request ids continue across restarts, so a stale `approvals allow ID` meets no other call.
    approvals.keep_ids_in(&state_dir.join("approval-ids"));
    let (ledger, _) = opening.opened().await?;
    let receipts = ledger.clone();
    crate::record::export::start(&config.export, ledger.path().to_path_buf(), &state_dir);
    let gateway = Gateway::new(
        registry,
        Arc::new(rule_policy(&config, &protected)),
        approvals.clone(),
        rate_limiter(&config),
        ledger,
        artifact_dir,
    );
    take_sections(&gateway, &config, &config_path)?;
    let facts = gateway.clone();
    tokio::spawn(control.run(approvals, Arc::new(move || facts.daemon_facts())));
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

/// The state dir's lock file; it holds the owning daemon's pid and socket.
const STATE_LOCK_FILE: &str = "daemon.lock";

/// Takes the state dir for this daemon until the returned file is dropped (the process exits).
/// Two daemons on one ledger would refuse each other's writes ("database is locked") and split
/// approvals between two control sockets, so the second refuses, naming the first.
fn lock_state_dir(state_dir: &Path, socket: &Path) -> anyhow::Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    let lock_path = state_dir.join(STATE_LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the call.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
        let mut lines = holder.lines();
        let pid = lines.next().unwrap_or("").trim();
        let their_socket = lines.next().unwrap_or("").trim();
        let who = if pid.is_empty() {
            String::new()
        } else {
            format!(" (pid {pid})")
        };
        let serving = if their_socket.is_empty() {
            String::new()
        } else {
            format!(" {their_socket}")
        };
        anyhow::bail!(
            "another computer daemon{who} is already serving{serving} with the state dir {}; two daemons \
             cannot share one ledger: use that one (`computer doctor` says where it is), stop it \
             first, or set COMPUTER_STATE_DIR to use another state dir",
            state_dir.display(),
        );
    }
    lock.set_len(0)
        .context("cannot truncate the state lock file")?;
    (&lock)
        .write_all(format!("{}\n{}\n", std::process::id(), socket.display()).as_bytes())
        .context("cannot write the state lock file")?;
    Ok(lock)
}

/// Has the allocator give large buffers back when they are freed. A screenshot's frame, scaled
/// copy and PNG are megabytes each: glibc would otherwise raise its mmap threshold after the
/// first one is freed and serve the next from heaps it keeps, one per thread that touched them,
/// so a burst of screenshots would stay resident long after. Fixing the threshold maps every
/// buffer over 256 KiB on its own (unmapped on free), and two arenas bound what small
/// allocations spread over.
fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before the daemon's threads exist
    // beyond the runtime's own, which have not allocated large buffers yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Makes the daemon not dumpable: no same-user process (a run that escaped its containment, or
/// anything else the person runs) can read its `/proc/PID/environ`, `mem` or `fd`, or ptrace it.
fn forbid_inspection() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_DUMPABLE takes an integer flag and touches no memory of ours.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "cannot make the daemon undumpable");
        }
    }
}

/// The containment every run gets, proven now (for `computer doctor`).
pub(crate) fn containment(config: &Config, config_path: &Path, state_dir: &Path) -> Containment {
    Containment::new(&containment_config(config, config_path, state_dir))
}

/// What containment every run gets: it hides the daemon's config, state and sockets.
fn containment_config(config: &Config, config_path: &Path, state_dir: &Path) -> ContainmentConfig {
    // A config file not written yet is hidden by hiding its directory, so no run can create it.
    let config_hidden = match config_path.parent() {
        Some(dir) if !config_path.exists() => dir.to_path_buf(),
        _ => config_path.to_path_buf(),
    };
    let mut hidden = vec![config_hidden, state_dir.to_path_buf()];
    for socket in [paths::socket_path(), paths::control_socket_path()] {
        if let Some(dir) = socket.parent() {
            hidden.push(dir.to_path_buf());
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    ContainmentConfig {
        enabled: config.containment.mode == ContainmentMode::On,
        hidden,
        shown: vec![state_dir.join(crate::call::tools::RUN_TOOLS_DIR_NAME)],
        read_only: computer_surfaces::kit::contain::login_files(
            home.as_deref(),
            &config.containment.login_files_writable,
        ),
    }
}

/// What no shell run may name: the daemon's own config and state (in the spelling given and the
/// canonical one).
pub(crate) fn protected_paths(config_path: &Path, state_dir: &Path) -> Vec<PathBuf> {
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
    config.rule_policy(protected)
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
                gateway.set_step_limits(config.limits.steps());
                if let Err(err) = gateway.set_tools(config.tools.clone()) {
                    tracing::error!(error = %err, "SIGHUP: [tools] refused; the tools in force stay");
                }
                if let Err(err) = gateway.set_agents(config.agents.clone()) {
                    tracing::error!(error = %err, "SIGHUP: [agents] refused; the agents' desktops in force stay");
                }
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

/// Hands the gateway the sections of the config it applies itself: the steps' limits, what runs
/// may call (`[tools]`), where agents work (`[agents]`), the jobs' limits, and which file they
/// came from. A section it refuses stops the start, naming the file.
fn take_sections(gateway: &Gateway, config: &Config, config_path: &Path) -> anyhow::Result<()> {
    let in_file = |err: &dyn std::fmt::Display| anyhow::anyhow!("{}: {err}", config_path.display());
    gateway.set_step_limits(config.limits.steps());
    gateway
        .set_tools(config.tools.clone())
        .map_err(|e| in_file(&e))?;
    gateway
        .set_agents(config.agents.clone())
        .map_err(|e| in_file(&e))?;
    gateway.jobs().set_limits(config.jobs.limits());
    gateway.set_config_path(config_path.to_path_buf());
    Ok(())
}
