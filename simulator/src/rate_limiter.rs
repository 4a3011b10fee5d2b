//! The client-side rate limits of Kubernetes' own components, on the virtual clock.
//!
//! client-go paces every request of a client through a token bucket
//! (`flowcontrol.NewTokenBucketRateLimiter`, built on `golang.org/x/time/rate`): `qps` tokens a
//! second, at most `burst` saved up, starting full. A caller *reserves* a token and waits
//! until its time comes, so reservations are served in the order they were made and the
//! bucket can go into debt: a batch of 100 requests reserved at once takes the next 100
//! tokens, and a request reserved after them waits behind all of them. That order is what
//! shapes the kube-controller-manager's pod creations (see [`crate::controller_manager`]).
//!
//! Event recorders also filter spam per object with a passive bucket that never waits
//! (`EventSourceObjectSpamFilter`: 25 events, then one per 5 minutes); [`RateLimiter::try_take`]
//! is that check.

use karpenter_scheduling::model::Millis;

/// A token bucket with client-go's (`x/time/rate`) reservation semantics, on milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimiter {
    /// Tokens per millisecond.
    per_ms: f64,
    burst: f64,
    /// Tokens left after the last reservation (negative: reserved into the future).
    tokens: f64,
    /// When the last reservation was made.
    last: Millis,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens refilled at `qps` a second. The callers validate
    /// `qps > 0` and `burst ≥ 1`.
    pub(crate) fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            per_ms: qps / 1000.0,
            burst,
            tokens: burst,
            last: 0,
        }
    }

    /// The tokens saved up by `now` (never more than the burst).
    fn advance(&self, now: Millis) -> f64 {
        let elapsed = (now - self.last).max(0) as f64;
        (self.tokens + elapsed * self.per_ms).min(self.burst)
    }

    /// Reserves one request at `now` and returns when it is sent: `now` while tokens are
    /// left, else when the debt of every earlier reservation and this one is paid off
    /// (rounded up to the millisecond).
    pub(crate) fn reserve(&mut self, now: Millis) -> Millis {
        let now = now.max(self.last);
        self.tokens = self.advance(now) - 1.0;
        self.last = now;
        if self.tokens >= 0.0 {
            return now;
        }
        // The small slack keeps 1 / 20 qps = 50 ms from rounding up to 51.
        let wait = (-self.tokens / self.per_ms - 1e-6).ceil().max(0.0);
        now + wait as Millis
    }

    /// Takes a token at `now` if one is there, without waiting or going into debt (client-go's
    /// `TryAccept`, what the event spam filter does).
    pub(crate) fn try_take(&mut self, now: Millis) -> bool {
        let now = now.max(self.last);
        let tokens = self.advance(now);
        self.last = now;
        if tokens >= 1.0 {
            self.tokens = tokens - 1.0;
            true
        } else {
            self.tokens = tokens;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_burst_goes_at_once_then_requests_follow_at_the_rate() {
        let mut limiter = RateLimiter::new(20.0, 30);
        let times: Vec<Millis> = (0..33).map(|_| limiter.reserve(1_000)).collect();
        assert!(times[..30].iter().all(|t| *t == 1_000), "{times:?}");
        assert_eq!(times[30..], [1_050, 1_100, 1_150]);
        // 2,000 requests at once, as the kube-controller-manager's 2,000 pods measured on the
        // real control plane: the last is sent (2,000 − 30) / 20 s = 98.5 s later.
        let mut limiter = RateLimiter::new(20.0, 30);
        let last = (0..2_000).map(|_| limiter.reserve(0)).last().unwrap();
        assert_eq!(last, 98_500);
    }

    #[test]
    fn a_reservation_waits_behind_earlier_ones_and_an_idle_bucket_refills_to_its_burst() {
        let mut limiter = RateLimiter::new(10.0, 2);
        assert_eq!(limiter.reserve(0), 0);
        assert_eq!(limiter.reserve(0), 0);
        assert_eq!(limiter.reserve(0), 100);
        assert_eq!(limiter.reserve(0), 200);
        // Reserved later, but the debt is not paid until 200 ms: this one is sent at 300.
        assert_eq!(limiter.reserve(150), 300);
        // A minute idle saves up the burst and no more.
        assert_eq!(limiter.reserve(60_000), 60_000);
        assert_eq!(limiter.reserve(60_000), 60_000);
        assert_eq!(limiter.reserve(60_000), 60_100);
    }

    #[test]
    fn try_take_never_waits() {
        // The event spam filter: 25 events, then one per 300 s.
        let mut filter = RateLimiter::new(1.0 / 300.0, 25);
        let passed = (0..100).filter(|_| filter.try_take(0)).count();
        assert_eq!(passed, 25);
        assert!(!filter.try_take(299_000));
        assert!(filter.try_take(300_000));
        assert!(!filter.try_take(300_000));
    }
}
