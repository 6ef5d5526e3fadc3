//! The daemon's configuration: embedded defaults, optionally overridden by a TOML file whose errors
//! name the line and key.

use std::path::Path;
use std::time::Duration;

use computer_surfaces::SurfaceLimits;
use computer_surfaces::capture::CaptureLimits;
use computer_surfaces::shell::ShellLimits;
use serde::Deserialize;

use crate::policy::{Defaults, PolicySection, Rule};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub shell: ShellConfig,
    /// What each risk class gets when no rule matches.
    pub defaults: Defaults,
    pub approval: ApprovalConfig,
    pub limits: LimitsConfig,
    pub containment: ContainmentSection,
    pub artifacts: ArtifactsConfig,
    /// What policy needs beyond rules and defaults (the loader variables).
    pub policy: PolicySection,
    /// The gui surface: which windows are terminals.
    pub gui: GuiConfig,
    pub rules: Vec<Rule>,
}

impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        self.server == other.server
            && self.shell == other.shell
            && self.defaults == other.defaults
            && self.approval == other.approval
            && self.limits == other.limits
            && self.containment == other.containment
            && self.artifacts == other.artifacts
            && self.policy == other.policy
            && self.gui == other.gui
            && self.rules == other.rules
    }
}

/// A duration written as `250ms`, `30s`, `10m` or `2h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationText(pub Duration);

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_duration(&text).map(DurationText).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{text}` is not a duration; write e.g. 250ms, 30s, 10m or 2h"
            ))
        })
    }
}

pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let millis = match unit {
        "ms" => number,
        "s" => number * 1_000,
        "m" => number * 60_000,
        "h" => number * 3_600_000,
        "d" => number * 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(millis))
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    /// How long an asked call waits for a person; then it is denied.
    pub timeout: DurationText,
    /// An allow-for-this-session grant lapses after this long unused...
    pub session_idle: DurationText,
    /// ...and after this long in any case.
    pub session_max: DurationText,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            timeout: DurationText(Duration::from_secs(120)),
            session_idle: DurationText(Duration::from_secs(15 * 60)),
            session_max: DurationText(Duration::from_secs(8 * 3600)),
        }
    }
}

/// `[gui]`: applications whose windows are terminal emulators. Keys that end a command line in
/// one (Return, a typed newline) are decided as a shell run of that line. Names match the X11
/// WM_CLASS instance or class (the application's name on macOS), ignoring case; `*` matches any
/// run of characters. Setting the list replaces the default one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuiConfig {
    pub terminal_apps: Vec<String>,
}

impl Default for GuiConfig {
    fn default() -> Self {
        GuiConfig {
            terminal_apps: computer_surfaces::gui::terminal::DEFAULT_TERMINAL_APPS
                .iter()
                .map(|name| name.to_string())
                .collect(),
        }
    }
}

/// How runs are contained (see `computer_surfaces::contain`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainmentSection {
    pub mode: ContainmentMode,
}

/// `on` (the default): every run is contained, and refused where containment cannot be set up.
/// `off`: runs can reach the daemon's state, config and sockets; every receipt says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentMode {
    #[default]
    On,
    Off,
}

/// Per-agent rate limit: at most `calls` in any sliding `window` (0 calls = no limit).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    pub calls: u32,
    pub window: DurationText,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            calls: 0,
            window: DurationText(Duration::from_secs(60)),
        }
    }
}

/// Room for artifacts (spilled outputs, screenshots, evidence), shared by every call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArtifactsConfig {
    /// Bytes the artifacts directory may hold in all; past it spills are cut and screenshots
    /// refused, and receipts go on being written.
    pub quota_bytes: u64,
}

impl Default for ArtifactsConfig {
    fn default() -> Self {
        ArtifactsConfig {
            quota_bytes: 1 << 30,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Largest request line accepted; a longer one closes the connection.
    pub max_request_bytes: usize,
    /// How long in-flight calls may run on after SIGINT/SIGTERM.
    pub shutdown_grace_ms: u64,
    /// A request line begun and not finished within this long closes its connection.
    pub read_timeout_ms: u64,
    /// A connection that has sent no request (`initialize`, or a first call of the stateless
    /// revision) this long after connecting is closed.
    pub handshake_timeout_ms: u64,
    /// Connections served at once; more are refused at accept. With `max_request_bytes` this
    /// bounds what partial requests can hold in memory.
    pub max_connections: usize,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ShellConfig {
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    /// Bytes of each output stream held in memory (head plus tail).
    pub capture_memory_bytes: usize,
    /// Bytes of each output stream written to its artifact file at most.
    pub spill_limit_bytes: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_request_bytes: 1 << 20,
            shutdown_grace_ms: 10_000,
            read_timeout_ms: 30_000,
            handshake_timeout_ms: 10_000,
            max_connections: 256,
        }
    }
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            default_timeout_ms: 30_000,
            max_timeout_ms: 600_000,
            capture_memory_bytes: 1 << 20,
            spill_limit_bytes: 64 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Invalid { path: String, message: String },
}

impl Config {
    /// Reads `path` if it exists; the embedded defaults otherwise.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, &path.display().to_string()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(source) => Err(ConfigError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|err| ConfigError::Invalid {
            path: origin.to_string(),
            message: err.to_string().trim_end().to_string(),
        })?;
        config.check().map_err(|message| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        })?;
        Ok(config)
    }

    fn check(&self) -> Result<(), String> {
        if self.approval.timeout.0.is_zero() {
            return Err("approval.timeout must be longer than 0".into());
        }
        if self.limits.calls > 0 && self.limits.window.0.is_zero() {
            return Err("limits.window must be longer than 0 when limits.calls is set".into());
        }
        if self.shell.default_timeout_ms == 0 || self.shell.max_timeout_ms == 0 {
            return Err("shell timeouts must be at least 1 ms".into());
        }
        if self.shell.default_timeout_ms > self.shell.max_timeout_ms {
            return Err(format!(
                "shell.default_timeout_ms ({}) is over shell.max_timeout_ms ({})",
                self.shell.default_timeout_ms, self.shell.max_timeout_ms
            ));
        }
        if self.shell.capture_memory_bytes < 2 {
            return Err("shell.capture_memory_bytes must be at least 2".into());
        }
        if self.server.max_request_bytes < 1024 {
            return Err("server.max_request_bytes must be at least 1024".into());
        }
        if self.server.read_timeout_ms == 0 || self.server.handshake_timeout_ms == 0 {
            return Err(
                "server.read_timeout_ms and server.handshake_timeout_ms must be at least 1 ms"
                    .into(),
            );
        }
        if let Some(index) = self
            .gui
            .terminal_apps
            .iter()
            .position(|name| name.trim().is_empty())
        {
            return Err(format!(
                "gui.terminal_apps[{index}] is empty: give an application name such as \"xterm\" \
                 (WM_CLASS instance or class), or leave the entry out"
            ));
        }
        if self.server.max_connections == 0 {
            return Err("server.max_connections must be at least 1".into());
        }
        Ok(())
    }

    pub fn surface_limits(&self) -> SurfaceLimits {
        SurfaceLimits {
            shell: ShellLimits {
                default_timeout: Duration::from_millis(self.shell.default_timeout_ms),
                max_timeout: Duration::from_millis(self.shell.max_timeout_ms),
                capture: CaptureLimits {
                    memory_bytes: self.shell.capture_memory_bytes,
                    spill_bytes: self.shell.spill_limit_bytes,
                },
                // Set up by the daemon itself (`serve`), which knows the paths to hide.
                ..ShellLimits::default()
            },
            gui: computer_surfaces::gui::GuiLimits {
                terminal_apps: computer_surfaces::gui::terminal::TerminalApps::new(
                    &self.gui.terminal_apps,
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(Config::parse("", "t").unwrap(), Config::default());
    }

    #[test]
    fn errors_name_line_and_key() {
        let err = Config::parse(
            "[shell]\ndefault_timeout_ms = 5\nmax_timeot_ms = 9\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("max_timeot_ms"), "{err}");
        assert!(err.contains("max_timeout_ms"), "lists valid keys: {err}");
    }

    #[test]
    fn the_documented_policy_example_parses() {
        let config = Config::parse(
            r#"
            [defaults]
            observe = "allow"
            act = "ask"
            secret = "ask"
            [approval]
            timeout = "120s"
            [[rules]]
            surface = "shell"
            command = "run"
            argv0 = ["touch"]
            decision = "ask"
            "#,
            "c",
        )
        .unwrap();
        assert_eq!(config.approval.timeout.0, Duration::from_secs(120));
        assert_eq!(config.rules.len(), 1);
        let err = Config::parse("[approval]\ntimeout = \"soon\"\n", "c")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("not a duration"),
            "{err}"
        );
        let err = Config::parse("[[rules]]\ndecision = \"maybe\"\n", "c")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("`ask`"), "{err}");
    }

    #[test]
    fn the_loader_list_has_a_default_and_can_be_replaced() {
        let default = Config::parse("", "c").unwrap();
        let names = |config: &Config| {
            let matches = |name: &str| config.policy.loader_env.iter().any(|g| g.matches(name));
            (
                matches("LD_PRELOAD"),
                matches("GIT_CONFIG_COUNT"),
                matches("MY_HOOK"),
            )
        };
        assert_eq!(names(&default), (true, true, false));
        let replaced = Config::parse("[policy]\nloader_env = [\"MY_*\"]\n", "c").unwrap();
        assert_eq!(names(&replaced), (false, false, true));
        let err = Config::parse("[policy]\nloader = []\n", "c")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("loader_env"),
            "{err}"
        );
    }

    #[test]
    fn terminal_apps_have_a_default_and_can_be_replaced() {
        let default = Config::parse("", "c").unwrap();
        let apps = default.surface_limits().gui.terminal_apps;
        assert!(apps.matches(["xterm"]) && apps.matches(["Gnome-terminal"]));
        let replaced = Config::parse("[gui]\nterminal_apps = [\"myterm\"]\n", "c").unwrap();
        let apps = replaced.surface_limits().gui.terminal_apps;
        assert!(apps.matches(["MyTerm"]) && !apps.matches(["xterm"]));
        let err = Config::parse("[gui]\nterminal_apps = [\"xterm\", \" \"]\n", "c")
            .unwrap_err()
            .to_string();
        assert!(err.contains("gui.terminal_apps[1] is empty"), "{err}");
        let err = Config::parse("[gui]\nterminals = []\n", "c")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("terminal_apps"),
            "{err}"
        );
    }

    #[test]
    fn inconsistent_values_are_refused() {
        let err = Config::parse(
            "[shell]\ndefault_timeout_ms = 50\nmax_timeout_ms = 10\n",
            "c",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("over shell.max_timeout_ms"), "{err}");
    }

    #[test]
    fn server_limits_parse_and_zero_ones_are_refused() {
        let config = Config::parse(
            "[server]\nread_timeout_ms = 500\nhandshake_timeout_ms = 700\nmax_connections = 3\n",
            "c",
        )
        .unwrap();
        assert_eq!(
            (
                config.server.read_timeout_ms,
                config.server.handshake_timeout_ms,
                config.server.max_connections
            ),
            (500, 700, 3)
        );
        for (toml, named) in [
            ("[server]\nread_timeout_ms = 0\n", "server.read_timeout_ms"),
            (
                "[server]\nhandshake_timeout_ms = 0\n",
                "server.handshake_timeout_ms",
            ),
            ("[server]\nmax_connections = 0\n", "server.max_connections"),
        ] {
            let err = Config::parse(toml, "c").unwrap_err().to_string();
            assert!(err.contains(named), "{toml}: {err}");
        }
    }
}
