//! The `computer` binary: parses the command line and hands over to the CLI module.

fn main() -> std::process::ExitCode {
    computer_daemon::cli::main()
}
