//! Volume topology: zone requirements from bound PVs, storage classes and ephemeral volumes.
#![cfg(feature = "k8s")]

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use karpenter_scheduling::k8s::{fill_volume_requirements, pod_from_k8s, volume_requirements};
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid manifest")
}

fn pod_with(volumes: Value) -> core::Pod {
    from(json!({
        "metadata": {"name": "db-0", "namespace": "data"},
        "spec": {"containers": [{"name": "c"}], "volumes": volumes}
    }))
}

fn pvc(name: &str, spec: Value) -> core::PersistentVolumeClaim {
    from(json!({"metadata": {"name": name, "namespace": "data"}, "spec": spec}))
}

fn pv(name: &str, spec: Value) -> core::PersistentVolume {
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn sc(name: &str, extra: Value) -> storage::StorageClass {
    let mut v = json!({"metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"});
    for (k, val) in extra.as_object().unwrap() {
        if k == "annotations" || k == "creationTimestamp" {
            v["metadata"][k] = val.clone();
        } else {
            v[k] = val.clone();
        }
    }
    from(v)
}

fn zone_in(values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: ZONE.into(),
        operator: Operator::In,
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    }
}

fn zone_affinity(zones: &[&str]) -> Value {
    json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE, "operator": "In", "values": zones}]}]}})
}

#[test]
fn bound_pv_node_affinity_becomes_requirements() {
    let pod = pod_with(
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                              {"name": "tmp", "emptyDir": {}}]),
    );
    let pvcs = [pvc(
        "data-db-0",
        json!({"volumeName": "pv-1", "storageClassName": "gp3"}),
    )];
    let pvs = [pv(
        "pv-1",
        json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                               "nodeAffinity": zone_affinity(&["us-east-1b"])}),
    )];
    let reqs = volume_requirements(&pod, &pvcs, &pvs, &[sc("gp3", json!({}))]).unwrap();
    assert_eq!(reqs, vec![zone_in(&["us-east-1b"])]);
}

#[test]
fn unbound_claim_takes_storage_class_allowed_topologies() {
    let pod = pod_with(json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]));
    let pvcs = [pvc("c", json!({"storageClassName": "zonal"}))];
    let classes = [sc(
        "zonal",
        json!({"allowedTopologies": [{"matchLabelExpressions": [
        {"key": ZONE, "values": ["us-east-1a", "us-east-1c"]}]}]}),
    )];
    assert_eq!(
        volume_requirements(&pod, &pvcs, &[], &classes).unwrap(),
        vec![zone_in(&["us-east-1a", "us-east-1c"])]
    );

    // No allowed topologies: nothing to add.
    let open = [sc("zonal", json!({}))];
    assert!(
        volume_requirements(&pod, &pvcs, &[], &open)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn ored_single_zone_terms_fold_into_one_in() {
    let pod = pod_with(json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]));
    let pvcs = [pvc("c", json!({"storageClassName": "two-terms"}))];
    let classes = [sc(
        "two-terms",
        json!({"allowedTopologies": [
        {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1c"]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]}]}),
    )];
    assert_eq!(
        volume_requirements(&pod, &pvcs, &[], &classes).unwrap(),
        vec![zone_in(&["us-east-1a", "us-east-1c"])]
    );
}

#[test]
fn local_pv_ignores_hostname() {
    let pod = pod_with(
        json!([{"name": "a", "persistentVolumeClaim": {"claimName": "a"}},
                              {"name": "b", "persistentVolumeClaim": {"claimName": "b"}}]),
    );
    let pvcs = [
        pvc("a", json!({"volumeName": "local-a"})),
        pvc("b", json!({"volumeName": "local-b"})),
    ];
    let pvs = [
        pv(
            "local-a",
            json!({"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["old-node"]},
                                  {"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]}]}}}),
        ),
        // Hostname only: once hostname is ignored, the volume does not constrain the pod.
        pv(
            "local-b",
            json!({"hostPath": {"path": "/data"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["old-node"]}]}]}}}),
        ),
    ];
    assert_eq!(
        volume_requirements(&pod, &pvcs, &pvs, &[]).unwrap(),
        vec![zone_in(&["us-east-1a"])]
    );
}

#[test]
fn ephemeral_volume_uses_its_claim_or_template() {
    let pod = pod_with(
        json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "zonal",
        "resources": {"requests": {"storage": "1Gi"}}}}}}]),
    );
    let classes = [sc(
        "zonal",
        json!({"allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]}]}),
    )];
    // Claim not created yet: the template's class decides.
    assert_eq!(
        volume_requirements(&pod, &[], &[], &classes).unwrap(),
        vec![zone_in(&["us-east-1a"])]
    );
    // Claim `<pod>-<volume>` exists and is bound: its PV decides.
    let pvcs = [pvc(
        "db-0-scratch",
        json!({"volumeName": "pv-9", "storageClassName": "zonal"}),
    )];
    let pvs = [pv(
        "pv-9",
        json!({"nodeAffinity": zone_affinity(&["us-east-1d"])}),
    )];
    assert_eq!(
        volume_requirements(&pod, &pvcs, &pvs, &classes).unwrap(),
        vec![zone_in(&["us-east-1d"])]
    );
}

#[test]
fn ephemeral_template_without_class_uses_the_newest_default_class() {
    let pod =
        pod_with(json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]));
    let default = json!({"storageclass.kubernetes.io/is-default-class": "true"});
    let classes = [
        sc(
            "old-default",
            json!({"annotations": default, "creationTimestamp": "2023-01-01T00:00:00Z",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]}]}),
        ),
        sc(
            "new-default",
            json!({"annotations": default, "creationTimestamp": "2024-01-01T00:00:00Z",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1b"]}]}]}),
        ),
        sc(
            "not-default",
            json!({"creationTimestamp": "2025-01-01T00:00:00Z",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1c"]}]}]}),
        ),
    ];
    assert_eq!(
        volume_requirements(&pod, &[], &[], &classes).unwrap(),
        vec![zone_in(&["us-east-1b"])]
    );
}

#[test]
fn requirements_from_several_volumes_are_anded_and_deduplicated() {
    let pod = pod_with(
        json!([{"name": "a", "persistentVolumeClaim": {"claimName": "a"}},
                              {"name": "b", "persistentVolumeClaim": {"claimName": "b"}}]),
    );
    let pvcs = [
        pvc("a", json!({"volumeName": "pa"})),
        pvc("b", json!({"volumeName": "pb"})),
    ];
    let pvs = [
        pv(
            "pa",
            json!({"nodeAffinity": zone_affinity(&["us-east-1a"])}),
        ),
        pv(
            "pb",
            json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]}}}),
        ),
    ];
    let reqs = volume_requirements(&pod, &pvcs, &pvs, &[]).unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0], zone_in(&["us-east-1a"]));
    assert_eq!(reqs[1].key, "kubernetes.io/arch");
}

