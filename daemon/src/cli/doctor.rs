//! `computer doctor`: each surface, whether it works here, and if not why and how to fix it; plus
//! where the daemon's socket, state and config are and whether a daemon answers.

use computer_ipc::{Client, SurfaceName, paths};
use computer_surfaces::{Availability, Registry};
use serde_json::json;

use super::exit;

pub async fn run(json_output: bool) -> u8 {
    let config_path = paths::config_path();
    let (config, config_status) = match crate::config::Config::load(&config_path) {
        Ok(config) => {
            let status = if config_path.exists() {
                "valid"
            } else {
                "absent (embedded defaults)"
            };
            (config, status.to_string())
        }
        Err(err) => (crate::config::Config::default(), format!("invalid: {err}")),
    };
    let containment = super::serve::containment(&config, &config_path, &paths::state_dir());
    let mut limits = config.surface_limits();
    limits.shell.containment = std::sync::Arc::new(containment);
    let containment = limits.shell.containment.status().clone();
    let registry = Registry::for_this_platform(&limits);
    let surfaces: Vec<(SurfaceName, Availability)> = SurfaceName::ALL
        .iter()
        .map(|&name| {
            let availability = registry
                .get(name)
                .map(|surface| surface.probe())
                .unwrap_or_else(|| Registry::why_absent(name));
            (name, availability)
        })
        .collect();
    let socket = paths::socket_path();
    let daemon = match Client::connect(&socket).await {
        Ok(client) => {
            client.close().await;
            "answering".to_string()
        }
        Err(err) => format!("not answering: {err}"),
    };

    if json_output {
        let report = json!({
            "socket": socket,
            "daemon": daemon,
            "state_dir": paths::state_dir(),
            "config": {"path": config_path, "status": config_status},
            "containment": containment,
            "surfaces": surfaces.iter().map(|(name, availability)| json!({"surface": name, "availability": availability})).collect::<Vec<_>>(),
        });
        println!("{report}");
    } else {
        println!("socket   {} ({daemon})", socket.display());
        println!("state    {}", paths::state_dir().display());
        println!("config   {} ({config_status})", config_path.display());
        println!(
            "runs     contained by {}: {}",
            containment.mechanism, containment.detail
        );
        println!("surfaces");
        for (name, availability) in &surfaces {
            match availability {
                Availability::Ready => println!("  {name:<12} ready"),
                Availability::Unavailable { reason, fix } => {
                    println!(
                        "  {name:<12} unavailable: {reason}\n  {:<12} fix: {fix}",
                        ""
                    )
                }
            }
        }
    }
    if config_status.starts_with("invalid") || !containment.allows_runs() {
        exit::FAILED
    } else {
        exit::OK
    }
}
