//! What sway tells about its windows beyond the foreign-toplevel protocol: each view's
//! rectangle on the layout and its process id, read from sway's IPC socket (`SWAYSOCK`,
//! `GET_TREE`). The Wayland backend joins them to its toplevels by app id and title.
//!
//! The tree is read anew for every listing: sway announces no event when a window is resized
//! or moved by a command or by the person's pointer, so a kept copy could place a window
//! wrongly. What is kept is the connection, so a listing costs one request, not a connect too.
//! Agents' own sway desktops use the same client for their outputs' sizes and to float their
//! window on the person's sway (`GET_OUTPUTS`, `RUN_COMMAND`).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::gui::desktop::Rect;

/// A view (a window) as sway's tree shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SwayView {
    pub app_id: String,
    pub title: String,
    pub pid: Option<u32>,
    pub rect: Rect,
    pub focused: bool,
}

/// An output's name, and its width and height in pixels.
pub type OutputSize = (String, (u32, u32));

const MAGIC: &[u8] = b"i3-ipc";
const RUN_COMMAND: u32 = 0;
const GET_OUTPUTS: u32 = 3;
const GET_TREE: u32 = 4;
/// A reply larger than this is not a tree sway would send; refuse rather than allocate it.
const MAX_REPLY: usize = 64 << 20;

/// Why a request to sway's IPC failed: which step (connecting, sending, reading, parsing the
/// reply), or sway's own refusal of a command.
#[derive(Debug, thiserror::Error)]
pub enum SwayIpcError {
    #[error("sway ipc at {}: cannot connect: {source}", socket.display())]
    Connect { socket: PathBuf, source: io::Error },
    #[error("sway ipc at {}: cannot send the request: {source}", socket.display())]
    Send { socket: PathBuf, source: io::Error },
    #[error("sway ipc at {}: cannot read the reply: {source}", socket.display())]
    Read { socket: PathBuf, source: io::Error },
    #[error("sway ipc at {}: the reply is not i3-ipc (no `i3-ipc` magic)", socket.display())]
    NotIpc { socket: PathBuf },
    #[error(
        "sway ipc at {}: a {length}-byte reply is too large (at most {MAX_REPLY})",
        socket.display()
    )]
    TooLarge { socket: PathBuf, length: usize },
    #[error("sway ipc at {}: the reply is not JSON: {source}", socket.display())]
    Parse {
        socket: PathBuf,
        source: serde_json::Error,
    },
    #[error("sway refused `{command}`: {reason}")]
    Refused { command: String, reason: String },
}

/// sway's IPC socket from the environment, if this session names one.
pub fn socket() -> Option<PathBuf> {
    std::env::var_os("SWAYSOCK")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
}

/// One IPC connection to sway, kept between requests and made again after it fails (sway
/// restarted, or a reply was cut short).
pub struct SwayIpc {
    socket: PathBuf,
    stream: Mutex<Option<UnixStream>>,
}

impl SwayIpc {
    pub fn new(socket: PathBuf) -> SwayIpc {
        SwayIpc {
            socket,
            stream: Mutex::new(None),
        }
    }

    /// Every view in sway's tree (tiled and floating), or why the tree could not be read.
    pub fn views(&self) -> Result<Vec<SwayView>, SwayIpcError> {
        let tree = self.request(GET_TREE)?;
        let mut views = Vec::new();
        collect(&tree, &mut views);
        Ok(views)
    }

    /// sway's whole tree (`GET_TREE`), as sway's own JSON nodes.
    pub fn tree(&self) -> Result<Value, SwayIpcError> {
        self.request(GET_TREE)
    }

