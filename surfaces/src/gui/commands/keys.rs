//! How keys are delivered, shared by `type` and `key`: the window they will reach and, for a
//! terminal, the lines they end (decided at validation, as facts a policy decides as a shell
//! run), and the send that checks that decision again right before the keys go.

use computer_ipc::ToolError;
use serde_json::{Value, json};

use super::{Failure, Terminals, display_failed};
use crate::gui::desktop::{Desktop, DisplayError, WindowInfo};
use crate::gui::keys::Combo;
use crate::gui::terminal;
use crate::kit::command_line::{self, Effect, Line};
use crate::{ActionFacts, ProtectedProcesses, SurfaceError, TerminalInput};

/// Why keys are refused where the backend must know their window and cannot tell it, and what
/// gives a window the focus there.
fn no_known_focus<D: Desktop>(conn: &D) -> String {
    format!(
        "no window is focused, or the focus is on a surface that is no window (a panel, a lock \
         screen), so where keys would land cannot be confirmed; {}",
        conn.how_to_focus()
    )
}

/// Keys of one call: typed text or one combo (named as the caller wrote it).
#[derive(Debug, Clone, Copy)]
pub enum Keys<'a> {
    Text(&'a str),
    Combo(&'a Combo, &'a str),
    /// A secret's value, not known until the call runs.
    Secret,
}

impl Keys<'_> {
    fn apply(self, line: &Line) -> Effect {
        match self {
            Keys::Text(text) => command_line::type_text(line, text),
            Keys::Combo(combo, name) => terminal::press(line, combo, name),
            // The value is resolved only at run time and must never land in facts or
            // receipts: the line goes on, opaque. (A value with a line break is refused when
            // typed, so the keys end no line.)
            Keys::Secret => {
                let mut after = line.clone();
                after.opaque.get_or_insert_with(|| {
                    "a secret was typed into it, and its characters are not followed".into()
                });
                Effect {
                    completed: Vec::new(),
                    after,
                }
            }
        }
    }
}

/// Where a call's keys go, decided at prepare time and checked again right before they are sent.
#[derive(Debug, Default)]
pub struct KeyPlan {
    /// The managed window the keys reach; None when it cannot be told.
    pub target: Option<u32>,
    /// Set when that window is a terminal, or when it cannot be told and a terminal is open.
    pub terminal: Option<TerminalPlan>,
}

#[derive(Debug)]
pub struct TerminalPlan {
    /// The terminal's application (None: the target is unknown).
    app: Option<String>,
    /// The generation of the line the call was decided on.
    generation: u64,
    /// The lines the keys end, and the line they leave.
    effect: Effect,
    /// With an unknown target: every terminal window, any of which the keys may reach.
    possible: Vec<u32>,
    /// The processes of the terminal windows the keys may reach (None: a window that names
    /// none), recorded as typed into before the keys go.
    processes: Vec<Option<u32>>,
}

impl KeyPlan {
    /// The lines the keys run, as facts a policy decides as a shell run.
    pub fn terminal_input(&self) -> Option<TerminalInput> {
        let plan = self.terminal.as_ref()?;
        if plan.effect.completed.is_empty() {
            return None;
        }
        let lines: Vec<String> = plan
            .effect
            .completed
            .iter()
            .map(|l| l.text.clone())
            .collect();
        let opaque = plan.effect.completed.iter().find_map(|l| l.opaque.clone());
        // One script, as a shell reading the lines one after another would join them (a quote
        // opened on one line goes on on the next).
        let script = lines.join("\n");
        let found = crate::kit::script::script_commands(&script);
        let run = ActionFacts {
            programs: found.programs,
            opaque: opaque
                .as_ref()
                .map(|why| format!("the terminal line is not known exactly: {why}"))
                .or(found.opaque),
            script: Some(script),
            script_env: found.assigned,
            words: found.words,
            ..ActionFacts::default()
        };
        Some(TerminalInput {
            app: plan.app.clone(),
            window: self.target,
            lines,
            opaque,
            run: Box::new(run),
        })
    }

    /// Where the keys go, in words for approvers: empty for a window that is no terminal.
    pub fn describe(&self) -> String {
        let Some(plan) = &self.terminal else {
            return String::new();
        };
        let place = match (&plan.app, self.target) {
            (Some(app), Some(window)) => format!(" in the terminal {app} (window {window})"),
            _ => " in a window that cannot be told (a terminal is open)".to_string(),
        };
        let lines: Vec<String> = plan
            .effect
            .completed
            .iter()
            .map(|l| match &l.opaque {
                None => format!("{:?}", l.text),
                Some(why) => format!("{:?} (not known exactly: {why})", l.text),
            })
            .collect();
        match lines.len() {
            0 => place,
            1 => format!("{place}, running the line {}", lines[0]),
            _ => format!("{place}, running the lines {}", lines.join(", ")),
        }
    }
}

/// Resolves the window the keys will reach and, for a terminal, the lines they end.
pub fn plan<D: Desktop>(
    conn: &D,
    terminals: &Terminals,
    keys: Keys<'_>,
) -> Result<KeyPlan, ToolError> {
    plan_keys(conn, terminals, keys).map_err(display_failed)
}

