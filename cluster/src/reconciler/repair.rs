//! Node repair in the tick (feature gate `NodeRepair`: the caller passes the provider's
//! repair policies, none when the gate is off). Verdicts come from [`crate::repair::decide`];
//! here they become actions, and blocked repairs events, re-reported at most every
//! [`BLOCKED_REPORT_INTERVAL_MS`] per node as upstream re-checks them.

use super::{Event, ProviderFacts, Reconciler, Tick};
use crate::repair::{self, Verdict};
use crate::{Action, ClusterState};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// How often a blocked repair is reported again (upstream re-checks every 5 minutes).
pub const BLOCKED_REPORT_INTERVAL_MS: Millis = 5 * 60_000;

impl Reconciler {
    pub(super) fn repair(
        &mut self,
        index: &ClusterState,
        facts: &ProviderFacts,
        now: Millis,
        tick: &mut Tick,
    ) {
        // Since Karpenter v1.15 repair is a disruption method; this controller is the
        // legacy one (`--legacy-node-repair`).
        if facts.repair_policies.is_empty() || self.settings.disruption.node_repair {
            self.repair_blocked.clear();
            return;
        }
        if let Some((generation, until)) = self.repair_memo
            && generation == index.generation()
            && now < until
        {
            tick.wake_at(until);
            return;
        }
        let (verdicts, next_due) = repair::decide(index, facts.repair_policies, now);
        let mut until = next_due.unwrap_or(Millis::MAX);
        let mut blocked = BTreeMap::new();
        let mut repairing = false;
        for verdict in verdicts {
            match verdict {
                Verdict::Repair {
                    node,
                    node_claim,
                    condition,
                } => {
                    repairing = true;
                    // The legacy controller drains forcefully.
                    tick.actions.push(Action::RepairNodeClaim {
                        node_claim,
                        node,
                        condition,
                        drain_bound: Some(0),
                        legacy: true,
                    });
                }
                Verdict::Blocked {
                    node,
                    node_claim,
                    node_pool,
                } => {
                    let last = self.repair_blocked.get(&node).copied();
                    let mut reported = last.unwrap_or(now);
                    if last.is_none_or(|t| t + BLOCKED_REPORT_INTERVAL_MS <= now) {
                        reported = now;
                        tick.events.push(Event::RepairBlocked {
                            node: node.clone(),
                            node_claim,
                            node_pool,
                        });
                    }
                    until = until.min(reported + BLOCKED_REPORT_INTERVAL_MS);
                    blocked.insert(node, reported);
                }
            }
        }
        self.repair_blocked = blocked;
        // A repair that failed to execute leaves the index as it was: decide again next tick.
        self.repair_memo = (!repairing).then_some((index.generation(), until));
        if until < Millis::MAX {
            tick.wake_at(until);
        }
    }
}
