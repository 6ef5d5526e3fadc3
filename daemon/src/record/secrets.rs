//! Redaction in the daemon's pipeline: a call's outcome, reply and result receipt masked with the
//! secrets the call resolved; every receipt row sealed (secret references replaced by a keyed
//! digest, values of running calls masked) on its way into the ledger; and log lines masked
//! before they are written.
//!
//! Why here and not in each surface: surfaces register what they resolve in the call's
//! [`CallSecrets`]; this module applies it to everything the daemon writes or sends, so a
//! surface, a new field or a new log line cannot forget it.

use std::io::Write;
use std::path::Path;

use computer_surfaces::kit::secrets::{CallSecrets, SCHEME, mask_json_with_live, mask_with_live};
use computer_surfaces::{Outcome, SurfaceError};
use hmac::{Hmac, Mac};
use rmcp::model::CallToolResult;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::record::receipts::{Ledger, LedgerError, NewRow};

/// What a receipt shows for the digest of a text that was cut and then had a value masked: the
/// digest was taken of the bytes in the clear, and the masked whole is not in memory to digest.
const MASKED_DIGEST: &str = "[withheld: a value in it was masked]";

/// The outcome of a call with every value it resolved masked, in every form: texts (head and
/// tail), fields, receipt facts, and a failure's message. Before the budget cuts anything, so
/// that no cut can split a value out of its mask.
pub fn mask_outcome(
    secrets: &CallSecrets,
    outcome: Result<Outcome, SurfaceError>,
) -> Result<Outcome, SurfaceError> {
    if secrets.is_empty() {
        return outcome;
    }
    match outcome {
        Ok(mut outcome) => {
            for text in &mut outcome.texts {
                // A text masked here (not as it was captured) had its digest taken of the bytes
                // in the clear: the receipt would hold a digest a short value is found by.
                if text.is_complete() {
                    // Head and tail are one run of bytes: a value across them is masked whole.
                    let clear = [text.head.as_slice(), &text.tail].concat();
                    let whole = secrets.mask_bytes(&clear);
                    if whole != clear {
                        text.sha256 = hex::encode(Sha256::digest(&whole));
                    }
                    text.head = whole;
                    text.tail = Vec::new();
                    text.total_bytes = text.head.len() as u64;
                } else {
                    let (head, tail) = (
                        secrets.mask_bytes(&text.head),
                        secrets.mask_bytes(&text.tail),
                    );
                    if head != text.head || tail != text.tail {
                        text.sha256 = MASKED_DIGEST.into();
                    }
                    text.head = head;
                    text.tail = tail;
                }
            }
            let mut fields = Value::Object(std::mem::take(&mut outcome.fields));
            secrets.mask_json(&mut fields);
            if let Value::Object(map) = fields {
                outcome.fields = map;
            }
            let mut receipt = Value::Object(std::mem::take(&mut outcome.receipt));
            secrets.mask_json(&mut receipt);
            if let Value::Object(map) = receipt {
                outcome.receipt = map;
            }
            Ok(outcome)
        }
        Err(err) => Err(match err {
            SurfaceError::Failed { message } => SurfaceError::Failed {
                message: secrets.mask_str(&message),
            },
            SurfaceError::Refused { message } => SurfaceError::Refused {
                message: secrets.mask_str(&message),
            },
            SurfaceError::NothingSent { message } => SurfaceError::NothingSent {
                message: secrets.mask_str(&message),
            },
            SurfaceError::Io { context, source } => SurfaceError::Failed {
                message: secrets.mask_str(&format!("{context}: {source}")),
            },
            SurfaceError::Tool(error) => SurfaceError::Tool(computer_ipc::ToolError {
                message: secrets.mask_str(&error.message),
                ..error
            }),
        }),
    }
}

/// The reply and the result receipt's body masked whole, last: what the daemon added around the
/// outcome (evidence metadata, budget notes) passes through the mask too.
pub fn mask_reply(secrets: &CallSecrets, reply: &mut CallToolResult, body: &mut Value) {
    if secrets.is_empty() {
        return;
    }
    secrets.mask_json(body);
    if let Ok(mut value) = serde_json::to_value(&*reply) {
        secrets.mask_json(&mut value);
        if let Ok(masked) = serde_json::from_value(value) {
            *reply = masked;
        }
    }
}

/// The ledger as the gateway writes to it: each row sealed before it is appended.
#[derive(Clone)]
pub struct SealedLedger {
    ledger: Ledger,
    key: zeroize::Zeroizing<Vec<u8>>,
}

