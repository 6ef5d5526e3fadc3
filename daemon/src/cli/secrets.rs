//! `computer secrets`: the person's way to put a value into the keychain (read from a terminal
//! without echo, or from stdin), so that agents handle only its reference; and the keychain line
//! of `computer doctor`.

use std::io::{IsTerminal, Read};

use anyhow::{Context, bail};
use clap::Subcommand;
use computer_surfaces::kit::secret_store::{
    STORE_DEADLINE, SecretRef, call_with_deadline, system_store,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::exit;

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Store a value under a reference, e.g. `computer secrets set keychain://github/deploy`.
    /// The value is read from the terminal without echo, or from stdin when it is not a
    /// terminal (one trailing newline is dropped).
    Set {
        /// `keychain://<service>/<account>`.
        reference: String,
        /// What keychain apps show for the item (default: the reference).
        #[arg(long)]
        label: Option<String>,
    },
}

pub async fn run(command: SecretsCommand) -> u8 {
    let result = match command {
        SecretsCommand::Set { reference, label } => set(&reference, label).await,
    };
    match result {
        Ok(()) => exit::OK,
        Err(err) => {
            eprintln!("error: {err:#}");
            exit::FAILED
        }
    }
}

async fn set(reference: &str, label: Option<String>) -> anyhow::Result<()> {
    let reference = SecretRef::parse(reference)?;
    let label = match label {
        Some(label) if label.trim().is_empty() => {
            bail!("--label is empty; leave it out to use the reference")
        }
        Some(label) => label,
        None => reference.uri(),
    };
    let value = read_value(&reference)?;
    let store = system_store();
    let target = reference.clone();
    let stored_label = label.clone();
    call_with_deadline(&store, STORE_DEADLINE, move |store| {
        store.set(&target, &stored_label, &value)
    })
    .await?;
    println!("stored {reference} (label {label:?})");
    Ok(())
}

/// The value from the terminal without echo, or from stdin when it is piped.
fn read_value(reference: &SecretRef) -> anyhow::Result<SecretString> {
    let text = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("value for {reference} (not shown): "))
            .context("cannot read the value from the terminal")?
    } else {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the value from stdin (it must be UTF-8 text)")?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    };
    let value = SecretString::from(text);
    if value.expose_secret().is_empty() {
        bail!("the value is empty; type it at the prompt, or pipe it on stdin");
    }
    Ok(value)
}

/// The keychain's state for `computer doctor`: which store, and whether it answers, is
/// unlocked, or why not with the fix.
pub async fn doctor_report() -> Value {
    let store = system_store();
    let backend = store.backend();
    match call_with_deadline(&store, std::time::Duration::from_secs(5), |store| {
        store.probe()
    })
    .await
    {
        Ok(()) => json!({"backend": backend, "state": "ready"}),
        Err(err) => json!({"backend": backend, "state": err.kind(), "detail": err.to_string()}),
    }
}

/// One line of `computer doctor`'s text report.
pub fn doctor_line(report: &Value) -> String {
    let backend = report["backend"].as_str().unwrap_or_default();
    let state = report["state"].as_str().unwrap_or_default();
    match report["detail"].as_str() {
        Some(detail) => format!("keychain {backend}: {state}: {detail}"),
        None => format!("keychain {backend}: {state}"),
    }
}
