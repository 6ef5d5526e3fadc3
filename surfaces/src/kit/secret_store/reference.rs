//! Secret references, `keychain://<service>/<account>`: what the model handles in place of a
//! secret's value.

use std::fmt;

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

/// The scheme every reference starts with.
pub const SCHEME: &str = "keychain://";

/// Characters escaped in each part of a reference: `/` separates the parts, `%` escapes, and
/// the rest would make the reference hard to read or to paste into a URL or a shell.
const PART: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'/')
    .add(b'%')
    .add(b'?')
    .add(b'#')
    .add(b'"')
    .add(b'\'')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'`');

/// A keychain item named by its service and account: `keychain://<service>/<account>`, each
/// part percent-encoded (`keychain://api.example.com/me%40example.com`).
///
/// On Linux these are the Secret Service attributes `service` and `username` (the ones
/// `secret-tool store service S username U` writes); on macOS, a generic password's service
/// and account.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    pub service: String,
    pub account: String,
}

/// Why a text is not a secret reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{problem} in secret reference {text:?}; write it as keychain://<service>/<account>, e.g. keychain://api.example.com/deploy (percent-encode '/' and '%' inside a part)"
)]
pub struct RefError {
    /// The text as given (a reference names an item, never holds its value).
    pub text: String,
    /// What is wrong with it.
    pub problem: String,
}

impl SecretRef {
    /// A reference to `service`/`account`; both must be non-empty.
    pub fn new(
        service: impl Into<String>,
        account: impl Into<String>,
    ) -> Result<SecretRef, RefError> {
        let reference = SecretRef {
            service: service.into(),
            account: account.into(),
        };
        for (part, value) in [
            ("service", &reference.service),
            ("account", &reference.account),
        ] {
            if value.is_empty() {
                return Err(RefError {
                    text: reference.uri(),
                    problem: format!("the {part} is empty"),
                });
            }
            if value.chars().any(char::is_control) {
                return Err(RefError {
                    text: reference.uri(),
                    problem: format!("the {part} holds a control character"),
                });
            }
        }
        Ok(reference)
    }

    /// Parses `keychain://<service>/<account>`.
    pub fn parse(text: &str) -> Result<SecretRef, RefError> {
        let problem = |problem: &str| RefError {
            text: text.to_string(),
            problem: problem.to_string(),
        };
        let Some(rest) = text.strip_prefix(SCHEME) else {
            return Err(match text.split_once("://") {
                Some((scheme, _)) => {
                    problem(&format!("the scheme is {scheme:?}, not \"keychain\""))
                }
                None => problem("the keychain:// scheme is missing"),
            });
        };
        let Some((service, account)) = rest.split_once('/') else {
            return Err(problem("the account is missing (no '/' after the service)"));
        };
        if account.contains('/') {
            return Err(problem(
                "there is more than one '/' after the service (an account holding '/' spells it %2F)",
            ));
        }
        let decode = |part: &str, name: &str| {
            percent_decode_str(part)
                .decode_utf8()
                .map(|decoded| decoded.into_owned())
                .map_err(|_| problem(&format!("the {name} does not decode to UTF-8")))
        };
        let service = decode(service, "service")?;
        let account = decode(account, "account")?;
        SecretRef::new(service, account).map_err(|err| RefError {
            text: text.to_string(),
            problem: err.problem,
        })
    }

    /// The reference as text, each part percent-encoded; [`SecretRef::parse`] reads it back.
    pub fn uri(&self) -> String {
        format!(
            "{SCHEME}{}/{}",
            utf8_percent_encode(&self.service, PART),
            utf8_percent_encode(&self.account, PART)
        )
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.uri())
    }
}

impl std::str::FromStr for SecretRef {
    type Err = RefError;

    fn from_str(text: &str) -> Result<SecretRef, RefError> {
        SecretRef::parse(text)
    }
}

impl serde::Serialize for SecretRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.uri())
    }
}

impl<'de> serde::Deserialize<'de> for SecretRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<SecretRef, D::Error> {
        let text = String::deserialize(deserializer)?;
        SecretRef::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for SecretRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SecretRef".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^keychain://[^/]+/[^/]+$",
            "description": "keychain://<service>/<account>, each part percent-encoded",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_reads_back_what_it_writes_even_with_slashes_and_spaces() {
        let reference = SecretRef::new("api.example.com/v2", "me@example.com 100%").unwrap();
        let uri = reference.uri();
        assert_eq!(
            uri,
            "keychain://api.example.com%2Fv2/me@example.com%20100%25"
        );
        assert_eq!(SecretRef::parse(&uri).unwrap(), reference);
        assert_eq!(reference.to_string(), uri);
    }

    #[test]
    fn a_plain_reference_parses_into_its_parts() {
        let reference = SecretRef::parse("keychain://github/deploy-bot").unwrap();
        assert_eq!(reference.service, "github");
        assert_eq!(reference.account, "deploy-bot");
    }

    #[test]
    fn each_malformed_reference_says_what_is_wrong_and_shows_a_valid_form() {
        let cases = [
            ("op://vault/item", "the scheme is \"op\""),
            ("github/deploy", "the keychain:// scheme is missing"),
            ("keychain://github", "the account is missing"),
            ("keychain://github/", "the account is empty"),
            ("keychain:///deploy", "the service is empty"),
            ("keychain://a/b/c", "more than one '/'"),
            ("keychain://a/%FF", "does not decode to UTF-8"),
            ("keychain://a/b%0Ac", "control character"),
        ];
        for (text, expected) in cases {
            let err = SecretRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
            assert!(
                err.contains("keychain://<service>/<account>"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_reference_decodes_from_json_and_refuses_a_bad_one_with_the_reason() {
        let ok: SecretRef = serde_json::from_str("\"keychain://svc/acct\"").unwrap();
        assert_eq!(ok.uri(), "keychain://svc/acct");
        let err = serde_json::from_str::<SecretRef>("\"svc/acct\"").unwrap_err();
        assert!(err.to_string().contains("scheme is missing"), "{err}");
    }
}
