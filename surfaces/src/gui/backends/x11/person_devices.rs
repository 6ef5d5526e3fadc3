//! The person's hands on X11: which input devices are the person's (not an XTEST device of
//! any master, the daemon's own included), watched through XInput2 raw events on a connection
//! of their own; each such event is reported to [`crate::gui::person::watch`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
use x11rb::rust_connection::RustConnection;

use super::{XError, XResult};

/// How often the person's input watch is remade after its connection broke.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Starts (once per process) the thread that tells the person's input from the daemon's and
/// the agents': it reports to [`crate::gui::person::watch`] every XInput2 raw motion, button or key
/// press whose source device is one of the person's (see [`PersonDevices`]).
pub(super) fn watch_person_once() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("x11-person-watch".into())
            .spawn(|| {
                // A broken connection (the server restarted) is remade, at most once a second.
                loop {
                    let started = Instant::now();
                    if let Err(why) = watch_person() {
                        tracing::warn!(%why, "watching for the person's input stopped; retrying");
                    }
                    std::thread::sleep(RETRY_AFTER.saturating_sub(started.elapsed()));
                }
            });
        if let Err(why) = spawned {
            tracing::warn!(%why, "cannot start the thread that watches for the person's input");
        }
    });
}

/// Watches raw input on a connection of its own until it breaks.
fn watch_person() -> XResult<()> {
    use x11rb::protocol::Event;
    use x11rb::protocol::xinput::{self, ConnectionExt as _};
    let (conn, screen) = RustConnection::connect(None)
        .map_err(|err| XError(format!("cannot connect to the X server: {err}")))?;
    if conn
        .extension_information(xinput::X11_EXTENSION_NAME)?
        .is_none()
    {
        tracing::info!("the X server lacks XInput: the person's input cannot be told apart");
        loop {
            std::thread::park();
        }
    }
    // XI2 events reach a client only once it has said which version it speaks; raw events
    // reach the root window whatever grabs are active from 2.1 on.
    let version = conn.xinput_xi_query_version(2, 2)?.reply()?;
    if (version.major_version, version.minor_version) < (2, 1) {
        tracing::info!(
            major = version.major_version,
            minor = version.minor_version,
            "XInput older than 2.1: the person's input cannot be told apart"
        );
        loop {
            std::thread::park();
        }
    }
    let root = conn.setup().roots[screen].root;
    // Hierarchy changes are asked for before the devices are read: none can pass unheard.
    conn.xinput_xi_select_events(
        root,
        &[xinput::EventMask {
            deviceid: xinput::Device::ALL.into(),
            mask: vec![xinput::XIEventMask::HIERARCHY],
        }],
    )?
    .check()?;
    let mut devices = PersonDevices::at_start(&conn)?;
    devices.select(&conn, root)?;
    loop {
        let source = match conn.wait_for_event()? {
            Event::XinputRawMotion(event) | Event::XinputRawButtonPress(event) => event.sourceid,
            Event::XinputRawKeyPress(event) => event.sourceid,
            Event::XinputHierarchy(change) => {
                devices.changed(&conn, &change)?;
                devices.select(&conn, root)?;
                continue;
            }
            _ => continue,
        };
        // Only the person's devices are selected; the check keeps a late event of a device
        // dropped meanwhile out.
        if devices.is_persons(source) {
            crate::gui::person::watch().saw_person();
        }
    }
}

/// Which input devices are the person's hands. XInput2 names the slave device each raw event
/// came from, and that is all there is to go by:
/// - XTEST devices are never the person's: each master device has an XTEST pointer and
///   keyboard through which any client (the daemon, `xdotool` in an agent's run) sends input,
///   so input from any of them is a program's, whichever master they belong to. That covers
///   the masters an agent's run makes (`xinput create-master`): a master brings only its two
///   XTEST slaves, and no client can make any other kind of device.
/// - The other slaves present when the watch starts are the person's (the mice, keyboards,
///   touchpads and tablets the server was given; a nested server's devices).
/// - A slave that appears later (hotplugged) is the person's only if it is a kernel input
///   device with a physical parent: its `Device Node` (`/dev/input/eventN`) resolves in sysfs
///   outside `/sys/devices/virtual`, where every uinput device lives. So a USB mouse or keyboard
///   plugged in while the daemon runs counts, and a device a program made through uinput (or
///   any device without a node) does not.
///
/// A device that is removed is forgotten, so a later device given its id is judged afresh.
struct PersonDevices {
    /// Every slave device known, and whether it is the person's.
    judged: HashMap<u16, bool>,
}

