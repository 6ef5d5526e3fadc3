//! `computer service install|uninstall|status`: the daemon as a per-user service that starts with
//! the graphical session — a systemd user unit on Linux, a LaunchAgent on macOS.
//!
//! Install writes the unit for *this* binary and enables it the way `systemctl enable` would (a
//! link in the target's `.wants/`), so that it works, and is idempotent, even where no user
//! manager answers (a container, an SSH login); it then asks a reachable manager to reload and
//! start it. The unit is not socket-activated: the daemon creates its socket itself, in a private
//! directory, only after taking its state lock, so that a second daemon can never take over a
//! live socket — and `computer mcp` already starts a daemon on demand when none runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use computer_ipc::paths;
use serde::Serialize;

use super::exit;

/// The unit's (or LaunchAgent's) name.
#[cfg(not(target_os = "macos"))]
const UNIT: &str = "computer.service";
#[cfg(target_os = "macos")]
const LABEL: &str = "dev.computer.daemon";

#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// Install the daemon as a user service that starts with the graphical session.
    #[command(after_help = "Examples:\n  computer service install\n  \
                            computer service install --no-start   # enable for the next login only")]
    Install {
        /// Enable only; do not start the daemon now.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop the user service and remove what `install` wrote.
    #[command(after_help = "Example:\n  computer service uninstall")]
    Uninstall,
    /// Say whether the service is installed, enabled, current and running.
    #[command(
        after_help = "Examples:\n  computer service status\n  computer service status --json"
    )]
    Status {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: ServiceCommand) -> u8 {
    let exe = match std::env::current_exe().and_then(|exe| exe.canonicalize()) {
        Ok(exe) => exe,
        Err(err) => {
            eprintln!("error: cannot tell where this program is: {err}");
            return exit::FAILED;
        }
    };
    let plan = Plan::for_this_user(&exe);
    match command {
        ServiceCommand::Install { no_start } => report(plan.install(!no_start)),
        ServiceCommand::Uninstall => report(plan.uninstall()),
        ServiceCommand::Status { json } => status(&plan, json).await,
    }
}

fn report(outcome: Result<Vec<String>, String>) -> u8 {
    match outcome {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            exit::OK
        }
        Err(message) => {
            eprintln!("error: {message}");
            exit::FAILED
        }
    }
}

/// Where the service's files go for this user, and what they say.
#[derive(Debug)]
struct Plan {
    /// The unit file (or plist).
    file: PathBuf,
    /// The enabling link (Linux only: launchd enables by loading).
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    wants_link: PathBuf,
    /// The text the file must hold for this binary.
    text: String,
}

/// What `status` finds.
#[derive(Debug, Serialize)]
struct Status {
    file: PathBuf,
    installed: bool,
    enabled: bool,
    /// The installed file is the one this binary would write (else it names another binary or
    /// an older format: install again).
    current: bool,
    /// The program the installed file starts.
    program: Option<String>,
    /// What the service manager says, or why it could not be asked.
    manager: String,
    /// Whether the service runs now, when the manager could say.
    active: Option<bool>,
    /// Whether a daemon answers on the socket (started by the service or otherwise).
    daemon: String,
}

async fn status(plan: &Plan, json: bool) -> u8 {
    let installed_text = std::fs::read_to_string(&plan.file).ok();
    let (manager, active) = plan.manager_state();
    let daemon = match computer_ipc::Client::connect_as(&paths::socket_path(), None).await {
        Ok(client) => {
            client.close().await;
            "answering".to_string()
        }
        Err(err) => format!("not answering: {err}"),
    };
    let status = Status {
        file: plan.file.clone(),
        installed: installed_text.is_some(),
        enabled: plan.is_enabled(),
        current: installed_text.as_deref() == Some(plan.text.as_str()),
        program: installed_text.as_deref().and_then(installed_program),
        manager,
        active,
        daemon,
    };
    if json {
        println!("{}", serde_json::to_string(&status).unwrap_or_default());
    } else {
        println!(
            "unit     {} ({})",
            status.file.display(),
            match (status.installed, status.current) {
                (false, _) => "not installed: `computer service install`".to_string(),
                (true, true) => "installed, current".to_string(),
                (true, false) => format!(
                    "installed for {}: `computer service install` updates it",
                    status.program.as_deref().unwrap_or("another program")
                ),
            }
        );
        println!("enabled  {}", if status.enabled { "yes" } else { "no" });
        println!(
            "running  {}",
            match status.active {
                Some(true) => "yes".to_string(),
                Some(false) => "no".to_string(),
                None => format!("unknown ({})", status.manager),
            }
        );
        println!("daemon   {}", status.daemon);
    }
    if status.installed && status.enabled && status.current {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// The program an installed unit or plist starts.
fn installed_program(text: &str) -> Option<String> {
    if let Some(line) = text.lines().find_map(|l| l.strip_prefix("ExecStart=")) {
        return line.strip_suffix(" serve").map(|program| {
            program
                .trim_matches('"')
                .replace("\\\"", "\"")
                .replace("%%", "%")
        });
    }
    // A plist: the first string of ProgramArguments.
    let args = &text[text.find("<key>ProgramArguments</key>")?..];
    let first = args.find("<string>")? + "<string>".len();
    let end = args[first..].find("</string>")?;
    Some(xml_unescape(&args[first..first + end]))
}

/// Runs a service-manager command, returning its stdout, or why it failed (stderr, or that the
/// manager's tool is missing).
fn manager(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|err| format!("`{program}` could not run: {err}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            if stderr.is_empty() { stdout } else { stderr }
        ))
    }
}

