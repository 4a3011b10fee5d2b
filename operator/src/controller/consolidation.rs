//! Balanced consolidation, reported as upstream does: every scored move counts in
//! `karpenter_consolidation_moves_total`, Balanced pools' scores go to
//! `karpenter_consolidation_score`, and approvals (never rejections, whose volume would bury
//! them) become `ConsolidationApproved` events: on the Node and NodeClaim of a single-node
//! move, on the NodePool for each approving pool of a multi-node move.

use super::{Ctx, exec};
use karpenter_disruption::{ConsolidationMethod, PoolScore, ScoreResult, ScoredMove};
use karpenter_metrics::ConsolidationLabels;
use kube::runtime::reflector::ObjectRef;

fn decision(approved: bool) -> String {
    if approved { "approved" } else { "rejected" }.to_owned()
}

fn labels(pool: &PoolScore, approved: bool) -> ConsolidationLabels {
    ConsolidationLabels {
        decision: decision(approved),
        nodepool: pool.node_pool.clone(),
        policy: pool.policy.as_str().to_owned(),
    }
}

/// The event message upstream writes for an approved score.
pub fn approved_message(s: &ScoreResult) -> String {
    format!(
        "score {:.2} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
        s.score(),
        s.threshold(),
        s.k,
        s.savings_fraction * 100.0,
        s.disruption_fraction * 100.0
    )
}

/// Publishes the moves one computed disruption pass scored.
pub fn publish(ctx: &Ctx, moves: &[ScoredMove]) {
    let m = &ctx.metrics;
    for mv in moves {
        match mv.method {
            ConsolidationMethod::SingleNode => {
                let (Some(pool), Some(candidate)) = (mv.pools.first(), mv.candidates.first())
                else {
                    continue;
                };
                let l = labels(pool, mv.approved);
                m.consolidation_moves.get_or_create(&l).inc();
                let Some(score) = pool.score else {
                    continue;
                };
                m.consolidation_score
                    .get_or_create(&l)
                    .observe(score.score());
                if score.approved() {
                    let message = approved_message(&score);
                    if let Some(node) = exec::node_of(ctx, &candidate.node) {
                        ctx.events
                            .normal(node.as_ref(), "ConsolidationApproved", message.clone());
                    }
                    if let Some(claim) = exec::claim_of(ctx, &candidate.node_claim) {
                        ctx.events
                            .normal(claim.as_ref(), "ConsolidationApproved", message);
                    }
                }
            }
            ConsolidationMethod::MultiNode => {
                for pool in &mv.pools {
                    m.consolidation_moves
                        .get_or_create(&labels(pool, mv.approved))
                        .inc();
                    let Some(score) = pool.score else {
                        continue;
                    };
                    m.consolidation_score
                        .get_or_create(&labels(pool, score.approved()))
                        .observe(score.score());
                    // Upstream tells an approving pool even when another pool vetoed.
                    if score.approved()
                        && let Some(np) =
                            ctx.stores.node_pools.get(&ObjectRef::new(&pool.node_pool))
                    {
                        ctx.events.normal(
                            np.as_ref(),
                            "ConsolidationApproved",
                            approved_message(&score),
                        );
                    }
                }
            }
        }
    }
}
