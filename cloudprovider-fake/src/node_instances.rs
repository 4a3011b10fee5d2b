//! Fake instances as Node objects, as Karpenter's kwok provider keeps them: launching a
//! NodeClaim creates a Node that carries everything the instance would have (labels, taints,
//! capacity), and listing the provider's instances is listing those Nodes. Nothing lives only in
//! memory, so a restarted controller finds every instance again. These are the pure
//! conversions; the API calls are the operator's.

use crate::provider::FAKE_IMAGE_ID;
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint as K8sTaint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::v1::{NodeClaimStatus, Taint};
use std::collections::BTreeMap;

/// Label on every Node the fake provider created; `list` selects on it.
pub const FAKE_NODE_LABEL: &str = "karpenter-rs.sh/fake-node";
/// Scheme of fake provider IDs: `fake://<zone>/<node name>`.
pub const PROVIDER_ID_SCHEME: &str = "fake://";

/// The provider ID of the fake instance for `node_name` in `zone`.
pub fn provider_id(zone: &str, node_name: &str) -> String {
    format!("{PROVIDER_ID_SCHEME}{zone}/{node_name}")
}

/// The node name inside a fake provider ID, if it is one.
pub fn node_name_of(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix(PROVIDER_ID_SCHEME)?;
    let (_, name) = rest.rsplit_once('/')?;
    (!name.is_empty()).then_some(name)
}

fn k8s_taint(t: &Taint) -> K8sTaint {
    K8sTaint {
        key: t.key.clone(),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect.as_str().to_owned(),
        time_added: None,
    }
}

/// The Node a launched claim becomes: the claim's and instance type's labels, the taints a
/// kubelet registers with (taints, startup taints and `karpenter.sh/unregistered`), and the
/// claim's capacity. The Ready condition is left to the fake kubelet.
pub fn node_for(launched: &NodeClaim, node_name: &str, provider_id: &str) -> Node {
    let mut labels: BTreeMap<String, String> = launched.metadata.labels.clone().unwrap_or_default();
    labels.insert(v1labels::HOSTNAME.to_owned(), node_name.to_owned());
    labels.insert(FAKE_NODE_LABEL.to_owned(), "true".to_owned());
    labels
        .entry(v1labels::OS.to_owned())
        .or_insert_with(|| "linux".to_owned());
    let mut taints: Vec<K8sTaint> = launched.spec.taints.iter().map(k8s_taint).collect();
    taints.extend(launched.spec.startup_taints.iter().map(k8s_taint));
    taints.push(k8s_taint(&v1labels::unregistered_no_execute_taint()));
    let status = launched.status.clone().unwrap_or_default();
    Node {
        metadata: ObjectMeta {
            name: Some(node_name.to_owned()),
            labels: Some(labels),
            annotations: launched.metadata.annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()),
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(status.capacity.clone()),
            allocatable: Some(status.allocatable.clone()),
            ..NodeStatus::default()
        }),
    }
}

/// A fake Node seen as the provider's instance (what `get` and `list` return).
pub fn claim_for(node: &Node) -> NodeClaim {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let claim_name = labels
        .get(v1labels::NODECLAIM_LABEL)
        .cloned()
        .unwrap_or_else(|| name.clone());
    let status = node.status.clone().unwrap_or_default();
    let quantities = |q: Option<BTreeMap<String, Quantity>>| q.unwrap_or_default();
    let mut claim = NodeClaim::new(
        &claim_name,
        karpenter_cloudprovider::v1::NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: Default::default(),
            node_class_ref: Default::default(),
            termination_grace_period: None,
            expire_after: karpenter_cloudprovider::v1::default_expire_after(),
        },
    );
    claim.metadata.labels = Some(labels);
    claim.metadata.creation_timestamp = node.metadata.creation_timestamp.clone();
    claim.metadata.deletion_timestamp = node.metadata.deletion_timestamp.clone();
    claim.status = Some(NodeClaimStatus {
        node_name: name,
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default(),
        image_id: FAKE_IMAGE_ID.to_owned(),
        capacity: quantities(status.capacity),
        allocatable: quantities(status.allocatable),
        ..NodeClaimStatus::default()
    });
    claim
}

