//! macOS privacy refusals in what `osascript` prints on failure, turned into errors a person can
//! act on: which permission, for which application, and where to grant it. Pure text work:
//! tested on every OS.

/// A run that macOS stopped for want of a privacy permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The Apple event error code osascript reported, when it gave one.
    pub code: Option<i32>,
    /// The permission that was missing.
    pub permission: Permission,
    /// The application the events were for, when osascript or the source names it.
    pub app: Option<String>,
    /// osascript's own words, for the record.
    pub said: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Sending Apple events to another application (TCC's AppleEvents service).
    Automation,
    /// UI scripting through System Events (TCC's Accessibility service).
    Accessibility,
}

/// Not authorized to send Apple events (errAEEventNotPermitted).
const NOT_PERMITTED: i32 = -1743;
/// Consent would be needed but was not asked (errAEEventWouldRequireUserConsent).
const WOULD_REQUIRE_CONSENT: i32 = -1744;
/// A privilege violation (errAEPrivilegeError).
const PRIVILEGE_ERROR: i32 = -10004;
/// The event timed out (errAETimeout): with a consent prompt open and nobody answering.
const TIMED_OUT: i32 = -1712;
/// The accessibility API is off for this process (kAXErrorAPIDisabled). System Events also says
/// "not allowed assistive access" with -1719, a code it uses for an invalid index too, so that
/// one is recognised by its words only.
const NO_ASSISTIVE_ACCESS: &[i32] = &[-25211];

/// Reads osascript's stderr; `targets` are the applications the source names (used when
/// osascript's message does not say which application refused).
pub fn classify(stderr: &str, targets: &[String]) -> Option<Refusal> {
    let line = stderr
        .lines()
        .find(|line| line.contains("error"))
        .unwrap_or(stderr)
        .trim();
    let code = error_code(line);
    let lower = line.to_lowercase();
    let permission = if lower.contains("assistive access")
        || code.is_some_and(|c| NO_ASSISTIVE_ACCESS.contains(&c))
    {
        Permission::Accessibility
    } else if lower.contains("not authorized to send apple events")
        || lower.contains("not allowed to send apple events")
        || matches!(
            code,
            Some(NOT_PERMITTED | WOULD_REQUIRE_CONSENT | PRIVILEGE_ERROR | TIMED_OUT)
        )
    {
        Permission::Automation
    } else {
        return None;
    };
    let app = named_app(line).or_else(|| match targets {
        [only] => Some(only.clone()),
        _ => None,
    });
    Some(Refusal {
        code,
        permission,
        app,
        said: line.to_string(),
    })
}

impl Refusal {
    /// The error a caller reads: what was refused, and how to grant it.
    pub fn message(&self, targets: &[String]) -> String {
        let code = self.code.map(|c| format!(" ({c})")).unwrap_or_default();
        let app = self.app.clone().unwrap_or_else(|| match targets {
            [] => "the application the script targets".to_string(),
            many => format!("one of {}", many.join(", ")),
        });
        match self.permission {
            Permission::Automation => {
                let what = if self.code == Some(TIMED_OUT) {
                    format!(
                        "the Apple events to {app} timed out{code}, which is what happens while \
                         macOS waits for someone to answer its Automation prompt"
                    )
                } else {
                    format!("macOS did not let this run send Apple events to {app}{code}")
                };
                format!(
                    "{what}; grant it in System Settings ▸ Privacy & Security ▸ Automation: \
                     under the program that started the daemon (the terminal, or `computer` \
                     when it runs as a launchd agent), turn on {app}, then run the call again \
                     (`tccutil reset AppleEvents` makes macOS ask again); osascript said: {}",
                    self.said
                )
            }
            Permission::Accessibility => format!(
                "macOS did not let this run script the user interface of {app}{code}: UI \
                 scripting through System Events needs the Accessibility permission; grant it \
                 in System Settings ▸ Privacy & Security ▸ Accessibility to the program that \
                 started the daemon (the terminal, or `computer`), then run the call again; \
                 osascript said: {}",
                self.said
            ),
        }
    }
}

