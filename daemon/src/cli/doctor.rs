//! `computer doctor`: each surface, whether it works here, and if not why and how to fix it; plus
//! where the daemon's socket, state and config are and whether a daemon answers.

use computer_ipc::{Client, SurfaceName, paths};
use computer_surfaces::{Availability, Registry};
use serde_json::json;

use super::exit;

pub async fn run(json_output: bool) -> u8 {
    let config_path = paths::config_path();
    let (config, mut config_status) = match crate::config::Config::load(&config_path) {
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
    // A section a surface refuses makes the config invalid; the surfaces are then reported
    // with their defaults.
    let registry = match config.registry(&config_path.display().to_string(), &limits) {
        Ok(registry) => registry,
        Err(err) => {
            config_status = format!("invalid: {err}");
            Registry::for_this_platform(&limits)
        }
    };
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
    let daemon_pid = daemon_pid(&socket);
    // Asked as the person (no agent token): an agent's narrower scope is not what this reports.
    let (daemon, offered, facts) = match Client::connect_as(&socket, None).await {
        Ok(client) => {
            let offered = client
                .list_tools()
                .await
                .ok()
                .map(|tools| offered_surfaces(&tools));
            let facts = client.daemon_facts();
            client.close().await;
            ("answering".to_string(), offered, facts)
        }
        Err(err) => (format!("not answering: {err}"), None, None),
    };
    // The config in use is the one the running daemon read, which a daemon started by a host
    // with another environment than this terminal's may have found elsewhere.
    let daemon_config = facts.as_ref().map(|facts| {
        let mut sentence = facts.config_sentence();
        if facts.config.as_ref().is_some_and(|read| *read != config_path) {
            sentence.push_str(&format!(
                ", not {} as this terminal's environment names it (the daemon was started with                  another XDG_CONFIG_HOME or COMPUTER_CONFIG: restart it from here, or set                  COMPUTER_CONFIG in the host's server entry)",
                config_path.display()
            ));
        }
        sentence
    });
    // A daemon that runs decides what agents get: its environment (display, session bus), not
    // this shell's, is what counts.
    let surfaces: Vec<(SurfaceName, Availability)> = match &offered {
        None => surfaces,
        Some(offered) => surfaces
            .into_iter()
            .map(|(name, here)| {
                let in_daemon = offered.iter().any(|s| s == name.as_str());
                let availability = match (here, in_daemon) {
                    (_, true) => Availability::Ready,
                    (Availability::Ready, false) => missing_from_daemon(name, daemon_pid),
                    (unavailable, false) => unavailable,
                };
                (name, availability)
            })
            .collect(),
    };
    let daemon = match daemon_pid {
        Some(pid) if offered.is_some() => format!("{daemon}, pid {pid}"),
        _ => daemon,
    };

    let permissions = macos_permissions();
    let keychain = super::secrets::doctor_report().await;
    let export = crate::record::export::doctor_report(&config.export, &paths::state_dir());
    let desktops = facts.as_ref().map_or(&[][..], |facts| &facts.desktops[..]);
    if json_output {
        let report = json!({
            "permissions": permissions,
            "socket": socket,
            "daemon": daemon,
            "daemon_pid": daemon_pid,
            "note": no_display_hint(&registry, &surfaces),
            "state_dir": paths::state_dir(),
            "config": {"path": config_path, "status": config_status,
                       "daemon_read": facts.as_ref().and_then(|f| f.config.clone()),
                       "daemon_read_exists": facts.as_ref().map(|f| f.config_exists),
                       "daemon_says": daemon_config},
            "containment": containment,
            "keychain": keychain,
            "export": export,
            "desktops": desktops,
            "surfaces": surfaces.iter().map(|(name, availability)| json!({"surface": name, "availability": availability, "backend": backend_of(&registry, *name)})).collect::<Vec<_>>(),
        });
        println!("{report}");
    } else {
        println!("socket   {} ({daemon})", socket.display());
        println!("state    {}", paths::state_dir().display());
        println!("config   {} ({config_status})", config_path.display());
        if let Some(sentence) = &daemon_config {
            println!("         {sentence}");
        }
        println!(
            "runs     contained by {}: {}",
            containment.mechanism, containment.detail
        );
        println!("{}", super::secrets::doctor_line(&keychain));
        for line in crate::record::export::doctor_lines(&export) {
            println!("{line}");
        }
        print_desktops(desktops);
        print_permissions(&permissions);
        println!("surfaces");
        for (name, availability) in &surfaces {
            match availability {
                Availability::Ready => match backend_of(&registry, *name) {
                    Some(backend) => {
                        println!("  {name:<12} ready\n  {:<12} backend: {backend}", "")
                    }
                    None => println!("  {name:<12} ready"),
                },
                Availability::Unavailable { reason, fix } => {
                    println!(
                        "  {name:<12} unavailable: {reason}\n  {:<12} fix: {fix}",
                        ""
                    )
                }
            }
        }
    }
    if let Some(note) = no_display_hint(&registry, &surfaces)
        && !json_output
    {
        println!("note     {note}");
    }
    if config_status.starts_with("invalid") || !containment.allows_runs() {
        exit::FAILED
    } else {
        exit::OK
    }
}

/// The open desktops of agents' own, one line each.
fn print_desktops(desktops: &[computer_ipc::control::DesktopFact]) {
    for desktop in desktops {
        println!(
            "desktop  {} of agent `{}`: {}, {}x{}, {} MiB resident",
            desktop.id,
            desktop.agent,
            desktop.kind,
            desktop.size[0],
            desktop.size[1],
            desktop.resident_bytes / (1024 * 1024)
        );
    }
}

/// The macOS permissions the surfaces need, with their state (none elsewhere).
fn print_permissions(permissions: &[serde_json::Value]) {
    if permissions.is_empty() {
        return;
    }
    println!("permissions (macOS)");
    for permission in permissions {
        println!(
            "  {:<26} {}: {}",
            permission["permission"].as_str().unwrap_or_default(),
            permission["state"].as_str().unwrap_or_default(),
            permission["detail"].as_str().unwrap_or_default()
        );
    }
}

/// The backend a surface of this registry uses here, and for the gui why it was chosen and what
/// the session lacks (the running daemon may have chosen otherwise in its own environment).
fn backend_of(registry: &Registry, name: SurfaceName) -> Option<&'static str> {
    registry.get(name).map(|surface| surface.backend())
}

