//! Faults, with nothing lost: the controller on the real control plane while the API server
//! freezes for 20 s or restarts, etcd restarts, watches expire (410 Gone), the API server
//! throttles the controller (API Priority and Fairness), another client keeps writing the
//! objects the controller writes, and the fake cloud fails launches with insufficient
//! capacity and launches slowly. Each fault strikes while NodeClaims are being launched and
//! again while nodes drain (NodeClaims deleted under a PodDisruptionBudget). After each
//! phase: every pod Running, or Pending with the controller's explanation; NodeClaims, Nodes
//! and the fake cloud's instances (its Nodes) match one to one, nothing is left deleting
//! (no stuck finalizer) or tainted; the budget's floor of Ready pods held at every watch
//! event of the drain; the controller never exited, logged no ERROR, and logged no retried
//! 409 Conflict at WARN.
//!
//! Small by default (4 pods, one per node), as CI runs them. `KARPENTER_E2E_FAULT_PODS=<n>`
//! runs the same tests at scale (the benchmark command's fault runs).

use crate::harness::{self, Cluster, Controller, control_plane, record, wait_for};
use futures::FutureExt as _;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use karpenter_cloudprovider::NodeClaim;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

/// The workload's label `app=`.
const APP: &str = "work";
/// The label of the fake cloud's instances (its Nodes).
const FAKE_NODE: &str = "karpenter-rs.sh/fake-node=true";
/// How long the API server stays frozen.
const FREEZE: Duration = Duration::from_secs(20);

