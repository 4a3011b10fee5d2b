//! Node conversions: Karpenter's ephemeral-taint filtering and lifecycle state.
#![cfg(feature = "k8s")]

use k8s_openapi::api::core::v1 as core;
use karpenter_scheduling::k8s::{is_ephemeral_taint, node_from_k8s};
use karpenter_scheduling::model::NodeState;
use karpenter_scheduling::taints::{Taint, TaintEffect};
use serde_json::{Value, json};

fn node(v: Value) -> core::Node {
    serde_json::from_value(v).expect("valid Node manifest")
}

fn ready() -> Value {
    json!([{"type": "Ready", "status": "True"}])
}

fn taint_keys(n: &karpenter_scheduling::Node) -> Vec<(String, TaintEffect)> {
    n.taints.iter().map(|t| (t.key.clone(), t.effect)).collect()
}

fn every_ephemeral_taint() -> Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "readiness.k8s.io/network", "effect": "NoSchedule"},
        {"key": "example.com/agent-not-ready", "value": "true", "effect": "NoExecute"},
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ])
}

#[test]
fn converts_a_ready_karpenter_node() {
    let n = node_from_k8s(
        &node(json!({
            "metadata": {
                "name": "ip-10-0-1-23.ec2.internal",
                "creationTimestamp": "2024-05-01T10:00:00Z",
                "labels": {
                    "karpenter.sh/nodepool": "default",
                    "karpenter.sh/initialized": "true",
                    "karpenter.sh/registered": "true",
                    "node.kubernetes.io/instance-type": "m5.large",
                    "topology.kubernetes.io/zone": "us-east-1a",
                    "karpenter.sh/capacity-type": "spot"
                },
                "annotations": {"karpenter.sh/nodepool-hash": "123"}
            },
            "spec": {"providerID": "aws:///us-east-1a/i-0123", "taints": [
                {"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "2", "memory": "7934456Ki", "pods": "29", "ephemeral-storage": "20959212Ki"},
                "allocatable": {"cpu": "1930m", "memory": "7244280Ki", "pods": "29", "ephemeral-storage": "18242267924"},
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
            }
        })),
        &[],
    )
    .unwrap();
    assert_eq!(&*n.name, "ip-10-0-1-23.ec2.internal");
    assert_eq!(n.node_pool.as_deref(), Some("default"));
    assert_eq!(n.instance_type(), Some("m5.large"));
    assert_eq!(n.zone(), Some("us-east-1a"));
    assert_eq!(n.capacity_type(), Some("spot"));
    assert_eq!(
        n.annotations
            .get("karpenter.sh/nodepool-hash")
            .map(String::as_str),
        Some("123")
    );
    assert_eq!(
        n.taints,
        vec![Taint::new("dedicated", "web", TaintEffect::NoSchedule)]
    );
    assert_eq!(n.state, NodeState::Ready);
    assert_eq!(n.allocatable.cpu_millis, 1930);
    assert_eq!(n.allocatable.memory, 7_244_280 * 1024);
    assert_eq!(n.allocatable.pods, 29);
    assert_eq!(n.allocatable.ephemeral_storage, 18_242_267_924);
    assert_eq!(n.capacity.cpu_millis, 2000);
    assert_eq!(n.capacity.memory, 7_934_456 * 1024);
    assert_eq!(n.created_at, 1_714_557_600_000);
    assert_eq!(n.price, 0.0);
}

#[test]
fn uninitialized_managed_node_drops_ephemeral_and_startup_taints() {
    let n = node_from_k8s(
        &node(json!({
            "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true"}},
            "spec": {"taints": every_ephemeral_taint()},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        })),
        // A startup taint matches by key and effect; its value does not matter.
        &[Taint::new("example.com/agent-not-ready", "", TaintEffect::NoExecute)],
    )
    .unwrap();
    assert_eq!(
        taint_keys(&n),
        vec![("dedicated".to_string(), TaintEffect::NoSchedule)]
    );
    assert_eq!(n.state, NodeState::InFlight);
}

#[test]
fn startup_taint_with_other_effect_is_kept() {
    let n = node_from_k8s(
        &node(json!({
            "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"taints": [{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}]},
        })),
        &[Taint::new(
            "example.com/agent-not-ready",
            "",
            TaintEffect::NoExecute,
        )],
    )
    .unwrap();
    assert_eq!(n.taints.len(), 1);
}

#[test]
fn initialized_or_unmanaged_nodes_keep_every_taint() {
    // Once initialized, a not-ready taint means the node really is not ready.
    let initialized = node_from_k8s(
        &node(json!({
            "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"}},
            "spec": {"taints": every_ephemeral_taint()},
            "status": {"conditions": ready()}
        })),
        &[Taint::new("example.com/agent-not-ready", "", TaintEffect::NoExecute)],
    )
    .unwrap();
    assert_eq!(initialized.taints.len(), 8);
    // A node Karpenter does not manage is always initialized.
    let unmanaged = node_from_k8s(
        &node(json!({
            "metadata": {"name": "n2"},
            "spec": {"taints": every_ephemeral_taint()},
            "status": {"conditions": ready()}
        })),
        &[],
    )
    .unwrap();
    assert_eq!(unmanaged.taints.len(), 8);
    assert_eq!(unmanaged.node_pool, None);
    assert_eq!(unmanaged.state, NodeState::Ready);
}

