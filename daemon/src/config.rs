//! The daemon's configuration: embedded defaults, optionally overridden by a TOML file whose errors
//! name the line and key. A section named after a surface (`[shell]`, `[gui]`, ...) belongs to
//! that surface, which checks it (`Surface::configure`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use computer_ipc::SurfaceName;
use computer_surfaces::{Registry, SurfaceLimits};
use serde::{Deserialize, Serialize};

use crate::guard::policy::{Defaults, PolicySection, Rule, RulePolicy};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub server: ServerConfig,
    /// What each risk class gets when no rule matches.
    pub defaults: Defaults,
    pub approval: ApprovalConfig,
    pub limits: LimitsConfig,
    pub containment: ContainmentSection,
    pub artifacts: ArtifactsConfig,
    /// How long finished detached jobs keep their results.
    pub jobs: JobsConfig,
    /// What policy needs beyond rules and defaults (the loader variables).
    pub policy: PolicySection,
    pub rules: Vec<Rule>,
    /// What runs given tools may call beyond the default set (`[tools]`).
    pub tools: crate::call::tools::ToolsConfig,
    /// Where receipts are sent beyond the ledger (`[export]`).
    pub export: crate::record::export::ExportConfig,
    /// What each agent works on (`[agents.NAME]`): its own desktop for every call, or the
    /// person's.
    pub agents: BTreeMap<String, crate::call::desktops::AgentDesk>,
    /// The surfaces' own sections, unread here: each surface checks and takes its own.
    pub surfaces: BTreeMap<SurfaceName, toml::Table>,
    /// Where each key of a surface's section was written (`shell.max_timeout_ms` → line), so
    /// that the surface's errors can name the line too.
    pub surface_lines: BTreeMap<String, usize>,
}

/// The daemon's own sections; any other top-level key must name a surface.
pub(crate) const DAEMON_SECTIONS: &[&str] = &[
    "server",
    "defaults",
    "approval",
    "limits",
    "containment",
    "artifacts",
    "jobs",
    "policy",
    "rules",
    "tools",
    "export",
    "agents",
];

// By hand rather than derived: a surface's section is any table under the surface's name, and
// serde's `flatten` would lose the line numbers errors carry.
impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Sections;
        impl<'de> serde::de::Visitor<'de> for Sections {
            type Value = Config;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the daemon's config")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Config, A::Error> {
                let mut config = Config::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "server" => config.server = map.next_value()?,
                        "defaults" => config.defaults = map.next_value()?,
                        "approval" => config.approval = map.next_value()?,
                        "limits" => config.limits = map.next_value()?,
                        "containment" => config.containment = map.next_value()?,
                        "artifacts" => config.artifacts = map.next_value()?,
                        "jobs" => config.jobs = map.next_value()?,
                        "policy" => config.policy = map.next_value()?,
                        "rules" => config.rules = map.next_value()?,
                        "tools" => config.tools = map.next_value()?,
                        "export" => config.export = map.next_value()?,
                        "agents" => config.agents = map.next_value()?,
                        other => match SurfaceName::parse(other) {
                            Some(surface) => {
                                config.surfaces.insert(surface, map.next_value()?);
                            }
                            None => {
                                let valid: Vec<&str> = DAEMON_SECTIONS
                                    .iter()
                                    .copied()
                                    .chain(SurfaceName::ALL.iter().map(|s| s.as_str()))
                                    .collect();
                                return Err(serde::de::Error::custom(format!(
                                    "unknown section `{other}`, expected one of {}",
                                    valid.join(", ")
                                )));
                            }
                        },
                    }
                }
                Ok(config)
            }
        }
        deserializer.deserialize_map(Sections)
    }
}

