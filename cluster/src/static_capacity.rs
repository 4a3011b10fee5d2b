//! Static NodePools (`spec.replicas`, Karpenter's `StaticCapacity` feature): how many
//! NodeClaims a static pool has in each state, how many to create to reach `replicas` within
//! `limits.nodes`, and which to delete when it has too many — the decisions of upstream's
//! `static.provisioning` and `static.deprovisioning` controllers (v1.14), as pure functions of
//! the index. The reconciler turns them into actions ([`crate::reconciler`]).
//!
//! Upstream counts a static pool's NodeClaims in three states (its `NodePoolState`):
//! *active* (neither deleting nor held by a disruption command), *pending disruption* (held
//! by a command that is replacing it) and *deleting*. Scale-up creates
//! `replicas − active` claims unless `active + pending ≥ replicas`; scale-down deletes
//! `active − replicas`; `limits.nodes` caps `active + pending + deleting` for every new claim.

use crate::ClusterState;
use karpenter_disruption::candidate::{
    do_not_disrupt_active, lifetime_remaining, node_disruption_cost,
};
pub use karpenter_disruption::static_pool::{ClaimCounts, node_limit, room_under_limit};
use karpenter_scheduling::model::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// What the index says of the claims of every static pool, in one pass over the claims:
/// `held` are the claims disruption commands hold, `deleting` the claims whose deletion was
/// asked for but is not yet in the index. Claims created and not yet in the index are the
/// caller's to add to `active`.
pub fn static_claim_counts(
    index: &ClusterState,
    held: &BTreeSet<String>,
    deleting: &BTreeSet<String>,
) -> BTreeMap<String, ClaimCounts> {
    let mut out: BTreeMap<String, ClaimCounts> = index
        .node_pools()
        .values()
        .filter(|p| p.is_static())
        .map(|p| (p.name().to_owned(), ClaimCounts::default()))
        .collect();
    if out.is_empty() {
        return out;
    }
    for claim in index.node_claims().values() {
        let Some(counts) = claim.node_pool().and_then(|p| out.get_mut(p)) else {
            continue;
        };
        if claim.is_deleting() || deleting.contains(claim.name()) {
            counts.deleting += 1;
        } else if held.contains(claim.name()) {
            counts.pending_disruption += 1;
        } else {
            counts.active += 1;
        }
    }
    out
}

/// What a static pool needs now to keep `replicas` nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Nothing: it has what it wants, or claims being replaced make up the difference.
    Steady,
    /// Create this many claims.
    Up(i64),
    /// It is short of replicas but `limits.nodes` leaves no room.
    LimitReached,
    /// Delete this many claims.
    Down(i64),
}

/// Upstream's decision for a static pool with `replicas` and `limit`: scale up when the
/// active and pending-disruption claims are fewer than `replicas` (claims being replaced by
/// a drift command count, so the replacement is not created twice), scale down when the
/// active claims alone are more.
pub fn scale(replicas: i64, limit: Option<i64>, counts: ClaimCounts) -> Scale {
    if counts.active > replicas {
        return Scale::Down(counts.active - replicas);
    }
    if counts.active + counts.pending_disruption >= replicas {
        return Scale::Steady;
    }
    match room_under_limit(limit, counts, replicas - counts.active) {
        0 => Scale::LimitReached,
        n => Scale::Up(n),
    }
}

/// The `count` claims of `pool` to delete on a scale-down, in upstream's order: claims not
/// yet launched (no provider ID) first; then nodes without pods other than DaemonSet pods
/// (and none of those protected by `karpenter.sh/do-not-disrupt`); then the rest, nodes with
/// protected pods last, the others by rescheduling cost × remaining lifetime, cheapest first.
/// Ties go by name, so the choice is deterministic. `skip` are claims already on their way
/// out (deleting or held by a command).
pub fn scale_down_choice(
    index: &ClusterState,
    pool: &str,
    count: usize,
    skip: &BTreeSet<String>,
    now: Millis,
) -> Vec<String> {
    let claims = index
        .node_claims()
        .values()
        .filter(|c| c.node_pool() == Some(pool) && !c.is_deleting() && !skip.contains(c.name()));
    let mut unlaunched = Vec::new();
    let mut empty = Vec::new();
    // (protected, cost, name)
    let mut busy: Vec<(bool, f64, String)> = Vec::new();
    for claim in claims {
        let name = claim.name().to_owned();
        if claim.provider_id().is_empty() {
            unlaunched.push(name);
            continue;
        }
        let Some(node) = index.joined_node(&name).or_else(|| {
            index
                .nodes()
                .get(&name)
                .filter(|r| r.node_claim.as_ref() == Some(&name))
        }) else {
            // Launched but with no node in the index yet: nothing runs there.
            empty.push(name);
            continue;
        };
        let pods: Vec<_> = index.pods_on(&node.node.name).map(|p| &p.pod).collect();
        let protected = pods.iter().any(|p| do_not_disrupt_active(p, now));
        if !protected && pods.iter().all(|p| p.is_daemon()) {
            empty.push(name);
            continue;
        }
        let expire_after = claim.spec.expire_after.duration().map(|d| d.millis());
        let cost = node_disruption_cost(pods.iter().copied())
            * lifetime_remaining(node.node.created_at, expire_after, now);
        busy.push((protected, cost, name));
    }
    busy.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.total_cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });
    unlaunched
        .into_iter()
        .chain(empty)
        .chain(busy.into_iter().map(|(_, _, n)| n))
        .take(count)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the counts: a scale-up never passes `replicas` or `limits.nodes`, a
        /// scale-down lands exactly on `replicas`, and a steady pool is neither over its
        /// replicas nor short of them once the claims being replaced are counted.
        #[test]
        fn decisions_land_within_replicas_and_the_node_limit(
            replicas in 0i64..20,
            limit in proptest::option::of(0i64..25),
            active in 0i64..25,
            pending_disruption in 0i64..5,
            deleting in 0i64..5,
        ) {
            let counts = ClaimCounts { active, pending_disruption, deleting };
            match scale(replicas, limit, counts) {
                Scale::Up(n) => {
                    prop_assert!(n >= 1);
                    prop_assert!(active + n <= replicas);
                    if let Some(l) = limit {
                        prop_assert!(counts.total() + n <= l);
                    }
                }
                Scale::Down(n) => prop_assert_eq!(active - n, replicas),
                Scale::Steady => {
                    prop_assert!(active <= replicas);
                    prop_assert!(active + pending_disruption >= replicas);
                }
                Scale::LimitReached => {
                    prop_assert!(active + pending_disruption < replicas);
                    prop_assert!(limit.is_some_and(|l| counts.total() >= l));
                }
            }
        }
    }
}
