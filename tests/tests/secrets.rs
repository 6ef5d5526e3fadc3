//! Secrets by reference with real components: gnome-keyring unlocked on the headless desktop's
//! private session bus, items stored with `secret-tool`, and the real daemon resolving them only
//! when a call runs. What must hold: a value printed in every common encoding, or split across
//! writes, is masked in the reply, the artifact, the receipts database and the daemon's log; a
//! run's command line never holds it; approvers are told which secret goes where; and what an
//! agent can do against it (transforms, env overrides) fails or is shown for what it is.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use computer_tests::desktop::{App, Desktop, TestApp, TestDesktop};
use computer_tests::keyring::Keyring;
use computer_tests::{Daemon, RawConnection, shell_run, wait_for};
use serde_json::{Value, json};

/// The desktop's keyboard and focus are shared by the gui and ax tests of this suite.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A value with characters every escaping changes: `/` and `+` (URL), `&<>"'` (XML), `"` and a
/// character outside ASCII (JSON).
const TOKEN: &str = "tok_9Zq/+x&<y>\"é'~rest-2026";
/// A multi-line value (a key file).
const KEY: &str = "-----BEGIN TEST KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END TEST KEY-----";
/// Plain ASCII, for the transforms a hostile run applies.
const PLAIN: &str = "plain-Secret-4242-value";
const SERVICE: &str = "secrets-suite";

/// gnome-keyring-daemon, unlocked, serving the Secret Service on the shared desktop's bus (where
/// the apps the gui and ax tests type secrets into are), with its keyring in a directory of its
/// own.
fn keyring() -> &'static Keyring {
    static KEYRING: OnceLock<Keyring> = OnceLock::new();
    KEYRING.get_or_init(|| Keyring::on_bus(&Desktop::shared().dbus_address))
}

/// Stores an item the way a person does with `secret-tool`; true when it was stored.
fn store_item(service: &str, account: &str, value: &str) -> bool {
    // Bounded: a keyring that prompts would keep it waiting for ever.
    let mut child = Desktop::shared()
        .command("timeout")
        .args([
            "20",
            "secret-tool",
            "store",
            "--label",
            account,
            "service",
            service,
        ])
        .args(["username", account])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    child.wait().unwrap().success()
}

/// `keychain://secrets-suite/<account>` holding `value`.
fn stored(account: &str, value: &str) -> String {
    keyring();
    assert!(store_item(SERVICE, account, value), "secret-tool store");
    format!("keychain://{SERVICE}/{account}")
}

/// Sends `request` from a client of its own, which waits for the answer, and returns that
/// client's task with the approval the call is waiting for.
fn call_awaiting_approval(
    daemon: &Daemon,
    request: Value,
) -> (tokio::task::JoinHandle<Value>, Value) {
    let waiting = daemon.call_task(request);
    let pending = tokio::task::block_in_place(|| {
        wait_for("a pending approval", Duration::from_secs(20), || {
            daemon.pending_approvals().into_iter().next()
        })
    });
    (waiting, pending)
}

/// Allows calls that use this suite's secrets (they are asked by default).
const ALLOW_SUITE_SECRETS: &str =
    "[[rules]]\nsecrets = [\"keychain://secrets-suite/*\"]\ndecision = \"allow\"\n";

/// A daemon on the desktop (its bus has the keyring) that logs at debug level, where the MCP
/// layer writes every reply into the log.
fn daemon(toml: &str) -> Daemon {
    Desktop::shared().start_daemon_with(toml, &[("RUST_LOG", "debug".into())])
}

