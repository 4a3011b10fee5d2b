//! `spec.settings.schedulerConfig` (Karpenter's SCHEDULER_CONFIG): pods that declare no
//! topology spread constraint are planned with the default ones, each with the selector of
//! the Service and workload that select it, by the simulated provisioner and kube-scheduler.

use karpenter_simulator::{Disk, RunOptions, Scenario, run_collected};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/default-spread.yaml")
}

/// The zones of the nodes launched when the example runs with its `settings` replaced by
/// `settings` (`None`: as bundled).
fn launched_zones(settings: Option<&str>) -> Vec<String> {
    let mut text = std::fs::read_to_string(example()).unwrap();
    if let Some(settings) = settings {
        let start = text.find("  settings:").unwrap();
        let end = text.find("  manifests:").unwrap();
        text.replace_range(start..end, settings);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).unwrap();
    let scenario = Scenario::load(&path, &Disk).unwrap();
    let lines = run_collected(&scenario, RunOptions::OPTIMIZED, &Disk)
        .unwrap()
        .log;
    let zones: Vec<String> = lines
        .iter()
        .filter(|l| l.message.starts_with("launched nodeclaim"))
        .filter_map(|l| {
            let rest = l.message.split(", zone ").nth(1)?;
            Some(rest.split(',').next()?.to_owned())
        })
        .collect();
    assert!(!zones.is_empty(), "{lines:#?}");
    zones
}

#[test]
fn default_constraints_spread_the_web_pods_over_every_zone() {
    let zones = launched_zones(None);
    let distinct: BTreeSet<&String> = zones.iter().collect();
    assert_eq!(distinct.len(), 3, "{zones:?}");
    // Without the setting the six small pods share one node.
    assert_eq!(launched_zones(Some("")).len(), 1);
    // A KubeSchedulerConfiguration with List defaulting does the same.
    let kube_scheduler = "  settings:\n    schedulerConfig: |\n      \
        apiVersion: kubescheduler.config.k8s.io/v1\n      kind: KubeSchedulerConfiguration\n      \
        profiles:\n      - pluginConfig:\n        - name: PodTopologySpread\n          \
        args:\n            defaultingType: List\n            defaultConstraints:\n            \
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";
    let zones = launched_zones(Some(kube_scheduler));
    assert_eq!(zones.iter().collect::<BTreeSet<_>>().len(), 3, "{zones:?}");
}

#[test]
fn an_invalid_scheduler_config_names_the_field() {
    let text = std::fs::read_to_string(example())
        .unwrap()
        .replace("maxSkew: 1", "maxSkew: 0");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).unwrap();
    let err = Scenario::load(&path, &Disk).unwrap_err().to_string();
    assert!(
        err.contains("spec.settings.schedulerConfig")
            && err.contains(
                "podTopologySpread.defaultConstraints[0].maxSkew: must be greater than 0"
            ),
        "{err}"
    );
}
