//! The record: what a call leaves behind, chained, sealed and sent on.
//!
//! # Layout
//! - [`receipts`]: the hash-chained SQLite ledger with group commit.
//! - [`secrets`]: redaction in the pipeline: outcomes, replies, receipts and log lines masked;
//!   secret references in receipts as keyed digests.
//! - [`export`]: receipts sent on to syslog, journald or OTLP from a durable cursor behind the
//!   ledger.

pub mod export;
pub mod receipts;
pub mod secrets;
