//! DaemonSet, PodDisruptionBudget and workload-template conversions.
#![cfg(feature = "k8s")]

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use karpenter_scheduling::k8s::{
    Workload, daemonset_from_k8s, pdb_from_k8s, pod_from_k8s, pod_from_pod_template,
    pods_from_workload,
};
use karpenter_scheduling::model::OwnerRef;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid manifest")
}

fn template(cpu: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "inflate"}, "annotations": {"a": "b"}},
        "spec": {
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}]
        }
    })
}

#[test]
fn daemonset_pod_is_owned_by_the_daemonset_and_uses_limits_as_requests() {
    let ds: apps::DaemonSet = from(json!({
        "metadata": {"name": "aws-node", "namespace": "kube-system", "uid": "ds-uid"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "aws-node"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "aws-node"}},
                "spec": {
                    "containers": [{"name": "aws-node", "resources": {"requests": {"cpu": "25m"}, "limits": {"memory": "128Mi"}}}],
                    "tolerations": [{"operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}
                }
            }
        }
    }));
    let d = daemonset_from_k8s(&ds).unwrap();
    assert_eq!(
        (d.namespace.as_str(), d.name.as_str()),
        ("kube-system", "aws-node")
    );
    assert_eq!(
        (d.pod.namespace.as_str(), d.pod.name.as_str()),
        ("kube-system", "aws-node")
    );
    assert!(d.pod.is_daemon());
    assert_eq!(
        d.pod.owner,
        Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "aws-node".into(),
            uid: "ds-uid".into()
        })
    );
    assert_eq!(d.pod.requests.cpu_millis, 25);
    assert_eq!(d.pod.requests.memory, 128 * 1024 * 1024);
    assert_eq!(
        d.pod.labels.get("k8s-app").map(String::as_str),
        Some("aws-node")
    );
    assert_eq!(d.pod.tolerations.len(), 1);
    assert_eq!(d.pod.affinity.node_affinity.required.len(), 1);
}

#[test]
fn daemonset_errors_point_into_the_template() {
    let ds: apps::DaemonSet = from(json!({
        "metadata": {"name": "agent", "namespace": "ops"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "one"}}}]}}}
    }));
    let e = daemonset_from_k8s(&ds).unwrap_err();
    assert_eq!((e.kind, e.object.as_str()), ("DaemonSet", "ops/agent"));
    assert_eq!(
        e.field,
        "spec.template.spec.containers[0].resources.requests.cpu"
    );
}

#[test]
fn pdb_conversion_and_matching() {
    let pdb: policy::PodDisruptionBudget = from(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        "status": {"disruptionsAllowed": 2, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
    }));
    let b = pdb_from_k8s(&pdb).unwrap();
    assert_eq!(
        (b.namespace.as_str(), b.name.as_str(), b.key().as_str()),
        ("shop", "web", "shop/web")
    );
    assert_eq!(b.disruptions_allowed, 2);
    assert!(!b.fully_blocking);
    assert!(b.always_allow_unhealthy);

    let web = pod_from_k8s(&from::<core::Pod>(json!({
        "metadata": {"name": "w", "namespace": "shop", "labels": {"app": "web"}}, "spec": {"containers": []}})))
    .unwrap();
    let other_ns = pod_from_k8s(&from::<core::Pod>(json!({
        "metadata": {"name": "w", "namespace": "other", "labels": {"app": "web"}}, "spec": {"containers": []}})))
    .unwrap();
    let db = pod_from_k8s(&from::<core::Pod>(json!({
        "metadata": {"name": "d", "namespace": "shop", "labels": {"app": "db"}}, "spec": {"containers": []}})))
    .unwrap();
    assert!(b.matches(&web));
    assert!(!b.matches(&other_ns));
    assert!(!b.matches(&db));
}

#[test]
fn pdb_fully_blocking_table() {
    let cases = [
        (json!({"maxUnavailable": 0}), true),
        (json!({"maxUnavailable": "0%"}), true),
        (json!({"minAvailable": "100%"}), true),
        (json!({"maxUnavailable": "10%"}), false),
        (json!({"minAvailable": 1}), false),
        (json!({}), false),
    ];
    for (spec, expected) in cases {
        let pdb: policy::PodDisruptionBudget =
            from(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec.clone()}));
        let b = pdb_from_k8s(&pdb).unwrap();
        assert_eq!(b.fully_blocking, expected, "{spec}");
        // No status yet: nothing may be disrupted.
        assert_eq!(b.disruptions_allowed, 0);
        assert_eq!(b.selector, None);
    }
}

#[test]
fn pdb_selector_error_names_field() {
    let pdb: policy::PodDisruptionBudget = from(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Like"}]}}
    }));
    let e = pdb_from_k8s(&pdb).unwrap_err();
    assert_eq!((e.kind, e.object.as_str()), ("PodDisruptionBudget", "ns/p"));
    assert_eq!(e.field, "spec.selector.matchExpressions[0].operator");
}

