//! Text typed into an element that takes it only from keys (web text fields: Chromium exposes
//! no editable text, Firefox's ignores it): the gui surface's own `key` and `type`, each with
//! every check a gui act makes (the person at the desk, an approver's windows), refused where
//! the keys would reach a terminal or need a consent the call was not asked.

use std::sync::Arc;

use computer_ipc::Complications;
use serde_json::{Map, Value, json};

use crate::accessibility::backend::{Failure, said};
use crate::{CallContext, Surface};

/// The keyboard `ax act set_value` falls back on: the gui surface, driven command by command.
pub struct Keyboard {
    gui: Arc<dyn Surface>,
}

/// The app a field belongs to, as its accessibility tree names it.
pub struct FieldOwner {
    pub name: String,
    pub pid: Option<u32>,
}

impl FieldOwner {
    /// Whether the window that has the keyboard is this app's: by process where both are
    /// known, else by name (wlroots tells a window's app id, not its process). A window that
    /// tells neither, or no window, is not: deny when in doubt.
    fn owns(&self, window: Option<&crate::TargetFacts>) -> bool {
        let Some(window) = window else {
            return false;
        };
        match (self.pid, window.pid, window.app.as_deref()) {
            (Some(ours), Some(theirs), _) => ours == theirs,
            (_, _, Some(app)) if !app.is_empty() && !self.name.is_empty() => {
                let (app, name) = (app.to_lowercase(), self.name.to_lowercase());
                app.contains(&name) || name.contains(&app)
            }
            _ => false,
        }
    }
}

/// The combo that selects all of a focused field's text.
#[cfg(target_os = "macos")]
const SELECT_ALL: &str = "cmd+a";
#[cfg(not(target_os = "macos"))]
const SELECT_ALL: &str = "ctrl+a";

impl Keyboard {
    pub fn over(gui: Arc<dyn Surface>) -> Keyboard {
        Keyboard { gui }
    }

    /// Replaces the text of the field that has the keyboard focus with `text`: all of it
    /// selected, then typed over (or deleted, for no text). The caller has checked that the
    /// field has the focus. What the gui commands reply (a count of characters, their own
    /// read-back) stays here: the field's read-back is the caller's, and the text may be a
    /// secret.
    /// `owner` is the field's app: keys whose window is another app's are refused (an app
    /// keeps its own focused element while another app's window has the keyboard).
    pub async fn replace_focused_text(
        &self,
        ctx: &CallContext,
        text: &str,
        owner: &FieldOwner,
    ) -> Result<(), Failure> {
        let last = match text.is_empty() {
            true => ("key", json!({"combo": "BackSpace"})),
            false => ("type", json!({"text": text})),
        };
        // Every step is prepared and checked before the first key goes: a select-all must not
        // reach a terminal whose typing would then be refused.
        let mut steps = Vec::with_capacity(2);
        for (command, args) in [("key", json!({"combo": SELECT_ALL})), last] {
            steps.push((command, self.checked(command, args, owner)?));
        }
        for (command, action) in steps {
            let outcome = action.run(ctx.clone()).await.map_err(|err| match err {
                crate::SurfaceError::Refused { message }
                | crate::SurfaceError::NothingSent { message } => Failure::Refused(message),
                other => said(format!(
                    "the field takes text only from keys, and sending them failed: {other}"
                )),
            })?;
            if !outcome.success {
                return Err(said(format!(
                    "the field takes text only from keys, and `gui {command}` did not succeed"
                )));
            }
        }
        Ok(())
    }

    /// One gui command, prepared as the gui surface prepares any call, with what no decision
    /// of this call covered refused: keys into a terminal (a shell run in disguise, decided as
    /// one), into another app's window, and the backend's consent (the person's answer to its
    /// own question).
    fn checked(
        &self,
        command: &str,
        args: Value,
        owner: &FieldOwner,
    ) -> Result<Box<dyn crate::PreparedAction>, Failure> {
        let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        let action = self
            .gui
            .prepare(command, &args, &Complications::default())
            .map_err(|err| {
                said(format!(
                    "the field takes text only from keys, and the keyboard cannot send them: {}",
                    err.message
                ))
            })?;
        let facts = action.facts();
        if facts.terminal.is_some() {
            return Err(Failure::Refused(
                "refused: the keyboard focus is in a terminal, not the field; keys there are \
                 decided as a shell run, so type them with `gui type` if that is meant"
                    .into(),
            ));
        }
        let window = facts.target.as_ref();
        if !owner.owns(window) {
            return Err(Failure::Refused(format!(
                "refused: the keyboard focus is in another app's window ({} \"{}\"{}), not \
                 {}'s, where the field is; bring the field's window to the front (`gui focus`) \
                 and call again",
                window.and_then(|w| w.app.as_deref()).unwrap_or("unnamed"),
                window.and_then(|w| w.window.as_deref()).unwrap_or(""),
                window
                    .and_then(|w| w.pid)
                    .map(|pid| format!(", pid {pid}"))
                    .unwrap_or_default(),
                owner.name,
            )));
        }
        if let Some(question) = facts.consent {
            return Err(said(format!(
                "the field takes text only from keys, and the gui keyboard first needs the \
                 person's consent: {question}"
            )));
        }
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TargetFacts, TargetKind};

    fn window(app: Option<&str>, pid: Option<u32>) -> TargetFacts {
        TargetFacts {
            kind: TargetKind::Window,
            app: app.map(String::from),
            pid,
            window: Some("a window".into()),
            window_id: Some("7".into()),
            resolved: true,
        }
    }

    fn owner(name: &str, pid: Option<u32>) -> FieldOwner {
        FieldOwner {
            name: name.into(),
            pid,
        }
    }

    #[test]
    fn a_window_is_the_fields_app_by_process_where_both_are_known() {
        let firefox = owner("Firefox", Some(10));
        assert!(firefox.owns(Some(&window(Some("firefox-esr"), Some(10)))));
        // The same name in another process is another app.
        assert!(!firefox.owns(Some(&window(Some("firefox-esr"), Some(11)))));
        assert!(!firefox.owns(Some(&window(Some("XTerm"), Some(12)))));
    }

    #[test]
    fn without_processes_the_names_decide_and_a_window_that_tells_nothing_is_refused() {
        let chromium = owner("Chromium", Some(10));
        assert!(chromium.owns(Some(&window(Some("chromium"), None))));
        assert!(!chromium.owns(Some(&window(Some("foot"), None))));
        assert!(!chromium.owns(Some(&window(None, None))));
        assert!(!chromium.owns(Some(&window(Some(""), None))));
        assert!(!chromium.owns(None));
        // An app the tree did not name matches no window by name.
        assert!(!owner("", None).owns(Some(&window(Some("chromium"), None))));
    }
}
