//! macOS containment: each run starts under `sandbox-exec` with a Seatbelt profile that denies
//! the daemon's state, config and sockets and lets signals reach only the run's own sandbox.
//! Compiled on Linux for the macOS target; it runs only on a Mac (GitHub's macOS runners).

use std::path::PathBuf;

/// How every rule hiding one of the daemon's paths starts, so that [`with_limits`] can state
/// them again after the rules it adds.
const HIDE_RULE: &str = "(deny file-read* file-write* (subpath ";
/// How every rule showing a directory inside a hidden one starts (read-only: writing stays
/// denied by the hiding rule), stated again after the hiding rules.
const SHOW_RULE: &str = "(allow file-read* (subpath ";

/// The Seatbelt profile for runs: everything a person could do, except the hidden paths and
/// other processes' signals.
pub(super) fn profile(hidden: &[PathBuf], shown: &[PathBuf]) -> String {
    let mut profile = String::from("(version 1)\n(allow default)\n");
    for path in hidden {
        let quoted = quote(path);
        profile.push_str(&format!("{HIDE_RULE}\"{quoted}\"))\n"));
        // Connecting to a socket is a network operation to Seatbelt, not a file read: the
        // daemon's sockets are closed by their own rule (one filter per rule, or all must match).
        profile.push_str(&format!(
            "(deny network-outbound (remote unix-socket (subpath \"{quoted}\")))\n"
        ));
    }
    // After the hiding rules (the last matching rule wins): read-only, inside a hidden path.
    for path in shown {
        profile.push_str(&format!("{SHOW_RULE}\"{}\"))\n", quote(path)));
    }
    // Signals and process inspection reach only processes in this run's sandbox: never the
    // daemon, never an approver.
    profile.push_str("(deny signal (target others))\n(allow signal (target same-sandbox))\n");
    profile.push_str("(deny process-info* (target others))\n");
    profile
}

/// `path` as a Seatbelt string's contents.
fn quote(path: &std::path::Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// Rewrites `command` to start under `sandbox-exec` with `profile`.
///
/// The run gets only the environment `command` sets explicitly: a `Command` does not tell whether
/// its environment was cleared, and inheriting the daemon's would be the unsafe guess (shell runs
/// clear it and pass a fixed list). Stdio, process group and the like are set by the caller
/// after this.
pub(super) fn wrap(command: &mut std::process::Command, profile: &str) {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = std::process::Command::new("/usr/bin/sandbox-exec");
    wrapped
        .env_clear()
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

/// `profile` tightened by one run's limits.
pub(super) fn with_limits(profile: &str, limits: &super::RunLimits) -> String {
    let mut profile = profile.to_string();
    if limits.no_network {
        profile.push_str("(deny network*)\n");
    }
    if let Some(writable) = &limits.writable {
        profile.push_str(
            "(deny file-write*)\n(allow file-write* (literal \"/dev/null\") (subpath \"/dev/fd\")",
        );
        // Seatbelt matches real paths (`/tmp` is `/private/tmp`): each path is opened in both
        // spellings, or writing under a symlinked one would be refused.
        let real_forms = writable
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .filter(|real| !writable.contains(real));
        for path in writable.iter().cloned().chain(real_forms) {
            let quoted = path
                .display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            profile.push_str(&format!(" (subpath \"{quoted}\")"));
        }
        profile.push_str(")\n");
        // The last matching rule wins in Seatbelt: the daemon's paths are hidden again after
        // the writable ones, so naming one of them writable does not open it.
        let hide_again: String = profile
            .lines()
            .filter(|line| line.starts_with(HIDE_RULE) || line.starts_with(SHOW_RULE))
            .map(|line| format!("{line}\n"))
            .collect();
        profile.push_str(&hide_again);
    }
    profile
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent naming the daemon's state dir writable must not get it: the hiding rule comes
    /// last, and the last matching Seatbelt rule wins.
    #[test]
    fn a_writable_path_cannot_reopen_a_hidden_one() {
        let state = PathBuf::from("/Users/me/Library/Application Support/computer");
        let base = profile(std::slice::from_ref(&state), &[]);
        let limits = super::super::RunLimits {
            no_network: false,
            writable: Some(vec![state.clone(), PathBuf::from("/tmp/work")]),
            ..Default::default()
        };
        let tightened = with_limits(&base, &limits);
        let hide = format!("{HIDE_RULE}\"{}\"))", state.display());
        let last_allow = tightened
            .rfind("(allow file-write*")
            .expect("writable rule");
        let last_hide = tightened.rfind(&hide).expect("hiding rule");
        assert!(last_hide > last_allow, "profile:\n{tightened}");
        // The ordinary case still opens the path asked for.
        assert!(tightened.contains("(subpath \"/tmp/work\")"));
        // The daemon's sockets cannot be connected to either.
        assert!(tightened.contains(&format!(
            "(deny network-outbound (remote unix-socket (subpath \"{}\")))",
            state.display()
        )));
    }

    /// `/tmp` is a symlink to `/private/tmp` on macOS, and Seatbelt sees the real path.
    #[test]
    fn a_writable_path_is_opened_under_its_real_name_too() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let limits = super::super::RunLimits {
            no_network: false,
            writable: Some(vec![dir.path().to_path_buf()]),
            ..Default::default()
        };
        let tightened = with_limits(&profile(&[], &[]), &limits);
        assert!(
            tightened.contains(&format!("(subpath \"{}\")", real.display())),
            "profile:\n{tightened}"
        );
    }

    /// The run sees only the environment set for it, not the daemon's.
    #[test]
    fn the_wrapped_run_gets_only_the_environment_set_for_it() {
        let mut command = std::process::Command::new("/bin/echo");
        command.env_clear().env("PATH", "/usr/bin:/bin").arg("hi");
        wrap(&mut command, "(version 1)\n(allow default)\n");
        assert_eq!(command.get_program(), "/usr/bin/sandbox-exec");
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args[args.len() - 2..], ["/bin/echo", "hi"]);
        let envs: Vec<_> = command.get_envs().collect();
        assert_eq!(
            envs,
            [(
                std::ffi::OsStr::new("PATH"),
                Some(std::ffi::OsStr::new("/usr/bin:/bin"))
            )]
        );
    }
}
