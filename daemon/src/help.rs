//! The `help` command every surface offers: the daemon answers it with the surface's full
//! reference (each command's args, risk and result fields, the complications it honours, what a
//! result and an error hold), so that the tool definition can stay short. It is a call like any
//! other (decided, receipted, budgeted); its answer depends only on this build and what is ready.

use std::sync::Arc;

use computer_ipc::ToolError;
use computer_surfaces::{
    ActionFacts, CallContext, CapturedText, CommandSpec, Outcome, PreparedAction, Registry, Risk,
    Surface, SurfaceError, decode_args,
};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The command, on every surface, that returns the surface's reference.
pub const HELP_COMMAND: &str = "help";

/// What a `help` reply holds.
pub const RESULT_FIELDS: &[&str] = &["help"];

/// `{}` for the whole surface, or one command.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct HelpArgs {
    /// only this command
    #[serde(default)]
    command: Option<String>,
}

pub fn command_spec() -> CommandSpec {
    CommandSpec::of::<HelpArgs>(HELP_COMMAND, Risk::Observe)
}

/// A `help` call, checked: an unknown command is refused here with the surface's commands.
pub fn prepare(
    registry: &Registry,
    surface: &Arc<dyn Surface>,
    args: &Map<String, Value>,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    let args: HelpArgs = decode_args(args)?;
    let text = crate::schema::help_text(registry, surface.as_ref(), args.command.as_deref())?;
    Ok(Box::new(Help {
        describe: match &args.command {
            Some(command) => format!("read the help of {}.{command}", surface.name()),
            None => format!("read the help of the {} surface", surface.name()),
        },
        text,
    }))
}

struct Help {
    describe: String,
    text: String,
}

#[async_trait::async_trait]
impl PreparedAction for Help {
    fn risk(&self) -> Risk {
        Risk::Observe
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn facts(&self) -> ActionFacts {
        ActionFacts::default()
    }

    async fn run(self: Box<Self>, _ctx: CallContext) -> Result<Outcome, SurfaceError> {
        Ok(Outcome {
            success: true,
            texts: vec![CapturedText::from_bytes(
                HELP_COMMAND,
                self.text.into_bytes(),
            )],
            ..Outcome::default()
        })
    }
}
