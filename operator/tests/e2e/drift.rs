//! Drift: changing a NodePool's template replaces its nodes within the disruption budget
//! (one node at a time here), and no pod is left Pending at the end.

use crate::harness::{self, disrupted, record, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

/// A NodePool whose nodes carry `version`, disrupted one node at a time, never for emptiness
/// or utilisation (so only drift replaces nodes).
pub fn versioned_pool(version: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels: {{e2e-version: "{version}"}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1h
    budgets: [{{nodes: "1"}}]
"#
    )
}

/// `replicas` pods that each need a node of their own (hostname anti-affinity).
pub fn spread_deployment(name: &str, replicas: u32, grace: u32) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: {grace}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {{matchLabels: {{app: {name}}}}}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {{requests: {{cpu: "500m", memory: 256Mi}}}}
"#
    )
}

/// Changes the `default` NodePool's template label, which drifts every node it launched.
pub async fn set_version(cluster: &harness::Cluster, version: &str) {
    cluster
        .node_pools()
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "spec": {"template": {"metadata": {"labels": {"e2e-version": version}}}}
            })),
        )
        .await
        .expect("patch nodepool");
}

/// Every Node with the value of its `e2e-version` label.
pub async fn node_versions(cluster: &harness::Cluster) -> Vec<(Node, String)> {
    cluster
        .nodes()
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items
        .into_iter()
        .map(|n| {
            let v = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("e2e-version").cloned())
                .unwrap_or_default();
            (n, v)
        })
        .collect()
}

#[tokio::test]
async fn a_template_change_replaces_nodes_one_at_a_time() {
    let Some(cluster) = harness::cluster("drift").await else {
        return;
    };
    cluster.apply(&versioned_pool("1")).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    cluster.apply(&spread_deployment("spread", 3, 0)).await;
    cluster
        .wait_running("spread", 3, Duration::from_secs(120))
        .await;
    assert_eq!(node_versions(&cluster).await.len(), 3);

    // The hash annotations upstream writes, on the NodePool and on every NodeClaim it launched.
    let pool = cluster.node_pools().get("default").await.unwrap();
    let annotations = pool.metadata.annotations.clone().unwrap_or_default();
    let hash = annotations
        .get("karpenter.sh/nodepool-hash")
        .cloned()
        .unwrap_or_else(|| panic!("NodePool lacks karpenter.sh/nodepool-hash: {annotations:?}"));
    assert!(annotations.contains_key("karpenter.sh/nodepool-hash-version"));
    for claim in cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let a = claim.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            a.get("karpenter.sh/nodepool-hash"),
            Some(&hash),
            "{:?}",
            claim.metadata.name
        );
    }

    let start = Instant::now();
    set_version(&cluster, "2").await;
    let most_disrupting = std::cell::Cell::new(0);
    let drifted_seen = std::cell::Cell::new(false);
    wait_for(
        "every node replaced by a version-2 node",
        Duration::from_secs(300),
        || {
            let cluster = &cluster;
            let most = &most_disrupting;
            let drifted_seen = &drifted_seen;
            async move {
                let claims = cluster
                    .node_claims()
                    .list(&ListParams::default())
                    .await
                    .ok()?;
                if claims
                    .iter()
                    .any(|c| harness::claim_condition(c, "Drifted"))
                {
                    drifted_seen.set(true);
                }
                let nodes = node_versions(cluster).await;
                let disrupting = nodes
                    .iter()
                    .filter(|(n, _)| disrupted(n) || n.metadata.deletion_timestamp.is_some())
                    .count();
                most.set(most.get().max(disrupting));
                let done = nodes.len() == 3 && nodes.iter().all(|(_, v)| v == "2");
                done.then_some(())
            }
        },
    )
    .await;
    record(
        "drift",
        "template change to 3 nodes replaced",
        start.elapsed().as_secs_f64(),
        "s",
    );
    let most = most_disrupting.get();
    assert!(
        most <= 1,
        "the budget allows 1 node at a time, {most} were disrupted at once"
    );
    cluster
        .wait_running("spread", 3, Duration::from_secs(60))
        .await;
    let pending = cluster
        .app_pods("spread")
        .await
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
        .count();
    assert_eq!(pending, 0);
    controller.assert_alive();
    // The NodeClaims that drifted said so (condition Drifted=True) before they went.
    assert!(
        drifted_seen.get(),
        "no NodeClaim ever had the Drifted condition"
    );
    // Drift is not held back by consolidation's 15 s validation delay.
    let lines = controller.log_lines();
    let mut gaps = Vec::new();
    for (i, (at, line)) in lines.iter().enumerate() {
        if line.contains("disruption command") && line.contains("Drifted") {
            let started = lines[i..]
                .iter()
                .find(|(_, l)| l.contains("disrupting nodes"))
                .map(|(t, _)| (*t - *at).total(jiff::Unit::Second).unwrap_or(f64::MAX));
            gaps.extend(started);
        }
    }
    assert!(!gaps.is_empty(), "no drift decision in the controller log");
    assert!(
        gaps.iter().all(|g| *g < 10.0),
        "drift commands waited before starting: {gaps:?} s (the 15 s delay is consolidation's)"
    );
}
