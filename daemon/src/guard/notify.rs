//! Desktop notifications of pending approvals, so a person who is not looking at an approver
//! hears of a request before its timeout denies it: the freedesktop Notifications service on
//! the session bus (Linux), the notification centre through `osascript` (macOS).
//!
//! A notification is withdrawn (`CloseNotification`) once its request is answered, times out or
//! is withdrawn, so none is left saying a request waits when it does not.
//!
//! A notification names the agent, the surface and command and the programs that will run,
//! never their arguments, variables or stdin (they may hold secrets; notifications are shown on
//! lock screens and kept in histories). Sending one never blocks or decides anything: it runs on
//! its own task, bounded in time, and a failure is logged and forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_ipc::control::PendingRequest;
use computer_ipc::shown::{Context, escape};

/// How long one notification may take to be delivered before it is given up.
const SEND_LIMIT: Duration = Duration::from_secs(5);

/// The most characters of the summary a notification shows.
const SUMMARY_CHARS: usize = 120;

/// What a notification says: (summary, body).
pub fn message(request: &PendingRequest) -> (String, String) {
    let run = &request.will_run;
    let mut programs: Vec<String> = Vec::new();
    let commands = run.facts.argv.iter().chain(&run.facts.programs);
    for command in commands {
        if let Some(program) = command.first() {
            let name = program.rsplit('/').next().unwrap_or(program);
            let name = escape(name, Context::Word).text;
            if !programs.contains(&name) {
                programs.push(name);
            }
        }
    }
    let what = if programs.is_empty() {
        format!("{} {}", request.surface, request.command)
    } else {
        format!(
            "{} {}: {}",
            request.surface,
            request.command,
            programs.join(", ")
        )
    };
    let mut summary = format!(
        "computer: agent `{}` asks for {}",
        escape(&request.agent, Context::Line).text,
        escape(&what, Context::Line).text
    );
    if summary.chars().count() > SUMMARY_CHARS {
        summary = summary.chars().take(SUMMARY_CHARS - 1).collect();
        summary.push('…');
    }
    let body = format!(
        "Request #{} waits for a person; denied in {} s if nobody answers. Answer in the approval window or with `computer approve`.",
        request.id,
        request.expires_in_ms / 1000
    );
    (summary, body)
}

/// Where each request's notification stands.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Being sent.
    Sending,
    /// Shown, with the service's id for it.
    Shown(u32),
}

/// The notifications of pending requests.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    /// By request id; a request leaves when it is resolved.
    shown: Arc<Mutex<HashMap<u64, Slot>>>,
}

impl Notifier {
    /// Sends a notification of `request` on its own task; returns at once.
    pub fn announce(&self, request: &PendingRequest) {
        let (summary, body) = message(request);
        let expires_ms = request.expires_in_ms;
        let id = request.id;
        self.shown.lock().unwrap().insert(id, Slot::Sending);
        let shown = self.shown.clone();
        tokio::spawn(async move {
            let sent = tokio::time::timeout(SEND_LIMIT, send(&summary, &body, expires_ms)).await;
            if let Ok(Ok(Some(notification))) = sent {
                let mut slots = shown.lock().unwrap();
                match slots.get_mut(&id) {
                    Some(slot) => *slot = Slot::Shown(notification),
                    // Resolved while the service was answering: take it back at once.
                    None => {
                        drop(slots);
                        close(notification);
                    }
                }
            }
            report(id, sent.map(|sent| sent.map(drop)));
        });
    }

    /// Takes back the notification of request `id`, which is no longer pending.
    pub fn withdraw(&self, id: u64) {
        if let Some(Slot::Shown(notification)) = self.shown.lock().unwrap().remove(&id) {
            close(notification);
        }
    }
}

/// Closes a shown notification on its own task; a failure is only logged.
fn close(notification: u32) {
    tokio::spawn(async move {
        match tokio::time::timeout(SEND_LIMIT, send_close(notification)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::info!(notification, error = %err, "approval notification not closed")
            }
            Err(_) => tracing::info!(notification, "approval notification not closed: no answer"),
        }
    });
}

