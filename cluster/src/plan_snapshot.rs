//! The solver's input for a one-off plan of a live cluster (`karpenter plan --from-cluster`):
//! the objects read once, indexed by the same [`Feed`] the controller's watches drive, and
//! taken as the provisioner sees them, so the plan is the one the controller would compute
//! for the pods pending now.

use crate::capacity_buffer::{Referents, ResolvedBuffer, lookup, resolve};
use crate::feed::{ApiObjects, Feed};
use crate::scheduler_config::SchedulerConfig;
use crate::{ClusterState, Scope};
use karpenter_cloudprovider::ignored::{STATIC_CAPACITY_DEFAULT, node_pool_warnings};
use karpenter_cloudprovider::overlay::overlay_instance_types;
use karpenter_cloudprovider::{CapacityBuffer, NodeOverlay};
use karpenter_scheduling::model::{InstanceType, Snapshot};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The provisioner's snapshot of `objects` at `now_ms`, each NodePool offered
/// `instance_types` with `overlays` applied, `buffers` (resolved against `referents`) as
/// virtual pods, pods given `scheduler_config`'s default spread constraints, and warnings:
/// objects the scheduling model could not represent, NodeOverlays applied or not, each buffer
/// planned or why not, and NodePool fields not acted on.
///
/// Overlays and buffers apply as with the NodeOverlay and CapacityBuffer gates on, and static
/// pools keep Karpenter's default gate: a plan cannot see the controller's feature gates.
pub fn provisioner_snapshot(
    objects: &ApiObjects<'_>,
    overlays: &[NodeOverlay],
    buffers: &[CapacityBuffer],
    referents: &dyn Referents,
    instance_types: &[Arc<InstanceType>],
    scheduler_config: Option<&SchedulerConfig>,
    now_ms: i64,
) -> (Snapshot, Vec<String>) {
    let raw: BTreeMap<String, Vec<Arc<InstanceType>>> = objects
        .node_pools
        .iter()
        .map(|p| (p.name().to_owned(), instance_types.to_vec()))
        .collect();
    let pools: Vec<_> = objects.node_pools.iter().map(AsRef::as_ref).collect();
    let (types, evaluation) = overlay_instance_types(overlays, &pools, &raw);
    let mut state = ClusterState::new();
    state.set_scheduler_config(scheduler_config);
    let synced = Feed::default().sync(&mut state, objects, &types, 1);
    let mut warnings: Vec<String> = synced
        .skipped
        .into_iter()
        .map(|(key, why)| format!("{key:?} left out of the plan: {why}"))
        .collect();
    // The controller applies them only with the NodeOverlay gate, which a plan cannot see.
    warnings.extend(evaluation.verdicts().iter().map(|(name, verdict)| {
        verdict.not_applied(name).unwrap_or_else(|| {
            format!("NodeOverlay {name:?} applied (as the controller does with the NodeOverlay feature gate on)")
        })
    }));
    let resolved: Vec<ResolvedBuffer> = buffers
        .iter()
        .map(|b| resolve(b, |ns, r| lookup(referents, ns, r)))
        .collect();
    warnings.extend(resolved.iter().map(ResolvedBuffer::plan_note));
    state.set_capacity_buffers(resolved);
    warnings.extend(node_pool_warnings(
        objects.node_pools.iter().map(|p| p.as_ref()),
        STATIC_CAPACITY_DEFAULT,
    ));
    (state.snapshot(now_ms, Scope::Provisioner), warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use karpenter_cloudprovider::NodePool;
    use karpenter_cloudprovider::v1::NodeSelectorOperator;
    use karpenter_cloudprovider::v1alpha1::{NodeOverlaySpec, NodeSelectorRequirement};
    use karpenter_testing::instance_types::InstanceTypeBuilder;

    fn none() -> crate::capacity_buffer::ReferentMaps {
        crate::capacity_buffer::ReferentMaps::default()
    }

    fn unschedulable(name: &str) -> Arc<Pod> {
        let pod = serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}]},
        });
        Arc::new(serde_json::from_value(pod).unwrap())
    }

    fn pools() -> [Arc<NodePool>; 1] {
        let pool = serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef":
                {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}},
        });
        [Arc::new(serde_json::from_value(pool).unwrap())]
    }

    fn overlay(instance_type: &str) -> NodeOverlay {
        NodeOverlay::new(
            "cheaper",
            NodeOverlaySpec {
                requirements: vec![NodeSelectorRequirement::new(
                    "node.kubernetes.io/instance-type",
                    NodeSelectorOperator::In,
                    [instance_type],
                )],
                price_adjustment: Some("-50%".into()),
                ..NodeOverlaySpec::default()
            },
        )
    }

    #[test]
    fn pending_pods_meet_every_pool_with_the_overlaid_instance_types() {
        let pools = pools();
        let pods = [unschedulable("a")];
        let objects = ApiObjects {
            node_pools: &pools,
            pods: &pods,
            ..ApiObjects::default()
        };
        let types = [InstanceTypeBuilder::new("m5.large", 2, 8)
            .on_demand(0.1)
            .build()];
        let (snapshot, warnings) = provisioner_snapshot(
            &objects,
            &[overlay("m5.large")],
            &[],
            &none(),
            &types,
            None,
            7_000,
        );
        assert_eq!(snapshot.now, 7_000);
        assert_eq!(snapshot.pending_pods.len(), 1);
        assert_eq!(snapshot.pending_pods[0].name, "a");
        assert_eq!(snapshot.node_pools.len(), 1, "{warnings:?}");
        let pool = &snapshot.node_pools[0];
        assert_eq!(pool.name, "default");
        let price = pool.instance_types[0].offerings[0].price;
        assert!((price - 0.05).abs() < 1e-9, "overlay applied: {price}");
        assert!(
            warnings.iter().any(|w| w.contains("\"cheaper\" applied")),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_overlay_matching_nothing_is_reported_and_prices_stay() {
        let pools = pools();
        let objects = ApiObjects {
            node_pools: &pools,
            ..ApiObjects::default()
        };
        let types = [InstanceTypeBuilder::new("m5.large", 2, 8)
            .on_demand(0.1)
            .build()];
        let (snapshot, warnings) = provisioner_snapshot(
            &objects,
            &[overlay("c5.large")],
            &[],
            &none(),
            &types,
            None,
            0,
        );
        assert!(snapshot.pending_pods.is_empty());
        let price = snapshot.node_pools[0].instance_types[0].offerings[0].price;
        assert!((price - 0.1).abs() < 1e-9, "{price}");
        assert!(
            warnings.iter().any(|w| w.contains("\"cheaper\"")),
            "every overlay is reported: {warnings:?}"
        );
    }

    #[test]
    fn the_clusters_capacity_buffers_are_planned_as_virtual_pods() {
        let pools = pools();
        let objects = ApiObjects {
            node_pools: &pools,
            ..ApiObjects::default()
        };
        let types = [InstanceTypeBuilder::new("m5.large", 2, 8)
            .on_demand(0.1)
            .build()];
        let buffer: CapacityBuffer = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "default"},
            "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 2}
        }))
        .unwrap();
        let mut referents = none();
        let pt = serde_json::json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": "chunk", "namespace": "default"},
            "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": "1"}}}]}}
        });
        referents.insert_value("PodTemplate", &pt).unwrap();
        let (snapshot, warnings) =
            provisioner_snapshot(&objects, &[], &[buffer], &referents, &types, None, 0);
        let names: Vec<&str> = snapshot
            .pending_pods
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["capacity-buffer-headroom-1", "capacity-buffer-headroom-2"]
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("CapacityBuffer default/headroom planned as 2")),
            "{warnings:?}"
        );
    }
}