#[test]
fn deployment_expands_to_replicas() {
    let d: apps::Deployment = from(json!({
        "metadata": {"name": "inflate", "namespace": "demo", "uid": "dep-uid", "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "inflate"}}, "template": template("1")}
    }));
    let pods = pods_from_workload(&d).unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["inflate-0", "inflate-1", "inflate-2"]);
    for p in &pods {
        assert_eq!(p.namespace, "demo");
        assert_eq!(p.labels.get("app").map(String::as_str), Some("inflate"));
        assert_eq!(p.annotations.get("a").map(String::as_str), Some("b"));
        assert_eq!(
            p.owner,
            Some(OwnerRef {
                kind: "Deployment".into(),
                name: "inflate".into(),
                uid: "dep-uid".into()
            })
        );
        assert_eq!(p.requests.cpu_millis, 1000);
        assert_eq!(p.tolerations.len(), 1);
        assert_eq!(p.created_at, 1_714_557_600_000);
    }
    assert_eq!(pods_from_workload(&d).unwrap(), pods);
}

#[test]
fn replica_defaults_and_kinds() {
    let rs: apps::ReplicaSet = from(
        json!({"metadata": {"name": "rs"}, "spec": {"selector": {}, "template": template("100m")}}),
    );
    let pods = pods_from_workload(Workload::ReplicaSet(&rs)).unwrap();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].namespace, "default");
    assert_eq!(
        pods[0].owner.as_ref().map(|o| o.kind.as_str()),
        Some("ReplicaSet")
    );

    let zero: apps::Deployment = from(
        json!({"metadata": {"name": "z"}, "spec": {"replicas": 0, "selector": {}, "template": template("1")}}),
    );
    assert!(pods_from_workload(&zero).unwrap().is_empty());
}

#[test]
fn statefulset_uses_ordinals() {
    let sts: apps::StatefulSet = from(json!({
        "metadata": {"name": "db", "namespace": "data"},
        "spec": {"replicas": 2, "ordinals": {"start": 5}, "serviceName": "db", "selector": {}, "template": template("2")}
    }));
    let pods = pods_from_workload(&sts).unwrap();
    assert_eq!(
        pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        vec!["db-5", "db-6"]
    );
    assert_eq!(
        pods[0].owner.as_ref().map(|o| o.kind.as_str()),
        Some("StatefulSet")
    );
}

#[test]
fn job_pod_count_table() {
    // (spec extras, status, expected pods)
    let cases = [
        (json!({}), json!({}), 1),
        (json!({"parallelism": 4}), json!({}), 4),
        (json!({"parallelism": 4, "completions": 2}), json!({}), 2),
        (
            json!({"parallelism": 4, "completions": 10}),
            json!({"succeeded": 8}),
            2,
        ),
        (
            json!({"parallelism": 4, "completions": 3}),
            json!({"succeeded": 3}),
            0,
        ),
        (json!({"completions": 5}), json!({}), 1),
        (json!({"parallelism": 0}), json!({}), 0),
        (json!({"parallelism": 3, "suspend": true}), json!({}), 0),
    ];
    for (extra, status, expected) in cases {
        let mut spec = json!({"template": template("500m")});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let job: batch::Job = from(
            json!({"metadata": {"name": "batch", "namespace": "jobs"}, "spec": spec, "status": status}),
        );
        let pods = pods_from_workload(&job).unwrap();
        assert_eq!(pods.len(), expected, "{extra} {status}");
        assert!(
            pods.iter()
                .all(|p| p.owner.as_ref().is_some_and(|o| o.kind == "Job"))
        );
    }
}

#[test]
fn workload_errors_name_the_workload() {
    let d: apps::Deployment = from(
        json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": -1, "selector": {}, "template": template("1")}}),
    );
    let e = pods_from_workload(&d).unwrap_err();
    assert_eq!(
        (e.kind, e.object.as_str(), e.field.as_str()),
        ("Deployment", "shop/web", "spec.replicas")
    );

    let huge: apps::Deployment = from(json!({"metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 2_000_000_000, "selector": {}, "template": template("1")}}));
    let e = pods_from_workload(&huge).unwrap_err();
    assert_eq!(e.field, "spec.replicas");
    assert!(e.reason.contains("150000"), "{e}");

    let j: batch::Job = from(
        json!({"metadata": {"name": "j", "namespace": "shop"}, "spec": {"template": {"metadata": {}}}}),
    );
    let e = pods_from_workload(&j).unwrap_err();
    assert_eq!((e.kind, e.field.as_str()), ("Job", "spec.template.spec"));

    let d: apps::Deployment = from(
        json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"selector": {},
        "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1}],
            "resources": {"requests": {"memory": "1Q"}}}]}}}}),
    );
    let e = pods_from_workload(&d).unwrap_err();
    assert_eq!(
        e.field,
        "spec.template.spec.containers[0].resources.requests.memory"
    );
}

#[test]
fn a_pod_template_is_one_pod_of_its_shape_with_sidecars_counted() {
    let pt: core::PodTemplate = from(json!({
        "metadata": {"name": "chunk", "namespace": "team"},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "initContainers": [
                    {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
                    {"name": "setup", "resources": {"requests": {"cpu": "2"}}}
                ],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                "nodeSelector": {"workload": "batch"}
            }
        }
    }));
    let pod = pod_from_pod_template(&pt).unwrap();
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str()),
        ("team", "chunk")
    );
    assert_eq!(pod.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        pod.node_selector.get("workload").map(String::as_str),
        Some("batch")
    );
    assert!(pod.owner.is_none());
    // max(setup 2 + sidecar 0.25, containers 1 + sidecar 0.25)
    assert_eq!(pod.requests.cpu_millis, 2250);
    let mut bad = pt.clone();
    bad.template = None;
    let err = pod_from_pod_template(&bad).unwrap_err().to_string();
    assert_eq!(err, "PodTemplate team/chunk: template: missing");
}
