//! The `Drifted` condition on NodeClaims, as upstream's NodeClaim disruption controller keeps
//! it: `True` with the drift's reason (`NodePoolDrifted`, `RequirementsDrifted` or the cloud
//! provider's) while a launched claim is drifted, removed once it is not. Disruption decides
//! from the same facts; the condition is what users and tools (`kubectl get nodeclaims`)
//! see.

use super::Ctx;
use super::lifecycle::patch_claim_status;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::v1::{ConditionStatus, ConditionType, NodeClaim, StatusConditions};
use std::collections::BTreeMap;

/// `claim` with its `Drifted` condition as `drifted` (NodeClaim name to reason) says, or
/// `None` when it already is. Claims being deleted are left alone.
pub fn desired(
    claim: &NodeClaim,
    drifted: &BTreeMap<String, String>,
    now: Time,
) -> Option<NodeClaim> {
    if claim.is_deleting() {
        return None;
    }
    let mut updated = claim.clone();
    let drifted_as = drifted
        .get(claim.name())
        .filter(|_| claim.is(ConditionType::Launched));
    let changed = match drifted_as {
        Some(reason) => updated.set_condition(
            ConditionType::Drifted.as_str(),
            ConditionStatus::True,
            reason,
            reason,
            now,
        ),
        None => updated.clear_condition(ConditionType::Drifted.as_str()),
    };
    changed.then_some(updated)
}

/// Brings every NodeClaim's `Drifted` condition in line with `drifted`. Failures are logged
/// and retried on the next disruption poll.
pub async fn record(ctx: &Ctx, drifted: &BTreeMap<String, String>) {
    for claim in ctx.stores.node_claims_sorted() {
        let Some(updated) = desired(&claim, drifted, ctx.now_time()) else {
            continue;
        };
        if let Some(reason) = drifted.get(claim.name()) {
            tracing::info!(nodeclaim = claim.name(), reason = %reason, "nodeclaim drifted");
        }
        if let Err(e) = patch_claim_status(ctx, &updated).await {
            tracing::warn!(nodeclaim = claim.name(), error = %e, "recording drift failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cluster::provisioner::time;
    use karpenter_testing::api::node_claim;

    #[test]
    fn launched_claims_get_the_condition_with_its_reason_and_lose_it_when_not_drifted() {
        let mut c = node_claim("default-abcde");
        let drifted = BTreeMap::from([(c.name().to_owned(), "NodePoolDrifted".to_owned())]);
        // Not launched yet: nothing to record.
        assert!(desired(&c, &drifted, time(0)).is_none());
        c.set_true(ConditionType::Launched.as_str(), time(0));
        let marked = desired(&c, &drifted, time(1_000)).expect("marked drifted");
        let condition = marked.get_condition(ConditionType::Drifted).unwrap();
        assert_eq!(condition.reason, "NodePoolDrifted");
        assert!(marked.is(ConditionType::Drifted));
        // Already recorded: no write.
        assert!(desired(&marked, &drifted, time(2_000)).is_none());
        // No longer drifted: the condition goes.
        let cleared = desired(&marked, &BTreeMap::new(), time(3_000)).expect("cleared");
        assert!(cleared.get_condition(ConditionType::Drifted).is_none());
        assert!(desired(&cleared, &BTreeMap::new(), time(4_000)).is_none());
    }
}
