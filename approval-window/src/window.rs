//! The egui window: the link state, then each pending request as the terminal approver shows it
//! (what will run in a monospace font, character for character, escaped and flagged where a
//! character could be misread) with three buttons. A new request asks for the person's attention
//! (the urgency hint; the window is kept above others while requests wait) without taking the
//! keyboard. Nothing takes keyboard focus by itself, so Enter answers nothing until the person
//! has tabbed to a button; widget ids include the request id, so focus never carries over from
//! one request to the next; a key press answers only on a button that was focused before it.
//! A button activated by synthetic input (XTEST: `xdotool` from an agent's run) answers nothing
//! and says so (see `presses.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use computer_ipc::control::{Answer, PendingRequest};
use eframe::egui;
use eframe::egui::text::{LayoutJob, TextFormat};
use tokio::sync::mpsc::UnboundedSender;

use crate::board::{Board, Link, Note};
use crate::link::Click;
use crate::presses::{LastPress, Presses};

/// The buttons, in tab order, with the answer each sends.
const BUTTONS: [(&str, Answer); 3] = [
    ("Allow once", Answer::AllowOnce),
    ("Allow for this session", Answer::AllowSession),
    ("Deny", Answer::Deny),
];

pub struct ApprovalWindow {
    board: Arc<Mutex<Board>>,
    clicks: UnboundedSender<Click>,
    /// The newest request already brought to the person's attention, per session.
    announced: (u64, u64),
    /// Whether the window asked for attention and was put above others.
    raised: bool,
    /// Where the last press came from.
    presses: Presses,
    /// Whether an accessible action (no press at all) may answer with more than Deny.
    accessible_answers: bool,
}

impl ApprovalWindow {
    pub fn new(
        board: Arc<Mutex<Board>>,
        clicks: UnboundedSender<Click>,
        accessible_answers: bool,
    ) -> ApprovalWindow {
        ApprovalWindow {
            board,
            clicks,
            announced: (0, 0),
            raised: false,
            presses: Presses::watch(),
            accessible_answers,
        }
    }

    /// Why an activated button answers nothing, if it does not: a press a program made through
    /// XTEST never answers; an accessible action (no press at all, which any program on the
    /// accessibility bus can send, an agent's run among them) answers only Deny unless the
    /// person started the window with `--accessible-answers`.
    fn refusal(&mut self, answer: Answer, accessible: bool) -> Option<&'static str> {
        let last = self.presses.last_press();
        // egui says when an accessible action came (on every platform); without one, no press
        // at all on a watched X display means the same.
        let accessible = accessible || last == LastPress::NoneRecent;
        if accessible && answer != Answer::Deny && !self.accessible_answers {
            return Some(
                "an accessible action without a mouse or key press takes only Deny: any \
                 program on the accessibility bus can send one; nothing was answered (press \
                 the button with the mouse or keyboard, or start the window with \
                 --accessible-answers to take a screen reader's)",
            );
        }
        match last {
            LastPress::Synthetic => Some(
                "synthetic input ignored: the press came from a program (XTEST), not from a \
                 mouse or keyboard; nothing was answered",
            ),
            LastPress::Device | LastPress::NoneRecent | LastPress::Unwatched => None,
        }
    }

    fn answer(&mut self, session: u64, id: u64, receipt: String, answer: Answer, accessible: bool) {
        if let Some(why) = self.refusal(answer, accessible) {
            tracing::warn!(id, why, "a button's answer was not taken");
            (self.board.lock().unwrap().notes).insert(id, Note::Failed(why.into()));
            return;
        }
        let mut board = self.board.lock().unwrap();
        if board.session != session
            || !board
                .pending
                .iter()
                .any(|r| r.request.id == id && r.request.receipt == receipt)
        {
            return;
        }
        board.notes.insert(id, Note::Sending(answer));
        let _ = self.clicks.send(Click {
            session,
            id,
            receipt,
            answer,
        });
    }
}

