//! Actions on AT-SPI elements: the toolkit's own actions (`DoAction`) chosen by name, focus and
//! scrolling through `Component`, selection through the parent's `Selection`, text and values
//! set through `EditableText` and `Value`, and a short wait for the effect to show in the states.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::bus::{self, ACCESSIBLE, BusError};
use super::walk::text_of;
use super::{Accessible, AtspiNode};
use crate::accessibility::backend::{ActName, Acted, Failure, said};
use crate::accessibility::roles::{State, StateSet};

/// How long an action's effect may take to show in the element's states.
const SETTLE_LIMIT: Duration = Duration::from_millis(500);

/// Carries out `action` on `node` (read just before); `described` is its outline line.
pub async fn act(
    conn: &zbus::Connection,
    deadline: Instant,
    node: &AtspiNode,
    action: ActName,
    value: Option<Value>,
    described: &str,
) -> Result<Acted, Failure> {
    let acting = Acting {
        conn,
        deadline,
        node,
        described,
    };
    match action {
        ActName::Press | ActName::Activate | ActName::Toggle => acting.named_action(action).await,
        ActName::Expand | ActName::Collapse => acting.expand(action).await,
        ActName::Focus => acting.focus().await,
        ActName::ScrollIntoView => acting.scroll_into_view().await,
        ActName::Select => acting.select().await,
        ActName::SetValue => acting.set_value(value.unwrap_or(Value::Null)).await,
    }
}

/// An act under way: the element, as read just before, and what each step calls it with.
struct Acting<'a> {
    conn: &'a zbus::Connection,
    deadline: Instant,
    node: &'a AtspiNode,
    /// The element's outline line, as errors name it.
    described: &'a str,
}

/// What an act did: whether it took, and how when that is worth telling.
fn acted(done: bool, via: Option<&'static str>) -> Acted {
    Acted {
        done,
        via,
        value: None,
    }
}

/// What an app answered to `DoAction`.
enum Answer {
    /// Whether it did the action, as it said.
    Said(bool),
    /// No reply in time, while the app answers other calls: the action's handler is still
    /// running (Qt 5 runs a dialog the action opened inside it), so it was taken.
    Held,
}

impl Answer {
    fn acted(self) -> Acted {
        match self {
            Answer::Said(done) => acted(done, None),
            Answer::Held => acted(true, Some("reply_held")),
        }
    }
}

