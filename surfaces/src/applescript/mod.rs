//! The applescript surface (macOS): `run` AppleScript or JavaScript for Automation through
//! `osascript`, from source text or a file, with arguments passed as values to the script's `run`
//! handler; the run itself is a one-shot run of `osascript` ([`crate::kit::one_shot`], as `shell run`'s:
//! containment, process group, deadline, bounded capture), and its facts name the applications
//! the source targets.
//!
//! # Layout
//! - `mod.rs`: the surface: args, the `osascript` command line, facts, privacy refusals.
//! - [`targets`]: which applications a source sends Apple events to (a pure reader).
//! - [`refusal`]: Automation and Accessibility refusals in osascript's errors (pure).
//! - `permissions` (macOS): the privacy permissions this process holds, for `computer doctor`.
//!
//! Everything but `permissions` is platform-neutral and unit-tested on Linux (with a stand-in for
//! `osascript`); the registry offers the surface on macOS only.

#[cfg(target_os = "macos")]
pub mod permissions;
pub mod refusal;
pub mod targets;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use computer_ipc::{Complications, SurfaceName, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::kit::one_shot;
use crate::kit::run_env::ShellLimits;
use crate::{
    ActionFacts, Availability, CallContext, CommandSpec, Outcome, PreparedAction, Risk, Surface,
    SurfaceError, decode_args, receipt_value,
};
use targets::Targets;

/// Where macOS keeps osascript.
pub const OSASCRIPT: &str = "/usr/bin/osascript";

/// The largest script file read (scripts are text; a bigger file is a mistake).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// How a compiled script (`.scpt`) starts; its text cannot be read before it runs.
const COMPILED_MAGIC: &[u8] = b"FasdUAS";

const COMMANDS: &[CommandSpec] = &[CommandSpec::of::<RunArgs>("run", Risk::Act)];

/// The language of a script.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    AppleScript,
    /// JavaScript for Automation (JXA).
    JavaScript,
}

impl Language {
    /// The name `osascript -l` takes.
    fn osa_name(self) -> &'static str {
        match self {
            Language::AppleScript => "AppleScript",
            Language::JavaScript => "JavaScript",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Language::AppleScript => "AppleScript",
            Language::JavaScript => "JavaScript for Automation",
        }
    }
}

// `applescript run`'s args. Doc comments here are the tool description's text (`schema.rs`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// or file
    #[serde(default)]
    source: Option<String>,
    /// (absolute path)
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    language: Option<Language>,
    /// (values for `on run argv` / `function run(argv)`)
    #[serde(default)]
    argv: Vec<String>,
}

pub struct AppleScriptSurface {
    /// What each run of `osascript` is started under (the shell surface's limits).
    limits: ShellLimits,
    osascript: PathBuf,
    /// The daemon's own places (config, state, sockets), which `file` may not name: the daemon
    /// reads a script file itself, outside the run's containment.
    daemon_paths: Vec<PathBuf>,
}

impl AppleScriptSurface {
    pub fn new(limits: ShellLimits) -> Self {
        use computer_ipc::paths;
        let config = paths::config_path();
        let mut daemon_paths = vec![config.clone(), paths::state_dir()];
        daemon_paths.extend(config.parent().map(Path::to_path_buf));
        for socket in [paths::socket_path(), paths::control_socket_path()] {
            daemon_paths.extend(socket.parent().map(Path::to_path_buf));
        }
        Self::with_osascript(limits, OSASCRIPT, daemon_paths)
    }

    /// With another `osascript` and daemon paths (the unit tests' stand-ins on Linux).
    pub fn with_osascript(
        limits: ShellLimits,
        osascript: impl Into<PathBuf>,
        daemon_paths: Vec<PathBuf>,
    ) -> Self {
        let mut canonical: Vec<PathBuf> = Vec::new();
        for path in daemon_paths {
            canonical.extend(path.canonicalize().ok());
            canonical.push(path);
        }
        AppleScriptSurface {
            limits,
            osascript: osascript.into(),
            daemon_paths: canonical,
        }
    }
}

/// What the call runs: text (read from `source` or a file) or a compiled script.
enum Script {
    Text {
        language: Language,
        text: String,
        file: Option<PathBuf>,
    },
    Compiled {
        file: PathBuf,
        copy: PrivateCopy,
    },
}

#[async_trait]
impl Surface for AppleScriptSurface {
    fn name(&self) -> SurfaceName {
        SurfaceName::Applescript
    }

