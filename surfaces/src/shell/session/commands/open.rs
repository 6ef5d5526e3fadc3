//! `shell open`: starts a program (a login shell unless the args name one) contained on a pty
//! of its own, as a session the caller drives with the other session commands.

use std::collections::BTreeMap;
use std::ffi::OsString;

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use portable_pty::PtySize;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::super::{SHELLS, State, start_reader, term, watch_exit, watch_idle, watch_run};
use super::*;
use crate::kit::command_line::Line;
use crate::kit::contain::ExecSpec;
use crate::kit::secret_store::SecretRef;
use crate::kit::secrets::CallSecrets;
use crate::receipt_value;

// `shell open`'s args. Doc comments here are the tool description's text (`schema.rs`).
/// cwd/env/secrets/sandbox as for run
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenArgs {
    /// none: a login shell
    #[serde(default)]
    argv: Option<Vec<String>>,
    /// =24
    #[serde(default = "default_rows")]
    rows: u16,
    /// =80
    #[serde(default = "default_cols")]
    cols: u16,
}

fn default_rows() -> u16 {
    24
}

fn default_cols() -> u16 {
    80
}

/// A checked `shell open`.
pub(super) struct Open {
    sessions: Arc<Sessions>,
    argv: Vec<String>,
    /// The login shell was asked for (no argv).
    login: bool,
    rows: u16,
    cols: u16,
    cwd: Option<PathBuf>,
    env: BTreeMap<String, String>,
    /// Variables whose values are secrets, resolved when the session starts.
    secrets: Vec<(String, SecretRef)>,
    limits: StartLimits,
    sandbox: RunLimits,
}

impl Command for Open {
    const NAME: &'static str = "open";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &["session", "program", "rows", "cols"];
    const STARTS_A_PROGRAM: bool = true;
    type Args = OpenArgs;

    fn prepare(args: OpenArgs, call: Preparing<'_>) -> Result<Box<dyn PreparedAction>, ToolError> {
        Ok(Box::new(prepare_open(args, call)?))
    }
}

fn prepare_open(args: OpenArgs, call: Preparing<'_>) -> Result<Open, ToolError> {
    let Preparing {
        sessions,
        complications,
        limits,
        cwd,
        sandbox,
        ..
    } = call;
    check_size(args.rows, args.cols)?;
    let secrets = crate::kit::secrets::env_secrets(complications)?;
    let (argv, login) = match args.argv {
        Some(argv) => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(ToolError::invalid("argv must name a program").at("args.argv"));
            }
            if let Some(i) = argv.iter().position(|w| w.contains('\0')) {
                return Err(ToolError::invalid("arguments cannot contain NUL bytes")
                    .at(format!("args.argv[{i}]")));
            }
            (argv, false)
        }
        None => (vec![login_shell(&limits.base_env), "-l".into()], true),
    };
    Ok(Open {
        sessions,
        argv,
        login,
        rows: args.rows,
        cols: args.cols,
        cwd,
        env: complications.env.clone(),
        secrets,
        limits,
        sandbox,
    })
}

/// The person's shell: `$SHELL` of the environment runs get, else bash, else sh.
fn login_shell(env: &BTreeMap<OsString, OsString>) -> String {
    env.get(&OsString::from("SHELL"))
        .and_then(|s| s.to_str())
        .filter(|s| s.starts_with('/') && std::path::Path::new(s).exists())
        .map(str::to_string)
        .unwrap_or_else(|| {
            if std::path::Path::new("/bin/bash").exists() {
                "/bin/bash".into()
            } else {
                "/bin/sh".into()
            }
        })
}

#[async_trait]
impl PreparedAction for Open {
    fn risk(&self) -> Risk {
        if self.secrets.is_empty() {
            Risk::Act
        } else {
            Risk::Secret
        }
    }

    fn describe(&self) -> String {
        let what = if self.login {
            format!(
                "open a terminal session with a login shell ({})",
                self.argv[0]
            )
        } else {
            format!("open a terminal session running {:?}", self.argv)
        };
        match &self.cwd {
            Some(cwd) => format!("{what} in {}", cwd.display()),
            None => what,
        }
    }

