//! client-go's leader-election rules for a `coordination.k8s.io/v1` Lease, as pure
//! functions of the Lease and the caller's clock: when a candidate may take it, and the spec
//! it writes when it does. The controller carries them out against the API server.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use std::time::{Duration, Instant};

/// Seconds a Lease stays valid without renewal (controller-runtime's default).
pub const LEASE_DURATION_SECS: u64 = 15;

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
}
