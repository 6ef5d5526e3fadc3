//! Fuzzes the decoding of `COMPUTER` calls: the wire types (`ComputerCall`, `StepsCall`, as the
//! daemon decodes them) and every surface's `prepare`, which types a command's args and
//! complications and describes the action as facts. Nothing is ever run. A call that decodes
//! round-trips through its serialised form; `prepare` either refuses with an error naming what
//! is wrong or yields an action whose risk, description and facts can be read.
#![no_main]

use std::sync::{Arc, OnceLock};

use computer_ipc::{ComputerCall, StepsCall, SurfaceName, ToolError};
use computer_surfaces::applescript::AppleScriptSurface;
use computer_surfaces::{Registry, Surface, SurfaceLimits};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Every surface of this platform, plus the applescript surface, which is built (and tested) on
/// every OS though the registry offers it on macOS only.
fn surfaces() -> &'static [Arc<dyn Surface>] {
    static SURFACES: OnceLock<Vec<Arc<dyn Surface>>> = OnceLock::new();
    SURFACES.get_or_init(|| {
        let limits = SurfaceLimits::default();
        let mut surfaces = Registry::for_this_platform(&limits).all().to_vec();
        if !surfaces
            .iter()
            .any(|s| s.name() == SurfaceName::Applescript)
        {
            surfaces.push(Arc::new(AppleScriptSurface::new(limits.shell.clone())));
        }
        surfaces
    })
}

fuzz_target!(|input: &[u8]| {
    let Ok(raw) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    if raw.get("steps").is_some() {
        let Ok(steps) = serde_path_to_error::deserialize::<_, StepsCall>(raw.clone()) else {
            return;
        };
        let again: StepsCall = serde_json::from_value(Value::Object(steps.to_arguments()))
            .expect("a decoded steps call decodes again from its own form");
        assert_eq!(again, steps);
        for step in &steps.steps {
            prepare(&Value::Object(step.clone()));
        }
    } else {
        prepare(&raw);
    }
});

fn prepare(raw: &Value) {
    let call = match serde_path_to_error::deserialize::<_, ComputerCall>(raw.clone()) {
        Ok(call) => call,
        Err(err) => {
            assert!(!err.to_string().is_empty(), "a decoding error says what");
            return;
        }
    };
    let again: ComputerCall = serde_json::from_value(Value::Object(call.to_arguments()))
        .expect("a decoded call decodes again from its own form");
    assert_eq!(again, call, "a call round-trips");
    let Some(surface) = surfaces().iter().find(|s| s.name() == call.surface) else {
        return;
    };
    match surface.prepare(&call.command, &call.args, &call.complications) {
        Ok(action) => {
            let _ = action.risk();
            assert!(!action.describe().is_empty(), "an action describes itself");
            let facts = action.facts();
            serde_json::to_string(&facts).expect("facts serialise");
            let _ = action.check_caller("fuzz-agent");
        }
        Err(error) => check_error(&error),
    }
}

fn check_error(error: &ToolError) {
    let text = serde_json::to_string(error).expect("a tool error serialises");
    assert!(
        !error.message.is_empty(),
        "an error says what is wrong: {text}"
    );
}
