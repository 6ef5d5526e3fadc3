//! The agent's own pointer and keyboard on an X11 desktop: an XInput2 master pair named
//! [`MASTER_NAME`] that gui input goes through, so the person's pointer does not move and the
//! person's keyboard focus does not change. The pair is made at the first input (by the daemon,
//! never by `doctor`), found and taken over after a crash (same name), enabled again when left
//! disabled, and removed when the last process using it exits.
//!
//! Input reaches the pair through a connection of its own whose ClientPointer is the agent's
//! master pointer: XTEST's core events from that connection come from the master's XTEST
//! devices, `QueryPointer` reads the agent's pointer and `GetInputFocus` the agent's keyboard
//! focus. Keymap changes stay on the main connection, which addresses the person's (core)
//! keyboard: clients translate every keycode with the core keyboard's map.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xinput::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{self, AtomEnum, ConnectionExt as _};
use x11rb::rust_connection::RustConnection;

use super::{Listing, XConn, XError, XResult};
use crate::gui::desktop::WindowInfo;

/// The name given to the pair: the server names its devices "computer-agent pointer",
/// "computer-agent keyboard" and their XTEST slaves "computer-agent XTEST pointer" and
/// "computer-agent XTEST keyboard".
pub const MASTER_NAME: &str = "computer-agent";

/// The device property that lists the pids of the processes using the pair: the last one to
/// exit removes it, and one that died (SIGKILL) is dropped from the list by the next user.
const USERS_PROPERTY: &[u8] = b"_COMPUTER_AGENT_USERS";

/// `[gui] own_pointer`: 0 not configured, 1 on, 2 off.
static OWN_POINTER: AtomicU8 = AtomicU8::new(0);

/// Whether the agent's own pointer is used where `[gui] own_pointer` is not given.
const BY_DEFAULT: bool = true;

/// Takes `[gui] own_pointer` (None: not given).
pub fn configure(own_pointer: Option<bool>) {
    let setting = match own_pointer {
        None => 0,
        Some(true) => 1,
        Some(false) => 2,
    };
    OWN_POINTER.store(setting, Ordering::Relaxed);
    // The backend's line at start is logged before the config is read.
    tracing::info!(
        own_pointer = wanted(),
        "gui input on X11 per [gui] own_pointer"
    );
}

/// Whether the configuration asks for the agent's own pointer (the default).
pub fn wanted() -> bool {
    match OWN_POINTER.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => BY_DEFAULT,
    }
}

/// Why the agent's own pointer cannot be used on this display, or None when it can: XInput
/// 2.2 (multiple master devices, per-master focus) and XTEST are needed.
pub fn unsupported(conn: &RustConnection) -> Option<String> {
    match conn.extension_information(xinput::X11_EXTENSION_NAME) {
        Ok(Some(_)) => {}
        Ok(None) => return Some("the X server lacks the XInput extension".into()),
        Err(err) => return Some(format!("the X server failed a request: {err}")),
    }
    let version = conn
        .xinput_xi_query_version(2, 2)
        .map_err(XError::from)
        .and_then(|cookie| cookie.reply().map_err(XError::from));
    match version {
        Ok(v) if (v.major_version, v.minor_version) >= (2, 2) => None,
        Ok(v) => Some(format!(
            "the X server speaks XInput {}.{}, and 2.2 is needed",
            v.major_version, v.minor_version
        )),
        Err(err) => Some(err.0),
    }
}

/// What the log and `doctor` say about how gui input reaches this display: `connected` is a
/// connection to it, or None when there is none.
pub fn mode_line(connected: Option<&RustConnection>) -> String {
    if !wanted() {
        return "input: the core pointer and keyboard, the person's ([gui] own_pointer is off)"
            .into();
    }
    match connected.map(unsupported) {
        Some(None) => format!(
            "input: the agent's own pointer and keyboard (XInput2 master \"{MASTER_NAME}\", made \
             at the first input); the person's pointer and focus stay put"
        ),
        Some(Some(why)) => format!(
            "input: the core pointer and keyboard, the person's, because {why} (the agent's own \
             pointer needs XInput 2.2)"
        ),
        None => "input: not known until the display can be reached".into(),
    }
}

