//! client-go's leader-election rules for a `coordination.k8s.io/v1` Lease, as pure
//! functions of the Lease and the caller's clock: when a candidate may take it, the spec it
//! writes when it does, when a holder that cannot renew steps down ([`Standing`]), and the
//! Lease it leaves behind when it lets go. The controller carries them out against the API
//! server.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use std::time::{Duration, Instant};

/// Seconds a Lease stays valid without renewal (controller-runtime's default).
pub const LEASE_DURATION_SECS: u64 = 15;
/// Seconds the holder keeps trying to renew before it gives leadership up
/// (controller-runtime's default).
pub const RENEW_DEADLINE_SECS: u64 = 10;
/// Seconds between attempts to acquire or renew (controller-runtime's default).
pub const RETRY_PERIOD_SECS: u64 = 2;
// A holder must stop acting before any candidate may take its Lease over.
const _: () = assert!(RENEW_DEADLINE_SECS < LEASE_DURATION_SECS);

/// What a candidate last saw of the Lease record, and when (on its own monotonic clock).
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// `holderIdentity`, empty when free.
    pub holder: String,
    /// `renewTime`.
    pub renew: Option<Timestamp>,
    /// `leaseDurationSeconds`.
    pub duration: Duration,
    /// When this record was first seen.
    pub at: Instant,
}

impl Observed {
    /// Whether `me` may take a Lease last seen changing as `self`, at `now`: it is free,
    /// already ours, or unrenewed for a whole lease duration as measured on our own clock
    /// (so clock skew between replicas cannot shorten a lease).
    pub fn may_take(&self, me: &str, now: Instant) -> bool {
        self.holder.is_empty() || self.holder == me || now >= self.at + self.duration
    }
}

/// Records in `slot` what `lease` shows at `now`; the time of observation is kept while the
/// record stays the same.
pub fn observe<'a>(slot: &'a mut Option<Observed>, lease: &Lease, now: Instant) -> &'a Observed {
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let renew = spec.renew_time.map(|t| t.0);
    let duration = Duration::from_secs(
        spec.lease_duration_seconds
            .map_or(LEASE_DURATION_SECS, |d| {
                u64::try_from(d.max(1)).unwrap_or(1)
            }),
    );
    let same = slot
        .as_ref()
        .is_some_and(|o| o.holder == holder && o.renew == renew && o.duration == duration);
    if !same {
        *slot = None;
    }
    slot.get_or_insert(Observed {
        holder,
        renew,
        duration,
        at: now,
    })
}

/// The spec `identity` writes to take or renew a Lease whose spec was `previous` (`None`
/// for a new Lease) at `now`: the acquire time is kept on renewal, and a change of holder
/// counts a transition.
pub fn next_spec(previous: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> LeaseSpec {
    let now = MicroTime(now);
    let ours = previous.and_then(|s| s.holder_identity.as_deref()) == Some(identity);
    let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(LEASE_DURATION_SECS as i32),
        acquire_time: if ours {
            previous.and_then(|s| s.acquire_time.clone())
        } else {
            Some(now.clone())
        },
        renew_time: Some(now),
        lease_transitions: Some(if ours || previous.is_none() {
            transitions
        } else {
            transitions + 1
        }),
        ..LeaseSpec::default()
    }
}

/// A replica's standing in the election, advanced after every attempt to take or renew
/// the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    leading: bool,
    /// When the Lease was last taken or renewed (meaningful while leading).
    renewed: Instant,
}

/// What one attempt changed in a [`Standing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing: still a candidate, or still the holder.
    None,
    /// A candidate took the Lease: it may act from now on.
    Acquired,
    /// The holder could not renew for the renew deadline and must stop acting (the
    /// controller then exits and comes back as a candidate, as client-go's election does).
    SteppedDown,
}

impl Standing {
    /// The standing after the first attempt, made at `now`, did (`held`) or did not take the
    /// Lease.
    pub fn new(held: bool, now: Instant) -> Self {
        Self {
            leading: held,
            renewed: now,
        }
    }

    /// Whether this replica holds the Lease.
    pub fn leading(&self) -> bool {
        self.leading
    }

