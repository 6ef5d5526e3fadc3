#!/usr/bin/env bash
# Runs every fuzz target for $1 seconds (default 12) from its committed corpus, new inputs kept in
# a scratch directory; fails on the first target that finds a crash. Installs cargo-fuzz when the
# machine lacks it (the nightly toolchain comes with the machine). Usage: fuzz/short-run.sh [s];
# fuzz/short-run.sh --install-only installs cargo-fuzz and runs nothing.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-12}"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
[ "$seconds" = "--install-only" ] && exit 0
# An unoptimised build (no debug info) costs a third of an optimised one's CPU time (FUZZING.md),
# which matters more for a short run than the executions per second it gives up.
export CARGO_PROFILE_DEV_DEBUG=0
flags=(--dev -a -s none)
cargo +nightly fuzz build "${flags[@]}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$scratch/$target" "corpus/$target"
    log="$scratch/$target.log"
    if ! cargo +nightly fuzz run "${flags[@]}" "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz: $target failed; the input is in fuzz/artifacts/$target/ (FUZZING.md)" >&2
        exit 1
    fi
    echo "fuzz: $target, ${seconds}s: $(grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" | tr '\n' ' ')"
done
