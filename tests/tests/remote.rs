//! An agent on another machine reaches the daemon the standard way: OpenSSH forwarding a local
//! socket to the daemon's (`ssh -L LOCAL:REMOTE_SOCKET`), against a real `sshd` on 127.0.0.1.
//! The daemon listens on no network port; a forwarded connection meets the same peer-uid check
//! and the same agent tokens as a local one, because on the daemon's machine it is a local
//! connection made by the sshd process of the user who logged in.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use computer_tests::desktop::spawn_tied;
use computer_tests::{Daemon, RawConnection, shell_run, wait_for};
use serde_json::json;

/// A process killed (and reaped) when the test lets go of it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real OpenSSH server on 127.0.0.1 with its own host key, config and a client key that may
/// log in as root and as `nobody`.
struct Sshd {
    dir: PathBuf,
    port: u16,
    _process: Running,
}

impl Sshd {
    fn start() -> Sshd {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.exists(),
            "/usr/sbin/sshd is missing: packaging/install-deps.sh installs openssh-server"
        );
        // World-readable, as sshd reads a user's authorized keys with that user's rights.
        let dir = std::env::temp_dir().join(format!("computer-sshd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for key in ["host_key", "client_key"] {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .status()
                .expect("ssh-keygen");
            assert!(status.success(), "ssh-keygen {key}");
        }
        let public = std::fs::read_to_string(dir.join("client_key.pub")).unwrap();
        for user in ["root", "nobody"] {
            let path = dir.join(format!("authorized_{user}"));
            std::fs::write(&path, &public).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // Privilege separation needs this directory; a system without a running sshd lacks it.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\n\
                 PidFile {dir}/sshd.pid\nAuthorizedKeysFile {dir}/authorized_%u\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nAllowStreamLocalForwarding yes\n\
                 LogLevel VERBOSE\n",
                dir = dir.display()
            ),
        )
        .unwrap();
        let mut command = Command::new(sshd);
        command
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap());
        let process = Running(spawn_tied(command));
        wait_for("sshd to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Sshd {
            dir,
            port,
            _process: process,
        }
    }

    /// `ssh -N -L local:remote user@127.0.0.1`, as an agent's machine would run it; returns
    /// once the local end listens.
    fn forward(&self, user: &str, local: &Path, remote: &Path) -> Running {
        let mut command = Command::new("ssh");
        command
            .args(["-N", "-F", "/dev/null", "-o", "BatchMode=yes"])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args(["-o", "IdentitiesOnly=yes", "-o", "ExitOnForwardFailure=yes"])
            .args(["-o", "StreamLocalBindUnlink=yes", "-i"])
            .arg(self.dir.join("client_key"))
            .args(["-p", &self.port.to_string(), "-L"])
            .arg(format!("{}:{}", local.display(), remote.display()))
            .arg(format!("{user}@127.0.0.1"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join(format!("ssh-{user}.log"))).unwrap());
        let mut ssh = Running(spawn_tied(command));
        wait_for("the forwarded socket", Duration::from_secs(20), || {
            if let Ok(Some(status)) = ssh.0.try_wait() {
                panic!(
                    "ssh ended ({status}): {}\nsshd: {}",
                    self.log(&format!("ssh-{user}.log")),
                    self.log("sshd.log")
                );
            }
            local.exists().then_some(())
        });
        ssh
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn an_agent_reaches_the_daemon_through_ssh_forwarding_with_the_same_checks() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("this check logs in as root and as nobody (CI runs it as root)");
        return;
    }
    let daemon = Daemon::start();
    let sshd = Sshd::start();
    let token = {
        let out = daemon.cli(&["agents", "add", "remote"]);
        assert!(out.status.success(), "{}", out.stderr);
        out.stdout.trim().to_string()
    };
    let here = tempfile::tempdir().unwrap();

    // The ordinary use: root on the agent's machine forwards to root's daemon, authenticates
    // with its agent token and runs a command. The call is the token's agent's, receipted.
    let local = here.path().join("computer.sock");
    let _forward = sshd.forward("root", &local, &daemon.socket);
    let mut raw = RawConnection::connect(&local);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": "auth", "method": "computer/authenticate",
                     "params": {"token": token}}),
    );
    let answer = raw.recv().expect("an answer to the authentication");
    assert_eq!(answer["result"]["agent"], "remote", "{answer}");
    raw.initialize("2025-11-25");
    let (reply, _) = raw.call_tool(&shell_run(json!({"argv": ["echo", "over ssh"]}), json!({})));
    let result = &reply["result"]["structuredContent"];
    assert_eq!(result["stdout"], "over ssh\n", "{reply}");
    let intent = daemon.receipt_row(&result["receipt"], "intent");
    assert_eq!(intent["body"]["caller"]["agent"], "remote", "{intent}");

    // A wrong token over the same forward is refused as it would be locally.
    let mut wrong = RawConnection::connect(&local);
    wrong.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "computer/authenticate",
                       "params": {"token": "ct_wrong"}}),
    );
    let refusal = wrong.recv().expect("an error before the close");
    assert_eq!(refusal["error"]["code"], -32001, "{refusal}");
    assert!(
        wrong.recv().is_none(),
        "the connection stays open after a bad token"
    );

    // Another user on the daemon's machine: with every file-system door opened, only the
    // peer-uid check stands between that user's sshd and the daemon, and it holds.
    for dir in [daemon.root.as_path(), daemon.socket.parent().unwrap()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = here.path().join("nobody.sock");
    let _nobody = sshd.forward("nobody", &as_nobody, &daemon.socket);
    let mut intruder = std::os::unix::net::UnixStream::connect(&as_nobody).unwrap();
    let _ = intruder.write_all(
        b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"intruder\",\"version\":\"0\"}}}\n",
    );
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut intruder, &mut answer);
    assert!(
        answer.is_empty(),
        "nobody's forward got an answer: {}",
        String::from_utf8_lossy(&answer)
    );
    wait_for("the refusal in the log", Duration::from_secs(10), || {
        daemon
            .log_text()
            .contains("refused a connection from another user")
            .then_some(())
    });
    assert!(
        sshd.log("sshd.log").contains("nobody"),
        "nobody's login is not in sshd's log: the refusal may not have come through it"
    );

    // And root's forward still serves.
    let mut again = RawConnection::connect(&local);
    assert!(again.initialize("2025-11-25")["result"].is_object());
}
