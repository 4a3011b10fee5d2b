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
use karpenter_disruption::Reason;
use karpenter_disruption::{NodeInfo, PoolDisruption};
use karpenter_scheduling::model::Millis;
use std::collections::{BTreeMap, BTreeSet};

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
    /// Sets `type_` to `status` with `reason` as reason and message.
    pub fn set(type_: ConditionType, status: ConditionStatus, reason: &str) -> Self {
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

/// What the conditions step remembers between ticks, so that a tick visits only the claims
/// whose conditions may have changed, not every claim.
#[derive(Debug, Default)]
pub(super) struct ConditionsState {
    /// The index generation of the last visit (0: none yet, visit every claim).
    seen: u64,
    /// When a claim's `consolidateAfter` window ends, by time.
    windows: BTreeMap<Millis, BTreeSet<String>>,
    /// The claims of started commands at the last visit.
    started: BTreeMap<String, Reason>,
    /// The drifted claims at the last visit.
    drifted: BTreeMap<String, String>,
    /// Changes last asked for, per NodeClaim, and when.
    sent: BTreeMap<String, (Vec<ConditionChange>, Millis)>,
}

impl ConditionsState {
    /// The claims to visit at `now`: every claim on the first visit or after a NodePool
    /// changed; otherwise the claims that changed, whose window ended, whose command or drift
    /// changed, that are deleting (their drain moves on with their pods), or whose last write
    /// has not shown in the index yet.
    fn claims_to_visit(
        &mut self,
        index: &ClusterState,
        started: &BTreeMap<String, Reason>,
        drifted: &BTreeMap<String, String>,
        now: Millis,
    ) -> BTreeSet<String> {
        if self.seen == 0 || index.pools_changed_after(self.seen) {
            self.windows.clear();
            return index.node_claims().keys().cloned().collect();
        }
        let mut visit: BTreeSet<String> = index
            .claims_changed_after(self.seen)
            .map(str::to_owned)
            .collect();
        let later = self.windows.split_off(&(now + 1));
        for (_, claims) in std::mem::replace(&mut self.windows, later) {
            visit.extend(claims);
        }
        if *started != self.started {
            visit.extend(started.keys().chain(self.started.keys()).cloned());
        }
        if *drifted != self.drifted {
            visit.extend(drifted.keys().chain(self.drifted.keys()).cloned());
        }
        visit.extend(index.deleting_claims().map(|(c, _)| c.name().to_owned()));
        visit.extend(self.sent.keys().cloned());
        visit
    }
}

impl Reconciler {
    /// Emits the condition changes of the NodeClaims whose conditions differ from what the
    /// index says they should be, visiting only those that may have changed, and wakes when a
    /// `consolidateAfter` window ends.
    pub(super) fn claim_conditions(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        let started = self.orchestrator.started();
        let mut state = std::mem::take(&mut self.conditions);
        let visit = state.claims_to_visit(index, &started, &self.drifted, now);
        for name in visit {
            let Some(claim) = index.node_claims().get(&name) else {
                state.sent.remove(&name);
                continue;
            };
            let mut changes = Vec::new();
            if claim.is_deleting() {
                if let Some(node) = index.joined_node(&name).filter(|r| r.deleting) {
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
                changes.push(consolidatable(index, claim, now, &mut state.windows, tick));
                changes.push(match self.drifted.get(&name) {
                    Some(reason) => {
                        ConditionChange::set(ConditionType::Drifted, ConditionStatus::True, reason)
                    }
                    None => ConditionChange::clear(ConditionType::Drifted),
                });
                changes.push(match started.get(&name) {
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
                state.sent.remove(&name);
                continue;
            }
            if state
                .sent
                .get(&name)
                .is_some_and(|(last, at)| *last == changes && now - at < RESEND_MS)
            {
                continue;
            }
            state.sent.insert(name.clone(), (changes.clone(), now));
            tick.actions.push(Action::SetClaimConditions {
                node_claim: name,
                changes,
            });
        }
        state.seen = index.generation();
        state.started = started;
        state.drifted.clone_from(&self.drifted);
        self.conditions = state;
    }
}

fn consolidatable(
    index: &ClusterState,
    claim: &NodeClaim,
    now: Millis,
    windows: &mut BTreeMap<Millis, BTreeSet<String>>,
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
            windows
                .entry(now + left)
                .or_default()
                .insert(claim.name().to_owned());
            clear
        }
        None => clear,
    }
}
