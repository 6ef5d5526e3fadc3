//! `computer-approval-window`: a desktop window that shows the calls waiting for a person and
//! answers them on the daemon's control socket, like `computer approve` does in a terminal.
//!
//! # Layout
//! - this file: arguments, the display check, and wiring the window to the connection thread.
//! - [`board`]: what the window shows (the link state and the pending requests), shared by both.
//! - [`link`]: the control-socket client: watches, answers, reconnects with backoff.
//! - [`window`]: the egui window and its three answer buttons.
//! - `presses`: which device the last press came from (XInput2 on X), so that a click or key
//!   sent through XTEST, or an accessible action with no press at all, answers nothing.
//!
//! The window is a plain control-socket client with its own pid, so the daemon accepts it only
//! when a person (not a surface run) started it. It never answers anything by itself: closing it
//! or losing the daemon leaves the requests to the daemon's timeout, which denies.

mod board;
mod link;
mod presses;
mod window;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;

/// Exit statuses of the window.
mod exit {
    pub const OK: u8 = 0;
    /// The window could not open (no display, no GL).
    pub const UNAVAILABLE: u8 = 69;
}

/// The window title (also what window lists and AT-SPI show).
pub const TITLE: &str = "computer — approval";

#[derive(Debug, Parser)]
#[command(
    name = "computer-approval-window",
    version,
    about = "Shows the calls waiting for approval and lets you answer them"
)]
struct Args {
    /// The daemon's control socket (default: `$COMPUTER_CONTROL_SOCKET`, else `control.sock`
    /// beside the agent socket, as for `computer approve`).
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Take Allow from an accessible action too (a screen reader pressing the button over
    /// AT-SPI). Off by default: any program on the accessibility bus, an agent's run among
    /// them, can send one, so without a mouse or key press only Deny is taken.
    #[arg(long, env = "COMPUTER_APPROVAL_ACCESSIBLE_ANSWERS")]
    accessible_answers: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();

    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
        && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    {
        eprintln!(
            "error: no graphical session: DISPLAY and WAYLAND_DISPLAY are unset (use `computer approve` in a terminal instead)"
        );
        return ExitCode::from(exit::UNAVAILABLE);
    }

    let socket = args
        .control_socket
        .unwrap_or_else(computer_ipc::paths::control_socket_path);
    let board = Arc::new(Mutex::new(board::Board::new(socket.clone())));
    let (answers, answer_queue) = tokio::sync::mpsc::unbounded_channel();

    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_title(TITLE)
            .with_app_id("computer-approval-window")
            .with_inner_size([560.0, 360.0])
            .with_min_inner_size([360.0, 200.0]),
        ..Default::default()
    };
    let result = eframe::run_native(
        TITLE,
        options,
        Box::new(move |creation| {
            let repaint = creation.egui_ctx.clone();
            link::spawn(socket, board.clone(), answer_queue, move || {
                repaint.request_repaint()
            })?;
            Ok(Box::new(window::ApprovalWindow::new(
                board,
                answers,
                args.accessible_answers,
            )))
        }),
    );
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("error: cannot open the approval window: {err}");
            ExitCode::from(exit::UNAVAILABLE)
        }
    }
}