#[test]
fn fill_sets_the_model_pod() {
    let k = pod_with(json!([{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]));
    let mut p = pod_from_k8s(&k).unwrap();
    assert!(p.volume_requirements.is_empty());
    let pvcs = [pvc("c", json!({"volumeName": "pv"}))];
    let pvs = [pv(
        "pv",
        json!({"nodeAffinity": zone_affinity(&["us-east-1f"])}),
    )];
    fill_volume_requirements(&mut p, &k, &pvcs, &pvs, &[]).unwrap();
    assert_eq!(p.volume_requirements, vec![zone_in(&["us-east-1f"])]);
}

#[test]
fn missing_objects_are_errors_naming_pod_and_volume() {
    let pod = pod_with(
        json!([{"name": "tmp", "emptyDir": {}}, {"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]),
    );
    let e = volume_requirements(&pod, &[], &[], &[]).unwrap_err();
    assert_eq!((e.kind, e.object.as_str()), ("Pod", "data/db-0"));
    assert_eq!(e.field, "spec.volumes[1].persistentVolumeClaim.claimName");
    assert!(e.reason.contains("data/c"), "{e}");

    // A claim of the same name in another namespace does not count.
    let elsewhere: core::PersistentVolumeClaim =
        from(json!({"metadata": {"name": "c", "namespace": "other"}, "spec": {}}));
    assert!(volume_requirements(&pod, &[elsewhere], &[], &[]).is_err());

    let e = volume_requirements(&pod, &[pvc("c", json!({"volumeName": "gone"}))], &[], &[])
        .unwrap_err();
    assert!(e.reason.contains("PersistentVolume gone"), "{e}");

    let e = volume_requirements(
        &pod,
        &[pvc("c", json!({"storageClassName": "nope"}))],
        &[],
        &[],
    )
    .unwrap_err();
    assert!(e.reason.contains("StorageClass nope"), "{e}");

    let bad_pv = pv(
        "pv",
        json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE, "operator": "Within", "values": ["x"]}]}]}}}),
    );
    let e = volume_requirements(
        &pod,
        &[pvc("c", json!({"volumeName": "pv"}))],
        &[bad_pv],
        &[],
    )
    .unwrap_err();
    assert_eq!((e.kind, e.object.as_str()), ("PersistentVolume", "pv"));
    assert_eq!(
        e.field,
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator"
    );
}
