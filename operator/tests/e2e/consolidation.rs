//! Consolidation on a real cluster: an underused node that still runs pods is replaced by a
//! cheaper one, and its drain is paced by a PodDisruptionBudget whose floor of Ready pods
//! holds at every moment (watched continuously, not sampled). Having provisioned, consolidated
//! and terminated, the controller is scraped for every series Karpenter's published Grafana
//! dashboards read (`karpenter_metrics::dashboards`).

use crate::harness::{self, min_ready_while, record, wait_for};
use crate::provisioning::deployment;
use karpenter_cloudprovider::NodeClaim;
use kube::api::ListParams;
use std::time::{Duration, Instant};

/// Only types of at least 8 vCPUs: the workload starts on big nodes, which the filler's
/// departure leaves underused but not empty (with every size allowed, the cheapest plan puts
/// each 1-cpu pod on a node of its own and nothing is ever underused).
pub(crate) const NODE_POOL: &str = r#"
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
        - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["7"]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "100%"}]
  # Far from binding; the dashboards' limit panels read karpenter_nodepools_limit.
  limits: {cpu: "1000", memory: 4000Gi}
"#;

const PDB: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"#;

fn claim_names(claims: &[NodeClaim]) -> Vec<String> {
    let mut names: Vec<String> = claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// Starts the controller once the web and filler pods are all pending, and waits until they
/// run.
///
/// One 10-cpu filler pod and 4 web pods of 1 cpu: the cheapest plan is one 16-vCPU node for
/// all five (two 8-vCPU nodes of 7 one-cpu pods each, an earlier shape, left the
/// kube-scheduler free to put every web pod on one node, and the other was then removed as
/// empty, not underused). The controller starts only once all five are pending, so they form
/// one batch: started earlier, it could batch the web pods apart from the filler (the
/// ReplicaSet controller creates pods in waves, seconds apart on a loaded machine).
pub(crate) async fn start_on_one_node(cluster: &harness::Cluster) -> harness::Controller {
    for (app, n) in [("web", 4), ("filler", 1)] {
        cluster
            .wait_unschedulable(app, n, Duration::from_secs(60))
            .await;
    }
    let controller = cluster.controller("karpenter-a", &[]);
    for (app, n) in [("web", 4), ("filler", 1)] {
        cluster.wait_running(app, n, Duration::from_secs(120)).await;
    }
    controller
}

#[tokio::test]
async fn an_underused_node_is_replaced_and_its_drain_respects_the_pdb() {
    let Some(cluster) = harness::cluster("consolidation").await else {
        return;
    };
    cluster.apply(NODE_POOL).await;
    cluster
        .apply(&format!(
            "{}\n---\n{}\n---\n{PDB}",
            deployment("web", 4, "1", "default"),
            deployment("filler", 1, "10", "default")
        ))
        .await;
    let mut controller = start_on_one_node(&cluster).await;
    let before = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .unwrap();
    let before = claim_names(&before.items);
    assert_eq!(
        before.len(),
        1,
        "the five pods should share one node, got NodeClaims {before:?}"
    );

    // The filler goes: the web pods alone leave the node(s) underused.
    let start = Instant::now();
    cluster.scale("filler", 0).await;
    let eligible_seen = std::cell::Cell::new(false);
    let settled = async {
        wait_for(
            "an old NodeClaim consolidated away and 4 web pods running",
            Duration::from_secs(240),
            || async {
                let metrics = controller.metrics().await;
                if metrics.lines().any(|l| {
                    l.starts_with("karpenter_voluntary_disruption_eligible_nodes{")
                        && l.contains("reason=\"underutilized\"")
                        && !l.ends_with(" 0")
                }) {
                    eligible_seen.set(true);
                }
                let claims = cluster
                    .node_claims()
                    .list(&ListParams::default())
                    .await
                    .ok()?;
                let now = claim_names(&claims.items);
                let replaced = before.iter().any(|n| !now.contains(n))
                    && claims
                        .items
                        .iter()
                        .all(|c| c.metadata.deletion_timestamp.is_none());
                let pods = cluster.app_pods("web").await;
                let ready = pods
                    .iter()
                    .filter(|p| {
                        p.metadata.deletion_timestamp.is_none() && harness::running_ready(p)
                    })
                    .count();
                (replaced && ready == 4).then_some(())
            },
        )
        .await;
    };
    let min_ready = min_ready_while(&cluster, "web", settled).await;
    record(
        "consolidation",
        "filler gone to node replaced",
        start.elapsed().as_secs_f64(),
        "s",
    );
    controller.assert_alive();
    assert!(
        min_ready >= 3,
        "the PDB allows 1 unavailable of 4, yet only {min_ready} were Ready at one point"
    );
    let log = controller.log_text();
    let decisions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("disrupting nodes"))
        .collect();
    assert!(
        decisions.iter().any(|l| l.contains("nderutilized")),
        "no consolidation decision for an underutilized node in the controller log; \
         decisions: {decisions:#?}"
    );
    assert!(
        eligible_seen.get(),
        "karpenter_voluntary_disruption_eligible_nodes{{reason=\"underutilized\"}} never rose above 0"
    );

    // Every series the capacity and performance dashboards read, with their labels (no
    // DaemonSets here, so not their requests). Gauges refresh with the next pass.
    let last = std::cell::RefCell::new(Vec::new());
    let found = harness::poll_until(Duration::from_secs(30), || async {
        let missing = karpenter_metrics::dashboards::missing(&controller.metrics().await, &[]);
        let done = missing.is_empty();
        *last.borrow_mut() = missing;
        done.then_some(())
    })
    .await;
    if found.is_none() {
        let missing: Vec<String> = last.borrow().iter().map(ToString::to_string).collect();
        panic!("the dashboards' queries find no sample of: {missing:#?}");
    }
}
