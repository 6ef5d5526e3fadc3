//! The gui surface: screenshots, windows, pointer and keyboard; and the evidence capturer.
//! On Linux the backend is chosen at run time from what the session offers: a wlroots-style
//! Wayland compositor (screencopy, foreign-toplevel, virtual pointer and keyboard), GNOME's
//! Mutter (its RemoteDesktop and ScreenCast D-Bus API, frames over PipeWire, windows from
//! AT-SPI), any other Wayland compositor through xdg-desktop-portal (RemoteDesktop and
//! ScreenCast: KDE's KWin) or X11 (x11rb: GetImage, EWMH, RandR, XTEST); on macOS it is xcap
//! captures and CoreGraphics events; other platforms have none in this build.
//!
//! # Layout
//! - `desktop`: the platform-neutral contract (`Desktop`, `Backend`) and its types.
//! - `surface`: the commands a backend offers, the checks every act goes through, and evidence,
//!   over any backend.
//! - `commands`: one file per command: its args, result fields, the capabilities it needs,
//!   validation into an act, and that act's run on the backend's `Desktop`; `commands::keys`
//!   is how `type` and `key` deliver keys (terminal lines included), `commands::pointer` what
//!   the pointer commands share.
//! - [`keys`]: key-combo parsing (keysyms), shared by every backend.
//! - [`terminal`]: which windows are terminal emulators, and the command line typed into each.
//! - `terminal_pty` (Linux): a window whose process tree holds a pty master is a terminal too.
//! - `seen`: acts bound to a screenshot or window listing (`complications.seen`): the snapshot,
//!   screenshot pixels mapped to the screen, and the `stale` check right before input.
//! - `read_back`: what an act achieved, read back after it (`effect`).
//! - `person`: the person takes the wheel: gui input pauses after the person's own input
//!   (told apart on X11 by the X11 backend's XInput2 raw-event watch).
//! - `backends`: a folder per backend: `x11`, `wayland` (wlroots), `gnome` (Mutter), `portal`
//!   (xdg-desktop-portal), `macos`, and `remote_desktop` (what GNOME and the portal share).

use std::sync::Arc;

use crate::{EvidenceCapture, Surface};

#[cfg(any(target_os = "linux", target_os = "macos"))]
mod backends;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod commands;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod desktop;
pub mod keys;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod person;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod read_back;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod seen;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod surface;
pub mod terminal;
#[cfg(target_os = "linux")]
mod terminal_pty;

#[cfg(target_os = "macos")]
use backends::macos;
/// sway's IPC client, which agents' own sway desktops use too.
#[cfg(target_os = "linux")]
pub(crate) use backends::wayland::sway::SwayIpc;
#[cfg(target_os = "linux")]
use backends::{gnome, portal, wayland, x11};

/// The backend this process drives, chosen once (the surface and the evidence capturer share
/// its connection), with why it was chosen.
#[cfg(any(target_os = "linux", target_os = "macos"))]
struct Chosen {
    backend: PlatformBackend,
    /// What `computer doctor` and the log say: the backend, why, and what is missing.
    description: String,
}

#[cfg(target_os = "linux")]
enum PlatformBackend {
    X11(Arc<x11::Backend>),
    Wayland(Arc<wayland::Backend>),
    Gnome(Arc<gnome::Backend>),
    Portal(Arc<portal::Backend>),
}
#[cfg(target_os = "macos")]
enum PlatformBackend {
    MacOs(Arc<macos::Backend>),
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn chosen() -> &'static Chosen {
    static CHOSEN: std::sync::OnceLock<Chosen> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| {
        let chosen = choose();
        tracing::info!(backend = %chosen.description, "gui backend chosen");
        chosen
    })
}

