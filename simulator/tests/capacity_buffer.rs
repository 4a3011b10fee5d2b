//! CapacityBuffers in the simulator (the `capacityBuffer` setting, Karpenter's
//! `CapacityBuffer` gate): headroom launched before any workload, used at once by a burst,
//! refilled behind it, kept from emptiness and consolidation while the buffer exists, and
//! released when it is deleted; a `scalableRef` buffer follows its workload's scaling; with
//! the gate off the buffer is named as ignored and the burst waits for nodes.

use karpenter_simulator::{Disk, LogLine, Report, Run, RunOptions, Scenario, run_collected};
use std::path::PathBuf;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/capacity-buffer.yaml")
}

fn run_text(text: &str) -> Result<(Report, Vec<LogLine>), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).unwrap();
    let scenario = Scenario::load(&path, &Disk).map_err(|e| e.to_string())?;
    let Run { report, log: lines } =
        run_collected(&scenario, RunOptions::OPTIMIZED, &Disk).map_err(|e| e.to_string())?;
    if std::env::var_os("SHOW_LOG").is_some() {
        for l in &lines {
            eprintln!("{:>6} {}", l.at / 1000, l.message);
        }
    }
    Ok((report, lines))
}

fn with<'a>(lines: &'a [LogLine], needle: &str) -> Vec<&'a LogLine> {
    lines
        .iter()
        .filter(|l| l.message.contains(needle))
        .collect()
}

fn first_at(lines: &[LogLine], needle: &str) -> i64 {
    lines
        .iter()
        .find(|l| l.message.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}"))
        .at
}

#[test]
fn a_buffer_keeps_headroom_that_a_burst_uses_at_once() {
    let text = std::fs::read_to_string(example()).unwrap();
    let (r, lines) = run_text(&text).unwrap();
    // The burst's three pods were bound the moment they were created.
    assert_eq!(r.pods.scheduled, 3);
    assert_eq!(
        r.pods.pending_seconds.max, 0.0,
        "{:?}",
        r.pods.pending_seconds
    );
    // Room launched before any workload, and again behind the burst.
    let created = with(&lines, "created nodeclaim");
    let at: Vec<i64> = created.iter().map(|l| l.at).collect();
    assert_eq!(at.len(), 2, "{created:#?}");
    assert!(
        at[0] < 60_000 && (300_000..310_000).contains(&at[1]),
        "{at:?}"
    );
    let fits = with(
        &lines,
        "capacitybuffer default/headroom: 3 of 3 virtual pod(s) fit",
    );
    assert_eq!(fits.len(), 2, "{lines:#?}");
    assert!(fits[1].at > 300_000);
    // No node is disrupted while the buffer exists; its empty room goes once it is deleted.
    let deleted = first_at(&lines, "deleted CapacityBuffer headroom");
    let disrupted = with(&lines, "disrupting node(s)");
    assert!(!disrupted.is_empty(), "{lines:#?}");
    assert!(disrupted.iter().all(|l| l.at > deleted), "{disrupted:#?}");
    assert_eq!(r.nodes.at_end, 1);
}

#[test]
fn with_the_gate_off_the_buffer_is_named_and_the_burst_waits_for_nodes() {
    let text = std::fs::read_to_string(example())
        .unwrap()
        .replace("capacityBuffer: true", "capacityBuffer: false");
    let (r, lines) = run_text(&text).unwrap();
    assert_eq!(
        with(&lines, "ignored: the CapacityBuffer feature gate is off").len(),
        1,
        "{lines:#?}"
    );
    assert!(
        with(&lines, "created nodeclaim")
            .iter()
            .all(|l| l.at >= 300_000)
    );
    assert!(
        r.pods.pending_seconds.max >= 30.0,
        "{:?}",
        r.pods.pending_seconds
    );
}

const SCALABLE: &str = r#"
apiVersion: karpenter-rs/v1alpha1
kind: Scenario
metadata: {name: scalable}
spec:
  duration: 12m
  settings: {capacityBuffer: true}
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
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, namespace: default}
      spec:
        replicas: 10
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec:
            containers:
              - {name: web, image: web, resources: {requests: {cpu: "1"}}}
    - apiVersion: autoscaling.x-k8s.io/v1beta1
      kind: CapacityBuffer
      metadata: {name: web-headroom, namespace: default}
      spec:
        scalableRef: {apiGroup: apps, kind: Deployment, name: web}
        percentage: 20
  timeline:
    - at: 5m
      scale: {deployment: web, replicas: 20}
    - at: 8m
      delete: {kind: Deployment, name: web}
"#;

#[test]
fn a_scalable_ref_buffer_follows_its_workload() {
    let (_, lines) = run_text(SCALABLE).unwrap();
    let ready: Vec<(i64, &str)> = with(&lines, "capacitybuffer default/web-headroom is")
        .iter()
        .map(|l| (l.at, l.message.as_str()))
        .collect();
    assert_eq!(ready.len(), 3, "{ready:#?}");
    assert!(ready[0].1.ends_with("ready for provisioning: 2 chunk(s)"));
    assert!(ready[1].1.ends_with("ready for provisioning: 4 chunk(s)"));
    assert_eq!(ready[1].0, 300_000);
    assert!(
        ready[2].1.ends_with(
            "not ready for provisioning (ScalableRefNotFound): deployments.apps \"web\" not found"
        ),
        "{ready:#?}"
    );
}

#[test]
fn invalid_buffers_are_refused_with_the_field() {
    let base = SCALABLE.replace("  timeline:\n    - at: 5m\n      scale: {deployment: web, replicas: 20}\n    - at: 8m\n      delete: {kind: Deployment, name: web}\n", "");
    let err = run_text(&base.replace(
        "scalableRef: {apiGroup: apps, kind: Deployment, name: web}\n        percentage: 20",
        "podTemplateRef: {name: chunk}",
    ))
    .unwrap_err();
    assert!(
        err.contains("(document 1, CapacityBuffer default/web-headroom): field spec:"),
        "{err}"
    );
    assert!(
        err.contains("If podTemplateRef is set, replicas or limits must also be set"),
        "{err}"
    );
    let err = run_text(&base.replace(
        "autoscaling.x-k8s.io/v1beta1",
        "autoscaling.x-k8s.io/v1alpha1",
    ))
    .unwrap_err();
    assert!(err.contains("field apiVersion"), "{err}");
    assert!(
        err.contains("CapacityBuffer must be autoscaling.x-k8s.io/v1beta1"),
        "{err}"
    );
}
