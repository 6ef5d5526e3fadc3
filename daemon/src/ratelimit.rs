//! Per-agent rate limits: at most N calls in any sliding window; a limited call is refused with
//! the time until it would be admitted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct RateLimiter {
    limit: Mutex<(u32, Duration)>,
    calls: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    /// `calls == 0` admits everything.
    pub fn new(calls: u32, window: Duration) -> RateLimiter {
        RateLimiter {
            limit: Mutex::new((calls, window)),
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the limits of `other` (config reload), keeping the history of calls.
    pub fn replace(&self, other: RateLimiter) {
        *self.limit.lock().unwrap() = other.limit.into_inner().unwrap();
    }

    /// Admits a call by `agent`, or says how long until one would be admitted.
    pub fn admit(&self, agent: &str) -> Result<(), Duration> {
        self.admit_at(agent, Instant::now())
    }

    fn admit_at(&self, agent: &str, now: Instant) -> Result<(), Duration> {
        let (max, window) = *self.limit.lock().unwrap();
        if max == 0 {
            return Ok(());
        }
        let mut calls = self.calls.lock().unwrap();
        let history = calls.entry(agent.to_string()).or_default();
        while history
            .front()
            .is_some_and(|t| now.duration_since(*t) >= window)
        {
            history.pop_front();
        }
        if history.len() >= max as usize {
            let oldest = history.front().copied().unwrap_or(now);
            return Err(window.saturating_sub(now.duration_since(oldest)));
        }
        history.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window_per_agent() {
        let limiter = RateLimiter::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(limiter.admit_at("a", t0).is_ok());
        assert!(limiter.admit_at("a", t0 + Duration::from_secs(1)).is_ok());
        let retry = limiter
            .admit_at("a", t0 + Duration::from_secs(2))
            .unwrap_err();
        assert_eq!(retry, Duration::from_secs(8));
        assert!(
            limiter.admit_at("b", t0 + Duration::from_secs(2)).is_ok(),
            "agents are counted apart"
        );
        assert!(
            limiter.admit_at("a", t0 + Duration::from_secs(10)).is_ok(),
            "the window slides"
        );
    }

    #[test]
    fn zero_means_unlimited() {
        let limiter = RateLimiter::new(0, Duration::from_secs(1));
        for _ in 0..1000 {
            assert!(limiter.admit("a").is_ok());
        }
    }
}
