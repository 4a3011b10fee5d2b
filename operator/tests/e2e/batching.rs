//! The simulator batches like a real cluster. One wave — 300 pods of 3 Deployments applied
//! at once while the controller runs — on the real control plane and in the simulator: the
//! real kube-controller-manager creates the pods at its default client rate (a burst of 30,
//! then 20 a second, in slow-start batches per ReplicaSet), so they reach the provisioner
//! over about 14 s and are planned in several batches; the simulator's modelled controllers
//! do the same (`settings.kubeControllerManager`, docs/simulator.md). The nodes and their
//! price per hour once every pod runs agree within 10 %.

use crate::harness::{self, record, wait_for};
use crate::provisioning::deployment;
use karpenter_cloudprovider::NodeClaim;
use karpenter_simulator::{Files, LogLine, RunOptions, Scenario, run_scenario};
use kube::api::ListParams;
use std::path::Path;
use std::time::{Duration, Instant};

/// On-demand amd64 c/m nodes of at most 8 vCPUs, never consolidated: the nodes counted are
/// the ones provisioning chose.
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
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-size, operator: In, values: [large, xlarge, 2xlarge]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
"#;

/// The wave: three Deployments of 100 pods each, of three sizes.
const WAVE: [(&str, &str); 3] = [("web", "500m"), ("api", "1"), ("worker", "1500m")];
const REPLICAS: u32 = 100;

fn deployments() -> String {
    WAVE.iter()
        .map(|(name, cpu)| deployment(name, REPLICAS, cpu, "default"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

struct InMemory(String);

impl Files for InMemory {
    fn read_to_string(&self, _: &Path) -> std::io::Result<String> {
        Ok(self.0.clone())
    }
}

/// What the simulator did with the wave.
struct Simulated {
    nodes: usize,
    price: f64,
    /// Provisioning passes that launched nodes.
    passes: usize,
}

/// Nodes, $/h and provisioning passes once the wave is placed, by the simulator, with
/// `settings` (YAML flow mapping entries) added to the scenario's.
fn simulated(settings: &str) -> Simulated {
    let mut manifests = String::new();
    for doc in harness::documents(&format!("{NODE_POOL}\n---\n{}", deployments())) {
        let line = serde_json::to_string(&doc).expect("manifest as JSON");
        manifests.push_str(&format!("    - {line}\n"));
    }
    // The fake provider's Nodes join and turn Ready within a second or two of the launch.
    let text = format!(
        "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {{name: batching}}\n\
         spec:\n  duration: 5m\n  settings: {{launchLatency: 2s, initializationDelay: 1s{settings}}}\n\
         \x20 manifests:\n{manifests}"
    );
    let files = InMemory(text);
    let scenario = Scenario::load(Path::new("batching.yaml"), &files)
        .unwrap_or_else(|e| panic!("scenario: {e}\n{}", files.0));
    let mut passes = 0;
    let report = run_scenario(
        &scenario,
        RunOptions {
            optimizer: true,
            lower_bound: false,
        },
        &files,
        &mut |l: &LogLine| passes += usize::from(l.message.contains("computed")),
        &mut |_| {},
    )
    .expect("the scenario runs");
    assert_eq!(
        report.pods.scheduled,
        WAVE.len() * REPLICAS as usize,
        "every simulated pod runs"
    );
    Simulated {
        nodes: report.nodes.at_end,
        price: report.cost.at_end_per_hour,
        passes,
    }
}

/// A NodeClaim's $/h in the embedded catalogue, by its launched type, zone and capacity
/// type.
fn price(claim: &NodeClaim) -> f64 {
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let get = |k: &str| labels.get(k).map(String::as_str);
    let it = get("node.kubernetes.io/instance-type").expect("a launched claim's type");
    karpenter_catalog::default_instance_types()
        .iter()
        .find(|t| t.name == it)
        .and_then(|t| {
            t.offering_price(
                get("topology.kubernetes.io/zone"),
                get("karpenter.sh/capacity-type").unwrap_or("on-demand"),
            )
        })
        .unwrap_or_else(|| panic!("no price for {it}"))
}

fn within(a: f64, b: f64, share: f64) -> bool {
    (a - b).abs() <= share * a.max(b)
}

#[tokio::test]
async fn the_simulator_batches_a_wave_as_the_real_cluster_does() {
    let Some(cluster) = harness::cluster("batching").await else {
        return;
    };
    let sim = simulated("");
    // The same wave created at once, as the simulator did before it modelled the
    // controllers' rate: one provisioning pass where the real cluster makes several.
    let instant =
        simulated(", kubeControllerManager: {kubeAPIQPS: 1000000, kubeAPIBurst: 1000000}");
    let (sim_nodes, sim_price) = (sim.nodes, sim.price);
    let (instant_nodes, instant_price) = (instant.nodes, instant.price);
    eprintln!(
        "simulator: {sim_nodes} nodes ${sim_price:.4}/h in {} pass(es); created at once: \
         {instant_nodes} nodes ${instant_price:.4}/h in {} pass(es)",
        sim.passes, instant.passes
    );

    cluster.apply(NODE_POOL).await;
    let mut controller = cluster.controller("karpenter-a", &[]);
    let ready = format!("http://127.0.0.1:{}/readyz", controller.health_port);
    wait_for("the controller ready", Duration::from_secs(60), || async {
        harness::http_get(&ready).await.map(|_| ())
    })
    .await;
    let start = Instant::now();
    cluster.apply(&deployments()).await;
    for (app, _) in WAVE {
        cluster
            .wait_running(app, REPLICAS as usize, Duration::from_secs(300))
            .await;
    }
    record(
        "batching",
        "300 pods of 3 Deployments to Running",
        start.elapsed().as_secs_f64(),
        "s",
    );
    controller.assert_alive();
    let claims = cluster
        .node_claims()
        .list(&ListParams::default())
        .await
        .expect("list NodeClaims")
        .items;
    let real_nodes = claims.len();
    let real_price: f64 = claims.iter().map(price).sum();
    let batches = controller
        .log_lines()
        .iter()
        .filter(|(_, l)| l.contains("computed new nodeclaim"))
        .count();
    eprintln!(
        "real control plane: {real_nodes} nodes ${real_price:.4}/h ({batches} provisioning \
         pass(es))"
    );
    // The wave reaches the provisioner over seconds, so both plan it in several passes;
    // created at once it would be one.
    assert!(
        batches > 1 && sim.passes > 1 && instant.passes < sim.passes,
        "provisioning passes: real {batches}, simulated {}, created at once {}",
        sim.passes,
        instant.passes
    );
    record("batching", "real nodes", real_nodes as f64, "nodes");
    record("batching", "simulated nodes", sim_nodes as f64, "nodes");
    assert!(
        within(real_nodes as f64, sim_nodes as f64, 0.10),
        "nodes: real {real_nodes}, simulated {sim_nodes} (created at once: {instant_nodes})"
    );
    assert!(
        within(real_price, sim_price, 0.10),
        "$/h: real {real_price:.4}, simulated {sim_price:.4} (created at once: \
         {instant_price:.4})"
    );
}
