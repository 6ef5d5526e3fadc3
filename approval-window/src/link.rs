//! The window's side of the control socket, on its own thread: one connection watches the pending
//! requests, a second one carries the person's answers (a watching connection reads nothing
//! more). A lost daemon is retried with backoff; nothing is ever answered without a click.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_ipc::control::{Answer, ControlClient, ControlRequest};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::board::Board;

/// First wait before reconnecting, doubled on each failure up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(250);
const LAST_RETRY: Duration = Duration::from_secs(10);
/// A daemon that accepts but does not reply within this is treated as gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How the daemon records who answered.
const VIA: &str = "window";

/// A click on one of a request's buttons.
#[derive(Debug, Clone)]
pub struct Click {
    /// The connection the request was shown under (see [`Board::session`]).
    pub session: u64,
    pub id: u64,
    /// The receipt id of the request shown: the daemon decides nothing if it is not request
    /// `id`'s.
    pub receipt: String,
    pub answer: Answer,
}

/// Runs the link on its own thread until the process exits.
pub fn spawn(
    socket: PathBuf,
    board: Arc<Mutex<Board>>,
    clicks: UnboundedReceiver<Click>,
    repaint: impl Fn() + Send + 'static,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("control-link".into())
        .spawn(move || runtime.block_on(run(&socket, &board, clicks, &repaint)))?;
    Ok(())
}

/// How one connection ended.
enum Ended {
    /// It never got as far as the first snapshot.
    Unreachable(String),
    /// It worked for a while, then broke.
    Broken(String),
    /// The window is gone; nobody is left to click.
    WindowClosed,
}

async fn run(
    socket: &Path,
    board: &Mutex<Board>,
    mut clicks: UnboundedReceiver<Click>,
    repaint: &dyn Fn(),
) {
    let mut retry = FIRST_RETRY;
    loop {
        let error = match connection(socket, board, &mut clicks, repaint).await {
            Ended::Unreachable(error) => error,
            Ended::Broken(error) => {
                retry = FIRST_RETRY;
                error
            }
            Ended::WindowClosed => return,
        };
        tracing::warn!(%error, retry_in = ?retry, "control connection lost");
        board.lock().unwrap().lost(error, retry);
        repaint();
        // Clicks queued meanwhile belong to the lost session and are dropped by the next one.
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LAST_RETRY);
    }
}

/// One connection: watch and answer until it breaks.
async fn connection(
    socket: &Path,
    board: &Mutex<Board>,
    clicks: &mut UnboundedReceiver<Click>,
    repaint: &dyn Fn(),
) -> Ended {
    let opened = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let mut watcher = ControlClient::connect(socket).await?;
        watcher.send(&ControlRequest::Watch).await?;
        // A refusal (e.g. a window started through a surface) arrives as this first line.
        let snapshot = watcher.next_event().await?;
        let answerer = ControlClient::connect(socket).await?;
        anyhow::Ok((watcher, answerer, snapshot))
    })
    .await;
    let (mut watcher, mut answerer, snapshot) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(err)) => return Ended::Unreachable(format!("{err:#}")),
        Err(_) => {
            return Ended::Unreachable(format!(
                "the daemon did not answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            ));
        }
    };
    let session = board.lock().unwrap().connected(snapshot);
    tracing::info!(socket = %socket.display(), session, "watching pending approvals");
    repaint();
    loop {
        tokio::select! {
            event = watcher.next_event() => {
                match event {
                    Ok(event) => board.lock().unwrap().apply(event),
                    Err(err) => return Ended::Broken(format!("{err:#}")),
                }
                repaint();
            }
            click = clicks.recv() => {
                let Some(click) = click else { return Ended::WindowClosed };
                if click.session != session {
                    continue;
                }
                let decide = ControlRequest::Decide {
                    id: click.id,
                    answer: click.answer,
                    via: VIA.into(),
                    expect: Some(click.receipt),
                };
                let answered = tokio::time::timeout(CONNECT_TIMEOUT, answerer.request(&decide))
                    .await
                    .map_err(|_| anyhow::anyhow!("the daemon did not confirm the answer"))
                    .and_then(|answered| answered.map_err(anyhow::Error::from));
                match answered {
                    Ok(_) => board.lock().unwrap().remove(click.id),
                    Err(err) => {
                        board
                            .lock()
                            .unwrap()
                            .failed(click.id, format!("could not answer: {err:#}"));
                        // The daemon's refusal leaves the connection usable, a broken one does
                        // not; a fresh one serves both cases.
                        match ControlClient::connect(socket).await {
                            Ok(fresh) => answerer = fresh,
                            Err(err) => return Ended::Broken(format!("{err:#}")),
                        }
                    }
                }
                repaint();
            }
        }
    }
}