/// Pods of the workload, one per node: 4, or `KARPENTER_E2E_FAULT_PODS`.
fn pod_count() -> usize {
    std::env::var("KARPENTER_E2E_FAULT_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 2)
        .unwrap_or(4)
}

/// On-demand 2-vCPU types only, never consolidated: each 1-CPU pod gets a node of its own,
/// so the number of nodes a correct controller ends with is exactly the number of pods.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, c6i.large, m5.large, m6i.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
"#;

/// `n` one-CPU pods and a budget allowing a tenth of them (at least one) to be unavailable.
fn workload(n: usize) -> (String, usize) {
    let unavailable = (n / 10).max(1);
    let yaml = format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {APP}
spec:
  replicas: {n}
  selector: {{matchLabels: {{app: {APP}}}}}
  template:
    metadata: {{labels: {{app: {APP}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      nodeSelector: {{karpenter.sh/nodepool: default}}
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {{requests: {{cpu: "1", memory: 128Mi}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {APP}
spec:
  maxUnavailable: {unavailable}
  selector: {{matchLabels: {{app: {APP}}}}}
"#
    );
    (yaml, unavailable)
}

/// When a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// NodeClaims for the workload exist and are being launched.
    Provisioning,
    /// NodeClaims were deleted and at least one node is tainted and draining.
    Draining,
}

/// Why the cluster is not (yet) as it must be after a fault, or `None` when it is: `n` pods
/// of the workload Running and Ready, one per node; NodeClaims, Nodes and the fake cloud's
/// instances matching one to one by provider ID, every claim Initialized; nothing deleting,
/// nothing tainted disrupted.
async fn unsettled(cluster: &Cluster, n: usize) -> Option<String> {
    let claims = match cluster.node_claims().list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => return Some(format!("listing NodeClaims: {e}")),
    };
    let nodes = match cluster.nodes().list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => return Some(format!("listing Nodes: {e}")),
    };
    let instances = match cluster
        .nodes()
        .list(&ListParams::default().labels(FAKE_NODE))
        .await
    {
        Ok(l) => l.items,
        Err(e) => return Some(format!("listing instances: {e}")),
    };
    let ids = |ids: Vec<String>| -> (BTreeSet<String>, usize) {
        let count = ids.len();
        (ids.into_iter().collect(), count)
    };
    let (claim_ids, claim_count) = ids(claims.iter().map(|c| c.provider_id().to_owned()).collect());
    let node_id = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default()
    };
    let (node_ids, _) = ids(nodes.iter().map(node_id).collect());
    let (instance_ids, _) = ids(instances.iter().map(node_id).collect());
    if claim_ids.len() != claim_count {
        return Some(format!("two NodeClaims share a provider ID: {claim_ids:?}"));
    }
    if claim_ids != node_ids || node_ids != instance_ids {
        return Some(format!(
            "NodeClaims {claim_ids:?}, Nodes {node_ids:?}, instances {instance_ids:?} differ"
        ));
    }
    if let Some(c) = claims
        .iter()
        .find(|c| c.metadata.deletion_timestamp.is_some())
    {
        return Some(format!("NodeClaim {} is still deleting", c.name_any()));
    }
    if let Some(c) = claims
        .iter()
        .find(|c| !harness::claim_condition(c, "Initialized"))
    {
        return Some(format!("NodeClaim {} is not Initialized", c.name_any()));
    }
    if let Some(node) = nodes
        .iter()
        .find(|n| n.metadata.deletion_timestamp.is_some() || harness::disrupted(n))
    {
        return Some(format!("Node {} is deleting or tainted", node.name_any()));
    }
    let pods = cluster.app_pods(APP).await;
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let running = live.iter().filter(|p| harness::running_ready(p)).count();
    if live.len() != n || running != n {
        return Some(format!(
            "{running} of {} pods Running (want {n})",
            live.len()
        ));
    }
    let hosts: BTreeSet<String> = live
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    if hosts.len() != n || nodes.len() != n {
        return Some(format!(
            "{n} pods on {} nodes of {} (want one pod per node)",
            hosts.len(),
            nodes.len()
        ));
    }
    None
}

/// Starts the controller again after it exited on a lost Lease, as the kubelet restarts a
/// Deployment's container; `None` where exiting fails the test.
type Restart<'a> = Option<&'a dyn Fn() -> Controller>;

/// Waits until [`unsettled`] says nothing; panics with its last reason and the cluster's
/// description after `timeout`. A controller that exited fails the test, unless `restart`
/// is given and it exited because it lost the Lease: then it is started again.
async fn settle(
    cluster: &Cluster,
    n: usize,
    timeout: Duration,
    controller: &mut Controller,
    restart: Restart<'_>,
) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < timeout {
        if let (Some(restart), Some(_)) = (restart, controller.exited()) {
            let log = controller.log_text();
            if log.contains("lost leadership; exiting") {
                *controller = restart();
            }
        }
        controller.assert_alive();
        last = unsettled(cluster, n).await;
        if last.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "not settled after {timeout:?}: {}\n{}",
        last.unwrap_or_default(),
        cluster.describe().await
    );
}

/// A fault test: the workload provisioned with `fault` striking while claims launch, then
/// half its NodeClaims deleted with `fault` striking while a node drains; after each the
/// cluster must settle, the budget must have held during the drain, and the controller must
/// be alive with a clean log.
async fn run<F, Fut>(
    cluster: &Cluster,
    test: &str,
    controller: &mut Controller,
    restart: Restart<'_>,
    mut fault: F,
) where
    F: FnMut(Moment) -> Fut,
    Fut: Future<Output = ()>,
{
    let n = pod_count();
    let timeout = Duration::from_secs(180 + 2 * n as u64);
    let (yaml, unavailable) = workload(n);
    cluster.apply(POOL).await;
    let start = Instant::now();
    cluster.apply(&yaml).await;
    wait_for("the first NodeClaim", Duration::from_secs(60), || async {
        let claims = cluster
            .node_claims()
            .list(&ListParams::default())
            .await
            .ok()?;
        (!claims.items.is_empty()).then_some(())
    })
    .await;
    fault(Moment::Provisioning).await;
    settle(cluster, n, timeout, controller, restart).await;
    record(
        test,
        "provisioned through the fault",
        start.elapsed().as_secs_f64(),
        "s",
    );

    // The drain: half the NodeClaims deleted at once, their pods evicted within the budget.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let floor = harness::min_ready_while(cluster, APP, stopped.map(|_| ()));
    let drain = async {
        let start = Instant::now();
        let claims = cluster
            .node_claims()
            .list(&ListParams::default())
            .await
            .unwrap();
        let mut names: Vec<String> = claims.iter().map(|c| c.name_any()).collect();
        names.sort();
        for name in names.iter().take(n / 2) {
            cluster
                .node_claims()
                .delete(name, &DeleteParams::default())
                .await
                .expect("delete nodeclaim");
        }
        wait_for("a node draining", Duration::from_secs(60), || async {
            let nodes = cluster.nodes().list(&ListParams::default()).await.ok()?;
            nodes.iter().any(harness::disrupted).then_some(())
        })
        .await;
        fault(Moment::Draining).await;
        settle(cluster, n, timeout, controller, restart).await;
        record(
            test,
            "drained through the fault",
            start.elapsed().as_secs_f64(),
            "s",
        );
        let _ = stop.send(());
    };
    let (min_ready, ()) = tokio::join!(floor, drain);
    assert!(
        min_ready >= n - unavailable,
        "the PodDisruptionBudget was violated: {min_ready} of {n} pods Ready at one point \
         (maxUnavailable {unavailable})"
    );
    controller.assert_alive();
    assert_clean_log(controller);
}

/// No ERROR, and no WARN about a conflict: a retried 409 is routine (debug).
fn assert_clean_log(controller: &Controller) {
    let lines = controller.log_lines();
    let bad: Vec<&String> = lines
        .iter()
        .map(|(_, l)| l)
        .filter(|l| {
            l.starts_with("ERROR")
                || (l.starts_with("WARN") && (l.contains("409") || l.contains("Conflict")))
        })
        .collect();
    assert!(bad.is_empty(), "the controller logged:\n{bad:#?}");
}

/// The controller's requests the audit log answered with `code`.
fn answered(cluster: &Cluster, user: &str, code: u16) -> usize {
    cluster
        .audit_events()
        .iter()
        .filter(|e| e["user"]["username"] == user && e["responseStatus"]["code"] == code)
        .count()
}

/// The controller of the tests whose fault the API server sees from its side, as its own
/// ServiceAccount (the admin's `system:masters` group is exempt from API Priority and
/// Fairness and hides among other clients in the audit log).
async fn controller_as(cluster: &Cluster, name: &str, extra: &[&str]) -> (Controller, String) {
    let kubeconfig = cluster
        .admin_service_account(harness::SYSTEM_NAMESPACE, name)
        .await;
    let user = format!("system:serviceaccount:{}:{name}", harness::SYSTEM_NAMESPACE);
    (cluster.controller_with(name, extra, &kubeconfig), user)
}

#[tokio::test]
async fn a_frozen_api_server_loses_nothing() {
    let Some(cluster) = harness::cluster("fault_freeze").await else {
        return;
    };
    let mut controller = cluster.controller("karpenter-a", &[]);
    run(&cluster, "fault_freeze", &mut controller, None, |_| async {
        control_plane(&["freeze", "kube-apiserver"]);
        tokio::time::sleep(FREEZE).await;
        control_plane(&["thaw", "kube-apiserver"]);
    })
    .await;
}

/// A restart takes the API server away for longer than the Lease's renew deadline (10 s):
/// the controller steps down and exits, as client-go's leader election does (renewing late
/// could let two leaders act). The test then starts it again, as the kubelet would restart
/// the container, and checks nothing was lost: the fresh process lists, takes the Lease
/// once it expires and finishes the work.
#[tokio::test]
async fn a_restarted_api_server_loses_nothing() {
    let Some(cluster) = harness::cluster("fault_apiserver_restart").await else {
        return;
    };
    let mut controller = cluster.controller("karpenter-a", &[]);
    let restarts = std::cell::Cell::new(0_usize);
    let restart = || {
        restarts.set(restarts.get() + 1);
        cluster.controller(&format!("karpenter-a-restart{}", restarts.get()), &[])
    };
    run(
        &cluster,
        "fault_apiserver_restart",
        &mut controller,
        Some(&restart),
        |_| async {
            let start = Instant::now();
            control_plane(&["restart", "kube-apiserver"]);
            record(
                "fault_apiserver_restart",
                "kube-apiserver restart",
                start.elapsed().as_secs_f64(),
                "s",
            );
        },
    )
    .await;
    record(
        "fault_apiserver_restart",
        "controller restarts after a lost Lease",
        restarts.get() as f64,
        "",
    );
}

#[tokio::test]
async fn a_restarted_etcd_loses_nothing() {
    let Some(cluster) = harness::cluster("fault_etcd_restart").await else {
        return;
    };
    let mut controller = cluster.controller("karpenter-a", &[]);
    run(
        &cluster,
        "fault_etcd_restart",
        &mut controller,
        None,
        |_| async {
            control_plane(&["restart", "etcd"]);
        },
    )
    .await;
}

#[tokio::test]
async fn expired_watches_are_listed_again_and_lose_nothing() {
    let Some(cluster) = harness::cluster("fault_watch_expiry").await else {
        return;
    };
    let mut controller = cluster.controller("karpenter-a", &["--log-level", "debug"]);
    // etcd's history is compacted and the API server's watches on etcd are cut: its watch
    // caches start again from etcd's current revision and end every client watch, and the
    // controller's watches, resuming from older resourceVersions, get 410 Gone.
    run(
        &cluster,
        "fault_watch_expiry",
        &mut controller,
        None,
        |_| async {
            control_plane(&["compact"]);
            control_plane(&["restart", "etcd"]);
        },
    )
    .await;
    let log = controller.log_text();
    assert!(
        log.contains("too old resource version") || log.contains("Expired"),
        "no watch of the controller expired: the fault did not happen"
    );
}

const THROTTLE: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: e2e-karpenter-throttled
  labels: {karpenter-rs.sh/e2e: "true"}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: e2e-karpenter-throttled
  labels: {karpenter-rs.sh/e2e: "true"}
spec:
  priorityLevelConfiguration: {name: e2e-karpenter-throttled}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
    - subjects: [{kind: ServiceAccount, serviceAccount: {name: karpenter-throttled, namespace: karpenter}}]
      resourceRules:
        - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}
      nonResourceRules:
        - {verbs: ["*"], nonResourceURLs: ["*"]}
"#;

async fn remove_throttle(cluster: &Cluster) {
    use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
    let params = DeleteParams::default();
    let schemas: Api<FlowSchema> = Api::all(cluster.client.clone());
    let _ = schemas.delete("e2e-karpenter-throttled", &params).await;
    let levels: Api<PriorityLevelConfiguration> = Api::all(cluster.client.clone());
    let _ = levels.delete("e2e-karpenter-throttled", &params).await;
}

#[tokio::test]
async fn api_throttling_loses_nothing() {
    let Some(cluster) = harness::cluster("fault_throttling").await else {
        return;
    };
    // The controller's ServiceAccount gets a priority level of one share that rejects what
    // it cannot run at once: 429 Too Many Requests.
    remove_throttle(&cluster).await;
    cluster.apply(THROTTLE).await;
    let (mut controller, user) = controller_as(&cluster, "karpenter-throttled", &[]).await;
    run(
        &cluster,
        "fault_throttling",
        &mut controller,
        None,
        |_| async {},
    )
    .await;
    let throttled = answered(&cluster, &user, 429);
    remove_throttle(&cluster).await;
    record(
        "fault_throttling",
        "requests answered 429",
        throttled as f64,
        "",
    );
    assert!(
        throttled > 0,
        "the API server never throttled the controller"
    );
}

/// Another client writing every NodeClaim and Node (an annotation) every 20 ms until `stop`,
/// so the controller's writes guarded by resourceVersion meet 409 Conflicts.
async fn conflicting_writer(cluster: &Cluster, stop: tokio::sync::watch::Receiver<bool>) -> usize {
    let mut writes = 0;
    let mut i = 0u64;
    while !*stop.borrow() {
        i += 1;
        let patch = Patch::Merge(serde_json::json!({
            "metadata": {"annotations": {"e2e.karpenter-rs.sh/conflict": i.to_string()}}
        }));
        let params = PatchParams::default();
        let claims = cluster.node_claims();
        for c in claims
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            writes += usize::from(claims.patch(&c.name_any(), &params, &patch).await.is_ok());
        }
        let nodes = cluster.nodes();
        for n in nodes
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            writes += usize::from(nodes.patch(&n.name_any(), &params, &patch).await.is_ok());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writes
}

#[tokio::test]
async fn conflicting_writes_are_retried_quietly_and_lose_nothing() {
    let Some(cluster) = harness::cluster("fault_conflicts").await else {
        return;
    };
    let (mut controller, user) =
        controller_as(&cluster, "karpenter-conflicts", &["--log-level", "debug"]).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writer = conflicting_writer(&cluster, stopped);
    let scenario = async {
        run(
            &cluster,
            "fault_conflicts",
            &mut controller,
            None,
            |_| async {},
        )
        .await;
        let _ = stop.send(true);
    };
    let (writes, ()) = tokio::join!(writer, scenario);
    let conflicts = answered(&cluster, &user, 409);
    record("fault_conflicts", "conflicting writes", writes as f64, "");
    record(
        "fault_conflicts",
        "controller requests answered 409",
        conflicts as f64,
        "",
    );
    assert!(
        conflicts > 0,
        "the controller met no conflict: the fault did not happen"
    );
    // Each conflict was retried and logged at debug, none at WARN (`run` checked that).
    let debug_conflicts = controller
        .log_lines()
        .iter()
        .filter(|(_, l)| l.starts_with("DEBUG") && l.contains("409"))
        .count();
    assert!(
        debug_conflicts > 0,
        "{conflicts} conflicts, none of them logged at debug"
    );
}

/// The pod only instance types without capacity could take.
const PINNED: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pinned
spec:
  nodeSelector: {node.kubernetes.io/instance-type: c5.large}
  containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
      resources: {requests: {cpu: "1", memory: 128Mi}}
"#;

/// Whether the controller explained why `pod` stays Pending (a FailedScheduling event).
async fn explained(cluster: &Cluster, pod: &str) -> Option<String> {
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .ok()?;
    list.items
        .into_iter()
        .find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.reporting_component.as_deref() == Some("karpenter")
        })
        .and_then(|e| e.message)
}

