//! The shell surface: `run`, a one-shot run of argv or a `/bin/sh -c` script (the run itself is
//! [`crate::kit::one_shot`]'s, shared with the applescript surface), its terminal sessions (in
//! [`session`]), and its `[shell]` config section.
//!
//! # Layout
//! - `session/`: terminal sessions, a program on a pty driven over several calls; its commands
//!   are listed once in `session/commands/`.

pub mod session;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::RwLock;

use crate::kit::capture::CaptureLimits;
use crate::kit::contain::DesktopReach;
use crate::kit::one_shot::{self, RUN_FIELDS, RunArgs};
use crate::kit::run_env::passed_env;
use crate::{Availability, CommandSpec, PreparedAction, Risk, SectionError, Surface};
use session::{SessionSettings, Sessions};

/// The limits of a run, set from the `[shell]` section; other crates and the registry name them
/// by the shell surface, whose config sets them.
pub use crate::kit::run_env::ShellLimits;

const RUN: CommandSpec = CommandSpec::of::<RunArgs>("run", Risk::Act);

/// `run`, then the terminal session commands.
static COMMANDS: [CommandSpec; 1 + session::COMMANDS.len()] = {
    let mut specs = [RUN; 1 + session::COMMANDS.len()];
    let mut i = 0;
    while i < session::COMMANDS.len() {
        specs[i + 1] = session::COMMANDS[i];
        i += 1;
    }
    specs
};

pub struct ShellSurface {
    /// Replaced by the `[shell]` config section (`configure`); shared with every desktop's
    /// shell made from this one, so a reload reaches them too.
    limits: Arc<RwLock<ShellLimits>>,
    /// Terminal sessions (`open`, `send`, ...), kept across calls.
    sessions: Arc<Sessions>,
    /// The desktop of an agent's own this shell starts programs on; `None`: the person's.
    desktop_env: Option<Arc<[(String, String)]>>,
    /// What its runs may reach of that desktop (its sockets): nothing else of the kind.
    desktop_reach: Option<DesktopReach>,
}

impl ShellSurface {
    pub fn new(limits: ShellLimits) -> Self {
        ShellSurface {
            limits: Arc::new(RwLock::new(limits)),
            sessions: Sessions::new(SessionSettings::default()),
            desktop_env: None,
            desktop_reach: None,
        }
    }

    /// The same shell (its limits and terminal sessions) starting its programs on a desktop of
    /// an agent's own, whose display and bus variables (`env`) replace the daemon's, and whose
    /// `sockets` (`AgentDesktop::sockets`) are all its runs reach of any display or session:
    /// the person's, and other desktops', are hidden from them.
    pub fn on_desktop(&self, env: &[(String, String)], sockets: &[PathBuf]) -> ShellSurface {
        ShellSurface {
            limits: self.limits.clone(),
            sessions: self.sessions.clone(),
            desktop_env: Some(env.into()),
            desktop_reach: Some(DesktopReach {
                own: sockets.to_vec(),
                person_buses: crate::kit::run_env::person_accessibility_bus()
                    .into_iter()
                    .collect(),
            }),
        }
    }

    fn limits(&self) -> ShellLimits {
        let mut limits = self
            .limits
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        limits.desktop_env = self.desktop_env.clone();
        limits.desktop_reach = self.desktop_reach.clone();
        limits
    }
}

/// The `[shell]` config section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ShellSection {
    default_timeout_ms: u64,
    max_timeout_ms: u64,
    /// Bytes of each output stream held in memory (head plus tail).
    capture_memory_bytes: usize,
    /// Bytes of each output stream written to its artifact file at most.
    spill_limit_bytes: u64,
    /// A terminal session nobody used for this long is closed.
    session_idle_ms: u64,
    /// Terminal sessions open at most.
    max_sessions: usize,
    /// Terminal sessions one agent may have open at most; half of `max_sessions` when unset.
    max_sessions_per_agent: Option<usize>,
    /// Output bytes each terminal session keeps for `read`.
    session_output_bytes: usize,
}

impl Default for ShellSection {
    fn default() -> Self {
        let limits = ShellLimits::default();
        let sessions = SessionSettings::default();
        ShellSection {
            default_timeout_ms: limits.default_timeout.as_millis() as u64,
            max_timeout_ms: limits.max_timeout.as_millis() as u64,
            capture_memory_bytes: limits.capture.memory_bytes,
            spill_limit_bytes: limits.capture.spill_bytes,
            session_idle_ms: sessions.idle.as_millis() as u64,
            max_sessions: sessions.max_sessions,
            max_sessions_per_agent: None,
            session_output_bytes: sessions.log_bytes,
        }
    }
}

