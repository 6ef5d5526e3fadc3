#!/usr/bin/env bash
# Checks from Linux that the whole workspace, tests included, compiles for macOS
# (aarch64-apple-darwin) and is clippy-clean there: `cargo clippy --workspace --all-targets
# --target aarch64-apple-darwin -- -D warnings`. Any error fails the run.
#
# It installs what is missing: the Rust target, and the `ziglang` Python package, whose
# `zig cc -target aarch64-macos` (with the macOS libc headers) compiles the C that build scripts
# build for the target (bundled SQLite in libsqlite3-sys). Linking is not possible here (no Apple
# SDK frameworks), so this is check and clippy only; running on a Mac is for macOS runners.
#
# It shares the normal target dir ($CARGO_TARGET_DIR, else `target/`): host build scripts and
# proc-macros are reused from the Linux build, and the macOS artefacts go to
# `target/aarch64-apple-darwin/`.
#
# Time it adds to CI (measured 2026-11-30 on 2 cores shared with other builds, load ~7, with the
# host build scripts and proc-macros already built, as the Linux build leaves them): cold, nothing built for the target yet, 4 min 28 s
# (2 min 30 s of CPU); warm, after a change to computer-ipc (every workspace crate checked again),
# 12 s; warm, nothing changed, 0.7 s. A fresh machine also downloads the target and `ziglang`
# once (411 MB installed). `rust-src` is not needed: the target's prebuilt standard library is.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'check-macos: %s\n' "$*" >&2; }

target=aarch64-apple-darwin

for tool in rustup python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is missing: this check installs the macOS target with rustup and a C compiler for it with python3's pip"
    exit 1
  fi
done

if ! rustup target list --installed | grep -qx "$target"; then
  log "installing the Rust target $target"
  rustup target add "$target"
fi

python="$(command -v python3)"
if ! "$python" -c 'import ziglang' >/dev/null 2>&1; then
  log "installing the ziglang Python package (a C compiler for macOS)"
  # Debian's own python3 refuses system-wide pip installs unless told otherwise.
  "$python" -m pip install --quiet --disable-pip-version-check ziglang 2>/dev/null \
    || "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages ziglang
fi

# cc-rs calls the compiler the way Apple's clang wants it; zig rejects `-arch`,
# `-mmacosx-version-min=` and a second `--target=`, and is told its target once, here.
tools="${CARGO_TARGET_DIR:-target}/check-macos-tools"
mkdir -p "$tools"
tools="$(cd "$tools" && pwd)"
cat >"$tools/cc" <<EOF
#!/usr/bin/env bash
set -euo pipefail
args=()
while ((\$#)); do
  case "\$1" in
    -arch) shift ;;
    -mmacosx-version-min=* | --target=*) ;;
    *) args+=("\$1") ;;
  esac
  shift
done
exec "$python" -m ziglang cc -target aarch64-macos "\${args[@]}"
EOF
cat >"$tools/ar" <<EOF
#!/usr/bin/env bash
exec "$python" -m ziglang ar "\$@"
EOF
chmod +x "$tools/cc" "$tools/ar"
export CC_aarch64_apple_darwin="$tools/cc"
export AR_aarch64_apple_darwin="$tools/ar"

log "cargo clippy --workspace --all-targets --target $target -- -D warnings"
cargo clippy --workspace --all-targets --target "$target" -- -D warnings
log "macOS check passed"