    /// Records an attempt at `now` that did (`held`) or did not (another holder, a lost
    /// race, an API error) end with this replica holding the Lease. A holder keeps trying
    /// until the renew deadline, which ends before any candidate may take the Lease (a
    /// lease duration after the last renewal), so two replicas never act at once.
    pub fn after_attempt(&mut self, held: bool, now: Instant) -> Change {
        if held {
            self.renewed = now;
            if self.leading {
                return Change::None;
            }
            self.leading = true;
            return Change::Acquired;
        }
        let deadline = Duration::from_secs(RENEW_DEADLINE_SECS);
        if self.leading && now.saturating_duration_since(self.renewed) >= deadline {
            self.leading = false;
            return Change::SteppedDown;
        }
        Change::None
    }
}

/// The Lease `identity` writes to let `lease` go at `now`, so a standby takes over at once:
/// no holder and a one-second duration. `None` when `identity` does not hold it.
pub fn released(mut lease: Lease, identity: &str, now: Timestamp) -> Option<Lease> {
    let spec = lease.spec.as_mut()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    Some(lease)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_taken_when_free_ours_or_unrenewed_for_its_duration() {
        let at = Instant::now();
        let seen = |holder: &str| Observed {
            holder: holder.into(),
            renew: None,
            duration: Duration::from_secs(LEASE_DURATION_SECS),
            at,
        };
        assert!(seen("").may_take("a", at));
        assert!(seen("a").may_take("a", at));
        assert!(!seen("b").may_take("a", at));
        assert!(!seen("b").may_take("a", at + Duration::from_secs(14)));
        assert!(seen("b").may_take("a", at + Duration::from_secs(15)));
    }

    #[test]
    fn the_observation_time_is_kept_while_the_record_is_unchanged() {
        let t0 = Instant::now();
        let lease = |holder: &str, renew: i64| Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(Timestamp::from_second(renew).unwrap())),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let mut slot = None;
        observe(&mut slot, &lease("b", 1), t0);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(observe(&mut slot, &lease("b", 1), later).at, t0);
        assert_eq!(
            observe(&mut slot, &lease("b", 2), later).at,
            later,
            "renewed"
        );
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let first = next_spec(None, "a", t(10));
        assert_eq!(first.lease_transitions, Some(0));
        let renewed = next_spec(Some(&first), "a", t(12));
        assert_eq!(renewed.acquire_time, Some(MicroTime(t(10))));
        assert_eq!(renewed.renew_time, Some(MicroTime(t(12))));
        let taken = next_spec(Some(&renewed), "b", t(30));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(MicroTime(t(30))));
    }

    #[test]
    fn a_candidate_acquires_and_a_holder_steps_down_only_after_the_renew_deadline() {
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        let mut standing = Standing::new(false, t0);
        assert!(!standing.leading());
        assert_eq!(
            standing.after_attempt(false, at(30)),
            Change::None,
            "a candidate"
        );
        assert_eq!(standing.after_attempt(true, at(32)), Change::Acquired);
        assert!(standing.leading());
        assert_eq!(
            standing.after_attempt(true, at(34)),
            Change::None,
            "renewed"
        );
        // Renewals fail from 34 s: the holder keeps trying until 34 + 10 s.
        assert_eq!(standing.after_attempt(false, at(36)), Change::None);
        assert_eq!(standing.after_attempt(false, at(43)), Change::None);
        assert_eq!(standing.after_attempt(false, at(44)), Change::SteppedDown);
        assert!(!standing.leading());
        let mut first = Standing::new(true, t0);
        assert!(first.leading());
        assert_eq!(first.after_attempt(false, at(9)), Change::None);
        assert_eq!(first.after_attempt(true, at(9)), Change::None);
        // A replica that stepped down is a candidate again and can take the Lease back.
        assert_eq!(standing.after_attempt(false, at(50)), Change::None);
        assert_eq!(standing.after_attempt(true, at(52)), Change::Acquired);
        assert!(standing.leading());
    }

    #[test]
    fn only_the_holder_releases_and_the_released_lease_is_free_at_once() {
        let now = Timestamp::from_second(100).unwrap();
        let held_by = |holder: &str| Lease {
            spec: Some(next_spec(None, holder, Timestamp::from_second(90).unwrap())),
            ..Lease::default()
        };
        assert_eq!(released(held_by("b"), "a", now), None);
        assert_eq!(released(Lease::default(), "a", now), None);
        let spec = released(held_by("a"), "a", now).unwrap().spec.unwrap();
        assert_eq!(spec.holder_identity, None);
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        let mut slot = None;
        let lease = Lease {
            spec: Some(spec),
            ..Lease::default()
        };
        let t = Instant::now();
        assert!(observe(&mut slot, &lease, t).may_take("b", t), "free");
    }
}
