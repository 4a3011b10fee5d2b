//! NodePool status, carried out: the desired status and hash annotations come from
//! [`karpenter_cluster::nodepool_status`]; here they are patched, and the usage and limit
//! metrics recorded.

use super::{Ctx, ReconcileError};
use karpenter_cloudprovider::NodeClaim;
use karpenter_cluster::ClusterState;
use karpenter_cluster::nodepool_status::{desired_status, hash_annotations};
use karpenter_cluster::reconciler::Reconciler;

/// Updates every pool's hash annotations and status when they changed, and the usage /
/// limit metrics.
///
/// # Errors
/// The first API failure (other pools are updated on the next pass).
pub async fn reconcile_all(
    ctx: &Ctx,
    state: &ClusterState,
    reconciler: &Reconciler,
) -> Result<(), ReconcileError> {
    let claims = ctx.stores.node_claims_sorted();
    let claim_refs: Vec<&NodeClaim> = claims.iter().map(|c| c.as_ref()).collect();
    let mut pools = ctx.stores.node_pools.state();
    pools.sort_by(|a, b| a.name().cmp(b.name()));
    for pool in pools {
        if let Some(annotations) = hash_annotations(&pool) {
            ctx.limiter.acquire().await;
            let patch = serde_json::json!({"metadata": {"annotations": annotations}});
            super::api::merge_patch(&ctx.node_pools(), pool.name(), patch)
                .await
                .map_err(ReconcileError::api("annotating NodePool", pool.name()))?;
        }
        let node_class = state.node_class_readiness(&pool);
        let health = reconciler.registration_health().verdict(&pool);
        let desired = desired_status(&pool, &claim_refs, &node_class, health, ctx.now_time());
        let status = desired.status.clone().unwrap_or_default();
        ctx.metrics.record_nodepool(&pool, &status.resources);
        if desired.status == pool.status {
            continue;
        }
        ctx.limiter.acquire().await;
        let patch = serde_json::json!({"status": status});
        super::api::merge_patch_status(&ctx.node_pools(), pool.name(), &patch)
            .await
            .map_err(ReconcileError::api("updating NodePool status", pool.name()))?;
    }
    Ok(())
}
