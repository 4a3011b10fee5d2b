//! Kubernetes API objects as a controller reads them from the API server: karpenter.sh
//! NodeClaims and core/v1 Nodes, with the metadata the server fills in.

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition, PodSpec, PodStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::{
    NodeClaimSpec, NodeClassReference, NodeSelectorOperator, NodeSelectorRequirementWithMinValues,
    default_expire_after, labels,
};

/// A NodeClaim `name` of the NodePool `default` as the provisioner creates it and the API
/// server stores it: requiring `m5.large`, referencing the EC2NodeClass `default`, with the
/// termination finalizer, uid `uid-{name}`, resourceVersion `1`, created at the Unix epoch,
/// and no status (not launched).
pub fn node_claim(name: &str) -> NodeClaim {
    let mut c = NodeClaim::new(
        name,
        NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: vec![NodeSelectorRequirementWithMinValues::new(
                labels::INSTANCE_TYPE,
                NodeSelectorOperator::In,
                ["m5.large"],
            )],
            resources: Default::default(),
            node_class_ref: NodeClassReference {
                group: "karpenter.k8s.aws".into(),
                kind: "EC2NodeClass".into(),
                name: "default".into(),
            },
            termination_grace_period: None,
            expire_after: default_expire_after(),
        },
    );
    c.metadata.labels = Some([(labels::NODEPOOL.to_owned(), "default".to_owned())].into());
    c.metadata.finalizers = Some(vec![labels::TERMINATION_FINALIZER.into()]);
    c.metadata.resource_version = Some("1".into());
    c.metadata.uid = Some(format!("uid-{name}"));
    c.metadata.creation_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    c
}

/// A Node `name` as a kubelet registers it for the instance `provider_id`: the
/// `karpenter.sh/unregistered:NoExecute` taint, no label, no condition (so not Ready), uid
/// `uid-node-{name}`, resourceVersion `1`.
pub fn registering_node(name: &str, provider_id: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("1".into()),
            uid: Some(format!("uid-node-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            taints: Some(vec![Taint {
                key: labels::UNREGISTERED_TAINT_KEY.into(),
                effect: "NoExecute".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus::default()),
    }
}

/// `node` with exactly one condition, `Ready=True`.
pub fn ready(mut node: Node) -> Node {
    node.status
        .get_or_insert_with(NodeStatus::default)
        .conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..NodeCondition::default()
    }]);
    node
}

/// Pod `default/web`, created at 1 s after the epoch, bound to `node` (if any), with a true
/// `PodScheduled` condition since `scheduled_at` and a true `Ready` condition since
/// `ready_at` (milliseconds since the epoch); its phase is `Running` once ready, else
/// `Pending`. Models the transitions the pod metrics time.
pub fn pod_with_conditions(
    node: Option<&str>,
    scheduled_at: Option<i64>,
    ready_at: Option<i64>,
) -> Pod {
    let t = |ms: i64| Time(Timestamp::from_millisecond(ms).expect("a test time in range"));
    let condition = |type_: &str, at: i64| PodCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(t(at)),
        ..PodCondition::default()
    };
    let mut conditions = Vec::new();
    conditions.extend(scheduled_at.map(|at| condition("PodScheduled", at)));
    conditions.extend(ready_at.map(|at| condition("Ready", at)));
    let phase = if ready_at.is_some() {
        "Running"
    } else {
        "Pending"
    };
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("uid-web".into()),
            creation_timestamp: Some(t(1_000)),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_owned),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(conditions),
            ..PodStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_nodes_carry_server_metadata() {
        let c = node_claim("default-abc");
        assert_eq!(c.node_pool(), Some("default"));
        assert_eq!(c.metadata.uid.as_deref(), Some("uid-default-abc"));
        assert!(c.status.is_none());
        let n = registering_node("n1", "fake://zone-a/n1");
        assert!(
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none()
        );
        let n = ready(n);
        let conditions = n.status.and_then(|s| s.conditions).expect("conditions");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "Ready");
    }
}
