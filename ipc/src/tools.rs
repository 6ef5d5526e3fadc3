//! Programmatic calls from inside a run: what `complications.tools` asks for, the descriptor
//! and variables a run given tools finds, the wire of its channel, and the client that speaks it
//! (the `computer` CLI inside the run; the generated Python module speaks the same lines).
//!
//! The channel: the run inherits one end of a `SOCK_SEQPACKET` pair as descriptor
//! [`TOOLS_FD`]; the daemon holds the other. A client makes a stream pair, sends one end over
//! that descriptor (`SCM_RIGHTS`, one message per connection) and speaks JSON lines over the
//! other: one [`ToolsRequest`] a line, one reply object a line, in order. Only processes of the
//! run that kept the descriptor can open a connection: nothing in any file system leads to it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The descriptor a run given tools inherits: its end of the run's channel.
pub const TOOLS_FD: i32 = 3;
/// Names the inherited descriptor (so a client need not assume [`TOOLS_FD`]).
pub const ENV_FD: &str = "COMPUTER_TOOLS_FD";
/// The run's capability: every request carries it; it dies with the run.
pub const ENV_TOKEN: &str = "COMPUTER_TOOLS_TOKEN";
/// The receipt id of the run the tools were given to (every call it makes names it in `via`).
pub const ENV_RUN: &str = "COMPUTER_TOOLS_RUN";

/// `complications.tools`: `true` for the default set (read-only commands), or the
/// `surface.command` names the run may call (`["ax.tree", "gui.windows"]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolsAsk {
    /// `true`: the default set; `false`: none (as if not given).
    Default(bool),
    /// These commands, each `surface.command`.
    Named(Vec<String>),
}

// By hand: the derived schema (an `anyOf` with a description per branch) costs every
// `tools/list` reply some 300 bytes for what one line says.
impl JsonSchema for ToolsAsk {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolsAsk".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": ["boolean", "array"], "items": {"type": "string"}})
    }
}

impl ToolsAsk {
    /// Whether the run asks for any tools at all.
    pub fn wanted(&self) -> bool {
        !matches!(self, ToolsAsk::Default(false))
    }
}

/// One request on a run's channel. Read through [`WireRequest`], which refuses unknown fields
/// (serde cannot deny them beside the flattened `op`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireRequest")]
pub struct ToolsRequest {
    /// The run's capability ([`ENV_TOKEN`]).
    pub token: String,
    #[serde(flatten)]
    pub op: ToolsOp,
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ToolsOp {
    /// One call of the tool (`surface`, `command`, `args`, `complications`); the reply is the
    /// call's structured result, as `computer call --json` prints it.
    Call { arguments: Map<String, Value> },
    /// The commands this run may call; the reply is `{"callable": [{name, description, args}]}`.
    List,
}

/// A request line as it is written: every field named, none other taken.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRequest {
    token: String,
    op: WireOp,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireOp {
    Call,
    List,
}

impl TryFrom<WireRequest> for ToolsRequest {
    type Error = &'static str;

    fn try_from(wire: WireRequest) -> Result<Self, Self::Error> {
        let op = match (wire.op, wire.arguments) {
            (WireOp::Call, Some(arguments)) => ToolsOp::Call { arguments },
            (WireOp::Call, None) => {
                return Err(
                    "op `call` needs `arguments` (an object: surface, command, args, complications)",
                );
            }
            (WireOp::List, None) => ToolsOp::List,
            (WireOp::List, Some(_)) => return Err("op `list` takes no `arguments`"),
        };
        Ok(ToolsRequest {
            token: wire.token,
            op,
        })
    }
}

/// A connection to the channel of the run this process is in.
#[cfg(unix)]
pub struct ToolsClient {
    token: String,
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    writer: std::os::unix::net::UnixStream,
}

#[cfg(unix)]
impl ToolsClient {
    /// Connects through the run's inherited descriptor; `None` when this process is not in a
    /// run given tools (no [`ENV_TOKEN`]).
    pub fn from_env() -> Option<Result<ToolsClient, String>> {
        let token = std::env::var(ENV_TOKEN).ok()?;
        let fd = match std::env::var(ENV_FD) {
            Ok(text) => match text.parse::<i32>() {
                Ok(fd) if fd >= 0 => fd,
                _ => return Some(Err(format!("{ENV_FD}=`{text}` is not a descriptor number"))),
            },
            Err(_) => TOOLS_FD,
        };
        Some(ToolsClient::connect(fd, token))
    }

    /// Opens a connection over the channel descriptor `channel`.
    pub fn connect(channel: i32, token: String) -> Result<ToolsClient, String> {
        use std::os::fd::AsRawFd;
        let (stream, theirs) = std::os::unix::net::UnixStream::pair()
            .map_err(|err| format!("cannot make a socket pair: {err}"))?;
        send_descriptor(channel, theirs.as_raw_fd()).map_err(|err| {
            format!(
                "the run's tools channel (descriptor {channel}) does not answer: {err}; it closes \
                 when the run that was given tools ends"
            )
        })?;
        drop(theirs);
        let writer = stream
            .try_clone()
            .map_err(|err| format!("cannot use the tools connection: {err}"))?;
        Ok(ToolsClient {
            token,
            reader: std::io::BufReader::new(stream),
            writer,
        })
    }

