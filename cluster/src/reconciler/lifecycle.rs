//! NodeClaim lifecycle in the tick: each maturing claim's next step
//! ([`registration::next_step`]) becomes an action, so the controller and the simulator
//! launch, register and initialize from the same decisions and time out the same claims.

use super::{Event, Reconciler, Tick};
use crate::registration::{self, Step};
use crate::{Action, ClusterState};
use karpenter_scheduling::model::Millis;

impl Reconciler {
    /// One step for every claim lifecycle still has work for; a claim waiting for its Node
    /// asks for a wakeup at the end of its registration window.
    pub(super) fn mature(&self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        for (claim, node) in index.maturing_claims() {
            let node_claim = claim.name().to_owned();
            let action = match registration::next_step(claim, node, now) {
                Step::Wait => {
                    if let Some(at) = registration::deadline(claim) {
                        tick.wake_at(at);
                    }
                    continue;
                }
                Step::AddFinalizer => Action::AddTerminationFinalizer { node_claim },
                Step::Launch => Action::LaunchInstance { node_claim },
                Step::Register { node } => Action::RegisterNode { node_claim, node },
                Step::Initialize { node } => Action::InitializeNode { node_claim, node },
                Step::Delete { reason, message } => {
                    tick.events.push(Event::LifecycleTimeout {
                        node_claim: node_claim.clone(),
                        reason,
                        message,
                    });
                    Action::DeleteNodeClaim {
                        node_claim,
                        reason: metric_reason(reason).to_owned(),
                    }
                }
            };
            tick.actions.push(action);
        }
    }
}

/// Upstream's `reason` label on `karpenter_nodeclaims_disrupted_total` for a claim given up
/// by lifecycle (the event reason is CamelCase, the metric's snake case).
fn metric_reason(reason: &str) -> &str {
    match reason {
        "LaunchTimeout" => "launch_timeout",
        "RegistrationTimeout" => "registration_timeout",
        other => other,
    }
}
