//! `computer call SURFACE COMMAND [--args JSON] [--complications JSON] [--json] [-- ARGV...]`.

use std::io::Write;

use computer_ipc::Client;
use serde_json::{Map, Value, json};

use super::exit;

#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// The surface, e.g. `shell`.
    surface: String,
    /// The surface's command, e.g. `run`.
    command: String,
    /// The command's args as a JSON object.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
    /// Complications as a JSON object, e.g. '{"timeout_ms": 5000}'.
    #[arg(long, value_name = "JSON")]
    complications: Option<String>,
    /// Print the result's structured content as JSON.
    #[arg(long)]
    json: bool,
    /// For `shell run`: the program and its arguments (become `args.argv`).
    #[arg(last = true, value_name = "ARGV")]
    argv: Vec<String>,
}

fn parse_object(flag: &str, text: Option<&str>) -> Result<Map<String, Value>, String> {
    match text {
        None => Ok(Map::new()),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!("--{flag} must be a JSON object, got {other}")),
            Err(err) => Err(format!("--{flag} is not valid JSON: {err}")),
        },
    }
}

pub async fn run(call: CallArgs) -> u8 {
    let request = match build(&call) {
        Ok(request) => request,
        Err(message) => {
            eprintln!("error: {message}");
            return exit::USAGE;
        }
    };
    // Inside a run given tools, the call goes over the run's own channel (the agent socket is
    // out of a run's reach, and refuses a run's processes besides).
    if let Some(connected) = computer_ipc::tools::ToolsClient::from_env() {
        let arguments = match request {
            Value::Object(map) => map,
            _ => unreachable!("build makes an object"),
        };
        let structured = match connected
            .and_then(|mut client| client.request(computer_ipc::tools::ToolsOp::Call { arguments }))
        {
            Ok(structured) => structured,
            Err(err) => {
                eprintln!("error: {err}");
                return exit::UNAVAILABLE;
            }
        };
        return print_result(&call, &structured);
    }
    let client = match Client::connect_default().await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::UNAVAILABLE;
        }
    };
    // A call that waits for a person says so on stderr (the request's id and how to answer),
    // and again how the wait ended when it was not allowed.
    let waited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let told = waited.clone();
    let result = client
        .call_raw_with_progress(request, move |message| {
            told.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("computer: {message}");
        })
        .await;
    client.close().await;
    let result = match result {
        Ok(result) => result,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::UNAVAILABLE;
        }
    };
    let structured = result.structured_content.unwrap_or(Value::Null);
    if waited.load(std::sync::atomic::Ordering::Relaxed)
        && let Some(ending) = how_the_wait_ended(&structured)
    {
        eprintln!("computer: {ending}");
    }
    print_result(&call, &structured)
}

/// What to say of a call that waited for a person and was not allowed: denied, or nobody
/// answered in time (the daemon's own words).
fn how_the_wait_ended(structured: &Value) -> Option<String> {
    let error = structured.get("error")?;
    if error["code"] != json!("denied") {
        return None;
    }
    let message = error["message"].as_str().unwrap_or("not approved");
    Some(if message.contains("nobody answered") {
        format!("the request timed out ({message})")
    } else {
        format!("the request was denied ({message})")
    })
}

/// Prints a call's result (as JSON with `--json`) and says how it went in the exit status.
fn print_result(call: &CallArgs, structured: &Value) -> u8 {
    super::end_quietly_on_closed_pipe();
    if call.json {
        println!("{structured}");
    } else {
        print_readable(structured);
    }
    status_of(structured)
}

/// `computer tools` inside a run given tools: the commands this run may call, one a line (with
/// `--format json`, the list with each command's args schema). `None` outside such a run.
pub fn tools_in_run(format: &str) -> Option<u8> {
    let connected = computer_ipc::tools::ToolsClient::from_env()?;
    let listed =
        match connected.and_then(|mut client| client.request(computer_ipc::tools::ToolsOp::List)) {
            Ok(listed) => listed,
            Err(err) => {
                eprintln!("error: {err}");
                return Some(exit::UNAVAILABLE);
            }
        };
    super::end_quietly_on_closed_pipe();
    if format == "json" {
        println!("{listed}");
        return Some(exit::OK);
    }
    for command in listed["callable"].as_array().into_iter().flatten() {
        println!(
            "{}\t{}",
            command["name"].as_str().unwrap_or_default(),
            command["risk"].as_str().unwrap_or_default()
        );
    }
    Some(exit::OK)
}