impl eframe::App for ApprovalWindow {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        // Presses are read every frame, so the time each was read is close to when it came.
        self.presses.drain();
        // Draw from a copy: the link thread must not wait for a frame to finish.
        let board = self.board.lock().unwrap().clone();
        let newest = board
            .pending
            .iter()
            .map(|r| r.request.id)
            .max()
            .unwrap_or(0);
        if (board.session, newest) > self.announced && newest > 0 {
            // The urgency hint (X11), a bouncing dock icon (macOS), a flashing taskbar entry
            // (Windows); and above other windows while requests wait. Not the keyboard focus:
            // taken by itself it would route what the person is typing elsewhere (a Tab, an
            // Enter) into the answer buttons.
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::RequestUserAttention(
                    egui::UserAttentionType::Critical,
                ));
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::WindowLevel(
                    egui::WindowLevel::AlwaysOnTop,
                ));
            self.raised = true;
        } else if board.pending.is_empty() && self.raised {
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::RequestUserAttention(
                    egui::UserAttentionType::Reset,
                ));
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::WindowLevel(
                    egui::WindowLevel::Normal,
                ));
            self.raised = false;
        }
        self.announced = (board.session, newest);

        let mut clicked = None;
        egui::CentralPanel::default_margins().show(ui, |ui| {
            ui.label(link_text(&board));
            ui.separator();
            if board.link == Link::Connected && board.pending.is_empty() {
                ui.label("No pending requests");
            }
            egui::ScrollArea::vertical().show(ui, |ui| {
                for held in &board.pending {
                    let request = &held.request;
                    ui.push_id(request.id, |ui| {
                        ui.group(|ui| {
                            ui.add(egui::Label::new(request_text(ui, &held.now())).wrap());
                            let note = board.notes.get(&request.id);
                            match note {
                                Some(Note::Sending(answer)) => {
                                    ui.label(format!("sending {answer:?}…"));
                                }
                                Some(Note::Failed(why)) => {
                                    ui.label(why);
                                }
                                None => {}
                            }
                            let waiting = matches!(note, Some(Note::Sending(_)));
                            ui.horizontal(|ui| {
                                for (label, answer) in BUTTONS {
                                    let button = ui.add_enabled(!waiting, egui::Button::new(label));
                                    // A key answers only on a button focused before it was
                                    // pressed: egui counts an Enter in the same frame as the
                                    // Tab that focused the button, whatever their order.
                                    let typed_ahead = button.gained_focus()
                                        && !button.clicked_by(egui::PointerButton::Primary);
                                    if button.clicked() && !typed_ahead {
                                        clicked =
                                            Some((request.id, request.receipt.clone(), answer));
                                    }
                                }
                            });
                        });
                    });
                }
            });
        });
        if let Some((id, receipt, answer)) = clicked {
            let accessible = ui.ctx().input(|input| {
                (input.events.iter())
                    .any(|event| matches!(event, egui::Event::AccessKitActionRequest(_)))
            });
            self.answer(board.session, id, receipt, answer, accessible);
        }
        // The countdowns (and a lost link's retry) tick once a second.
        if !board.pending.is_empty() || matches!(board.link, Link::Lost { .. }) {
            ui.ctx().request_repaint_after(Duration::from_secs(1));
        }
    }
}

/// A request as one label (so a screen reader reads it whole): the title and notes in the
/// interface font, the warnings in the warning colour, every value of what will run in the
/// monospace font, exactly as escaped for every approver.
fn request_text(ui: &egui::Ui, request: &PendingRequest) -> LayoutJob {
    let style = ui.style();
    let body = egui::TextStyle::Body.resolve(style);
    let mono = egui::TextStyle::Monospace.resolve(style);
    let visuals = &style.visuals;
    request_layout(
        request,
        &body,
        &mono,
        visuals.text_color(),
        visuals.strong_text_color(),
        visuals.warn_fg_color,
    )
}

fn request_layout(
    request: &PendingRequest,
    body: &egui::FontId,
    mono: &egui::FontId,
    text: egui::Color32,
    strong: egui::Color32,
    warn: egui::Color32,
) -> LayoutJob {
    let shown = request.shown();
    let plain = TextFormat::simple(body.clone(), text);
    let value = TextFormat::simple(mono.clone(), strong);
    let mut job = LayoutJob::default();
    job.append(&shown.title, 0.0, plain.clone());
    for warning in &shown.warnings {
        job.append(
            &format!("\n⚠ WARNING {warning}"),
            0.0,
            TextFormat::simple(body.clone(), warn),
        );
    }
    for row in &shown.rows {
        job.append(&format!("\n{}: ", row.label), 0.0, plain.clone());
        // A script's or stdin's lines start on a line of their own.
        if row.value.contains('\n') {
            job.append("\n", 0.0, plain.clone());
        }
        job.append(&row.value, 0.0, value.clone());
        if let Some(cut) = &row.cut {
            job.append(
                &format!("\n{cut}"),
                0.0,
                TextFormat::simple(body.clone(), warn),
            );
        }
    }
    job
}

