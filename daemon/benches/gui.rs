//! Benchmarks of the gui surface against same-run anchors (filled in with the surface).

fn main() {}
