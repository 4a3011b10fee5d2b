//! Static NodePools (`spec.replicas`) in disruption: they are never consolidated, and their
//! drifted nodes are replaced one for one by a NodeClaim from the pool's template (upstream's
//! `StaticDrift` method), within the Drifted budget and `limits.nodes`, and only while the
//! pool is not over its replicas.

use karpenter_cloudprovider::v1::NodePool;
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::{Quantity, Requirements};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How a static pool's NodeClaims stand, as upstream's `NodePoolState` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimCounts {
    /// Claims neither deleting nor held by a disruption command (launched or not).
    pub active: i64,
    /// Claims held by a disruption command (a static drift replacing them).
    pub pending_disruption: i64,
    /// Claims with a deletion timestamp, or whose deletion was just asked for.
    pub deleting: i64,
}

impl ClaimCounts {
    /// Every claim that counts against `limits.nodes`.
    pub fn total(&self) -> i64 {
        self.active + self.pending_disruption + self.deleting
    }
}

/// What disruption needs to know of a static pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StaticPool {
    /// `spec.replicas`.
    pub replicas: i64,
    /// `limits.nodes`, when set.
    pub node_limit: Option<i64>,
    /// Its NodeClaims now (filled by the caller, which sees them all).
    pub claims: ClaimCounts,
    /// The template's requirements, for requirement drift: a static pool is not among the
    /// snapshot's pools (those take pods), so its requirements come here.
    #[serde(default)]
    pub requirements: Requirements,
}

impl StaticPool {
    /// The static settings of `pool`, `None` for a dynamic pool; claim counts start at zero
    /// for the caller to fill. Requirements that do not parse (validation rejects them) are
    /// left empty, so they never make a node drift.
    pub fn of(pool: &NodePool) -> Option<Self> {
        Some(Self {
            replicas: pool.spec.replicas?,
            node_limit: node_limit(pool),
            claims: ClaimCounts::default(),
            requirements: pool.template_requirements().unwrap_or_default(),
        })
    }
}

/// `limits.nodes` of a pool, when set and readable (validation rejects an unreadable one).
pub fn node_limit(pool: &NodePool) -> Option<i64> {
    let q = pool.spec.limits.get("nodes")?;
    Quantity::parse(&q.0).ok().map(|q| q.value())
}

/// How many of `wanted` new claims `limit` leaves room for (upstream's `ReserveNodeCount`):
/// the limit minus every claim that counts against it, never negative.
pub fn room_under_limit(limit: Option<i64>, counts: ClaimCounts, wanted: i64) -> i64 {
    let wanted = wanted.max(0);
    match limit {
        None => wanted,
        Some(limit) => wanted.min((limit - counts.total()).max(0)),
    }
}

/// The replacement of a static pool's node: a NodeClaim from the pool's template, with no
/// pods, instance-type list or price of its own (the provider picks the cheapest offering
/// the template allows when it launches).
pub fn template_claim(pool: &str) -> NewNodeClaim {
    NewNodeClaim {
        node_pool: pool.to_owned(),
        requirements: Requirements::default(),
        instance_type_options: Arc::new(Vec::new()),
        pods: Vec::new(),
        requests: Default::default(),
        daemon_overhead: Default::default(),
        price: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_limit_counts_every_claim() {
        let counts = ClaimCounts {
            active: 2,
            pending_disruption: 1,
            deleting: 1,
        };
        assert_eq!(room_under_limit(None, counts, 3), 3);
        assert_eq!(room_under_limit(Some(6), counts, 3), 2);
        assert_eq!(room_under_limit(Some(4), counts, 3), 0);
        assert_eq!(room_under_limit(Some(3), counts, 3), 0);
        assert_eq!(room_under_limit(Some(10), counts, -1), 0);
    }
}