/// Logs how sending the notification of request `id` went.
fn report(id: u64, sent: Result<anyhow::Result<()>, tokio::time::error::Elapsed>) {
    match sent {
        Ok(Ok(())) => tracing::debug!(id, "approval notification sent"),
        Ok(Err(err)) => {
            tracing::info!(id, error = %err, "no desktop notification of the approval")
        }
        Err(_) => tracing::info!(
            id,
            "no desktop notification of the approval: the notification service did not answer within {} s",
            SEND_LIMIT.as_secs()
        ),
    }
}

/// Sends a notification; the service's id for it, where the platform gives one.
#[cfg(target_os = "linux")]
async fn send(summary: &str, body: &str, expires_ms: u64) -> anyhow::Result<Option<u32>> {
    use std::collections::HashMap;
    use zbus::zvariant::Value;

    let bus = zbus::Connection::session().await?;
    // Critical: kept on screen until the person acts, as the request is.
    let hints: HashMap<&str, Value<'_>> = HashMap::from([("urgency", Value::U8(2))]);
    let expire_timeout = i32::try_from(expires_ms).unwrap_or(i32::MAX);
    let reply = bus
        .call_method(
            Some("org.freedesktop.Notifications"),
            "/org/freedesktop/Notifications",
            Some("org.freedesktop.Notifications"),
            "Notify",
            &(
                "computer",
                0u32,
                "dialog-question",
                summary,
                body,
                Vec::<&str>::new(),
                hints,
                expire_timeout,
            ),
        )
        .await?;
    Ok(Some(reply.body().deserialize::<u32>()?))
}

#[cfg(target_os = "linux")]
async fn send_close(notification: u32) -> anyhow::Result<()> {
    let bus = zbus::Connection::session().await?;
    bus.call_method(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        Some("org.freedesktop.Notifications"),
        "CloseNotification",
        &(notification,),
    )
    .await?;
    Ok(())
}

#[cfg(target_os = "macos")]
async fn send(summary: &str, body: &str, _expires_ms: u64) -> anyhow::Result<Option<u32>> {
    // The texts are passed as arguments, never spliced into the script's source.
    let status = tokio::process::Command::new("/usr/bin/osascript")
        .args([
            "-e",
            "on run argv",
            "-e",
            "display notification (item 2 of argv) with title (item 1 of argv)",
            "-e",
            "end run",
            summary,
            body,
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status()
        .await?;
    anyhow::ensure!(status.success(), "osascript ended with {status}");
    // The notification centre gives no handle to take it back by.
    Ok(None)
}

#[cfg(not(target_os = "linux"))]
async fn send_close(_notification: u32) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
async fn send(_summary: &str, _body: &str, _expires_ms: u64) -> anyhow::Result<Option<u32>> {
    anyhow::bail!("desktop notifications are not built for this platform")
}

#[cfg(test)]
mod tests {
    use super::*;
    use computer_ipc::facts::{ActionFacts, StdinFacts};
    use computer_ipc::shown::WillRun;
    use std::collections::BTreeMap;

    #[test]
    fn a_notification_names_the_agent_and_programs_and_nothing_secret() {
        let request = PendingRequest {
            id: 9,
            receipt: "r".into(),
            agent: "ci-bot".into(),
            caller_pid: None,
            surface: "shell".into(),
            command: "run".into(),
            action: "run [\"curl\", \"-H\", \"Authorization: Bearer s3cr3t\"]".into(),
            will_run: WillRun::new(
                "run",
                ActionFacts {
                    argv: Some(vec![
                        "/usr/bin/curl".into(),
                        "-H".into(),
                        "Authorization: Bearer s3cr3t".into(),
                    ]),
                    env: BTreeMap::from([("API_KEY".into(), "k3y".into())]),
                    stdin: Some(StdinFacts::of("p4ss")),
                    ..ActionFacts::default()
                },
            ),
            warnings: Vec::new(),
            cwd: None,
            desktop: None,
            risk: "act".into(),
            rule: "defaults.act".into(),
            asked_at_ms: 0,
            expires_in_ms: 120_000,
            steps: Vec::new(),
        };
        let (summary, body) = message(&request);
        assert_eq!(summary, "computer: agent `ci-bot` asks for shell run: curl");
        assert!(body.contains("#9") && body.contains("120 s"), "{body}");
        for secret in ["s3cr3t", "k3y", "p4ss", "API_KEY"] {
            assert!(!summary.contains(secret) && !body.contains(secret));
        }
    }
}
