//! macOS containment: each run starts under `sandbox-exec` with a Seatbelt profile that denies
//! the daemon's state, config and sockets and lets signals reach only the run's own sandbox.
//! Compiled on Linux for the macOS target; it runs only on a Mac (GitHub's macOS runners).

use std::path::PathBuf;

/// The Seatbelt profile for runs: everything a person could do, except the hidden paths and
/// other processes' signals.
pub(super) fn profile(hidden: &[PathBuf]) -> String {
    let mut profile = String::from("(version 1)\n(allow default)\n");
    for path in hidden {
        let quoted = path
            .display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        profile.push_str(&format!(
            "(deny file-read* file-write* (subpath \"{quoted}\"))\n"
        ));
    }
    // Signals and process inspection reach only processes in this run's sandbox: never the
    // daemon, never an approver.
    profile.push_str("(deny signal (target others))\n(allow signal (target same-sandbox))\n");
    profile.push_str("(deny process-info* (target others))\n");
    profile
}

/// Rewrites `command` to start under `sandbox-exec` with `profile`.
pub(super) fn wrap(command: &mut std::process::Command, profile: &str) {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = std::process::Command::new("/usr/bin/sandbox-exec");
    wrapped
        .arg("-p")
        .arg(profile)
        .arg("--")
        .arg(program)
        .args(args);
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    *command = wrapped;
}
