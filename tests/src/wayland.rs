//! A private headless sway (wlroots) for the Wayland suites, started once per suite (see
//! [`crate::suite`]) and torn down with the test process. sway refuses to run as root, so it
//! runs as a user made for the suite (`useradd -m` when missing) with its own
//! `XDG_RUNTIME_DIR`; root (the tests, the daemon and the apps) reaches it by the socket's
//! absolute path. Apps get a private session bus.
//! Independent checkers: `grim` (screencopy), `swaymsg` (sway's IPC), and what apps report.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::desktop::{App, Processes, TestDesktop, log_dir_for, log_file, private_bus, spawn_tied};
use crate::wait_for;

/// The user sway runs as.
pub const SWAY_USER: &str = "computer-sway";

/// The running compositor's coordinates.
#[derive(Debug)]
pub struct Sway {
    /// sway and the bus; they end when an own compositor drops, and die with the test process
    /// (PR_SET_PDEATHSIG).
    _processes: Processes,
    /// sway's `XDG_RUNTIME_DIR` (owned by [`SWAY_USER`], mode 0700).
    pub runtime_dir: PathBuf,
    /// The Wayland socket's absolute path.
    pub socket: PathBuf,
    /// sway's IPC socket (`SWAYSOCK`).
    pub swaysock: PathBuf,
    /// The private session bus for apps.
    pub dbus_address: String,
    pub log_dir: PathBuf,
}

impl Sway {
    /// A compositor of the caller's own, for a test that changes what others rely on (sway
    /// 1.7 cannot take a headless output away again once made); it stops when dropped.
    pub fn own(name: &str) -> Sway {
        Sway::start(name)
    }

    /// `swaymsg ARGS` (sway's IPC, an independent view of windows and focus); its stdout.
    pub fn swaymsg(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .command("swaymsg")
            .args(["-s", self.swaysock.to_str().unwrap()])
            .args(args)
            .output()
            .map_err(|e| format!("swaymsg: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "swaymsg {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Every view (window) in sway's tree, as sway's own JSON nodes.
    pub fn views(&self) -> Vec<Value> {
        let tree: Value =
            serde_json::from_str(&self.swaymsg(&["-t", "get_tree"]).expect("get_tree"))
                .expect("sway's tree is JSON");
        let mut views = Vec::new();
        collect_views(&tree, &mut views);
        views
    }

    /// sway's view of the window whose process is `pid`, once it is mapped.
    pub fn wait_view(&self, pid: u32) -> Value {
        wait_for(
            &format!("a sway window of pid {pid}"),
            Duration::from_secs(30),
            || {
                self.views()
                    .into_iter()
                    .find(|v| v["pid"].as_u64() == Some(u64::from(pid)))
            },
        )
    }

    /// A screenshot by `grim` (screencopy through its own client), as a PNG file's bytes.
    pub fn grim(&self, path: &Path) -> Vec<u8> {
        let status = self.command("grim").arg(path).status().expect("grim runs");
        assert!(status.success(), "grim failed");
        std::fs::read(path).expect("grim's png")
    }
}

impl TestDesktop for Sway {
    fn start(name: &str) -> Sway {
        let log_dir = log_dir_for("sway", name);
        let log = |name: &str| log_file(&log_dir, name);
        let (uid, gid) = sway_user();
        let runtime_dir = log_dir.join("runtime");
        std::fs::create_dir_all(&runtime_dir).unwrap();
        std::os::unix::fs::chown(&runtime_dir, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&runtime_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The log directory is the runtime directory's parent: the user must pass through it.
        std::fs::set_permissions(&log_dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        let config = log_dir.join("sway.config");
        // No borders or title bars: a window's content starts at its tile's corner, so points
        // in it are easy to tell.
        std::fs::write(
            &config,
            "output HEADLESS-1 resolution 1920x1080 position 0 0\n\
             default_border none\ndefault_floating_border none\nfont pango:monospace 1\n\
             titlebar_border_thickness 0\ntitlebar_padding 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

        let mut sway = Command::new("sway");
        sway.args(["-c", config.to_str().unwrap()])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", format!("/home/{SWAY_USER}"))
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_RENDERER", "pixman")
            .current_dir("/")
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::null())
            .stdout(log("sway.out.log"))
            .stderr(log("sway.log"));
        // spawn_tied sets the parent-death signal after the uid change (std runs pre_exec
        // hooks after setuid), so it survives it.
        let sway = spawn_tied(sway);
        let socket = runtime_dir.join("wayland-1");
        let swaysock = wait_for("sway's sockets", Duration::from_secs(30), || {
            let ipc = std::fs::read_dir(&runtime_dir)
                .ok()?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("sway-ipc."))
                })?;
            socket.exists().then_some(ipc)
        });

        let (dbus, dbus_address) = private_bus(None, &[], log("dbus.log"));

        let compositor = Sway {
            _processes: Processes(vec![sway, dbus]),
            runtime_dir,
            socket,
            swaysock,
            dbus_address,
            log_dir,
        };
        wait_for("sway to answer on its IPC", Duration::from_secs(30), || {
            compositor.swaymsg(&["-t", "get_version"]).ok()
        });
        compositor
    }

    /// The Wayland socket (by its absolute path), sway's runtime directory and IPC, the private
    /// bus.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WAYLAND_DISPLAY", self.socket.display().to_string()),
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
            ("XDG_SESSION_TYPE", "wayland".into()),
            ("SWAYSOCK", self.swaysock.display().to_string()),
            ("DBUS_SESSION_BUS_ADDRESS", self.dbus_address.clone()),
            ("GDK_BACKEND", "wayland".into()),
        ]
    }

    /// The test's X display.
    fn foreign_env(&self) -> &'static [&'static str] {
        &["DISPLAY"]
    }