    /// Sends one request and reads its reply.
    pub fn request(&mut self, op: ToolsOp) -> Result<Value, String> {
        use std::io::{BufRead, Write};
        let request = ToolsRequest {
            token: self.token.clone(),
            op,
        };
        let mut line = serde_json::to_string(&request).map_err(|err| err.to_string())?;
        line.push('\n');
        // A connection the daemon had no room for is closed after one line that says why:
        // the write may fail, the line is still there to read.
        let written = self.writer.write_all(line.as_bytes());
        let mut reply = String::new();
        match self.reader.read_line(&mut reply) {
            Ok(0) => Err(match written {
                Err(err) => format!("the tools channel closed: {err}"),
                Ok(()) => "the tools channel closed before it answered".into(),
            }),
            Ok(_) => serde_json::from_str(&reply).map_err(|err| {
                format!("the tools channel answered something else than JSON: {err}")
            }),
            Err(err) => Err(format!("the tools channel failed: {err}")),
        }
    }
}

/// Sends `fd` as one message (a `C` byte and the descriptor) on the seqpacket `channel`.
#[cfg(unix)]
fn send_descriptor(channel: i32, fd: i32) -> std::io::Result<()> {
    crate::fdpass::send_message(channel, b'C', &[fd], 0)
}

/// Receives one connection sent over a run's channel (the daemon's end, non-blocking):
/// `Ok(None)` when the run's side is closed, `WouldBlock` when none is waiting. A message
/// without exactly one descriptor is an `InvalidData` error (the caller reads on).
#[cfg(unix)]
pub fn receive_connection(channel: i32) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    // Room for a few descriptors: a message carrying more is refused whole, not cut.
    let Some((_, mut fds)) = crate::fdpass::recv_message(channel, 4, libc::MSG_DONTWAIT)? else {
        return Ok(None);
    };
    if fds.len() == 1 {
        Ok(fds.pop())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a connection message carries exactly one descriptor",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_ask_reads_true_or_names() {
        let ask: ToolsAsk = serde_json::from_value(json!(true)).unwrap();
        assert_eq!(ask, ToolsAsk::Default(true));
        assert!(ask.wanted());
        let ask: ToolsAsk = serde_json::from_value(json!(["ax.tree"])).unwrap();
        assert_eq!(ask, ToolsAsk::Named(vec!["ax.tree".into()]));
        assert!(!ToolsAsk::Default(false).wanted());
        assert!(serde_json::from_value::<ToolsAsk>(json!("ax.tree")).is_err());
    }

    #[test]
    fn requests_round_trip_with_their_wire_names() {
        let call = ToolsRequest {
            token: "t".into(),
            op: ToolsOp::Call {
                arguments: Map::from_iter([("surface".to_string(), json!("gui"))]),
            },
        };
        let value = serde_json::to_value(&call).unwrap();
        assert_eq!(
            value,
            json!({"token": "t", "op": "call", "arguments": {"surface": "gui"}})
        );
        assert_eq!(serde_json::from_value::<ToolsRequest>(value).unwrap(), call);
        let list = ToolsRequest {
            token: "t".into(),
            op: ToolsOp::List,
        };
        let value = serde_json::to_value(&list).unwrap();
        assert_eq!(value, json!({"token": "t", "op": "list"}));
        assert_eq!(serde_json::from_value::<ToolsRequest>(value).unwrap(), list);
    }

    #[test]
    fn unknown_fields_and_misplaced_arguments_are_refused_by_name() {
        let unknown = serde_json::from_value::<ToolsRequest>(
            json!({"token": "t", "op": "list", "as_agent": "other"}),
        )
        .unwrap_err()
        .to_string();
        assert!(unknown.contains("unknown field `as_agent`"), "{unknown}");
        let nested = serde_json::from_value::<ToolsRequest>(
            json!({"token": "t", "op": "call", "arguments": {}, "token2": "u"}),
        )
        .unwrap_err()
        .to_string();
        assert!(nested.contains("`token2`"), "{nested}");
        let missing = serde_json::from_value::<ToolsRequest>(json!({"token": "t", "op": "call"}))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("needs `arguments`"), "{missing}");
        let extra = serde_json::from_value::<ToolsRequest>(
            json!({"token": "t", "op": "list", "arguments": {}}),
        )
        .unwrap_err()
        .to_string();
        assert!(extra.contains("takes no `arguments`"), "{extra}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_connection_travels_over_a_seqpacket_channel() {
        use std::io::{Read, Write};
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut pair = [0; 2];
        // SAFETY: socketpair writes two descriptors into the array.
        assert_eq!(
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()) },
            0
        );
        // SAFETY: new descriptors, ours alone.
        let (daemon, run) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let mut client = ToolsClient::connect(run.as_raw_fd(), "t".into()).unwrap();
        let served = receive_connection(daemon.as_raw_fd()).unwrap().unwrap();
        let mut served = std::os::unix::net::UnixStream::from(served);
        client.writer.write_all(b"ping\n").unwrap();
        let mut got = [0u8; 5];
        served.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping\n");
        drop(run);
        drop(client);
        assert!(receive_connection(daemon.as_raw_fd()).unwrap().is_none());
    }
}
