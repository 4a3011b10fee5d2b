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
