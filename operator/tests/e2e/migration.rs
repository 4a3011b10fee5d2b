//! Migrating from Karpenter v1.14: the NodePools, EC2NodeClasses and NodeOverlays of
//! Karpenter's own documentation (`docs-v1.14/`, with the few changes its README lists) are
//! applied to the real control plane, and each behaves as the documentation says. Nodes come
//! from the fake provider over the real EC2 catalogue; with the `aws` feature the
//! EC2NodeClass CRD is installed too, so the guide's EC2NodeClass must pass its schema.

use crate::harness::{self, Cluster, claim_condition, wait_for};
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_cloudprovider::NodeClaim;
use kube::api::{DeleteParams, ListParams};
use std::collections::BTreeMap;
use std::time::Duration;

const GETTING_STARTED: &str = include_str!("docs-v1.14/getting-started.yaml");
const INFLATE: &str = include_str!("docs-v1.14/inflate.yaml");
const GPU_NODEPOOL: &str = include_str!("docs-v1.14/gpu-nodepool.yaml");
const GPU_POD: &str = include_str!("docs-v1.14/gpu-pod.yaml");
const STATIC_NODEPOOL: &str = include_str!("docs-v1.14/static-nodepool.yaml");
const OVERLAY_CONFIGURATION: &str = include_str!("docs-v1.14/overlay-configuration.yaml");
const OVERLAY_CAPACITY: &str = include_str!("docs-v1.14/overlay-capacity.yaml");
const OVERLAY_CONFLICT: &str = include_str!("docs-v1.14/overlay-conflict.yaml");
const ODCRS: &str = include_str!("docs-v1.14/odcrs.yaml");

/// `docs` after the guide's `envsubst`.
fn substituted(docs: &str) -> String {
    docs.replace("${CLUSTER_NAME}", "karpenter-rs-e2e")
        .replace("${ALIAS_VERSION}", "latest")
}

/// Applies the guide's NodePool, and its EC2NodeClass where the CRD can be installed.
async fn apply_getting_started(cluster: &Cluster) {
    apply_pool_and_class(cluster, GETTING_STARTED).await;
}

/// Applies the NodePool of `docs`, and its EC2NodeClass where the CRD can be installed.
async fn apply_pool_and_class(cluster: &Cluster, docs: &str) {
    let docs = substituted(docs);
    #[cfg(feature = "aws")]
    {
        let crd = karpenter_cloudprovider_aws::crd::ec2_node_class_crd_yaml();
        harness::apply_crds(&cluster.client, &crd).await;
        cluster.apply(&docs).await;
    }
    #[cfg(not(feature = "aws"))]
    {
        // Without the AWS provider there is no EC2NodeClass CRD: the NodePool alone.
        let pool = harness::documents(&docs)
            .into_iter()
            .find(|d| d["kind"] == "NodePool")
            .expect("the guide has a NodePool");
        cluster.apply(&serde_json::to_string(&pool).unwrap()).await;
    }
}

/// Deletes the guide's `inflate` Deployment.
async fn delete_inflate(cluster: &Cluster) {
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.namespace);
    deployments
        .delete("inflate", &DeleteParams::default())
        .await
        .unwrap();
}

fn label<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    labels.get(key).map_or("", String::as_str)
}

async fn node_of(cluster: &Cluster, pod: &Pod) -> Node {
    let name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
    cluster.nodes().get(&name).await.unwrap()
}

