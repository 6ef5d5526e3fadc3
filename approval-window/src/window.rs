//! The egui window: the link state, then each pending request in the terminal approver's plain
//! words with three buttons. Nothing takes keyboard focus by itself, so Enter answers nothing until
//! the person has tabbed to a button; widget ids include the request id, so focus never carries
//! over from one request to the next; a key press answers only on a button that was focused
//! before it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use computer_daemon::approval::Answer;
use computer_daemon::cli::approve::describe;
use eframe::egui;
use tokio::sync::mpsc::UnboundedSender;

use crate::board::{Board, Link, Note};
use crate::link::Click;

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
}

impl ApprovalWindow {
    pub fn new(board: Arc<Mutex<Board>>, clicks: UnboundedSender<Click>) -> ApprovalWindow {
        ApprovalWindow {
            board,
            clicks,
            announced: (0, 0),
        }
    }

    fn answer(&self, session: u64, id: u64, receipt: String, answer: Answer) {
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
        // Draw from a copy: the link thread must not wait for a frame to finish.
        let board = self.board.lock().unwrap().clone();
        let newest = board
            .pending
            .iter()
            .map(|r| r.request.id)
            .max()
            .unwrap_or(0);
        if (board.session, newest) > self.announced && newest > 0 {
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::RequestUserAttention(
                    egui::UserAttentionType::Informational,
                ));
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
                            ui.label(describe(&held.now()));
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
            self.answer(board.session, id, receipt, answer);
        }
        // The countdowns (and a lost link's retry) tick once a second.
        if !board.pending.is_empty() || matches!(board.link, Link::Lost { .. }) {
            ui.ctx().request_repaint_after(Duration::from_secs(1));
        }
    }
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