impl PersonDevices {
    /// The slaves present now: every one but the XTEST devices is the person's.
    fn at_start(conn: &RustConnection) -> XResult<PersonDevices> {
        let mut judged = HashMap::new();
        for device in slave_devices(conn)? {
            let persons = !is_xtest(conn, &device)?;
            judged.insert(device.deviceid, persons);
        }
        Ok(PersonDevices { judged })
    }

    fn is_persons(&self, device: u16) -> bool {
        self.judged.get(&device).copied().unwrap_or(false)
    }

    /// Takes a hierarchy change: removed devices are forgotten, devices new since are judged.
    fn changed(
        &mut self,
        conn: &RustConnection,
        change: &x11rb::protocol::xinput::HierarchyEvent,
    ) -> XResult<()> {
        use x11rb::protocol::xinput::HierarchyMask;
        for info in &change.infos {
            if info.flags & (HierarchyMask::SLAVE_REMOVED | HierarchyMask::MASTER_REMOVED)
                != HierarchyMask::from(0u8)
            {
                self.judged.remove(&info.deviceid);
            }
        }
        for device in slave_devices(conn)? {
            if self.judged.contains_key(&device.deviceid) {
                continue;
            }
            let persons = !is_xtest(conn, &device)? && has_physical_node(conn, &device)?;
            tracing::info!(
                device = device.deviceid,
                name = %String::from_utf8_lossy(&device.name),
                persons,
                "an input device appeared"
            );
            self.judged.insert(device.deviceid, persons);
        }
        Ok(())
    }

    /// Asks for raw motion, button and key presses from the person's devices only, and clears
    /// what an earlier selection asked of any other device: the server then sends nothing for
    /// the daemon's or an agent's input, so this thread is not woken by every click and key the
    /// daemon sends. A device that appears is watched once its hierarchy change has come and
    /// this has run again: its first events, within a few milliseconds of its arrival, can pass
    /// unseen.
    fn select(&self, conn: &RustConnection, root: u32) -> XResult<()> {
        use x11rb::protocol::xinput::{self, ConnectionExt as _};
        let raw = xinput::XIEventMask::RAW_MOTION
            | xinput::XIEventMask::RAW_BUTTON_PRESS
            | xinput::XIEventMask::RAW_KEY_PRESS;
        let mut ids: Vec<u16> = self.judged.keys().copied().collect();
        ids.sort_unstable();
        let masks: Vec<xinput::EventMask> = ids
            .iter()
            .map(|&id| xinput::EventMask {
                deviceid: id,
                // An empty mask clears what an earlier selection asked of the device.
                mask: if self.is_persons(id) {
                    vec![raw]
                } else {
                    Vec::new()
                },
            })
            .collect();
        // Checked, which also sends it (nothing else here would): a selection the server
        // refused would leave the person unwatched, silently.
        conn.xinput_xi_select_events(root, &masks)?.check()?;
        let (watched, ignored): (Vec<u16>, Vec<u16>) =
            ids.into_iter().partition(|&id| self.is_persons(id));
        tracing::info!(
            ?watched,
            ?ignored,
            "watching for the person's input (XInput2 raw events)"
        );
        Ok(())
    }
}

/// Every slave device (attached or floating), masters left out: raw events name slaves.
fn slave_devices(conn: &RustConnection) -> XResult<Vec<x11rb::protocol::xinput::XIDeviceInfo>> {
    use x11rb::protocol::xinput::{self, ConnectionExt as _};
    let devices = conn.xinput_xi_query_device(xinput::Device::ALL)?.reply()?;
    Ok(devices
        .infos
        .into_iter()
        .filter(|d| {
            matches!(
                d.type_,
                xinput::DeviceType::SLAVE_POINTER
                    | xinput::DeviceType::SLAVE_KEYBOARD
                    | xinput::DeviceType::FLOATING_SLAVE
            )
        })
        .collect())
}

