//! Helpers the fake provider's integration tests share.
#![allow(dead_code)] // each test crate uses its own subset

use karpenter_cloudprovider::v1::{NodeClaim, NodePool};
use karpenter_scheduling::labels;
use serde_json::json;

/// A NodeClaim of NodePool `default` with these requirements and requests.
pub fn claim(
    name: &str,
    requirements: serde_json::Value,
    requests: serde_json::Value,
) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "requirements": requirements,
            "resources": {"requests": requests},
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }
    }))
    .expect("valid NodeClaim")
}

/// NodePool `default` with these template requirements.
pub fn pool(requirements: serde_json::Value) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": requirements,
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }}}
    }))
    .expect("valid NodePool")
}

/// A requirement on the instance-type label.
pub fn types_in(names: &[&str]) -> serde_json::Value {
    json!([{"key": labels::INSTANCE_TYPE, "operator": "In", "values": names}])
}

/// The claim's label `key`, or empty.
pub fn label<'a>(c: &'a NodeClaim, key: &str) -> &'a str {
    c.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}
