//! Benchmarks of the ax surface against same-run anchors (filled in with the surface).

fn main() {}
