//! Pod conversions from realistic manifests (the `k8s` feature).
#![cfg(feature = "k8s")]

use k8s_openapi::api::core::v1 as core;
use karpenter_scheduling::k8s::{ConversionError, pod_from_k8s};
use karpenter_scheduling::model::{HostPort, InclusionPolicy, OwnerRef, WhenUnsatisfiable};
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::selector::SelectorOperator;
use karpenter_scheduling::taints::{TaintEffect, TolerationOperator};
use serde_json::{Value, json};

fn pod(v: Value) -> core::Pod {
    serde_json::from_value(v).expect("valid Pod manifest")
}

fn web_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d4b9c-x2x9z",
            "namespace": "shop",
            "uid": "0b9c1a4e-1111-2222-3333-444455556666",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-controller", "uid": "u0"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "u1", "controller": true}
            ]
        },
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "priority": 1000,
            "containers": [
                {"name": "app", "image": "web:1",
                 "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                 "ports": [{"containerPort": 8080, "hostPort": 8080},
                           {"containerPort": 9090},
                           {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]},
                {"name": "proxy", "image": "envoy",
                 "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "128Mi"}}}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]},
                            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]}
                        ]},
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "preference": {"matchExpressions": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}
                    ]
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "cache"}},
                         "topologyKey": "topology.kubernetes.io/zone",
                         "namespaces": ["infra"],
                         "namespaceSelector": {}}
                    ]
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {
                            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                            "topologyKey": "kubernetes.io/hostname",
                            "matchLabelKeys": ["pod-template-hash"],
                            "mismatchLabelKeys": ["tenant"]}}
                    ]
                }
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 3},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                 "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["pod-template-hash"]}
            ]
        },
        "status": {"startTime": "2024-05-01T10:00:05Z"}
    })
}

#[test]
fn converts_a_realistic_pod() {
    let p = pod_from_k8s(&pod(web_pod())).unwrap();
    assert_eq!(p.namespace, "shop");
    assert_eq!(&*p.name, "web-7d4b9c-x2x9z");
    assert_eq!(p.uid, "0b9c1a4e-1111-2222-3333-444455556666");
    assert_eq!(p.labels.get("tier").map(String::as_str), Some("frontend"));
    assert_eq!(
        p.annotations
            .get("karpenter.sh/do-not-disrupt")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        p.owner,
        Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "web-7d4b9c".into(),
            uid: "u1".into()
        })
    );
    assert_eq!(
        p.node_selector.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert_eq!(p.priority, 1000);
    assert_eq!(p.node_name, None);
    assert_eq!(p.created_at, 1_714_557_600_000);
    assert_eq!(p.started_at, Some(1_714_557_605_000));
    assert!(!p.terminating);

    // 250m + 100m cpu; memory 256Mi + 128Mi (the limit stands in for the missing request).
    assert_eq!(p.requests.cpu_millis, 350);
    assert_eq!(p.requests.memory, 384 * 1024 * 1024);

    let na = &p.affinity.node_affinity;
    assert_eq!(na.required.len(), 2);
    assert_eq!(
        na.required[0].match_expressions[0].key,
        "topology.kubernetes.io/zone"
    );
    assert_eq!(
        na.required[0].match_expressions[0].values,
        vec!["us-east-1a", "us-east-1b"]
    );
    assert_eq!(na.required[0].match_expressions[1].operator, Operator::Gt);
    assert_eq!(na.required[1].match_fields[0].key, "metadata.name");
    assert_eq!(na.required[1].match_fields[0].operator, Operator::NotIn);
    assert_eq!(na.preferred[0].weight, 50);
    assert_eq!(
        na.preferred[0].preference.match_expressions[0].values,
        vec!["spot"]
    );

    let pa = &p.affinity.pod_affinity.required[0];
    assert_eq!(pa.topology_key, "topology.kubernetes.io/zone");
    assert_eq!(pa.namespaces, vec!["infra"]);
    assert_eq!(
        pa.namespace_selector.as_ref().map(|s| s.is_empty()),
        Some(true)
    );
    assert_eq!(
        pa.label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .get("app")
            .map(String::as_str),
        Some("cache")
    );

    let anti = &p.affinity.pod_anti_affinity.preferred[0];
    assert_eq!(anti.weight, 100);
    assert_eq!(anti.term.match_label_keys, vec!["pod-template-hash"]);
    assert_eq!(anti.term.mismatch_label_keys, vec!["tenant"]);
    assert_eq!(anti.term.namespace_selector, None);
    assert_eq!(
        anti.term.label_selector.as_ref().unwrap().match_expressions[0].operator,
        SelectorOperator::In
    );
    assert!(p.affinity.pod_anti_affinity.required.is_empty());

    assert_eq!(p.tolerations.len(), 3);
    assert_eq!(p.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert_eq!(p.tolerations[0].value, "web");
    assert_eq!(p.tolerations[1].operator, TolerationOperator::Exists);
    assert_eq!(p.tolerations[1].key, "");
    assert_eq!(p.tolerations[1].effect, None);
    assert_eq!(p.tolerations[2].toleration_seconds, Some(300));

    let tsc = &p.topology_spread_constraints;
    assert_eq!(tsc[0].when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    assert_eq!(tsc[0].min_domains, Some(3));
    // Kubernetes' defaults when the policies are omitted.
    assert_eq!(tsc[0].node_affinity_policy, InclusionPolicy::Honor);
    assert_eq!(tsc[0].node_taints_policy, InclusionPolicy::Ignore);
    assert_eq!(tsc[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(tsc[1].node_affinity_policy, InclusionPolicy::Ignore);
    assert_eq!(tsc[1].node_taints_policy, InclusionPolicy::Honor);
    assert_eq!(tsc[1].match_label_keys, vec!["pod-template-hash"]);

    assert_eq!(
        p.host_ports,
        vec![
            HostPort {
                port: 8080,
                protocol: "TCP".into(),
                host_ip: String::new()
            },
            HostPort {
                port: 53,
                protocol: "UDP".into(),
                host_ip: "10.0.0.1".into()
            },
        ]
    );
}

#[test]
fn minimal_pod_gets_defaults() {
    let p = pod_from_k8s(&pod(json!({
        "metadata": {"name": "bare", "deletionTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"nodeName": "ip-10-0-0-1", "containers": [{"name": "c"}]}
    })))
    .unwrap();
    assert_eq!(p.namespace, "default");
    assert_eq!(p.owner, None);
    assert!(p.requests.is_zero());
    assert_eq!(p.node_name.as_deref(), Some("ip-10-0-0-1"));
    assert!(p.terminating);
    assert_eq!(p.priority, 0);
    assert_eq!(p.started_at, None);
}

#[test]
fn sidecar_requests_add_to_containers_and_overhead_adds_on_top() {
    let p = pod_from_k8s(&pod(json!({
        "metadata": {"name": "sidecars", "namespace": "ns"},
        "spec": {
            "initContainers": [
                // A classic init container: only its peak matters.
                {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                // A sidecar (restartPolicy Always) keeps running alongside the app.
                {"name": "mesh", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}
            ],
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}],
            "overhead": {"cpu": "100m", "memory": "10Mi"}
        }
    })))
    .unwrap();
    // cpu: max(init 2000, sidecar 500 + app 1000) + overhead 100.
    assert_eq!(p.requests.cpu_millis, 2100);
    // memory: max(1Gi, 64Mi + 512Mi) + 10Mi.
    assert_eq!(p.requests.memory, (1024 + 10) * 1024 * 1024);
}

#[test]
fn init_container_restart_policy_other_than_always_is_not_a_sidecar() {
    let p = pod_from_k8s(&pod(json!({
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "i", "restartPolicy": "Never", "resources": {"requests": {"cpu": "300m"}}}],
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]
        }
    })))
    .unwrap();
    assert_eq!(p.requests.cpu_millis, 1000);
}

