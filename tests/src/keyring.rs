//! A real Secret Service for the keychain suites: gnome-keyring-daemon (secrets component only),
//! unlocked with a known password, on a private D-Bus session bus whose config starts nothing on
//! demand, with its keyring files in a temporary home. Every process dies with the test process
//! (spawned through [`crate::desktop::spawn_tied`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::desktop::{Processes, log_file, private_bus, spawn_tied};
use crate::wait_for;

/// The password that unlocks every fixture keyring.
pub const KEYRING_PASSWORD: &str = "computer-test-keyring";

/// A private session bus, with or without a Secret Service on it.
pub struct Keyring {
    /// The bus and, when there is one, gnome-keyring-daemon.
    processes: Processes,
    /// `DBUS_SESSION_BUS_ADDRESS` of the private bus.
    pub dbus_address: String,
    /// The home whose `.local/share/keyrings` holds the keyring files.
    pub home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Keyring {
    /// The unlocked keyring shared by the calling suite's tests (see [`crate::suite`]),
    /// started on first use.
    #[track_caller]
    pub fn shared() -> &'static Keyring {
        crate::suite::per_suite(crate::suite::calling_suite(), Keyring::start)
    }

    /// A keyring of its own (for a test that locks it), unlocked.
    pub fn start() -> Keyring {
        let mut keyring = Keyring::bus_only();
        keyring.start_secret_service();
        keyring
    }

    /// A keyring of its own, unlocked, on an existing session bus: the shared desktop's, for
    /// suites whose apps and accessibility tree are on that bus too.
    pub fn on_bus(dbus_address: &str) -> Keyring {
        let (dir, home, _run) = fresh_dirs();
        let mut keyring = Keyring {
            processes: Processes::default(),
            dbus_address: dbus_address.to_string(),
            home,
            _dir: dir,
        };
        keyring.start_secret_service();
        keyring
    }

    /// gnome-keyring-daemon (secrets only) on this bus and home, its login keyring unlocked.
    fn start_secret_service(&mut self) {
        let mut daemon = Command::new("gnome-keyring-daemon");
        daemon
            .args(["--foreground", "--unlock", "--components=secrets"])
            .envs(self.env())
            .env_remove("DISPLAY")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log_file(&self.home, "gnome-keyring.log"));
        let mut daemon = spawn_tied(daemon);
        // The password on stdin, then EOF: it unlocks (creating) the login keyring.
        let mut stdin = daemon.stdin.take().expect("gnome-keyring stdin");
        stdin
            .write_all(KEYRING_PASSWORD.as_bytes())
            .expect("write the keyring password");
        drop(stdin);
        self.processes.0.push(daemon);
        let address = self.dbus_address.clone();
        // First only ask the bus whether the name is owned: a call to the name before
        // gnome-keyring owns it would have a bus that can start services (the desktop's) start
        // another keyring, in the real home, locked, waiting for a prompt nobody answers.
        wait_for(
            "gnome-keyring to own org.freedesktop.secrets",
            Duration::from_secs(30),
            || {
                bus_answers(
                    &address,
                    &[
                        "--dest=org.freedesktop.DBus",
                        "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.NameHasOwner",
                        "string:org.freedesktop.secrets",
                    ],
                    "boolean true",
                )
            },
        );
        wait_for(
            "gnome-keyring's login collection to be unlocked",
            Duration::from_secs(30),
            || {
                bus_answers(
                    &address,
                    &[
                        "--dest=org.freedesktop.secrets",
                        "/org/freedesktop/secrets/aliases/default",
                        "org.freedesktop.DBus.Properties.Get",
                        "string:org.freedesktop.Secret.Collection",
                        "string:Locked",
                    ],
                    "boolean false",
                )
            },
        );
    }

    /// A private session bus on which nothing provides a Secret Service (and none can be
    /// started on demand).
    pub fn bus_only() -> Keyring {
        let (dir, home, run) = fresh_dirs();
        let config = dir.path().join("bus.conf");
        // No <servicedir>: a call to a name nobody owns fails instead of starting the system's
        // gnome-keyring (which would use the real home).
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={}</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                run.display()
            ),
        )
        .expect("bus config");
        let (bus, dbus_address) = private_bus(Some(&config), &[], log_file(&home, "dbus.log"));
        Keyring {
            processes: Processes(vec![bus]),
            dbus_address,
            home,
            _dir: dir,
        }
    }

    /// The environment that puts a process (the daemon, `secret-tool`) on this bus and home.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DBUS_SESSION_BUS_ADDRESS", self.dbus_address.clone()),
            ("HOME", self.home.display().to_string()),
            (
                "XDG_DATA_HOME",
                self.home.join(".local/share").display().to_string(),
            ),
            (
                "XDG_RUNTIME_DIR",
                self.home
                    .parent()
                    .unwrap()
                    .join("run")
                    .display()
                    .to_string(),
            ),
        ]
    }

    /// `secret-tool ARGS...` on this bus, with `stdin` written to it; (success, stdout).
    pub fn secret_tool(&self, args: &[&str], stdin: &str) -> (bool, String) {
        let mut child = Command::new("secret-tool")
            .args(args)
            .envs(self.env())
            .env_remove("DISPLAY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run secret-tool (apt install libsecret-tools)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .expect("secret-tool stdin");
        let out = child.wait_with_output().expect("secret-tool");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Locks the login collection through `org.freedesktop.Secret.Service.Lock`.
    pub fn lock(&self) {
        let out = Command::new("dbus-send")
            .env("DBUS_SESSION_BUS_ADDRESS", &self.dbus_address)
            .args([
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.Lock",
                "array:objpath:/org/freedesktop/secrets/collection/login",
            ])
            .output()
            .expect("dbus-send");
        assert!(
            out.status.success(),
            "lock: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `Some(())` when `dbus-send --session --print-reply ARGS` on the bus at `address` prints
/// `expected`.
fn bus_answers(address: &str, args: &[&str], expected: &str) -> Option<()> {
    let out = Command::new("dbus-send")
        .env("DBUS_SESSION_BUS_ADDRESS", address)
        .args(["--session", "--print-reply"])
        .args(args)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .contains(expected)
        .then_some(())
}

/// A temporary directory with a keyring home and a runtime directory in it.
fn fresh_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let run = dir.path().join("run");
    std::fs::create_dir_all(home.join(".local/share")).expect("keyring home");
    std::fs::create_dir_all(&run).expect("runtime dir");
    (dir, home, run)
}
