//! Logs what the reconciler does for static NodePools (`spec.replicas`, the
//! `StaticCapacity` gate), with the fields upstream's static controllers log.

use karpenter_cluster::reconciler::StaticChange;

/// Logs one static-pool decision: NodeClaims created or deleted to reach `desired` from
/// `current`, or the pool's `limits.nodes` holding it back.
pub fn report(node_pool: &str, current: i64, desired: i64, change: &StaticChange) {
    match change {
        StaticChange::Provision(claims) => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            provision_count = claims.len(),
            nodeclaims = ?claims,
            "provisioning nodeclaims to satisfy replica count"
        ),
        StaticChange::Deprovision(claims) => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            deprovision_count = claims.len(),
            nodeclaims = ?claims,
            "deprovisioning nodeclaims to satisfy replica count"
        ),
        StaticChange::LimitReached => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            "nodepool node limit reached"
        ),
    }
}
