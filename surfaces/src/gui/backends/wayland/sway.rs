//! What sway tells about its windows beyond the foreign-toplevel protocol: each view's
//! rectangle on the layout and its process id, read from sway's IPC socket (`SWAYSOCK`,
//! `GET_TREE`). The Wayland backend joins them to its toplevels by app id and title.
//!
//! The tree is read anew for every listing: sway announces no event when a window is resized
//! or moved by a command or by the person's pointer, so a kept copy could place a window
//! wrongly. What is kept is the connection, so a listing costs one request, not a connect too.
//! Agents' own sway desktops use the same client for their outputs' sizes and to float their
//! window on the person's sway (`GET_OUTPUTS`, `RUN_COMMAND`).

use std::io::{Read, Write};
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
    pub fn views(&self) -> Result<Vec<SwayView>, String> {
        let tree = self.request(GET_TREE)?;
        let mut views = Vec::new();
        collect(&tree, &mut views);
        Ok(views)
    }

    /// sway's whole tree (`GET_TREE`), as sway's own JSON nodes.
    pub fn tree(&self) -> Result<Value, String> {
        self.request(GET_TREE)
    }

    /// Runs sway commands (`RUN_COMMAND`); an error names the first that failed.
    pub fn run(&self, commands: &str) -> Result<(), String> {
        let reply = self.request_with(RUN_COMMAND, commands.as_bytes())?;
        let failed = reply
            .as_array()
            .into_iter()
            .flatten()
            .find(|result| result.get("success").and_then(Value::as_bool) != Some(true));
        match failed {
            Some(result) => Err(format!(
                "sway refused `{commands}`: {}",
                result["error"].as_str().unwrap_or("no reason given")
            )),
            None => Ok(()),
        }
    }

    /// Each output's name and size in pixels (its current mode), from `GET_OUTPUTS`.
    pub fn output_sizes(&self) -> Result<Vec<OutputSize>, String> {
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

    fn request(&self, kind: u32) -> Result<Value, String> {
        self.request_with(kind, &[])
    }

    /// One request on the kept connection; on failure, once more on a new one (the kept one
    /// may have died with an earlier sway).
    fn request_with(&self, kind: u32, payload: &[u8]) -> Result<Value, String> {
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

fn connect(socket: &Path) -> Result<UnixStream, String> {
    let failed = |err: std::io::Error| format!("sway ipc at {}: {err}", socket.display());
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
) -> Result<Value, String> {
    let failed = |err: std::io::Error| format!("sway ipc at {}: {err}", socket.display());
    let mut message = MAGIC.to_vec();
    message.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    message.extend_from_slice(&kind.to_le_bytes());
    message.extend_from_slice(payload);
    stream.write_all(&message).map_err(failed)?;
    let mut header = [0u8; 14];
    stream.read_exact(&mut header).map_err(failed)?;
    if &header[..6] != MAGIC {
        return Err(format!(
            "sway ipc at {}: the reply is not i3-ipc",
            socket.display()
        ));
    }
    let length = u32::from_le_bytes([header[6], header[7], header[8], header[9]]) as usize;
    if length > MAX_REPLY {
        return Err(format!(
            "sway ipc at {}: a {length}-byte reply is too large",
            socket.display()
        ));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).map_err(failed)?;
    serde_json::from_slice(&body).map_err(|err| format!("sway ipc reply: {err}"))
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
}
