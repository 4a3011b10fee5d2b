//! Upstream's pod-events controller: a NodeClaim's `status.lastPodEventTime` follows the
//! pods arriving on and leaving its node, written at most once per [`DEDUPE_MS`], and
//! `consolidateAfter` counts from it.

use super::{Reconciler, Tick};
use crate::{Action, ClusterState};
use karpenter_scheduling::model::Millis;

/// A claim stamped less than this long ago is not stamped again (upstream's dedupe
/// timeout).
pub const DEDUPE_MS: Millis = 10_000;

impl Reconciler {
    /// Stamps the claims of the nodes with pod events since the previous tick.
    pub(super) fn stamp_pod_events(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        let mut seen = self.pod_events_seen;
        for (generation, node) in index.pod_events_after(self.pod_events_seen) {
            seen = seen.max(generation);
            let Some(claim) = index
                .nodes()
                .get(node)
                .and_then(|r| r.node_claim.as_ref())
                .and_then(|c| index.node_claims().get(c))
            else {
                continue;
            };
            let last = claim
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_ref())
                .map(|t| t.0.as_millisecond());
            if claim.is_deleting() || last.is_some_and(|t| now - t < DEDUPE_MS) {
                continue;
            }
            tick.actions.push(Action::StampPodEvent {
                node_claim: claim.name().to_owned(),
                at: now,
            });
        }
        self.pod_events_seen = seen;
    }

    /// Whether the index holds pod events the next tick would stamp: a driver ticks again
    /// soon (the controller within its pass interval) rather than letting them wait.
    pub fn has_pod_events(&self, index: &ClusterState) -> bool {
        index
            .pod_events_after(self.pod_events_seen)
            .next()
            .is_some()
    }
}