    fn backend(&self) -> &'static str {
        "osascript (AppleScript and JXA)"
    }

    fn needs_desktop(&self) -> bool {
        true
    }

    fn complications(&self) -> &'static [&'static str] {
        one_shot::complications()
    }

    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
    }

    fn probe(&self) -> Availability {
        if let unavailable @ Availability::Unavailable { .. } = one_shot::probe(&self.limits) {
            return unavailable;
        }
        if self.osascript.is_file() {
            Availability::Ready
        } else {
            Availability::Unavailable {
                reason: format!("{} does not exist", self.osascript.display()),
                fix: "osascript is part of macOS; the applescript surface runs only there".into(),
            }
        }
    }

    fn result_fields(&self, _command: &str) -> &'static [&'static str] {
        one_shot::RUN_FIELDS
    }

    fn prepare(
        &self,
        command: &str,
        args: &Map<String, Value>,
        complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        if command != "run" {
            return Err(
                ToolError::invalid(format!("unknown applescript command `{command}`"))
                    .at("command")
                    .valid(COMMANDS.iter().map(|c| c.name)),
            );
        }
        let run: RunArgs = decode_args(args)?;
        if let Some(i) = run.argv.iter().position(|a| a.contains('\0')) {
            return Err(ToolError::invalid("arguments cannot contain NUL bytes")
                .at(format!("args.argv[{i}]")));
        }
        let script = match (run.source, run.file) {
            (Some(text), None) => {
                if text.trim().is_empty() {
                    return Err(ToolError::invalid("source is empty").at("args.source"));
                }
                if text.contains('\0') {
                    return Err(
                        ToolError::invalid("source cannot contain NUL bytes").at("args.source")
                    );
                }
                Script::Text {
                    language: run.language.unwrap_or_default(),
                    text,
                    file: None,
                }
            }
            (None, Some(file)) => read_script(Path::new(&file), run.language, &self.daemon_paths)?,
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid("give either source or file, not both")
                    .at("args")
                    .valid(["source", "file"]));
            }
            (None, None) => {
                return Err(ToolError::invalid("applescript run needs source or file")
                    .at("args")
                    .valid(["source", "file"]));
            }
        };
        let (targets, osascript_argv) = match &script {
            Script::Text { language, text, .. } => (
                targets::targets(*language, text),
                // `--` ends osascript's options: an argument such as `-e` stays a value for the
                // run handler, never an option or more source.
                vec![
                    "-l".to_string(),
                    language.osa_name().to_string(),
                    "-e".to_string(),
                    text.clone(),
                    "--".to_string(),
                ],
            ),
            Script::Compiled { copy, .. } => (
                Targets {
                    apps: Vec::new(),
                    opaque: Some(
                        "a compiled script cannot be read before it runs, so its targets are \
                         not known"
                            .into(),
                    ),
                },
                vec!["--".to_string(), copy.path().display().to_string()],
            ),
        };
        let mut argv = vec![self.osascript.display().to_string()];
        argv.extend(osascript_argv);
        argv.extend(run.argv.iter().cloned());
        // The run itself is a one-shot run of osascript, as `shell run`'s: the same checks of
        // cwd, env and timeout, the same containment, deadline and capture.
        let mut run_args = Map::new();
        run_args.insert("argv".into(), json!(argv));
        let inner = Box::new(one_shot::prepare(&self.limits, &run_args, complications)?);
        Ok(Box::new(AppleScriptRun {
            inner,
            script,
            argv: run.argv,
            targets,
            receipt_args: receipt_value(&Value::Object(args.clone())),
        }))
    }
}

