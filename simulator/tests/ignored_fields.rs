//! Fields a scenario's manifests set that karpenter-rs does not act on are named in the
//! decision log when the object is applied, and a static NodePool takes no pods.

use karpenter_simulator::{Files, LogLine, RunOptions, Scenario, run_scenario};
use std::path::Path;

struct Disk;

impl Files for Disk {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

const SCENARIO: &str = r#"
apiVersion: karpenter-rs/v1alpha1
kind: Scenario
metadata: {name: static-pool}
spec:
  duration: 5m
  manifests:
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: aaa-static}
      spec:
        replicas: 2
        template:
          spec:
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
            requirements: []
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: zzz-dynamic}
      spec:
        template:
          spec:
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
            requirements: []
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, namespace: default}
      spec:
        replicas: 2
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec:
            containers:
              - name: web
                image: pause
                resources: {requests: {cpu: "1"}}
"#;

#[test]
fn a_static_pool_is_named_in_the_log_and_takes_no_pods() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, SCENARIO).unwrap();
    let scenario = Scenario::load(&path, &Disk).unwrap();
    let mut lines: Vec<LogLine> = Vec::new();
    run_scenario(
        &scenario,
        RunOptions { optimizer: true },
        &Disk,
        &mut |l: &LogLine| lines.push(l.clone()),
        &mut |_| {},
    )
    .unwrap();
    let text: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    assert!(
        text.iter().any(|l| l.starts_with(
            "warning: nodepool aaa-static: spec.replicas is not acted on: static NodePools"
        )),
        "{text:#?}"
    );
    let created: Vec<&&str> = text
        .iter()
        .filter(|l| l.starts_with("created nodeclaim"))
        .collect();
    assert!(!created.is_empty(), "{text:#?}");
    assert!(
        created.iter().all(|l| l.contains("nodepool zzz-dynamic")),
        "only the dynamic pool launches: {created:#?}"
    );
}