/// The macOS privacy permissions this binary holds (Automation for System Events and Finder,
/// Accessibility, Screen Recording), asked without prompting; none elsewhere. They are this
/// process's: a daemon started by another program (launchd, a terminal) may hold others.
fn macos_permissions() -> Vec<serde_json::Value> {
    #[cfg(target_os = "macos")]
    {
        computer_surfaces::applescript::permissions::report()
            .into_iter()
            .map(|state| json!(state))
            .collect()
    }
    #[cfg(not(target_os = "macos"))]
    Vec::new()
}

/// The serving daemon's pid, from the lock file beside its socket.
fn daemon_pid(socket: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(crate::server::lock_path(socket))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The surfaces a daemon's tool offers: the `surface` enum of its input schema.
fn offered_surfaces(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|tool| {
            tool.input_schema
                .get("properties")?
                .get("surface")?
                .get("enum")
        })
        .filter_map(|names| names.as_array())
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_string))
        .collect()
}

/// A surface this shell could use that the running daemon cannot: the daemon was started
/// outside the desktop session (typically by an MCP host that found no daemon and stripped the
/// environment), so it lacks the display or the session bus.
fn missing_from_daemon(name: SurfaceName, pid: Option<u32>) -> Availability {
    let who = pid.map_or_else(
        || "the running daemon".to_string(),
        |pid| format!("the running daemon (pid {pid})"),
    );
    let stop = pid.map_or_else(
        || "stop it".to_string(),
        |pid| format!("stop it (`kill {pid}`)"),
    );
    Availability::Unavailable {
        reason: format!(
            "ready in this shell, but {who} does not offer {name}: it was started outside the \
             desktop session (e.g. by an MCP host) and has no display or session bus"
        ),
        fix: format!(
            "{stop} and run the daemon from the desktop session: `computer service install` (a user \
             service of the graphical session), or `computer serve` in a desktop terminal"
        ),
    }
}

/// When surfaces that need the desktop session lack a display or bus: where a daemon started by
/// an MCP host looks for them.
fn no_display_hint(
    registry: &Registry,
    surfaces: &[(SurfaceName, Availability)],
) -> Option<&'static str> {
    let desktop_missing = surfaces.iter().any(|(name, availability)| {
        registry.get(*name).is_some_and(|s| s.needs_desktop())
            && matches!(availability, Availability::Unavailable { reason, .. }
                if reason.contains("DISPLAY") || reason.contains("DBUS_SESSION_BUS_ADDRESS"))
    });
    desktop_missing.then_some(
        "a daemon that `computer mcp` starts takes DISPLAY, WAYLAND_DISPLAY, XAUTHORITY and the \
         session bus from the systemd user manager (`systemctl --user show-environment`) and \
         $XDG_RUNTIME_DIR/bus, not from the MCP host; a desktop that exports none there leaves \
         gui and ax out. Run the daemon as a user service (`computer service install`, or \
         `systemctl --user import-environment DISPLAY XAUTHORITY` at login)",
    )
}
