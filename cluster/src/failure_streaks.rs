//! How loudly to report work that failed and will be retried. A conflict (another writer
//! won; the retry re-reads), throttling, an object already gone or a transient error is
//! part of normal operation on a busy cluster and is fixed by the retry: logging each at
//! WARN drowns the failures someone must act on. So a routine failure is reported at debug
//! until the same work has kept failing, with no success in between, for
//! [`PERSISTENT_AFTER`]; only then is it a warning. Any other failure is a warning at once.
//! Warnings about one piece of work repeat at most once per [`PERSISTENT_AFTER`], so a stuck
//! object is reported without flooding the log at every pass.
//!
//! Pure: the caller passes the time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long routine failures of one piece of work may go on before they are a warning, and
/// how often a warning about it repeats.
pub const PERSISTENT_AFTER: Duration = Duration::from_secs(60);

/// How to report one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Routine, or already warned about recently: debug level.
    Debug,
    /// Someone should look: warning level. `failing_for` is how long the work has been
    /// failing (zero for a failure that is not routine).
    Warn {
        /// Time since the first failure of the current streak.
        failing_for: Duration,
    },
}

#[derive(Debug, Clone, Copy)]
struct Streak {
    since: Instant,
    last: Instant,
    warned: Option<Instant>,
}

/// Failure streaks by piece of work (`K`: an object key, a stage name).
#[derive(Debug, Clone)]
pub struct FailureStreaks<K> {
    streaks: BTreeMap<K, Streak>,
}

impl<K> Default for FailureStreaks<K> {
    fn default() -> Self {
        Self {
            streaks: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> FailureStreaks<K> {
    /// Records that `key` failed at `now`; `routine` says whether the failure is one a retry
    /// normally fixes. Returns how to report it.
    pub fn failed(&mut self, key: &K, routine: bool, now: Instant) -> Report {
        let streak = self.streaks.entry(key.clone()).or_insert(Streak {
            since: now,
            last: now,
            warned: None,
        });
        // A streak whose work stopped failing for a whole period without a success being
        // recorded (the work was no longer attempted) starts again.
        if now.saturating_duration_since(streak.last) >= PERSISTENT_AFTER {
            *streak = Streak {
                since: now,
                last: now,
                warned: None,
            };
        }
        streak.last = now;
        let failing_for = now.saturating_duration_since(streak.since);
        let persistent = !routine || failing_for >= PERSISTENT_AFTER;
        let quiet = streak
            .warned
            .is_some_and(|w| now.saturating_duration_since(w) < PERSISTENT_AFTER);
        if persistent && !quiet {
            streak.warned = Some(now);
            Report::Warn { failing_for }
        } else {
            Report::Debug
        }
    }

    /// Records that `key` succeeded: its streak ends.
    pub fn succeeded(&mut self, key: &K) {
        self.streaks.remove(key);
    }

    /// Forgets streaks that have not failed for [`PERSISTENT_AFTER`] (their work succeeded
    /// unrecorded, or its object is gone), so the map holds only work failing now.
    pub fn forget_stale(&mut self, now: Instant) {
        self.streaks
            .retain(|_, s| now.saturating_duration_since(s.last) < PERSISTENT_AFTER);
    }

    /// How many pieces of work are failing.
    pub fn len(&self) -> usize {
        self.streaks.len()
    }

    /// Whether nothing is failing.
    pub fn is_empty(&self) -> bool {
        self.streaks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn routine_failures_are_debug_until_they_persist_then_warn_once_a_period() {
        let t0 = Instant::now();
        let mut f = FailureStreaks::default();
        for s in [0, 1, 30, 59] {
            assert_eq!(
                f.failed(&"claim-a", true, secs(t0, s)),
                Report::Debug,
                "{s}"
            );
        }
        assert_eq!(
            f.failed(&"claim-a", true, secs(t0, 60)),
            Report::Warn {
                failing_for: Duration::from_secs(60)
            }
        );
        assert_eq!(f.failed(&"claim-a", true, secs(t0, 61)), Report::Debug);
        assert_eq!(f.failed(&"claim-a", true, secs(t0, 119)), Report::Debug);
        assert_eq!(
            f.failed(&"claim-a", true, secs(t0, 120)),
            Report::Warn {
                failing_for: Duration::from_secs(120)
            }
        );
    }

    #[test]
    fn a_success_ends_the_streak() {
        let t0 = Instant::now();
        let mut f = FailureStreaks::default();
        f.failed(&"a", true, t0);
        f.failed(&"a", true, secs(t0, 50));
        f.succeeded(&"a");
        assert!(f.is_empty());
        assert_eq!(f.failed(&"a", true, secs(t0, 70)), Report::Debug);
    }

    #[test]
    fn other_failures_warn_at_once_but_not_at_every_attempt() {
        let t0 = Instant::now();
        let mut f = FailureStreaks::default();
        assert_eq!(
            f.failed(&"a", false, t0),
            Report::Warn {
                failing_for: Duration::ZERO
            }
        );
        assert_eq!(f.failed(&"a", false, secs(t0, 1)), Report::Debug);
        // Another piece of work is reported on its own.
        assert!(matches!(
            f.failed(&"b", false, secs(t0, 1)),
            Report::Warn { .. }
        ));
        assert!(matches!(
            f.failed(&"a", false, secs(t0, 60)),
            Report::Warn { .. }
        ));
    }

    #[test]
    fn a_gap_of_a_period_starts_a_new_streak_and_stale_streaks_are_forgotten() {
        let t0 = Instant::now();
        let mut f = FailureStreaks::default();
        f.failed(&"a", true, t0);
        f.failed(&"b", true, secs(t0, 40));
        // `a` was not attempted for a minute: its failures at 0 s and 61 s are not one
        // minute-long streak.
        assert_eq!(f.failed(&"a", true, secs(t0, 61)), Report::Debug);
        f.forget_stale(secs(t0, 100));
        assert_eq!(
            f.len(),
            1,
            "b last failed 60 s ago and is forgotten; a is kept"
        );
        f.forget_stale(secs(t0, 121));
        assert!(f.is_empty());
    }
}