/// The Linux choice: Wayland when the session is a Wayland one whose compositor offers the
/// wlroots protocols; GNOME when it offers none of them and Mutter's remote-desktop API is on
/// the session bus; the portal when neither holds and xdg-desktop-portal offers RemoteDesktop
/// (KDE's KWin); X11 when DISPLAY is set and none holds (X11 apps through Xwayland), or in an
/// X11 session; else the Wayland backend, which says what is missing.
/// `COMPUTER_GUI_BACKEND=portal` takes the portal wherever it offers RemoteDesktop (on GNOME
/// too, where the person then answers the portal's dialog instead of the daemon's question).
#[cfg(target_os = "linux")]
fn choose() -> Chosen {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let wayland_display = var("WAYLAND_DISPLAY");
    let display = var("DISPLAY");
    let session = var("XDG_SESSION_TYPE");
    let x11 = |why: String| Chosen {
        backend: PlatformBackend::X11(Arc::new(x11::Backend::new())),
        description: format!("x11 (x11rb: GetImage, EWMH, RandR, XTEST); chosen because {why}"),
    };
    let Some(socket) = wayland_display else {
        return x11(match (display, session) {
            (Some(d), _) => format!("DISPLAY={d} is set and WAYLAND_DISPLAY is not"),
            (None, Some(s)) if s == "wayland" => "XDG_SESSION_TYPE=wayland but WAYLAND_DISPLAY \
                                                  is not set, so no compositor can be reached"
                .into(),
            (None, _) => "neither WAYLAND_DISPLAY nor DISPLAY is set".into(),
        });
    };
    if var("COMPUTER_GUI_BACKEND").as_deref() == Some("portal") {
        match portal::offered() {
            Ok(offer) => {
                return portal_chosen(
                    offer,
                    format!("COMPUTER_GUI_BACKEND=portal and WAYLAND_DISPLAY={socket}"),
                );
            }
            Err(why) => tracing::warn!(%why, "COMPUTER_GUI_BACKEND=portal, but no portal serves"),
        }
    }
    let protocols = wayland::advertised();
    let reached = protocols.is_some();
    let wlroots = protocols
        .as_ref()
        .is_some_and(wayland::Protocols::is_wlroots);
    let mutter = if wlroots {
        None
    } else {
        Some(gnome::offered())
    };
    if let Some(Ok(true)) = mutter {
        return gnome_chosen(&socket, reached, display.as_deref());
    }
    let no_mutter = match &mutter {
        Some(Err(why)) => format!("; Mutter's remote-desktop API not checked: {why}"),
        _ => format!("; {} is not on the session bus", gnome::REMOTE_DESKTOP),
    };
    let no_portal = if wlroots {
        String::new()
    } else {
        match portal::offered() {
            Ok(offer) => {
                return portal_chosen(
                    offer,
                    format!(
                        "WAYLAND_DISPLAY={socket} {}{no_mutter}, and {} offers RemoteDesktop",
                        if reached {
                            "offers none of the wlroots protocols"
                        } else {
                            "cannot be reached now"
                        },
                        portal::PORTAL
                    ),
                );
            }
            Err(why) => format!("; no xdg-desktop-portal route: {why}{}", kde_note()),
        }
    };
    if !wlroots && let Some(d) = display {
        return x11(format!(
            "WAYLAND_DISPLAY={socket} {}{no_mutter}{no_portal}, so DISPLAY={d} (Xwayland) is \
             used: only X11 apps are seen and driven",
            if reached {
                "offers none of the wlroots protocols"
            } else {
                "cannot be reached now"
            },
        ));
    }
    wayland_chosen(
        &socket,
        protocols.as_ref(),
        display.as_deref(),
        &no_mutter,
        &no_portal,
    )
}

/// The wlroots Wayland backend, connected now, and why it was chosen and what it lacks.
#[cfg(target_os = "linux")]
fn wayland_chosen(
    socket: &str,
    protocols: Option<&wayland::Protocols>,
    display: Option<&str>,
    no_mutter: &str,
    no_portal: &str,
) -> Chosen {
    let backend = Arc::new(wayland::Backend::new());
    // Connects now: the virtual pointer and keyboard then exist long before the first call.
    let _ = backend.protocols();
    let compositor = compositor_name();
    let description = match protocols {
        Some(p) if p.is_wlroots() => format!(
            "wayland-wlroots ({}; {compositor}); chosen because WAYLAND_DISPLAY={socket} and the \
             compositor offers the wlroots protocols; missing: {}; Xwayland apps: {}",
            p.used().join(", "),
            p.missing().join("; "),
            if display.is_some() {
                "not driven by this backend (start a second daemon with DISPLAY only)"
            } else {
                "none reachable (no DISPLAY)"
            }
        ),
        Some(_) => format!(
            "wayland; chosen because WAYLAND_DISPLAY={socket} and DISPLAY is not set, but the \
             compositor offers none of the wlroots protocols ({compositor}){no_mutter}{no_portal}"
        ),
        None => format!(
            "wayland-wlroots ({compositor}); chosen because WAYLAND_DISPLAY={socket}, but the \
             compositor cannot be reached now{no_mutter}{no_portal}"
        ),
    };
    Chosen {
        backend: PlatformBackend::Wayland(backend),
        description,
    }
}

/// The GNOME (Mutter) backend, and why it was chosen and what it lacks.
#[cfg(target_os = "linux")]
fn gnome_chosen(socket: &str, reached: bool, display: Option<&str>) -> Chosen {
    Chosen {
        backend: PlatformBackend::Gnome(Arc::new(gnome::Backend::new())),
        description: format!(
            "gnome-mutter (org.gnome.Mutter.RemoteDesktop and ScreenCast over D-Bus, frames over \
             PipeWire, windows and focus from AT-SPI); chosen because WAYLAND_DISPLAY={socket} \
             {} and {} is on the session bus; missing: window positions (pointer input is \
             refused while approvers are connected), raising windows (no `focus`), reading the \
             pointer (no `cursor`), windows of apps without AT-SPI, monitors other than the \
             primary, keys outside printable ASCII; Xwayland apps: {}",
            if reached {
                "offers none of the wlroots protocols"
            } else {
                "cannot be reached now"
            },
            gnome::REMOTE_DESKTOP,
            if display.is_some() {
                "not driven by this backend (start a second daemon with DISPLAY only)"
            } else {
                "none reachable (no DISPLAY)"
            }
        ),
    }
}