fn plan_keys<D: Desktop>(
    conn: &D,
    terminals: &Terminals,
    keys: Keys<'_>,
) -> Result<KeyPlan, DisplayError> {
    let windows = conn.windows()?;
    let live: Vec<u32> = windows.iter().map(|w| w.id).collect();
    terminals.lines.retain(&live);
    let target = conn.keyboard_target()?;
    if target.is_none() && conn.focus_must_be_known() {
        return Err(DisplayError(no_known_focus(conn)));
    }
    match target.and_then(|id| windows.iter().find(|w| w.id == id)) {
        Some(window) if terminals.is_terminal(window) => {
            let (line, generation) = terminals.lines.line(window.id);
            Ok(KeyPlan {
                target: Some(window.id),
                terminal: Some(TerminalPlan {
                    app: Some(window.app.clone()),
                    generation,
                    effect: keys.apply(&line),
                    possible: Vec::new(),
                    processes: vec![window.pid],
                }),
            })
        }
        Some(window) => Ok(KeyPlan {
            target: Some(window.id),
            terminal: None,
        }),
        None => {
            // Deny when in doubt: keys whose window cannot be told may reach any open
            // terminal, whose line is then not known.
            let open_terminals: Vec<&WindowInfo> = windows
                .iter()
                .filter(|w| terminals.is_terminal(w))
                .collect();
            let possible: Vec<u32> = open_terminals.iter().map(|w| w.id).collect();
            let processes = open_terminals.iter().map(|w| w.pid).collect();
            let terminal = (!possible.is_empty()).then(|| {
                let unknown = Line {
                    text: String::new(),
                    opaque: Some(
                        "the window the keys reach cannot be told, and a terminal is open".into(),
                    ),
                };
                TerminalPlan {
                    app: None,
                    generation: 0,
                    effect: keys.apply(&unknown),
                    possible,
                    processes,
                }
            });
            Ok(KeyPlan {
                target: None,
                terminal,
            })
        }
    }
}

/// Records the terminals an agent's input is about to reach (by their processes), so that the
/// control socket refuses answers from what runs in them. A terminal whose process cannot be
/// told refuses the input: what it starts could not be told from a person's approver.
pub fn mark_typed_into(
    protected: &ProtectedProcesses,
    processes: &[Option<u32>],
) -> Result<(), Failure> {
    if processes.iter().any(Option::is_none) {
        return Err(Failure::Surface(SurfaceError::NothingSent {
            message: "refused: the input would reach a terminal window that names no process \
                      (no _NET_WM_PID), so what it starts there could not be kept from answering \
                      approvals; nothing was sent"
                .into(),
        }));
    }
    for pid in processes.iter().flatten() {
        protected.typed_into(*pid);
    }
    Ok(())
}

/// Sends a call's keys if they still reach the window they were decided for, and the line there
/// is still the one decided on; then keeps the line they leave.
pub fn send_keys<D: Desktop>(
    conn: &D,
    plan: &KeyPlan,
    terminals: &Terminals,
    protected: &ProtectedProcesses,
    send: impl FnOnce(&D) -> Result<(), DisplayError>,
) -> Result<(), Failure> {
    // Not `Refused`, which says the target is an approver: the call failed before it acted.
    let refused = |message: String| Failure::Surface(SurfaceError::NothingSent { message });
    let mut held = terminals.lines.hold();
    let now = conn.keyboard_target()?;
    if now.is_none() && conn.focus_must_be_known() {
        return Err(refused(format!(
            "{}; nothing was sent",
            no_known_focus(conn)
        )));
    }
    if now != plan.target || now.is_none() {
        let windows = conn.windows()?;
        let now_terminal = match now {
            Some(id) => windows
                .iter()
                .any(|w| w.id == id && terminals.is_terminal(w)),
            None => windows.iter().any(|w| terminals.is_terminal(w)),
        };
        // Keys decided for a terminal go to that terminal only; keys decided for another
        // window never reach a terminal (or what may be one).
        if (plan.terminal.is_some() && now != plan.target)
            || (plan.terminal.is_none() && now_terminal)
        {
            let name = |w: Option<u32>| {
                w.map_or("a window that cannot be told".to_string(), |w| {
                    format!("window {w}")
                })
            };
            return Err(refused(format!(
                "the keys were decided for {} but would now reach {}, and one of them is (or may \
                 be) a terminal; nothing was sent. Focus the window again and retry",
                name(plan.target),
                name(now)
            )));
        }
    }
    if let (Some(terminal), Some(window)) = (&plan.terminal, plan.target)
        && held.generation(window) != terminal.generation
    {
        return Err(refused(format!(
            "the command line in terminal window {window} changed since this call was decided \
             (another call sent it keys); nothing was sent. Retry"
        )));
    }
    if let Some(terminal) = &plan.terminal {
        mark_typed_into(protected, &terminal.processes)?;
    }
    let sent = send(conn);
    match (&plan.terminal, plan.target) {
        (Some(terminal), Some(window)) => match &sent {
            Ok(()) => held.set(window, terminal.effect.after.clone()),
            Err(_) => held.make_opaque(window, "sending keys to it failed part way"),
        },
        (Some(terminal), None) => {
            for window in &terminal.possible {
                held.make_opaque(*window, "keys went to a window that could not be told");
            }
        }
        (None, _) => {}
    }
    sent.map_err(Failure::from)
}

/// The window keys were sent to (checked right before sending), by id, title and app, so the
/// caller sees where its text went; None when it cannot be told.
pub fn receiving_window<D: Desktop>(conn: &D, target: Option<u32>) -> Option<Value> {
    let id = target?;
    let windows = conn.windows().ok()?;
    let window = windows.iter().find(|w| w.id == id)?;
    Some(json!({"id": window.id, "title": window.title, "app": window.app}))
}
