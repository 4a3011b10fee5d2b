//! NodeClaim lifecycle: Launched → Registered → Initialized.
//!
//! In a cluster the kubelet registers the Node and the node's agents remove startup taints;
//! the lifecycle controller observes that and sets the conditions. Here the same transitions
//! are timed: a claim registers `registration` after it launched (the provider's launch
//! latency) and initializes `initialization` after it registered.

use super::{Action, ClusterState};
use karpenter_cloudprovider::v1::{ConditionType, NodeClaim};
use karpenter_scheduling::model::Millis;

/// How long the lifecycle steps take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Launched → Registered.
    pub registration: Millis,
    /// Registered → Initialized.
    pub initialization: Millis,
}

fn since(claim: &NodeClaim, t: ConditionType) -> Option<Millis> {
    claim
        .get_condition(t)
        .filter(|_| claim.is(t))
        .map(|c| c.last_transition_time.0.as_millisecond())
}

/// The transitions due at `now` (in NodeClaim name order), and the earliest later instant at
/// which another one falls due.
pub fn step(state: &ClusterState, timings: Timings, now: Millis) -> (Vec<Action>, Option<Millis>) {
    let mut actions = Vec::new();
    let mut next: Option<Millis> = None;
    let mut later = |t: Millis| next = Some(next.map_or(t, |n: Millis| n.min(t)));
    for (name, claim) in state.node_claims() {
        if claim.is_deleting() {
            continue;
        }
        if let Some(registered) = since(claim, ConditionType::Registered) {
            if claim.is(ConditionType::Initialized) {
                continue;
            }
            let due = registered + timings.initialization;
            if due <= now {
                actions.push(Action::InitializeNode {
                    node_claim: name.clone(),
                });
            } else {
                later(due);
            }
        } else if let Some(launched) = since(claim, ConditionType::Launched) {
            let due = launched + timings.registration;
            if due <= now {
                actions.push(Action::RegisterNode {
                    node_claim: name.clone(),
                });
            } else {
                later(due);
            }
        }
    }
    (actions, next)
}
