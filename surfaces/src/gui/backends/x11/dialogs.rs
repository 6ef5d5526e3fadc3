//! The agent's keyboard following the dialogs its window opens, as a window manager moves the
//! person's: a window manager focuses a new dialog with the core keyboard only, so without this
//! the agent's keys would go on to the window behind the dialog (a Save dialog's path typed
//! over the document instead of into the dialog's name field).
//!
//! A dialog of a window is a client whose `WM_TRANSIENT_FOR` names it, directly or through
//! another dialog. Only a dialog that appeared since the agent's keyboard was last looked at is
//! followed, once: a window the agent then focuses on purpose (the document behind a Find
//! dialog) keeps its keys. When a followed dialog closes, the keyboard goes back to the window
//! it came from.
//!
//! The window manager, which cannot tell whose keyboard asked for the dialog, may give it the
//! person's keyboard too (openbox does, to a window opened in answer to recent input). The
//! person's keyboard is then given back to the window it was on before, at the daemon's next
//! look at the windows (an act's read-back looks within milliseconds); until then, keys the
//! person types go to the agent's dialog. Only while the person's own input has not come since
//! the dialog's arrival (or its close), within [`GIVE_BACK_WITHIN`]: a person who clicks into
//! the agent's dialog keeps it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, InputFocus};

use super::agent::{AgentInput, DialogFollow, Followed};
use super::{XConn, XResult};

/// A transient chain longer than this is not followed (a real one is two or three long; the
/// bound guards against a loop of windows naming each other).
const CHAIN_LIMIT: usize = 16;

/// How long after the agent's keyboard followed a dialog (or the dialog closed) the person's
/// keyboard, found there, is given back, as long as the person's own input has not come since
/// (the person watch tells): a person who clicks into the agent's dialog keeps it.
const GIVE_BACK_WITHIN: Duration = Duration::from_secs(10);

impl XConn {
    /// The window the agent's keys go to, `target` as read, after following a dialog that
    /// appeared for it (or going back from one that closed); the person's keyboard given back
    /// where the window manager gave it to that dialog.
    pub(super) fn agent_follows_dialogs(
        &self,
        agent: &AgentInput,
        clients: &[u32],
        target: Option<u32>,
    ) -> XResult<Option<u32>> {
        let mut follow = agent.dialogs.lock().unwrap_or_else(|e| e.into_inner());
        let now: HashSet<u32> = clients.iter().copied().collect();
        let appeared: Vec<u32> = match follow.seen.replace(now.clone()) {
            Some(seen) => clients
                .iter()
                .copied()
                .filter(|id| !seen.contains(id))
                .collect(),
            None => Vec::new(),
        };
        // Dialogs gone since the last look move to `closed`, from when they were seen gone.
        let (open, gone): (Vec<Followed>, Vec<Followed>) = std::mem::take(&mut follow.came_from)
            .into_iter()
            .partition(|followed| now.contains(&followed.dialog));
        follow.came_from = open;
        let seen_gone = Instant::now();
        follow
            .closed
            .extend(gone.into_iter().map(|closed| Followed {
                when: seen_gone,
                ..closed
            }));
        follow
            .closed
            .retain(|closed| closed.when.elapsed() < GIVE_BACK_WITHIN);
        let persons_now =
            self.client_holding(self.conn.get_input_focus()?.reply()?.focus, clients)?;
        let target = match target {
            None => back_from_a_closed_dialog(agent, &mut follow, &now)?,
            Some(window) if !appeared.is_empty() => {
                self.follow_a_new_dialog(agent, &mut follow, clients, &appeared, window)?
            }
            Some(window) => Some(window),
        };
        // The person's keyboard on a dialog the agent's keyboard has just followed, or on the
        // window one that has just closed was opened for: the agent's doing, not the person's.
        let fresh = |followed: &Followed| {
            followed.when.elapsed() < GIVE_BACK_WITHIN
                && !crate::gui::person::watch().input_since(followed.when)
        };
        let agents_doing = |id: u32| {
            (follow.came_from.iter()).any(|followed| followed.dialog == id && fresh(followed))
                || (follow.closed.iter()).any(|closed| closed.from == id && fresh(closed))
        };
        match persons_now {
            Some(id) if agents_doing(id) => {
                if let Some(persons) = follow.persons.filter(|p| *p != id && now.contains(p)) {
                    self.give_back_persons_keyboard(persons)?;
                }
            }
            _ => follow.persons = persons_now,
        }
        Ok(target)
    }

