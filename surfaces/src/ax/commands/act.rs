//! `ax act`: one action on one element (by ref or selector): the approver check, the action,
//! and the element read back until the intended change shows, judged into the act's effect.

use std::time::Instant;

use computer_ipc::ToolError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Command, Preparing, Running, Typing};
use crate::accessibility::ElementWatch;
use crate::accessibility::backend::{ActName, Acted, Backend, Failure, Include, NodeOf, said};
use crate::accessibility::read_back::{ElementView, Intent, judge};
use crate::accessibility::roles::{State, StateSet, all_states};
use crate::ax::call::{AppArg, RefArg, Target, in_app, line, target_of};
use crate::ax::keyboard::FieldOwner;
use crate::ax::lookup::{Ax, located, shown};
use crate::{Effect, EffectReport, Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActArgs {
    #[serde(default)]
    selector: Option<String>,
    /// [n] or selector
    #[serde(default, rename = "ref")]
    reference: Option<RefArg>,
    #[serde(default)]
    app: Option<AppArg>,
    action: ActName,
    #[serde(default)]
    value: Option<Value>,
}

/// `ax act`, checked.
#[derive(Debug)]
pub struct Act {
    target: Target,
    app: Option<AppArg>,
    action: ActName,
    /// The value `set_value` sets; a stored secret's reference until the call runs, when the
    /// surface puts the secret itself here.
    pub value: Option<Value>,
}

impl Command for Act {
    const NAME: &'static str = "act";
    const RISK: Risk = Risk::Act;
    const FIELDS: &'static [&'static str] = &[
        "done",
        "via?",
        "value?",
        "changed?",
        "node",
        "effect",
        "effect_evidence",
    ];
    type Args = ActArgs;

    fn prepare(a: ActArgs, call: &mut Preparing<'_>) -> Result<Act, ToolError> {
        let target = target_of(call.dialect, a.reference, a.selector, "args")?;
        match (a.action, &a.value) {
            (ActName::SetValue, None) => {
                return Err(
                    ToolError::invalid("set_value needs `value` (text or number)").at("args.value"),
                );
            }
            (ActName::SetValue, Some(Value::String(_) | Value::Number(_))) => {}
            (ActName::SetValue, Some(secret @ Value::Object(_))) => {
                crate::kit::secrets::secret_in_place(secret, "args.value")?;
            }
            (ActName::SetValue, Some(_)) => {
                return Err(ToolError::invalid(
                    "`value` must be a string, a number or {\"secret\": \"keychain://…\"}",
                )
                .at("args.value"));
            }
            (_, Some(_)) => {
                return Err(
                    ToolError::invalid("`value` is only for action set_value").at("args.value")
                );
            }
            _ => {}
        }
        Ok(Act {
            target,
            app: a.app,
            action: a.action,
            value: a.value,
        })
    }

    fn describe(&self) -> String {
        let action = format!("{:?}", self.action).to_lowercase();
        let (target, scope) = (self.target.describe(), in_app(&self.app));
        match &self.value {
            Some(Value::Object(_)) => format!("{action} {target} to a stored secret{scope}"),
            Some(v) => format!("{action} {target} to {v}{scope}"),
            None => format!("{action} {target}{scope}"),
        }
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    fn element(&self) -> Option<&Target> {
        Some(&self.target)
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let Act {
            target,
            app,
            action,
            value,
        } = self;
        let deadline = call.deadline;
        let (r, node) = located_as_seen(ax, call, &target, &app).await?;
        let described = line(&shown(&node), r, Include::default(), u32::MAX);
        let setting_value = action == ActName::SetValue;
        // What the act is judged on, read before it; where a change may be waited for, the
        // element's change signals are subscribed to before it, so none is missed.
        let intent = match action {
            ActName::Press | ActName::Activate => Intent::Press,
            ActName::Toggle => Intent::Toggle,
            ActName::Focus => Intent::Focus,
            _ => Intent::State,
        };
        let before = element_view(&node);
        let may_wait = intent != Intent::State && before.shows(intent);
        // An insensitive element is waited on for the quiet time, with no signal to expect.
        let mut watch = match may_wait && !before.insensitive() {
            true => ax.backend.watch(&node.element, deadline).await,
            false => None,
        };
        let text = value.as_ref().map(|value| match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let acted = match ax
            .backend
            .act(&node, action, value, &described, deadline)
            .await
        {
            // A field that takes text only from keys gets them, when the daemon has a keyboard.
            Err(Failure::KeysOnly(why)) => match (&call.keys, text) {
                (Some(keys), Some(text)) => {
                    typed_over(ax, &node, &text, &described, keys, deadline).await?
                }
                _ => return Err(Failure::Said(why)),
            },
            acted => acted?,
        };
        // The reply says what happened and what changed; the ref and the action asked for are the
        // caller's own words, and unchanged states would only repeat them.
        let mut fields = Map::new();
        fields.insert("done".into(), json!(acted.done));
        if let Some(via) = acted.via {
            fields.insert("via".into(), json!(via));
        }
        if let Some(value) = acted.value {
            fields.insert("value".into(), value);
        }
        let after = read_back(
            ax,
            &node,
            intent,
            &before,
            acted.done && may_wait,
            watch.as_mut(),
            deadline,
        )
        .await;
        let report = if setting_value {
            value_read_back(&before, after.as_ref().map(element_view), acted.done)
        } else {
            judge(
                intent,
                &before,
                after.as_ref().map(element_view).as_ref(),
                acted.done,
            )
        };
        match after {
            Some(after) => {
                let changed = changed_states(node.states, after.states);
                if !changed.is_empty() {
                    fields.insert("changed".into(), json!(changed));
                }
                fields.insert(
                    "node".into(),
                    json!(line(&shown(&after), r, Include::default(), u32::MAX)),
                );
            }
            None => {
                fields.insert(
                    "node".into(),
                    json!(format!("{described} (gone after the action)")),
                );
            }
        }
        let mut outcome = Outcome {
            success: acted.done,
            fields,
            ..Outcome::default()
        };
        report.record(&mut outcome);
        Ok(outcome)
    }
}

impl Act {
    /// The stored secret `set_value` sets, when its value is `{"secret": "keychain://…"}`
    /// (checked at prepare); resolved only when the call runs.
    pub fn secret(&self) -> Option<crate::kit::secret_store::SecretRef> {
        match &self.value {
            Some(value @ Value::Object(_)) => {
                crate::kit::secrets::secret_in_place(value, "args.value")
                    .ok()
                    .flatten()
            }
            _ => None,
        }
    }

    /// The element it acts on, as the call names it (a ref or a selector).
    pub fn element_named(&self) -> String {
        match &self.target {
            Target::Ref(r) => format!("[{r}]"),
            Target::Selector(selector) => format!("`{}`", selector.source),
        }
    }
}

/// The element `target` names, found and, when the act is bound to an observation
/// (`complications.seen`), checked to be the one that observation showed, as it showed it.
async fn located_as_seen<B: Backend>(
    ax: &Ax<B>,
    call: &Running<'_>,
    target: &Target,
    app: &Option<AppArg>,
) -> Result<(u32, NodeOf<B>), Failure> {
    let seen = call.seen;
    if let Some(seen) = seen {
        crate::ax::seen::check_named(seen, target)?;
    }
    let found = located(ax, call.deadline, target, app, Some(call.protected)).await;
    let (r, node) = match (found, seen) {
        (Err(failure), Some(seen)) => {
            return Err(crate::ax::seen::lookup_failed(seen, target, failure));
        }
        (found, _) => found?,
    };
    if let Some(seen) = seen {
        // Right before acting: the element is the one the observation showed, as it showed it.
        let now = crate::ax::seen::Shown {
            role: node.role_name(),
            name: node.name.clone(),
        };
        crate::ax::seen::check_found(seen, target, r, &now)?;
    }
    Ok((r, node))
}

/// The element as it is after the act (`None`: it is gone, as a button that closes its window
/// is), read until the intended change shows when `waits`, within the settle wait.
async fn read_back<B: Backend>(
    ax: &Ax<B>,
    node: &NodeOf<B>,
    intent: Intent,
    before: &ElementView,
    waits: bool,
    mut watch: Option<&mut ElementWatch>,
    deadline: Instant,
) -> Option<NodeOf<B>> {
    let started = Instant::now();
    let mut pause = crate::kit::effect::READ_BACK_FIRST_POLL;
    // A sensitive element signals its change when the toolkit applies it: waiting for that
    // first spares the read that would most often find it not changed yet.
    if let Some(watch) = watch.as_mut()
        && waits
    {
        watch
            .changed_within(crate::kit::effect::READ_BACK_POLL)
            .await;
    }
    loop {
        let after = ax
            .backend
            .read(&node.element, deadline)
            .await
            .ok()
            .flatten();
        // Only a done act is waited on, so the read is judged as one.
        let report = judge(
            intent,
            before,
            after.as_ref().map(element_view).as_ref(),
            true,
        );
        if !waits
            || report.effect == Effect::Confirmed
            || started.elapsed() >= crate::kit::effect::READ_BACK_QUIET
            || Instant::now() + pause >= deadline
        {
            return after;
        }
        match watch.as_mut() {
            Some(watch) => watch.changed_within(pause).await,
            None => tokio::time::sleep(pause).await,
        }
        pause = (pause * 2).min(crate::kit::effect::READ_BACK_POLL);
    }
}

/// `set_value` on a field that takes text only from keys: focused (and seen to have the
/// focus, so the keys reach it and nothing else), its text selected and typed over through
/// the gui keyboard, and read back until the text shows or the settle bound passes.
async fn typed_over<B: Backend>(
    ax: &Ax<B>,
    node: &NodeOf<B>,
    text: &str,
    described: &str,
    keys: &Typing<'_>,
    deadline: Instant,
) -> Result<Acted, Failure> {
    let text = &text.replace("\r\n", "\n");
    typable_into(text, node.states, described)?;
    let mut watch = ax.backend.watch(&node.element, deadline).await;
    let focus = ax
        .backend
        .act(node, ActName::Focus, None, described, deadline)
        .await?;
    // Firefox moves the focus in its content process and says so later, the later the busier
    // the machine: the field is read until it reads focused, within the settle bound.
    let focused = focus.done
        && reads_until(ax, node, watch.as_mut(), deadline, |now| {
            now.states.contains(State::Focused)
        })
        .await?
        .is_some();
    if !focused {
        return Err(said(format!(
            "{described} takes text only from keys and did not take the keyboard focus, so \
             keys would reach something else; nothing was typed"
        )));
    }
    let owner = ax
        .backend
        .app_key_of(&node.element)
        .and_then(|key| {
            ax.backend
                .known_apps()
                .into_iter()
                .find(|(k, _, _)| *k == key)
        })
        .map(|(_, name, pid)| FieldOwner { name, pid })
        .unwrap_or(FieldOwner {
            name: String::new(),
            pid: None,
        });
    keys.keyboard
        .replace_focused_text(keys.ctx, text, &owner)
        .await?;
    let shows = |now: &NodeOf<B>| {
        now.value.as_deref() == Some(text) || (text.is_empty() && now.value.is_none())
    };
    let read = reads_until(ax, node, watch.as_mut(), deadline, shows).await?;
    let now = match read {
        Some(now) => now.value,
        // Not shown within the bound: what the field holds now.
        None => ax
            .backend
            .read(&node.element, deadline)
            .await?
            .and_then(|n| n.value),
    };
    let done = now.as_deref() == Some(text) || (text.is_empty() && now.is_none());
    Ok(Acted {
        done,
        via: Some("keys"),
        value: now.map(Value::String),
    })
}

/// Reads `node` until it meets `wanted` (woken by its change signals where the toolkit sends
/// them), within the settle bound and the call's deadline: the node as it met it, or `None`.
async fn reads_until<B: Backend>(
    ax: &Ax<B>,
    node: &NodeOf<B>,
    mut watch: Option<&mut ElementWatch>,
    deadline: Instant,
    wanted: impl Fn(&NodeOf<B>) -> bool,
) -> Result<Option<NodeOf<B>>, Failure> {
    let started = Instant::now();
    let mut pause = crate::kit::effect::READ_BACK_FIRST_POLL;
    loop {
        if let Some(now) = ax.backend.read(&node.element, deadline).await?
            && wanted(&now)
        {
            return Ok(Some(now));
        }
        if started.elapsed() >= crate::kit::effect::READ_BACK_BOUND
            || Instant::now() + pause >= deadline
        {
            return Ok(None);
        }
        match watch.as_mut() {
            Some(watch) => watch.changed_within(pause).await,
            None => tokio::time::sleep(pause).await,
        }
        pause = (pause * 2).min(crate::kit::effect::READ_BACK_POLL);
    }
}

/// Refuses text that keys would not put into the field as text: a line break in a one-line
/// field submits its form, a tab moves the focus, other control characters are keys of their
/// own.
fn typable_into(text: &str, states: StateSet, described: &str) -> Result<(), Failure> {
    let multi_line = states.contains(State::MultiLine);
    match text
        .chars()
        .find(|&c| c.is_control() && !(multi_line && c == '\n'))
    {
        Some('\n') => Err(said(format!(
            "{described} is a one-line field, which takes text only from keys, and a line break \
             typed there submits its form; set the text without it, then `gui key` Return if a \
             submit is meant"
        ))),
        Some(c) => Err(said(format!(
            "{described} takes text only from keys, and the value holds control character              U+{:04X}, which types no text; leave it out (a tab moves the focus: use `gui key`)",
            c as u32
        ))),
        None => Ok(()),
    }
}

/// A `set_value`'s effect: the value read back against the one asked for (never quoted: it
/// may be a secret).
fn value_read_back(before: &ElementView, after: Option<ElementView>, done: bool) -> EffectReport {
    let changed = after != Some(before.clone());
    match (done, changed) {
        (true, _) => EffectReport::new(
            Effect::Confirmed,
            format!("{} reads back the value set", before.label()),
        ),
        (false, true) => EffectReport::new(
            Effect::Partial,
            format!(
                "{} changed but does not read back the value set",
                before.label()
            ),
        ),
        (false, false) => EffectReport::new(
            Effect::SuspectedNoop,
            format!("{} did not change", before.label()),
        ),
    }
}

/// What a read-back compares of a node.
fn element_view<E, N>(node: &crate::accessibility::backend::Node<E, N>) -> ElementView {
    ElementView {
        role: node.role,
        name: node.name.clone(),
        states: node.states,
        value: node.value.clone(),
    }
}

/// The states an action changed: `+checked` for one it gained, `-focused` for one it lost.
fn changed_states(before: StateSet, after: StateSet) -> Vec<String> {
    let (before, after) = (all_states(before), all_states(after));
    let gained = after
        .iter()
        .filter(|s| !before.contains(s))
        .map(|s| format!("+{s}"));
    let lost = before
        .iter()
        .filter(|s| !after.contains(s))
        .map(|s| format!("-{s}"));
    gained.chain(lost).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str, states: StateSet) -> Option<String> {
        match typable_into(text, states, "[1] textInput") {
            Ok(()) => None,
            Err(Failure::Said(message)) => Some(message),
            Err(other) => panic!("not a message: {other:?}"),
        }
    }

    #[test]
    fn keys_into_a_field_carry_text_only() {
        let one_line = StateSet::default();
        let mut multi_line = StateSet::default();
        multi_line.insert(State::MultiLine);
        assert_eq!(refusal("Ada Lovelace, née Byron", one_line), None);
        assert_eq!(refusal("", one_line), None);
        // A line break submits a one-line field's form; in a multi-line one it is text.
        assert!(refusal("a\nb", one_line).is_some_and(|m| m.contains("one-line field")));
        assert_eq!(refusal("a\nb", multi_line), None);
        // A tab moves the focus, wherever it is typed.
        assert!(refusal("a\tb", multi_line).is_some_and(|m| m.contains("U+0009")));
        assert!(refusal("a\u{1b}b", one_line).is_some_and(|m| m.contains("U+001B")));
    }
}
