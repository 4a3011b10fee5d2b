//! `examples/node-overlay.yaml`: NodeOverlays change what the simulation launches, and only
//! with the NodeOverlay feature gate on.

use karpenter_simulator::{Disk, Files, Report, RunOptions, Scenario, run_collected};
use std::path::{Path, PathBuf};

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/node-overlay.yaml")
}

fn scenario() -> Scenario {
    Scenario::load(&example_path(), &Disk).expect("scenario loads")
}

fn run(scenario: &Scenario) -> (Report, Vec<String>) {
    let run = run_collected(scenario, RunOptions::OPTIMIZED, &Disk).expect("scenario runs");
    let lines = run.messages();
    (run.report, lines)
}

#[test]
fn with_the_gate_on_overlays_change_the_type_and_add_capacity() {
    let (report, lines) = run(&scenario());
    let types: Vec<(&str, usize)> = report
        .nodes
        .by_type
        .iter()
        .map(|t| (t.instance_type.as_str(), t.launched))
        .collect();
    assert_eq!(types, [("r5a.large", 3)], "{}", lines.join("\n"));
    assert_eq!(report.pods.scheduled, 3);
    assert!(report.pods.never_scheduled.is_empty());
    for name in ["c-and-m-licence-fee", "fuse-device"] {
        assert!(
            lines.contains(&format!("nodeoverlay {name} applied")),
            "{}",
            lines.join("\n")
        );
    }
}

#[test]
fn with_the_gate_off_overlays_are_ignored_and_said_so() {
    let mut off = scenario();
    off.settings.node_overlay = false;
    let (report, lines) = run(&off);
    assert_eq!(report.nodes.launched, 0, "{}", lines.join("\n"));
    assert_eq!(report.pods.never_scheduled.len(), 3);
    assert!(lines.iter().any(|l| {
        l.contains("nodeoverlay fuse-device ignored: the NodeOverlay feature gate is off")
    }));
}

#[test]
fn deleting_an_overlay_restores_the_instance_types_and_reports_conflicts() {
    let text = std::fs::read_to_string(example_path()).unwrap();
    // A same-weight overlay on the same resource conflicts; the name that sorts later wins.
    let conflicting = text.replace(
        "  timeline:\n",
        "    - apiVersion: karpenter.sh/v1alpha1\n      kind: NodeOverlay\n      metadata: {name: a-fuse}\n      spec:\n        requirements: []\n        capacity: {example.com/fuse: \"2\"}\n  timeline:\n    - at: 10s\n      delete: {kind: NodeOverlay, name: fuse-device}\n",
    );
    let virtual_path = example_path().with_file_name("node-overlay-conflict.yaml");
    let files = Overlaid {
        path: virtual_path.clone(),
        text: conflicting,
    };
    let s2 = Scenario::load(&virtual_path, &files).expect("scenario loads");
    let run = run_collected(&s2, RunOptions::OPTIMIZED, &files).expect("scenario runs");
    let (report, lines) = (&run.report, run.messages());
    let joined = lines.join("\n");
    assert!(
        joined.contains(
            "warning: NodeOverlay \"a-fuse\" is not applied: it conflicts with NodeOverlay \"fuse-device\""
        ),
        "{joined}"
    );
    // Once fuse-device is deleted, a-fuse no longer conflicts and is applied.
    assert!(joined.contains("nodeoverlay a-fuse applied"), "{joined}");
    assert_eq!(report.pods.scheduled, 3, "{joined}");
}

/// The disk, except for one scenario file served from memory (so its `file:` paths resolve
/// next to the examples without writing there).
struct Overlaid {
    path: PathBuf,
    text: String,
}

impl Files for Overlaid {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        if path == self.path {
            Ok(self.text.clone())
        } else {
            std::fs::read_to_string(path)
        }
    }
}