fn condition_status(value: &serde_json::Value, type_: &str) -> Option<String> {
    value["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn getting_started_and_gpu_pools_from_the_docs() {
    let Some(cluster) = harness::cluster("migration_getting_started").await else {
        return;
    };
    apply_getting_started(&cluster).await;
    cluster.apply(GPU_NODEPOOL).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    // Step 13: five 1-cpu pods; the pool allows c, m and r of generation > 2, amd64,
    // on-demand.
    cluster.apply(INFLATE).await;
    cluster.apply(GPU_POD).await;
    let inflate = cluster
        .wait_running("inflate", 5, Duration::from_secs(150))
        .await;
    for pod in &inflate {
        let node = node_of(&cluster, pod).await;
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(label(&labels, "karpenter.sh/nodepool"), "default");
        assert!(
            ["c", "m", "r"].contains(&label(&labels, "karpenter.k8s.aws/instance-category")),
            "{labels:?}"
        );
        let generation: u32 = label(&labels, "karpenter.k8s.aws/instance-generation")
            .parse()
            .unwrap();
        assert!(generation > 2, "{labels:?}");
        assert_eq!(label(&labels, "karpenter.sh/capacity-type"), "on-demand");
        assert_eq!(label(&labels, "kubernetes.io/arch"), "amd64");
    }
    // The GPU pod tolerates the pool's taint and asks for a GPU: it gets one of the pool's
    // types, and no inflate pod shares its node.
    let gpu_pod = wait_for("mygpupod running", Duration::from_secs(150), || async {
        let pod = cluster.pods().get("mygpupod").await.ok()?;
        harness::running_ready(&pod).then_some(pod)
    })
    .await;
    let gpu_node = node_of(&cluster, &gpu_pod).await;
    let labels = gpu_node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(label(&labels, "karpenter.sh/nodepool"), "gpu");
    assert!(
        ["g5.xlarge", "g5.2xlarge"].contains(&label(&labels, "node.kubernetes.io/instance-type")),
        "{labels:?}"
    );
    let gpu_node_name = gpu_node.metadata.name.clone().unwrap();
    assert!(
        inflate
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() != Some(&gpu_node_name)),
        "the GPU pool's taint keeps other pods away"
    );
    // Both pools are Ready, with the conditions upstream writes.
    for name in ["default", "gpu"] {
        let status = wait_for(
            &format!("NodePool {name} Ready and NodeRegistrationHealthy"),
            Duration::from_secs(60),
            || async {
                let pool = cluster.node_pools().get(name).await.ok()?;
                let value = serde_json::to_value(&pool).ok()?;
                (condition_status(&value, "NodeRegistrationHealthy").as_deref() == Some("True"))
                    .then_some(value)
            },
        )
        .await;
        for type_ in ["Ready", "ValidationSucceeded", "NodeClassReady"] {
            assert_eq!(
                condition_status(&status, type_).as_deref(),
                Some("True"),
                "{name} {type_}: {}",
                status["status"]
            );
        }
    }
    // Step 14: deleting the workload empties the nodes; consolidateAfter is 1m for the
    // default pool (the GPU pool's is the default, 0s).
    delete_inflate(&cluster).await;
    cluster
        .pods()
        .delete("mygpupod", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    cluster.wait_no_nodes(Duration::from_secs(240)).await;
    controller.assert_alive();
}

#[tokio::test]
async fn the_static_nodepool_from_the_docs_keeps_its_ten_nodes() {
    let Some(cluster) = harness::cluster("migration_static").await else {
        return;
    };
    cluster.apply(STATIC_NODEPOOL).await;
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "StaticCapacity=true"]);
    let claims = cluster.node_claims();
    let ten: Vec<NodeClaim> = wait_for(
        "ten initialized NodeClaims of static-capacity",
        Duration::from_secs(240),
        || async {
            let list = claims.list(&ListParams::default()).await.ok()?.items;
            (list.len() == 10 && list.iter().all(|c| claim_condition(c, "Initialized")))
                .then_some(list)
        },
    )
    .await;
    for claim in &ten {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        assert_eq!(label(&labels, "karpenter.sh/nodepool"), "static-capacity");
        assert_eq!(label(&labels, "topology.kubernetes.io/zone"), "us-east-1a");
        assert!(
            ["m5.large", "m5.xlarge"].contains(&label(&labels, "node.kubernetes.io/instance-type")),
            "{labels:?}"
        );
    }
    let pool = cluster.node_pools().get("static-capacity").await.unwrap();
    assert_eq!(pool.status.as_ref().map(|s| s.nodes), Some(10));
    // No more than replicas, whatever the limit allows.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        10
    );
    controller.assert_alive();
}

#[tokio::test]
async fn node_overlays_from_the_docs() {
    let Some(cluster) = harness::cluster("migration_overlays").await else {
        return;
    };
    // The configuration example sets both price and priceAdjustment, which the docs call
    // mutually exclusive: the API server refuses it, as upstream's CRD does.
    let refused = cluster.try_apply(OVERLAY_CONFIGURATION).await.unwrap_err();
    assert!(
        refused.contains("cannot set both 'price' and 'priceAdjustment'"),
        "{refused}"
    );
    apply_getting_started(&cluster).await;
    cluster.apply(OVERLAY_CAPACITY).await;
    cluster.apply(OVERLAY_CONFLICT).await;
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "NodeOverlay=true"]);
    // A pod asking for the custom-devices overlay's resource gets one of its m5 types; a pod
    // asking for both conflict-example resources gets m5.large, where overlay-a's hugepages
    // and overlay-b's device are merged.
    cluster
        .apply(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: fuse, labels: {app: overlays}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: 100m, "smarter-devices/fuse": 1}
      limits: {"smarter-devices/fuse": 1}
