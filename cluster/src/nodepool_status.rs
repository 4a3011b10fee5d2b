//! NodePool status: the resources of its NodeClaims, its node count, its conditions
//! (`ValidationSucceeded`, `NodeClassReady`, `NodeRegistrationHealthy`, `Ready`), and the
//! NodeClass generation it observed.

use crate::node_class::NodeClassReadiness;
use crate::registration_health::{self, Verdict};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::v1::{
    NODEPOOL_CONDITION_NODE_CLASS_READY, NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY,
    NODEPOOL_CONDITION_VALIDATION_SUCCEEDED, NodePoolStatus, StatusConditions,
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

/// The status the pool should have: resources (plus `nodes`), node count, and conditions:
/// `ValidationSucceeded` from validation, `NodeClassReady` from `node_class` (as upstream's
/// readiness controller), `NodeRegistrationHealthy` from `registration` (the reconciler's
/// [`RegistrationHealth`](crate::registration_health::RegistrationHealth) verdict; `None`
/// keeps it, or resets it to `Unknown` when it predates the pool's or NodeClass's current
/// generation). Conditions keep their transition times when unchanged.
pub fn desired_status(
    pool: &NodePool,
    claims: &[&NodeClaim],
    node_class: &NodeClassReadiness,
    registration: Option<&Verdict>,
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
    if let Some((status, reason, message)) = node_class.condition() {
        out.set_condition(
            NODEPOOL_CONDITION_NODE_CLASS_READY,
            status,
            reason,
            message,
            now.clone(),
        );
    }
    let class_generation = node_class.generation();
    let verdict = registration.cloned().or_else(|| {
        registration_health::stale(pool, class_generation).then(registration_health::unknown)
    });
    if let Some((status, reason, message)) = verdict {
        out.set_condition(
            NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY,
            status,
            &reason,
            &message,
            now,
        );
    }
    if class_generation.is_some() {
        out.status
            .get_or_insert_with(NodePoolStatus::default)
            .node_class_observed_generation = class_generation;
    }
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
    use karpenter_cloudprovider::v1::ConditionStatus;

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
        let status = desired_status(&pool, &[], &NodeClassReadiness::NoNodeClasses, None, now)
            .status
            .unwrap();
        assert_eq!(status.resources["cpu"].0, "0");
        assert_eq!(status.resources["nodes"].0, "0");
        assert_eq!(status.nodes, 0);
    }

    #[test]
    fn node_class_readiness_and_registration_health_reach_the_conditions() {
        let mut pool = pool(None);
        pool.metadata.generation = Some(2);
        let now = crate::provisioner::time(0);
        let not_ready = NodeClassReadiness::NotReady {
            reason: "SubnetsNotFound".into(),
            message: "no subnets".into(),
            generation: 5,
        };
        let out = desired_status(&pool, &[], &not_ready, None, now.clone());
        let class = out.condition(NODEPOOL_CONDITION_NODE_CLASS_READY).unwrap();
        assert_eq!(class.status, ConditionStatus::False);
        assert_eq!(class.reason, "SubnetsNotFound");
        assert!(out.is_false("Ready"), "NodeClassReady is part of Ready");
        // No verdict and no condition yet: Unknown, for this generation.
        let health = out
            .condition(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY)
            .unwrap();
        assert_eq!(health.status, ConditionStatus::Unknown);
        assert_eq!(health.observed_generation, Some(2));
        assert_eq!(
            out.status.as_ref().unwrap().node_class_observed_generation,
            Some(5)
        );

        let ready = NodeClassReadiness::Ready { generation: 5 };
        let verdict = (
            ConditionStatus::False,
            "RegistrationFailed".to_owned(),
            "Failed to register node".to_owned(),
        );
        let out = desired_status(&out, &[], &ready, Some(&verdict), now.clone());
        assert!(out.is_true(NODEPOOL_CONDITION_NODE_CLASS_READY));
        assert!(out.is_false(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY));
        assert!(
            out.is_true("Ready"),
            "registration health is not part of Ready"
        );
        // Without a verdict a current condition is kept...
        let kept = desired_status(&out, &[], &ready, None, now.clone());
        assert!(kept.is_false(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY));
        // ... and one from before the NodeClass changed is reset.
        let changed = NodeClassReadiness::Ready { generation: 6 };
        let reset = desired_status(&out, &[], &changed, None, now);
        assert_eq!(
            reset
                .condition(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY)
                .unwrap()
                .status,
            ConditionStatus::Unknown
        );
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
