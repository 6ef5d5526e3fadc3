//! What the benches share: the median of samples, a duration in milliseconds, the machine's
//! load average beside a result, and the bytes of a reply the model receives. Each bench
//! declares `mod common;` and uses some of them.
#![allow(dead_code)] // each bench uses only what it reports

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};

/// The middle value of `values`.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// The middle duration of `samples`.
pub fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `d` in milliseconds, two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The 1, 5 and 15 minute load averages, for the line beside a timing.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// What the model receives of one reply: every content block's text (or image data) and the
/// structured content, as JSON text.
pub fn visible_bytes(result: &CallToolResult) -> usize {
    let content: usize = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.len(),
            ContentBlock::Image(image) => image.data.len(),
            other => serde_json::to_string(other).map(|s| s.len()).unwrap_or(0),
        })
        .sum();
    let structured = result
        .structured_content
        .as_ref()
        .map(|v| v.to_string().len())
        .unwrap_or(0);
    content + structured
}
