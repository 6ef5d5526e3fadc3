//! The commands wrappers run (`env`, `sudo`, `nice`, `timeout`, `xargs`, `find -exec`, a
//! shell's `-c` text ...): what the script's reading follows into, so that a command a wrapper
//! runs is a command of the script.

use super::{SHELLS, ScriptCommands, command_and_wrapped, shell_text};

/// The command a wrapper runs, if `name` is one and runs one.
pub(super) fn wrapped(
    name: &str,
    args: &[String],
    stdin: Option<&str>,
    depth: usize,
    found: &mut ScriptCommands,
) -> Option<Vec<String>> {
    let rest = |skip: usize| -> Option<Vec<String>> {
        let rest: Vec<String> = args.get(skip..)?.to_vec();
        (!rest.is_empty()).then_some(rest)
    };
    match name {
        "nohup" | "builtin" => rest(0),
        "command" => rest(skip_options(args, &[])),
        "exec" => rest(skip_options(args, &["-a"])),
        "nice" => rest(skip_options(args, &["-n", "--adjustment"])),
        "time" => rest(skip_options(args, &["-f", "--format", "-o", "--output"])),
        "stdbuf" => rest(skip_options(args, &["-i", "-o", "-e"])),
        "setsid" => rest(skip_options(args, &[])),
        // The first operand is the new root.
        "chroot" => rest(skip_options(args, &["--userspec", "--groups"]) + 1),
        "ionice" => rest(skip_options(args, &["-c", "-n", "-p", "-P", "-u"])),
        "timeout" => {
            let at = skip_options(args, &["-s", "--signal", "-k", "--kill-after"]);
            // The first operand is the duration.
            rest(at + 1)
        }
        "env" => env_command(args, found),
        "sudo" | "doas" => sudo_command(name, args, found),
        "xargs" => rest(skip_options(args, XARGS_OPTIONS)).or_else(|| Some(vec!["echo".into()])),
        "find" => {
            find_exec(args, depth, found);
            None
        }
        shell if SHELLS.contains(&shell) => {
            shell_text(shell, args, stdin, depth, found);
            None
        }
        _ => None,
    }
}

/// The command `env` runs: after its options and `NAME=value` assignments (recorded as the
/// script's own); `-S` splits a string at run time, which makes the script opaque.
fn env_command(args: &[String], found: &mut ScriptCommands) -> Option<Vec<String>> {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        if arg == "-S" || arg.starts_with("--split-string") || arg.starts_with("-S") {
            found.opaque("`env -S` splits a string into a command at run time");
            return None;
        }
        if matches!(arg.as_str(), "-u" | "--unset" | "-C" | "--chdir") {
            at += 2;
        } else if arg == "--" {
            at += 1;
            break;
        } else if arg.starts_with('-') && arg.len() > 1 {
            at += 1;
        } else if let Some((var, _)) = arg.split_once('=') {
            found.assigned.push(var.to_string());
            at += 1;
        } else {
            break;
        }
    }
    let rest: Vec<String> = args.get(at..)?.to_vec();
    (!rest.is_empty()).then_some(rest)
}

/// The command `sudo` or `doas` runs; without one, `-s` or `-i` starts a shell that reads its
/// input, which makes the script opaque.
fn sudo_command(name: &str, args: &[String], found: &mut ScriptCommands) -> Option<Vec<String>> {
    let at = skip_options(
        args,
        &[
            "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group",
            "--chdir", "--host", "--prompt", "--role", "--type",
        ],
    );
    if at >= args.len() {
        if args.iter().any(|a| a == "-s" || a == "-i") {
            found.opaque(format!("`{name}` starts a shell that reads its input"));
        }
        return None;
    }
    Some(args[at..].to_vec())
}

/// The options of `xargs` that take a value.
const XARGS_OPTIONS: &[&str] = &[
    "-I",
    "-i",
    "-n",
    "-d",
    "-P",
    "-L",
    "-l",
    "-s",
    "-E",
    "-e",
    "-a",
    "--arg-file",
    "--delimiter",
    "--max-args",
    "--max-procs",
    "--max-lines",
    "--replace",
    "--max-chars",
    "--eof",
];

/// `find`'s `-exec cmd … ;` and its kin, which run cmd for every file found: each cmd is a
/// command of the script.
fn find_exec(args: &[String], depth: usize, found: &mut ScriptCommands) {
    let mut at = 0;
    while at < args.len() {
        if matches!(args[at].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[at + 1..]
                .iter()
                .position(|a| a == ";" || a == "+")
                .map_or(args.len(), |p| at + 1 + p);
            let command: Vec<String> = args[at + 1..end].to_vec();
            if !command.is_empty() {
                command_and_wrapped(command, None, depth, found);
            }
            at = end;
        }
        at += 1;
    }
}

/// The index of the first operand after options (`-x`, `--long`, `--long=v`, and the given
/// options that take a value in the next argument).
fn skip_options(args: &[String], with_value: &[&str]) -> usize {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        if arg == "--" {
            return at + 1;
        }
        if !arg.starts_with('-') || arg.len() == 1 {
            return at;
        }
        at += if with_value.contains(&arg.as_str()) {
            2
        } else {
            1
        };
    }
    at
}
