//! The release link's function layout: `packaging/link-ordered` maps the hash-free keys of
//! `packaging/function-order.txt` onto whatever symbols a build of the same code has, and lld
//! lays the functions out in that order (daemon/build.rs, BENCHMARKS.md "Code laid out by use").
//! Real rustc, real lld, real objects; x86_64 Linux only, where rustc links with lld.

use std::path::Path;
use std::process::Command;

/// rustc, linking through `packaging/link-ordered` as `.cargo/config.toml` has it.
fn rustc_through_the_link_step() -> Command {
    let link_step = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/link-ordered");
    let mut rustc = Command::new("rustc");
    rustc.arg(format!("-Clinker={}", link_step.display()));
    rustc
}

const PROGRAM: &str = r#"
#[inline(never)]
fn alpha() -> u32 { std::hint::black_box(1) }
#[inline(never)]
fn beta() -> u32 { std::hint::black_box(2) }
#[inline(never)]
fn gamma() -> u32 { std::hint::black_box(3) }
fn main() { println!("{}", alpha() + beta() + gamma()); }
"#;

/// Builds PROGRAM with `metadata` as its crate hash, linked through `packaging/link-ordered` with
/// `order` as the ordering file; returns the addresses of alpha, beta and gamma, and the mapped
/// file the link step wrote.
fn build(dir: &Path, metadata: &str, order: &[&str]) -> ([u64; 3], String) {
    let source = dir.join("demo.rs");
    std::fs::write(&source, PROGRAM).unwrap();
    let order_file = dir.join(format!("order-{metadata}.txt"));
    std::fs::write(&order_file, format!("# keys\n{}\n", order.join("\n"))).unwrap();
    let program = dir.join(format!("demo-{metadata}"));
    let out = rustc_through_the_link_step()
        .args([
            "--edition",
            "2021",
            "-O",
            "--crate-name",
            "demo",
            "--crate-type",
            "bin",
        ])
        .arg("-Csymbol-mangling-version=v0")
        .arg(format!("-Cmetadata={metadata}"))
        .arg(format!(
            "-Clink-arg=-Wl,--symbol-ordering-file={}",
            order_file.display()
        ))
        .arg("-Clink-arg=-Wl,--no-warn-symbol-ordering")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .output()
        .expect("rustc runs");
    assert!(
        out.status.success(),
        "rustc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = Command::new(&program).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout).trim(), "6");
    let nm = Command::new("nm")
        .arg("--defined-only")
        .arg(&program)
        .output()
        .expect("nm runs");
    let symbols = String::from_utf8_lossy(&nm.stdout).into_owned();
    let address = |name: &str| {
        symbols
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let address = fields.next()?;
                let symbol = fields.nth(1)?;
                (symbol.starts_with("_R") && symbol.ends_with(name))
                    .then(|| u64::from_str_radix(address, 16).unwrap())
            })
            .next()
            .unwrap_or_else(|| panic!("no symbol ending {name} in\n{symbols}"))
    };
    let mapped = std::fs::read_to_string(dir.join(format!("demo-{metadata}.order")))
        .expect("the link step writes the mapped file beside its output");
    (
        [
            address("4demo5alpha"),
            address("4demo4beta"),
            address("4demo5gamma"),
        ],
        mapped,
    )
}

#[test]
fn functions_follow_the_keys_whatever_the_crate_hash() {
    let dir = tempfile::tempdir().unwrap();
    let forward = [
        "_RNvCs_4demo5alpha",
        "_RNvCs_4demo4beta",
        "_RNvCs_4demo5gamma",
    ];
    let backward = [
        "_RNvCs_4demo5gamma",
        "_RNvCs_4demo4beta",
        "_RNvCs_4demo5alpha",
    ];
    // Two crate hashes stand for two builds of the same code (release, and the bench's).
    for metadata in ["one", "two"] {
        let ([alpha, beta, gamma], mapped) = build(dir.path(), metadata, &forward);
        assert!(
            alpha < beta && beta < gamma,
            "asked alpha, beta, gamma:\n{mapped}"
        );
        assert!(mapped.contains("3 of 3 keys found"), "{mapped}");
        let reversed = format!("{metadata}-back");
        let ([alpha, beta, gamma], mapped) = build(dir.path(), &reversed, &backward);
        assert!(
            gamma < beta && beta < alpha,
            "asked gamma, beta, alpha:\n{mapped}"
        );
    }
}

#[test]
fn a_link_without_an_ordering_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("plain.rs");
    std::fs::write(&source, "fn main() { println!(\"plain\"); }\n").unwrap();
    let program = dir.path().join("plain");
    let out = rustc_through_the_link_step()
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(Command::new(&program).output().unwrap().stdout, b"plain\n");
    assert!(!dir.path().join("plain.order").exists());
}
