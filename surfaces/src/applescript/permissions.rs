//! The macOS privacy permissions this process holds, asked without prompting anyone: Automation
//! (Apple events to System Events and Finder), Accessibility and Screen Recording. For
//! `computer doctor`; compiled on Linux for the macOS target, run only on a Mac.

use std::ffi::c_void;

use serde::Serialize;

/// One permission's state, as `computer doctor` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct PermissionState {
    /// "Automation: System Events", "Accessibility", "Screen Recording".
    pub permission: String,
    /// `granted`, `denied`, `not asked yet`, or `unknown` (with why in `detail`).
    pub state: &'static str,
    /// What it is needed for, and how to grant it when it is not.
    pub detail: String,
}

/// Applications whose Automation permission the surfaces' usual scripts need.
const AUTOMATION_TARGETS: &[(&str, &str)] = &[
    ("System Events", "com.apple.systemevents"),
    ("Finder", "com.apple.finder"),
];

/// Every permission this process's surfaces use, asked without showing a prompt.
pub fn report() -> Vec<PermissionState> {
    let mut out = Vec::new();
    for (name, bundle) in AUTOMATION_TARGETS {
        out.push(automation(name, bundle));
    }
    // SAFETY: no arguments; reads this process's TCC state.
    let trusted = unsafe { accessibility_sys::AXIsProcessTrusted() };
    out.push(PermissionState {
        permission: "Accessibility".into(),
        state: if trusted { "granted" } else { "denied" },
        detail: if trusted {
            "the ax surface, gui input and System Events UI scripting can work".into()
        } else {
            "needed by ax, gui input and System Events UI scripting: System Settings ▸ Privacy & \
             Security ▸ Accessibility, turn on the program that starts the daemon"
                .into()
        },
    });
    let screen = core_graphics::access::ScreenCaptureAccess.preflight();
    out.push(PermissionState {
        permission: "Screen Recording".into(),
        state: if screen { "granted" } else { "denied" },
        detail: if screen {
            "gui screenshots and evidence show windows' contents".into()
        } else {
            "needed by gui screenshots and evidence: System Settings ▸ Privacy & Security ▸ \
             Screen & System Audio Recording, turn on the program that starts the daemon"
                .into()
        },
    });
    out
}

/// Apple event descriptor storage. Its layout is packed in Apple's headers; only a pointer to it
/// crosses the boundary, so room for the largest layout is all that matters here.
#[repr(C, align(8))]
struct AeDesc([u8; 32]);

type OsStatus = i32;
type OsErr = i16;

const fn four_char(code: &[u8; 4]) -> u32 {
    u32::from_be_bytes(*code)
}

const TYPE_APPLICATION_BUNDLE_ID: u32 = four_char(b"bund");
const TYPE_WILD_CARD: u32 = four_char(b"****");
const NO_ERR: OsStatus = 0;
const ERR_AE_EVENT_NOT_PERMITTED: OsStatus = -1743;
const ERR_AE_EVENT_WOULD_REQUIRE_USER_CONSENT: OsStatus = -1744;
const PROC_NOT_FOUND: OsStatus = -600;

#[link(name = "CoreServices", kind = "framework")]
unsafe extern "C" {
    fn AECreateDesc(
        type_code: u32,
        data_ptr: *const c_void,
        data_size: isize,
        result: *mut AeDesc,
    ) -> OsErr;
    fn AEDisposeDesc(desc: *mut AeDesc) -> OsErr;
    fn AEDeterminePermissionToAutomateTarget(
        target: *const AeDesc,
        event_class: u32,
        event_id: u32,
        ask_user_if_needed: u8,
    ) -> OsStatus;
}

fn automation(name: &str, bundle: &str) -> PermissionState {
    let mut desc = AeDesc([0; 32]);
    // SAFETY: `bundle` outlives the call, which copies its bytes into `desc`.
    let made = unsafe {
        AECreateDesc(
            TYPE_APPLICATION_BUNDLE_ID,
            bundle.as_ptr().cast(),
            bundle.len() as isize,
            &mut desc,
        )
    };
    let status = if made == 0 {
        // SAFETY: `desc` was filled by AECreateDesc and is disposed of right after; the user is
        // never asked (`ask_user_if_needed` false).
        let status = unsafe {
            AEDeterminePermissionToAutomateTarget(&desc, TYPE_WILD_CARD, TYPE_WILD_CARD, 0)
        };
        // SAFETY: as above; disposed of once.
        unsafe { AEDisposeDesc(&mut desc) };
        status
    } else {
        OsStatus::from(made)
    };
    let grant = format!(
        "System Settings ▸ Privacy & Security ▸ Automation, under the program that starts the \
         daemon, turn on {name}"
    );
    let (state, detail) = match status {
        NO_ERR => (
            "granted",
            format!("applescript runs may send Apple events to {name}"),
        ),
        ERR_AE_EVENT_NOT_PERMITTED => (
            "denied",
            format!("applescript runs that target {name} will be refused: {grant}"),
        ),
        ERR_AE_EVENT_WOULD_REQUIRE_USER_CONSENT => (
            "not asked yet",
            format!(
                "the first applescript run that targets {name} makes macOS ask; or grant it \
                 ahead: {grant}"
            ),
        ),
        PROC_NOT_FOUND => (
            "unknown",
            format!(
                "{name} is not running, so macOS cannot say; it is asked when a run targets it"
            ),
        ),
        other => ("unknown", format!("macOS answered {other} for {name}")),
    };
    PermissionState {
        permission: format!("Automation: {name}"),
        state,
        detail,
    }
}