/// The agent's master pair and its XTEST slaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Devices {
    pub pointer: u16,
    pub keyboard: u16,
    pub xtest_pointer: u16,
    pub xtest_keyboard: u16,
}

/// The agent's input route: a connection whose ClientPointer is the agent's pointer.
pub struct AgentInput {
    pub conn: RustConnection,
    pub devices: Devices,
    /// Bumped whenever input may follow (every use of the route for input): a cached focus
    /// from before is not trusted.
    inputs: std::sync::atomic::AtomicU64,
    /// The window the agent's keys go to, as read for (listing, inputs): `windows` answers
    /// from it without a round trip, as it does from a listing no event has changed (so a
    /// display that holds its requests holds only the acts, not their preparation).
    focus_seen: std::sync::Mutex<Option<(u64, u64, Option<u32>)>>,
    /// The dialogs its keyboard followed, and the clients it has seen (see `dialogs.rs`).
    pub(super) dialogs: std::sync::Mutex<DialogFollow>,
}

/// What the agent's keyboard knows of the clients, between looks, for following dialogs
/// (`dialogs.rs`).
#[derive(Debug, Default)]
pub struct DialogFollow {
    /// The clients at the last look; None before the first.
    pub(super) seen: Option<std::collections::HashSet<u32>>,
    /// Each dialog the keyboard followed, latest last.
    pub(super) came_from: Vec<Followed>,
    /// Dialogs the keyboard followed that closed, `when` a look found them gone (kept for
    /// `GIVE_BACK_WITHIN` (`dialogs.rs`)): the window manager, or the app (GTK focuses a modal dialog's
    /// window with the core keyboard), may then give the person's keyboard to the window the
    /// dialog was opened for; the agent's keyboard goes back there.
    pub(super) closed: Vec<Followed>,
    /// The client the person's (core) keyboard was on at the last look, other than a dialog
    /// the agent's keyboard has just followed.
    pub(super) persons: Option<u32>,
}

/// A dialog the agent's keyboard followed.
#[derive(Debug)]
pub(super) struct Followed {
    pub(super) dialog: u32,
    /// The window it was opened for.
    pub(super) from: u32,
    pub(super) when: std::time::Instant,
}

impl AgentInput {
    /// Finds the agent's pair or makes it (removing one left unusable), registers this process
    /// as a user, and opens the connection input goes through.
    pub fn open() -> XResult<AgentInput> {
        let (conn, screen) = RustConnection::connect(None)
            .map_err(|err| XError(format!("cannot connect to the X server: {err}")))?;
        if let Some(why) = unsupported(&conn) {
            return Err(XError(why));
        }
        // Asked before this connection's ClientPointer is the agent's: the person's focus and
        // pointer.
        let persons_focus = conn.get_input_focus()?.reply()?.focus;
        let root = conn.setup().roots[screen].root;
        let persons_pointer = conn.query_pointer(root)?.reply()?;
        // One process at a time decides whether the pair is there and who uses it.
        conn.grab_server()?;
        let found = find_or_make(&conn);
        let registered =
            found
                .as_ref()
                .map_err(|e| XError(e.0.clone()))
                .and_then(|(devices, _)| {
                    update_users(&conn, devices.pointer, Some(std::process::id()))
                });
        conn.ungrab_server()?;
        let (devices, made) = found?;
        registered?;
        conn.xinput_xi_set_client_pointer(x11rb::NONE, devices.pointer)?
            .check()?;
        register_exit_cleanup();
        let agent = AgentInput {
            conn,
            devices,
            inputs: Default::default(),
            focus_seen: Default::default(),
            dialogs: Default::default(),
        };
        // A new pair's keys go where the person's went (the window the agent saw focused);
        // one found in use keeps its own focus.
        if agent.focus()? <= 1 && persons_focus > 1 {
            agent.set_focus(persons_focus)?;
        }
        // A new pair's pointer starts where the person's is (what `cursor` said before there
        // was a pair); one found in use stays where it is.
        if made {
            let fixed = |v: i16| i32::from(v) << 16;
            let (x, y) = (fixed(persons_pointer.root_x), fixed(persons_pointer.root_y));
            agent
                .conn
                .xinput_xi_warp_pointer(x11rb::NONE, root, 0, 0, 0, 0, x, y, devices.pointer)?
                .check()?;
        }
        tracing::info!(
            ?devices,
            name = MASTER_NAME,
            "gui input goes through the agent's own pointer and keyboard"
        );
        Ok(agent)
    }