impl SealedLedger {
    /// Seals with the ledger's own key (kept in the state dir, out of every run's reach); when
    /// it cannot be read, with a key made for this process, so that digests stay keyed.
    pub fn new(ledger: Ledger) -> SealedLedger {
        let key_file = crate::record::receipts::seal::key_path(ledger.path());
        let key = match std::fs::read(&key_file) {
            Ok(key) if !key.is_empty() => key,
            _ => {
                tracing::warn!(
                    path = %key_file.display(),
                    "the receipts key cannot be read: secret references in receipts are digested \
                     with a key of this process only"
                );
                let mut key = vec![0u8; 32];
                let _ = getrandom::fill(&mut key);
                key
            }
        };
        SealedLedger {
            ledger,
            key: zeroize::Zeroizing::new(key),
        }
    }

    pub async fn append(&self, mut rows: Vec<NewRow>) -> Result<Vec<i64>, LedgerError> {
        for row in &mut rows {
            self.seal(&mut row.body);
        }
        self.ledger.append(rows).await
    }

    /// Replaces every secret reference by its keyed digest and masks the values of calls still
    /// running and every value revealed to a caller. A row that named a reference has its
    /// request digest keyed too: an unkeyed sha256 of a request whose other parts are in the row
    /// would let a reference be guessed. A row that had a value masked has every digest keyed
    /// (the request's, a stdin's, an output's): each may cover the value, and a short one is
    /// found by hashing guesses.
    pub fn seal(&self, body: &mut Value) {
        let masked = mask_json_with_live(body);
        if self.digest_references(body) | masked
            && let Some(Value::String(digest)) = body.get_mut("args_sha256")
        {
            *digest = self.keyed_digest(digest);
        }
        if masked {
            self.key_digests(body);
        }
    }

    /// `digest` keyed with the receipts key (unchanged when it is keyed already).
    fn keyed_digest(&self, digest: &str) -> String {
        if digest.starts_with("hmac-sha256:") {
            return digest.to_string();
        }
        format!(
            "hmac-sha256:{}",
            self.mac("computer request digest", digest)
        )
    }

    /// Keys every sha256 digest in `value` (`sha256` and `*_sha256` fields).
    fn key_digests(&self, value: &mut Value) {
        match value {
            Value::Array(items) => items.iter_mut().for_each(|v| self.key_digests(v)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match item {
                        Value::String(digest)
                            if (key == "sha256" || key.ends_with("_sha256"))
                                && digest.len() == 64
                                && digest.bytes().all(|b| b.is_ascii_hexdigit()) =>
                        {
                            *digest = self.keyed_digest(digest);
                        }
                        other => self.key_digests(other),
                    }
                }
            }
            _ => {}
        }
    }

    /// The keyed digest that stands for `reference` in receipts.
    pub fn reference_digest(&self, reference: &str) -> String {
        format!(
            "keychain-ref:hmac-sha256:{}",
            self.mac("computer secret reference", reference)
        )
    }

    fn mac(&self, domain: &str, text: &str) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(text.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether any string was a reference (each is replaced).
    fn digest_references(&self, value: &mut Value) -> bool {
        match value {
            Value::String(text) if text.contains(SCHEME) => {
                *text = self.digest_references_in(text);
                true
            }
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |found, v| self.digest_references(v) | found),
            Value::Object(map) => map
                .values_mut()
                .fold(false, |found, v| self.digest_references(v) | found),
            _ => false,
        }
    }

    /// `text` with each reference in it (as a value, or inside a message or an approval text)
    /// replaced by its digest. A reference ends where a character that a reference's parts
    /// always percent-encode begins (space, quotes, brackets, `,` and `;` after it).
    fn digest_references_in(&self, text: &str) -> String {
        let ends = |c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | ')' | '<' | '>' | ',' | ';')
        };
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(SCHEME) {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            let end = tail.find(ends).unwrap_or(tail.len());
            out.push_str(&self.reference_digest(&tail[..end]));
            rest = &tail[end..];
        }
        out.push_str(rest);
        out
    }

    pub fn path(&self) -> &Path {
        self.ledger.path()
    }
}

/// The daemon's log output: each line masked with the secrets of the calls running now.
#[derive(Debug, Clone, Copy, Default)]
pub struct MaskedLog;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for MaskedLog {
    type Writer = MaskedLogLine;

    fn make_writer(&'a self) -> Self::Writer {
        MaskedLogLine
    }
}

/// One write to the log (the fmt layer writes each event whole, in one call).
pub struct MaskedLogLine;

impl Write for MaskedLogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match mask_with_live(buf) {
            None => std::io::stderr().write_all(buf)?,
            Some(masked) => std::io::stderr().write_all(&masked)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computer_surfaces::kit::secret_store::SecretRef;
    use computer_surfaces::kit::secrets::Resolve;
    use secrecy::SecretString;
    use std::sync::Arc;

    struct Fixed;

