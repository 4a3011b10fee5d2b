//! The launch-failure policy the controller follows (upstream's): a launch error that is
//! neither insufficient capacity nor a NodeClass not ready keeps the NodeClaim, which is
//! launched again, rather than deleting it and planning its pods anew.

use karpenter_simulator::{Disk, RunOptions, Scenario, run_collected};
use std::path::{Path, PathBuf};

/// The quickstart scenario with `event` added before the scale-up, written to a temporary
/// directory (kept alive by the returned guard).
fn quickstart_with(event: &str) -> (tempfile::TempDir, PathBuf) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart.yaml");
    let text = std::fs::read_to_string(&example)
        .unwrap()
        .replace("  timeline:\n", &format!("  timeline:\n{event}"))
        .replace(
            "file: inflate/",
            &format!("file: {}/inflate/", example.parent().unwrap().display()),
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// The log of the quickstart scenario with `event` added.
fn run_quickstart_with(event: &str) -> Vec<String> {
    let (_dir, path) = quickstart_with(event);
    let scenario = Scenario::load(&path, &Disk).unwrap();
    run_collected(&scenario, RunOptions::OPTIMIZED, &Disk)
        .unwrap()
        .messages()
}

fn count(lines: &[String], prefix: &str) -> usize {
    lines.iter().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn a_non_capacity_launch_error_is_retried_on_the_same_claim() {
    let lines = run_quickstart_with(
        "    - at: 10s\n      failLaunches: {count: 2, reason: RequestLimitExceeded}\n",
    );
    let log = lines.join("\n");
    assert_eq!(count(&lines, "failed launching nodeclaim"), 2, "{log}");
    assert!(log.contains("RequestLimitExceeded"), "{log}");
    // One claim, launched at the third attempt: not deleted and planned again.
    assert_eq!(count(&lines, "created nodeclaim"), 1, "{log}");
    assert_eq!(count(&lines, "launched nodeclaim"), 1, "{log}");
}

#[test]
fn fail_launches_needs_a_positive_count() {
    let (_dir, path) = quickstart_with("    - at: 10s\n      failLaunches: {count: 0}\n");
    let err = Scenario::load(&path, &Disk).unwrap_err().to_string();
    assert!(err.contains("failLaunches.count"), "{err}");
}