/// The trailing `(-1743)` of an osascript error line.
fn error_code(line: &str) -> Option<i32> {
    let open = line.rfind('(')?;
    let close = open + line[open..].find(')')?;
    line[open + 1..close].trim().parse().ok()
}

/// The application an osascript error line names: "…send Apple events to Finder." or
/// "System Events got an error: …".
fn named_app(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    if let Some(at) = lower.find("apple events to ") {
        let rest = &line[at + "apple events to ".len()..];
        let end = rest.find(['.', '(']).unwrap_or(rest.len());
        let app = rest[..end].trim();
        if !app.is_empty() {
            return Some(app.to_string());
        }
    }
    let at = line.find(" got an error")?;
    // osascript prefixes the character range of the failing statement: `12:40: execution
    // error: Finder got an error: …`.
    let before = &line[..at];
    let start = before.rfind(": ").map(|i| i + 2).unwrap_or(0);
    let app = before[start..].trim();
    (!app.is_empty()).then(|| app.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn automation_refusals_name_the_app_and_where_to_grant_it() {
        let stderr =
            "0:44: execution error: Not authorized to send Apple events to Finder. (-1743)\n";
        let refusal = classify(stderr, &[]).expect("a refusal");
        assert_eq!(refusal.code, Some(-1743));
        assert_eq!(refusal.permission, Permission::Automation);
        assert_eq!(refusal.app.as_deref(), Some("Finder"));
        let message = refusal.message(&[]);
        assert!(
            message.starts_with("macOS did not let this run send Apple events to Finder (-1743)")
        );
        assert!(
            message.contains("Privacy & Security ▸ Automation"),
            "{message}"
        );
        assert!(message.contains("turn on Finder"), "{message}");

        let privilege = "1:80: execution error: System Events got an error: A privilege violation occurred. (-10004)";
        let refusal = classify(privilege, &targets(&["Finder", "System Events"])).unwrap();
        assert_eq!(refusal.app.as_deref(), Some("System Events"));
        assert_eq!(refusal.code, Some(-10004));

        // No app in the message: the only target the source names.
        let timeout = "execution error: AppleEvent timed out. (-1712)";
        let refusal = classify(timeout, &targets(&["Mail"])).unwrap();
        assert_eq!(refusal.app.as_deref(), Some("Mail"));
        assert!(
            refusal
                .message(&targets(&["Mail"]))
                .contains("Automation prompt")
        );

        // Several targets, none named: the message lists them.
        let refusal = classify(timeout, &targets(&["Mail", "Notes"])).unwrap();
        assert_eq!(refusal.app, None);
        assert!(
            refusal
                .message(&targets(&["Mail", "Notes"]))
                .contains("one of Mail, Notes")
        );

        let jxa = "execution error: Error: Error: Not authorized to send Apple events to System Events. (-1743)";
        assert_eq!(
            classify(jxa, &[]).unwrap().app.as_deref(),
            Some("System Events")
        );
        let consent = "execution error: Not authorized to send Apple events to Music. (-1744)";
        assert_eq!(classify(consent, &[]).unwrap().code, Some(-1744));
    }

    #[test]
    fn ui_scripting_refusals_point_to_accessibility() {
        let stderr = "31:60: execution error: System Events got an error: osascript is not allowed assistive access. (-1719)";
        let refusal = classify(stderr, &[]).unwrap();
        assert_eq!(refusal.permission, Permission::Accessibility);
        assert_eq!(refusal.app.as_deref(), Some("System Events"));
        assert!(
            refusal
                .message(&[])
                .contains("Privacy & Security ▸ Accessibility")
        );
    }

    #[test]
    fn other_failures_are_not_refusals() {
        for stderr in [
            "0:5: syntax error: Expected end of line but found identifier. (-2741)",
            "12:30: execution error: Finder got an error: Can’t get window 1. Invalid index. (-1719)",
            "execution error: The variable x is not defined. (-2753)",
            "",
            "plain text with no code",
        ] {
            assert_eq!(classify(stderr, &[]), None, "{stderr:?}");
        }
    }
}