    /// The topmost of the `appeared` windows that is a dialog of `window`, now focused by the
    /// agent's keyboard; `window` when there is none.
    fn follow_a_new_dialog(
        &self,
        agent: &AgentInput,
        follow: &mut DialogFollow,
        clients: &[u32],
        appeared: &[u32],
        window: u32,
    ) -> XResult<Option<u32>> {
        let transient = self.transient_for(clients)?;
        let listing = self.listing()?;
        let order = listing.stacking.as_ref().unwrap_or(&listing.ids);
        // The topmost, where the window manager puts the one it focuses.
        for &id in order.iter().rev() {
            if appeared.contains(&id) && leads_to(&transient, id, window) && agent.set_focus(id)? {
                tracing::debug!(dialog = id, window, "the agent's keyboard follows a dialog");
                follow.came_from.push(Followed {
                    dialog: id,
                    from: window,
                    when: Instant::now(),
                });
                return Ok(Some(id));
            }
        }
        Ok(Some(window))
    }

    /// The person's keyboard given back to `window`: the window manager asked to activate it
    /// (which keeps its own idea of the focus right, so that closing the dialog later does not
    /// hand the person's keyboard to the dialog's window), and the core focus set at once.
    fn give_back_persons_keyboard(&self, window: u32) -> XResult<()> {
        tracing::info!(
            window,
            "the window manager gave the agent's dialog the person's keyboard; given back"
        );
        self.ask_to_activate(window)?;
        match self
            .conn
            .set_input_focus(InputFocus::PARENT, window, x11rb::CURRENT_TIME)?
            .check()
        {
            // The window closed meanwhile: nothing to give back to.
            Ok(()) | Err(x11rb::errors::ReplyError::X11Error(_)) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// `WM_TRANSIENT_FOR` of each of `clients` that has one (one round trip for all).
    fn transient_for(&self, clients: &[u32]) -> XResult<HashMap<u32, u32>> {
        let asked = clients
            .iter()
            .map(|&id| {
                let cookie = self.conn.get_property(
                    false,
                    id,
                    AtomEnum::WM_TRANSIENT_FOR,
                    AtomEnum::WINDOW,
                    0,
                    1,
                )?;
                Ok((id, cookie))
            })
            .collect::<XResult<Vec<_>>>()?;
        let mut transient = HashMap::new();
        for (id, cookie) in asked {
            // A window that closed meanwhile has no parent to follow.
            let Ok(reply) = cookie.reply() else { continue };
            if let Some(parent) = reply.value32().and_then(|mut v| v.next())
                && parent != 0
            {
                transient.insert(id, parent);
            }
        }
        Ok(transient)
    }
}

/// Where the agent's keys go once they have no target: back to the window the latest dialog
/// that closed was opened for, or nowhere.
fn back_from_a_closed_dialog(
    agent: &AgentInput,
    follow: &mut DialogFollow,
    now: &HashSet<u32>,
) -> XResult<Option<u32>> {
    for closed in follow.closed.iter().rev() {
        if now.contains(&closed.from) && agent.set_focus(closed.from)? {
            tracing::debug!(
                dialog = closed.dialog,
                window = closed.from,
                "the agent's keyboard is back"
            );
            return Ok(Some(closed.from));
        }
    }
    Ok(None)
}

/// Whether `window`'s transient chain reaches `ancestor`.
fn leads_to(transient: &HashMap<u32, u32>, window: u32, ancestor: u32) -> bool {
    let mut at = window;
    for _ in 0..CHAIN_LIMIT {
        match transient.get(&at) {
            Some(&parent) if parent == ancestor => return true,
            Some(&parent) => at = parent,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_dialogs_leads_to_the_window_it_was_opened_for() {
        let transient = HashMap::from([(3, 2), (2, 1), (9, 8)]);
        assert!(leads_to(&transient, 2, 1));
        assert!(leads_to(&transient, 3, 1));
        assert!(!leads_to(&transient, 9, 1));
        assert!(
            !leads_to(&transient, 1, 1),
            "a window is not its own dialog"
        );
    }

    #[test]
    fn a_loop_of_windows_naming_each_other_ends() {
        let transient = HashMap::from([(1, 2), (2, 1)]);
        assert!(!leads_to(&transient, 1, 5));
    }
}