/// Reads a script file now, so that what policy and approvers see is what runs (a file changed
/// after the decision cannot change the run).
fn read_script(
    path: &Path,
    language: Option<Language>,
    daemon_paths: &[PathBuf],
) -> Result<Script, ToolError> {
    let at = "args.file";
    if !path.is_absolute() {
        return Err(ToolError::invalid(format!(
            "file `{}` is not an absolute path",
            path.display()
        ))
        .at(at));
    }
    let cannot = |err: std::io::Error| {
        ToolError::invalid(format!("file `{}` cannot be read: {err}", path.display())).at(at)
    };
    // Opened without blocking (a FIFO would stall the daemon), then judged by what was opened:
    // its real path, so no symlink or renamed folder leads the daemon into its own files.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(cannot)?
    };
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(ToolError::invalid(format!(
            "`{}` is not a file (script bundles, .scptd, are not supported: give the script inside, or its source)",
            path.display()
        ))
        .at(at));
    }
    match opened_path(&file) {
        Some(real) if !daemon_paths.iter().any(|own| real.starts_with(own)) => {}
        Some(_) => {
            return Err(ToolError::invalid(format!(
                "`{}` is one of this daemon's own files (its config, state or sockets); no \
                 script may be read from there",
                path.display()
            ))
            .at(at));
        }
        None => {
            return Err(ToolError::invalid(format!(
                "where `{}` really is cannot be told, so it is not read",
                path.display()
            ))
            .at(at));
        }
    }
    // Read with a bound: the file may grow between the look and the read.
    let mut bytes = Vec::new();
    {
        use std::io::Read;
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::invalid(format!(
            "file `{}` is over the {MAX_FILE_BYTES} bytes a script may have",
            path.display()
        ))
        .at(at));
    }
    if bytes.starts_with(COMPILED_MAGIC) || std::str::from_utf8(&bytes).is_err() {
        let copy = PrivateCopy::of(&bytes).map_err(|err| {
            ToolError::invalid(format!(
                "a private copy of `{}` could not be made to run: {err}",
                path.display()
            ))
            .at(at)
        })?;
        return Ok(Script::Compiled {
            file: path.to_path_buf(),
            copy,
        });
    }
    let text = String::from_utf8(bytes).unwrap_or_default();
    if text.contains('\0') {
        return Err(ToolError::invalid("the script cannot contain NUL bytes").at(at));
    }
    let by_extension = match path.extension().and_then(|e| e.to_str()) {
        Some("js" | "jxa") => Language::JavaScript,
        _ => Language::AppleScript,
    };
    Ok(Script::Text {
        language: language.unwrap_or(by_extension),
        text,
        file: Some(path.to_path_buf()),
    })
}

/// The path an open file really has, from the descriptor (not the name it was opened by).
fn opened_path(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "macos")]
    {
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: F_GETPATH writes at most PATH_MAX bytes, NUL-terminated, into `buf`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) };
        if rc == -1 {
            return None;
        }
        let end = buf.iter().position(|&b| b == 0)?;
        buf.truncate(end);
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(buf)))
    }
    #[cfg(not(target_os = "macos"))]
    {
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
}

/// A copy of a compiled script in a fresh private directory, removed with the action: the run
/// reads the bytes that were decided on, whatever happens to the original file meanwhile.
struct PrivateCopy {
    dir: PathBuf,
}

impl PrivateCopy {
    fn of(bytes: &[u8]) -> std::io::Result<PrivateCopy> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!(
            "computer-applescript-{}-{}-{stamp}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // `create` fails if the name exists: nobody else's directory is ever used.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let copy = PrivateCopy { dir };
        std::fs::write(copy.path(), bytes)?;
        Ok(copy)
    }

