//! When pods finish binding and starting, for Karpenter's
//! `karpenter_pods_bound_duration_seconds` (creation to `PodScheduled=True`) and
//! `karpenter_pods_startup_duration_seconds` (creation to Running and Ready). A pod counts
//! once, when it is seen to turn bound (or running and ready) after having been seen without
//! it, so a restarted controller does not count again every pod already in the cluster.

use crate::api_objects::pod_key;
use k8s_openapi::api::core::v1::Pod;
use karpenter_scheduling::model::{Millis, PodKey};
use std::collections::BTreeSet;

/// Durations a pod completed, in seconds since its creation.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Seen {
    /// It just turned bound.
    pub bound_seconds: Option<f64>,
    /// It just turned running and ready.
    pub startup_seconds: Option<f64>,
}

/// Phase `Running` with `Ready=True`.
pub fn pod_running_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Pods seen unbound, and seen bound but not yet running and ready.
#[derive(Debug, Default)]
pub struct PodTransitions {
    unbound: BTreeSet<PodKey>,
    starting: BTreeSet<PodKey>,
}

fn condition_time_ms(pod: &Pod, type_: &str) -> Option<Millis> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Millis::MIN, |t| t.0.as_millisecond())
        })
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

impl PodTransitions {
    /// Looks at one changed pod at `now`: the durations it just completed, if it turned
    /// bound or running after having been seen without it.
    pub fn observe(&mut self, pod: &Pod, now: Millis) -> Seen {
        let mut seen = Seen::default();
        let Some(created) = pod.metadata.creation_timestamp.as_ref() else {
            return seen;
        };
        let created = created.0.as_millisecond();
        let key = pod_key(pod);
        // A transition time before creation (or missing) says nothing; `now` is the
        // latest the transition can have happened.
        let since = |at: Option<Millis>| {
            let at = at.filter(|t| *t >= created).unwrap_or(now);
            (at - created).max(0) as f64 / 1000.0
        };
        if !is_bound(pod) {
            self.unbound.insert(key.clone());
            self.starting.insert(key);
            return seen;
        }
        if self.unbound.remove(&key) {
            seen.bound_seconds = Some(since(condition_time_ms(pod, "PodScheduled")));
        }
        if pod_running_ready(pod) {
            if self.starting.remove(&key) {
                seen.startup_seconds = Some(since(condition_time_ms(pod, "Ready")));
            }
        } else if pod.metadata.deletion_timestamp.is_none() {
            self.starting.insert(key);
        }
        seen
    }

    /// Forgets a pod that is gone.
    pub fn forget(&mut self, key: &PodKey) {
        self.unbound.remove(key);
        self.starting.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_testing::api::pod_with_conditions as pod;

    #[test]
    fn each_transition_is_seen_once() {
        let mut p = PodTransitions::default();
        assert_eq!(p.observe(&pod(None, None, None), 2_000), Seen::default());
        let bound = p.observe(&pod(Some("n1"), Some(31_000), None), 40_000);
        assert_eq!(bound.bound_seconds, Some(30.0), "bound 30 s after creation");
        assert_eq!(bound.startup_seconds, None);
        assert_eq!(
            p.observe(&pod(Some("n1"), Some(31_000), None), 41_000),
            Seen::default(),
            "bound is seen once"
        );
        let started = p.observe(&pod(Some("n1"), Some(31_000), Some(61_000)), 70_000);
        assert_eq!(started.startup_seconds, Some(60.0));
        assert_eq!(
            p.observe(&pod(Some("n1"), Some(31_000), Some(61_000)), 80_000),
            Seen::default(),
            "startup is seen once"
        );
    }

    #[test]
    fn pods_already_running_when_first_seen_are_not_counted() {
        let mut p = PodTransitions::default();
        assert_eq!(
            p.observe(&pod(Some("n1"), Some(2_000), Some(3_000)), 900_000),
            Seen::default()
        );
    }

    #[test]
    fn a_transition_time_before_creation_counts_from_now() {
        let mut p = PodTransitions::default();
        p.observe(&pod(None, None, None), 2_000);
        let seen = p.observe(&pod(Some("n1"), Some(500), None), 11_000);
        assert_eq!(seen.bound_seconds, Some(10.0));
    }
}