    /// Whether the pair is still there as it was (another process may have removed it).
    pub fn alive(&self) -> XResult<bool> {
        Ok(find(&self.conn)?.is_some_and(|found| found == self.devices))
    }

    /// The window the agent's keyboard is focused on (0 None, 1 PointerRoot).
    pub fn focus(&self) -> XResult<u32> {
        Ok(self
            .conn
            .xinput_xi_get_focus(self.devices.keyboard)?
            .reply()?
            .focus)
    }

    /// Focuses the agent's keyboard on `window`; false when the server refuses (a window not
    /// viewable).
    pub fn set_focus(&self, window: u32) -> XResult<bool> {
        match self
            .conn
            .xinput_xi_set_focus(window, x11rb::CURRENT_TIME, self.devices.keyboard)?
            .check()
        {
            Ok(()) => Ok(true),
            Err(x11rb::errors::ReplyError::X11Error(err)) => {
                tracing::debug!(window, ?err, "the agent's keyboard cannot focus the window");
                Ok(false)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The agent's pointer position on the root.
    pub fn pointer(&self, root: u32) -> XResult<(i32, i32)> {
        let reply = self.conn.query_pointer(root)?.reply()?;
        Ok((i32::from(reply.root_x), i32::from(reply.root_y)))
    }
}

/// The pair named [`MASTER_NAME`] as the server has it now, if it is whole: a master pointer,
/// its paired keyboard, and an XTEST slave attached to each.
fn find(conn: &RustConnection) -> XResult<Option<Devices>> {
    Ok(match scan(conn)? {
        Scan::Whole(devices) => Some(devices),
        _ => None,
    })
}

enum Scan {
    Whole(Devices),
    /// A master of that name whose pair or XTEST slaves are missing or disabled.
    Broken(u16),
    Absent,
}

/// The master of the pair named "computer-agent `kind`", as [`Scan::Broken`] when it is there.
fn scan_named(conn: &RustConnection, kind: &str) -> XResult<Scan> {
    let infos = conn
        .xinput_xi_query_device(xinput::Device::ALL)?
        .reply()?
        .infos;
    Ok(infos
        .iter()
        .find(|d| d.name == format!("{MASTER_NAME} {kind}").as_bytes())
        .filter(|d| {
            matches!(
                d.type_,
                xinput::DeviceType::MASTER_POINTER | xinput::DeviceType::MASTER_KEYBOARD
            )
        })
        .map_or(Scan::Absent, |d| Scan::Broken(d.deviceid)))
}

fn scan(conn: &RustConnection) -> XResult<Scan> {
    let infos = conn
        .xinput_xi_query_device(xinput::Device::ALL)?
        .reply()?
        .infos;
    let named = |name: &str| {
        infos
            .iter()
            .find(|d| d.name == format!("{MASTER_NAME} {name}").as_bytes())
    };
    let Some(pointer) = named("pointer").filter(|d| d.type_ == xinput::DeviceType::MASTER_POINTER)
    else {
        return Ok(match named("keyboard") {
            Some(keyboard) if keyboard.type_ == xinput::DeviceType::MASTER_KEYBOARD => {
                Scan::Broken(keyboard.deviceid)
            }
            _ => Scan::Absent,
        });
    };
    let slave = |name: &str, master: u16| {
        named(name)
            .filter(|d| d.attachment == master && d.enabled)
            .map(|d| d.deviceid)
    };
    let keyboard = infos
        .iter()
        .find(|d| d.deviceid == pointer.attachment)
        .filter(|d| d.type_ == xinput::DeviceType::MASTER_KEYBOARD);
    let whole = keyboard.and_then(|keyboard| {
        Some(Devices {
            pointer: pointer.deviceid,
            keyboard: keyboard.deviceid,
            xtest_pointer: slave("XTEST pointer", pointer.deviceid)?,
            xtest_keyboard: slave("XTEST keyboard", keyboard.deviceid)?,
        })
    });
    Ok(match whole {
        Some(devices) if pointer.enabled => Scan::Whole(devices),
        _ => Scan::Broken(pointer.deviceid),
    })
}

/// Takes the pair that is there (left by a process that crashed, or in use by another), or
/// makes it. One left disabled or without its XTEST devices is enabled first (removing a
/// disabled master crashes some X servers, Xvfb 21 among them, and the desktop is the
/// person's), then used if whole, else removed and made anew.
/// Returns the pair and whether it was made now.
fn find_or_make(conn: &RustConnection) -> XResult<(Devices, bool)> {
    match scan(conn)? {
        Scan::Whole(devices) => {
            tracing::info!(
                ?devices,
                "found the agent's pointer and keyboard; using them"
            );
            return Ok((devices, false));
        }
        Scan::Broken(master) => {
            tracing::warn!(
                master,
                "the agent's pointer and keyboard were left disabled or broken; enabling them"
            );
            enable(conn, master)?;
            // A disabled master pointer is paired with no keyboard: the keyboard by its name.
            if let Scan::Broken(keyboard) = scan_named(conn, "keyboard")? {
                enable(conn, keyboard)?;
            }
            match scan(conn)? {
                Scan::Whole(devices) => return Ok((devices, false)),
                // Enabled now, and still without its XTEST devices: removed and made anew.
                Scan::Broken(master) if is_enabled(conn, master)? => {
                    tracing::warn!(master, "removing the agent's broken pointer and keyboard");
                    remove(conn, master)?;
                }
                Scan::Broken(master) => {
                    return Err(XError(format!(
                        "an input device named \"{MASTER_NAME} pointer\" (id {master}) is there, \
                         disabled and unusable; remove it with `xinput remove-master {master}` \
                         after `xinput enable {master}`"
                    )));
                }
                Scan::Absent => {}
            }
        }
        Scan::Absent => {}
    }
    let name = MASTER_NAME.as_bytes().to_vec();
    let len = (8 + name.len().div_ceil(4) * 4) / 4;
    conn.xinput_xi_change_hierarchy(&[xinput::HierarchyChange {
        len: len as u16,
        data: xinput::HierarchyChangeData::AddMaster(xinput::HierarchyChangeDataAddMaster {
            send_core: true,
            enable: true,
            name,
        }),
    }])?
    .check()?;
    let devices = find(conn)?.ok_or_else(|| {
        XError(format!(
            "the X server made no whole master pair \"{MASTER_NAME}\" (XIChangeHierarchy \
             AddMaster answered without error)"
        ))
    })?;
    Ok((devices, true))
}

/// Whether a device is enabled (false for one not there).
fn is_enabled(conn: &RustConnection, device: u16) -> XResult<bool> {
    let infos = conn
        .xinput_xi_query_device(xinput::Device::ALL)?
        .reply()?
        .infos;
    Ok(infos.iter().any(|d| d.deviceid == device && d.enabled))
}

/// Enables a device (and, for a master, the slaves it had): its `Device Enabled` property.
fn enable(conn: &RustConnection, device: u16) -> XResult<()> {
    let atom = conn.intern_atom(false, b"Device Enabled")?.reply()?.atom;
    conn.xinput_xi_change_property(
        device,
        xproto::PropMode::REPLACE,
        atom,
        AtomEnum::INTEGER.into(),
        1,
        &xinput::XIChangePropertyAux::Data8(vec![1]),
    )?
    .check()?;
    Ok(())
}

/// Removes a master device and its pair (their XTEST slaves go with them).
fn remove(conn: &RustConnection, master: u16) -> XResult<()> {
    conn.xinput_xi_change_hierarchy(&[xinput::HierarchyChange {
        len: 3,
        data: xinput::HierarchyChangeData::RemoveMaster(xinput::HierarchyChangeDataRemoveMaster {
            deviceid: master,
            return_mode: xinput::ChangeMode::FLOAT,
            return_pointer: 0,
            return_keyboard: 0,
        }),
    }])?
    .check()?;
    Ok(())
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Rewrites the pair's users: the live ones, plus `add`.
fn update_users(conn: &RustConnection, pointer: u16, add: Option<u32>) -> XResult<()> {
    let users = users(conn, pointer)?;
    write_users(conn, pointer, users, add).map(|_| ())
}

fn users(conn: &RustConnection, pointer: u16) -> XResult<Vec<u32>> {
    let atom = conn.intern_atom(false, USERS_PROPERTY)?.reply()?.atom;
    let reply = conn
        .xinput_xi_get_property(pointer, false, atom, AtomEnum::CARDINAL.into(), 0, 1024)?
        .reply()?;
    Ok(match reply.items {
        xinput::XIGetPropertyItems::Data32(pids) => pids,
        _ => Vec::new(),
    })
}

fn write_users(
    conn: &RustConnection,
    pointer: u16,
    users: Vec<u32>,
    add: Option<u32>,
) -> XResult<Vec<u32>> {
    let mut live: Vec<u32> = users
        .into_iter()
        .filter(|&pid| Some(pid) != add && process_alive(pid))
        .collect();
    live.extend(add);
    let atom = conn.intern_atom(false, USERS_PROPERTY)?.reply()?.atom;
    conn.xinput_xi_change_property(
        pointer,
        xproto::PropMode::REPLACE,
        atom,
        AtomEnum::CARDINAL.into(),
        live.len() as u32,
        &xinput::XIChangePropertyAux::Data32(live.clone()),
    )?
    .check()?;
    Ok(live)
}

/// Removes this process from the pair's users at exit, and the pair when no live user is
/// left. Registered once, by the process that first used the pair.
fn register_exit_cleanup() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a plain function with no arguments; it runs once at exit.
        unsafe { libc::atexit(release_at_exit) };
    });
}

extern "C" fn release_at_exit() {
    // A display another client holds (a server grab) must not hold the exit: the release is
    // waited for a little, then left (the next user drops this process from the list).
    const BOUND: std::time::Duration = std::time::Duration::from_secs(2);
    // Nothing may unwind into libc.
    let _ = std::panic::catch_unwind(|| {
        let (done, finished) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("x11-agent-release".into())
            .spawn(move || {
                let _ = done.send(release());
            });
        if spawned.is_err() {
            return;
        }
        match finished.recv_timeout(BOUND) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                tracing::warn!(%why, "could not remove the agent's pointer and keyboard at exit")
            }
            Err(_) => tracing::warn!(
                "the X server did not answer within 2 s at exit; the agent's pointer and \
                 keyboard are left for the next daemon"
            ),
        }
    });
}

