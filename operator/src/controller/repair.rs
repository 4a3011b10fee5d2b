//! Node repair (feature gate `NodeRepair`), carried out. The shared reconciler decides
//! ([`karpenter_cluster::repair::decide`] in its repair phase); here a repaired NodeClaim gets
//! its termination timestamp and is deleted, and blocked repairs become warning events.

use super::{Ctx, ReconcileError, api, exec};
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cluster::repair::ALLOWED_UNHEALTHY_PERCENT;

/// Marks NodeClaim `name` for immediate termination and deletes it (the action
/// `RepairNodeClaim`).
///
/// # Errors
/// API failures; the reconciler decides again on the next pass.
pub async fn repair(
    ctx: &Ctx,
    name: &str,
    node: &str,
    condition: &str,
) -> Result<(), ReconcileError> {
    let Some(claim) = exec::claim_of(ctx, name) else {
        return Ok(());
    };
    let stamp = ctx.now_time().0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {
        v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: stamp
    }}});
    ctx.limiter.acquire().await;
    api::merge_patch(&ctx.node_claims(), name, patch)
        .await
        .map_err(ReconcileError::api("annotating NodeClaim for repair", name))?;
    exec::delete_node_claim(ctx, name).await?;
    tracing::info!(node, nodeclaim = name, condition, "deleting unhealthy node");
    ctx.metrics.record_repair(&claim, condition);
    Ok(())
}

/// Tells the Node and its NodeClaim why an unhealthy node is not repaired.
pub fn report_blocked(ctx: &Ctx, node: &str, node_claim: &str, node_pool: &str) {
    let scope = if node_pool.is_empty() {
        "the cluster".to_owned()
    } else {
        format!("nodepool {node_pool}")
    };
    let message = format!(
        "Cannot repair unhealthy node: more than {ALLOWED_UNHEALTHY_PERCENT}% of the nodes in {scope} are unhealthy"
    );
    tracing::warn!(node, nodeclaim = node_claim, "{message}");
    if let Some(n) = exec::node_of(ctx, node) {
        ctx.events
            .warning(n.as_ref(), "NodeRepairBlocked", message.clone());
    }
    if let Some(c) = exec::claim_of(ctx, node_claim) {
        ctx.events.warning(c.as_ref(), "NodeRepairBlocked", message);
    }
}
