//! NodePool status: the resources of its NodeClaims, its node count, its conditions
//! (`ValidationSucceeded`, `NodeClassReady`, `Ready`), and the usage and limit metrics.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::v1::{
    NODEPOOL_CONDITION_NODE_CLASS_READY, NODEPOOL_CONDITION_VALIDATION_SUCCEEDED, NodePoolStatus,
    StatusConditions,
};
use karpenter_cloudprovider::{NODEPOOL_HASH_VERSION, NodeClaim, NodePool};
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
    // As upstream's counter: every resource the status listed before stays listed, at zero
    // when no claim has it any more (so a merge patch cannot leave a stale value behind).
    let mut resources: BTreeMap<String, K8sQuantity> = pool
        .status
        .iter()
        .flat_map(|s| s.resources.keys())
        .map(|k| (k.clone(), K8sQuantity("0".into())))
        .collect();
    resources.extend(
        usage
            .to_quantities()
            .into_iter()
            .map(|(k, q)| (k, K8sQuantity(q.to_string()))),
    );
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

/// The hash annotations the pool should carry when they differ from what it has: upstream's
/// NodePool hash controller keeps `karpenter.sh/nodepool-hash` (and its algorithm version)
/// on the pool, so users and tools can compare it with the claims' copies.
pub fn hash_annotations(pool: &NodePool) -> Option<BTreeMap<String, String>> {
    let want = BTreeMap::from([
        (v1labels::NODEPOOL_HASH_ANNOTATION.to_owned(), pool.hash()),
        (
            v1labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_owned(),
            NODEPOOL_HASH_VERSION.to_owned(),
        ),
    ]);
    let have = pool.metadata.annotations.as_ref();
    let current = want
        .iter()
        .all(|(k, v)| have.and_then(|a| a.get(k)) == Some(v));
    (!current).then_some(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(status_cpu: Option<&str>) -> NodePool {
        let mut pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .unwrap();
        if let Some(cpu) = status_cpu {
            pool.status = Some(NodePoolStatus {
                resources: [("cpu".to_owned(), K8sQuantity(cpu.into()))].into(),
                ..NodePoolStatus::default()
            });
        }
        pool
    }

    #[test]
    fn resources_of_claims_that_are_gone_drop_to_zero() {
        let pool = pool(Some("2"));
        let now = crate::provisioner::time(0);
        let status = desired_status(&pool, &[], now).status.unwrap();
        assert_eq!(status.resources["cpu"].0, "0");
        assert_eq!(status.resources["nodes"].0, "0");
        assert_eq!(status.nodes, 0);
    }

    #[test]
    fn a_pool_gets_its_hash_annotations_once() {
        let mut pool = pool(None);
        let want = hash_annotations(&pool).expect("a new pool has none");
        assert_eq!(want[v1labels::NODEPOOL_HASH_ANNOTATION], pool.hash());
        assert_eq!(
            want[v1labels::NODEPOOL_HASH_VERSION_ANNOTATION],
            NODEPOOL_HASH_VERSION
        );
        pool.metadata.annotations = Some(want);
        assert_eq!(hash_annotations(&pool), None);
        pool.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "a".into());
        assert!(
            hash_annotations(&pool).is_some(),
            "a changed template needs a new hash"
        );
    }
}
