//! The hourly lower bound through a whole run: one figure per hour, never above what the run
//! paid, following the load, absent unless asked for, and a pod no plan can place reported
//! rather than silently left out.

use karpenter_simulator::{Files, Report, RunOptions, Scenario, run_scenario};
use std::path::Path;

struct InMemory(&'static str);

impl Files for InMemory {
    fn read_to_string(&self, _: &Path) -> std::io::Result<String> {
        Ok(self.0.to_owned())
    }
}

/// Two hours and a half: 8 pods of 1 cpu, 2 in the second hour, 8 again after; a bare pod
/// asking more cpu than any instance type has.
const SCENARIO: &str = r#"
apiVersion: karpenter-rs/v1alpha1
kind: Scenario
metadata: {name: bound}
spec:
  duration: 150m
  manifests:
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
              - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, namespace: default}
      spec:
        replicas: 8
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec:
            containers: [{name: web, image: web, resources: {requests: {cpu: "1"}}}]
    - apiVersion: v1
      kind: Pod
      metadata: {name: huge, namespace: default}
      spec:
        containers: [{name: huge, image: huge, resources: {requests: {cpu: "100000"}}}]
  timeline:
    - at: 1h
      scale: {deployment: web, replicas: 2}
    - at: 2h
      scale: {deployment: web, replicas: 8}
"#;

fn run(lower_bound: bool) -> Report {
    let files = InMemory(SCENARIO);
    let scenario = Scenario::load(Path::new("bound.yaml"), &files).expect("scenario loads");
    run_scenario(
        &scenario,
        RunOptions {
            optimizer: true,
            lower_bound,
        },
        &files,
        &mut |_| {},
        &mut |_| {},
    )
    .expect("scenario runs")
}

#[test]
fn each_hour_has_a_bound_below_the_runs_cost_and_unplaceable_pods_are_reported() {
    assert!(run(false).lower_bound.is_none());
    let report = run(true);
    let bound = report.lower_bound.expect("asked for");
    let hours: Vec<(f64, f64)> = bound
        .hourly
        .iter()
        .map(|h| (h.start_seconds, h.end_seconds))
        .collect();
    assert_eq!(hours, [(0.0, 3600.0), (3600.0, 7200.0), (7200.0, 9000.0)]);
    let [first, second, third] = [0, 1, 2].map(|i| bound.hourly[i].per_hour);
    assert!(second > 0.0 && second < first, "{:?}", bound.hourly);
    assert!((third - first).abs() < 1e-9, "{:?}", bound.hourly);
    let total = first + second + third / 2.0;
    assert!((bound.total - total).abs() < 1e-9, "{bound:?}");
    assert!(
        (bound.average_per_hour - total / 2.5).abs() < 1e-9,
        "{bound:?}"
    );
    assert!(
        bound.total <= report.cost.total + 1e-9,
        "{bound:?} {:?}",
        report.cost
    );
    assert_eq!(bound.unplaced_pods, 1, "{bound:?}");
    assert_eq!(bound.plans_without_bound, 0, "{bound:?}");
}