// Written back section by section in the order the file is read, each surface's own section
// after the daemon's; the line numbers are the reader's, not part of the config.
impl Serialize for Config {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("server", &self.server)?;
        map.serialize_entry("defaults", &self.defaults)?;
        map.serialize_entry("approval", &self.approval)?;
        map.serialize_entry("limits", &self.limits)?;
        map.serialize_entry("containment", &self.containment)?;
        map.serialize_entry("artifacts", &self.artifacts)?;
        map.serialize_entry("jobs", &self.jobs)?;
        map.serialize_entry("policy", &self.policy)?;
        if !self.rules.is_empty() {
            map.serialize_entry("rules", &self.rules)?;
        }
        map.serialize_entry("tools", &self.tools)?;
        map.serialize_entry("export", &self.export)?;
        if !self.agents.is_empty() {
            map.serialize_entry("agents", &self.agents)?;
        }
        for (surface, section) in &self.surfaces {
            map.serialize_entry(surface.as_str(), section)?;
        }
        map.end()
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

/// Written in the largest unit that holds it exactly (`120s` as `2m`), as a person writes it.
impl Serialize for DurationText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ms = self.0.as_millis();
        let (number, unit) = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ]
        .into_iter()
        .find(|(unit_ms, _)| ms > 0 && ms.is_multiple_of(*unit_ms))
        .map_or((ms, "ms"), |(unit_ms, unit)| (ms / unit_ms, unit));
        serializer.collect_str(&format_args!("{number}{unit}"))
    }
}

/// A glob's characters written back as the text they were read from (`policy::Glob`).
pub(crate) fn chars_text<S: serde::Serializer>(
    chars: &[char],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&chars.iter().collect::<String>())
}

/// A regex written back as the text it was compiled from (`policy::Pattern`).
pub(crate) fn regex_text<S: serde::Serializer>(
    regex: &regex::Regex,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(regex.as_str())
}

pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    // A duration too long to hold is not one (it would otherwise wrap round to a short one).
    number.checked_mul(unit_ms).map(Duration::from_millis)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// How runs are contained (see `computer_surfaces::kit::contain`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainmentSection {
    pub mode: ContainmentMode,
    /// Login files (`~/.bashrc`, `/etc/profile.d`, ... as containment lists them) that runs may
    /// write after all: each named here is left writable; every other stays read-only in runs.
    pub login_files_writable: Vec<std::path::PathBuf>,
}

/// `on` (the default): every run is contained, and refused where containment cannot be set up.
/// `off`: runs can reach the daemon's state, config and sockets; every receipt says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentMode {
    #[default]
    On,
    Off,
}

/// Per-agent rate limit: at most `calls` in any sliding `window` (0 calls = no limit); and the
/// bounds of a multi-step call: `max_steps` steps, all done within `steps_timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    pub calls: u32,
    pub window: DurationText,
    pub max_steps: usize,
    pub steps_timeout: DurationText,
}

impl LimitsConfig {
    pub fn steps(&self) -> StepLimits {
        StepLimits {
            max_steps: self.max_steps,
            deadline: self.steps_timeout.0,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let steps = StepLimits::default();
        LimitsConfig {
            calls: 0,
            window: DurationText(Duration::from_secs(60)),
            max_steps: steps.max_steps,
            steps_timeout: DurationText(steps.deadline),
        }
    }
}

/// Bounds on multi-step calls (`[limits] max_steps` and `steps_timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepLimits {
    /// Most steps one call may carry.
    pub max_steps: usize,
    /// Deadline for all steps of a call together (the first approval's wait not counted); a
    /// call's `timeout_ms` may shorten it, never lengthen it.
    pub deadline: Duration,
}

impl Default for StepLimits {
    fn default() -> Self {
        StepLimits {
            max_steps: 32,
            deadline: Duration::from_secs(120),
        }
    }
}

/// How many jobs an agent may run, and how long finished jobs' results are kept (`[jobs]` in
/// the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Jobs one agent may have running at once; a detached call past it is refused.
    pub max_running: usize,
    /// At most this many finished jobs, the oldest dropped first.
    pub keep: usize,
    /// Each for at most this long after it ended.
    pub keep_for: Duration,
}

impl Default for JobLimits {
    fn default() -> Self {
        // A kept result holds its outputs' heads and tails in memory (up to 2 x `[shell]
        // capture_memory_bytes`, 2 MiB by default): 32 of them stay within 64 MiB.
        JobLimits {
            max_running: 16,
            keep: 32,
            keep_for: Duration::from_secs(3600),
        }
    }
}