/// The portal backend, and why it was chosen and what it lacks.
#[cfg(target_os = "linux")]
fn portal_chosen(offer: portal::Offer, why: String) -> Chosen {
    let mut missing = vec![
        "a window list from the compositor (windows and focus come from AT-SPI: apps without \
         it are not seen)"
            .to_string(),
        "window positions (pointer input is refused while approvers are connected)".into(),
        "raising windows (no `focus`)".into(),
        "reading the pointer (no `cursor`)".into(),
        "monitors other than the one shared".into(),
        "keys outside printable ASCII".into(),
    ];
    missing.extend(offer.missing());
    Chosen {
        backend: PlatformBackend::Portal(Arc::new(portal::Backend::new())),
        description: format!(
            "portal ({}; the portal's RemoteDesktop version {} and ScreenCast version {}, \
             frames over PipeWire, windows and focus from AT-SPI; the portal's own \
             dialog asks the person, {}); chosen because {why}; missing: {}",
            portal_desktop(),
            offer.remote_desktop,
            offer.screen_cast,
            if offer.restorable() {
                "once: the grant is kept as keychain://computer.gui/portal-restore-token"
            } else {
                "at every daemon start"
            },
            missing.join("; ")
        ),
    }
}

/// The desktop the portal serves, as `XDG_CURRENT_DESKTOP` names it.
#[cfg(target_os = "linux")]
fn portal_desktop() -> String {
    let desktop = std::env::var("XDG_CURRENT_DESKTOP").unwrap_or_default();
    let upper = desktop.to_uppercase();
    if upper.split(':').any(|d| d == "KDE") {
        "KDE (KWin) through xdg-desktop-portal-kde".into()
    } else if upper.split(':').any(|d| d == "GNOME") {
        "GNOME through xdg-desktop-portal-gnome".into()
    } else if desktop.is_empty() {
        "a desktop XDG_CURRENT_DESKTOP does not name, through its portal backend".into()
    } else {
        format!("{desktop} through its portal backend")
    }
}

/// What `doctor` adds on KDE Plasma when the portal route is missing.
#[cfg(target_os = "linux")]
fn kde_note() -> &'static str {
    let kde = std::env::var("XDG_CURRENT_DESKTOP")
        .is_ok_and(|d| d.to_uppercase().split(':').any(|d| d == "KDE"));
    if kde {
        " (on KDE Plasma install xdg-desktop-portal and xdg-desktop-portal-kde: KWin is driven \
         through them)"
    } else {
        ""
    }
}

/// Which compositor runs, as far as the environment tells.
#[cfg(target_os = "linux")]
fn compositor_name() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if var("SWAYSOCK").is_some() {
        "sway, with window rectangles and pids from its IPC".into()
    } else if var("HYPRLAND_INSTANCE_SIGNATURE").is_some() {
        "Hyprland; window rectangles and pids unknown".into()
    } else if let Some(desktop) = var("XDG_CURRENT_DESKTOP") {
        format!("{desktop}; window rectangles and pids unknown")
    } else {
        "compositor not named; window rectangles and pids unknown".into()
    }
}

#[cfg(target_os = "macos")]
fn choose() -> Chosen {
    Chosen {
        backend: PlatformBackend::MacOs(Arc::new(macos::Backend::new())),
        description: "macos (xcap captures, CoreGraphics events)".into(),
    }
}

/// What the log and `computer doctor` say about the backend: which, why, what is missing.
pub(crate) fn backend_name() -> &'static str {
    #[cfg(target_os = "linux")]
    if let PlatformBackend::X11(backend) = &chosen().backend {
        return backend.described(&chosen().description);
    }
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        &chosen().description
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        "none in this build"
    }
}

/// The surface over one backend, with its readiness logged.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn surface_over<B: desktop::Backend>(backend: Arc<B>) -> Arc<dyn Surface> {
    if let crate::Availability::Unavailable { reason, .. } =
        desktop::Backend::availability(&*backend)
    {
        tracing::info!(%reason, "gui backend's display not reachable now");
    }
    Arc::new(surface::GuiSurface::new(backend))
}