/// Leaves the pair: this process is no longer a user; the pair is removed when none is left.
pub fn release() -> XResult<()> {
    let (conn, _) = RustConnection::connect(None)
        .map_err(|err| XError(format!("cannot connect to the X server: {err}")))?;
    conn.grab_server()?;
    let done = (|| {
        let Some(devices) = find(&conn)? else {
            return Ok(());
        };
        let me = std::process::id();
        let others: Vec<u32> = users(&conn, devices.pointer)?
            .into_iter()
            .filter(|&pid| pid != me)
            .collect();
        let left = write_users(&conn, devices.pointer, others, None)?;
        if left.is_empty() {
            remove(&conn, devices.pointer)?;
            tracing::info!("removed the agent's pointer and keyboard");
        }
        Ok(())
    })();
    conn.ungrab_server()?;
    conn.flush()?;
    done
}

/// A client whose ClientPointer is the agent's for one act, and what it was.
pub struct Lent {
    window: u32,
    previous: u16,
}

/// What a connection knows of the agent's pair.
pub enum AgentState {
    /// Not asked for yet (input makes it; observations do not).
    Untried,
    Open(Arc<AgentInput>),
    /// It could not be had; input goes through the core devices (the reason was logged).
    Refused,
}

impl XConn {
    fn agent_state(&self) -> std::sync::MutexGuard<'_, AgentState> {
        self.agent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The agent's pair for input, made (or found again) now if needed; None when the
    /// configuration or the display says the core devices are used.
    pub(super) fn agent(&self) -> Option<Arc<AgentInput>> {
        if !wanted() {
            return None;
        }
        let mut state = self.agent_state();
        if let AgentState::Open(agent) = &*state {
            match agent.alive() {
                Ok(true) => return Some(agent.clone()),
                Ok(false) => tracing::warn!(
                    "the agent's pointer and keyboard were removed by another client; remaking them"
                ),
                Err(why) => tracing::warn!(%why, "cannot check the agent's pointer; reopening it"),
            }
            *state = AgentState::Untried;
        }
        if let AgentState::Refused = &*state {
            return None;
        }
        match AgentInput::open() {
            Ok(agent) => {
                let agent = Arc::new(agent);
                *state = AgentState::Open(agent.clone());
                Some(agent)
            }
            Err(why) => {
                tracing::warn!(
                    %why,
                    "cannot have the agent's own pointer and keyboard; gui input moves the \
                     person's pointer and keyboard focus instead"
                );
                *state = AgentState::Refused;
                None
            }
        }
    }