fn link_text(board: &Board) -> String {
    let socket = board.socket.display();
    match &board.link {
        Link::Connecting => format!("Connecting to the daemon at {socket}…"),
        Link::Connected => format!("Watching the daemon at {socket}"),
        Link::Lost { error, retry_at } => {
            let secs = retry_at
                .saturating_duration_since(Instant::now())
                .as_secs_f32()
                .ceil();
            format!(
                "Not connected to the daemon at {socket}: {error}. Retrying in {secs} s; nothing is answered meanwhile."
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computer_ipc::facts::ActionFacts;
    use computer_ipc::shown::WillRun;

    fn request() -> PendingRequest {
        PendingRequest {
            id: 1,
            receipt: "r1".into(),
            agent: "default".into(),
            caller_pid: None,
            surface: "shell".into(),
            command: "run".into(),
            action: String::new(),
            will_run: WillRun::new(
                "",
                ActionFacts {
                    argv: Some(vec!["git".into(), "push".into(), "--force".into()]),
                    ..ActionFacts::default()
                },
            ),
            warnings: Vec::new(),
            cwd: None,
            desktop: None,
            risk: "act".into(),
            rule: "defaults.act".into(),
            asked_at_ms: 0,
            expires_in_ms: 60_000,
            steps: Vec::new(),
        }
    }

    /// Every value is drawn in the monospace font, and in it `-` is as wide as `m`: `--force`
    /// cannot melt into one dash.
    #[test]
    fn what_will_run_is_drawn_in_monospace_character_for_character() {
        let ctx = egui::Context::default();
        let mut output = ctx.run_ui(egui::RawInput::default(), |_| {});
        output.textures_delta.clear();
        let body = egui::FontId::proportional(14.0);
        let mono = egui::FontId::monospace(14.0);
        let (text, strong, warn) = (
            egui::Color32::GRAY,
            egui::Color32::WHITE,
            egui::Color32::YELLOW,
        );
        let job = request_layout(&request(), &body, &mono, text, strong, warn);
        let values: Vec<&str> = job
            .sections
            .iter()
            .filter(|s| s.format.font_id.family == egui::FontFamily::Monospace)
            .map(|s| &job.text[s.byte_range.start.0..s.byte_range.end.0])
            .collect();
        assert_eq!(values, ["git", "push", "--force"], "{}", job.text);
        let plain: Vec<&str> = job
            .sections
            .iter()
            .filter(|s| s.format.font_id.family != egui::FontFamily::Monospace)
            .map(|s| &job.text[s.byte_range.start.0..s.byte_range.end.0])
            .collect();
        assert!(plain.iter().all(|p| !p.contains("--force")), "{plain:?}");

        let (dash, m, w) = ctx.fonts_mut(|fonts| {
            (
                fonts.glyph_width(&mono, '-'),
                fonts.glyph_width(&mono, 'm'),
                fonts.glyph_width(&mono, 'W'),
            )
        });
        assert!(dash > 0.0 && dash == m && m == w, "{dash} {m} {w}");
        let proportional_dash = ctx.fonts_mut(|fonts| fonts.glyph_width(&body, '-'));
        assert!(proportional_dash < ctx.fonts_mut(|fonts| fonts.glyph_width(&body, 'm')));
    }

    /// A multi-step call's request draws every step: its name and decision in the interface
    /// font, each value of what it will run in the monospace font, escaped.
    #[test]
    fn every_step_of_a_multi_step_call_is_drawn() {
        use computer_ipc::control::StepRow;
        let step = |index: usize, argv: &[&str]| StepRow {
            index,
            surface: "shell".into(),
            command: "run".into(),
            decision: "ask".into(),
            action: String::new(),
            will_run: WillRun::new(
                "",
                ActionFacts {
                    argv: Some(argv.iter().map(|a| a.to_string()).collect()),
                    ..ActionFacts::default()
                },
            ),
        };
        let request = PendingRequest {
            surface: "steps".into(),
            command: "call".into(),
            will_run: WillRun::default(),
            action: "2 steps in one call".into(),
            steps: vec![step(1, &["touch", "a"]), step(2, &["rm", "b\u{202e}c"])],
            ..request()
        };
        let (body, mono) = (
            egui::FontId::proportional(14.0),
            egui::FontId::monospace(14.0),
        );
        let color = egui::Color32::WHITE;
        let job = request_layout(&request, &body, &mono, color, color, color);
        let values: Vec<&str> = job
            .sections
            .iter()
            .filter(|s| s.format.font_id.family == egui::FontFamily::Monospace)
            .map(|s| &job.text[s.byte_range.start.0..s.byte_range.end.0])
            .collect();
        assert!(
            values.contains(&"touch") && values.contains(&"rm"),
            "{values:?}"
        );
        assert!(values.contains(&"b\\u{202e}c"), "{values:?}");
        assert!(job.text.contains("step 2: "), "{}", job.text);
        assert!(job.text.contains("WARNING step 2 argv[1]"), "{}", job.text);
        assert!(!job.text.contains('\u{202e}'), "{}", job.text);
    }
}
