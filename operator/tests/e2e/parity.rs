//! Karpenter v1.14 features on the real control plane: static NodePools (StaticCapacity),
//! NodeOverlays (NodeOverlay), and the NodeClaim status upstream keeps (`lastPodEventTime`,
//! `Consolidatable`).

use crate::harness::{self, claim_condition, wait_for};
use crate::provisioning::deployment;
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::NodeOverlay;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use std::time::Duration;

/// A static NodePool `fixed` of two m5.large on-demand nodes labelled `team: batch`.
pub const STATIC_POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: 2
  template:
    metadata:
      labels: {team: batch}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

/// The getting-started NodePool of `examples/inflate/nodepool.yaml`.
const INFLATE_POOL: &str = include_str!("../../../examples/inflate/nodepool.yaml");

#[tokio::test]
async fn a_static_nodepool_is_kept_at_its_replicas_and_scaled_down() {
    let Some(cluster) = harness::cluster("static_pool").await else {
        return;
    };
    cluster.apply(STATIC_POOL).await;
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "StaticCapacity=true"]);
    let claims = cluster.node_claims();
    let count = |n: usize| {
        let claims = claims.clone();
        move || {
            let claims = claims.clone();
            async move {
                let list = claims.list(&ListParams::default()).await.ok()?;
                (list.items.len() == n).then_some(list.items)
            }
        }
    };
    let two = wait_for(
        "two NodeClaims for NodePool fixed",
        Duration::from_secs(90),
        count(2),
    )
    .await;
    for claim in &two {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("fixed")
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("batch"));
    }
    wait_for(
        "both static nodes initialized",
        Duration::from_secs(120),
        || async {
            let list = claims.list(&ListParams::default()).await.ok()?;
            (list.items.len() == 2 && list.items.iter().all(|c| claim_condition(c, "Initialized")))
                .then_some(())
        },
    )
    .await;
    // Empty static nodes are never consolidated, whatever consolidateAfter says.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let still = claims.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(still.len(), 2, "static nodes stay");
    assert!(
        still.iter().all(|c| !claim_condition(c, "Consolidatable")),
        "static claims are never Consolidatable"
    );
    cluster
        .node_pools()
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale the pool down");
    wait_for(
        "one NodeClaim after scaling to 1",
        Duration::from_secs(120),
        count(1),
    )
    .await;
    let log = controller.log_text();
    assert!(
        !log.contains("spec.replicas is not acted on"),
        "with the gate on, replicas is acted on"
    );
    controller.assert_alive();
}

#[tokio::test]
async fn nodeoverlays_change_the_launched_type_and_report_conflicts() {
    let Some(cluster) = harness::cluster("node_overlay").await else {
        return;
    };
    let overlays: Api<NodeOverlay> = Api::all(cluster.client.clone());
    cluster.apply(INFLATE_POOL).await;
    // A large fee on every family but r: an r type becomes the cheapest for a memory-heavy pod.
    cluster
        .apply(
            r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fee}
spec:
  requirements:
    - {key: karpenter.k8s.aws/instance-category, operator: NotIn, values: [r]}
  priceAdjustment: "+1000%"
"#,
        )
        .await;
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "NodeOverlay=true"]);
    cluster
        .apply(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: memory}
spec:
  replicas: 1
  selector: {matchLabels: {app: memory}}
  template:
    metadata: {labels: {app: memory}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: "1", memory: 6Gi}}
