//! Least privilege: the controller runs with a token of the chart's ServiceAccount and the
//! RBAC the chart renders (`helm template`), provisions and removes nodes, and the API server
//! forbids none of its requests.

use crate::harness::{self, TEST_LABEL, documents, record, tools_dir};
use crate::provisioning::{apply_and_wait, deployment, node_pool};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Applies the ServiceAccount and RBAC objects the chart renders with `set` (`helm template
/// --set …`), labelled so the next test's reset removes them; returns the ServiceAccount's
/// name and the kinds applied.
pub async fn apply_chart_rbac(cluster: &harness::Cluster, set: &[&str]) -> (String, Vec<String>) {
    let helm = tools_dir().map_or_else(|| "helm".into(), |d| d.join("helm"));
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/karpenter-rs");
    let out = Command::new(&helm)
        .args(["template", "karpenter"])
        .arg(&chart)
        .args(["--namespace", harness::SYSTEM_NAMESPACE])
        .args(set.iter().flat_map(|s| ["--set", s]))
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", helm.display()));
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout).expect("utf-8");
    let mut account = None;
    let mut kinds = Vec::new();
    for mut doc in documents(&rendered) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        if !matches!(
            kind.as_str(),
            "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
        ) {
            continue;
        }
        if kind == "ServiceAccount" {
            account = doc["metadata"]["name"].as_str().map(str::to_owned);
        }
        // Cluster-scoped objects are labelled so the next test's reset removes them.
        doc["metadata"]["labels"][TEST_LABEL] = "true".into();
        kinds.push(kind);
        cluster
            .apply(&serde_json::to_string(&doc).expect("json"))
            .await;
    }
    kinds.sort();
    (account.expect("the chart renders a ServiceAccount"), kinds)
}

/// The requests of `user` the API server forbade (audit log), as `verb URI`.
pub fn forbidden_requests(cluster: &harness::Cluster, user: &str) -> Vec<String> {
    cluster
        .audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == user && e["responseStatus"]["code"] == 403)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect()
}

/// Asserts the API server forbade none of the requests of the chart's ServiceAccount
/// `account`.
pub fn assert_nothing_forbidden(cluster: &harness::Cluster, account: &str) {
    let user = format!(
        "system:serviceaccount:{}:{account}",
        harness::SYSTEM_NAMESPACE
    );
    let forbidden = forbidden_requests(cluster, &user);
    assert!(forbidden.is_empty(), "forbidden requests: {forbidden:#?}");
}

#[tokio::test]
async fn the_charts_rbac_is_enough_and_nothing_is_forbidden() {
    let Some(cluster) = harness::cluster("rbac").await else {
        return;
    };
    let (account, kinds) = apply_chart_rbac(&cluster, &[]).await;
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );
    let config = cluster
        .service_account_kubeconfig(harness::SYSTEM_NAMESPACE, &account)
        .await;

    cluster.apply(&node_pool("default", "")).await;
    let mut controller = cluster.controller_with("karpenter-rbac", &[], &config);
    let secs = apply_and_wait(
        &cluster,
        &deployment("inflate", 4, "1", "default"),
        "inflate",
        4,
    )
    .await;
    record("rbac", "apply to 4 pods Running (chart RBAC)", secs, "s");
    let start = Instant::now();
    cluster.scale("inflate", 0).await;
    cluster.wait_no_nodes(Duration::from_secs(240)).await;
    record(
        "rbac",
        "scale to 0 until no nodes (chart RBAC)",
        start.elapsed().as_secs_f64(),
        "s",
    );
    controller.assert_alive();

    let user = format!(
        "system:serviceaccount:{}:{account}",
        harness::SYSTEM_NAMESPACE
    );
    let forbidden = forbidden_requests(&cluster, &user);
    assert!(forbidden.is_empty(), "forbidden requests: {forbidden:#?}");
    let requests = cluster
        .audit_events()
        .iter()
        .filter(|e| e["user"]["username"] == user.as_str())
        .count();
    assert!(requests > 0, "the audit log shows no request from {user}");
    assert!(
        !controller.log_text().contains("forbidden"),
        "the controller logged a forbidden request"
    );
}