    fn log_dir(&self) -> &Path {
        &self.log_dir
    }
}

/// `foot` running `cat` in raw mode into a file: every byte the keys produce lands there.
pub struct TypingTarget {
    _app: App,
    pub pid: u32,
    pub file: PathBuf,
}

impl TypingTarget {
    /// The target on the calling suite's compositor.
    #[track_caller]
    pub fn launch(app_id: &str) -> TypingTarget {
        let sway = Sway::shared();
        let file = sway.log_dir.join(format!("{app_id}.typed"));
        let _ = std::fs::remove_file(&file);
        let script = format!("stty raw -echo; exec cat > '{}'", file.display());
        let app = sway.launch(
            "foot",
            &["--app-id", app_id, "--title", app_id, "sh", "-c", &script],
        );
        let pid = app.pid();
        sway.wait_view(pid);
        // The shell has set the terminal raw once the file exists (cat opened it).
        wait_for(
            "foot's cat to open its file",
            Duration::from_secs(20),
            || file.exists().then_some(()),
        );
        TypingTarget {
            _app: app,
            pid,
            file,
        }
    }

    pub fn typed(&self) -> Vec<u8> {
        std::fs::read(&self.file).unwrap_or_default()
    }

    pub fn wait_typed(&self, want: &[u8]) {
        let got = crate::try_wait_for(Duration::from_secs(10), || {
            (self.typed() == want).then_some(())
        });
        assert!(
            got.is_some(),
            "foot received {:?}, expected {:?}",
            String::from_utf8_lossy(&self.typed()),
            String::from_utf8_lossy(want)
        );
    }
}

fn collect_views(node: &Value, views: &mut Vec<Value>) {
    if node.get("pid").and_then(Value::as_u64).is_some() {
        views.push(node.clone());
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            collect_views(child, views);
        }
    }
}

/// The uid and gid of [`SWAY_USER`], made on first use.
fn sway_user() -> (u32, u32) {
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, SWAY_USER])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
    };
    if id("-u").is_none() {
        let status = Command::new("useradd")
            .args(["-m", SWAY_USER])
            .status()
            .expect("useradd runs (the Wayland suites run as root)");
        // Another test binary may have made it meanwhile.
        assert!(
            status.success() || id("-u").is_some(),
            "useradd {SWAY_USER} failed"
        );
    }
    (
        id("-u").expect("the sway user's uid"),
        id("-g").expect("the sway user's gid"),
    )
}