impl ShellSection {
    fn check(&self) -> Result<(), (&'static str, String)> {
        if self.default_timeout_ms == 0 {
            return Err(("default_timeout_ms", "must be at least 1 ms".into()));
        }
        if self.max_timeout_ms == 0 {
            return Err(("max_timeout_ms", "must be at least 1 ms".into()));
        }
        if self.default_timeout_ms > self.max_timeout_ms {
            return Err((
                "default_timeout_ms",
                format!(
                    "{} is over max_timeout_ms ({})",
                    self.default_timeout_ms, self.max_timeout_ms
                ),
            ));
        }
        if self.capture_memory_bytes < 2 {
            return Err(("capture_memory_bytes", "must be at least 2".into()));
        }
        if self.session_idle_ms == 0 {
            return Err(("session_idle_ms", "must be at least 1 ms".into()));
        }
        if self.session_output_bytes == 0 {
            return Err(("session_output_bytes", "must be at least 1".into()));
        }
        match self.max_sessions_per_agent {
            Some(0) => {
                return Err((
                    "max_sessions_per_agent",
                    "must be at least 1 (to allow no sessions, deny `shell open` by a rule)".into(),
                ));
            }
            Some(cap) if cap > self.max_sessions => {
                return Err((
                    "max_sessions_per_agent",
                    format!("{cap} is over max_sessions ({})", self.max_sessions),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// The per-agent cap: as set, or half of all sessions (at least one).
    fn max_sessions_per_agent(&self) -> usize {
        self.max_sessions_per_agent
            .unwrap_or((self.max_sessions / 2).max(1))
    }
}

#[async_trait]
impl Surface for ShellSurface {
    fn name(&self) -> SurfaceName {
        SurfaceName::Shell
    }

    fn backend(&self) -> &'static str {
        "process group + pipes"
    }

    fn commands(&self) -> &'static [CommandSpec] {
        &COMMANDS
    }

    fn complications(&self) -> &'static [&'static str] {
        one_shot::complications()
    }

    fn configure(&self, section: &toml::Table) -> Result<(), SectionError> {
        let settings: ShellSection = SectionError::decode(SurfaceName::Shell, section)?;
        settings.check().map_err(|(key, message)| SectionError {
            surface: SurfaceName::Shell,
            key: key.into(),
            message,
        })?;
        let mut limits = self
            .limits
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        limits.default_timeout = Duration::from_millis(settings.default_timeout_ms);
        limits.max_timeout = Duration::from_millis(settings.max_timeout_ms);
        limits.capture = CaptureLimits {
            memory_bytes: settings.capture_memory_bytes,
            spill_bytes: settings.spill_limit_bytes,
        };
        self.sessions.configure(SessionSettings {
            idle: Duration::from_millis(settings.session_idle_ms),
            max_sessions: settings.max_sessions,
            max_sessions_per_agent: settings.max_sessions_per_agent(),
            log_bytes: settings.session_output_bytes,
        });
        Ok(())
    }

    fn probe(&self) -> Availability {
        one_shot::probe(&self.limits())
    }

    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        if command == RUN.name {
            RUN_FIELDS
        } else {
            session::result_fields(command)
        }
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        let limits = self.limits();
        if session::is_session_command(command) {
            return self.prepare_session(command, args, complications, &limits);
        }
        if command != RUN.name {
            return Err(
                ToolError::invalid(format!("unknown shell command `{command}`"))
                    .at("command")
                    .valid(COMMANDS.iter().map(|c| c.name)),
            );
        }
        Ok(Box::new(one_shot::prepare(&limits, args, complications)?))
    }
}

impl ShellSurface {
    /// Checks a terminal session command (`open`, `send`, ...): the session module does the
    /// rest.
    fn prepare_session(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
        limits: &ShellLimits,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        if complications.tools.as_ref().is_some_and(|t| t.wanted()) {
            return Err(ToolError::invalid(
                "tools are given to a `shell run` only: a terminal session outlives any one call, and a capability must die with its run",
            )
            .at("complications.tools"));
        }
        let start = session::StartLimits {
            on_desktop: limits.with_desktop(Default::default()).desktop,
            containment: limits.containment.clone(),
            base_env: passed_env(limits.desktop_env.as_deref()),
            max_wait: limits.max_timeout,
        };
        self.sessions.prepare(command, args, complications, start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> ShellSection {
        toml::from_str(text).expect("a [shell] section")
    }

    #[test]
    fn the_per_agent_session_cap_is_half_of_all_unless_set() {
        assert_eq!(section("").max_sessions_per_agent(), 8);
        assert_eq!(section("max_sessions = 6").max_sessions_per_agent(), 3);
        assert_eq!(section("max_sessions = 1").max_sessions_per_agent(), 1);
        let set = section("max_sessions = 6\nmax_sessions_per_agent = 6");
        assert!(set.check().is_ok());
        assert_eq!(set.max_sessions_per_agent(), 6);
    }

    #[test]
    fn a_per_agent_session_cap_of_none_or_over_all_is_refused_naming_the_key() {
        let (key, message) = section("max_sessions_per_agent = 0").check().unwrap_err();
        assert_eq!(key, "max_sessions_per_agent");
        assert!(message.contains("at least 1"), "{message}");
        let (key, message) = section("max_sessions = 4\nmax_sessions_per_agent = 5")
            .check()
            .unwrap_err();
        assert_eq!(key, "max_sessions_per_agent");
        assert_eq!(message, "5 is over max_sessions (4)");
    }
}
