//! NodePool status: the resources of its NodeClaims, its node count, its conditions
//! (`ValidationSucceeded`, `NodeClassReady`, `Ready`), and the usage and limit metrics.

use super::{Ctx, ReconcileError};
use crate::metrics::ResourceLabels;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_cloudprovider::v1::{
    NODEPOOL_CONDITION_NODE_CLASS_READY, NODEPOOL_CONDITION_VALIDATION_SUCCEEDED, NodePoolStatus,
    StatusConditions,
};
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_scheduling::{Quantity, Resources};
use std::collections::BTreeMap;

/// Sum of the capacity of the pool's NodeClaims that are not being deleted, and how many
/// there are (upstream counts every claim of the pool in `status.resources` and `nodes`).
pub fn pool_usage<'a>(
    pool: &str,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> (Resources, i64) {
    let mut total = Resources::default();
    let mut count = 0;
    for c in claims {
        if c.node_pool() != Some(pool) {
            continue;
        }
        count += 1;
        if let Some(status) = &c.status {
            let parsed: Vec<(String, Quantity)> = status
                .capacity
                .iter()
                .filter_map(|(k, v)| Quantity::parse(&v.0).ok().map(|q| (k.clone(), q)))
                .collect();
            if let Ok(r) = Resources::from_quantities(parsed.iter().map(|(k, q)| (k.as_str(), q))) {
                total.add_assign(&r);
            }
        }
    }
    (total, count)
}

/// The status the pool should have: resources (plus `nodes`), node count, and conditions
/// derived from validation. Conditions keep their transition times when unchanged.
pub fn desired_status(
    pool: &NodePool,
    claims: &[&NodeClaim],
    now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> NodePool {
    let (usage, nodes) = pool_usage(pool.name(), claims.iter().copied());
    let mut resources: BTreeMap<String, K8sQuantity> = usage
        .to_quantities()
        .into_iter()
        .map(|(k, q)| (k, K8sQuantity(q.to_string())))
        .collect();
    resources.insert("nodes".into(), K8sQuantity(nodes.to_string()));
    let mut out = pool.clone();
    let status = out.status.get_or_insert_with(NodePoolStatus::default);
    status.resources = resources;
    status.nodes = nodes;
    match pool.validate() {
        Ok(()) => {
            out.set_true(NODEPOOL_CONDITION_VALIDATION_SUCCEEDED, now.clone());
        }
        Err(e) => {
            out.set_false(
                NODEPOOL_CONDITION_VALIDATION_SUCCEEDED,
                "ValidationFailed",
                &e.to_string(),
                now.clone(),
            );
        }
    }
    // The fake provider has no NodeClass to wait for; providers with one report readiness
    // through `NodeClassNotReady` launch errors.
    out.set_true(NODEPOOL_CONDITION_NODE_CLASS_READY, now);
    out
}

/// Updates every pool's status when it changed, and the usage / limit metrics.
///
/// # Errors
/// The first API failure (other pools are updated on the next pass).
pub async fn reconcile_all(ctx: &Ctx) -> Result<(), ReconcileError> {
    let claims = ctx.stores.node_claims_sorted();
    let claim_refs: Vec<&NodeClaim> = claims.iter().map(|c| c.as_ref()).collect();
    let mut pools = ctx.stores.node_pools.state();
    pools.sort_by(|a, b| a.name().cmp(b.name()));
    for pool in pools {
        let desired = desired_status(&pool, &claim_refs, ctx.now_time());
        let status = desired.status.clone().unwrap_or_default();
        for (resource, q) in &status.resources {
            if let Ok(v) = Quantity::parse(&q.0) {
                ctx.metrics
                    .nodepools_usage
                    .get_or_create(&ResourceLabels {
                        nodepool: pool.name().to_owned(),
                        resource_type: resource.clone(),
                    })
                    .set(v.nanos() as f64 / 1e9);
            }
        }
        for (resource, q) in &pool.spec.limits {
            if let Ok(v) = Quantity::parse(&q.0) {
                ctx.metrics
                    .nodepools_limit
                    .get_or_create(&ResourceLabels {
                        nodepool: pool.name().to_owned(),
                        resource_type: resource.clone(),
                    })
                    .set(v.nanos() as f64 / 1e9);
            }
        }
        if desired.status == pool.status {
            continue;
        }
        ctx.limiter.acquire().await;
        let patch = serde_json::json!({"status": status});
        ctx.node_pools()
            .patch_status(
                pool.name(),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map_err(ReconcileError::api("updating NodePool status", pool.name()))?;
    }
    Ok(())
}