    /// Runs sway commands (`RUN_COMMAND`); an error names the first that failed.
    pub fn run(&self, commands: &str) -> Result<(), SwayIpcError> {
        let reply = self.request_with(RUN_COMMAND, commands.as_bytes())?;
        let failed = reply
            .as_array()
            .into_iter()
            .flatten()
            .find(|result| result.get("success").and_then(Value::as_bool) != Some(true));
        match failed {
            Some(result) => Err(SwayIpcError::Refused {
                command: commands.to_string(),
                reason: result["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Each output's name and size in pixels (its current mode), from `GET_OUTPUTS`.
    pub fn output_sizes(&self) -> Result<Vec<OutputSize>, SwayIpcError> {
        let reply = self.request(GET_OUTPUTS)?;
        Ok(reply
            .as_array()
            .into_iter()
            .flatten()
            .map(|output| {
                let mode = &output["current_mode"];
                let side = |key: &str| mode[key].as_u64().unwrap_or(0) as u32;
                (
                    output["name"].as_str().unwrap_or_default().to_string(),
                    (side("width"), side("height")),
                )
            })
            .collect())
    }

    fn request(&self, kind: u32) -> Result<Value, SwayIpcError> {
        self.request_with(kind, &[])
    }

    /// One request on the kept connection; on failure, once more on a new one (the kept one
    /// may have died with an earlier sway).
    fn request_with(&self, kind: u32, payload: &[u8]) -> Result<Value, SwayIpcError> {
        let mut slot = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stream) = slot.as_mut()
            && let Ok(reply) = request_on(stream, &self.socket, kind, payload)
        {
            return Ok(reply);
        }
        *slot = None;
        let mut stream = connect(&self.socket)?;
        let reply = request_on(&mut stream, &self.socket, kind, payload)?;
        *slot = Some(stream);
        Ok(reply)
    }
}

fn connect(socket: &Path) -> Result<UnixStream, SwayIpcError> {
    let failed = |source| SwayIpcError::Connect {
        socket: socket.to_path_buf(),
        source,
    };
    let stream = UnixStream::connect(socket).map_err(failed)?;
    let bound = Some(Duration::from_secs(2));
    stream.set_read_timeout(bound).map_err(failed)?;
    stream.set_write_timeout(bound).map_err(failed)?;
    Ok(stream)
}

fn request_on(
    stream: &mut UnixStream,
    socket: &Path,
    kind: u32,
    payload: &[u8],
) -> Result<Value, SwayIpcError> {
    let socket = || socket.to_path_buf();
    let mut message = MAGIC.to_vec();
    message.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    message.extend_from_slice(&kind.to_le_bytes());
    message.extend_from_slice(payload);
    stream
        .write_all(&message)
        .map_err(|source| SwayIpcError::Send {
            socket: socket(),
            source,
        })?;
    let read = |source| SwayIpcError::Read {
        socket: socket(),
        source,
    };
    let mut header = [0u8; 14];
    stream.read_exact(&mut header).map_err(read)?;
    if &header[..6] != MAGIC {
        return Err(SwayIpcError::NotIpc { socket: socket() });
    }
    let length = u32::from_le_bytes([header[6], header[7], header[8], header[9]]) as usize;
    if length > MAX_REPLY {
        return Err(SwayIpcError::TooLarge {
            socket: socket(),
            length,
        });
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).map_err(read)?;
    serde_json::from_slice(&body).map_err(|source| SwayIpcError::Parse {
        socket: socket(),
        source,
    })
}

fn collect(node: &Value, views: &mut Vec<SwayView>) {
    // Views are the nodes with a pid: containers, workspaces and outputs have none.
    if let Some(pid) = node.get("pid").and_then(Value::as_u64) {
        let rect = &node["rect"];
        let number = |key: &str| rect.get(key).and_then(Value::as_i64).unwrap_or(0);
        // An X client's "app id" is its WM_CLASS class (through Xwayland).
        let app_id = node
            .get("app_id")
            .and_then(Value::as_str)
            .or_else(|| node["window_properties"]["class"].as_str())
            .unwrap_or_default();
        views.push(SwayView {
            app_id: app_id.to_string(),
            title: node["name"].as_str().unwrap_or_default().to_string(),
            pid: u32::try_from(pid).ok(),
            rect: Rect {
                x: number("x") as i32,
                y: number("y") as i32,
                width: number("width").max(0) as u32,
                height: number("height").max(0) as u32,
            },
            focused: node["focused"].as_bool().unwrap_or(false),
        });
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            collect(child, views);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn views_are_read_from_tiled_and_floating_nodes() {
        let tree = json!({
            "type": "root", "nodes": [{
                "type": "output", "nodes": [{
                    "type": "workspace",
                    "nodes": [{"pid": 42, "app_id": "foot", "name": "~", "focused": true,
                               "rect": {"x": 0, "y": 0, "width": 960, "height": 1080}}],
                    "floating_nodes": [{"pid": 7, "app_id": null, "name": "xterm",
                                        "window_properties": {"class": "XTerm"},
                                        "rect": {"x": 10, "y": 20, "width": 300, "height": 200}}]
                }]
            }]
        });
        let mut views = Vec::new();
        collect(&tree, &mut views);
        assert_eq!(views.len(), 2);
        assert_eq!(views[0].app_id, "foot");
        assert!(views[0].focused);
        assert_eq!(views[1].app_id, "XTerm");
        assert_eq!(
            views[1].rect,
            Rect {
                x: 10,
                y: 20,
                width: 300,
                height: 200
            }
        );
        assert_eq!(views[1].pid, Some(7));
    }

    /// A sway stand-in on a socket in a temporary directory: answers one request with `reply`
    /// (header and body as given) and hands back the request's kind and payload.
    fn answering_once(
        reply: Vec<u8>,
    ) -> (tempfile::TempDir, std::thread::JoinHandle<(u32, String)>) {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("ipc.sock")).unwrap();
        let answering = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut header = [0u8; 14];
            stream.read_exact(&mut header).unwrap();
            let length = u32::from_le_bytes(header[6..10].try_into().unwrap()) as usize;
            let kind = u32::from_le_bytes(header[10..14].try_into().unwrap());
            let mut payload = vec![0u8; length];
            stream.read_exact(&mut payload).unwrap();
            stream.write_all(&reply).unwrap();
            (kind, String::from_utf8(payload).unwrap())
        });
        (dir, answering)
    }

    fn message(magic: &[u8], kind: u32, body: &str) -> Vec<u8> {
        let mut message = magic.to_vec();
        message.extend_from_slice(&(body.len() as u32).to_le_bytes());
        message.extend_from_slice(&kind.to_le_bytes());
        message.extend_from_slice(body.as_bytes());
        message
    }

    #[test]
    fn a_command_sway_refuses_is_a_refusal_naming_the_command_and_sways_reason() {
        let refusal = r#"[{"success": false, "error": "No matching node"}]"#;
        let (dir, answering) = answering_once(message(MAGIC, RUN_COMMAND, refusal));
        let ipc = SwayIpc::new(dir.path().join("ipc.sock"));
        let err = ipc.run("[pid=1] floating enable").unwrap_err();
        assert_eq!(
            answering.join().unwrap(),
            (RUN_COMMAND, "[pid=1] floating enable".to_string())
        );
        assert!(
            matches!(&err, SwayIpcError::Refused { command, reason }
                if command == "[pid=1] floating enable" && reason == "No matching node"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "sway refused `[pid=1] floating enable`: No matching node"
        );
    }

    #[test]
    fn a_reply_without_the_magic_is_not_ipc_and_no_socket_is_a_connect_error() {
        let (dir, answering) = answering_once(message(b"x3-ipc", GET_TREE, "{}"));
        let socket = dir.path().join("ipc.sock");
        let err = SwayIpc::new(socket.clone()).tree().unwrap_err();
        answering.join().unwrap();
        assert!(
            matches!(&err, SwayIpcError::NotIpc { socket: s } if *s == socket),
            "{err:?}"
        );
        let gone = dir.path().join("gone.sock");
        let err = SwayIpc::new(gone.clone()).views().unwrap_err();
        assert!(
            matches!(&err, SwayIpcError::Connect { socket: s, .. } if *s == gone),
            "{err:?}"
        );
        assert!(err.to_string().contains("cannot connect"), "{err}");
    }
}