fn build(call: &CallArgs) -> Result<Value, String> {
    let mut args = parse_object("args", call.args.as_deref())?;
    let complications = parse_object("complications", call.complications.as_deref())?;
    if !call.argv.is_empty() {
        if call.surface != "shell" || call.command != "run" {
            return Err("words after `--` are only for `shell run` (they become args.argv)".into());
        }
        if args.contains_key("argv") || args.contains_key("script") {
            return Err("give the program either after `--` or in --args, not both".into());
        }
        args.insert("argv".into(), json!(call.argv));
    }
    Ok(json!({
        "surface": call.surface,
        "command": call.command,
        "args": args,
        "complications": complications,
    }))
}

/// 0 when the action succeeded; a shell run's own exit code when it has one; otherwise 1, or 2
/// for a call the daemon found invalid.
fn status_of(structured: &Value) -> u8 {
    if structured["ok"] == json!(true) {
        return exit::OK;
    }
    if structured["error"]["code"] == json!("invalid_call") {
        return exit::USAGE;
    }
    match structured["exit_code"].as_u64() {
        Some(code) if (1..=255).contains(&code) => code as u8,
        _ => exit::FAILED,
    }
}

fn print_readable(structured: &Value) {
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    if let Some(error) = structured.get("error") {
        let _ = writeln!(
            stderr,
            "error: {}",
            error["message"].as_str().unwrap_or("unknown error")
        );
        if let Some(path) = error["path"].as_str() {
            let _ = writeln!(stderr, "  at: {path}");
        }
        if let Some(valid) = error["valid"].as_array() {
            let names: Vec<&str> = valid.iter().filter_map(Value::as_str).collect();
            let _ = writeln!(stderr, "  valid: {}", names.join(", "));
        }
    } else if ["stdout", "stderr", "exit_code", "signal"]
        .iter()
        .any(|field| structured.get(field).is_some())
    {
        // A run (empty outputs are left out of replies, so a quiet run has neither stream).
        let _ = stdout.write_all(structured["stdout"].as_str().unwrap_or("").as_bytes());
        let _ = stderr.write_all(structured["stderr"].as_str().unwrap_or("").as_bytes());
    } else {
        let _ = writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(structured).unwrap_or_default()
        );
    }
    let mut summary = format!("receipt {}", structured["receipt"].as_str().unwrap_or("?"));
    if let Some(code) = structured["exit_code"].as_i64() {
        summary.push_str(&format!(", exit {code}"));
    }
    if let Some(signal) = structured["signal"].as_str() {
        summary.push_str(&format!(", killed by {signal}"));
    }
    if structured["timed_out"] == json!(true) {
        summary.push_str(", timed out");
    }
    if let Some(cut) = structured["cut"].as_object() {
        for (name, note) in cut {
            summary.push_str(&format!(
                ", {name} cut to {} of {} bytes",
                note["shown"], note["bytes"]
            ));
        }
    }
    let _ = writeln!(stderr, "[{summary}]");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> CallArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            call: CallArgs,
        }
        Wrapper::parse_from(std::iter::once("call").chain(words.iter().copied())).call
    }

    #[test]
    fn words_after_dashes_become_argv() {
        let request = build(&args(&["shell", "run", "--", "ls", "-la"])).unwrap();
        assert_eq!(request["args"]["argv"], json!(["ls", "-la"]));
    }

    #[test]
    fn argv_only_for_shell_run() {
        let err = build(&args(&["gui", "move", "--", "x"])).unwrap_err();
        assert!(err.contains("only for `shell run`"), "{err}");
    }

    #[test]
    fn bad_json_is_named() {
        let err = build(&args(&["shell", "run", "--args", "{nope"])).unwrap_err();
        assert!(err.starts_with("--args is not valid JSON"), "{err}");
    }

    #[test]
    fn exit_status_mirrors_the_action() {
        assert_eq!(status_of(&json!({"ok": true})), 0);
        assert_eq!(status_of(&json!({"ok": false, "exit_code": 3})), 3);
        assert_eq!(
            status_of(&json!({"ok": false, "error": {"code": "invalid_call"}})),
            2
        );
        assert_eq!(
            status_of(&json!({"ok": false, "timed_out": true, "exit_code": null})),
            1
        );
    }
}
