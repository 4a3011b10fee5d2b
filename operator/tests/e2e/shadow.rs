//! The shadow mode: `karpenter controller --dry-run`, with the read-only RBAC the chart renders
//! for `dryRun: true`, watches a cluster another controller provisioned, and reports what it
//! would provision and disrupt while writing nothing: the audit log shows no request from it
//! but reads, and the cluster's NodeClaims, Nodes and taints are as it found them.

use crate::harness::{self, disrupted, record, wait_for};
use crate::provisioning::{apply_and_wait, deployment};
use crate::rbac::apply_chart_rbac;
use kube::api::{ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

/// A pool whose budget first forbids any disruption, so the acting controller leaves the
/// emptied nodes for the shadow to judge.
const NODE_POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["9"]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "0"}]
"#;

fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn dry_run_reports_decisions_and_writes_nothing() {
    let Some(cluster) = harness::cluster("shadow").await else {
        return;
    };
    // An acting controller provisions nodes of at most 4 vCPUs for three 1-cpu pods, and the
    // pods go away.
    cluster.apply(NODE_POOL).await;
    let mut acting = cluster.controller("karpenter-acting", &[]);
    apply_and_wait(
        &cluster,
        &deployment("inflate", 3, "1", "default"),
        "inflate",
        3,
    )
    .await;
    cluster.scale("inflate", 0).await;
    wait_for("inflate's pods gone", Duration::from_secs(120), || async {
        cluster.app_pods("inflate").await.is_empty().then_some(())
    })
    .await;
    acting.signal("TERM");
    assert!(
        acting.wait_exit(Duration::from_secs(30)).await.is_some(),
        "the acting controller stops"
    );
    let claims_before = claim_names(&cluster).await;
    let nodes_before = node_names(&cluster).await;
    assert!(!claims_before.is_empty());
    // Budgets now allow the emptied nodes to go, for whoever acts on it.
    cluster
        .node_pools()
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}
            })),
        )
        .await
        .expect("patch budgets");

    let (account, kinds) = apply_chart_rbac(&cluster, &["dryRun=true"]).await;
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"],
        "no Lease role in the shadow mode"
    );
    let config = cluster
        .service_account_kubeconfig(harness::SYSTEM_NAMESPACE, &account)
        .await;
    let start = Instant::now();
    let mut shadow = cluster.controller_with("karpenter-shadow", &["--dry-run"], &config);
    // A pod no existing node can hold: a new NodeClaim would be needed.
    cluster.apply(&deployment("wide", 1, "6", "default")).await;
    let metrics = wait_for(
        "the shadow's provisioning and disruption decisions",
        Duration::from_secs(120),
        || async {
            let m = shadow.metrics().await;
            let create = sample(&m, "karpenter_dry_run_decisions_total{action=\"create\",reason=\"provisioning\",nodepool=\"default\"}");
            let delete = sample(&m, "karpenter_dry_run_decisions_total{action=\"delete\",reason=\"empty\",nodepool=\"default\"}");
            (create >= Some(1.0) && delete >= Some(1.0)).then_some(m)
        },
    )
    .await;
    record(
        "shadow",
        "start to both decisions reported (dry-run)",
        start.elapsed().as_secs_f64(),
        "s",
    );
    let price = sample(
        &metrics,
        "karpenter_dry_run_provisioning_price_dollars_per_hour{nodepool=\"default\"}",
    );
    assert!(price > Some(0.0), "price of the would-be claim: {metrics}");
    let savings = sample(
        &metrics,
        "karpenter_dry_run_disruption_savings_dollars_per_hour{reason=\"empty\"}",
    );
    assert!(
        savings > Some(0.0),
        "savings of the would-be deletion: {metrics}"
    );
    // Passes go on for a while; nothing may change meanwhile.
    tokio::time::sleep(Duration::from_secs(15)).await;
    shadow.assert_alive();
    let log = shadow.log_text();
    assert!(
        log.contains("dry-run: would create a nodeclaim"),
        "{}",
        harness::tail(&log, 40)
    );
    assert!(
        log.contains("dry-run: would disrupt"),
        "{}",
        harness::tail(&log, 40)
    );
    assert!(
        !log.contains("dry-run: refused a write") && !log.contains("asked for an action"),
        "a write was attempted:\n{}",
        harness::tail(&log, 60)
    );
    assert_eq!(
        claim_names(&cluster).await,
        claims_before,
        "no NodeClaim created or deleted"
    );
    assert_eq!(
        node_names(&cluster).await,
        nodes_before,
        "no Node created or deleted"
    );
    let tainted: Vec<_> = cluster
        .nodes()
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter(disrupted)
        .collect();
    assert!(tainted.is_empty(), "no node tainted for disruption");

    // `plan --from-cluster` with the same read-only credentials: the pending pod gets a new
    // node, and a pod no instance type can hold is named with the reason.
    cluster
        .apply(&deployment("huge", 1, "500", "default"))
        .await;
    cluster
        .wait_unschedulable("huge", 1, Duration::from_secs(60))
        .await;
    let out = std::process::Command::new(harness::binary())
        .args(["plan", "--from-cluster"])
        .env("KUBECONFIG", &config)
        .output()
        .expect("run karpenter plan --from-cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "plan --from-cluster failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 new node(s)"), "{stdout}");
    assert!(stdout.contains("1 unschedulable"), "{stdout}");
    assert!(
        stdout.contains("huge-"),
        "the unschedulable pod is named: {stdout}"
    );

    let user = format!(
        "system:serviceaccount:{}:{account}",
        harness::SYSTEM_NAMESPACE
    );
    let audit: Vec<serde_json::Value> = cluster
        .audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == user.as_str())
        .collect();
    let writes: Vec<String> = audit
        .iter()
        .filter(|e| !matches!(e["verb"].as_str(), Some("get" | "list" | "watch")))
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    assert!(writes.is_empty(), "requests other than reads: {writes:#?}");
    assert!(
        audit.iter().any(|e| e["verb"] == "watch"),
        "the audit log shows the shadow's watches ({} requests)",
        audit.len()
    );
}

async fn claim_names(cluster: &harness::Cluster) -> Vec<String> {
    sorted_names(&cluster.node_claims()).await
}

async fn node_names(cluster: &harness::Cluster) -> Vec<String> {
    sorted_names(&cluster.nodes()).await
}

async fn sorted_names<K>(api: &kube::Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}
