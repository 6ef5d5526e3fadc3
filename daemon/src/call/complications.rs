//! The complications a call gives, and whether the surface it reaches honours each (the daemon
//! routes `desktop` itself, for the surfaces that act on a desktop).

use computer_ipc::{ComputerCall, ErrorCode, Evidence, ToolError};
use computer_surfaces::Surface;

use crate::call::stages::Deciding;

impl Deciding<'_> {
    /// Refuses a complication the reached surface does not honour, or evidence where no
    /// screenshots can be taken, naming the complication and what would be valid.
    pub(crate) fn unsupported_complications(
        &self,
        call: &ComputerCall,
        surface: &dyn Surface,
    ) -> Result<(), ToolError> {
        let wants_evidence = call
            .complications
            .evidence
            .is_some_and(|e| e != Evidence::None);
        let evidence_here = match (&call.complications.desktop, self.desktops) {
            (Some(id), Some(desktops)) => desktops.evidence(id).is_some(),
            _ => self.registry.evidence().is_some(),
        };
        if wants_evidence && !evidence_here {
            return Err(ToolError::new(
                ErrorCode::Unavailable,
                "the `evidence` complication needs screenshots, which are unavailable here (see `computer doctor` for the gui surface)",
            )
            .at("complications.evidence"));
        }
        let supported = surface.complications();
        match complications_used(call).into_iter().find(|name| {
            let honoured = supported.contains(name)
                || (*name == "desktop" && crate::call::desktops::honoured_on(surface.name()));
            !honoured
        }) {
            None => Ok(()),
            Some(name) => Err(ToolError::new(
                ErrorCode::Unavailable,
                format!(
                    "the `{name}` complication is not supported by the {} surface in this build",
                    call.surface
                ),
            )
            .at(format!("complications.{name}"))
            .valid(supported.iter().copied())),
        }
    }
}

/// The complications a call gives, by their JSON names.
fn complications_used(call: &ComputerCall) -> Vec<&'static str> {
    let c = &call.complications;
    [
        ("cwd", c.cwd.is_some()),
        ("env", !c.env.is_empty()),
        ("timeout_ms", c.timeout_ms.is_some()),
        ("evidence", c.evidence.is_some()),
        ("return", c.return_budget.is_some()),
        ("secrets", !c.secrets.is_empty()),
        ("detach", c.detach),
        ("sandbox", c.sandbox.is_some()),
        ("tools", c.tools.as_ref().is_some_and(|t| t.wanted())),
        ("seen", c.seen.is_some()),
        ("desktop", c.desktop.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, used)| used.then_some(name))
    .collect()
}
