//! Re-pack consolidation: nodes replaced by several cheaper ones that the packing optimiser
//! chooses, where Karpenter's methods (delete, or replace with at most one node, decided on
//! the greedy simulation) find nothing.

use karpenter_cloudprovider::v1::{Budget, ConsolidationPolicy};
use karpenter_disruption::{
    ConsolidationMethod, Decision, DisruptionInput, Hold, PassResult, Reason, RepackOptions,
    ValidationFailure, compute_pass, validate,
};
use karpenter_scheduling::labels::{CAPACITY_TYPE, DO_NOT_DISRUPT, HOSTNAME};
use karpenter_scheduling::model::{InstanceType, WeightedPodAffinityTerm};
use karpenter_scheduling::taints::TaintEffect;
use karpenter_testing::disruption::*;
use karpenter_testing::{InstanceTypeBuilder, taint, term, toleration};
use std::sync::Arc;

/// Two shapes where the big one is dear per core: `big` (8 cores, $0.40/h on demand, $0.16
/// spot) and `half` (4 cores, $0.12/h on demand, $0.05 spot).
fn two_shapes() -> Vec<Arc<InstanceType>> {
    vec![
        InstanceTypeBuilder::new("big", 8, 32)
            .zones(&[ZONE_A])
            .on_demand(0.40)
            .spot(0.16)
            .build(),
        InstanceTypeBuilder::new("half", 4, 16)
            .zones(&[ZONE_A])
            .on_demand(0.12)
            .spot(0.05)
            .build(),
    ]
}

/// `n` `big` nodes bought as `capacity_type`, each with two pods of 3.5 cores: no pod fits
/// another node's free core, one node's pods need a `big` (no cheaper single replacement)
/// and two nodes' pods need two new nodes. Each node's pods fit two `half` nodes for 60 %
/// of its price on demand.
fn fragmented(n: usize, capacity_type: &str) -> Cluster {
    let mut w = Cluster {
        input: DisruptionInput::default(),
        now: 10 * HOUR,
    };
    w.input.cluster.node_pools.clear();
    w.add_pool(POOL, two_shapes(), capacity_type);
    for i in 0..n {
        let node = format!("big-{i}");
        w.node_in(POOL, &node, "big", capacity_type);
        w.pod(&node, &format!("app-{i}-a"), 3500);
        w.pod(&node, &format!("app-{i}-b"), 3500);
    }
    w
}

fn karpenter_only(w: &Cluster) -> PassResult {
    let mut input = w.input.clone();
    input.options.repack = None;
    compute_pass(&input, w.now)
}

#[test]
fn karpenters_methods_leave_the_fragmented_nodes_and_repack_replaces_them() {
    let w = fragmented(3, "on-demand");
    let karpenter = karpenter_only(&w);
    assert!(karpenter.commands.is_empty(), "{:#?}", karpenter.commands);
    assert_eq!(karpenter.holds("big-0").unwrap(), [Hold::NotCheaper]);

    let r = compute_pass(&w.input, w.now);
    let [cmd] = r.commands.as_slice() else {
        panic!("one command expected: {:#?}", r.commands)
    };
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(cmd.consolidation, Some(ConsolidationMethod::Repack));
    assert_eq!(cmd.consolidation_type(), "repack");
    assert_eq!(cmd.node_names(), ["big-0", "big-1", "big-2"]);
    // Six pods of 3.5 cores: one per `half`, $0.72 for $1.20.
    assert_eq!(cmd.replacements.len(), 6);
    for r in &cmd.replacements {
        assert_eq!(r.pods.len(), 1);
        assert!(
            r.instance_type_options
                .iter()
                .all(|o| &*o.name == "half" && &*o.capacity_type == "on-demand")
        );
    }
    assert!((cmd.savings - 0.48).abs() < 1e-9, "{}", cmd.savings);
    assert!(
        cmd.explanation.contains("re-pack: 40.0% cheaper"),
        "{}",
        cmd.explanation
    );
    // The move is reported as scored, approved (the pool is not Balanced).
    let [scored] = r.scored_moves.as_slice() else {
        panic!("{:#?}", r.scored_moves)
    };
    assert_eq!(scored.method, ConsolidationMethod::Repack);
    assert!(scored.approved);
    // It is timed as a method of its own.
    assert!(
        r.evaluations
            .iter()
            .any(|e| e.consolidation_type == "repack")
    );
}

#[test]
fn one_node_may_become_several() {
    let w = fragmented(1, "on-demand");
    let r = compute_pass(&w.input, w.now);
    let [cmd] = r.commands.as_slice() else {
        panic!("{:#?}", r.commands)
    };
    assert_eq!(cmd.node_names(), ["big-0"]);
    assert_eq!(cmd.replacements.len(), 2);
}

