//! The `computer` binary's offline commands, run as a user would (this suite also makes cargo
//! build the binary that the end-to-end suites in `tests/` drive).

use std::process::Command;

fn computer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_computer"))
        .args(args)
        .env("COMPUTER_CONFIG", "/nonexistent/computer-config.toml")
        .output()
        .expect("run computer")
}

#[test]
fn help_lists_every_subcommand() {
    let out = computer(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for sub in ["serve", "call", "tools", "receipts", "mcp", "doctor"] {
        assert!(help.contains(sub), "`{sub}` missing from --help:\n{help}");
    }
}

#[test]
fn tools_prints_one_tool_in_each_format() {
    let mcp: serde_json::Value = serde_json::from_slice(&computer(&["tools"]).stdout).unwrap();
    assert_eq!(mcp["tools"].as_array().unwrap().len(), 1);
    assert_eq!(mcp["tools"][0]["name"], "COMPUTER");
    let anthropic: serde_json::Value =
        serde_json::from_slice(&computer(&["tools", "--format", "anthropic"]).stdout).unwrap();
    assert_eq!(anthropic["input_schema"]["type"], "object");
    let out = computer(&["tools", "--format", "yaml"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown format is a usage error"
    );
}
