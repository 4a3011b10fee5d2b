//! Static NodePools. With the StaticCapacity gate on, a pool keeps `replicas` nodes from its
//! template, follows a change of `replicas` both ways, is never consolidated (its nodes stay
//! empty), has a drifted node replaced from the template, takes no pending pods, and is not
//! named as ignored. With the gate off (Karpenter's
//! default) it gets no nodes, still takes no pods, and `spec.replicas` is named in the decision
//! log as a field not acted on.

use karpenter_simulator::{Disk, RunOptions, Scenario, run_collected};

const SCENARIO: &str = r#"
apiVersion: karpenter-rs/v1alpha1
kind: Scenario
metadata: {name: static-capacity}
spec:
  duration: 12m
  settings:
    staticCapacity: true
  manifests:
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: fixed}
      spec:
        replicas: 2
        template:
          metadata: {labels: {team: batch}}
          spec:
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
              - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
            taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: dynamic}
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
  timeline:
    - at: 3m
      updateNodePool: {name: fixed, patch: {spec: {replicas: 3}}}
    - at: 6m
      updateNodePool: {name: fixed, patch: {spec: {replicas: 1}}}
    - at: 8m
      updateNodePool: {name: fixed, patch: {spec: {template: {metadata: {labels: {team: stream}}}}}}
"#;

fn run(text: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).unwrap();
    let scenario = Scenario::load(&path, &Disk).unwrap();
    run_collected(&scenario, RunOptions::OPTIMIZED, &Disk)
        .unwrap()
        .messages()
}

fn with<'a>(lines: &'a [String], needle: &str) -> Vec<&'a String> {
    lines.iter().filter(|l| l.contains(needle)).collect()
}

#[test]
fn a_static_pool_is_kept_at_its_replicas_and_never_consolidated() {
    let lines = run(SCENARIO);
    if std::env::var_os("SHOW_LOG").is_some() {
        eprintln!("{}", lines.join("\n"));
    }
    assert!(with(&lines, "is not acted on").is_empty(), "{lines:#?}");
    let scaled = with(&lines, "static nodepool fixed:");
    let expected = [
        "static nodepool fixed: 0 of 2 replica(s); creating 2 nodeclaim(s) [fixed-",
        "static nodepool fixed: 2 of 3 replica(s); creating 1 nodeclaim(s) [fixed-",
        "static nodepool fixed: 3 of 1 replica(s); deleting 2 nodeclaim(s) [fixed-",
    ];
    assert_eq!(scaled.len(), expected.len(), "{lines:#?}");
    for (line, prefix) in scaled.iter().zip(expected) {
        assert!(line.starts_with(prefix), "{line} is not {prefix}…");
    }
    // Launched from the template: the cheapest type its requirements allow.
    let launched = with(&lines, "launched nodeclaim fixed-");
    assert_eq!(launched.len(), 4, "{lines:#?}");
    assert!(
        launched
            .iter()
            .all(|l| l.contains("instance-type m5.large")),
        "{launched:#?}"
    );
    // The template changed at 8m: the one node left drifts and is replaced one for one, the
    // replacement first.
    let drift = with(&lines, "via replace, reason Drifted");
    assert_eq!(drift.len(), 1, "{lines:#?}");
    assert!(
        drift[0].contains("replacing with 1 node(s) from the NodePool's template"),
        "{drift:#?}"
    );
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    assert!(at("replacement(s) initialized") < at("(reason Drifted)"));
    // The web pods do not tolerate the pool's taint and the pool takes no pending pods:
    // every claim created for pods is the dynamic pool's.
    let for_pods: Vec<_> = with(&lines, "created nodeclaim")
        .into_iter()
        .filter(|l| !l.contains(" 0 pod(s)"))
        .collect();
    assert!(!for_pods.is_empty(), "{lines:#?}");
    assert!(
        for_pods.iter().all(|l| l.contains("nodepool dynamic")),
        "{for_pods:#?}"
    );
    // Empty for ten minutes, yet never consolidated: only the scale-down removes nodes.
    let disrupted: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("fixed-") && (l.contains("Empty") || l.contains("Underutilized")))
        .collect();
    assert!(disrupted.is_empty(), "{disrupted:#?}");
}

#[test]
fn without_the_gate_the_same_pool_gets_no_nodes() {
    let lines = run(&SCENARIO.replace("staticCapacity: true", "staticCapacity: false"));
    assert!(
        with(&lines, "static nodepool fixed").is_empty(),
        "{lines:#?}"
    );
    assert!(
        with(&lines, "launched nodeclaim fixed-").is_empty(),
        "{lines:#?}"
    );
    assert_eq!(
        with(
            &lines,
            "warning: nodepool fixed: spec.replicas is not acted on"
        )
        .len(),
        4,
        "named when applied and at each update: {lines:#?}"
    );
}
