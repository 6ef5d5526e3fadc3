//! The book's generated pages are what this build renders (`computer docs`): the tool and
//! command-line references, the configuration reference and llms.txt cannot drift from the
//! binary. With `COMPUTER_BLESS=1` the test writes them instead of comparing.
//! Linux: the committed pages show the tool as Linux builds it.

#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

use computer_tests::computer_bin;

#[test]
fn the_generated_pages_of_the_book_are_current() {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src");
    let out = tempfile::tempdir().unwrap();
    let made = Command::new(computer_bin())
        .args(["docs", "--out"])
        .arg(out.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", out.path())
        .output()
        .expect("run computer docs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let bless = std::env::var_os("COMPUTER_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for page in [
        "reference/tool.md",
        "reference/config.md",
        "reference/cli.md",
        "llms.txt",
    ] {
        let rendered = std::fs::read_to_string(out.path().join(page)).expect("a rendered page");
        assert!(rendered.len() > 500, "{page} is nearly empty: {rendered}");
        let committed = book.join(page);
        if bless {
            std::fs::write(&committed, &rendered).unwrap();
        } else if std::fs::read_to_string(&committed).ok().as_deref() != Some(rendered.as_str()) {
            stale.push(page);
        }
    }
    assert!(
        stale.is_empty(),
        "generated pages out of date: {stale:?} under docs/src; write them again with \
         `COMPUTER_BLESS=1 cargo test -p computer-tests --test docs` (or `computer docs --out \
         docs/src`) and commit them"
    );
}
