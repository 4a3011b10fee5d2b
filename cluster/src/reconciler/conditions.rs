//! The NodeClaim conditions upstream's disruption and termination controllers keep, decided
//! from the index at each tick and written only when they change:
//! - `Consolidatable`: `True` once the pool's `consolidateAfter` has passed since the last
//!   pod event (or initialization); absent before, for uninitialized claims, under
//!   `consolidateAfter: Never` and for static pools' claims;
//! - `Drifted`: `True` with the drift's reason while the last disruption pass found the
//!   claim drifted, absent otherwise;
//! - `DisruptionReason`: `True` with the command's reason while a disruption command that
//!   passed validation holds the claim, removed when the command ends without deleting it;
//! - `Drained`: `Unknown` (`Draining`) while the deleting claim's Node drains, `True` once it
//!   is drained.
//!
//! Deleting claims keep their `Consolidatable`, `Drifted` and `DisruptionReason` as they
//! were, as upstream leaves them.

use super::{Reconciler, Tick};
use crate::{Action, ClusterState, termination};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::{ConditionStatus, ConditionType, StatusConditions};
use karpenter_disruption::{NodeInfo, PoolDisruption};
use karpenter_scheduling::model::Millis;

/// An identical change is sent again only after this long (the write may have failed).
const RESEND_MS: Millis = 5_000;

/// One condition to write: set to `status` with `reason` and `message`, or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionChange {
    /// The condition.
    pub type_: ConditionType,
    /// Its new value; `None` removes it.
    pub to: Option<(ConditionStatus, String, String)>,
}

impl ConditionChange {
    fn set(type_: ConditionType, status: ConditionStatus, reason: &str) -> Self {
        Self {
            type_,
            to: Some((status, reason.to_owned(), reason.to_owned())),
        }
    }

    fn clear(type_: ConditionType) -> Self {
        Self { type_, to: None }
    }

    /// Whether `claim` already carries what this change writes.
    fn holds(&self, claim: &NodeClaim) -> bool {
        let current = claim.condition(self.type_.as_str());
        match (&self.to, current) {
            (None, None) => true,
            (Some((status, reason, _)), Some(c)) => c.status == *status && c.reason == *reason,
            _ => false,
        }
    }
}

/// Writes `changes` into `claim` (transition times at `now`); returns whether anything
/// changed. The controller and the simulator both carry out
/// [`Action::SetClaimConditions`] with it.
pub fn apply(claim: &mut NodeClaim, changes: &[ConditionChange], now: Time) -> bool {
    let mut changed = false;
    for c in changes {
        changed |= match &c.to {
            Some((status, reason, message)) => {
                claim.set_condition(c.type_.as_str(), *status, reason, message, now.clone())
            }
            None => claim.clear_condition(c.type_.as_str()),
        };
    }
    changed
}

impl Reconciler {
    /// Emits the condition changes of every NodeClaim whose conditions differ from what the
    /// index says they should be, and wakes when a `consolidateAfter` window ends.
    pub(super) fn claim_conditions(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        let started = self.orchestrator.started();
        let mut sent = std::mem::take(&mut self.conditions_sent);
        sent.retain(|name, _| index.node_claims().contains_key(name));
        for (name, claim) in index.node_claims() {
            let mut changes = Vec::new();
            if claim.is_deleting() {
                if let Some(node) = index.joined_node(name).filter(|r| r.deleting) {
                    changes.push(if termination::drained(index, &node.node.name, now) {
                        ConditionChange::set(
                            ConditionType::Drained,
                            ConditionStatus::True,
                            "Drained",
                        )
                    } else {
                        ConditionChange::set(
                            ConditionType::Drained,
                            ConditionStatus::Unknown,
                            "Draining",
                        )
                    });
                }
            } else {
                changes.push(self.consolidatable(index, claim, now, tick));
                changes.push(match self.drifted.get(name) {
                    Some(reason) => {
                        ConditionChange::set(ConditionType::Drifted, ConditionStatus::True, reason)
                    }
                    None => ConditionChange::clear(ConditionType::Drifted),
                });
                changes.push(match started.get(name) {
                    Some(reason) => ConditionChange::set(
                        ConditionType::DisruptionReason,
                        ConditionStatus::True,
                        reason.as_str(),
                    ),
                    None => ConditionChange::clear(ConditionType::DisruptionReason),
                });
            }
            changes.retain(|c| !c.holds(claim));
            if changes.is_empty() {
                sent.remove(name);
                continue;
            }
            if sent
                .get(name)
                .is_some_and(|(last, at)| *last == changes && now - at < RESEND_MS)
            {
                continue;
            }
            sent.insert(name.clone(), (changes.clone(), now));
            tick.actions.push(Action::SetClaimConditions {
                node_claim: name.clone(),
                changes,
            });
        }
        self.conditions_sent = sent;
    }

    fn consolidatable(
        &self,
        index: &ClusterState,
        claim: &NodeClaim,
        now: Millis,
        tick: &mut Tick,
    ) -> ConditionChange {
        let clear = ConditionChange::clear(ConditionType::Consolidatable);
        let Some(pool) = claim.node_pool().and_then(|p| index.node_pools().get(p)) else {
            return clear;
        };
        let info = NodeInfo::from_node_claim(claim);
        // A static pool's claims are never consolidated, so upstream never marks them.
        if !info.initialized || pool.is_static() {
            return clear;
        }
        match info.consolidate_after_remaining(&PoolDisruption::from_node_pool(pool), now) {
            Some(0) => ConditionChange::set(
                ConditionType::Consolidatable,
                ConditionStatus::True,
                ConditionType::Consolidatable.as_str(),
            ),
            Some(left) => {
                tick.wake_at(now + left);
                clear
            }
            None => clear,
        }
    }
}
