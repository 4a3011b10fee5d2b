//! CapacityBuffers (`--feature-gates CapacityBuffer=true`) on a real control plane: a buffer
//! keeps headroom before any workload asks for it, its status says so, emptiness leaves the
//! headroom alone, a new Deployment shaped like the buffer is bound at once on it by the real
//! kube-scheduler, the buffer refills behind it, and deleting the buffer releases its room;
//! with the gate off, a buffer is reported as ignored and keeps nothing.

use crate::harness::{self, Cluster, claim_condition, record, wait_for};
use crate::provisioning::{deployment, node_pool};
use karpenter_cloudprovider::CapacityBuffer;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const BUFFER: &str = r#"
apiVersion: v1
kind: PodTemplate
metadata: {name: chunk}
template:
  spec:
    nodeSelector: {karpenter.sh/nodepool: default}
    containers:
      - name: pause
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: "1", memory: 256Mi}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom}
spec:
  podTemplateRef: {name: chunk}
  replicas: 2
"#;

/// `(type, status, reason)` of each of the buffer's conditions, and `status.replicas`.
async fn buffer_status(api: &Api<CapacityBuffer>) -> Option<(Vec<(String, String, String)>, i32)> {
    let b = api.get_opt("headroom").await.ok()??;
    let status = b.status?;
    let conditions = status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), format!("{:?}", c.status), c.reason.clone()))
        .collect();
    Some((conditions, status.replicas?))
}

fn fits(conditions: &[(String, String, String)]) -> bool {
    let has = |t: &str, s: &str, r: &str| {
        conditions
            .iter()
            .any(|c| (c.0.as_str(), c.1.as_str(), c.2.as_str()) == (t, s, r))
    };
    has("ReadyForProvisioning", "True", "Resolved")
        && has("Provisioning", "True", "FitsExistingCapacity")
}

/// NodeClaims whose node has initialized, by name.
async fn initialized_claims(cluster: &Cluster) -> BTreeSet<String> {
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    claims
        .iter()
        .filter(|c| claim_condition(c, "Initialized"))
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect()
}

async fn claim_names(cluster: &Cluster) -> BTreeSet<String> {
    cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.metadata.name.unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_buffer_keeps_headroom_that_a_new_deployment_uses_at_once() {
    let Some(cluster) = harness::cluster("capacity_buffer").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "CapacityBuffer=true"]);
    let buffers: Api<CapacityBuffer> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let start = Instant::now();
    cluster.apply(BUFFER).await;

    // Headroom launches with no workload at all, and the status says it is there.
    let headroom = wait_for(
        "the buffer's headroom initialized and its status FitsExistingCapacity",
        Duration::from_secs(120),
        || async {
            let (conditions, replicas) = buffer_status(&buffers).await?;
            let claims = initialized_claims(&cluster).await;
            (replicas == 2
                && fits(&conditions)
                && !claims.is_empty()
                && claims == claim_names(&cluster).await)
                .then_some(claims)
        },
    )
    .await;
    record(
        "capacity_buffer",
        "buffer applied to headroom initialized",
        start.elapsed().as_secs_f64(),
        "s",
    );
    // consolidateAfter is 0s: an empty node would be gone after one poll and the 15 s
    // validation. The headroom stays.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        claim_names(&cluster).await,
        headroom,
        "emptiness took the buffer's headroom"
    );
    controller.assert_alive();

    // A Deployment shaped like the buffer's chunks runs at once on the headroom.
    let start = Instant::now();
    cluster.apply(&deployment("burst", 2, "1", "default")).await;
    let pods = cluster
        .wait_running("burst", 2, Duration::from_secs(60))
        .await;
    let secs = start.elapsed().as_secs_f64();
    record(
        "capacity_buffer",
        "apply to 2 pods Running on headroom",
        secs,
        "s",
    );
    // Bound on the headroom's nodes: the NodeClaims that existed before the Deployment.
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap();
    let headroom_nodes: BTreeSet<String> = claims
        .items
        .iter()
        .filter(|c| headroom.contains(c.metadata.name.as_deref().unwrap_or_default()))
        .filter_map(|c| c.status.as_ref().map(|s| s.node_name.clone()))
        .collect();
    for p in &pods {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        assert!(
            headroom_nodes.contains(&node),
            "{node} is not one of the headroom's nodes {headroom_nodes:?}"
        );
    }
    assert!(
        secs < 30.0,
        "the burst took {secs:.1} s to run on the headroom"
    );

    // The buffer refills behind it: a new NodeClaim, and FitsExistingCapacity again.
    let refill = wait_for(
        "the buffer refilled on a new NodeClaim",
        Duration::from_secs(120),
        || async {
            let (conditions, _) = buffer_status(&buffers).await?;
            let claims = initialized_claims(&cluster).await;
            let new: BTreeSet<String> = claims.difference(&headroom).cloned().collect();
            (fits(&conditions) && !new.is_empty()).then_some(new)
        },
    )
    .await;

    // Deleting the buffer releases its room: the refill node, empty, goes.
    buffers
        .delete("headroom", &DeleteParams::default())
        .await
        .expect("delete the buffer");
    wait_for(
        "the refill node removed once the buffer is gone",
        Duration::from_secs(120),
        || async {
            let names = claim_names(&cluster).await;
            refill.iter().all(|c| !names.contains(c)).then_some(())
        },
    )
    .await;
    cluster
        .wait_running("burst", 2, Duration::from_secs(10))
        .await;
    let log = controller.log_text();
    assert!(
        log.contains("capacitybuffer") && log.contains("fit existing capacity"),
        "{}",
        harness::tail(&log, 40)
    );
    assert!(
        !log.contains("could not schedule pod"),
        "{}",
        harness::tail(&log, 40)
    );
    controller.assert_alive();
}

/// With the gate at its default (off) a buffer keeps nothing, and that is said loudly: a
/// buffer created while the controller runs gets a `FeatureGateDisabled` Warning event and a
/// WARN line, and no NodeClaim is launched for it.
#[tokio::test]
async fn with_the_gate_off_a_buffer_is_reported_and_keeps_nothing() {
    let Some(cluster) = harness::cluster("capacity_buffer_off").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    wait_for(
        "the controller's caches synced",
        Duration::from_secs(60),
        || async {
            controller
                .log_text()
                .contains("caches synced")
                .then_some(())
        },
    )
    .await;
    cluster.apply(BUFFER).await;
    let buffers: Api<CapacityBuffer> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let uid = buffers.get("headroom").await.unwrap().metadata.uid;
    let note = harness::wait_for_warning(
        &cluster.client,
        "CapacityBuffer",
        "headroom",
        uid,
        "FeatureGateDisabled",
    )
    .await;
    assert!(
        note.contains("CapacityBuffer feature gate is off"),
        "{note}"
    );
    // With the gate on, the headroom's NodeClaim is created within a batch (about a second).
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        claim_names(&cluster).await.is_empty(),
        "a buffer was acted on with the gate off"
    );
    let log = controller.log_text();
    assert!(
        log.contains("WARN") && log.contains("CapacityBuffer is ignored"),
        "{}",
        harness::tail(&log, 40)
    );
    controller.assert_alive();
}
