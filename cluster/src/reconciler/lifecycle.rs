//! NodeClaim lifecycle in the tick: each maturing claim's next step
//! ([`registration::next_step`]) becomes an action, so the controller and the simulator
//! launch, register and initialize from the same decisions and time out the same claims.
//! Each registration and each timeout also counts, once per claim, towards its NodePool's
//! `NodeRegistrationHealthy` ([`crate::registration_health`]).

use super::{Event, Reconciler, Tick};
use crate::deletion::DeletionCause;
use crate::registration::{self, Step};
use crate::registration_health::Outcome;
use crate::{Action, ClusterState};
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::{ConditionType, StatusConditions};
use karpenter_scheduling::model::Millis;

impl Reconciler {
    /// One step for every claim lifecycle still has work for; a claim waiting for its Node
    /// asks for a wakeup at the end of its registration window.
    pub(super) fn mature(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        self.observe_pools(index);
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
                Step::Register { node } => {
                    self.count_outcome(index, claim, Outcome::Registered);
                    Action::RegisterNode { node_claim, node }
                }
                Step::Initialize { node } => Action::InitializeNode { node_claim, node },
                Step::Delete { timeout, message } => {
                    let launch_failure = claim
                        .condition(ConditionType::Launched.as_str())
                        .filter(|c| c.status != karpenter_cloudprovider::v1::ConditionStatus::True)
                        .map(|c| (c.reason.clone(), c.message.clone()));
                    self.count_outcome(index, claim, Outcome::Failed { launch_failure });
                    tick.events.push(Event::LifecycleTimeout {
                        node_claim: node_claim.clone(),
                        reason: timeout.event_reason(),
                        message,
                    });
                    Action::DeleteNodeClaim {
                        node_claim,
                        cause: DeletionCause::LifecycleTimeout(timeout),
                    }
                }
            };
            tick.actions.push(action);
        }
    }

    /// Keeps each pool's registration window in line with the pool and its NodeClass.
    fn observe_pools(&mut self, index: &ClusterState) {
        for pool in index.node_pools().values() {
            let class = index.node_class_readiness(pool).generation();
            self.registration_health.observe(pool, class);
        }
        let live: std::collections::BTreeSet<&str> = index
            .node_pools()
            .values()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        self.registration_health.retain(|uid| live.contains(uid));
        // Only a maturing claim can report an outcome again, so only those need
        // remembering; the set stays as small as the claims in flight.
        self.outcomes_counted.retain(|c| index.maturing.contains(c));
    }

    /// Counts `claim`'s outcome for its NodePool once, if the pool still owns it (a claim
    /// of an older pool of the same name does not count, as upstream checks the owner UID).
    fn count_outcome(&mut self, index: &ClusterState, claim: &NodeClaim, outcome: Outcome) {
        let Some(pool) = claim.node_pool().and_then(|p| index.node_pools().get(p)) else {
            return;
        };
        let Some(uid) = pool.metadata.uid.as_deref() else {
            return;
        };
        let owned = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "NodePool" && o.uid == uid);
        if owned && self.outcomes_counted.insert(claim.name().to_owned()) {
            self.registration_health.record(uid, &outcome);
        }
    }
}
