//! The consolidation benchmark's workload at a size debug builds run quickly: a uniform
//! cluster whose pods were half deleted. Checks that a pass finds a large, safe move within
//! its simulation budget (timing lives in the criterion bench, not here).

#[path = "fixtures/half_empty.rs"]
mod half_empty;

use half_empty::half_empty_cluster;
use karpenter_disruption::{Decision, Reason, compute_pass};

#[test]
fn half_empty_cluster_consolidates_many_nodes_at_once() {
    let input = half_empty_cluster(40, 5);
    let r = compute_pass(&input, 1);
    assert!(r.simulations <= input.options.max_simulations);
    let cmd = r.commands.first().expect("a consolidation");
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
    // Nodes run at 2.1 of 3.9 cpu: roughly every other node can go.
    assert!(cmd.candidates.len() >= 10, "{}", cmd.explanation);
    assert!(cmd.savings > 0.0);
    if cmd.decision == Decision::Replace {
        assert_eq!(cmd.replacements.len(), 1);
    }
}

/// The benchmark's full size (1,000 nodes, 5,000 pods before half are deleted); slow in
/// debug builds, so opt-in: `cargo test -p karpenter-disruption --test scale -- --ignored`.
#[test]
#[ignore = "full benchmark size; run with --ignored (fast in release)"]
fn thousand_nodes_consolidate() {
    let input = half_empty_cluster(1000, 5);
    let r = compute_pass(&input, 1);
    let cmd = r.commands.first().expect("a consolidation");
    eprintln!(
        "{} simulations; {} candidates; {}",
        r.simulations,
        cmd.candidates.len(),
        cmd.explanation.chars().take(120).collect::<String>()
    );
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
}
