//! Node repair as a disruption method (Karpenter v1.15's `Repair`): the first method of a
//! pass. A node whose conditions call for repair ([`crate::NodeInfo::repair`]) is replaced
//! like a drifted node — its pods' new capacity launches first — paced by the pool's
//! disruption budget for `Unhealthy`, one command per pass, the highest repair score first.
//!
//! What is particular to repair, as upstream:
//! - it takes nodes the other methods leave: a node annotated `karpenter.sh/do-not-disrupt`
//!   and a registered node that has not initialized (an uninitialized node needs no budget);
//! - `karpenter.sh/do-not-repair` keeps it away;
//! - a node whose pods block eviction (a PodDisruptionBudget, `do-not-disrupt` pods) is taken
//!   only when the drain is bounded, by the policy or the NodeClaim's
//!   `terminationGracePeriod`, and the command carries the shorter bound;
//! - repair stops in a pool where more than 20 % (rounded up) of the nodes are unhealthy.

use crate::candidate::Candidate;
use crate::command::{Command, Hold, RepairRef};
use crate::input::DisruptionInput;
use crate::pass::build_command;
use crate::reason::Reason;
use karpenter_scheduling::model::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// Share of a pool's nodes (rounded up) that may be unhealthy while repair goes on.
pub const ALLOWED_UNHEALTHY_PERCENT: u64 = 20;

/// The pools where more than [`ALLOWED_UNHEALTHY_PERCENT`] of the Karpenter-managed nodes
/// have a condition the repair policies cover, toleration or not.
pub(crate) fn tripped_pools(input: &DisruptionInput) -> BTreeSet<String> {
    let mut health: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for node in &input.cluster.nodes {
        let (Some(info), Some(pool)) =
            (input.nodes.get(&node.name), crate::candidate::pool_of(node))
        else {
            continue;
        };
        let e = health.entry(pool).or_default();
        e.0 += 1;
        e.1 += u64::from(info.unhealthy);
    }
    health
        .into_iter()
        .filter(|(_, (total, bad))| *bad > (total * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100))
        .map(|(pool, _)| pool.to_owned())
        .collect()
}

/// The drain bound of repairing `c` whose policy bound is `policy`: the shorter of it and
/// the NodeClaim's `terminationGracePeriod`; `None` (the claim's own) without a policy bound.
pub(crate) fn drain_bound(policy: Option<Millis>, claim: Option<Millis>) -> Option<Millis> {
    let bound = policy?;
    Some(claim.map_or(bound, |c| c.min(bound)))
}

/// Repair's candidates, in repair order, and the holds of those it must skip: score first
/// (higher first), then the lower disruption cost, then the node name.
pub(crate) fn eligible<'c>(
    input: &DisruptionInput,
    cands: impl Iterator<Item = &'c Candidate>,
) -> (Vec<&'c Candidate>, Vec<(String, Hold)>) {
    let mut out = Vec::new();
    let mut holds = Vec::new();
    for c in cands {
        let Some(info) = input.nodes.get(&c.node) else {
            continue;
        };
        let Some(need) = &info.repair else { continue };
        if info.do_not_repair {
            holds.push((c.node.clone(), Hold::DoNotRepair));
            continue;
        }
        if c.pod_block.is_some()
            && need.termination_grace_period.is_none()
            && info.termination_grace_period.is_none()
        {
            holds.push((c.node.clone(), Hold::RepairNeedsDrainBound));
            continue;
        }
        out.push(c);
    }
    let score = |c: &Candidate| {
        input
            .nodes
            .get(&c.node)
            .and_then(|i| i.repair.as_ref())
            .map_or(0.0, |r| r.score)
    };
    out.sort_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then_with(|| a.disruption_cost.total_cmp(&b.disruption_cost))
            .then_with(|| a.node.cmp(&b.node))
    });
    (out, holds)
}

/// The command repairing `c` with `replacements`, made at `now`.
pub(crate) fn command(
    input: &DisruptionInput,
    c: &Candidate,
    replacements: Vec<karpenter_scheduling::plan::NewNodeClaim>,
    now: Millis,
) -> Command {
    let info = &input.nodes[&c.node];
    let need = info.repair.clone().unwrap_or_default();
    let cost: f64 = replacements.iter().map(|r| r.price).sum();
    let mut cmd = build_command(Reason::UNHEALTHY, &[c], replacements, c.price - cost, now);
    cmd.explanation = format!(
        "{} — unhealthy: {}{}",
        cmd.explanation,
        need.condition,
        if need.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", need.reason)
        }
    );
    cmd.repair = Some(RepairRef {
        drain_bound_ms: drain_bound(need.termination_grace_period, info.termination_grace_period),
        condition: need.condition,
    });
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_bound_is_the_shorter_of_the_policys_and_the_claims() {
        assert_eq!(drain_bound(None, Some(5)), None);
        assert_eq!(drain_bound(Some(600_000), None), Some(600_000));
        assert_eq!(drain_bound(Some(600_000), Some(60_000)), Some(60_000));
        assert_eq!(drain_bound(Some(0), Some(60_000)), Some(0));
    }
}
