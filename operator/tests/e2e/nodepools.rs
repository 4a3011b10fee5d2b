//! Deleting a NodePool removes its NodeClaims and their Nodes (owner references, as
//! upstream sets them, and the termination flow behind the finalizer).

use crate::harness::{self, record};
use crate::provisioning::{deployment, node_pool};
use kube::api::{DeleteParams, ListParams};
use std::time::{Duration, Instant};

#[tokio::test]
async fn deleting_a_nodepool_removes_its_nodeclaims_and_nodes() {
    let Some(cluster) = harness::cluster("nodepool_delete").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    cluster
        .apply(&deployment("inflate", 3, "1", "default"))
        .await;
    cluster
        .wait_running("inflate", 3, Duration::from_secs(120))
        .await;
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap();
    let pool = cluster.node_pools().get("default").await.unwrap();
    for claim in &claims {
        let owners = claim.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "NodePool"
                && o.name == "default"
                && Some(&o.uid) == pool.metadata.uid.as_ref()
                && o.block_owner_deletion == Some(true)),
            "NodeClaim {:?} is not owned by its NodePool: {owners:?}",
            claim.metadata.name
        );
    }
    let start = Instant::now();
    cluster
        .node_pools()
        .delete("default", &DeleteParams::default())
        .await
        .expect("delete nodepool");
    cluster.wait_no_nodes(Duration::from_secs(240)).await;
    record(
        "nodepool_delete",
        "NodePool deleted to no nodes",
        start.elapsed().as_secs_f64(),
        "s",
    );
    controller.assert_alive();
}

/// A field accepted but not acted on reaches the API as a Warning event on its object.
#[tokio::test]
async fn a_static_nodepool_gets_an_ignored_field_warning() {
    let Some(cluster) = harness::cluster("nodepool_ignored").await else {
        return;
    };
    cluster.apply(crate::parity::STATIC_POOL).await;
    // CapacityBuffer, the last gate of upstream's that karpenter-rs did not implement, is
    // acted on now: nothing names it at start-up.
    let mut controller =
        cluster.controller("karpenter-a", &["--feature-gates", "CapacityBuffer=true"]);
    let uid = cluster
        .node_pools()
        .get("fixed")
        .await
        .unwrap()
        .metadata
        .uid;
    let note =
        harness::wait_for_warning(&cluster.client, "NodePool", "fixed", uid, "IgnoredField").await;
    assert!(note.starts_with("spec.replicas is not acted on"), "{note}");
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        claims.items.is_empty(),
        "with the StaticCapacity gate off a static pool gets no nodes"
    );
    assert!(
        controller
            .log_text()
            .contains("spec.replicas is not acted on"),
        "logged too"
    );
    let log = controller.log_text();
    assert!(!log.contains("FEATURE_GATES CapacityBuffer"), "{log}");
    controller.assert_alive();
}
