//! Termination on a real cluster: a deleted NodeClaim's pods get replacement capacity before
//! they are evicted; a drain that a PodDisruptionBudget blocks for over a minute keeps its
//! node heartbeating (Ready) instead of letting it go Unknown; and the instance is terminated
//! only after the evicted pods have used their grace period and are gone.

use crate::drift::{spread_deployment, versioned_pool};
use crate::harness::{self, record, wait_for};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const BLOCKING_PDB: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: spread
spec:
  minAvailable: 2
  selector: {matchLabels: {app: spread}}
"#;

fn node_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn a_deleted_nodeclaim_is_replaced_first_drained_within_the_pdb_and_terminated_last() {
    let Some(cluster) = harness::cluster("termination").await else {
        return;
    };
    cluster.apply(&versioned_pool("1")).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    cluster.apply(&spread_deployment("spread", 2, 20)).await;
    let pods = cluster
        .wait_running("spread", 2, Duration::from_secs(120))
        .await;
    cluster.apply(BLOCKING_PDB).await;
    let victim_pod = pods[0].metadata.name.clone().unwrap();
    let victim_node = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap();
    let before: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let victim_claim = claims
        .iter()
        .find(|c| c.node_name() == victim_node)
        .and_then(|c| c.metadata.name.clone())
        .expect("the victim node's NodeClaim");

    let start = Instant::now();
    cluster
        .node_claims()
        .delete(&victim_claim, &DeleteParams::default())
        .await
        .expect("delete nodeclaim");
    // Upstream provisions for pods on deleting nodes before they are evicted.
    wait_for(
        "a replacement NodeClaim while the drain is blocked",
        Duration::from_secs(60),
        || async {
            let claims = cluster
                .node_claims()
                .list(&ListParams::default())
                .await
                .ok()?;
            claims
                .iter()
                .any(|c| {
                    c.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| !before.contains(n))
                })
                .then_some(())
        },
    )
    .await;
    record(
        "termination",
        "NodeClaim deleted to replacement created",
        start.elapsed().as_secs_f64(),
        "s",
    );

    // The PDB blocks every eviction. Past the ~50 s after which a node without heartbeats goes
    // NotReady, the draining node must still be Ready and its pod still Running.
    tokio::time::sleep(Duration::from_secs(65).saturating_sub(start.elapsed())).await;
    let node = cluster
        .nodes()
        .get(&victim_node)
        .await
        .expect("the draining node still exists");
    assert!(
        node_ready(&node),
        "the draining node stopped heartbeating: {:?}",
        node.status
    );
    let pod = cluster
        .pods()
        .get(&victim_pod)
        .await
        .expect("the blocked pod still exists");
    assert!(
        harness::running_ready(&pod),
        "the blocked pod is no longer Ready"
    );
    controller.assert_alive();

    // Unblock: the pod is evicted, uses its 20 s grace period, and only then is the node gone.
    let pdbs: Api<PodDisruptionBudget> =
        Api::namespaced(cluster.client.clone(), &cluster.namespace);
    pdbs.delete("spread", &DeleteParams::default())
        .await
        .expect("delete pdb");
    let evicted = wait_for(
        "the blocked pod evicted",
        Duration::from_secs(60),
        || async {
            let pod = cluster.pods().get_opt(&victim_pod).await.ok()?;
            match pod {
                Some(p) if p.metadata.deletion_timestamp.is_some() => Some(Instant::now()),
                None => Some(Instant::now()),
                Some(_) => None,
            }
        },
    )
    .await;
    let pod_gone_at = std::cell::Cell::new(None);
    let (pod_gone, node_gone) = wait_for("pod and node gone", Duration::from_secs(120), || {
        let (cluster, victim_pod, victim_node) = (&cluster, &victim_pod, &victim_node);
        let pod_gone_at = &pod_gone_at;
        async move {
            let pod = cluster.pods().get_opt(victim_pod).await.ok()?;
            let node = cluster.nodes().get_opt(victim_node).await.ok()?;
            if pod.is_none() && pod_gone_at.get().is_none() {
                pod_gone_at.set(Some(Instant::now()));
            }
            match (node, pod_gone_at.get()) {
                (None, Some(pod_gone)) => Some((pod_gone, Instant::now())),
                // The node went while its pod was still terminating.
                (None, None) => {
                    panic!("node {victim_node} was deleted before pod {victim_pod} was gone")
                }
                _ => None,
            }
        }
    })
    .await;
    let grace_used = pod_gone.duration_since(evicted).as_secs_f64();
    record(
        "termination",
        "eviction to pod gone (20 s grace)",
        grace_used,
        "s",
    );
    record(
        "termination",
        "pod gone to node gone",
        node_gone.duration_since(pod_gone).as_secs_f64(),
        "s",
    );
    assert!(
        grace_used >= 15.0,
        "the pod was gone {grace_used:.1} s after its eviction; its grace period is 20 s"
    );
    cluster
        .wait_running("spread", 2, Duration::from_secs(120))
        .await;
    controller.assert_alive();
}