impl Acting<'_> {
    fn at(&self) -> &Accessible {
        &self.node.element
    }

    /// The error for an act the element offers no way to do: its actions and interfaces.
    fn no_way(&self, what: &str) -> Failure {
        let node = self.node;
        said(format!(
            "{} cannot {what}: its actions are [{}] and its interfaces [{}]",
            self.described,
            node.actions.join(", "),
            node.native
                .interfaces
                .iter()
                .map(|i| i.trim_start_matches("org.a11y.atspi."))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Does the toolkit's action at `index` (`Action.DoAction`).
    async fn do_action(&self, index: i32) -> Result<Answer, BusError> {
        let at = self.at();
        let answer = bus::call::<_, bool>(
            self.conn,
            self.deadline,
            &at.bus,
            &at.path,
            "org.a11y.atspi.Action",
            "DoAction",
            &(index,),
        )
        .await;
        match answer {
            Ok(done) => Ok(Answer::Said(done)),
            // Qt 5 answers an action once its handler returns, and a handler that opens a modal
            // dialog (a menu's "Save As") returns when the dialog closes; meanwhile the app
            // answers other calls. An app that answers none is busy or frozen: the timeout.
            Err(err @ BusError::Timeout { .. }) => {
                match bus::states(self.conn, self.deadline, &at.bus, &at.path).await {
                    Ok(_) => Ok(Answer::Held),
                    Err(_) => Err(err),
                }
            }
            Err(err) => Err(err),
        }
    }

    /// Does the first of the `wanted` actions the element has; `verb` names the act in the
    /// error when it has none.
    async fn do_first_of(&self, wanted: &[&str], verb: ActName) -> Result<Answer, Failure> {
        let index = pick_action(&self.node.actions, wanted)
            .ok_or_else(|| self.no_way(&format!("{verb:?}").to_lowercase()))?;
        Ok(self.do_action(index).await?)
    }

    /// `Component.GrabFocus`.
    async fn grab_focus(&self) -> Result<bool, BusError> {
        let at = self.at();
        bus::call::<_, bool>(
            self.conn,
            self.deadline,
            &at.bus,
            &at.path,
            "org.a11y.atspi.Component",
            "GrabFocus",
            &(),
        )
        .await
    }

    /// Waits (briefly) until the element's states meet `wanted`.
    async fn settles(&self, wanted: impl Fn(StateSet) -> bool) -> bool {
        settles(self.conn, self.deadline, self.at(), wanted).await
    }

    /// `press`, `activate` and `toggle`: the toolkit's own action of that name, or its nearest.
    async fn named_action(&self, action: ActName) -> Result<Acted, Failure> {
        let wanted: &[&str] = match action {
            ActName::Press => PRESS_ACTIONS,
            ActName::Activate => ACTIVATE_ACTIONS,
            // Web check boxes (Chromium, Firefox) say "check" or "uncheck", whichever their
            // state makes the press do.
            _ => &[
                "toggle", "click", "press", "check", "uncheck", "activate", "switch",
            ],
        };
        Ok(self.do_first_of(wanted, action).await?.acted())
    }

    /// `expand` and `collapse`, checked against the element's `expanded` state after.
    async fn expand(&self, action: ActName) -> Result<Acted, Failure> {
        let node = self.node;
        let want = action == ActName::Expand;
        let expandable = node.states.contains(State::Expandable);
        let specific = pick_action(&node.actions, &["expand", "collapse", "expand or contract"]);
        // GTK3 combo boxes open their list on "press" without saying they expand.
        let combo = matches!(
            node.role,
            accesskit::Role::ComboBox | accesskit::Role::EditableComboBox
        );
        if !expandable && specific.is_none() && !combo {
            return Err(self.no_way(&format!(
                "{} (it is not expandable)",
                format!("{action:?}").to_lowercase()
            )));
        }
        if node.states.contains(State::Expanded) == want {
            return Ok(acted(true, Some("already")));
        }
        // The specific actions first; expanders (GTK's GtkExpander) only "activate".
        let wanted: &[&str] = if want {
            &[
                "expand",
                "expand or contract",
                "open",
                "showmenu",
                "activate",
                "toggle",
                "press",
                "click",
            ]
        } else {
            &[
                "collapse",
                "expand or contract",
                "close",
                "activate",
                "toggle",
                "press",
                "click",
                // A web <select> (Chromium) has only "open", which closes it again when it is
                // open; the state read after says whether it did.
                "open",
            ]
        };
        let answer = self.do_first_of(wanted, action).await?;
        let mut acted = answer.acted();
        acted.done = acted.done
            && (!expandable || self.settles(|s| s.contains(State::Expanded) == want).await);
        Ok(acted)
    }

    /// `focus`, through `Component`.
    async fn focus(&self) -> Result<Acted, Failure> {
        if !self.node.native.has_interface("Component") {
            return Err(self.no_way("take focus"));
        }
        let grabbed = self.grab_focus().await?;
        // Firefox moves the focus in its content process and says so a little later: the
        // read-back that follows judges what the wait saw.
        if grabbed && !self.node.states.contains(State::Focused) {
            self.settles(|s| s.contains(State::Focused)).await;
        }
        Ok(acted(grabbed, None))
    }

    /// `scroll_into_view`: `Component.ScrollTo`, else focus where the toolkit scrolls to the
    /// focus.
    async fn scroll_into_view(&self) -> Result<Acted, Failure> {
        let node = self.node;
        if !node.native.has_interface("Component") {
            return Err(self.no_way("scroll into view"));
        }
        let at = self.at();
        // ATSPI_SCROLL_ANYWHERE. GTK3 does not implement ScrollTo (it answers false); its
        // scrolled windows follow the focus, so a focusable element is focused instead.
        let scrolled = bus::call::<_, bool>(
            self.conn,
            self.deadline,
            &at.bus,
            &at.path,
            "org.a11y.atspi.Component",
            "ScrollTo",
            &(6u32,),
        )
        .await
        .or_else(|err| match err {
            BusError::Timeout { .. } | BusError::Connect(_) => Err(err),
            _ => Ok(false),
        })?;
        if scrolled {
            Ok(acted(true, Some("scroll_to")))
        } else if node.states.contains(State::Focusable) {
            let done =
                self.grab_focus().await? && self.settles(|s| s.contains(State::Showing)).await;
            Ok(acted(done, Some("focus")))
        } else {
            Err(said(format!(
                "{} cannot be scrolled into view: the app does not implement ScrollTo and the element cannot take focus; scroll its container instead (gui scroll)",
                self.described
            )))
        }
    }

    /// `select`, through the parent's `Selection`, else the element's own action.
    async fn select(&self) -> Result<Acted, Failure> {
        let node = self.node;
        if node.states.contains(State::Selected) {
            return Ok(acted(true, Some("already")));
        }
        let done = select(self.conn, self.deadline, self.at(), node)
            .await?
            .ok_or_else(|| self.no_way("be selected"))?
            && (!node.states.contains(State::Selectable)
                || self.settles(|s| s.contains(State::Selected)).await);
        Ok(acted(done, None))
    }

    /// `set_value`: as text through `EditableText`, or as a number through `Value`; read back
    /// after.
    async fn set_value(&self, value: Value) -> Result<Acted, Failure> {
        let native = &self.node.native;
        let number = match &value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        // A spin button is both text and value: a number set as text would only show, not
        // change the value until the field loses focus.
        let as_value = native.has_interface("Value")
            && (number.is_some() || !native.has_interface("EditableText"));
        if !as_value && native.has_interface("EditableText") {
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.set_text(text).await
        } else if as_value {
            let number = number.ok_or_else(|| {
                said(format!(
                    "{} takes a number; `value` {value} is not one",
                    self.described
                ))
            })?;
            self.set_number(number).await
        } else if self.takes_keys() {
            // Web text fields in Chromium expose no EditableText: typing is the way.
            Err(Failure::KeysOnly(
                self.keys_only("its toolkit exposes no editable text"),
            ))
        } else {
            Err(self.no_way("take a value (it is neither editable text nor a value)"))
        }
    }

    /// Whether keys can set the element's text: an editable, focusable text field.
    fn takes_keys(&self) -> bool {
        let states = self.node.states;
        self.node.native.has_interface("Text")
            && self.node.native.has_interface("Component")
            && states.contains(State::Editable)
            && states.contains(State::Focusable)
    }

    /// Why the element takes text only from keys, and what to do where the daemon has no
    /// keyboard to type it with.
    fn keys_only(&self, why: &str) -> String {
        format!(
            "{} takes text only from keys ({why}), and no gui keyboard is at hand here; focus it with `ax act` focus, then type with `gui type`",
            self.described
        )
    }

    /// Sets the element's text (`EditableText.SetTextContents`) and reads it back.
    async fn set_text(&self, text: String) -> Result<Acted, Failure> {
        let at = self.at();
        let (dest, path) = (&at.bus, &at.path);
        let ok = bus::call::<_, bool>(
            self.conn,
            self.deadline,
            dest,
            path,
            "org.a11y.atspi.EditableText",
            "SetTextContents",
            &(text.as_str(),),
        )
        .await?;
        let now = text_of(self.conn, self.deadline, dest, path, Some(4096)).await?;
        // Firefox's web fields accept the call and change nothing: typing is the way there.
        if now != text
            && self.node.value.as_deref().is_none_or(|was| was == now)
            && self.takes_keys()
        {
            return Err(Failure::KeysOnly(self.keys_only(
                "its toolkit accepted the text through the accessibility API and left the field unchanged",
            )));
        }
        Ok(Acted {
            done: ok && now == text,
            via: None,
            value: Some(json!(now)),
        })
    }

    /// Sets the element's `Value.CurrentValue` and reads it back.
    async fn set_number(&self, number: f64) -> Result<Acted, Failure> {
        let at = self.at();
        let (dest, path) = (&at.bus, &at.path);
        let _: () = bus::call(
            self.conn,
            self.deadline,
            dest,
            path,
            "org.freedesktop.DBus.Properties",
            "Set",
            &(
                "org.a11y.atspi.Value",
                "CurrentValue",
                zbus::zvariant::Value::from(number),
            ),
        )
        .await?;
        let now: f64 = bus::property(
            self.conn,
            self.deadline,
            dest,
            path,
            "org.a11y.atspi.Value",
            "CurrentValue",
        )
        .await?;
        Ok(Acted {
            done: (now - number).abs() < 1e-9,
            via: None,
            value: Some(json!(now)),
        })
    }
}

/// Selects a node through its parent's Selection interface, else through the table it is a
/// row or cell of, else its own select/click action. `None` when it offers no way to be
/// selected; `Some(false)` when every way it offers refused.
async fn select(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &Accessible,
    node: &AtspiNode,
) -> Result<Option<bool>, BusError> {
    let parent = Parent::of(conn, deadline, at).await?;
    // Each way in turn, until one selects; a way that refused leaves the others to try.
    let mut refused = false;
    let by_selection = parent.select_child(conn, deadline).await?;
    if by_selection == Some(true) {
        return Ok(Some(true));
    }
    refused |= by_selection == Some(false);
    let by_cell = select_row_of_cell(conn, deadline, at, node).await?;
    if by_cell == Some(true) {
        return Ok(Some(true));
    }
    refused |= by_cell == Some(false);
    let by_table = parent.select_row(conn, deadline).await?;
    if by_table == Some(true) {
        return Ok(Some(true));
    }
    refused |= by_table == Some(false);
    // Only actions that select: "activate" or "press" on a file manager's row opens the file.
    match pick_action(&node.actions, &["select", "click"]) {
        Some(i) => Ok(Some(
            bus::call(
                conn,
                deadline,
                &at.bus,
                &at.path,
                "org.a11y.atspi.Action",
                "DoAction",
                &(i,),
            )
            .await?,
        )),
        None if refused => Ok(Some(false)),
        None => Ok(None),
    }
}

/// Whether a bus error ends the act (the app or the bus is gone or too slow) rather than only
/// ruling out one way of doing it.
fn ends_the_act(err: &BusError) -> bool {
    matches!(err, BusError::Timeout { .. } | BusError::Connect(_))
}

/// The parent of an element being selected: where it is, the element's index in it, and the
/// interfaces it has.
struct Parent {
    bus: String,
    path: zbus::zvariant::OwnedObjectPath,
    index: i32,
    interfaces: Vec<String>,
}

impl Parent {
    async fn of(
        conn: &zbus::Connection,
        deadline: Instant,
        at: &Accessible,
    ) -> Result<Parent, BusError> {
        let (bus, path): (String, zbus::zvariant::OwnedObjectPath) =
            bus::property(conn, deadline, &at.bus, &at.path, ACCESSIBLE, "Parent").await?;
        let index: i32 = bus::call(
            conn,
            deadline,
            &at.bus,
            &at.path,
            ACCESSIBLE,
            "GetIndexInParent",
            &(),
        )
        .await?;
        let interfaces: Vec<String> = bus::call(
            conn,
            deadline,
            &bus,
            path.as_str(),
            ACCESSIBLE,
            "GetInterfaces",
            &(),
        )
        .await
        .unwrap_or_default();
        Ok(Parent {
            bus,
            path,
            index,
            interfaces,
        })
    }

    fn has(&self, short: &str) -> bool {
        self.interfaces
            .iter()
            .any(|i| *i == format!("org.a11y.atspi.{short}"))
    }

    /// Through the parent's `Selection`: `None` when it has none.
    async fn select_child(
        &self,
        conn: &zbus::Connection,
        deadline: Instant,
    ) -> Result<Option<bool>, BusError> {
        if !self.has("Selection") || self.index < 0 {
            return Ok(None);
        }
        // Chromium's option lists answer false and leave the choice to the option's own
        // "select" action.
        let ok: bool = bus::call(
            conn,
            deadline,
            &self.bus,
            self.path.as_str(),
            "org.a11y.atspi.Selection",
            "SelectChild",
            &(self.index,),
        )
        .await?;
        Ok(Some(ok))
    }

    /// The element's row, through the parent's `Table`: `None` when the parent is no table or
    /// does not place the element in a row.
    async fn select_row(
        &self,
        conn: &zbus::Connection,
        deadline: Instant,
    ) -> Result<Option<bool>, BusError> {
        if !self.has("Table") || self.index < 0 {
            return Ok(None);
        }
        let row = match bus::call::<_, (i32,)>(
            conn,
            deadline,
            &self.bus,
            self.path.as_str(),
            "org.a11y.atspi.Table",
            "GetRowAtIndex",
            &(self.index,),
        )
        .await
        {
            Ok((row,)) => row,
            Err(err) if ends_the_act(&err) => return Err(err),
            Err(_) => -1,
        };
        if row < 0 {
            return Ok(None);
        }
        let ok: bool = bus::call(
            conn,
            deadline,
            &self.bus,
            self.path.as_str(),
            "org.a11y.atspi.Table",
            "AddRowSelection",
            &(row,),
        )
        .await?;
        Ok(Some(ok))
    }
}

/// A cell of a table (GTK3's tree views: a file manager's list) selects its row through the
/// table: the one its `TableCell` names (a cell inside a cell, as Thunar's name column is).
/// `None` when the element is no cell, or its table or row cannot be read.
async fn select_row_of_cell(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &Accessible,
    node: &AtspiNode,
) -> Result<Option<bool>, BusError> {
    if !node.native.has_interface("TableCell") {
        return Ok(None);
    }
    const CELL: &str = "org.a11y.atspi.TableCell";
    let table = bus::property::<(String, zbus::zvariant::OwnedObjectPath)>(
        conn, deadline, &at.bus, &at.path, CELL, "Table",
    );
    let position = bus::property::<(i32, i32)>(conn, deadline, &at.bus, &at.path, CELL, "Position");
    match futures::join!(table, position) {
        (Ok((table_bus, table)), Ok((row, _))) if row >= 0 => {
            let dest = if table_bus.is_empty() {
                &at.bus
            } else {
                &table_bus
            };
            let ok = bus::call::<_, bool>(
                conn,
                deadline,
                dest,
                table.as_str(),
                "org.a11y.atspi.Table",
                "AddRowSelection",
                &(row,),
            )
            .await;
            match ok {
                Ok(ok) => Ok(Some(ok)),
                Err(err) if ends_the_act(&err) => Err(err),
                Err(_) => Ok(None),
            }
        }
        (Err(err), _) | (_, Err(err)) if ends_the_act(&err) => Err(err),
        _ => Ok(None),
    }
}

/// What `press` does, first found first: GTK says "click", Chromium "press", GTK's expanders
/// "activate"; a Qt 5 menu that opens a submenu has only "ShowMenu".
const PRESS_ACTIONS: &[&str] = &[
    "click", "press", "activate", "jump", "open", "push", "showmenu",
];

/// What `activate` does, first found first.
const ACTIVATE_ACTIONS: &[&str] = &[
    "activate", "click", "press", "jump", "open", "push", "showmenu",
];

/// The first of `wanted` (case-insensitive) among an object's action names.
fn pick_action(actions: &[String], wanted: &[&str]) -> Option<i32> {
    wanted.iter().find_map(|w| {
        actions
            .iter()
            .position(|a| a.eq_ignore_ascii_case(w))
            .map(|p| p as i32)
    })
}

/// Whether the element's states come to satisfy `holds` soon after an action: toolkits apply
/// most changes before answering the action, some (AccessKit) on their next frame.
async fn settles(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &Accessible,
    holds: impl Fn(StateSet) -> bool,
) -> bool {
    let give_up = (Instant::now() + SETTLE_LIMIT).min(deadline);
    let mut pause = Duration::from_millis(10);
    loop {
        match bus::states(conn, deadline, &at.bus, &at.path).await {
            Ok(states) if holds(states) => return true,
            Ok(_) if Instant::now() + pause < give_up => {}
            _ => return false,
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn qt_action_names_are_found_whatever_their_case() {
        // Qt 5: a button, a check box, a menu with a submenu, a combo box.
        assert_eq!(
            pick_action(&names(&["Press", "SetFocus"]), PRESS_ACTIONS),
            Some(0)
        );
        assert_eq!(
            pick_action(&names(&["Toggle"]), &["toggle", "click"]),
            Some(0)
        );
        assert_eq!(pick_action(&names(&["ShowMenu"]), PRESS_ACTIONS), Some(0));
        assert_eq!(
            pick_action(&names(&["ShowMenu"]), ACTIVATE_ACTIONS),
            Some(0)
        );
        // A combo box's "Press" opens its popup too; a click or press is still taken first.
        assert_eq!(
            pick_action(&names(&["ShowMenu", "Press"]), PRESS_ACTIONS),
            Some(1)
        );
        assert_eq!(pick_action(&names(&["SetFocus"]), PRESS_ACTIONS), None);
    }
}