#[test]
fn ephemeral_taint_table() {
    let cases = [
        (
            "node.kubernetes.io/not-ready",
            "",
            TaintEffect::NoSchedule,
            true,
        ),
        (
            "node.kubernetes.io/not-ready",
            "",
            TaintEffect::NoExecute,
            true,
        ),
        (
            "node.kubernetes.io/not-ready",
            "",
            TaintEffect::PreferNoSchedule,
            false,
        ),
        (
            "node.kubernetes.io/unreachable",
            "",
            TaintEffect::NoSchedule,
            true,
        ),
        (
            "node.kubernetes.io/unreachable",
            "",
            TaintEffect::NoExecute,
            false,
        ),
        (
            "node.cloudprovider.kubernetes.io/uninitialized",
            "true",
            TaintEffect::NoSchedule,
            true,
        ),
        // MatchTaint compares key and effect only.
        (
            "node.cloudprovider.kubernetes.io/uninitialized",
            "false",
            TaintEffect::NoSchedule,
            true,
        ),
        (
            "karpenter.sh/unregistered",
            "",
            TaintEffect::NoExecute,
            true,
        ),
        (
            "karpenter.sh/unregistered",
            "",
            TaintEffect::NoSchedule,
            false,
        ),
        ("readiness.k8s.io/cni", "", TaintEffect::NoSchedule, true),
        ("karpenter.sh/disrupted", "", TaintEffect::NoSchedule, false),
        ("dedicated", "gpu", TaintEffect::NoSchedule, false),
    ];
    for (key, value, effect, expected) in cases {
        assert_eq!(
            is_ephemeral_taint(&Taint::new(key, value, effect)),
            expected,
            "{key}:{effect:?}"
        );
    }
}

#[test]
fn state_table() {
    // (labels, taints, deleting, conditions, expected)
    let managed_init = json!({"karpenter.sh/nodepool": "p", "karpenter.sh/initialized": "true"});
    let cases: Vec<(Value, Value, bool, Value, NodeState)> = vec![
        (
            managed_init.clone(),
            json!([]),
            false,
            ready(),
            NodeState::Ready,
        ),
        (
            managed_init.clone(),
            json!([]),
            true,
            ready(),
            NodeState::Deleting,
        ),
        (
            managed_init.clone(),
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
            false,
            ready(),
            NodeState::Deleting,
        ),
        (
            managed_init.clone(),
            json!([]),
            false,
            json!([{"type": "Ready", "status": "Unknown"}]),
            NodeState::InFlight,
        ),
        (
            managed_init.clone(),
            json!([]),
            false,
            json!([]),
            NodeState::InFlight,
        ),
        // Ready but not yet initialized: pods may be nominated, not bound as to a ready node.
        (
            json!({"karpenter.sh/nodepool": "p"}),
            json!([]),
            false,
            ready(),
            NodeState::InFlight,
        ),
        (json!({}), json!([]), false, ready(), NodeState::Ready),
        (json!({}), json!([]), true, json!([]), NodeState::Deleting),
    ];
    for (i, (labels, taints, deleting, conditions, expected)) in cases.into_iter().enumerate() {
        let mut metadata = json!({"name": format!("n{i}"), "labels": labels});
        if deleting {
            metadata["deletionTimestamp"] = json!("2024-05-01T10:00:00Z");
        }
        let n = node_from_k8s(
            &node(json!({"metadata": metadata, "spec": {"taints": taints}, "status": {"conditions": conditions}})),
            &[],
        )
        .unwrap();
        assert_eq!(n.state, expected, "case {i}");
    }
}

#[test]
fn errors_name_node_and_field() {
    let e = node_from_k8s(
        &node(json!({"metadata": {"name": "n1"}, "spec": {"taints": [
            {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Sometimes"}]}})),
        &[],
    )
    .unwrap_err();
    assert_eq!(
        (e.kind, e.object.as_str(), e.field.as_str()),
        ("Node", "n1", "spec.taints[1].effect")
    );
    assert!(e.reason.contains("Sometimes"));

    let e = node_from_k8s(
        &node(json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"memory": "12XB"}}})),
        &[],
    )
    .unwrap_err();
    assert_eq!(e.field, "status.allocatable.memory");
    assert!(
        e.to_string()
            .starts_with("Node n1: status.allocatable.memory: "),
        "{e}"
    );

    let e = node_from_k8s(
        &node(json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "-2"}}})),
        &[],
    )
    .unwrap_err();
    assert_eq!(e.field, "status.capacity.cpu");
    assert!(e.reason.contains("negative"));

    let e = node_from_k8s(&node(json!({"metadata": {}})), &[]).unwrap_err();
    assert_eq!(e.field, "metadata.name");
}