/// `claim` as launched onto the fake instance `node` already created for it: the node's
/// labels (but the fake marker and hostname) added to the claim's, and its status.
pub fn launched_as(claim: &NodeClaim, node: &Node) -> NodeClaim {
    let mut out = claim.clone();
    let found = claim_for(node);
    let mut labels = out.metadata.labels.take().unwrap_or_default();
    labels.extend(found.metadata.labels.unwrap_or_default());
    labels.remove(FAKE_NODE_LABEL);
    labels.remove(karpenter_scheduling::labels::HOSTNAME);
    out.metadata.labels = Some(labels);
    out.status = found.status;
    out
}

/// How many of the fake `nodes` each capacity reservation holds (by the reservation id
/// label a node launched into one carries).
pub fn reservations_in_use(nodes: &[Node]) -> std::collections::BTreeMap<String, u32> {
    let mut used = std::collections::BTreeMap::new();
    for n in nodes.iter().filter(|n| is_fake(n)) {
        let id = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(karpenter_scheduling::labels::AWS_CAPACITY_RESERVATION_ID));
        if let Some(id) = id {
            *used.entry(id.clone()).or_insert(0) += 1;
        }
    }
    used
}

/// Whether `node` is a fake instance (carries [`FAKE_NODE_LABEL`]).
pub fn is_fake(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(FAKE_NODE_LABEL))
        .is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let id = provider_id("us-east-1a", "default-abcde");
        assert_eq!(id, "fake://us-east-1a/default-abcde");
        assert_eq!(node_name_of(&id), Some("default-abcde"));
        assert_eq!(node_name_of("aws:///us-east-1a/i-123"), None);
        assert_eq!(node_name_of("fake://us-east-1a/"), None);
    }

    #[test]
    fn a_launched_claim_round_trips_through_its_node() {
        use karpenter_cloudprovider::v1::NodeClaimSpec;
        use karpenter_cloudprovider::v1::TaintEffect;
        let mut claim = NodeClaim::new(
            "default-abcde",
            NodeClaimSpec {
                taints: vec![Taint::new("team", "a", TaintEffect::NoSchedule)],
                startup_taints: vec![Taint::new("init", "", TaintEffect::NoExecute)],
                requirements: Vec::new(),
                resources: Default::default(),
                node_class_ref: Default::default(),
                termination_grace_period: None,
                expire_after: karpenter_cloudprovider::v1::default_expire_after(),
            },
        );
        claim.metadata.labels = Some(
            [
                (
                    v1labels::NODECLAIM_LABEL.to_owned(),
                    "default-abcde".to_owned(),
                ),
                (v1labels::ZONE.to_owned(), "us-east-1a".to_owned()),
            ]
            .into(),
        );
        let capacity: BTreeMap<String, Quantity> =
            [("cpu".to_owned(), Quantity("4".into()))].into();
        claim.status = Some(NodeClaimStatus {
            capacity: capacity.clone(),
            allocatable: capacity.clone(),
            ..NodeClaimStatus::default()
        });
        let id = provider_id("us-east-1a", "default-abcde");
        let node = node_for(&claim, "default-abcde", &id);
        assert!(is_fake(&node));
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(v1labels::HOSTNAME).map(String::as_str),
            Some("default-abcde")
        );
        assert_eq!(labels.get(v1labels::OS).map(String::as_str), Some("linux"));
        let taints: Vec<String> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        assert_eq!(
            taints,
            [
                "team:NoSchedule",
                "init:NoExecute",
                "karpenter.sh/unregistered:NoExecute"
            ]
        );
        let back = claim_for(&node);
        assert_eq!(back.name(), "default-abcde");
        assert_eq!(back.provider_id(), id);
        let status = back.status.unwrap_or_default();
        assert_eq!(status.capacity, capacity);
        assert_eq!(status.image_id, FAKE_IMAGE_ID);
        // A launch repeated after a crash finds the node and returns the launched claim.
        let mut fresh = claim.clone();
        fresh.status = None;
        let again = launched_as(&fresh, &node);
        assert_eq!(again.provider_id(), id);
        let labels = again.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get(v1labels::OS).map(String::as_str), Some("linux"));
        assert!(!labels.contains_key(FAKE_NODE_LABEL) && !labels.contains_key(v1labels::HOSTNAME));
    }
}
