//! The simulated kubelet and node agents: the world half of NodeClaim lifecycle.
//!
//! In a cluster the instance boots, its kubelet registers a Node, and the node's agents
//! remove their startup taints before it turns Ready; Karpenter observes each change and
//! sets the NodeClaim's conditions. Here the world changes are timed: a launched claim's
//! Node joins `registration` after the launch (the provider's launch latency) and is Ready,
//! startup taints gone, `initialization` after Karpenter registered it. The decisions
//! (Registered, Initialized) are the shared reconciler's, as in the controller.

use karpenter_cloudprovider::v1::{ConditionType, NodeClaim};
use karpenter_cluster::{ClusterState, Kubelet};
use karpenter_scheduling::model::Millis;

/// How long the world takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Launched → the Node joins.
    pub registration: Millis,
    /// Registered → the Node is Ready with its startup taints removed.
    pub initialization: Millis,
}

/// A change of a claim's Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The Node joins (not Ready yet).
    Join(String),
    /// The Node turns Ready and its agents remove the startup taints.
    Ready(String),
}

fn since(claim: &NodeClaim, t: ConditionType) -> Option<Millis> {
    claim
        .get_condition(t)
        .filter(|_| claim.is(t))
        .map(|c| c.last_transition_time.0.as_millisecond())
}

/// The Node changes due at `now` (in NodeClaim name order), and the earliest later instant
/// at which another falls due. Only claims lifecycle still has work for are looked at.
pub fn step(state: &ClusterState, timings: Timings, now: Millis) -> (Vec<Change>, Option<Millis>) {
    let mut changes = Vec::new();
    let mut next: Option<Millis> = None;
    for (claim, node) in state.maturing_claims() {
        let name = claim.name().to_owned();
        let due = match node.map(|n| &n.kubelet) {
            None | Some(Kubelet::NotJoined) => since(claim, ConditionType::Launched)
                .map(|t| (t + timings.registration, Change::Join(name))),
            Some(k) if k.initializable() => None,
            Some(Kubelet::Joined { .. }) => since(claim, ConditionType::Registered)
                .map(|t| (t + timings.initialization, Change::Ready(name))),
        };
        match due {
            Some((at, change)) if at <= now => changes.push(change),
            Some((at, _)) => next = Some(next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    (changes, next)
}