/// Whether a device is an XTEST device: the server names each "<master> XTEST pointer" or
/// "<master> XTEST keyboard" (the master's name is the creator's to choose, the suffix is
/// not) and marks it with the property `XTEST Device`. Either sign counts; a client can set
/// the property on another device, which only makes that device unwatched.
fn is_xtest(
    conn: &RustConnection,
    device: &x11rb::protocol::xinput::XIDeviceInfo,
) -> XResult<bool> {
    let name = String::from_utf8_lossy(&device.name);
    if name.ends_with(" XTEST pointer") || name.ends_with(" XTEST keyboard") {
        return Ok(true);
    }
    Ok(device_property(conn, device.deviceid, b"XTEST Device")?
        .is_some_and(|value| value.iter().any(|&byte| byte != 0)))
}

/// Whether a device is a kernel input device with a physical parent: its `Device Node`
/// property names `/dev/input/eventN`, and that device's sysfs entry is not under
/// `/sys/devices/virtual` (where uinput's devices are). A device without a node (a nested or
/// virtual server's own, a driver's) has none.
fn has_physical_node(
    conn: &RustConnection,
    device: &x11rb::protocol::xinput::XIDeviceInfo,
) -> XResult<bool> {
    let Some(node) = device_property(conn, device.deviceid, b"Device Node")? else {
        return Ok(false);
    };
    let node = String::from_utf8_lossy(&node);
    let node = node.trim_end_matches('\0');
    Ok(node_is_physical(std::path::Path::new("/sys"), node))
}

/// `node` (`/dev/input/eventN`) against the sysfs at `sys`: physical when its device resolves
/// outside `devices/virtual`.
fn node_is_physical(sys: &std::path::Path, node: &str) -> bool {
    let Some(event) = node
        .strip_prefix("/dev/input/")
        .filter(|name| !name.is_empty() && !name.contains('/'))
    else {
        return false;
    };
    match std::fs::canonicalize(sys.join("class/input").join(event).join("device")) {
        Ok(path) => {
            path.starts_with(sys.join("devices")) && !path.starts_with(sys.join("devices/virtual"))
        }
        Err(_) => false,
    }
}

/// A device's property as bytes (8-bit properties as they are, wider ones in native order), or
/// None where the device or the property is not there.
fn device_property(conn: &RustConnection, device: u16, name: &[u8]) -> XResult<Option<Vec<u8>>> {
    use x11rb::protocol::xinput::{ConnectionExt as _, XIGetPropertyItems};
    let atom = conn.intern_atom(true, name)?.reply()?.atom;
    if atom == x11rb::NONE {
        return Ok(None);
    }
    let reply = match conn
        .xinput_xi_get_property(device, false, atom, AtomEnum::ANY.into(), 0, 1024)?
        .reply()
    {
        Ok(reply) => reply,
        // The device went away meanwhile.
        Err(x11rb::errors::ReplyError::X11Error(_)) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if reply.type_ == x11rb::NONE {
        return Ok(None);
    }
    Ok(Some(match reply.items {
        XIGetPropertyItems::Data8(bytes) => bytes,
        XIGetPropertyItems::Data16(values) => values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        XIGetPropertyItems::Data32(values) => values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        _ => Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::node_is_physical;

    /// A sysfs tree with a USB mouse (event3) and a uinput device (event7), linked as the
    /// kernel links them.
    fn sysfs() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        let usb = sys
            .path()
            .join("devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/input/input12");
        let virtual_ = sys.path().join("devices/virtual/input/input30");
        std::fs::create_dir_all(&usb).unwrap();
        std::fs::create_dir_all(&virtual_).unwrap();
        let class = sys.path().join("class/input");
        for (event, device) in [("event3", &usb), ("event7", &virtual_)] {
            std::fs::create_dir_all(class.join(event)).unwrap();
            std::os::unix::fs::symlink(device, class.join(event).join("device")).unwrap();
        }
        sys
    }

    #[test]
    fn only_a_node_with_a_physical_parent_is_the_persons() {
        let sys = sysfs();
        assert!(
            node_is_physical(sys.path(), "/dev/input/event3"),
            "USB mouse"
        );
        assert!(!node_is_physical(sys.path(), "/dev/input/event7"), "uinput");
        assert!(
            !node_is_physical(sys.path(), "/dev/input/event9"),
            "no such node"
        );
        assert!(
            !node_is_physical(sys.path(), "/dev/input/../event3"),
            "not a node name"
        );
        assert!(
            !node_is_physical(sys.path(), "/tmp/event3"),
            "not under /dev/input"
        );
        assert!(!node_is_physical(sys.path(), ""), "no node");
    }
}