#[test]
fn the_threshold_decides_whether_the_saving_is_worth_it() {
    let mut w = fragmented(3, "on-demand");
    for (threshold, acts) in [(0.0, true), (0.39, true), (0.41, false), (0.9, false)] {
        w.input.options.repack = Some(RepackOptions {
            price_improvement_threshold: threshold,
            ..RepackOptions::default()
        });
        let r = compute_pass(&w.input, w.now);
        assert_eq!(!r.commands.is_empty(), acts, "threshold {threshold}");
    }
    assert!(RepackOptions::valid_threshold(0.0));
    assert!(RepackOptions::valid_threshold(0.99));
    for bad in [1.0, -0.01, f64::NAN, f64::INFINITY] {
        assert!(!RepackOptions::valid_threshold(bad), "{bad}");
    }
}

#[test]
fn budgets_do_not_disrupt_and_pdbs_bound_the_set() {
    // A budget of two nodes: the two most wasteful (all equal: by name) are re-packed.
    let mut w = fragmented(4, "on-demand");
    w.settings(POOL).budgets = vec![Budget::nodes("2")];
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-1"]);
    assert_eq!(r.commands[0].replacements.len(), 4);
    // A budget of 0 for Underutilized: nothing.
    w.settings(POOL).budgets = vec![Budget::nodes("0")];
    assert!(compute_pass(&w.input, w.now).commands.is_empty());

    // do-not-disrupt on a node, and on a pod of another: both stay.
    let mut w = fragmented(3, "on-demand");
    w.input.cluster.nodes[0]
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    w.input.cluster.bound_pods[2]
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-2"]);

    // A PDB allowing one eviction over pods on two nodes: one of them goes.
    let mut w = fragmented(3, "on-demand");
    w.pdb("web", "web", 1);
    for i in [0, 2] {
        w.input.cluster.bound_pods[i]
            .labels
            .insert("app".into(), "web".into());
    }
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-2"]);
}

#[test]
fn consolidate_after_holds_candidates_back() {
    let mut w = fragmented(3, "on-demand");
    w.settings(POOL).consolidate_after = Some(600_000);
    w.info("big-1").last_pod_event_at = Some(w.now - 60_000);
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-2"]);
    assert!(matches!(
        r.holds("big-1").unwrap(),
        [Hold::ConsolidateAfter { .. }]
    ));
}

#[test]
fn young_nodes_settle_before_they_are_re_packed() {
    let mut w = fragmented(3, "on-demand");
    // `big-1` was launched nine minutes ago: under the default ten-minute age it stays,
    // the other two are re-packed.
    w.info("big-1").created_at = w.now - 9 * 60_000;
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-2"]);
    // A minute later it is old enough.
    let r = compute_pass(&w.input, w.now + 60_000);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-1", "big-2"]);
    // All three young: no re-pack at all (Karpenter's methods still find nothing).
    for node in ["big-0", "big-2"] {
        w.info(node).created_at = w.now - 60_000;
    }
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    // `0` re-packs nodes of any age.
    w.input.options.repack = Some(RepackOptions {
        min_node_age: 0,
        ..RepackOptions::default()
    });
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-1", "big-2"]);
}

#[test]
fn a_min_score_weighs_the_saving_against_the_evictions() {
    // Re-packing all three nodes saves 40 % of the pool's price and disrupts all of it
    // (every node and pod): score 0.4.
    let mut w = fragmented(3, "on-demand");
    let with_score = |min_score| RepackOptions {
        min_score,
        ..RepackOptions::default()
    };
    w.input.options.repack = Some(with_score(0.3));
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["big-0", "big-1", "big-2"]);
    assert!(r.scored_moves[0].approved);
    // Asking a half refuses it, and every smaller set scores the same: no re-pack, and the
    // refused move is reported.
    w.input.options.repack = Some(with_score(0.5));
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert!(r.scored_moves.iter().all(|m| !m.approved));
    assert!(!r.scored_moves.is_empty());
}

#[test]
fn the_min_node_age_is_range_checked() {
    for ok in [0, 600_000, 86_400_000] {
        assert!(RepackOptions::valid_min_node_age(ok), "{ok}");
    }
    for bad in [-1, 86_400_001] {
        assert!(!RepackOptions::valid_min_node_age(bad), "{bad}");
    }
    for ok in [0.0, 1.0, 100.0] {
        assert!(RepackOptions::valid_min_score(ok), "{ok}");
    }
    for bad in [-0.5, 100.5, f64::NAN] {
        assert!(!RepackOptions::valid_min_score(bad), "{bad}");
    }
}