    /// The agent's pair for input if input has made it (and the configuration still wants
    /// it); what was read of its focus before is not trusted after.
    pub(super) fn agent_if_open(&self) -> Option<Arc<AgentInput>> {
        let agent = self.agent_peek()?;
        agent.inputs.fetch_add(1, Ordering::Relaxed);
        Some(agent)
    }

    /// The agent's pair if input has made it, to read from.
    pub(super) fn agent_peek(&self) -> Option<Arc<AgentInput>> {
        match &*self.agent_state() {
            AgentState::Open(agent) if wanted() => Some(agent.clone()),
            _ => None,
        }
    }

    /// The listing's windows, `focused` being the window the agent's keys go to when the agent
    /// has its own keyboard (the window manager's active window is the person's).
    pub(super) fn with_agent_focus(&self, listing: &Arc<Listing>) -> XResult<Vec<WindowInfo>> {
        let windows = listing.windows.clone();
        let Some(agent) = self.agent_peek() else {
            return Ok(windows);
        };
        let key = (listing.generation, agent.inputs.load(Ordering::Relaxed));
        let seen = *agent.focus_seen.lock().unwrap_or_else(|e| e.into_inner());
        let target = match seen {
            Some((listing, inputs, target)) if (listing, inputs) == key => target,
            _ => {
                let target = self.keyboard_target()?;
                *agent.focus_seen.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((key.0, key.1, target));
                target
            }
        };
        Ok(windows
            .into_iter()
            .map(|w| WindowInfo {
                focused: Some(w.id) == target,
                ..w
            })
            .collect())
    }

