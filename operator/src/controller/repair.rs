//! Node repair (feature gate `NodeRepair`), carried out. The shared reconciler decides
//! ([`karpenter_cluster::repair::decide`] in its repair phase); here a repaired NodeClaim gets
//! its termination timestamp and is deleted, and blocked repairs become warning events.

use super::{Ctx, ReconcileError, exec};
use karpenter_cluster::repair::blocked_message;

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
    exec::stamp_termination(ctx, name).await?;
    exec::delete_node_claim(ctx, name).await?;
    tracing::info!(node, nodeclaim = name, condition, "deleting unhealthy node");
    ctx.metrics.record_repair(&claim, condition);
    Ok(())
}

/// Tells the Node and its NodeClaim why an unhealthy node is not repaired.
pub fn report_blocked(ctx: &Ctx, node: &str, node_claim: &str, node_pool: &str) {
    let message = blocked_message(node_pool);
    tracing::warn!(node, nodeclaim = node_claim, "{message}");
    if let Some(n) = exec::node_of(ctx, node) {
        ctx.events
            .warning(n.as_ref(), "NodeRepairBlocked", message.clone());
    }
    if let Some(c) = exec::claim_of(ctx, node_claim) {
        ctx.events.warning(c.as_ref(), "NodeRepairBlocked", message);
    }
}