/// The gui surface for this platform, if this build has one. On Linux and macOS it is always
/// returned; whether it can be used now is what its `probe` says (no DISPLAY, X server
/// unreachable, no compositor, no window server...).
pub fn surface() -> Option<Arc<dyn Surface>> {
    #[cfg(target_os = "linux")]
    {
        Some(match &chosen().backend {
            PlatformBackend::X11(backend) => surface_over(backend.clone()),
            PlatformBackend::Wayland(backend) => surface_over(backend.clone()),
            PlatformBackend::Gnome(backend) => surface_over(backend.clone()),
            PlatformBackend::Portal(backend) => surface_over(backend.clone()),
        })
    }
    #[cfg(target_os = "macos")]
    {
        let PlatformBackend::MacOs(backend) = &chosen().backend;
        Some(surface_over(backend.clone()))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// The gui surface and evidence capturer on an agent's own X11 desktop at `display`, whose
/// acts' read-back reads elements on its accessibility bus at `atspi_address`: neither reaches
/// the person's display or buses, whatever the process environment names.
#[cfg(target_os = "linux")]
pub(crate) fn on_x_display(
    display: &str,
    atspi_address: &str,
) -> (Arc<dyn Surface>, Option<Arc<dyn EvidenceCapture>>) {
    let backend = Arc::new(x11::Backend::on_display(display));
    let reader = crate::accessibility::ElementReader::on_bus(atspi_address);
    let surface: Arc<dyn Surface> =
        Arc::new(surface::GuiSurface::reading_with(backend.clone(), reader));
    (surface, evidence_over(&backend))
}

/// The gui surface and evidence capturer on an agent's own wlroots compositor listening at
/// `socket` (absolute path), with sway's IPC at `swaysock`, whose acts' read-back reads elements
/// on its accessibility bus at `atspi_address`: neither reaches the person's session, whatever
/// the process environment names.
#[cfg(target_os = "linux")]
pub(crate) fn on_wayland_socket(
    socket: &std::path::Path,
    swaysock: Option<&std::path::Path>,
    atspi_address: &str,
) -> (Arc<dyn Surface>, Option<Arc<dyn EvidenceCapture>>) {
    let backend = Arc::new(wayland::Backend::on_socket(socket, swaysock));
    let reader = crate::accessibility::ElementReader::on_bus(atspi_address);
    let surface: Arc<dyn Surface> =
        Arc::new(surface::GuiSurface::reading_with(backend.clone(), reader));
    (surface, evidence_over(&backend))
}

/// The evidence capturer over a backend that can capture the screen now.
#[cfg(target_os = "linux")]
fn evidence_over<B: desktop::Backend>(backend: &Arc<B>) -> Option<Arc<dyn EvidenceCapture>> {
    let ready = desktop::Backend::availability(&**backend) == crate::Availability::Ready
        && backend.has(desktop::Capability::Capture);
    ready.then(|| Arc::new(surface::Evidence::new(backend.clone())) as Arc<dyn EvidenceCapture>)
}

/// The evidence capturer for this platform, if this build has one and the screen can be
/// captured now (the tool then lists the `evidence` complication and `return.image`).
pub fn evidence() -> Option<Arc<dyn EvidenceCapture>> {
    #[cfg(target_os = "linux")]
    {
        match &chosen().backend {
            PlatformBackend::X11(backend) => evidence_over(backend),
            PlatformBackend::Wayland(backend) => evidence_over(backend),
            PlatformBackend::Gnome(backend) => evidence_over(backend),
            PlatformBackend::Portal(backend) => evidence_over(backend),
        }
    }
    #[cfg(target_os = "macos")]
    {
        // Without Screen Recording permission a capture shows only the desktop wallpaper and
        // the menu bar: offering evidence then would receipt pictures that prove nothing.
        let PlatformBackend::MacOs(backend) = &chosen().backend;
        backend
            .can_capture()
            .then(|| Arc::new(surface::Evidence::new(backend.clone())) as Arc<dyn EvidenceCapture>)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// A full-screen PNG exactly as `gui screenshot` makes one at full resolution (grab, convert,
/// encode with fast compression, sha256), for benchmarks. Returns (png bytes, width, height,
/// sha256 hex).
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub fn capture_screen_png() -> Result<(Vec<u8>, u32, u32, String), String> {
    match &chosen().backend {
        #[cfg(target_os = "linux")]
        PlatformBackend::X11(backend) => surface::capture_screen_png(backend.as_ref()),
        #[cfg(target_os = "linux")]
        PlatformBackend::Wayland(backend) => surface::capture_screen_png(backend.as_ref()),
        #[cfg(target_os = "linux")]
        PlatformBackend::Gnome(backend) => surface::capture_screen_png(backend.as_ref()),
        #[cfg(target_os = "linux")]
        PlatformBackend::Portal(backend) => surface::capture_screen_png(backend.as_ref()),
        #[cfg(target_os = "macos")]
        PlatformBackend::MacOs(backend) => surface::capture_screen_png(backend.as_ref()),
    }
}