    /// The window whose client reads the keys typed now: the agent's keyboard focus, or the
    /// active window.
    pub(super) fn key_window(&self) -> XResult<Option<u32>> {
        match self.agent_if_open() {
            Some(_) => self.keyboard_target(),
            None => self.active_window(),
        }
    }

    /// The managed window whose frame (or itself, unframed) is the top-level window at the
    /// agent's pointer; None over the root or a window nobody manages (a menu, a tooltip).
    fn client_at_agent_pointer(&self, agent: &AgentInput) -> XResult<Option<u32>> {
        let (x, y) = agent.pointer(self.root)?;
        let top = self
            .conn
            .translate_coordinates(self.root, self.root, x as i16, y as i16)?
            .reply()?
            .child;
        if top == x11rb::NONE {
            return Ok(None);
        }
        // No window manager's list (none runs, or it is starting): no client to tell, and the
        // click goes on without lending the pointer, as it would with the core pointer.
        let listing = match self.listing() {
            Ok(listing) => listing,
            Err(why) => {
                tracing::debug!(%why, "no window list: the click lends no pointer");
                return Ok(None);
            }
        };
        let order = listing.stacking.as_ref().unwrap_or(&listing.ids);
        for &id in order.iter().rev() {
            if self.top_level_of(id)? == Some(top) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// The child of the root that holds `window` (its frame, or itself when unframed).
    fn top_level_of(&self, window: u32) -> XResult<Option<u32>> {
        let mut window = window;
        // A window's ancestry is short; the bound only guards against a server that lies.
        for _ in 0..64 {
            let parent = match self.conn.query_tree(window)?.reply() {
                Ok(tree) => tree.parent,
                // Gone meanwhile.
                Err(x11rb::errors::ReplyError::X11Error(_)) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            if parent == self.root {
                return Ok(Some(window));
            }
            if parent == x11rb::NONE {
                return Ok(None);
            }
            window = parent;
        }
        Ok(None)
    }

    /// Before the agent presses a button: the client of the window under the agent's pointer
    /// gets the agent's pointer as its ClientPointer until [`XConn::agent_click_focus`]. What it
    /// does with the core devices in answer to the press then moves the agent's, not the
    /// person's: a GTK window offered WM_TAKE_FOCUS by the window manager focuses itself with
    /// a core SetInputFocus, which would take the person's keyboard focus.
    pub(super) fn lend_client_pointer(&self) -> XResult<Option<Lent>> {
        let Some(agent) = self.agent_if_open() else {
            return Ok(None);
        };
        let Some(window) = self.client_at_agent_pointer(&agent)? else {
            return Ok(None);
        };
        let before = self.conn.xinput_xi_get_client_pointer(window)?.reply()?;
        // A client that never needed a ClientPointer has the core one (device 2) once it does.
        let previous = if before.deviceid == 0 {
            2
        } else {
            before.deviceid
        };
        if previous != agent.devices.pointer {
            self.conn
                .xinput_xi_set_client_pointer(window, agent.devices.pointer)?
                .check()?;
        }
        Ok(Some(Lent { window, previous }))
    }

    /// After the agent's click or drag: its keyboard follows, to the window pressed on, as a
    /// click-to-focus window manager does for the person's (the window manager moves only the
    /// person's focus, or none). Once the window manager and the window's client have read the
    /// press, the client's ClientPointer is given back.
    pub(super) fn agent_click_focus(&self, lent: Option<Lent>) -> XResult<()> {
        let (Some(agent), Some(lent)) = (self.agent_if_open(), lent) else {
            return Ok(());
        };
        if self.keyboard_target()? != Some(lent.window) {
            agent.set_focus(lent.window)?;
        }
        self.sync()?;
        self.window_manager_caught_up()?;
        self.client_caught_up(Some(lent.window))?;
        if lent.previous != agent.devices.pointer {
            match self
                .conn
                .xinput_xi_set_client_pointer(lent.window, lent.previous)?
                .check()
            {
                // The window closed meanwhile, and its client with it, or the device went.
                Ok(()) | Err(x11rb::errors::ReplyError::X11Error(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// `focus` with the agent's own keyboard: the window is raised (so the agent's clicks land
    /// on it) and the agent's keyboard focused on it; the person's focus stays where it is.
    pub(super) fn agent_focus(&self, agent: &AgentInput, window: u32) -> XResult<bool> {
        self.conn.configure_window(
            window,
            &xproto::ConfigureWindowAux::new().stack_mode(xproto::StackMode::ABOVE),
        )?;
        if !agent.set_focus(window)? {
            return Ok(false);
        }
        self.sync()?;
        Ok(self.keyboard_target()? == Some(window))
    }
}

impl super::Backend {
    /// The backend's description (`base`) with how input reaches the display, for `doctor`
    /// and the log: one string per distinct text, kept for the process's life.
    pub fn described(&self, base: &str) -> &'static str {
        static SAID: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
        let current = self.current();
        let line = format!("{base}; {}", mode_line(current.as_ref().map(|c| &c.conn)));
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = said.iter().find(|s| **s == line) {
            return known;
        }
        let leaked: &'static str = Box::leak(line.into_boxed_str());
        said.push(leaked);
        leaked
    }
}
