//! Links the `computer` binary with packed relative relocations (DT_RELR) where the linker and C
//! library support them, and, in release builds linked by lld, with its functions laid out in the
//! order the daemon uses them.
//!
//! A position-independent Rust binary of this size carries over a hundred thousand relative
//! relocations. As classic `.rela.dyn` entries they take 24 bytes each: megabytes that the loader
//! reads at every start, and that then stay resident. Packed, the table is a few kilobytes and is
//! applied faster (BENCHMARKS.md, start-up and idle memory). It needs GNU ld 2.38 or lld and glibc
//! 2.36; a test link decides, so an older toolchain simply builds the classic way.
//!
//! The function order (`packaging/function-order.txt`, written by `packaging/order-functions.sh`)
//! puts the code of start-up and of the common calls side by side. The kernel maps code in
//! 64 KiB around every page a call touches, so scattered over the whole text those few thousand
//! functions keep most of it resident; together they keep a few MiB (BENCHMARKS.md, "Code laid out
//! by use"). Only lld takes an ordering file (rustc links with it by default on x86_64 Linux since
//! 1.90); a test link with the same rustc and flags decides. The file names functions without
//! their crate hashes, which differ between builds of the same code (another profile, the bench's
//! features); the link step that `.cargo/config.toml` names (`packaging/link-ordered`) maps them
//! onto the symbols being linked. Functions the file names that a build no longer has are
//! skipped, so a stale file (or a build without that link step) costs memory, never correctness.

use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";
const FUNCTION_ORDER: &str = "../packaging/function-order.txt";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={FUNCTION_ORDER}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    // Only where the probe can also run what it linked: a cross build keeps the classic table.
    if target.ends_with("-linux-gnu") && target == host && probe_links_and_runs() {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if release && target.contains("-linux-") {
        // Missing only outside the workspace (a packaged crate): the build is then the
        // compiler's order, correct and larger.
        let Ok(order) = PathBuf::from(FUNCTION_ORDER).canonicalize() else {
            println!("cargo:warning=no {FUNCTION_ORDER}: functions keep the compiler's order");
            return;
        };
        let flags = [
            format!("-Wl,--symbol-ordering-file={}", order.display()),
            "-Wl,--no-warn-symbol-ordering".to_string(),
        ];
        if rustc_links_with(&flags) {
            for flag in flags {
                println!("cargo:rustc-link-arg-bin=computer={flag}");
            }
        }
    }
}

/// Links an empty Rust program for the target with the build's own rustc and flags, plus `flags`:
/// whether the linker rustc picks (lld, or one a config names) takes them.
fn rustc_links_with(flags: &[String]) -> bool {
    let (Some(out), Some(rustc), Ok(target)) = (
        std::env::var_os("OUT_DIR").map(PathBuf::from),
        std::env::var_os("RUSTC"),
        std::env::var("TARGET"),
    ) else {
        return false;
    };
    let source = out.join("order_probe.rs");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut probe = Command::new(rustc);
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    probe
        .args(rustflags.split('\x1f').filter(|flag| !flag.is_empty()))
        .args(["--target", &target, "--crate-type", "bin", "-o"])
        .arg(out.join("order_probe"))
        .arg(&source);
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        probe.arg(format!("-Clinker={linker}"));
    }
    for flag in flags {
        probe.arg(format!("-Clink-arg={flag}"));
    }
    probe.output().is_ok_and(|out| out.status.success())
}

/// Links an empty C program with the flag and runs it: the linker must know the flag and the
/// C library's loader must accept the packed table it asks for.
fn probe_links_and_runs() -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    let linked = Command::new("cc")
        .args(["-pie", "-fPIE", FLAG, "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|out| out.status.success() && out.stderr.is_empty());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}
