//! The `help` command every surface offers: the daemon answers it with the surface's full
//! reference (each command's args, risk and result fields, the complications it honours, what a
//! result and an error hold), so that the tool definition can stay short. It is a call like any
//! other (decided, receipted, budgeted); its answer depends only on this build and what is ready.

use std::sync::Arc;

use computer_ipc::ToolError;
use computer_surfaces::{
    ActionFacts, CallContext, CapturedText, Outcome, PreparedAction, Registry, Risk, Surface,
    SurfaceError, decode_args,
};
use serde_json::{Map, Value};

use crate::call::own::{HELP_COMMAND, HelpArgs};

/// A `help` call, checked: an unknown command is refused here with the surface's commands.
/// On an observe-only connection (`observe_only`) the reference holds only what observes.
pub fn prepare(
    registry: &Registry,
    surface: &Arc<dyn Surface>,
    args: &Map<String, Value>,
    observe_only: bool,
) -> Result<Box<dyn PreparedAction>, ToolError> {
    let args: HelpArgs = decode_args(args)?;
    let command = args.command.as_deref();
    let text = crate::call::schema::help_text(registry, surface.as_ref(), command, observe_only)?;
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
