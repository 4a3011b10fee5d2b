//! `--ignore-dra-requests=false` on the real control plane: a pod whose ResourceClaim asks
//! for one GPU of the fake driver gets a node of a GPU instance type, the fake kubelet
//! publishes that node's ResourceSlice, and the kube-scheduler allocates the claim and binds
//! the pod, which runs. A pod whose claim asks for more GPUs than any instance type has stays
//! pending, and Karpenter says why in a FailedScheduling event. The controller runs with the
//! chart's RBAC, so the resource.k8s.io watches and the slice writes are granted.

use crate::harness::{self, poll_until, wait_for};
use crate::provisioning::node_pool;
use crate::rbac::{apply_chart_rbac, assert_nothing_forbidden};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use std::process::Command;
use std::time::{Duration, Instant};

const GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";

fn claim_pod(name: &str, template: &str) -> String {
    format!(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: {template}}}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {{deviceClassName: fake-gpu, count: {count}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  terminationGracePeriodSeconds: 0
  nodeSelector: {{karpenter.sh/nodepool: default}}
  resourceClaims:
    - {{name: gpu, resourceClaimTemplateName: {template}}}
  containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {{cpu: 100m, memory: 128Mi}}
        claims: [{{name: gpu}}]
"#,
        // 16: more GPUs than any instance type has, within the API's 32 per claim.
        count = if template == "one-gpu" { 1 } else { 16 },
    )
}

#[tokio::test]
async fn a_gpu_claim_gets_a_gpu_node_and_an_impossible_claim_is_reported() {
    let Some(cluster) = harness::cluster("dra").await else {
        return;
    };
    let kubectl = harness::tools_dir().map_or_else(|| "kubectl".into(), |d| d.join("kubectl"));
    let served = Command::new(kubectl)
        .args(["--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .args([
            "api-resources",
            "--api-group",
            "resource.k8s.io",
            "-o",
            "name",
        ])
        .output()
        .expect("run kubectl");
    let served = String::from_utf8_lossy(&served.stdout);
    assert!(
        served.contains("resourceclaims") && served.contains("resourceslices"),
        "the control plane serves resource.k8s.io: {served}"
    );
    let (account, _) = apply_chart_rbac(&cluster, &["settings.ignoreDRARequests=false"]).await;
    let config = cluster
        .service_account_kubeconfig(harness::SYSTEM_NAMESPACE, &account)
        .await;
    cluster.apply(&node_pool("default", "")).await;
    cluster
        .apply(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: fake-gpu}\n\
             spec:\n  selectors:\n    - cel: {expression: 'device.driver == \"gpu.fake.karpenter.sh\"'}\n",
        )
        .await;
    let mut controller =
        cluster.controller_with("karpenter-dra", &["--ignore-dra-requests=false"], &config);
    let start = Instant::now();
    cluster.apply(&claim_pod("train", "one-gpu")).await;
    cluster.apply(&claim_pod("greedy", "sixteen-gpus")).await;

    let pods = cluster
        .wait_running("train", 1, Duration::from_secs(120))
        .await;
    harness::record(
        "dra",
        "gpu claim pod running",
        start.elapsed().as_secs_f64(),
        "s",
    );
    let node_name = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    let node = cluster
        .nodes()
        .get(&node_name)
        .await
        .expect("the pod's node");
    let gpus: u32 = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(GPU_COUNT))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(gpus >= 1, "a GPU instance type: {:?}", node.metadata.labels);

    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let note = wait_for(
        "Karpenter's FailedScheduling event on pod greedy",
        Duration::from_secs(60),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                let on_greedy = e
                    .regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some("greedy"));
                let note = e.note.unwrap_or_default();
                (on_greedy
                    && e.reason.as_deref() == Some("FailedScheduling")
                    && note.contains("allocating dynamic resources"))
                .then_some(note)
            })
        },
    )
    .await;
    assert!(
        note.contains("request gpu") && note.contains("16 device(s) of class fake-gpu"),
        "the reason names the claim's request: {note}"
    );
    let greedy = cluster.pods().get("greedy").await.expect("pod greedy");
    let bound = greedy.spec.as_ref().and_then(|s| s.node_name.clone());
    assert_eq!(bound, None, "greedy stays pending");
    // Only the GPU pod's node was launched: nothing for the claim no type serves.
    let claims = cluster.node_claims();
    let extra = poll_until(Duration::from_secs(5), || async {
        let n = claims.list(&ListParams::default()).await.ok()?.items.len();
        (n > 1).then_some(n)
    })
    .await;
    assert_eq!(extra, None, "{}", controller.log_text());
    controller.assert_alive();
    assert_nothing_forbidden(&cluster, &account);
}
