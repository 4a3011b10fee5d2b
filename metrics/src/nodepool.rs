//! `karpenter_nodepools_usage` and `karpenter_nodepools_limit`, from a NodePool and the
//! status the controller computed for it.

use crate::{Metrics, ResourceLabels};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_cloudprovider::NodePool;
use karpenter_scheduling::Quantity;
use std::collections::BTreeMap;

impl Metrics {
    /// Sets `pool`'s usage gauges from `resources` (its status's `resources`, `nodes`
    /// included) and its limit gauges from `spec.limits`, in units (cores, bytes, nodes).
    /// Quantities that do not parse are skipped; the API validated them.
    pub fn record_nodepool(&self, pool: &NodePool, resources: &BTreeMap<String, K8sQuantity>) {
        let set = |family: &prometheus_client::metrics::family::Family<
            ResourceLabels,
            crate::FloatGauge,
        >,
                   values: &BTreeMap<String, K8sQuantity>| {
            for (resource, q) in values {
                if let Ok(v) = Quantity::parse(&q.0) {
                    family
                        .get_or_create(&ResourceLabels {
                            nodepool: pool.metadata.name.clone().unwrap_or_default(),
                            resource_type: resource.clone(),
                        })
                        .set(v.nanos() as f64 / 1e9);
                }
            }
        };
        set(&self.nodepools_usage, resources);
        set(&self.nodepools_limit, &pool.spec.limits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_and_limits_are_exported_in_units() {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"limits": {"cpu": "1000", "memory": "1000Gi"},
                     "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .unwrap();
        let metrics = Metrics::default();
        let usage = [
            ("cpu".to_owned(), K8sQuantity("1500m".into())),
            ("nodes".to_owned(), K8sQuantity("2".into())),
        ]
        .into();
        metrics.record_nodepool(&pool, &usage);
        let text = metrics.encode();
        for line in [
            "karpenter_nodepools_usage{nodepool=\"default\",resource_type=\"cpu\"} 1.5",
            "karpenter_nodepools_usage{nodepool=\"default\",resource_type=\"nodes\"} 2.0",
            "karpenter_nodepools_limit{nodepool=\"default\",resource_type=\"cpu\"} 1000.0",
            "karpenter_nodepools_limit{nodepool=\"default\",resource_type=\"memory\"} 1073741824000.0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
