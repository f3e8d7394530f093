//! Retry policy: which failures are retried, and how long to wait.
//!
//! Exponential backoff with seeded jitter (deterministic for a given seed, so
//! simulations replay exactly), overridden by the provider's `retry-after`.

use std::time::Duration;

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (the official SDKs default to 2).
    pub max_retries: u32,
    /// Wait before the first retry, before jitter.
    pub initial_backoff: Duration,
    /// Cap on one wait, before jitter.
    pub max_backoff: Duration,
    /// The longest `retry-after` waited for. A longer demand (a rate limit that resets
    /// tomorrow) fails the call at once with the provider's error, whose `retry_after`
    /// says how long it asked for; retrying sooner would only be refused again. The default,
    /// 60 s, is the official OpenAI and Anthropic SDKs' (they honour `retry-after` up to 60 s).
    pub max_retry_after: Duration,
    /// Of the retries, how many may follow a stall (no progress for the stall limit before
    /// anything reached the caller). One by default: see
    /// [`DEFAULT_STALL_TIMEOUT`](crate::machines::generate::DEFAULT_STALL_TIMEOUT) for why.
    pub max_stall_retries: u32,
    /// Jitter seed; drivers pass a random one, simulations a fixed one.
    pub seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            max_stall_retries: 1,
            seed: 0x6f6d_6e69,
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self { max_retries: 0, ..Self::default() }
    }

    /// The wait before retry number `retry` (1-based): the provider's `retry-after`
    /// when given (`None` if it exceeds [`RetryPolicy::max_retry_after`]), otherwise
    /// `initial * 2^(retry-1)` capped, scaled by a jitter factor in [0.5, 1.0).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let exp = self.initial_backoff.saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let base = exp.min(self.max_backoff);
        let jitter = 0.5 + 0.5 * unit_float(splitmix64(self.seed ^ u64::from(retry).wrapping_mul(0x9e37_79b9)));
        Some(base.mul_f64(jitter))
    }
}

/// SplitMix64: a tiny, well-known mixing function; enough for jitter.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn unit_float(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let p = RetryPolicy::default();
        let d1 = p.delay(1, None).unwrap();
        let d2 = p.delay(2, None).unwrap();
        assert!(d1 >= Duration::from_millis(250) && d1 < Duration::from_millis(500), "{d1:?}");
        assert!(d2 >= Duration::from_millis(500) && d2 < Duration::from_millis(1000), "{d2:?}");
        assert!(p.delay(30, None).unwrap() < Duration::from_secs(8));
        assert_eq!(p.delay(1, None), p.delay(1, None), "deterministic for a seed");
    }

    #[test]
    fn retry_after_wins_unless_too_long() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, Some(Duration::from_secs(3))), Some(Duration::from_secs(3)));
        assert_eq!(p.delay(1, Some(Duration::from_secs(60))), Some(Duration::from_secs(60)));
        assert_eq!(p.delay(1, Some(Duration::from_secs(3600))), None);
        assert_eq!(p.delay(1, Some(Duration::from_secs(86_400))), None, "a day: no retry, not a short backoff");
        let patient = RetryPolicy { max_retry_after: Duration::from_secs(86_400), ..p };
        assert_eq!(patient.delay(1, Some(Duration::from_secs(86_400))), Some(Duration::from_secs(86_400)));
    }
}