---
apiVersion: v1
kind: Pod
metadata: {name: merged, labels: {app: overlays}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: 100m, memory: 64Mi, hugepages-2Mi: 50Mi, "custom-device/gpu": 1}
      limits: {memory: 64Mi, hugepages-2Mi: 50Mi, "custom-device/gpu": 1}
"#,
        )
        .await;
    let pods = cluster
        .wait_running("overlays", 2, Duration::from_secs(150))
        .await;
    for pod in &pods {
        let node = node_of(&cluster, pod).await;
        let labels = node.metadata.labels.unwrap_or_default();
        let instance_type = label(&labels, "node.kubernetes.io/instance-type");
        match pod.metadata.name.as_deref() {
            Some("merged") => assert_eq!(instance_type, "m5.large"),
            _ => assert!(
                ["m5.large", "m5.xlarge", "m5.2xlarge"].contains(&instance_type),
                "{instance_type}"
            ),
        }
    }
    let overlays: kube::Api<karpenter_cloudprovider::NodeOverlay> =
        kube::Api::all(cluster.client.clone());
    for name in ["custom-devices", "overlay-a", "overlay-b"] {
        wait_for(
            &format!("{name} ValidationSucceeded"),
            Duration::from_secs(60),
            || async {
                let o = overlays.get(name).await.ok()?;
                let value = serde_json::to_value(&o).ok()?;
                (condition_status(&value, "ValidationSucceeded").as_deref() == Some("True"))
                    .then_some(())
            },
        )
        .await;
    }
    for name in ["custom-devices", "overlay-a", "overlay-b"] {
        let _ = overlays.delete(name, &DeleteParams::default()).await;
    }
    controller.assert_alive();
}

#[tokio::test]
async fn capacity_reservations_from_the_docs_fill_first_then_fall_back_to_on_demand() {
    const RESERVATION: &str = "cr-56fac701cc1951b03";
    let Some(cluster) = harness::cluster("migration_reserved").await else {
        return;
    };
    apply_pool_and_class(&cluster, ODCRS).await;
    // Two m5.xlarge in us-east-1a: room for six of the guide's 1-cpu pods.
    let reservations = format!(
        r#"[{{"id": "{RESERVATION}", "instanceType": "m5.xlarge", "zone": "us-east-1a", "count": 2}}]"#
    );
    let mut controller = cluster.controller(
        "karpenter-a",
        &["--fake-capacity-reservations", &reservations],
    );
    cluster
        .apply(&INFLATE.replace("replicas: 5 ", "replicas: 10 "))
        .await;
    let inflate = cluster
        .wait_running("inflate", 10, Duration::from_secs(240))
        .await;
    let mut reserved = BTreeMap::new();
    let mut on_demand = 0;
    for pod in &inflate {
        let node = node_of(&cluster, pod).await;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        match label(&labels, "karpenter.sh/capacity-type") {
            "reserved" => {
                assert_eq!(
                    label(&labels, "karpenter.k8s.aws/capacity-reservation-id"),
                    RESERVATION
                );
                assert_eq!(
                    label(&labels, "karpenter.k8s.aws/capacity-reservation-type"),
                    "default"
                );
                assert_eq!(
                    label(&labels, "node.kubernetes.io/instance-type"),
                    "m5.xlarge"
                );
                assert_eq!(label(&labels, "topology.kubernetes.io/zone"), "us-east-1a");
                *reserved
                    .entry(node.metadata.name.clone().unwrap())
                    .or_insert(0) += 1;
            }
            "on-demand" => {
                assert_eq!(
                    label(&labels, "karpenter.k8s.aws/capacity-reservation-id"),
                    ""
                );
                on_demand += 1;
            }
            other => panic!("capacity type {other:?}: {labels:?}"),
        }
    }
    // The reservation is used to the full before anything is bought, and never beyond it.
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    assert_eq!(reserved.values().sum::<i32>(), 6, "{reserved:?}");
    assert_eq!(on_demand, 4);
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let reserved_claims = claims
        .iter()
        .filter(|c| c.label("karpenter.k8s.aws/capacity-reservation-id") == Some(RESERVATION))
        .count();
    assert_eq!(reserved_claims, 2);
    delete_inflate(&cluster).await;
    cluster.wait_no_nodes(Duration::from_secs(240)).await;
    controller.assert_alive();
}