"#,
        )
        .await;
    let pods = cluster
        .wait_running("memory", 1, Duration::from_secs(120))
        .await;
    let node_name = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let node: Node = cluster.nodes().get(&node_name).await.unwrap();
    let instance_type = node
        .metadata
        .labels
        .unwrap_or_default()
        .get("node.kubernetes.io/instance-type")
        .cloned()
        .unwrap_or_default();
    assert!(
        instance_type.starts_with('r'),
        "the overlay's fee steers the pod to an r type, got {instance_type}"
    );
    let condition = |o: &NodeOverlay, type_: &str| {
        o.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .map(|c| {
                (
                    format!("{:?}", c.status),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
    };
    wait_for(
        "fee reports ValidationSucceeded",
        Duration::from_secs(60),
        || async {
            let fee = overlays.get("fee").await.ok()?;
            condition(&fee, "ValidationSucceeded")
                .filter(|(status, ..)| status == "True")
                .map(|_| ())
        },
    )
    .await;
    // Two overlays of the same weight on the same offerings conflict: the one that loses is
    // applied nowhere and says so.
    cluster
        .apply(
            r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: a-fee}
spec:
  weight: 5
  requirements:
    - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
  priceAdjustment: "+1"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: b-fee}
spec:
  weight: 5
  requirements: []
  priceAdjustment: "+2"
"#,
        )
        .await;
    let (_, reason, message) = wait_for(
        "a-fee reports the conflict",
        Duration::from_secs(90),
        || async {
            let a = overlays.get("a-fee").await.ok()?;
            condition(&a, "ValidationSucceeded").filter(|(status, ..)| status == "False")
        },
    )
    .await;
    assert_eq!(reason, "Conflict");
    assert!(message.contains("b-fee"), "{message}");
    let b = overlays.get("b-fee").await.unwrap();
    assert_eq!(
        condition(&b, "ValidationSucceeded")
            .map(|(s, ..)| s)
            .as_deref(),
        Some("True")
    );
    for name in ["fee", "a-fee", "b-fee"] {
        let _ = overlays.delete(name, &Default::default()).await;
    }
    controller.assert_alive();
}

#[tokio::test]
async fn nodeclaims_record_pod_events_and_become_consolidatable() {
    let Some(cluster) = harness::cluster("claim_status").await else {
        return;
    };
    // WhenEmpty: the node keeps its pod, so only the condition changes.
    cluster
        .apply(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 20s
"#,
        )
        .await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    cluster
        .apply(&deployment("steady", 1, "1", "default"))
        .await;
    cluster
        .wait_running("steady", 1, Duration::from_secs(120))
        .await;
    let claims = cluster.node_claims();
    let stamped = wait_for(
        "lastPodEventTime on the NodeClaim",
        Duration::from_secs(30),
        || async {
            let list = claims.list(&ListParams::default()).await.ok()?;
            let claim = list.items.into_iter().next()?;
            claim.status.as_ref()?.last_pod_event_time.clone()
        },
    )
    .await;
    assert!(
        !claim_condition(
            &claims.list(&ListParams::default()).await.unwrap().items[0],
            "Consolidatable"
        ),
        "not within 20 s of its pod arriving"
    );
    wait_for(
        "Consolidatable=True after consolidateAfter",
        Duration::from_secs(60),
        || async {
            let list = claims.list(&ListParams::default()).await.ok()?;
            let claim = list.items.into_iter().next()?;
            claim_condition(&claim, "Consolidatable").then_some(())
        },
    )
    .await;
    let claim = &claims.list(&ListParams::default()).await.unwrap().items[0];
    let since = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Consolidatable"))
        .map(|c| c.last_transition_time.0)
        .unwrap();
    let waited = since.duration_since(stamped.0).as_secs_f64();
    assert!(
        waited >= 19.0,
        "Consolidatable {waited:.1} s after the pod event, consolidateAfter is 20 s"
    );
    // The node registered, so the pool's registration window says healthy; the fake
    // provider has no NodeClass to wait for.
    let pool = cluster.node_pools().get("default").await.unwrap();
    let conditions = serde_json::to_value(&pool).unwrap()["status"]["conditions"].clone();
    let status_of = |t: &str| {
        conditions
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t)
            .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        status_of("NodeRegistrationHealthy").as_deref(),
        Some("True"),
        "{conditions}"
    );
    assert_eq!(status_of("NodeClassReady").as_deref(), Some("True"));
    controller.assert_alive();
}
