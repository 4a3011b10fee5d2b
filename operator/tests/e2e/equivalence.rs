//! The simulator predicts the controller: one scenario, run through `karpenter_simulator` in
//! process and through `karpenter controller` on the real control plane (fake provider, same
//! embedded catalogue), makes the same decisions in the same order: which NodeClaims launch
//! (their instance types) and which nodes are disrupted, how many, for which reason. Both
//! drive the one `karpenter_cluster::reconciler`; what differs is only the world around it
//! (a timeline and a modelled kube-scheduler against the real kube-scheduler, controllers
//! and API server).

use crate::consolidation::{NODE_POOL, start_on_one_node};
use crate::harness::{self, wait_for};
use crate::provisioning::deployment;
use karpenter_cloudprovider::NodeClaim;
use karpenter_simulator::{Files, LogLine, RunOptions, Scenario, run_scenario};
use kube::api::ListParams;
use std::path::Path;
use std::time::Duration;

/// The workload of the consolidation test: four 1-cpu web pods and a 10-cpu filler share one
/// node; once the filler goes, that node is underused and replaced by a cheaper one.
fn workload() -> String {
    format!(
        "{NODE_POOL}\n---\n{}\n---\n{}",
        deployment("web", 4, "1", "default"),
        deployment("filler", 1, "10", "default")
    )
}

/// The scenario file: the same manifests, and the filler scaled to zero after two minutes.
fn scenario_text() -> String {
    let mut manifests = String::new();
    for doc in harness::documents(&workload()) {
        let line = serde_json::to_string(&doc).expect("manifest as JSON");
        manifests.push_str(&format!("    - {line}\n"));
    }
    format!(
        "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {{name: equivalence}}\n\
         spec:\n  duration: 10m\n  manifests:\n{manifests}  timeline:\n    - at: 2m\n      \
         scale: {{deployment: filler, replicas: 0}}\n"
    )
}

struct InMemory(String);

impl Files for InMemory {
    fn read_to_string(&self, _: &Path) -> std::io::Result<String> {
        Ok(self.0.clone())
    }
}

/// The value after `key` up to the next `,`, `)` or space.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest.find([',', ')', ' ']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

/// The simulator's decisions, from its decision log.
fn simulated() -> Vec<String> {
    let text = scenario_text();
    let files = InMemory(text);
    let scenario = Scenario::load(Path::new("equivalence.yaml"), &files)
        .unwrap_or_else(|e| panic!("scenario: {e}\n{}", files.0));
    let mut lines: Vec<LogLine> = Vec::new();
    run_scenario(
        &scenario,
        RunOptions {
            optimizer: true,
            lower_bound: false,
        },
        &files,
        &mut |l: &LogLine| lines.push(l.clone()),
        &mut |_| {},
    )
    .expect("the scenario runs");
    let mut out = Vec::new();
    for l in &lines {
        let m = &l.message;
        if m.starts_with("launched nodeclaim") {
            out.push(format!(
                "launch {}",
                field(m, "instance-type ").unwrap_or("?")
            ));
        } else if m.starts_with("disrupting node(s)") {
            out.push(format!(
                "disrupt {} {} node(s)",
                field(m, "reason ").unwrap_or("?"),
                field(m, "terminating ").unwrap_or("?")
            ));
        }
    }
    out
}

fn instance_type(claim: &NodeClaim) -> Option<String> {
    claim
        .metadata
        .labels
        .as_ref()?
        .get("node.kubernetes.io/instance-type")
        .cloned()
}

#[tokio::test]
async fn the_simulator_predicts_the_controllers_decisions() {
    let Some(cluster) = harness::cluster("equivalence").await else {
        return;
    };
    let predicted = simulated();
    // The scenario shows what it was written to show: a launch, a consolidation, a launch.
    assert_eq!(predicted.len(), 3, "{predicted:?}");
    assert!(
        predicted[1].starts_with("disrupt Underutilized 1 node"),
        "{predicted:?}"
    );
    eprintln!("simulator decisions: {predicted:?}");
    cluster.apply(&workload()).await;
    let mut controller = start_on_one_node(&cluster).await;
    let list = |c: &harness::Cluster| {
        let api = c.node_claims();
        async move { api.list(&ListParams::default()).await.ok() }
    };
    let first = list(&cluster).await.expect("list NodeClaims").items;
    let mut decisions: Vec<String> = first
        .iter()
        .map(|c| format!("launch {}", instance_type(c).unwrap_or_default()))
        .collect();
    let old: Vec<String> = first
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();

    cluster.scale("filler", 0).await;
    let replacements = wait_for(
        "the old NodeClaim replaced by a launched one",
        Duration::from_secs(240),
        || async {
            let claims = list(&cluster).await?.items;
            let gone = old
                .iter()
                .all(|o| !claims.iter().any(|c| c.metadata.name.as_ref() == Some(o)));
            let launched: Vec<String> = claims.iter().filter_map(instance_type).collect();
            (gone && launched.len() == claims.len() && !claims.is_empty()).then_some(launched)
        },
    )
    .await;
    controller.assert_alive();
    let log = controller.log_lines();
    let disruptions: Vec<String> = log
        .iter()
        .filter(|(_, l)| l.contains("disrupting nodes"))
        .map(|(_, l)| {
            let nodes = l.split_once("nodes=[").map_or(0, |(_, rest)| {
                rest.split(']').next().unwrap_or("").split(',').count()
            });
            format!(
                "disrupt {} {nodes} node(s)",
                field(l, "reason=").unwrap_or("?")
            )
        })
        .collect();
    decisions.extend(disruptions);
    decisions.extend(replacements.iter().map(|t| format!("launch {t}")));
    assert_eq!(
        decisions,
        predicted,
        "controller (left) and simulator (right) decided differently; controller log:\n{}",
        harness::tail(&controller.log_text(), 60)
    );
}
