//! Fuzzes the daemon's configuration: the TOML text is parsed and checked, and each surface
//! takes its section, as `computer serve` does at start. A config either loads or is refused
//! with an error naming the file; durations that cannot be held are refused, never wrapped
//! round into short ones.
#![no_main]

use std::sync::OnceLock;

use computer_daemon::config::{Config, ConfigError, parse_duration};
use computer_surfaces::{Registry, SurfaceLimits};
use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "fuzz.toml";

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if let Some(duration) = parse_duration(text) {
        let digits: String = text
            .trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let number: u128 = digits
            .parse()
            .expect("a parsed duration starts with its number");
        assert!(
            duration.as_millis() >= number,
            "`{text}` read as {duration:?}, less than its number"
        );
    }
    match Config::parse(text, ORIGIN) {
        // The surfaces are built once (building them probes the desktop); each config hands
        // them its sections, as `Config::registry` does.
        Ok(config) => {
            if let Err(error) = registry().configure(&config.surfaces) {
                let message = error.to_string();
                assert!(
                    message.contains(error.surface.as_str()) && !error.message.is_empty(),
                    "a section's error names the surface and says what: {message}"
                );
            }
        }
        Err(error) => check_error(&error),
    }
});

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry::for_this_platform(&SurfaceLimits::default()))
}

fn check_error(error: &ConfigError) {
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("config {ORIGIN}: ")),
        "an error names the file: {message}"
    );
    assert!(
        message.len() > ORIGIN.len() + 9,
        "an error says what: {message}"
    );
}
