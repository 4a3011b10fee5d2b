//! Balanced consolidation's approvals as upstream publishes them (never rejections, whose
//! volume would bury them): `ConsolidationApproved` events on the Node and NodeClaim of a
//! single-node move, on the NodePool for each approving pool of a multi-node move (and of a
//! re-pack, karpenter-rs's own method, scored the same way). The
//! moves and scores are counted by [`karpenter_metrics::Metrics::observe`].

use super::{Ctx, exec};
use karpenter_disruption::{ConsolidationMethod, ScoreResult, ScoredMove};
use kube::runtime::reflector::ObjectRef;

/// Publishes the approvals among the moves one computed disruption pass scored.
pub fn publish(ctx: &Ctx, moves: &[ScoredMove]) {
    for mv in moves {
        match mv.method {
            ConsolidationMethod::SingleNode => {
                let (Some(pool), Some(candidate)) = (mv.pools.first(), mv.candidates.first())
                else {
                    continue;
                };
                let Some(score) = pool.score.filter(ScoreResult::approved) else {
                    continue;
                };
                let message = score.approved_message();
                if let Some(node) = exec::node_of(ctx, &candidate.node) {
                    ctx.events
                        .normal(node.as_ref(), "ConsolidationApproved", message.clone());
                }
                if let Some(claim) = exec::claim_of(ctx, &candidate.node_claim) {
                    ctx.events
                        .normal(claim.as_ref(), "ConsolidationApproved", message);
                }
            }
            ConsolidationMethod::MultiNode | ConsolidationMethod::Repack => {
                for pool in &mv.pools {
                    // Upstream tells an approving pool even when another pool vetoed.
                    if let Some(score) = pool.score.filter(ScoreResult::approved)
                        && let Some(np) =
                            ctx.stores.node_pools.get(&ObjectRef::new(&pool.node_pool))
                    {
                        ctx.events.normal(
                            np.as_ref(),
                            "ConsolidationApproved",
                            score.approved_message(),
                        );
                    }
                }
            }
        }
    }
}