impl Plan {
    /// Writes the unit (or plist) unless it already holds this text; says which.
    fn write(&self) -> Result<String, String> {
        let wrote = write_if_changed(&self.file, &self.text)?;
        Ok(format!(
            "{} {}",
            if wrote { "wrote" } else { "unchanged" },
            self.file.display()
        ))
    }
}

/// Writes `text` to `path` unless it already holds it; says whether it wrote.
fn write_if_changed(path: &Path, text: &str) -> Result<bool, String> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    // Written beside and renamed: a manager reading the directory never sees half a unit.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(true)
}

#[cfg(not(target_os = "macos"))]
impl Plan {
    fn for_this_user(exe: &Path) -> Plan {
        let dir = user_unit_dir();
        Plan {
            file: dir.join(UNIT),
            wants_link: dir.join("graphical-session.target.wants").join(UNIT),
            text: systemd_unit(exe),
        }
    }

    fn install(&self, start: bool) -> Result<Vec<String>, String> {
        let mut said = vec![self.write()?];
        // What `systemctl --user enable` does, done here so that it works without a manager.
        if !self.is_enabled() {
            let dir = self.wants_link.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
            let _ = std::fs::remove_file(&self.wants_link);
            std::os::unix::fs::symlink(Path::new("..").join(UNIT), &self.wants_link)
                .map_err(|err| format!("cannot link {}: {err}", self.wants_link.display()))?;
            said.push(format!(
                "enabled: starts with the graphical session ({})",
                self.wants_link.display()
            ));
        } else {
            said.push("already enabled".into());
        }
        match manager("systemctl", &["--user", "daemon-reload"]) {
            Ok(_) if start => match manager("systemctl", &["--user", "restart", UNIT]) {
                Ok(_) => said.push(format!("started {UNIT}")),
                Err(err) => return Err(format!("{err}; the unit is installed and enabled")),
            },
            Ok(_) => said.push("not started now (--no-start)".into()),
            Err(err) => said.push(format!(
                "not started: the systemd user manager is not reachable here ({err}); it \
                 starts at the next graphical login, or run `systemctl --user start {UNIT}` \
                 in the desktop session"
            )),
        }
        Ok(said)
    }

    fn uninstall(&self) -> Result<Vec<String>, String> {
        let mut said = Vec::new();
        if self.file.exists() {
            // A running daemon is stopped first: its unit is about to disappear.
            if let Err(err) = manager("systemctl", &["--user", "stop", UNIT]) {
                said.push(format!("not stopped ({err})"));
            }
        }
        for path in [&self.wants_link, &self.file] {
            match std::fs::remove_file(path) {
                Ok(()) => said.push(format!("removed {}", path.display())),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(format!("cannot remove {}: {err}", path.display())),
            }
        }
        if said.iter().all(|line| !line.starts_with("removed")) {
            said.push("nothing to remove: the service was not installed".into());
        }
        let _ = manager("systemctl", &["--user", "daemon-reload"]);
        Ok(said)
    }

    fn is_enabled(&self) -> bool {
        std::fs::read_link(&self.wants_link).is_ok()
    }

    fn manager_state(&self) -> (String, Option<bool>) {
        match manager("systemctl", &["--user", "is-active", UNIT]) {
            Ok(state) => (format!("systemd: {state}"), Some(state == "active")),
            // `is-active` exits non-zero for inactive units and prints the state on stdout.
            Err(err) if err.contains("inactive") || err.contains("failed") => {
                ("systemd: inactive".into(), Some(false))
            }
            Err(err) => (err, None),
        }
    }
}

/// `$XDG_CONFIG_HOME/systemd/user`, where a person's own units live.
#[cfg(not(target_os = "macos"))]
fn user_unit_dir() -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| home().join(".config"));
    config.join("systemd").join("user")
}

/// The systemd user unit for the daemon at `exe`.
#[cfg(not(target_os = "macos"))]
fn systemd_unit(exe: &Path) -> String {
    format!(
        "# Written by `computer service install`; `computer service uninstall` removes it.\n\
         [Unit]\n\
         Description=computer: one receipted tool for agents acting on this desktop\n\
         # Started and stopped with the desktop session, whose display and bus it serves.\n\
         PartOf=graphical-session.target\n\
         After=graphical-session.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} serve\n\
         Restart=on-failure\n\
         # SIGTERM lets in-flight calls finish (server.shutdown_grace_ms, 10 s by default).\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec=20\n\
         NoNewPrivileges=yes\n\
         # Each client holds a descriptor and runs need pipes: 1024 is low for a server.\n\
         LimitNOFILE=65536\n\
         \n\
         [Install]\n\
         WantedBy=graphical-session.target\n",
        systemd_quote(&exe.to_string_lossy())
    )
}

