//! What several surfaces stand on and no surface owns: starting and containing processes,
//! capturing their output, the secrets a call uses and their masking, reading a script for its
//! facts, the effect an act had, and the observations acts are bound to.
//!
//! # Layout
//! - [`contain`]: containment of the processes runs start (namespaces on Linux, Seatbelt on macOS).
//! - [`one_shot`]: one-shot runs of argv or a script in their own process group (containment,
//!   deadline, bounded capture), which `shell run` and `applescript run` share.
//! - [`run_env`]: the limits every run is started under, and what a run's environment holds
//!   (the daemon's variables passed through, a desktop's in place of its display and bus ones,
//!   the call's own, checked).
//! - [`spawn`]: what every surface that starts a process shares (finding the program, secrets
//!   in its environment, the children the daemon waits for itself).
//! - [`capture`]: bounded capture of an output stream (head, tail, sha256, spill to an artifact).
//! - [`script`]: what a shell run will execute, found with a shell parser (for
//!   [`ActionFacts`](crate::ActionFacts)).
//! - [`command_line`]: a terminal's command line as typed keys leave it (gui terminals and
//!   shell sessions).
//! - [`secrets`]: secrets a call references, the per-call holder of resolved values that masks
//!   everything the call produces, and resolution at the moment of use.
//! - [`secret_store`]: references, the seam over the OS keychain and its store, which every
//!   surface uses (the `keychain` surface is one of them).
//! - [`mask`]: secret values masked in every common encoding, also across stream chunks.
//! - [`effect`]: what an act achieved, read back after it (`effect`, `effect_evidence`).
//! - [`snapshot`]: observations remembered per agent, for acts bound to them (`seen`).

pub mod capture;
pub mod command_line;
pub mod contain;
pub mod effect;
pub mod mask;
pub mod one_shot;
pub mod run_env;
pub mod script;
pub mod secret_store;
pub mod secrets;
pub mod snapshot;
pub mod spawn;

#[cfg(target_os = "linux")]
/// Runs `work` on a thread of its own with a runtime of its own, and waits for it: for a
/// blocking caller that may be on the daemon's runtime, where blocking on another is not
/// allowed (a desktop's start-up, a run's limits).
pub(crate) fn on_own_runtime<T: Send + 'static>(
    work: impl std::future::Future<Output = Option<T>> + Send + 'static,
) -> Option<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?
                    .block_on(work)
            })
            .join()
            .ok()
            .flatten()
    })
}
