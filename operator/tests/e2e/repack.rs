//! Re-pack consolidation on a real cluster: a node whose two pods prefer separate nodes is
//! replaced by two cheaper nodes, which Karpenter's consolidation (at most one replacement)
//! refuses to do. The replacements are launched and initialized before the node drains, and
//! both pods keep running.

use crate::harness::{self, record, wait_for};
use kube::api::ListParams;
use std::time::{Duration, Instant};

/// A pool limited to 16 vCPUs, so that the first plan must put both pods of the pair (and a
/// filler) on one 16-vCPU node, preferences relaxed; `limit` lifts it later (limits are not
/// part of the template, so nothing drifts).
fn node_pool(limit: u32) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [c6a]}}
  limits: {{cpu: "{limit}"}}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{{nodes: "100%"}}]
"#
    )
}

/// A one-replica Deployment `name` of `cpu` cores; the pair's members prefer not to share a
/// node with each other (a preferred hostname anti-affinity on `group: pair`).
fn deployment(name: &str, cpu: &str, paired: bool) -> String {
    let (labels, affinity) = if paired {
        (
            format!("{{app: {name}, group: pair}}"),
            r#"
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: {matchLabels: {group: pair}}"#,
        )
    } else {
        (format!("{{app: {name}}}"), "")
    };
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {labels}}}
    spec:
      terminationGracePeriodSeconds: 0{affinity}
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}
"#
    )
}

#[tokio::test]
async fn a_node_is_replaced_by_two_cheaper_ones() {
    let Some(cluster) = harness::cluster("repack").await else {
        return;
    };
    cluster.apply(&node_pool(16)).await;
    cluster
        .apply(&format!(
            "{}\n---\n{}\n---\n{}",
            deployment("big", "5", true),
            deployment("small", "3", true),
            deployment("filler", "6", false)
        ))
        .await;
    for app in ["big", "small", "filler"] {
        cluster
            .wait_unschedulable(app, 1, Duration::from_secs(60))
            .await;
    }
    // The node is minutes old when it is re-packed: lift the default ten-minute settling.
    let mut controller = cluster.controller("karpenter-a", &["--repack-min-node-age", "0s"]);
    for app in ["big", "small", "filler"] {
        cluster.wait_running(app, 1, Duration::from_secs(120)).await;
    }
    let before: Vec<String> = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(
        before.len(),
        1,
        "one 16-vCPU node for all three: {before:?}"
    );

    // The filler goes and the limit lifts: the pair alone on a 16-vCPU node. One cheaper node
    // for both would break their preference, so Karpenter's methods leave it; re-packing
    // gives each its own, smaller node.
    let start = Instant::now();
    cluster.scale("filler", 0).await;
    cluster.apply(&node_pool(1000)).await;
    wait_for(
        "the node replaced by two and both pods running on them",
        Duration::from_secs(240),
        || async {
            let claims = cluster
                .node_claims()
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            let live: Vec<String> = claims
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            let replaced = live.len() == 2 && live.iter().all(|n| !before.contains(n));
            let mut nodes = Vec::new();
            for app in ["big", "small"] {
                let pods = cluster.app_pods(app).await;
                let running: Vec<_> = pods
                    .iter()
                    .filter(|p| {
                        p.metadata.deletion_timestamp.is_none() && harness::running_ready(p)
                    })
                    .collect();
                nodes.push(running.first()?.spec.as_ref()?.node_name.clone()?);
            }
            (replaced && nodes[0] != nodes[1]).then_some(())
        },
    )
    .await;
    record(
        "repack",
        "filler gone to node re-packed onto two",
        start.elapsed().as_secs_f64(),
        "s",
    );
    controller.assert_alive();
    let lines: Vec<String> = controller
        .log_lines()
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    // The replaced node drains only once its replacements are initialized.
    let ready = lines
        .iter()
        .position(|l| l.contains("replacements ready"))
        .expect("no 'replacements ready' line in the controller log");
    let first_eviction = lines
        .iter()
        .position(|l| l.contains("evicted pod"))
        .expect("no eviction in the controller log");
    assert!(
        ready < first_eviction,
        "a pod was evicted before the replacements were ready"
    );
    let started: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("disrupting nodes"))
        .collect();
    assert!(
        started
            .iter()
            .any(|l| l.contains("consolidation_type=\"repack\"") && l.contains("replacements=2")),
        "no re-pack with two replacements among the decisions: {started:#?}"
    );
}