/// A path as one ExecStart word: quoted when it has spaces, `%` doubled (specifiers).
#[cfg(not(target_os = "macos"))]
fn systemd_quote(path: &str) -> String {
    let escaped = path
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    if escaped.contains([' ', '\t']) {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

#[cfg(target_os = "macos")]
impl Plan {
    fn for_this_user(exe: &Path) -> Plan {
        let file = home()
            .join("Library/LaunchAgents")
            .join(format!("{LABEL}.plist"));
        Plan {
            wants_link: file.clone(),
            file,
            text: launch_agent(exe),
        }
    }

    fn domain() -> String {
        // SAFETY: getuid has no preconditions.
        format!("gui/{}", unsafe { libc::getuid() })
    }

    fn install(&self, start: bool) -> Result<Vec<String>, String> {
        let mut said = vec![self.write()?];
        if !start {
            said.push("loaded at the next login (--no-start)".into());
            return Ok(said);
        }
        let service = format!("{}/{LABEL}", Self::domain());
        // Reloading picks up a changed plist; bootout of an unloaded agent fails harmlessly.
        let _ = manager("launchctl", &["bootout", &service]);
        let file = self.file.to_string_lossy().to_string();
        manager("launchctl", &["bootstrap", &Self::domain(), &file])
            .map_err(|err| format!("{err}; the LaunchAgent is written"))?;
        said.push(format!("loaded {service}"));
        Ok(said)
    }

    fn uninstall(&self) -> Result<Vec<String>, String> {
        let mut said = Vec::new();
        let service = format!("{}/{LABEL}", Self::domain());
        if manager("launchctl", &["bootout", &service]).is_ok() {
            said.push(format!("unloaded {service}"));
        }
        match std::fs::remove_file(&self.file) {
            Ok(()) => said.push(format!("removed {}", self.file.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                said.push("nothing to remove: the service was not installed".into())
            }
            Err(err) => return Err(format!("cannot remove {}: {err}", self.file.display())),
        }
        Ok(said)
    }

    fn is_enabled(&self) -> bool {
        // A LaunchAgent in ~/Library/LaunchAgents is loaded at every login.
        self.file.exists()
    }

    fn manager_state(&self) -> (String, Option<bool>) {
        let service = format!("{}/{LABEL}", Self::domain());
        match manager("launchctl", &["print", &service]) {
            Ok(text) => {
                let running = text.contains("state = running");
                (format!("launchd: {service} loaded"), Some(running))
            }
            Err(_) => (format!("launchd: {service} not loaded"), Some(false)),
        }
    }
}

/// The LaunchAgent for the daemon at `exe`: loaded in the person's GUI session only.
#[cfg(target_os = "macos")]
fn launch_agent(exe: &Path) -> String {
    let log = home().join("Library/Logs/computer-daemon.log");
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!-- Written by `computer service install`; `computer service uninstall` removes it. -->\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n<dict>\n\
         \x20 <key>Label</key>\n  <string>{LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n    <string>{}</string>\n    <string>serve</string>\n  </array>\n\
         \x20 <key>LimitLoadToSessionType</key>\n  <string>Aqua</string>\n\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         \x20 <key>SoftResourceLimits</key>\n  <dict>\n    <key>NumberOfFiles</key>\n    <integer>65536</integer>\n  </dict>\n\
         \x20 <key>StandardErrorPath</key>\n  <string>{}</string>\n\
         </dict>\n</plist>\n",
        xml_escape(&exe.to_string_lossy()),
        xml_escape(&log.to_string_lossy()),
    )
}

#[cfg(target_os = "macos")]
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn xml_unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&amp;", "&")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;

    #[test]
    fn paths_with_spaces_and_specifiers_stay_one_word() {
        assert_eq!(systemd_quote("/usr/bin/computer"), "/usr/bin/computer");
        assert_eq!(
            systemd_quote("/home/a b/100%/computer"),
            "\"/home/a b/100%%/computer\""
        );
    }

    #[test]
    fn the_packaged_unit_is_the_one_install_writes() {
        let settings = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|line| !line.starts_with('#'))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            settings(include_str!("../../../packaging/systemd/computer.service")),
            settings(&systemd_unit(Path::new("/usr/bin/computer")))
        );
    }

    #[test]
    fn the_installed_program_is_read_back() {
        let unit = systemd_unit(Path::new("/opt/my tools/computer"));
        assert_eq!(
            installed_program(&unit).as_deref(),
            Some("/opt/my tools/computer")
        );
    }
}
