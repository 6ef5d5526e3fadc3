//! The daemon's configuration: embedded defaults, optionally overridden by a TOML file whose errors
//! name the line and key.

use std::path::Path;
use std::time::Duration;

use computer_surfaces::SurfaceLimits;
use computer_surfaces::capture::CaptureLimits;
use computer_surfaces::shell::ShellLimits;
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub shell: ShellConfig,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Largest request line accepted; a longer one closes the connection.
    pub max_request_bytes: usize,
    /// How long in-flight calls may run on after SIGINT/SIGTERM.
    pub shutdown_grace_ms: u64,
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
    fn inconsistent_values_are_refused() {
        let err = Config::parse(
            "[shell]\ndefault_timeout_ms = 50\nmax_timeout_ms = 10\n",
            "c",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("over shell.max_timeout_ms"), "{err}");
    }
}