#[test]
fn spot_nodes_are_replaced_by_spot_only_with_the_gate() {
    // Spot `big` at $0.16 and `half` at $0.05: two halves cost 62.5 % of a big.
    let mut w = fragmented(2, "spot");
    let karpenter = karpenter_only(&w);
    assert!(karpenter.commands.is_empty(), "{:#?}", karpenter.commands);
    // The pool is spot only: without SpotToSpotConsolidation nothing replaces them.
    assert!(compute_pass(&w.input, w.now).commands.is_empty());
    w.input.options.spot_to_spot_consolidation = true;
    let r = compute_pass(&w.input, w.now);
    let cmd = &r.commands[0];
    assert_eq!(cmd.consolidation, Some(ConsolidationMethod::Repack));
    assert_eq!(cmd.replacements.len(), 4);
    assert!(cmd.replacements.iter().all(|r| {
        r.instance_type_options
            .iter()
            .all(|o| &*o.capacity_type == "spot")
    }));
}

#[test]
fn a_spot_and_on_demand_pool_replaces_spot_nodes_on_demand_without_the_gate() {
    // On-demand `half` at $0.12 each against spot `big` at $0.16 each: not cheaper.
    let mut w = fragmented(2, "spot");
    let req = karpenter_testing::nsr(
        CAPACITY_TYPE,
        karpenter_scheduling::requirements::Operator::In,
        &["spot", "on-demand"],
    );
    w.input.cluster.node_pools[0].requirements = karpenter_testing::reqs(&[req]);
    assert!(compute_pass(&w.input, w.now).commands.is_empty());
    // Cheaper on-demand halves ($0.05): the spot nodes go, for on-demand capacity.
    let mut cheap = two_shapes();
    cheap[1] = InstanceTypeBuilder::new("half", 4, 16)
        .zones(&[ZONE_A])
        .on_demand(0.05)
        .spot(0.03)
        .build();
    w.input.cluster.node_pools[0].instance_types = cheap;
    let r = compute_pass(&w.input, w.now);
    let cmd = &r.commands[0];
    assert!(cmd.replacements.iter().all(|r| {
        r.instance_type_options
            .iter()
            .all(|o| &*o.capacity_type == "on-demand")
            && r.requirements
                .get(CAPACITY_TYPE)
                .is_some_and(|q| !q.has("spot"))
    }));
    // With the gate, spot halves (pinned to spot, as upstream pins its replacement).
    w.input.options.spot_to_spot_consolidation = true;
    let r = compute_pass(&w.input, w.now);
    let cmd = &r.commands[0];
    assert!(cmd.replacements.iter().all(|r| {
        r.instance_type_options
            .iter()
            .all(|o| &*o.capacity_type == "spot")
    }));
}

#[test]
fn balanced_pools_score_the_move() {
    let mut w = fragmented(3, "on-demand");
    w.settings(POOL).consolidation_policy = ConsolidationPolicy::Balanced;
    // Every node of the pool goes for 40 % of its cost: score 0.4 < 0.5, rejected.
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    let rejected = r
        .scored_moves
        .iter()
        .rfind(|m| m.method == ConsolidationMethod::Repack)
        .expect("the last rejection is reported");
    assert!(!rejected.approved);
}

#[test]
fn it_waits_while_another_commands_pods_need_a_place() {
    let mut w = fragmented(3, "on-demand");
    w.input.disrupting.insert("big-2".into());
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    // An empty node going away holds no pod: re-packing goes ahead.
    let mut w = fragmented(3, "on-demand");
    w.node_in(POOL, "empty", "half", "on-demand");
    w.input.disrupting.insert("empty".into());
    assert_eq!(compute_pass(&w.input, w.now).commands.len(), 1);
}

#[test]
fn validation_re_simulates_the_same_replacements() {
    let w = fragmented(3, "on-demand");
    let cmd = compute_pass(&w.input, w.now).commands.remove(0);
    let later = w.now + w.input.options.validation_delay_ms;
    assert!(matches!(
        validate(&cmd, &w.input, w.now),
        Err(ValidationFailure::TooEarly { .. })
    ));
    assert_eq!(validate(&cmd, &w.input, later), Ok(()));
    // A pod grew: it and its neighbour now take a `big` (4.5 + 3.5 cores), five new nodes
    // instead of the six planned.
    let mut fresh = w.input.clone();
    fresh.cluster.bound_pods[0].requests.cpu_millis = 4500;
    assert_eq!(
        validate(&cmd, &fresh, later),
        Err(ValidationFailure::Scheduling {
            detail: "5 new nodes needed where the command planned 6".into()
        })
    );
    // The `half` got dearer: the saving fell below the threshold.
    let mut fresh = w.input.clone();
    fresh.cluster.node_pools[0].instance_types[1] = InstanceTypeBuilder::new("half", 4, 16)
        .zones(&[ZONE_A])
        .on_demand(0.19)
        .build();
    assert_eq!(
        validate(&cmd, &fresh, later),
        Err(ValidationFailure::NotCheaper)
    );
    // Re-packing turned off meanwhile.
    let mut fresh = w.input.clone();
    fresh.options.repack = None;
    assert!(matches!(
        validate(&cmd, &fresh, later),
        Err(ValidationFailure::Scheduling { .. })
    ));
}

