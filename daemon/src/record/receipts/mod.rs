//! The receipts ledger: a hash-chained, append-only SQLite table with one writer at a time (the
//! caller itself when the writer is free, else a writer thread that commits concurrent appends
//! together: group commit); an intent is on disk before its caller is answered, a result right
//! after; every row marked with the ledger's key and the chain's head
//! recorded once its rows are on disk, so that a cut tail, a replaced database or rows written
//! by someone else show in `verify`.
//!
//! # Layout
//! - [`store`]: the rows, their chain's hash, the store's errors, the store opened to read.
//! - [`ledger`]: the writer ([`Ledger`]): group commit, durability, the take-over at start.
//! - [`verification`]: [`verify`], the whole ledger checked against the key and the head.
//! - [`reading`]: [`list`] for the CLI and [`rows_after`] for export.
//! - [`seal`]: the key and the head files.
//! - `tests`: the ledger's own tests.

mod ledger;
mod reading;
pub mod seal;
mod store;
#[cfg(test)]
mod tests;
mod verification;

pub use ledger::{Ledger, MAX_BATCH, Opening};
pub use reading::{ListFilter, StoredText, list, rows_after};
pub use store::{GENESIS_HASH, LedgerError, NewRow, RowKind, StoredRow, chain_hash, open_ro};
pub use verification::{Problem, ProblemKind, Verdict, verify};
