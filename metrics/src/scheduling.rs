//! Upstream's provisioning-relative pod timers: when Karpenter first saw a pod as
//! provisionable (its ack), when a plan first decided about it, and when a plan first found
//! it a place. [`crate::pods::PodMetrics`] acks pods and turns these times into
//! `karpenter_pods_provisioning_*` and
//! `karpenter_pods_provisioning_scheduling_undecided_time_seconds`; the plans
//! ([`karpenter_cluster::reconciler::Event::Planned`]) record the decisions and
//! `karpenter_pods_scheduling_decision_duration_seconds`.

use crate::Metrics;
use karpenter_scheduling::Plan;
use karpenter_scheduling::model::{Millis, PodKey};
use std::collections::BTreeMap;

/// The times kept per pod until it is gone or has started.
#[derive(Debug, Default)]
pub(crate) struct PodScheduling {
    /// When the pod was first seen provisionable.
    pub(crate) acks: BTreeMap<PodKey, Millis>,
    /// When a plan first decided about it (placed or not).
    pub(crate) decided: BTreeMap<PodKey, Millis>,
    /// When a plan first placed it; dropped when a later plan cannot.
    pub(crate) schedulable: BTreeMap<PodKey, Millis>,
}

impl PodScheduling {
    /// Forgets `pod` (gone, or started: nothing more is timed for it).
    pub(crate) fn forget(&mut self, pod: &PodKey) {
        self.acks.remove(pod);
        self.decided.remove(pod);
        self.schedulable.remove(pod);
    }
}

fn seconds(from: Millis, to: Millis) -> f64 {
    (to - from).max(0) as f64 / 1000.0
}

impl Metrics {
    /// Records the decisions of a plan made at `at`: each pod's first decision is timed from
    /// its ack; placed pods become schedulable from their first placement, and unplaced ones
    /// lose that time, as upstream's `MarkPodSchedulingDecisions`.
    pub(crate) fn observe_decisions(&self, plan: &Plan, at: Millis) {
        let mut s = self
            .pod_scheduling
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let placed = (plan.existing.iter().flat_map(|p| &p.pods))
            .chain(plan.new_node_claims.iter().flat_map(|c| &c.pods));
        let mut decided = Vec::new();
        for pod in placed {
            s.schedulable.entry(pod.clone()).or_insert(at);
            decided.push(pod);
        }
        // A pod deferred for reserved capacity has no decision yet.
        for u in plan.unschedulable.iter().filter(|u| !u.deferred) {
            s.schedulable.remove(&u.pod);
            decided.push(&u.pod);
        }
        for pod in decided {
            if s.decided.contains_key(pod) {
                continue;
            }
            s.decided.insert(pod.clone(), at);
            if let Some(ack) = s.acks.get(pod) {
                (self.pods_scheduling_decision_duration).observe(seconds(*ack, at));
            }
        }
    }
}
