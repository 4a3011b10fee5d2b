//! How the controller paces its requests to the API server: which failures are worth
//! retrying (by HTTP status), how long to wait between attempts, and the client-side rate
//! limit (KUBE_CLIENT_QPS / KUBE_CLIENT_BURST) as a token bucket on the caller's clock.

use std::time::{Duration, Instant};

/// How a failed API call should be treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// 404: the object is gone (usually success for deletes).
    NotFound,
    /// 409: someone else wrote first; re-read and try again.
    Conflict,
    /// 429: throttled, or an eviction blocked by a PodDisruptionBudget.
    TooManyRequests,
    /// 5xx, timeouts and transport errors: try again later.
    Transient,
    /// Anything else (400, 403, 422 …): retrying the same request will not help.
    Permanent,
}

impl ErrorClass {
    /// The class of a response with HTTP status `code`.
    pub fn from_status(code: u16) -> Self {
        match code {
            404 => Self::NotFound,
            409 => Self::Conflict,
            429 => Self::TooManyRequests,
            500..=599 => Self::Transient,
            _ => Self::Permanent,
        }
    }

    /// Whether a later attempt may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::Conflict | Self::TooManyRequests | Self::Transient
        )
    }
}

/// Backoff for attempt `n` (0-based): 100 ms doubling, capped at 10 s.
pub fn backoff(attempt: u32) -> Duration {
    let ms = 100u64.saturating_mul(1u64 << attempt.min(7));
    Duration::from_millis(ms.min(10_000))
}

/// A token bucket: `qps` tokens a second, at most `burst` saved up, starting full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    tokens: f64,
    last: Instant,
    qps: f64,
    burst: f64,
}

impl TokenBucket {
    /// A full bucket at `now`. A zero rate counts as 1, and the burst is at least the rate
    /// (a bucket smaller than one second's tokens would throttle below the rate).
    pub fn new(qps: u32, burst: u32, now: Instant) -> Self {
        let qps = f64::from(qps.max(1));
        let burst = f64::from(burst.max(1)).max(qps);
        Self {
            tokens: burst,
            last: now,
            qps,
            burst,
        }
    }

    /// Takes one token at `now`; when none is left, how long until one is.
    ///
    /// # Errors
    /// The wait before a token is available (nothing was taken).
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classed_and_only_some_retried() {
        assert_eq!(ErrorClass::from_status(404), ErrorClass::NotFound);
        assert_eq!(ErrorClass::from_status(409), ErrorClass::Conflict);
        assert_eq!(ErrorClass::from_status(429), ErrorClass::TooManyRequests);
        assert_eq!(ErrorClass::from_status(500), ErrorClass::Transient);
        assert_eq!(ErrorClass::from_status(599), ErrorClass::Transient);
        assert_eq!(ErrorClass::from_status(403), ErrorClass::Permanent);
        assert!(ErrorClass::Conflict.is_retryable());
        assert!(!ErrorClass::NotFound.is_retryable());
        assert!(!ErrorClass::Permanent.is_retryable());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(6), Duration::from_millis(6_400));
        assert_eq!(backoff(7), Duration::from_millis(10_000));
        assert_eq!(backoff(u32::MAX), Duration::from_millis(10_000));
    }

    #[test]
    fn a_bucket_spends_its_burst_then_refills_at_the_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(2, 3, t0);
        for _ in 0..3 {
            assert_eq!(bucket.take(t0), Ok(()));
        }
        assert_eq!(bucket.take(t0), Err(Duration::from_millis(500)));
        let later = t0 + Duration::from_millis(250);
        assert_eq!(bucket.take(later), Err(Duration::from_millis(250)));
        assert_eq!(bucket.take(t0 + Duration::from_millis(500)), Ok(()));
        // A long idle time saves up no more than the burst.
        let idle = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(idle), Ok(()));
        }
        assert!(bucket.take(idle).is_err());
    }

    #[test]
    fn the_burst_is_at_least_the_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10, 2, t0);
        for _ in 0..10 {
            assert_eq!(bucket.take(t0), Ok(()));
        }
        assert!(bucket.take(t0).is_err());
        let mut zero = TokenBucket::new(0, 0, t0);
        assert_eq!(zero.take(t0), Ok(()));
        assert_eq!(zero.take(t0), Err(Duration::from_secs(1)));
    }
}
