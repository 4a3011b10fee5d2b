//! Every bundled scenario under `examples/` runs through `karpenter simulate` and its
//! outcome is asserted on the JSON report.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn simulate(name: &str, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(example(name))
        .args(["--quiet", "--output", "json"])
        .args(extra)
        .output()
        .expect("run karpenter");
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn n(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} missing in {v:#}"))
}

fn rows(v: &Value) -> Vec<(String, String)> {
    v["nodes"]["byType"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["instanceType"].as_str().unwrap().to_owned(),
                r["capacityType"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn never_scheduled(v: &Value) -> usize {
    v["pods"]["neverScheduled"].as_array().unwrap().len()
}

/// A Graviton family: letters, a generation digit, then `g` (`c6g`, `m7gd`, `c6gn`).
fn is_graviton(instance_type: &str) -> bool {
    let family = instance_type.split('.').next().unwrap_or_default();
    let rest = family.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    rest.starts_with('g')
}

#[test]
fn quickstart_scales_up_to_one_node_and_back_to_zero_after_consolidate_after() {
    let r = simulate("quickstart.yaml", &[]);
    // 5 replicas x 1 cpu fit one node.
    assert_eq!(n(&r, "/nodes/launched"), 1.0, "{r:#}");
    assert_eq!(n(&r, "/pods/scheduled"), 5.0);
    assert_eq!(rows(&r).len(), 1);
    assert_eq!(rows(&r)[0].1, "on-demand");
    // Back to zero at 15m: the empty node goes, but not before consolidateAfter (1m).
    assert_eq!(n(&r, "/nodes/atEnd"), 0.0);
    assert_eq!(n(&r, "/disruptions/Empty"), 1.0);
    let hours = n(&r, "/nodes/byType/0/nodeHours");
    let launched_at = 31.0;
    assert!(
        hours * 3600.0 >= 16.0 * 60.0 - launched_at,
        "node lived {hours} h"
    );
    assert!(hours * 3600.0 <= 17.0 * 60.0, "node lived {hours} h");
    // Pending time: batch window, launch latency and initialization.
    assert_eq!(n(&r, "/pods/pendingSeconds/max"), 41.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn spot_arm64_pool_takes_arm_pods_and_on_demand_pool_the_rest() {
    let r = simulate("spot-and-arm64.yaml", &[]);
    assert_eq!(never_scheduled(&r), 0, "{r:#}");
    assert!(n(&r, "/nodes/byNodePool/graviton-spot") >= 1.0);
    assert!(n(&r, "/nodes/byNodePool/on-demand") >= 1.0);
    for (it, cap) in rows(&r) {
        if cap == "spot" {
            assert!(is_graviton(&it), "spot node {it} is not arm64");
        } else {
            assert_eq!(cap, "on-demand");
            assert!(!is_graviton(&it), "on-demand node {it} is arm64");
        }
    }
    // The scale-up at 10m adds capacity in the arm64 pool.
    assert!(n(&r, "/nodes/byNodePool/graviton-spot") >= 2.0);
}

#[test]
fn topology_spread_launches_one_node_per_zone() {
    let r = simulate("topology-spread.yaml", &[]);
    let zones = r["nodes"]["byZone"].as_object().unwrap();
    assert_eq!(zones.len(), 3, "{r:#}");
    assert!(zones.values().all(|v| v.as_u64() == Some(1)));
    assert_eq!(n(&r, "/pods/scheduled"), 9.0);
}

#[test]
fn consolidation_after_a_traffic_drop_removes_nodes() {
    let r = simulate("consolidation.yaml", &[]);
    let peak = n(&r, "/nodes/peak");
    assert!(peak >= 4.0, "{r:#}");
    assert!(n(&r, "/nodes/atEnd") < peak);
    let disrupted: f64 = r["disruptions"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_f64)
        .sum();
    assert!(disrupted >= 2.0);
    assert!(n(&r, "/cost/atEndPerHour") < n(&r, "/cost/peakPerHour") / 2.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn drift_rollout_replaces_every_node_within_a_20_percent_budget() {
    let r = simulate("drift.yaml", &[]);
    assert_eq!(n(&r, "/disruptions/Drifted"), 10.0, "{r:#}");
    assert_eq!(n(&r, "/nodes/launched"), 20.0);
    assert_eq!(n(&r, "/nodes/atEnd"), 10.0);
    // 20% of 10 nodes: at most two at a time.
    assert!(n(&r, "/activity/peakDisrupting") <= 2.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn spot_interruption_is_replaced_in_another_zone() {
    let r = simulate("spot-interruption.yaml", &[]);
    assert_eq!(n(&r, "/disruptions/Interrupted"), 1.0, "{r:#}");
    assert_eq!(n(&r, "/nodes/launched"), 2.0);
    assert_eq!(n(&r, "/nodes/atEnd"), 1.0);
    assert_eq!(n(&r, "/pods/evicted"), 6.0);
    // The interrupted zone's spot capacity is gone, so the replacement is elsewhere.
    let zones = r["nodes"]["byZone"].as_object().unwrap();
    assert_eq!(zones.len(), 2);
    assert!(rows(&r).iter().all(|(_, c)| c == "spot"));
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn pdb_slows_the_drain_to_one_eviction_per_ready_replacement() {
    let r = simulate("pdb-drain.yaml", &[]);
    assert_eq!(n(&r, "/disruptions/Drifted"), 1.0, "{r:#}");
    assert_eq!(n(&r, "/pods/evicted"), 6.0);
    // Six evictions, each waiting for the previous pod's replacement to be Ready (20 s).
    assert!(n(&r, "/activity/longestDrainSeconds") >= 100.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn daily_traffic_follows_the_curve() {
    let r = simulate("daily-traffic.yaml", &[]);
    let series = r["cost"]["overTime"].as_array().unwrap();
    let at = |h: f64| {
        series
            .iter()
            .find(|p| p["atSeconds"].as_f64() == Some(h * 3600.0))
            .and_then(|p| p["perHour"].as_f64())
            .unwrap()
    };
    assert_eq!(n(&r, "/durationSeconds"), 86_400.0);
    assert!(at(17.0) > 2.0 * at(5.0), "{series:#?}");
    assert!(at(23.0) < at(17.0));
    let consolidated = r["disruptions"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_f64)
        .sum::<f64>();
    assert!(consolidated >= 1.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn batch_job_runs_50_pods_on_spot_and_cleans_up() {
    let r = simulate("batch-job.yaml", &[]);
    assert_eq!(n(&r, "/pods/completed"), 50.0, "{r:#}");
    assert_eq!(n(&r, "/pods/scheduled"), 50.0);
    assert_eq!(n(&r, "/nodes/atEnd"), 0.0);
    assert!(rows(&r).iter().all(|(_, c)| c == "spot"));
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn node_overlays_choose_the_r_family_and_promise_the_extended_resource() {
    let r = simulate("node-overlay.yaml", &[]);
    assert_eq!(
        rows(&r),
        [("r5a.large".to_owned(), "on-demand".to_owned())],
        "{r:#}"
    );
    assert_eq!(n(&r, "/pods/scheduled"), 3.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn compare_reports_both_runs() {
    let r = simulate("consolidation.yaml", &["--compare"]);
    assert_eq!(r["optimized"]["optimizer"], true);
    assert_eq!(r["greedy"]["optimizer"], false);
    assert!(n(&r, "/optimized/cost/total") > 0.0);
    assert!(n(&r, "/greedy/cost/total") > 0.0);
}

/// `--report` writes the HTML page beside the usual output: with `--compare`, both runs on
/// every chart and the JSON report (with its timeline) unchanged on stdout.
#[test]
fn report_writes_the_html_page_of_both_runs() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let r = simulate(
        "quickstart.yaml",
        &["--compare", "--report", page.to_str().unwrap()],
    );
    assert_eq!(r["optimized"]["timeline"]["intervalSeconds"], 5.0);
    assert_eq!(
        r["greedy"]["timeline"]["atSeconds"]
            .as_array()
            .unwrap()
            .len(),
        361,
        "30 minutes in 5-second samples, both ends included"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..200]);
    assert!(html.contains("karpenter simulate — <span class=\"scenario\">quickstart</span>"));
    for run in ["karpenter-rs", "greedy first fit"] {
        assert!(html.contains(&format!(r#"data-run="{run}""#)), "{run}");
    }
    // A path that cannot be written is an error naming it, after the runs.
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(example("quickstart.yaml"))
        .args(["--quiet", "--report"])
        .arg(dir.path().join("missing/report.html"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write the HTML report to ") && err.contains("missing/report.html"),
        "{err}"
    );
}

/// A single run computes the hourly lower bound only with `--lower-bound`: then the JSON
/// report has it, the text report prints it and the HTML page draws it on the cost chart.
#[test]
fn a_single_run_computes_the_lower_bound_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let path = page.to_str().unwrap();
    let line = r#"class="series line dotted" data-series="hourly lower bound""#;

    let r = simulate("consolidation.yaml", &["--report", path]);
    assert!(r.get("lowerBound").is_none(), "computed unasked: {r:#}");
    assert!(!std::fs::read_to_string(&page).unwrap().contains(line));

    let r = simulate("consolidation.yaml", &["--report", path, "--lower-bound"]);
    assert!(n(&r, "/lowerBound/averagePerHour") > 0.0);
    assert!(n(&r, "/lowerBound/plans") >= 1.0);
    assert!(std::fs::read_to_string(&page).unwrap().contains(line));

    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(example("consolidation.yaml"))
        .args(["--quiet", "--lower-bound"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hourly lower bound: $"), "{text}");
    assert!(text.contains("cost / bound: karpenter-rs "), "{text}");
}

#[test]
fn text_output_logs_decisions_with_virtual_time() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(example("quickstart.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("00:00:31 found 5 provisionable pod(s); computed 1 new node(s)"),
        "{text}"
    );
    assert!(text.contains("launched nodeclaim default-"), "{text}");
    assert!(
        text.contains("disrupting node(s) via delete, reason Empty"),
        "{text}"
    );
    assert!(text.contains("scenario quickstart"), "{text}");
}

/// The lines of the first fenced block in the repository file `doc` whose first line starts
/// with `first`, without that line when `skip_first`.
fn fenced_block(doc: &str, first: &str, skip_first: bool) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        if block.first().is_some_and(|l| l.starts_with(first)) {
            let skip = usize::from(skip_first);
            return block[skip..].iter().map(|l| format!("{l}\n")).collect();
        }
    }
    panic!("{doc} has no fenced block starting with {first:?}");
}

fn simulate_stdout(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The runs the README and the simulator guide show are what the binary prints: a change to
/// the simulation that moves a time, a count or a price must update the docs with it.
#[test]
fn the_documented_simulate_outputs_are_what_the_binary_prints() {
    let quickstart = simulate_stdout(&["examples/quickstart.yaml"]);
    let daily = simulate_stdout(&["examples/daily-traffic.yaml", "--quiet"]);
    for (doc, block, printed) in [
        (
            "README.md",
            fenced_block("README.md", "00:00:30 ", false),
            &quickstart,
        ),
        (
            "docs/simulator.md",
            fenced_block(
                "docs/simulator.md",
                "$ karpenter simulate examples/quickstart.yaml",
                true,
            ),
            &quickstart,
        ),
        (
            "docs/simulator.md",
            fenced_block(
                "docs/simulator.md",
                "$ karpenter simulate examples/daily-traffic.yaml --quiet",
                true,
            ),
            &daily,
        ),
    ] {
        let differ = block.lines().zip(printed.lines()).position(|(a, b)| a != b);
        assert_eq!(
            &block, printed,
            "{doc}'s block is stale (first different line: {differ:?})"
        );
    }
}

#[test]
fn invalid_scenarios_name_file_document_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n  timeline:\n  - at: 10s\n    scale: {deployment: web, replicas: 1, surge: 2}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml (document 1, Scenario bad)"), "{err}");
    assert!(err.contains("spec.timeline[0].scale"), "{err}");
    assert!(err.contains("surge"), "{err}");

    // A bad value inside an inline manifest names the manifest's place in the scenario.
    std::fs::write(
        &path,
        "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nspec:\n  manifests:\n  - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: many}}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml#spec.manifests[0]"), "{err}");
    assert!(err.contains("field spec.replicas"), "{err}");

    // Scaling a workload that does not exist names the event.
    std::fs::write(
        &path,
        "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nspec:\n  timeline:\n  - at: 10s\n    scale: {deployment: ghost, replicas: 1}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("simulate")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.timeline[0]"), "{err}");
    assert!(err.contains("default/ghost does not exist"), "{err}");
}

#[test]
fn expired_nodes_are_drained_within_the_termination_grace_period() {
    let r = simulate("expiration.yaml", &[]);
    // Created at 1 s, expiring every 10 minutes: two expiries in 30 minutes.
    assert_eq!(n(&r, "/disruptions/Expired"), 2.0, "{r:#}");
    // do-not-disrupt pods hold the drain until terminationGracePeriod (1m) runs out.
    let drain = n(&r, "/activity/longestDrainSeconds");
    assert!((60.0..=62.0).contains(&drain), "drain took {drain}s");
    assert_eq!(n(&r, "/nodes/atEnd"), 1.0);
    assert_eq!(never_scheduled(&r), 0);
}

#[test]
fn a_static_pool_keeps_its_nodes_until_it_is_scaled() {
    let r = simulate("static-pool.yaml", &[]);
    // Three static nodes and two overflow nodes; the overflow consolidated after the sale
    // (the only disruptions), one static node removed by the scale to 2.
    assert_eq!(n(&r, "/nodes/launched"), 5.0, "{r:#}");
    assert_eq!(n(&r, "/disruptions/Empty"), 2.0, "{r:#}");
    assert_eq!(n(&r, "/nodes/atEnd"), 2.0, "{r:#}");
    assert_eq!(never_scheduled(&r), 0);
}

fn simulate_text(scenario: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.yaml");
    std::fs::write(&path, scenario).unwrap();
    let path = path.to_str().unwrap();
    serde_json::from_str(&simulate_stdout(&[path, "--quiet", "--output", "json"])).unwrap()
}

const POOL: &str = r#"
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
            requirements:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
"#;

#[test]
fn pods_bind_to_pre_existing_nodes_before_anything_is_launched() {
    let r = simulate_text(&format!(
        r#"apiVersion: karpenter-rs/v1alpha1
kind: Scenario
spec:
  duration: 5m
  manifests:{POOL}
    - apiVersion: v1
      kind: Node
      metadata:
        name: static-1
        labels:
          node.kubernetes.io/instance-type: m5.xlarge
          topology.kubernetes.io/zone: us-east-1a
          kubernetes.io/hostname: static-1
      status:
        conditions: [{{type: Ready, status: "True"}}]
        allocatable: {{cpu: 3900m, memory: 15Gi, pods: "58"}}
        capacity: {{cpu: "4", memory: 16Gi, pods: "58"}}
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: web, namespace: default}}
      spec:
        replicas: 3
        selector: {{matchLabels: {{app: web}}}}
        template:
          metadata: {{labels: {{app: web}}}}
          spec:
            containers: [{{name: web, image: web, resources: {{requests: {{cpu: "1"}}}}}}]
"#
    ));
    assert_eq!(n(&r, "/nodes/launched"), 0.0, "{r:#}");
    assert_eq!(n(&r, "/pods/scheduled"), 3.0);
    assert_eq!(n(&r, "/pods/pendingSeconds/max"), 0.0);
    // The static node is priced from the catalogue (m5.xlarge on-demand).
    assert!((n(&r, "/cost/atEndPerHour") - 0.192).abs() < 1e-9);
}

#[test]
fn insufficient_capacity_falls_back_to_another_capacity_type() {
    let r = simulate_text(&format!(
        r#"apiVersion: karpenter-rs/v1alpha1
kind: Scenario
spec:
  duration: 5m
  manifests:{POOL}
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: web, namespace: default}}
      spec:
        replicas: 0
        selector: {{matchLabels: {{app: web}}}}
        template:
          metadata: {{labels: {{app: web}}}}
          spec:
            containers: [{{name: web, image: web, resources: {{requests: {{cpu: "1"}}}}}}]
  timeline:
    - at: 0s
      insufficientCapacity: {{instanceType: m5.large, capacityType: spot}}
    - at: 10s
      scale: {{deployment: web, replicas: 1}}
"#
    ));
    // Spot is preferred and fails everywhere; the pods are re-planned on on-demand.
    assert_eq!(n(&r, "/activity/launchFailures"), 1.0, "{r:#}");
    assert_eq!(rows(&r), [("m5.large".to_owned(), "on-demand".to_owned())]);
    assert_eq!(never_scheduled(&r), 0);
}
