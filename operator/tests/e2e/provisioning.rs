//! Provisioning and scale to zero: pending pods get NodeClaims that go Launched → Registered →
//! Initialized, the real kube-scheduler binds every pod to the new Nodes, and scaling to zero
//! removes every Node and NodeClaim with no finalizer left behind.

use crate::harness::{self, Cluster, claim_condition, record, wait_for};
use kube::api::ListParams;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A NodePool for the fake provider: on-demand amd64, empty nodes removed at once.
pub fn node_pool(name: &str, extra_disruption: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
{extra_disruption}
"#
    )
}

/// A Deployment of `replicas` pause pods requesting `cpu` each, restricted to NodePool `pool`.
pub fn deployment(name: &str, replicas: u32, cpu: &str, pool: &str) -> String {
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
      terminationGracePeriodSeconds: 0
      nodeSelector: {{karpenter.sh/nodepool: {pool}}}
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}
"#
    )
}

/// Applies `deployment` and waits until its `n` pods run; returns the seconds it took.
pub async fn apply_and_wait(cluster: &Cluster, yaml: &str, app: &str, n: usize) -> f64 {
    let start = Instant::now();
    cluster.apply(yaml).await;
    cluster.wait_running(app, n, Duration::from_secs(120)).await;
    start.elapsed().as_secs_f64()
}

#[tokio::test]
async fn a_deployment_scales_up_onto_new_nodes_and_back_to_zero() {
    let Some(cluster) = harness::cluster("provisioning").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    let secs = apply_and_wait(
        &cluster,
        &deployment("inflate", 10, "500m", "default"),
        "inflate",
        10,
    )
    .await;
    controller.assert_alive();
    record("provisioning", "apply to 10 pods Running", secs, "s");
    // The batch closes 1 s after the last pod arrives (BATCH_IDLE_DURATION), not at its 10 s
    // maximum: from the last pod's creation to the first NodeClaim's, by the audit log.
    let created = |resource: &str| -> Vec<jiff::Timestamp> {
        cluster
            .audit_events()
            .iter()
            .filter(|e| e["verb"] == "create" && e["objectRef"]["resource"] == resource)
            .filter(|e| e["objectRef"]["subresource"].is_null())
            .filter(|e| e["responseStatus"]["code"] == 201)
            .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
            .collect()
    };
    let last_pod = created("pods")
        .into_iter()
        .max()
        .expect("pods were created");
    let first_claim = created("nodeclaims")
        .into_iter()
        .min()
        .expect("nodeclaims were created");
    let batch = (first_claim - last_pod).total(jiff::Unit::Second).unwrap();
    record(
        "provisioning",
        "last pod created to first NodeClaim",
        batch,
        "s",
    );
    assert!(
        batch < 5.0,
        "the first NodeClaim came {batch:.1} s after the last pod (idle window 1 s)"
    );
    let url = format!("http://127.0.0.1:{}/readyz", controller.health_port);
    assert!(
        harness::http_get(&url).await.is_some(),
        "{url} is not 200 OK"
    );

    // Every pod is bound by the kube-scheduler to a Node that one of our NodeClaims launched.
    // Pods may run on a Ready node a pass before its claim is marked Initialized.
    let conditions = ["Launched", "Registered", "Initialized", "Ready"];
    let claims = wait_for(
        "every NodeClaim Launched, Registered, Initialized and Ready",
        Duration::from_secs(30),
        || async {
            let claims = cluster
                .node_claims()
                .list(&ListParams::default())
                .await
                .ok()?;
            let done = !claims.items.is_empty()
                && claims
                    .iter()
                    .all(|c| conditions.iter().all(|t| claim_condition(c, t)));
            done.then_some(claims)
        },
    )
    .await;
    let node_names: Vec<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref().map(|s| s.node_name.clone()))
        .filter(|n| !n.is_empty())
        .collect();
    for pod in cluster.app_pods("inflate").await {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert!(
            node.as_ref().is_some_and(|n| node_names.contains(n)),
            "pod {:?} runs on {node:?}, not on a NodeClaim's node {node_names:?}",
            pod.metadata.name
        );
    }

    let start = Instant::now();
    cluster.scale("inflate", 0).await;
    cluster.wait_no_nodes(Duration::from_secs(240)).await;
    record(
        "provisioning",
        "scale to 0 until no nodes",
        start.elapsed().as_secs_f64(),
        "s",
    );
    // Nothing left behind: no NodeClaim, no Node, and the NodePool's usage is back to zero.
    let pool = wait_for(
        "NodePool usage back to zero",
        Duration::from_secs(30),
        || async {
            let pool = cluster.node_pools().get("default").await.ok()?;
            let v = serde_json::to_value(&pool).ok()?;
            let nodes = v
                .pointer("/status/resources/nodes")
                .and_then(|n| n.as_str());
            (nodes.is_none_or(|n| n == "0")).then_some(v)
        },
    )
    .await;
    let resources = pool
        .pointer("/status/resources")
        .cloned()
        .unwrap_or_default();
    for (name, value) in resources.as_object().into_iter().flatten() {
        assert!(
            value.as_str().is_some_and(|v| v == "0"),
            "NodePool status.resources.{name} is {value} with no nodes"
        );
    }
    controller.assert_alive();

    // A restarted controller never reuses a NodeClaim name (a new claim would inherit the old
    // one's events and could collide with one still terminating).
    drop(controller);
    let first: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut again = cluster.controller("karpenter-b", &[]);
    cluster.scale("inflate", 10).await;
    cluster
        .wait_running("inflate", 10, Duration::from_secs(120))
        .await;
    let second: BTreeSet<String> = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let reused: Vec<&String> = first.intersection(&second).collect();
    assert!(
        reused.is_empty(),
        "NodeClaim names reused after a restart: {reused:?}"
    );
    again.assert_alive();
}

/// The container image is built with `--features aws`, which links a second TLS crypto
/// provider (aws-lc-rs, through the AWS SDK) beside kube's ring. The test build of the
/// binary has the same features when the suite runs with `--all-features`, as CI does.
#[cfg(feature = "aws")]
#[tokio::test]
async fn the_binary_built_with_the_aws_feature_talks_tls_to_the_api_server() {
    let Some(cluster) = harness::cluster("aws_feature_tls").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_karpenter"));
    let mut controller = cluster.controller_from(bin, "karpenter-aws", &[], &cluster.kubeconfig);
    let secs = apply_and_wait(&cluster, &deployment("tls", 2, "1", "default"), "tls", 2).await;
    record("aws_feature_tls", "apply to 2 pods Running", secs, "s");
    controller.assert_alive();
    assert!(
        !controller.log_text().contains("CryptoProvider"),
        "rustls could not choose a crypto provider"
    );
}

#[tokio::test]
async fn disable_leader_election_keeps_a_single_replica_running() {
    let Some(cluster) = harness::cluster("no_leader_election").await else {
        return;
    };
    cluster.apply(&node_pool("default", "")).await;
    let mut controller = cluster.controller("solo", &["--disable-leader-election", "true"]);
    let secs = apply_and_wait(&cluster, &deployment("solo", 2, "1", "default"), "solo", 2).await;
    record("no_leader_election", "apply to 2 pods Running", secs, "s");
    tokio::time::sleep(Duration::from_secs(3)).await;
    controller.assert_alive();
}