    impl Resolve for Fixed {
        fn resolve(&self, _: &SecretRef) -> Result<SecretString, String> {
            Ok(SecretString::from("pw-9f8e7d6c5b"))
        }
    }

    fn holder() -> CallSecrets {
        let holder = CallSecrets::with_resolver(Arc::new(Fixed));
        holder
            .resolve("PW", &SecretRef::parse("keychain://s/a").unwrap())
            .unwrap();
        holder
    }

    #[test]
    fn an_outcome_is_masked_in_texts_fields_receipt_and_errors() {
        let holder = holder();
        let outcome = Outcome {
            success: true,
            fields: serde_json::json!({"value": "pw-9f8e7d6c5b"})
                .as_object()
                .cloned()
                .unwrap(),
            texts: vec![computer_surfaces::CapturedText::from_bytes(
                "stdout",
                b"x pw-9f8e7d6c5b y".to_vec(),
            )],
            ..Outcome::default()
        };
        let masked = mask_outcome(&holder, Ok(outcome)).unwrap();
        assert_eq!(masked.fields["value"], "[masked PW]");
        assert_eq!(masked.texts[0].head, b"x [masked PW] y");
        let failed = mask_outcome(
            &holder,
            Err(SurfaceError::Failed {
                message: format!("could not set {}", hex::encode("pw-9f8e7d6c5b")),
            }),
        );
        assert_eq!(failed.unwrap_err().to_string(), "could not set [masked PW]");
    }

    #[tokio::test]
    async fn a_revealed_value_is_masked_in_rows_and_outcomes_and_their_digests_are_keyed() {
        let value = "seal-revealed-e81f2a";
        let revealing = CallSecrets::default();
        revealing.reveal(&SecretString::from(value));
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("receipts.sqlite"))
            .await
            .unwrap();
        let sealed = SealedLedger::new(ledger);
        let clear_digest = hex::encode(Sha256::digest(value.as_bytes()));
        let mut row = serde_json::json!({
            "args": {"argv": ["printf", "%s", value]},
            "args_sha256": "ab".repeat(32),
            "facts": {"stdin": {"bytes": 20, "sha256": clear_digest, "head": value}},
        });
        sealed.seal(&mut row);
        let text = row.to_string();
        assert!(!text.contains(value), "{text}");
        assert!(!text.contains(&clear_digest), "{text}");
        assert_eq!(row["args"]["argv"][2], "[masked revealed]");
        assert!(
            row["args_sha256"]
                .as_str()
                .unwrap()
                .starts_with("hmac-sha256:")
        );
        // A row without the value keeps its digests.
        let mut plain = serde_json::json!({"facts": {"stdin": {"sha256": clear_digest}}});
        sealed.seal(&mut plain);
        assert_eq!(plain["facts"]["stdin"]["sha256"], clear_digest);

        // Another call's output is masked and its digest is of what it shows; the revealing
        // call's own output keeps the value.
        let output = || Outcome {
            success: true,
            texts: vec![computer_surfaces::CapturedText::from_bytes(
                "stdout",
                value.as_bytes().to_vec(),
            )],
            ..Outcome::default()
        };
        let masked = mask_outcome(&CallSecrets::default(), Ok(output())).unwrap();
        assert_eq!(masked.texts[0].head, b"[masked revealed]");
        assert_eq!(
            masked.texts[0].sha256,
            hex::encode(Sha256::digest(b"[masked revealed]"))
        );
        let own = mask_outcome(&revealing, Ok(output())).unwrap();
        assert_eq!(own.texts[0].head, value.as_bytes());
    }

    #[tokio::test]
    async fn references_in_rows_become_keyed_digests_and_the_request_digest_is_keyed() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("receipts.sqlite"))
            .await
            .unwrap();
        let sealed = SealedLedger::new(ledger);
        let mut body = serde_json::json!({
            "args": {"complications": {"secrets": {"T": "keychain://github/me"}}},
            "args_sha256": "00ff",
        });
        sealed.seal(&mut body);
        let text = body.to_string();
        assert!(!text.contains("keychain://github/me"), "{text}");
        assert_eq!(
            body["args"]["complications"]["secrets"]["T"],
            sealed.reference_digest("keychain://github/me")
        );
        assert!(
            body["args_sha256"]
                .as_str()
                .unwrap()
                .starts_with("hmac-sha256:")
        );
        let mut said =
            serde_json::json!({"error": "no item keychain://github/me (service \"github\")"});
        sealed.seal(&mut said);
        assert_eq!(
            said["error"],
            format!(
                "no item {} (service \"github\")",
                sealed.reference_digest("keychain://github/me")
            )
        );
        let mut plain = serde_json::json!({"args_sha256": "00ff"});
        sealed.seal(&mut plain);
        assert_eq!(
            plain["args_sha256"], "00ff",
            "rows without references keep sha256"
        );
    }
}