#[tokio::test]
async fn launches_without_capacity_or_slow_lose_nothing() {
    let Some(cluster) = harness::cluster("fault_launches").await else {
        return;
    };
    // The two cheapest types have no capacity anywhere; m5.large launches take 4 s.
    let mut controller = cluster.controller(
        "karpenter-a",
        &[
            "--fake-insufficient-capacity",
            "c5.large,c6i.large",
            "--fake-launch-delay",
            "m5.large=4s",
        ],
    );
    cluster.apply(PINNED).await;
    run(
        &cluster,
        "fault_launches",
        &mut controller,
        None,
        |_| async {},
    )
    .await;
    let nodes = cluster.nodes().list(&ListParams::default()).await.unwrap();
    let types: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.labels().get("node.kubernetes.io/instance-type").cloned())
        .collect();
    assert!(
        !types.contains("c5.large") && !types.contains("c6i.large"),
        "launched on types without capacity: {types:?}"
    );
    let start = Instant::now();
    let why = wait_for(
        "the pinned pod's explanation",
        Duration::from_secs(120),
        || explained(&cluster, "pinned"),
    )
    .await;
    record(
        "fault_launches",
        "pinned pod explained after the run",
        start.elapsed().as_secs_f64(),
        "s",
    );
    let pods: Api<Pod> = cluster.pods();
    let pinned = pods.get("pinned").await.unwrap();
    assert!(
        pinned
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none(),
        "the pinned pod was placed although its only type has no capacity: {why}"
    );
    // The first launch without capacity made the controller read instance types again, so
    // the pod is not planned onto the same offerings for a whole refresh period: at most
    // one more claim (from a plan already under way) fails after the first.
    let events: Api<Event> = Api::all(cluster.client.clone());
    let failed: BTreeSet<String> = events
        .list(&ListParams::default().fields("reason=InsufficientCapacity"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("NodeClaim"))
        .filter_map(|e| e.involved_object.name)
        .collect();
    record(
        "fault_launches",
        "NodeClaims without capacity",
        failed.len() as f64,
        "",
    );
    assert!(
        !failed.is_empty() && failed.len() <= 2,
        "NodeClaims that found no capacity: {failed:?}"
    );
    // Every claim launched for it failed and was deleted: none is left.
    let claims: Vec<NodeClaim> = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        claims.len(),
        pod_count(),
        "a NodeClaim was left for the pinned pod"
    );
}
