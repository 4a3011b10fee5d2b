//! Node repair (feature gate `NodeRepair`), carried out: the decision is
//! [`karpenter_cluster::repair::decide`]; here the chosen NodeClaims get their termination
//! timestamp and are deleted, and blocked repairs are reported.

use super::{Ctx, ReconcileError, api, exec};
use crate::metrics::DisruptedLabels;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cluster::repair::{ALLOWED_UNHEALTHY_PERCENT, Verdict, decide};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// How often a blocked repair is reported again (upstream re-checks every 5 minutes).
pub const BLOCKED_EVENT_INTERVAL_MS: Millis = 5 * 60_000;

/// Marks `node_claim` for immediate termination and deletes it.
async fn repair_one(ctx: &Ctx, node_claim: &NodeClaim, now: Millis) -> Result<(), ReconcileError> {
    let name = node_claim.name();
    let stamp = jiff::Timestamp::from_millisecond(now)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {
        v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: stamp
    }}});
    ctx.limiter.acquire().await;
    api::merge_patch(&ctx.node_claims(), name, patch)
        .await
        .map_err(ReconcileError::api("annotating NodeClaim for repair", name))?;
    exec::delete_node_claim(ctx, name).await
}

/// One repair pass at `now` (only with the `NodeRepair` gate): replaces due nodes and
/// reports blocked ones, at most every [`BLOCKED_EVENT_INTERVAL_MS`] per node
/// (`blocked_reported` remembers when).
pub async fn reconcile(ctx: &Ctx, now: Millis, blocked_reported: &mut BTreeMap<String, Millis>) {
    let claims = ctx.stores.node_claims.state();
    let nodes = ctx.stores.nodes.state();
    let verdicts = decide(&nodes, &claims, &ctx.provider.repair_policies(), now);
    let mut still_blocked = BTreeMap::new();
    for v in verdicts {
        match v {
            Verdict::Repair {
                node: node_name,
                node_claim,
                condition,
            } => {
                let Some(c) = exec::claim_of(ctx, &node_claim) else {
                    continue;
                };
                if let Err(e) = repair_one(ctx, &c, now).await {
                    tracing::warn!(nodeclaim = node_claim, error = %e, "node repair failed");
                    continue;
                }
                tracing::info!(
                    node = node_name,
                    nodeclaim = node_claim,
                    condition,
                    "deleting unhealthy node"
                );
                ctx.metrics
                    .nodeclaims_disrupted
                    .get_or_create(&DisruptedLabels::for_claim("unhealthy", &c))
                    .inc();
            }
            Verdict::Blocked {
                node: node_name,
                node_claim,
                node_pool,
            } => {
                let last = blocked_reported.get(&node_name).copied();
                if last.is_some_and(|t| now - t < BLOCKED_EVENT_INTERVAL_MS) {
                    still_blocked.insert(node_name, last.unwrap_or(now));
                    continue;
                }
                let scope = if node_pool.is_empty() {
                    "the cluster".to_owned()
                } else {
                    format!("nodepool {node_pool}")
                };
                let message = format!(
                    "Cannot repair unhealthy node: more than {ALLOWED_UNHEALTHY_PERCENT}% of the nodes in {scope} are unhealthy"
                );
                if let Some(n) = exec::node_of(ctx, &node_name) {
                    ctx.events
                        .warning(n.as_ref(), "NodeRepairBlocked", message.clone());
                }
                if let Some(c) = exec::claim_of(ctx, &node_claim) {
                    ctx.events.warning(c.as_ref(), "NodeRepairBlocked", message);
                }
                still_blocked.insert(node_name, now);
            }
        }
    }
    *blocked_reported = still_blocked;
}