/// Room for artifacts (spilled outputs, screenshots, evidence), shared by every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// `[jobs]`: how many detached jobs an agent may run at once (0 turns `detach` off), and how
/// many finished ones keep their results, for how long; after that `job result` says the result
/// expired (the receipts keep the outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    pub max_running: usize,
    pub keep_finished: usize,
    pub keep_for: DurationText,
}

impl Default for JobsConfig {
    fn default() -> Self {
        let limits = JobLimits::default();
        JobsConfig {
            max_running: limits.max_running,
            keep_finished: limits.keep,
            keep_for: DurationText(limits.keep_for),
        }
    }
}

impl JobsConfig {
    pub fn limits(&self) -> JobLimits {
        JobLimits {
            max_running: self.max_running,
            keep: self.keep_finished,
            keep_for: self.keep_for.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// The policy the daemon runs with: the config's rules, defaults and loader variables, and
    /// the daemon's protected paths. `policy explain` builds it the same way. (Here rather than
    /// in `policy.rs`, so that policy never imports the config that imports it.)
    pub fn rule_policy(&self, protected: &[std::path::PathBuf]) -> RulePolicy {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        RulePolicy {
            defaults: self.defaults.clone(),
            rules: self.rules.clone(),
            protected: protected.to_vec(),
            loader_env: self.policy.loader_env.clone(),
            login_files: computer_surfaces::kit::contain::login_paths(
                home.as_deref(),
                &self.containment.login_files_writable,
            ),
            home,
        }
    }

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
        let mut config: Config = toml::from_str(text).map_err(|err| ConfigError::Invalid {
            path: origin.to_string(),
            message: err.to_string().trim_end().to_string(),
        })?;
        config.surface_lines = key_lines(text, &config.surfaces);
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
        if self.limits.max_steps == 0 || self.limits.steps_timeout.0.is_zero() {
            return Err("limits.max_steps and limits.steps_timeout must be more than 0".into());
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
        if self.server.max_connections == 0 {
            return Err("server.max_connections must be at least 1".into());
        }
        self.export.check()
    }

    pub fn surface_limits(&self) -> SurfaceLimits {
        // Containment is set up by the daemon itself (`serve`), which knows the paths to hide.
        SurfaceLimits::default()
    }

    /// The surfaces of this platform, each given its section of this config.
    pub fn registry(&self, origin: &str, limits: &SurfaceLimits) -> Result<Registry, ConfigError> {
        let registry = Registry::for_this_platform(limits);
        registry.configure(&self.surfaces).map_err(|err| {
            let line = err
                .key
                .split(['.', '['])
                .next()
                .and_then(|key| self.surface_lines.get(&format!("{}.{key}", err.surface)));
            ConfigError::Invalid {
                path: origin.to_string(),
                message: match line {
                    Some(line) => format!("line {line}: {err}"),
                    None => err.to_string(),
                },
            }
        })?;
        Ok(registry)
    }
}

/// The line of each key written under a surface's `[name]` header (`name.key` → 1-based line).
/// A plain scan: keys written another way (dotted, inline tables) are simply not found, and their
/// errors name the key without a line.
fn key_lines(text: &str, surfaces: &BTreeMap<SurfaceName, toml::Table>) -> BTreeMap<String, usize> {
    let mut lines = BTreeMap::new();
    let mut section: Option<&str> = None;
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.trim_end_matches(']').trim();
            section = surfaces
                .keys()
                .map(|s| s.as_str())
                .find(|surface| *surface == name);
            continue;
        }
        if let (Some(surface), Some((key, _))) = (section, line.split_once('=')) {
            let key = key.trim().trim_matches('"');
            lines.entry(format!("{surface}.{key}")).or_insert(index + 1);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_too_long_to_hold_is_refused_not_wrapped() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2d"), Some(Duration::from_secs(2 * 86_400)));
        assert_eq!(parse_duration("213503982334602d"), None);
        assert_eq!(parse_duration("18446744073709551615s"), None);
        let err = Config::parse("[approval]\ntimeout = \"213503982334602d\"\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a duration"), "{err}");
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(Config::parse("", "t").unwrap(), Config::default());
    }