#[test]
fn pod_level_resources_replace_the_container_sum() {
    let p = pod_from_k8s(&pod(json!({
        "metadata": {"name": "p"},
        "spec": {
            "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}}}],
            "overhead": {"cpu": "250m"}
        }
    })))
    .unwrap();
    assert_eq!(p.requests.cpu_millis, 4250);
    assert_eq!(p.requests.memory, 8 * 1024 * 1024 * 1024);
    assert_eq!(p.requests.ephemeral_storage, 1024 * 1024 * 1024);
}

fn expect_err(v: Value) -> ConversionError {
    pod_from_k8s(&pod(v)).expect_err("conversion should fail")
}

/// Every rejected field: (manifest, field path, text the reason must contain).
#[test]
fn every_error_names_object_and_field() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [
                {"name": "a"},
                {"name": "b", "resources": {"requests": {"cpu": "1x"}}}]}}),
            "spec.containers[1].resources.requests.cpu",
            "1x",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"memory": "-1Gi"}}}]}}),
            "spec.containers[0].resources.limits.memory",
            "negative",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "initContainers": [{"name": "i", "resources": {"requests": {"memory": "lots"}}}]}}),
            "spec.initContainers[0].resources.requests.memory",
            "lots",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "overhead": {"cpu": "?"}}}),
            "spec.overhead.cpu",
            "?",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "tolerations": [{"key": "k", "operator": "Equal"}, {"key": "k", "operator": "Like"}]}}),
            "spec.tolerations[1].operator",
            "Like",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "tolerations": [{"key": "k", "effect": "NoWay"}]}}),
            "spec.tolerations[0].effect",
            "NoWay",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}}}),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0].operator",
            "Near",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "Gte", "values": ["1"]}]}}]}}}}),
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].operator",
            "Gte",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname",
                     "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Matches"}]}}]}}}}),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator",
            "Matches",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone",
                     "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Any"}]}}}]}}}}),
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector.matchExpressions[0].operator",
            "Any",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]}}),
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
            "Maybe",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "nodeTaintsPolicy": "Sometimes"}]}}),
            "spec.topologySpreadConstraints[0].nodeTaintsPolicy",
            "Sometimes",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [{"name": "a"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Has"}]}}]}}),
            "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator",
            "Has",
        ),
        (
            json!({"metadata": {"name": "web", "namespace": "shop"}}),
            "spec",
            "missing",
        ),
    ];
    for (manifest, field, reason) in cases {
        let e = expect_err(manifest);
        assert_eq!(e.kind, "Pod");
        assert_eq!(e.object, "shop/web", "{e}");
        assert_eq!(e.field, field, "{e}");
        assert!(e.reason.contains(reason), "{e}");
        let text = e.to_string();
        assert!(text.starts_with("Pod shop/web: "), "{text}");
        assert!(text.contains(field), "{text}");
    }
}

#[test]
fn a_pod_without_a_name_is_rejected() {
    let e = expect_err(json!({"metadata": {"namespace": "shop"}, "spec": {"containers": []}}));
    assert_eq!(e.field, "metadata.name");
    assert_eq!(e.object, "shop/<unnamed>");
}

#[test]
fn conversion_is_deterministic() {
    let k = pod(web_pod());
    assert_eq!(pod_from_k8s(&k).unwrap(), pod_from_k8s(&k).unwrap());
}
