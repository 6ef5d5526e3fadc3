//! Per-agent rate limits: at most N calls in any sliding window; a limited call is refused with
//! the time until it would be admitted. Several calls at once (a multi-step call's steps) are
//! admitted all together or not at all, so a refused call uses none of the window.

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

    /// Admits `calls` calls by `agent` together, or none of them and says how long until they
    /// would be admitted.
    pub fn admit(&self, agent: &str, calls: u32) -> Result<(), Duration> {
        self.admit_at(agent, calls, Instant::now())
    }

    /// Gives back the newest `calls` admissions of `agent` (a call refused after it was
    /// admitted, which ran nothing).
    pub fn give_back(&self, agent: &str, calls: u32) {
        let mut history = self.calls.lock().unwrap();
        if let Some(history) = history.get_mut(agent) {
            for _ in 0..calls {
                history.pop_back();
            }
        }
    }

    fn admit_at(&self, agent: &str, calls: u32, now: Instant) -> Result<(), Duration> {
        let (max, window) = *self.limit.lock().unwrap();
        if max == 0 {
            return Ok(());
        }
        let mut histories = self.calls.lock().unwrap();
        let history = histories.entry(agent.to_string()).or_default();
        while history
            .front()
            .is_some_and(|t| now.duration_since(*t) >= window)
        {
            history.pop_front();
        }
        let calls = calls as usize;
        if history.len() + calls > max as usize {
            // The admission that must leave the window before these fit; more calls than the
            // limit never fit, and wait a whole window to say so.
            let leaving = (history.len() + calls).saturating_sub(max as usize);
            let Some(until) = history.get(leaving - 1).copied() else {
                return Err(window);
            };
            return Err(window.saturating_sub(now.duration_since(until)));
        }
        history.extend(std::iter::repeat_n(now, calls));
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
        assert!(limiter.admit_at("a", 1, t0).is_ok());
        assert!(
            limiter
                .admit_at("a", 1, t0 + Duration::from_secs(1))
                .is_ok()
        );
        let retry = limiter
            .admit_at("a", 1, t0 + Duration::from_secs(2))
            .unwrap_err();
        assert_eq!(retry, Duration::from_secs(8));
        assert!(
            limiter
                .admit_at("b", 1, t0 + Duration::from_secs(2))
                .is_ok(),
            "agents are counted apart"
        );
        assert!(
            limiter
                .admit_at("a", 1, t0 + Duration::from_secs(10))
                .is_ok(),
            "the window slides"
        );
    }

    #[test]
    fn several_calls_are_admitted_together_or_not_at_all() {
        let limiter = RateLimiter::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(limiter.admit_at("a", 1, t0).is_ok());
        let retry = limiter
            .admit_at("a", 3, t0 + Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(retry, Duration::from_secs(9), "once the first call leaves");
        assert!(
            limiter
                .admit_at("a", 2, t0 + Duration::from_secs(1))
                .is_ok(),
            "the refused three took nothing"
        );
        assert!(
            limiter
                .admit_at("a", 1, t0 + Duration::from_secs(1))
                .is_err()
        );
        limiter.give_back("a", 2);
        assert!(
            limiter
                .admit_at("a", 2, t0 + Duration::from_secs(1))
                .is_ok()
        );
        assert_eq!(
            limiter
                .admit_at("a", 4, t0 + Duration::from_secs(2))
                .unwrap_err(),
            Duration::from_secs(10),
            "more than the limit never fits"
        );
    }

    #[test]
    fn zero_means_unlimited() {
        let limiter = RateLimiter::new(0, Duration::from_secs(1));
        for _ in 0..1000 {
            assert!(limiter.admit("a", 1).is_ok());
        }
    }
}
