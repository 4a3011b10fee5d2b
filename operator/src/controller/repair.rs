//! Node repair (feature gate `NodeRepair`), carried out. The shared reconciler decides
//! ([`karpenter_cluster::repair::decide`] in its repair phase); here a repaired NodeClaim gets
//! its termination timestamp and is deleted, and blocked repairs become warning events.

use super::{Ctx, ReconcileError, exec};
use karpenter_cluster::repair::blocked_message;

/// How a repair bounds its drain.
#[derive(Debug, Clone, Copy)]
pub struct DrainBound {
    /// The termination timestamp is set this far from now; `None` keeps the claim's own
    /// `terminationGracePeriod`.
    pub after: Option<karpenter_scheduling::model::Millis>,
    /// The legacy controller decided it: its metrics report the claim's own termination
    /// mode whatever the bound, as upstream's legacy controller does.
    pub legacy: bool,
}

/// Bounds NodeClaim `name`'s drain as `bound` says and deletes it (the action
/// `RepairNodeClaim`).
///
/// # Errors
/// API failures; the reconciler decides again on the next pass.
pub async fn repair(
    ctx: &Ctx,
    name: &str,
    node: &str,
    condition: &str,
    bound: DrainBound,
) -> Result<(), ReconcileError> {
    let drain_bound = bound.after;
    let Some(claim) = exec::claim_of(ctx, name) else {
        return Ok(());
    };
    // Counted before the deletion, while the node still holds its pods.
    let pods = ctx
        .stores
        .pods_on(node)
        .iter()
        .filter(|p| karpenter_metrics::termination::reschedulable_pod(p))
        .count();
    if let Some(bound) = drain_bound {
        exec::stamp_termination_after(ctx, name, bound).await?;
    }
    exec::delete_node_claim(ctx, name).await?;
    tracing::info!(
        node,
        nodeclaim = name,
        condition,
        ?drain_bound,
        "deleting unhealthy node"
    );
    // The mode the drain actually gets: the repair's bound, or the claim's own.
    let mode = match drain_bound {
        _ if bound.legacy => karpenter_metrics::termination_mode(&claim),
        Some(0) => "forceful",
        Some(_) => "eventual",
        None => karpenter_metrics::termination_mode(&claim),
    };
    ctx.metrics.record_repair(&claim, condition, pods, mode);
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