    fn facts(&self) -> ActionFacts {
        // A shell's input is the terminal, whose every line is decided when it is sent: at
        // open, it has read nothing yet.
        let found = crate::kit::script::argv_commands(&self.argv, Some(""));
        ActionFacts {
            programs: found.programs,
            argv: Some(self.argv.clone()),
            opaque: found.opaque,
            env: self.env.clone(),
            script_env: found.assigned,
            cwd: self.cwd.clone(),
            words: found.words,
            args: Some(json!({
                "argv": receipt_value(&json!(self.argv)),
                "rows": self.rows,
                "cols": self.cols,
            })),
            secrets: crate::kit::secrets::env_uses(&self.secrets),
            ..ActionFacts::default()
        }
    }

    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        let settings = self.sessions.settings();
        let reservation = self.sessions.reserve(&ctx.agent)?;
        let id = reservation.id;
        let (env, resolved) = self.program_env(&ctx).await?;
        let mut exec = self.exec_spec(env)?;
        let cwd = crate::kit::one_shot::start_dir(self.cwd.as_deref());
        let size = PtySize {
            rows: self.rows,
            cols: self.cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        let marker = format!("{}-{id}", ctx.call_id);
        let spawned = pty::spawn(
            &self.limits.containment,
            &self.sandbox,
            &exec,
            &cwd,
            size,
            &marker,
        );
        crate::kit::spawn::zero_secret_env(&mut exec, self.secrets.iter().map(|(name, _)| name));
        let spawned = spawned?;
        let (changed, _) = watch::channel(0u64);
        let program_name = crate::kit::script::file_name(&self.argv[0]).trim_start_matches('-');
        let session = Arc::new(Session {
            id,
            owner: ctx.agent.clone(),
            argv: self.argv.clone(),
            shell: SHELLS.contains(&program_name),
            state: Mutex::new(State {
                term: term::Terminal::new(self.rows, self.cols, settings.log_bytes),
                eof: false,
                line: Line::default(),
                answers: Vec::new(),
                generation: 0,
                read_cursor: 0,
            }),
            changed,
            writer: Arc::new(Mutex::new(spawned.writer)),
            master: Mutex::new(spawned.master),
            process: spawned.process,
            last_used: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            closed: CancellationToken::new(),
            secrets: CallSecrets::default(),
        });
        // Before the reader starts: no byte of output is logged unmasked.
        session.hold_secrets(resolved);
        start_reader(&session, spawned.reader);
        watch_exit(&session);
        reservation.open(session.clone());
        watch_idle(&self.sessions, &session);
        if let Some(run_ended) = &ctx.run_ended {
            watch_run(&self.sessions, &session, run_ended.clone());
        }

        let mut fields = Map::new();
        fields.insert("session".into(), json!(id));
        fields.insert("program".into(), json!(self.argv));
        fields.insert("rows".into(), json!(self.rows));
        fields.insert("cols".into(), json!(self.cols));
        let mut receipt = Map::new();
        receipt.insert("session".into(), json!(id));
        receipt.insert(
            "containment".into(),
            json!(self.limits.containment.status()),
        );
        Ok(Outcome {
            success: true,
            fields,
            receipt,
            ..Outcome::default()
        })
    }
}

impl Open {
    /// The program's environment: the one every run gets, the terminal's, the call's `env`, and
    /// its secrets, resolved only now (after policy and approval); the resolved values beside
    /// it, for the session to mask its output with from its first byte on.
    async fn program_env(
        &self,
        ctx: &CallContext,
    ) -> Result<(BTreeMap<OsString, OsString>, Vec<(String, SecretString)>), SurfaceError> {
        let mut env = self.limits.base_env.clone();
        env.insert("TERM".into(), "xterm-256color".into());
        // What an agent types into a shell, a secret at a prompt included, stays out of the
        // person's shell history (bash and zsh save none without a HISTFILE), unless `env`
        // names one.
        env.insert("HISTFILE".into(), "".into());
        for (key, value) in &self.env {
            env.insert(key.into(), value.into());
        }
        let mut resolved = Vec::new();
        for (name, reference) in &self.secrets {
            let value = ctx.secrets.resolve_blocking(name, reference).await?;
            env.insert(name.into(), value.expose_secret().to_string().into());
            resolved.push((name.clone(), value));
        }
        Ok((env, resolved))
    }

    /// What to execute: the program found on the environment's `PATH`, its argv and `env`.
    fn exec_spec(&self, env: BTreeMap<OsString, OsString>) -> Result<ExecSpec, SurfaceError> {
        let path_var = env
            .get(&OsString::from("PATH"))
            .and_then(|p| p.to_str())
            .unwrap_or_default()
            .to_string();
        let program =
            crate::kit::spawn::resolve_program(&self.argv[0], &path_var).ok_or_else(|| {
                SurfaceError::Failed {
                    message: format!(
                        "command not found: `{}` (not an existing path, nor on PATH={path_var})",
                        self.argv[0]
                    ),
                }
            })?;
        Ok(ExecSpec {
            program,
            argv: self.argv.iter().map(OsString::from).collect(),
            env: env.into_iter().collect(),
        })
    }
}