/// Every form of `value` the masker promises: raw, hex (both cases), base64 (both alphabets, the
/// part of each alignment that depends on the value alone), URL-encoded, JSON-escaped (as serde
/// and as Python write it), HTML-escaped; and each line of a multi-line value.
fn forms(value: &str) -> Vec<(String, String)> {
    let bytes = value.as_bytes();
    let mut forms = vec![
        ("raw".to_string(), value.to_string()),
        ("hex".into(), hex::encode(bytes)),
        ("HEX".into(), hex::encode_upper(bytes)),
    ];
    for (name, engine) in [
        ("base64", &base64::engine::general_purpose::STANDARD),
        ("base64url", &base64::engine::general_purpose::URL_SAFE),
    ] {
        for offset in 0..3usize {
            let shifted = [vec![0u8; offset], bytes.to_vec()].concat();
            let encoded = engine.encode(&shifted);
            let core = &encoded[(offset * 8).div_ceil(6)..(shifted.len() * 8) / 6];
            forms.push((format!("{name} at offset {offset}"), core.to_string()));
        }
    }
    let url: String = bytes
        .iter()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (*b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    forms.push(("url".into(), url));
    let json = serde_json::to_string(value).unwrap();
    forms.push(("json".into(), json[1..json.len() - 1].to_string()));
    forms.push((
        "json ascii".into(),
        json[1..json.len() - 1].replace('é', "\\u00e9"),
    ));
    let html = value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;");
    forms.push(("html".into(), html));
    if value.contains('\n') {
        for (i, line) in value.lines().enumerate() {
            forms.push((format!("line {i}"), line.to_string()));
        }
    }
    forms.retain(|(_, form)| form.len() >= 4);
    forms
}

/// Asserts that no form of any of `values` is in `haystack`.
fn assert_no_form(haystack: &[u8], values: &[&str], what: &str) {
    for value in values {
        for (name, form) in forms(value) {
            assert!(
                !haystack.windows(form.len()).any(|w| w == form.as_bytes()),
                "{what} holds the {name} form of a secret ({form:?}):\n{}",
                String::from_utf8_lossy(haystack)
            );
        }
    }
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Every file under `dir`, read whole.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        // A link is not the state's own bytes: run-tools/computer is the daemon's binary.
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            continue;
        }
        if path.is_dir() {
            found.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

/// Asserts that the daemon's state (receipts database, its WAL, artifacts) holds no form of
/// `values` and no reference in the clear.
fn assert_state_clean(daemon: &Daemon, values: &[&str]) {
    for (path, bytes) in files_under(&daemon.state) {
        let what = path.display().to_string();
        assert_no_form(&bytes, values, &what);
        assert!(
            !bytes
                .windows(SERVICE.len() + 11)
                .any(|w| w == format!("keychain://{SERVICE}").as_bytes()),
            "{what} holds a secret reference in the clear"
        );
    }
}

/// The script that prints `$TOKEN` and `$KEY` in every form, some of it one byte per write, then
/// enough filler that the output spills to an artifact.
const PRINT_EVERY_FORM: &str = r#"
printf 'raw:%s\n' "$TOKEN"
for p in '' a ab; do
  printf '%s%s' "$p" "$TOKEN" | base64 -w0; echo
  printf '%s%s' "$p" "$TOKEN" | base64 -w0 | tr -d '='; echo
  printf '%s%s' "$p" "$TOKEN" | base64 -w0 | tr '+/' '-_'; echo
done
python3 -c '
import html, json, os, urllib.parse
t = os.environ["TOKEN"]
print(urllib.parse.quote(t, safe=""))
print(urllib.parse.quote_plus(t))
print(json.dumps(t))
print(json.dumps(t, ensure_ascii=False))
print(html.escape(t))
print(t.encode().hex())
print(t.encode().hex().upper())
'
printf '%s\n' "$KEY"
printf 'second line alone: %s\n' "$(printf '%s' "$KEY" | sed -n 2p)"
python3 -c '
import os, sys
for c in os.environ["TOKEN"]:
    sys.stdout.write(c)
    sys.stdout.flush()
sys.stdout.write("\n")
'
for c in t o k _ 9 Z q; do printf '%s' "$c"; done; printf '%s\n' "${TOKEN#tok_9Zq}"
echo end-of-forms
head -c 200000 /dev/zero | tr '\0' x
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_printed_in_every_form_is_masked_in_reply_artifact_receipts_and_log() {
    let token = stored("token", TOKEN);
    let key = stored("key", KEY);
    let daemon = daemon(&format!(
        "{ALLOW_SUITE_SECRETS}[shell]\ncapture_memory_bytes = 16384\n"
    ));
    let out = daemon
        .call_raw_once(shell_run(
            json!({"script": PRINT_EVERY_FORM}),
            json!({"secrets": {"TOKEN": token, "KEY": key}, "return": {"max_bytes": 8000}}),
        ))
        .await;
    assert_eq!(out["ok"], true, "{out}");
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.contains("end-of-forms"), "{stdout}");
    // raw, 9 base64 lines, 7 Python lines, and two split across writes.
    assert!(count(stdout, "[masked TOKEN]") >= 19, "{stdout}");
    assert!(count(stdout, "[masked KEY]") >= 2, "{stdout}");
    assert_no_form(stdout.as_bytes(), &[TOKEN, KEY], "the reply");

    // The artifact holds the whole output, masked as it was written.
    let result = daemon.receipt_row(&out["receipt"], "result");
    let artifact = result["body"]["outputs"][0]["artifact"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("stdout spilled to an artifact: {result}"));
    let spilled = std::fs::read(artifact).unwrap();
    assert!(spilled.len() > 200_000);
    assert_no_form(&spilled, &[TOKEN, KEY], "the artifact");
    assert!(count(&String::from_utf8_lossy(&spilled), "[masked TOKEN]") >= 19);

    // The receipts name the secrets and where they went, by a keyed digest of the reference.
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    let secrets = intent["body"]["facts"]["secrets"].as_array().unwrap();
    let token_fact = secrets.iter().find(|s| s["name"] == "TOKEN").unwrap();
    assert_eq!(token_fact["to"], json!({"kind": "env", "var": "TOKEN"}));
    assert!(
        token_fact["reference"]
            .as_str()
            .unwrap()
            .starts_with("keychain-ref:hmac-sha256:"),
        "{token_fact}"
    );
    assert!(
        intent["body"]["args_sha256"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:")
    );
    assert_state_clean(&daemon, &[TOKEN, KEY]);
    daemon.assert_chain_holds();

    // The log carries the reply (the MCP layer logs it at debug level), masked.
    let log = daemon.log_text();
    assert!(
        log.contains("[masked TOKEN]"),
        "the reply reached the log:\n{log}"
    );
    assert_no_form(log.as_bytes(), &[TOKEN, KEY], "the daemon's log");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_value_reaches_the_environment_never_the_command_line_and_transforms_are_not_masked() {
    let plain = stored("plain", PLAIN);
    let daemon = daemon(ALLOW_SUITE_SECRETS);
    // rot13 so that the masker cannot hide what the command lines would hold: the checks read
    // the very bytes of /proc/PID/cmdline of the shell and of a child.
    let script = r#"
printf 'shell:'; tr 'A-Za-z\n' 'N-ZA-Mn-za-m ' < /proc/$$/cmdline; echo
printf 'child:'; python3 -c 'import sys; sys.stdout.write(open("/proc/self/cmdline", "rb").read()[::-1].decode())'; echo
printf 'env:'; python3 -c 'import codecs, os; print(codecs.encode(os.environ["P"], "rot13"))'
printf 'rev:'; printf '%s' "$P" | rev; echo
printf 'base32:'; printf '%s' "$P" | base32 -w0; echo
printf 'sed:'; printf '%s' "$P" | sed 's/./&-/g'; echo
"#;
    let out = daemon
        .call_raw_once(shell_run(
            json!({"script": script}),
            json!({"secrets": {"P": plain}}),
        ))
        .await;
    assert_eq!(out["ok"], true, "{out}");
    let stdout = out["stdout"].as_str().unwrap();
    let line = |prefix: &str| -> String {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line in {stdout}"))
            .to_string()
    };
    let rot13 = |s: &str| -> String {
        s.chars()
            .map(|c| match c {
                'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
                'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
                other => other,
            })
            .collect()
    };
    let reversed: String = PLAIN.chars().rev().collect();
    let shell = line("shell:");
    assert!(
        shell.starts_with("fu") && !shell.contains(&rot13(PLAIN)),
        "the shell's command line: {stdout}"
    );
    let child = line("child:");
    assert!(child.contains("nohtyp"), "{stdout}");
    assert!(
        !child.contains(&reversed),
        "a child's command line: {stdout}"
    );
    // The value is in the run's environment (what the call asked for) ...
    assert_eq!(line("env:"), rot13(PLAIN), "{stdout}");
    // ... and a run that transforms it gets it out: masking covers encodings, not ciphers.
    assert_eq!(line("rev:"), reversed, "rev is not masked: {stdout}");
    assert_eq!(line("base32:"), base32(PLAIN.as_bytes()), "{stdout}");
    let dashed: String = PLAIN.chars().map(|c| format!("{c}-")).collect();
    assert_eq!(line("sed:"), dashed, "{stdout}");
    assert_no_form(stdout.as_bytes(), &[PLAIN], "the reply");

    // An agent cannot overwrite the secret's variable through `env` (nor the reverse): one
    // name, one source, refused before anything runs.
    let out = daemon.call_raw_once(shell_run(
            json!({"argv": ["printenv", "P"]}),
            json!({"secrets": {"P": format!("keychain://{SERVICE}/plain")}, "env": {"P": "chosen-by-agent"}}),
        ),
    )
    .await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert_eq!(out["error"]["path"], "complications.env.P", "{out}");
    for (secrets, path) in [
        (
            json!({"COMPUTER_TOKEN": "keychain://a/b"}),
            "complications.secrets.COMPUTER_TOKEN",
        ),
        (json!({"X": "op://vault/item"}), "complications.secrets.X"),
        (json!({"1X": "keychain://a/b"}), "complications.secrets.1X"),
    ] {
        let out = daemon
            .call_raw_once(shell_run(
                json!({"argv": ["true"]}),
                json!({"secrets": secrets}),
            ))
            .await;
        assert_eq!(out["error"]["code"], "invalid_call", "{out}");
        assert_eq!(out["error"]["path"], path, "{out}");
    }
    // The ordinary call beside them still works.
    let out = daemon
        .call_raw_once(shell_run(
            json!({"argv": ["printenv", "P"]}),
            json!({"secrets": {"P": plain}}),
        ))
        .await;
    assert_eq!(out["stdout"], "[masked P]\n", "{out}");
}

/// RFC 4648 base32, as coreutils' `base32` prints it.
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    for chunk in bytes.chunks(5) {
        let mut block = [0u8; 5];
        block[..chunk.len()].copy_from_slice(chunk);
        let bits = block.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(ALPHABET[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_with_a_secret_is_asked_and_the_approver_is_told_which_secret_goes_where() {
    let reference = stored("approval", "approval-secret-value");
    // A rule that allows printenv does not hand it a secret it does not name.
    let daemon =
        daemon("[[rules]]\nsurface = \"shell\"\nargv0 = [\"printenv\"]\ndecision = \"allow\"\n");
    let (waiting, pending) = call_awaiting_approval(
        &daemon,
        shell_run(
            json!({"argv": ["printenv", "T"]}),
            json!({"secrets": {"T": reference}}),
        ),
    );
    let shown = format!("T ({reference}) → the environment variable T of the run");
    assert_eq!(pending["risk"], "secret", "{pending}");
    assert_eq!(pending["rule"], "defaults.secret", "{pending}");
    let stated = &pending["will_run"]["facts"]["secrets"];
    assert_eq!(
        stated,
        &json!([{"name": "T", "reference": reference,
            "to": {"kind": "env", "var": "T"}}]),
        "{pending}"
    );
    assert!(
        pending["action"]
            .as_str()
            .unwrap()
            .contains(&format!("secret {shown}")),
        "{pending}"
    );
    let listed = daemon.cli(&["approvals", "list"]);
    assert!(listed.stdout.contains(&reference), "{}", listed.stdout);
    let id = pending["id"].to_string();
    assert!(daemon.cli(&["approvals", "deny", &id]).status.success());
    let out = waiting.await.unwrap();
    assert_eq!(out["error"]["code"], "denied", "{out}");
    assert_state_clean(&daemon, &["approval-secret-value"]);

    // Without a secret, the rule allows the same program.
    let out = daemon
        .call_raw_once(shell_run(json!({"argv": ["printenv", "HOME"]}), json!({})))
        .await;
    assert_eq!(out["ok"], true, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detached_job_keeps_masking_after_its_start_call_returned() {
    let value = "job-Secret-77-value";
    let reference = stored("job", value);
    let daemon = daemon(ALLOW_SUITE_SECRETS);
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let ready = work.path().join("ready");
    // The value is printed before the start call returns and again long after, once the test
    // lets the job go on.
    let script = format!(
        "printf 'early:%s\\n' \"$T\"; : > '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; \
         printf 'late:%s\\n' \"$T\" | base64",
        ready.display(),
        go.display()
    );
    let started = daemon
        .call_raw_once(shell_run(
            json!({"script": script}),
            json!({"secrets": {"T": reference}, "detach": true}),
        ))
        .await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["job"].clone();
    // The job says when its first line is out (its output count lags: the start of what could
    // be a secret is held back until more output tells).
    tokio::task::block_in_place(|| {
        wait_for("the job's first line", Duration::from_secs(30), || {
            ready.exists().then_some(())
        })
    });
    std::fs::write(&go, "").unwrap();
    let result = daemon
        .call_raw_once(json!({"surface": "shell", "command": "job",
               "args": {"op": "result", "id": id, "wait_ms": 30000}}))
        .await;
    assert_eq!(result["status"], "done", "{result}");
    let stdout = result["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("early:[masked T]\n"), "{result}");
    let late = base64::engine::general_purpose::STANDARD.encode(format!("late:{value}\n"));
    assert!(
        !stdout.contains(&late) && count(stdout, "[masked T]") == 2,
        "the base64 printed after the start call returned is masked too: {result}"
    );
    assert_no_form(result.to_string().as_bytes(), &[value], "the job's result");
    assert_state_clean(&daemon, &[value]);
    assert_no_form(daemon.log_text().as_bytes(), &[value], "the daemon's log");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_reaches_the_tool_list_errors_or_progress_notifications() {
    let token = stored("errors", TOKEN);
    let daemon = daemon(&format!(
        "{ALLOW_SUITE_SECRETS}[approval]\ntimeout = \"1s\"\n"
    ));

    let client = daemon.client().await;
    let tools = client.list_tools().await.unwrap();
    client.close().await;
    assert_no_form(
        serde_json::to_string(&tools).unwrap().as_bytes(),
        &[TOKEN],
        "tools/list",
    );

    // shell: a failing run that prints the value on stderr.
    let out = daemon
        .call_raw_once(shell_run(
            json!({"script": "printf '%s' \"$T\" >&2; exit 3"}),
            json!({"secrets": {"T": token}}),
        ))
        .await;
    assert_eq!(
        (out["ok"].clone(), out["exit_code"].clone()),
        (json!(false), json!(3))
    );
    assert_eq!(out["stderr"], "[masked T]", "{out}");
    // A reference to nothing: the error names it and says what to do.
    let out = daemon
        .call_raw_once(shell_run(
            json!({"argv": ["true"]}),
            json!({"secrets": {"T": format!("keychain://{SERVICE}/missing")}}),
        ))
        .await;
    assert_eq!(out["error"]["code"], "action_failed", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("secret T") && message.contains("missing"),
        "{message}"
    );

    // gui: a value holding a line break is not typed into anything (it would press Return).
    let key = stored("errors-key", KEY);
    let out = daemon
        .call_raw_once(
            json!({"surface": "gui", "command": "type", "args": {"text": {"secret": key}}}),
        )
        .await;
    assert_eq!(out["error"]["code"], "action_failed", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line break"),
        "{out}"
    );
    assert_no_form(out.to_string().as_bytes(), &[KEY], "a gui error");
    // ax: an element that is not there.
    let out = daemon
        .call_raw_once(
            json!({"surface": "ax", "command": "act", "args": {"app": "no-such-app-xyz",
            "selector": "textInput", "action": "set_value", "value": {"secret": token}}}),
        )
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_no_form(out.to_string().as_bytes(), &[TOKEN], "an ax error");
    // Malformed secrets in place of text say what is valid.
    let out = daemon
        .call_raw_once(
            json!({"surface": "gui", "command": "type", "args": {"text": {"secret": 7}}}),
        )
        .await;
    assert_eq!(out["error"]["path"], "args.text", "{out}");

    // Progress while a secret call waits for a person (it is asked: no rule names this one).
    let other = stored("progress", "progress-secret-value");
    let mut raw = RawConnection::connect(&daemon.socket);
    raw.initialize("2025-11-25");
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "p"}, "name": "COMPUTER",
        "arguments": shell_run(json!({"argv": ["printenv", "S"]}), json!({"secrets": {"S": other.replace(SERVICE, "other-suite")}}))}}));
    let mut heard = Vec::new();
    let reply = loop {
        let message = raw.recv().expect("the connection stays open");
        if message["id"] == 1 {
            break message;
        }
        heard.push(message);
    };
    assert!(!heard.is_empty(), "progress was heard while waiting");
    assert_eq!(
        reply["result"]["structuredContent"]["error"]["code"], "denied",
        "{reply}"
    );
    assert_no_form(
        serde_json::to_string(&heard).unwrap().as_bytes(),
        &[TOKEN, KEY, "progress-secret-value"],
        "progress notifications",
    );
    assert_state_clean(&daemon, &[TOKEN, KEY, "progress-secret-value"]);
    assert_no_form(
        daemon.log_text().as_bytes(),
        &[TOKEN, KEY],
        "the daemon's log",
    );
}

/// One `shell` session command through the socket, as the agent.
async fn session_call(daemon: &Daemon, command: &str, args: Value) -> Value {
    daemon
        .call_raw_once(json!({"surface": "shell", "command": command, "args": args,
               "complications": {"timeout_ms": 20000}}))
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_answers_a_password_prompt_from_a_secret_and_masks_it_everywhere() {
    let password = "sess-Secret-42 pw";
    let password_ref = stored("session-password", password);
    let api_key = "env-Secret-9x-key";
    let api_key_ref = stored("session-env", api_key);
    let daemon = daemon(ALLOW_SUITE_SECRETS);

    // `open` puts a secret into the program's environment, resolved when the session starts.
    let opened = daemon
        .call_raw_once(json!({"surface": "shell", "command": "open",
               "args": {"argv": ["bash", "--norc", "--noprofile"]},
               "complications": {"secrets": {"API_KEY": api_key_ref}}}))
        .await;
    assert_eq!(opened["ok"], true, "{opened}");
    let session = opened["session"].clone();
    let intent = daemon.receipt_row(&opened["receipt"], "intent");
    assert_eq!(intent["body"]["risk"], "secret", "{intent}");
    assert_eq!(
        intent["body"]["facts"]["secrets"][0]["to"],
        json!({"kind": "env", "var": "API_KEY"}),
        "{intent}"
    );

    // The second half of the value waits on a silent `read` (no echoed line break between the
    // halves), so the two halves reach two reads.
    let prompt = "read -rsp 'Password: ' pw; echo; echo \"got ${#pw} characters\"; \
                  echo \"pw=$pw key=$API_KEY\"; printf 'half=%s' \"${pw:0:5}\"; read -rs _; \
                  echo \"${pw:5} end\"\n";
    let sent = session_call(&daemon, "send", json!({"session": session, "text": prompt})).await;
    assert_eq!(sent["ok"], true, "{sent}");
    let read = session_call(
        &daemon,
        "read",
        json!({"session": session, "until": "Password: $"}),
    )
    .await;
    assert_eq!(read["met"], true, "{read}");

    // The secret typed into the prompt: the shell's line it lands on is opaque, so the Return
    // that ends it is put to the person, who is told which secret goes where.
    let (waiting, pending) = call_awaiting_approval(
        &daemon,
        json!({"surface": "shell", "command": "send",
            "args": {"session": session, "text": {"secret": password_ref}, "keys": ["Enter"]}}),
    );
    let shown = format!(
        "secret ({password_ref}) → typed into the shell of terminal session {session} (bash \
         --norc --noprofile)"
    );
    let stated = &pending["will_run"]["facts"]["secrets"][0];
    assert_eq!(stated["reference"], password_ref.as_str(), "{pending}");
    assert_eq!(stated["to"]["kind"], "session_input", "{pending}");
    assert!(
        pending["action"]
            .as_str()
            .unwrap()
            .contains(&format!("secret {shown}")),
        "{pending}"
    );
    assert_eq!(pending["rule"], "builtin:opaque-terminal-line", "{pending}");
    let id = pending["id"].to_string();
    assert!(daemon.cli(&["approvals", "allow", &id]).status.success());
    let typed = waiting.await.unwrap();
    assert_eq!(typed["ok"], true, "{typed}");
    assert_eq!(typed["secret"], "typed", "not even the length: {typed}");
    assert!(typed.get("sent_bytes").is_none(), "{typed}");

    let read = session_call(
        &daemon,
        "read",
        json!({"session": session, "until": "half="}),
    )
    .await;
    let output = read["output"].as_str().unwrap().to_string();
    assert!(
        output.contains(&format!("got {} characters", password.len())),
        "the program read the whole value: {read}"
    );
    assert!(
        output.contains("pw=[masked secret] key=[masked API_KEY]"),
        "{read}"
    );
    // The first five characters wait on the shell's `read`, alone at the end of a row: the
    // screen masks them (a row that ends in the start of a value), and the log holds them back,
    // since the rest of the value may follow.
    tokio::task::block_in_place(|| {
        wait_for(
            "the half value on the screen",
            Duration::from_secs(20),
            || {
                let screen =
                    daemon.call_json("shell", "screen", &json!({"session": session}).to_string());
                screen["screen"]
                    .as_str()?
                    .contains("half=[masked secret]")
                    .then_some(())
            },
        )
    });
    let held = session_call(&daemon, "read", json!({"session": session})).await;
    assert!(
        !held["output"]
            .as_str()
            .unwrap_or_default()
            .contains("sess-"),
        "the start of a secret is held back: {held}"
    );
    let rest = session_call(&daemon, "send", json!({"session": session, "text": "\n"})).await;
    assert_eq!(rest["ok"], true, "{rest}");
    let read = session_call(
        &daemon,
        "read",
        json!({"session": session, "until": " end"}),
    )
    .await;
    assert!(
        read["output"]
            .as_str()
            .unwrap()
            .contains("[masked secret] end"),
        "the value split across reads is masked whole: {read} after {held}"
    );
    let screen = session_call(&daemon, "screen", json!({"session": session})).await;
    assert!(
        screen["screen"]
            .as_str()
            .unwrap()
            .contains("pw=[masked secret] key=[masked API_KEY]"),
        "{screen}"
    );
    // A narrower screen cuts rows inside the values: what is left of them is masked too.
    let resized = session_call(
        &daemon,
        "resize",
        json!({"session": session, "rows": 24, "cols": 10}),
    )
    .await;
    assert_eq!(resized["ok"], true, "{resized}");
    let narrow = session_call(&daemon, "screen", json!({"session": session})).await;
    let narrow_text = narrow["screen"]
        .as_str()
        .unwrap()
        .replace("[masked secret]", "")
        .replace("[masked API_KEY]", "");
    for value in [password, api_key] {
        for part in value.as_bytes().windows(4) {
            let part = std::str::from_utf8(part).unwrap();
            assert!(
                !narrow_text.contains(part),
                "{part:?} of a value shows on the narrowed screen: {narrow_text}"
            );
        }
    }
    // Nothing typed into the session lands in a shell history file.
    let hist = session_call(
        &daemon,
        "send",
        json!({"session": session, "text": "echo \"histfile=[$HISTFILE]\"\n"}),
    )
    .await;
    assert_eq!(hist["ok"], true, "{hist}");
    session_call(
        &daemon,
        "read",
        json!({"session": session, "until": "(?m)^histfile=\\[\\]"}),
    )
    .await;
    let closed = session_call(&daemon, "close", json!({"session": session})).await;
    assert_eq!(closed["ok"], true, "{closed}");

    for reply in [&opened, &typed, &read, &screen, &held, &narrow] {
        assert_no_form(
            reply.to_string().as_bytes(),
            &[password, api_key],
            "a reply",
        );
    }
    assert_state_clean(&daemon, &[password, api_key]);
    assert_no_form(
        daemon.log_text().as_bytes(),
        &[password, api_key],
        "the daemon's log",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gui_types_a_secret_into_a_real_terminal_unseen() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let value = "typed-Secret-77 with space";
    let reference = stored("typed", value);
    let daemon = daemon(ALLOW_SUITE_SECRETS);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    // A terminal whose program takes exactly the value's bytes, no Return needed.
    let program = format!(
        "stty -icanon -echo; head -c {} > {}",
        value.len(),
        file.display()
    );
    let title = "secrets-typing";
    let app: App =
        Desktop::shared().launch("xterm", &["-title", title, "-e", "sh", "-c", &program]);
    let pid = app.pid();
    let window = tokio::task::block_in_place(|| daemon.wait_for_window(pid, title))["id"]
        .as_u64()
        .unwrap();
    let focused = daemon
        .call_raw_once(json!({"surface": "gui", "command": "focus", "args": {"window": window}}))
        .await;
    assert_eq!(focused["focused"], true, "{focused}");
    let out = daemon
        .call_raw_once(
            json!({"surface": "gui", "command": "type", "args": {"text": {"secret": reference}}}),
        )
        .await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["secret"], "typed", "{out}");
    let typed = tokio::task::block_in_place(|| {
        wait_for(
            "the terminal to receive the value",
            Duration::from_secs(20),
            || {
                std::fs::read_to_string(&file)
                    .ok()
                    .filter(|t| t.len() == value.len())
            },
        )
    });
    assert_eq!(typed, value);
    assert_no_form(out.to_string().as_bytes(), &[value], "the reply");
    let intent = daemon.receipt_row(&out["receipt"], "intent");
    assert_eq!(intent["body"]["risk"], "secret", "{intent}");
    let to = &intent["body"]["facts"]["secrets"][0]["to"];
    assert_eq!(to["kind"], "typed", "{intent}");
    assert_eq!(to["window"], window, "{intent}");
    assert_eq!(to["terminal"], true, "{intent}");
    assert_state_clean(&daemon, &[value]);
    assert_no_form(daemon.log_text().as_bytes(), &[value], "the daemon's log");
}

#[tokio::test(flavor = "multi_thread")]
async fn ax_sets_a_secret_as_an_elements_value_unseen() {
    let _desktop = ONE_AT_A_TIME.lock().await;
    let value = "ax-Secret-value-31";
    let reference = stored("ax", value);
    let daemon = daemon(ALLOW_SUITE_SECRETS);
    // `--more`: the app prints its entry's text when asked.
    let app = TestApp::launch_with("Secret Test", &["--more"]);
    let pid = app.pid();
    tokio::task::block_in_place(|| {
        wait_for("the app on AT-SPI", Duration::from_secs(20), || {
            let out = daemon.call_json("ax", "tree", &json!({"app": pid}).to_string());
            out["tree"]
                .as_str()
                .is_some_and(|t| t.contains("Your name"))
                .then_some(())
        })
    });
    let out = daemon
        .call_raw_once(
            json!({"surface": "ax", "command": "act", "args": {"app": pid,
            "selector": "textInput \"Your name\"", "action": "set_value",
            "value": {"secret": reference}}}),
        )
        .await;
    assert_eq!(out["ok"], true, "{out}");
    // The element's value read back after the act is the secret: masked.
    assert_eq!(out["value"], "[masked secret]", "{out}");
    assert_no_form(out.to_string().as_bytes(), &[value], "the reply");
    // The value arrived in the application: asked to, it prints its entry's text on its own
    // stdout (the press's reply shows only the button).
    let out = daemon
        .call_raw_once(
            json!({"surface": "ax", "command": "act", "args": {"app": pid,
            "selector": "button \"Print Entry\"", "action": "press"}}),
        )
        .await;
    assert_eq!(out["ok"], true, "{out}");
    app.wait_line(&format!("entry={value}"));
    let receipts = serde_json::to_string(&daemon.receipts()).unwrap();
    assert!(receipts.contains("element_value"), "{receipts}");
    assert_state_clean(&daemon, &[value]);
    assert_no_form(daemon.log_text().as_bytes(), &[value], "the daemon's log");

    // What masking cannot do: a later call that reads a field showing the value gets it back
    // (README, "What it cannot protect"). Passwords belong in password fields.
    let read = daemon
        .call_raw_once(
            json!({"surface": "ax", "command": "read", "args": {"app": pid,
            "selector": "textInput \"Your name\""}}),
        )
        .await;
    assert_eq!(read["text"], value, "{read}");
}