    /// What the config reference shows is the config rendered back as TOML: it must read back
    /// as the same config, rules, sinks, surface sections and odd durations included.
    #[test]
    fn a_config_rendered_as_toml_reads_back_the_same() {
        let default = toml::to_string_pretty(&Config::default()).unwrap();
        assert_eq!(
            Config::parse(&default, "rendered").unwrap(),
            Config::default()
        );
        assert!(default.contains("timeout = \"2m\""), "{default}");
        let written = Config::parse(
            r#"
            [approval]
            timeout = "1500ms"
            [limits]
            window = "90s"
            [[rules]]
            surface = "shell"
            argv0 = ["rm"]
            glob = "rm -rf *"
            regex = "^sudo\\b"
            env = ["LD_*"]
            decision = "deny"
            [tools.agent.ci]
            allow = ["gui.click"]
            [export]
            syslog = "tcps://logs.example:6514"
            otlp = "http://127.0.0.1:4318/v1/logs"
            [shell]
            max_timeout_ms = 900000
            "#,
            "written",
        )
        .unwrap();
        let rendered = toml::to_string_pretty(&written).unwrap();
        let mut read_back = Config::parse(&rendered, "rendered").unwrap();
        read_back.surface_lines = written.surface_lines.clone();
        assert_eq!(read_back, written, "{rendered}");
        assert!(rendered.contains("timeout = \"1500ms\""), "{rendered}");
    }

    #[test]
    fn errors_name_line_and_key() {
        let err = Config::parse(
            "[server]\nread_timeout_ms = 5\nmax_conections = 9\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("max_conections"), "{err}");
        assert!(err.contains("max_connections"), "lists valid keys: {err}");
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

    /// A surface's section is the surface's to check: its errors name the section and the key.
    fn surface_error(toml: &str) -> String {
        let config = Config::parse(toml, "c").unwrap();
        match config.registry("c", &SurfaceLimits::default()) {
            Ok(_) => String::new(),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn a_surface_section_error_names_its_key() {
        let err = surface_error("[shell]\ndefault_timeout_ms = 50\nmax_timeout_ms = 10\n");
        assert!(
            err.contains("[shell] default_timeout_ms") && err.contains("over max_timeout_ms"),
            "{err}"
        );
        let err = surface_error("[server]\nread_timeout_ms = 5\n[shell]\nmax_timeot_ms = 9\n");
        assert!(
            err.contains("line 4")
                && err.contains("[shell] max_timeot_ms")
                && err.contains("max_timeout_ms"),
            "names the line, the key and the valid ones: {err}"
        );
        let err = surface_error("[shell]\ncapture_memory_bytes = \"lots\"\n");
        assert!(err.contains("[shell] capture_memory_bytes"), "{err}");
        let err = surface_error("[gui]\nzoom = 2\n");
        assert!(
            err.contains("[gui] zoom") && err.contains("terminal_apps"),
            "names the key and the valid one: {err}"
        );
        let err = surface_error("[gui]\nterminal_apps = [\"xterm\", \" \"]\n");
        assert!(
            err.contains("line 2")
                && err.contains("[gui] terminal_apps[1]")
                && err.contains("empty"),
            "{err}"
        );
        assert_eq!(surface_error("[gui]\nterminal_apps = [\"myterm\"]\n"), "");
        let err = surface_error("[gui]\nperson_quiet_ms = 90000\n");
        assert!(
            err.contains("[gui] person_quiet_ms") && err.contains("at most 60000"),
            "{err}"
        );
        assert_eq!(
            surface_error("[gui]\nyield_to_person = false\nperson_quiet_ms = 500\n"),
            ""
        );

        assert_eq!(surface_error("[shell]\nmax_timeout_ms = 900000\n"), "");
        // A section that is not a surface's nor the daemon's is refused where it stands.
        let err = Config::parse("[shel]\nx = 1\n", "c")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1") && err.contains("shell"), "{err}");
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