    fn path(&self) -> PathBuf {
        self.dir.join("script.scpt")
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A validated `applescript run`.
struct AppleScriptRun {
    inner: Box<dyn PreparedAction>,
    script: Script,
    argv: Vec<String>,
    targets: Targets,
    /// The args as the intent receipt records them (long sources cut).
    receipt_args: Value,
}

#[async_trait]
impl PreparedAction for AppleScriptRun {
    fn risk(&self) -> Risk {
        Risk::Act
    }

    /// Each target application is stated as a command of its own (`["Finder"]`), so rules match
    /// it with `argv0` or `glob`, and the source as the script, which deny and ask rules' `glob`
    /// and `regex` search. A source whose targets are not all known is opaque.
    fn facts(&self) -> ActionFacts {
        let osascript = self.inner.facts();
        ActionFacts {
            programs: self
                .targets
                .apps
                .iter()
                .map(|app| vec![app.clone()])
                .collect(),
            script: match &self.script {
                Script::Text { text, .. } => Some(text.clone()),
                Script::Compiled { .. } => None,
            },
            opaque: self.targets.opaque.clone(),
            env: osascript.env,
            cwd: osascript.cwd,
            args: Some(self.receipt_args.clone()),
            ..ActionFacts::default()
        }
    }

    fn describe(&self) -> String {
        let mut what = match &self.script {
            Script::Text {
                language,
                text,
                file,
            } => {
                let from = file
                    .as_ref()
                    .map(|f| format!(" from {}", f.display()))
                    .unwrap_or_default();
                format!("run {}{from} {text:?}", language.label())
            }
            Script::Compiled { file, .. } => {
                format!(
                    "run the compiled script {} (its text cannot be shown)",
                    file.display()
                )
            }
        };
        if !self.argv.is_empty() {
            what.push_str(&format!(" with argv {:?}", self.argv));
        }
        match (self.targets.apps.as_slice(), &self.targets.opaque) {
            (_, Some(_)) => what.push_str("; its target applications are not all known"),
            ([], None) => what.push_str("; it sends Apple events to no application"),
            (apps, None) => {
                what.push_str(&format!("; it sends Apple events to {}", apps.join(", ")))
            }
        }
        what
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let AppleScriptRun {
            inner,
            script,
            targets,
            ..
        } = *self;
        let mut outcome = inner.run(ctx).await?;
        // The private copy of a compiled script is no longer needed once osascript has ended.
        drop(script);
        let timed_out = outcome.fields.get("timed_out") == Some(&Value::Bool(true));
        if !outcome.success
            && !timed_out
            && let Some(stderr) = outcome.texts.iter().find(|t| t.name == "stderr")
            && let Some(refusal) =
                refusal::classify(&String::from_utf8_lossy(&stderr.head), &targets.apps)
        {
            return Err(SurfaceError::Failed {
                message: refusal.message(&targets.apps),
            });
        }
        outcome
            .receipt
            .insert("targets".into(), json!(targets.apps));
        if let Some(why) = targets.opaque {
            outcome.receipt.insert("opaque".into(), json!(why));
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::contain::{Containment, ContainmentConfig};
    use crate::{ArtifactQuota, ProtectedProcesses};
    use std::sync::Arc;

    /// A stand-in for osascript: prints each argument it got on a line of its own, or does what
    /// the `FAKE` variable says.
    const FAKE_OSASCRIPT: &str = r#"#!/bin/sh
case "$FAKE" in
  refuse) echo "0:44: execution error: Not authorized to send Apple events to Finder. (-1743)" >&2; exit 1 ;;
  fail) echo "0:5: execution error: The variable x is not defined. (-2753)" >&2; exit 1 ;;
  hang) sleep 60 & echo $! > "$PIDFILE"; wait; exit 0 ;;
esac
for arg in "$@"; do printf '%s\n' "$arg"; done
"#;

    struct Fixture {
        dir: tempfile::TempDir,
        surface: AppleScriptSurface,
    }

    /// Writes an executable through a child process. Written from here, a process another test
    /// thread forks at that moment inherits the open write descriptor, and exec of the file fails
    /// with ETXTBSY ("Text file busy") while that child lives; the child's descriptor is its own.
    fn write_executable(path: &Path, contents: &str) {
        use std::io::Write;
        let mut writer = std::process::Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        writer
            .stdin
            .take()
            .unwrap()
            .write_all(contents.as_bytes())
            .unwrap();
        assert!(writer.wait().unwrap().success(), "could not write {path:?}");
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("osascript");
        write_executable(&fake, FAKE_OSASCRIPT);
        let limits = ShellLimits {
            containment: Arc::new(Containment::new(&ContainmentConfig {
                enabled: false,
                hidden: Vec::new(),
                read_only: Vec::new(),
                shown: Vec::new(),
            })),
            ..ShellLimits::default()
        };
        let daemon_state = dir.path().join("daemon-state");
        std::fs::create_dir(&daemon_state).unwrap();
        Fixture {
            surface: AppleScriptSurface::with_osascript(limits, fake, vec![daemon_state]),
            dir,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn context(dir: &Path) -> CallContext {
        CallContext {
            call_id: "test".into(),
            artifact_dir: dir.to_path_buf(),
            protected: Arc::new(ProtectedProcesses::default()),
            cancel: tokio_util::sync::CancellationToken::new(),
            artifact_quota: Arc::new(ArtifactQuota::unlimited()),
            output_bytes: Arc::default(),
            secrets: Default::default(),
            agent: "default".into(),
            tools: None,
            run_ended: None,
            login_files_writable: Vec::new(),
        }
    }

    fn stdout_of(outcome: &Outcome) -> String {
        let text = outcome.texts.iter().find(|t| t.name == "stdout").unwrap();
        String::from_utf8_lossy(&text.head).into_owned()
    }

    fn error_of(result: Result<Box<dyn PreparedAction>, ToolError>) -> ToolError {
        match result {
            Ok(_) => panic!("the call was accepted"),
            Err(err) => err,
        }
    }

    /// An argument that looks like an option or like more source stays one value for the run
    /// handler; the source is passed whole, once.
    #[tokio::test]
    async fn arguments_reach_the_run_handler_as_values() {
        let f = fixture();
        let hostile = ["-e", "\" & (do shell script \"id\") & \"", "two words"];
        let source = "on run argv\n  return item 1 of argv\nend run";
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": source, "argv": hostile})),
                &Complications::default(),
            )
            .unwrap();
        let outcome = action.run(context(f.dir.path())).await.unwrap();
        assert!(outcome.success);
        let mut expected = vec!["-l", "AppleScript", "-e"];
        expected.extend(source.lines());
        expected.push("--");
        expected.extend(hostile);
        assert_eq!(stdout_of(&outcome).lines().collect::<Vec<_>>(), expected);
    }

    #[tokio::test]
    async fn javascript_from_a_file_is_read_before_the_decision() {
        let f = fixture();
        let file = f.dir.path().join("list.js");
        std::fs::write(
            &file,
            "function run(argv) { return Application('Finder').name() }",
        )
        .unwrap();
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"file": file})),
                &Complications::default(),
            )
            .unwrap();
        assert_eq!(action.facts().programs, [["Finder"]]);
        assert!(action.describe().contains("JavaScript for Automation from"));
        // A change after the decision does not change what runs.
        std::fs::write(&file, "Application('Mail').quit()").unwrap();
        let outcome = action.run(context(f.dir.path())).await.unwrap();
        let printed = stdout_of(&outcome);
        assert!(printed.contains("JavaScript") && printed.contains("Application('Finder')"));
        assert!(!printed.contains("Mail"), "{printed}");
    }

    #[tokio::test]
    async fn a_compiled_script_runs_from_a_private_copy_and_is_opaque() {
        let f = fixture();
        let file = f.dir.path().join("x.scpt");
        std::fs::write(&file, b"FasdUAS 1.101.10\x0e\x00\x00\x00\x04").unwrap();
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"file": file, "argv": ["a"]})),
                &Complications::default(),
            )
            .unwrap();
        let facts = action.facts();
        assert!(facts.opaque.unwrap().contains("compiled"));
        assert!(facts.programs.is_empty() && facts.script.is_none());
        let outcome = action.run(context(f.dir.path())).await.unwrap();
        let printed = stdout_of(&outcome);
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines[0], "--");
        assert!(lines[1].ends_with("script.scpt") && lines[1] != file.display().to_string());
        assert_eq!(lines[2], "a");
        assert!(
            !Path::new(lines[1]).exists(),
            "the private copy is removed after the run"
        );
    }

    #[tokio::test]
    async fn an_automation_refusal_says_which_app_and_where_to_grant_it() {
        let f = fixture();
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": "tell application \"Finder\" to get name"})),
                &Complications {
                    env: [("FAKE".to_string(), "refuse".to_string())].into(),
                    ..Complications::default()
                },
            )
            .unwrap();
        let err = action
            .run(context(f.dir.path()))
            .await
            .expect_err("an error");
        let message = err.to_string();
        assert!(
            message.contains("Apple events to Finder (-1743)"),
            "{message}"
        );
        assert!(
            message.contains("Privacy & Security ▸ Automation"),
            "{message}"
        );

        // An ordinary script error stays an ordinary failed run with osascript's words.
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": "x"})),
                &Complications {
                    env: [("FAKE".to_string(), "fail".to_string())].into(),
                    ..Complications::default()
                },
            )
            .unwrap();
        let outcome = action.run(context(f.dir.path())).await.unwrap();
        assert!(!outcome.success);
        assert_eq!(outcome.fields["exit_code"], json!(1));
    }

    /// The deadline kills osascript and what it started.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_deadline_kills_osascript_and_its_children() {
        let f = fixture();
        let pidfile = f.dir.path().join("child.pid");
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": "delay 60"})),
                &Complications {
                    env: [
                        ("FAKE".to_string(), "hang".to_string()),
                        ("PIDFILE".to_string(), pidfile.display().to_string()),
                    ]
                    .into(),
                    timeout_ms: Some(300),
                    ..Complications::default()
                },
            )
            .unwrap();
        let outcome = action.run(context(f.dir.path())).await.unwrap();
        assert_eq!(outcome.fields["timed_out"], json!(true));
        assert!(!outcome.success);
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        // Killed means gone or a zombie waiting for init; polled, as reaping is not ours.
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match std::fs::read_to_string(&stat) {
                Err(_) => break,
                Ok(s)
                    if s.rsplit(')')
                        .next()
                        .is_some_and(|rest| rest.trim_start().starts_with('Z')) =>
                {
                    break;
                }
                Ok(_) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the script's child survived"
                    );
                    std::thread::yield_now();
                }
            }
        }
    }

    #[test]
    fn bad_calls_name_the_field_and_the_choices() {
        let f = fixture();
        let none = Complications::default();
        let err = error_of(f.surface.prepare("run", &args(json!({})), &none));
        assert_eq!(err.path.as_deref(), Some("args"));
        let err = error_of(f.surface.prepare(
            "run",
            &args(json!({"source": "1", "file": "/x"})),
            &none,
        ));
        assert!(err.message.contains("not both"));
        let err = error_of(f.surface.prepare(
            "run",
            &args(json!({"source": "1", "language": "python"})),
            &none,
        ));
        assert_eq!(err.path.as_deref(), Some("args.language"));
        assert!(err.message.contains("applescript"), "{}", err.message);
        let err = error_of(
            f.surface
                .prepare("run", &args(json!({"file": "rel.scpt"})), &none),
        );
        assert!(err.message.contains("absolute"));
        let err = error_of(f.surface.prepare(
            "run",
            &args(json!({"source": "1", "argv": ["ok", "a\u{0}b"]})),
            &none,
        ));
        assert_eq!(err.path.as_deref(), Some("args.argv[1]"));
        let err = error_of(f.surface.prepare("compile", &args(json!({})), &none));
        assert_eq!(err.path.as_deref(), Some("command"));
        let err = error_of(f.surface.prepare(
            "run",
            &args(json!({"source": "1"})),
            &Complications {
                timeout_ms: Some(0),
                ..Complications::default()
            },
        ));
        assert_eq!(err.path.as_deref(), Some("complications.timeout_ms"));
    }

    /// The daemon reads a script file itself, outside any containment: its own files are
    /// refused however they are reached, an ordinary file beside them is read.
    #[test]
    fn a_file_in_the_daemons_own_places_is_refused() {
        let f = fixture();
        let none = Complications::default();
        let secret = f.dir.path().join("daemon-state/config.toml");
        std::fs::write(&secret, "token = \"do not show\"").unwrap();
        let link = f.dir.path().join("innocent.applescript");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let dotted = f
            .dir
            .path()
            .join("daemon-state/../daemon-state/config.toml");
        for path in [&secret, &link, &dotted] {
            let err = error_of(
                f.surface
                    .prepare("run", &args(json!({"file": path})), &none),
            );
            assert_eq!(err.path.as_deref(), Some("args.file"), "{}", path.display());
            assert!(
                err.message.contains("daemon's own files"),
                "{}",
                err.message
            );
            assert!(!err.message.contains("do not show"));
        }
        // A FIFO would block a reader that waits for a writer: refused without waiting.
        let fifo = f.dir.path().join("pipe.applescript");
        let c_path = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: mkfifo only creates the named pipe at a path in our temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let err = error_of(
            f.surface
                .prepare("run", &args(json!({"file": fifo})), &none),
        );
        assert!(err.message.contains("not a file"), "{}", err.message);

        let ordinary = f.dir.path().join("ok.applescript");
        std::fs::write(&ordinary, "tell application \"Finder\" to activate").unwrap();
        let action = f
            .surface
            .prepare("run", &args(json!({"file": ordinary})), &none)
            .unwrap();
        assert_eq!(action.facts().programs, [["Finder"]]);
    }

    #[test]
    fn facts_state_the_targets_for_policy() {
        let f = fixture();
        let none = Complications::default();
        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": "tell application \"System Events\" to get name of every process\ntell app \"Finder\" to activate"})),
                &none,
            )
            .unwrap();
        let facts = action.facts();
        assert_eq!(facts.programs, [["System Events"], ["Finder"]]);
        assert!(facts.opaque.is_none());
        assert!(facts.script.unwrap().contains("System Events"));
        assert_eq!(action.risk(), Risk::Act);
        assert!(
            action
                .describe()
                .ends_with("it sends Apple events to System Events, Finder")
        );

        let action = f
            .surface
            .prepare(
                "run",
                &args(json!({"source": "tell application \"Finder\" to do shell script \"id\""})),
                &none,
            )
            .unwrap();
        assert!(action.facts().opaque.unwrap().contains("do shell script"));
        assert!(action.describe().contains("not all known"));
    }
}
