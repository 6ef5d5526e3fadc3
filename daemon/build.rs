//! Links the `computer` binary with packed relative relocations (DT_RELR) where the linker and C
//! library support them.
//!
//! A position-independent Rust binary of this size carries over a hundred thousand relative
//! relocations. As classic `.rela.dyn` entries they take 24 bytes each: megabytes that the loader
//! reads at every start, and that then stay resident. Packed, the table is a few kilobytes and is
//! applied faster (BENCHMARKS.md, start-up and idle memory). It needs GNU ld 2.38 or lld and glibc
//! 2.36; a test link decides, so an older toolchain simply builds the classic way.

use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    // Only where the probe can also run what it linked: a cross build keeps the classic table.
    if target.ends_with("-linux-gnu") && target == host && probe_links_and_runs() {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
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