/// An xlarge ($0.80) with a 5-core and a 3-core pod that prefer separate nodes.
fn apart_pair(w: &mut Cluster, node: &str) {
    w.node(node, "xlarge");
    for (name, cpu) in [("a", 5000), ("b", 3000)] {
        let p = w.pod(node, &format!("{node}-{name}"), cpu);
        p.labels.insert("app".into(), node.into());
        p.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
            weight: 100,
            term: term(HOSTNAME, &[("app", node)]),
        }];
    }
}

#[test]
fn the_next_nodes_of_the_ranking_are_tried_when_the_first_cannot_move() {
    // `pinned` wastes the most (an xlarge for one core) but its pod is pinned to it, and
    // its taint keeps other pods off; with one node a window, the first window is empty once
    // it goes, and the second re-packs `pair` into a large and a medium.
    let mut w = Cluster::new();
    w.node("pinned", "xlarge")
        .taints
        .push(taint("dedicated", "stuck", TaintEffect::NoSchedule));
    let stuck = w.pod("pinned", "stuck", 1000);
    stuck.node_selector.insert(HOSTNAME.into(), "pinned".into());
    stuck.tolerations.push(toleration("dedicated", "stuck"));
    apart_pair(&mut w, "pair");
    w.input.options.repack = Some(RepackOptions {
        max_nodes: 1,
        ..RepackOptions::default()
    });
    let r = compute_pass(&w.input, w.now);
    let [cmd] = r.commands.as_slice() else {
        panic!("{:#?}", r.commands)
    };
    assert_eq!(cmd.node_names(), ["pair"]);
    assert_eq!(cmd.replacements.len(), 2);
}

#[test]
fn a_node_whose_pods_need_two_new_nodes_is_replaced_by_two_cheaper_ones() {
    // An xlarge ($0.80) with a 5-core and a 3-core pod that prefer separate nodes: the
    // greedy simulation gives each a node, which Karpenter's consolidation refuses
    // (`NeedsMultipleNodes`); a large and a medium ($0.60) hold them, 25 % cheaper.
    let mut w = Cluster::new();
    apart_pair(&mut w, "xl");
    let karpenter = karpenter_only(&w);
    assert!(karpenter.commands.is_empty());
    assert_eq!(
        karpenter.holds("xl").unwrap(),
        [Hold::NeedsMultipleNodes { count: 2 }]
    );
    let r = compute_pass(&w.input, w.now);
    let [cmd] = r.commands.as_slice() else {
        panic!("{:#?}", r.commands)
    };
    assert_eq!(cmd.consolidation, Some(ConsolidationMethod::Repack));
    let mut types: Vec<&str> = cmd
        .replacements
        .iter()
        .map(|r| &*r.instance_type_options[0].name)
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["large", "medium"]);
    assert!((cmd.savings - 0.2).abs() < 1e-9);
    // Each replacement keeps only options within 1 + threshold of its cheapest: the large
    // and the medium, never the xlarge it replaces.
    for r in &cmd.replacements {
        let cheapest = r.instance_type_options[0].price;
        assert!(
            r.instance_type_options
                .iter()
                .all(|o| o.price <= cheapest * 1.1 + 1e-12)
        );
    }
}

#[test]
fn nodes_packed_as_cheaply_as_their_pool_allows_cost_no_simulation() {
    // On-demand `half` nodes, each full (two pods of 1.9 cores): their pool cannot launch
    // anything cheaper for them; the types' cheaper spot offerings, which the on-demand pool
    // cannot buy, do not make them look wasteful.
    let mut w = fragmented(0, "on-demand");
    for i in 0..3 {
        let node = format!("half-{i}");
        w.node_in(POOL, &node, "half", "on-demand");
        w.pod(&node, &format!("a-{i}"), 1900);
        w.pod(&node, &format!("b-{i}"), 1900);
    }
    let with = compute_pass(&w.input, w.now);
    let without = karpenter_only(&w);
    assert!(with.commands.is_empty());
    assert_eq!(with.simulations, without.simulations);
    assert!(with.scored_moves.is_empty());
}
