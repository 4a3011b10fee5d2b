//! Scenario tests: hand-built clusters, one behaviour each, after upstream's suites.

use karpenter_cloudprovider::duration::Duration;
use karpenter_cloudprovider::v1::{Budget, ConsolidationPolicy, DisruptionReason};
use karpenter_disruption::{
    Decision, Hold, InterruptionKind, PassResult, Reason, ValidationFailure, compute_commands,
    compute_pass, compute_pass_cached, validate,
};
use karpenter_scheduling::labels::{DO_NOT_DISRUPT, HOSTNAME, INSTANCE_TYPE, ZONE};
use karpenter_scheduling::model::{PodAffinityTerm, WeightedPodAffinityTerm};
use karpenter_scheduling::selector::LabelSelector;
use karpenter_scheduling::solver::SolveCache;
use karpenter_testing::disruption::*;
use karpenter_testing::{on_demand_catalogue, spot_catalogue};

fn holds<'a>(r: &'a PassResult, node: &str) -> &'a [Hold] {
    r.explanations
        .iter()
        .find(|e| e.node == node)
        .map(|e| e.holds.as_slice())
        .unwrap_or_else(|| panic!("no explanation for {node}: {r:#?}"))
}

fn only_command(r: &PassResult) -> &karpenter_disruption::Command {
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    &r.commands[0]
}

#[test]
fn empty_nodes_are_deleted_and_busy_ones_explained() {
    let mut w = Cluster::new();
    w.node("empty-1", "large");
    w.daemon("empty-1", "ds-1");
    w.node("empty-2", "small");
    w.node("busy", "small");
    w.pod("busy", "app", 1500);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.reason, Reason::EMPTY);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.consolidation_type(), "empty");
    // Highest savings first.
    assert_eq!(cmd.node_names(), ["empty-1", "empty-2"]);
    assert!((cmd.savings - 0.5).abs() < 1e-9);
    assert!(cmd.replacements.is_empty());
    assert_eq!(
        holds(&r, "busy"),
        [Hold::PreemptedByEarlierMethod {
            reason: Reason::EMPTY
        }]
    );
    // Every method reports what it could act on, even those that never ran.
    assert_eq!(
        r.eligible,
        [
            (Reason::EMPTY, 2),
            (Reason::DRIFTED, 0),
            (Reason::UNDERUTILIZED, 1)
        ]
        .into()
    );
}

#[test]
fn consolidate_after_delays_emptiness() {
    let mut w = Cluster::new();
    w.settings(POOL).consolidate_after = Some(30 * 60_000);
    w.node("n", "small");
    w.info("n").last_pod_event_at = Some(w.now - 10 * 60_000);
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty());
    assert_eq!(
        holds(&r, "n"),
        [Hold::ConsolidateAfter {
            remaining_ms: 20 * 60_000
        }]
    );
    let later = w.now + 20 * 60_000;
    assert_eq!(compute_commands(&w.input, later).len(), 1);

    w.settings(POOL).consolidate_after = None;
    let r = compute_pass(&w.input, later);
    assert!(r.commands.is_empty());
    assert_eq!(holds(&r, "n"), [Hold::ConsolidationDisabled]);
}

#[test]
fn budgets_cap_count_round_percentages_up_and_count_disrupting_nodes() {
    // (budget, nodes already disrupting, expected deletions) over 10 empty nodes.
    let cases = [
        ("1", 0, 1),
        ("15%", 0, 2),
        ("10%", 0, 1),
        ("0", 0, 0),
        ("3", 1, 2),
        ("3", 3, 0),
        ("100%", 0, 10),
    ];
    for (nodes, disrupting, want) in cases {
        let mut w = Cluster::new();
        w.settings(POOL).budgets = vec![Budget::nodes(nodes)];
        for i in 0..10 {
            w.node(&format!("n{i}"), "small");
        }
        for i in 0..disrupting {
            // Queued nodes are still in the cluster and count in the total.
            w.input.disrupting.insert(format!("n{i}"));
        }
        let r = compute_pass(&w.input, w.now);
        let deleted = r.commands.first().map_or(0, |c| c.candidates.len());
        assert_eq!(deleted, want, "budget {nodes} with {disrupting} disrupting");
        if want < 10 - disrupting {
            assert!(
                r.explanations.iter().any(|e| e.holds
                    == [Hold::Budget {
                        reason: Reason::EMPTY
                    }]),
                "{nodes}: {r:#?}"
            );
        }
    }
}

#[test]
fn every_pass_reports_each_pools_budget_per_reason() {
    let mut w = Cluster::new();
    let mut drift_only = Budget::nodes("20%");
    drift_only.reasons = vec![DisruptionReason::Drifted];
    w.settings(POOL).budgets = vec![Budget::nodes("50%"), drift_only];
    for i in 0..10 {
        w.node(&format!("n{i}"), "small");
        w.pod(&format!("n{i}"), &format!("app-{i}"), 1500);
    }
    w.input.disrupting.insert("n0".into());
    let r = compute_pass(&w.input, w.now);
    let budget = |reason| {
        r.budgets
            .iter()
            .find(|b| b.node_pool == POOL && b.reason == reason)
            .map(|b| (b.allowed, b.disrupting))
    };
    assert_eq!(budget(DisruptionReason::Empty), Some((5, 1)));
    assert_eq!(budget(DisruptionReason::Underutilized), Some((5, 1)));
    assert_eq!(budget(DisruptionReason::Drifted), Some((2, 1)));
    w.settings(POOL).budgets = Vec::new();
    let r = compute_pass(&w.input, w.now);
    assert!(
        r.budgets.iter().all(|b| b.allowed == i32::MAX as u64),
        "no budget: upstream's unbounded value: {:?}",
        r.budgets
    );
}

#[test]
fn scheduled_budget_blocks_only_inside_its_window_and_only_its_reason() {
    let mut w = Cluster::new();
    // 2024-01-01T09:00Z is a Monday.
    let nine = 1_704_099_600_000;
    w.now = nine + 30 * 60_000;
    w.settings(POOL).budgets = vec![
        Budget::nodes("100%"),
        Budget {
            reasons: vec![DisruptionReason::Empty],
            nodes: "0".into(),
            schedule: Some("0 9 * * mon-fri".into()),
            duration: Some(Duration::parse("8h").unwrap()),
        },
    ];
    w.node("n", "small");
    assert!(compute_commands(&w.input, w.now).is_empty());
    assert_eq!(compute_commands(&w.input, nine - 60_000).len(), 1);
    assert_eq!(compute_commands(&w.input, nine + 8 * HOUR).len(), 1);
    // The same window does not limit drift.
    w.info("n").provider_drift = Some("AMIDrift".into());
    w.pod("n", "app", 100);
    let r = compute_commands(&w.input, w.now);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].reason, Reason::DRIFTED);
}

#[test]
fn do_not_disrupt_on_node_or_pod_blocks_graceful_disruption() {
    let mut w = Cluster::new();
    w.node("annotated", "small")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    w.node("pod-protected", "small");
    w.pod("pod-protected", "db", 100)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    w.node("timed", "small");
    let now = w.now;
    let p = w.pod("timed", "batch", 100);
    p.annotations.insert(DO_NOT_DISRUPT.into(), "2h".into());
    p.started_at = Some(now - HOUR);
    w.node("host", "xlarge")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(holds(&r, "annotated"), [Hold::DoNotDisruptNode]);
    assert!(matches!(
        holds(&r, "pod-protected")[0],
        Hold::DoNotDisruptPod { .. }
    ));
    assert!(matches!(
        holds(&r, "timed")[0],
        Hold::DoNotDisruptPod { .. }
    ));
    assert_eq!(r.eligible[&Reason::EMPTY], 0);
    assert_eq!(r.eligible[&Reason::UNDERUTILIZED], 0);
    // Once the duration has elapsed the pod no longer protects its node.
    let later = w.now + HOUR;
    let cmds = compute_commands(&w.input, later);
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].node_names(), ["timed"]);
}

#[test]
fn pdbs_block_nodes_and_cap_multi_node_commands() {
    let mut w = Cluster::new();
    w.node("blocked", "large");
    w.pod("blocked", "web-0", 500)
        .labels
        .insert("app".into(), "web".into());
    w.pdb("web", "web", 0);
    w.node("double", "large");
    let p = w.pod("double", "api-0", 500);
    p.labels.insert("app".into(), "api".into());
    p.labels.insert("tier".into(), "x".into());
    w.pdb("api", "api", 5);
    w.input
        .pdbs
        .push(karpenter_scheduling::pdb::PodDisruptionBudget {
            namespace: "default".into(),
            name: "tier".into(),
            selector: Some(karpenter_scheduling::selector::LabelSelector {
                match_labels: [("tier".to_string(), "x".to_string())].into(),
                match_expressions: vec![],
            }),
            disruptions_allowed: 5,
            ..Default::default()
        });
    w.node("host", "xlarge")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(
        holds(&r, "blocked"),
        [Hold::PdbBlocked {
            pod: karpenter_scheduling::PodKey::new("default", "web-0"),
            pdb: "default/web".into()
        }]
    );
    assert!(matches!(holds(&r, "double")[0], Hold::MultiplePdbs { .. }));

    // Unhealthy pods may be evicted under AlwaysAllow even when none is allowed.
    w.input.pdbs[0].always_allow_unhealthy = true;
    w.input
        .unhealthy_pods
        .insert(karpenter_scheduling::PodKey::new("default", "web-0"));
    let r = compute_pass(&w.input, w.now);
    assert_eq!(only_command(&r).node_names(), ["blocked"]);

    // Three nodes with one pod each under a PDB allowing one eviction: a multi-node command
    // may take only one of them.
    let mut w = Cluster::new();
    for i in 0..3 {
        let n = format!("n{i}");
        w.node(&n, "large");
        w.pod(&n, &format!("web-{i}"), 500)
            .labels
            .insert("app".into(), "web".into());
    }
    w.pdb("web", "web", 1);
    w.node("host", "xlarge")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let cmd = compute_commands(&w.input, w.now);
    assert_eq!(cmd.len(), 1);
    assert_eq!(cmd[0].candidates.len(), 1, "{cmd:#?}");
}

#[test]
fn single_node_delete_when_pods_fit_elsewhere() {
    let mut w = Cluster::new();
    w.node("full", "large");
    w.pod("full", "big", 7800);
    w.node("light", "large");
    w.pod("light", "tiny", 500);
    w.node("spare", "small")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.node_names(), ["light"]);
    assert!((cmd.savings - 0.4).abs() < 1e-9);
    assert_eq!(cmd.consolidation_type(), "single");
    assert_eq!(holds(&r, "full"), [Hold::NotCheaper]);
}

#[test]
fn a_cache_kept_between_passes_sees_relabelled_nodes() {
    let mut w = Cluster::new();
    w.node("light", "large");
    w.pod("light", "tiny", 500)
        .node_selector
        .insert("team".into(), "blue".into());
    let spare = w.node("spare", "large");
    spare.labels.insert("team".into(), "blue".into());
    spare
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let mut cache = SolveCache::new();
    let r = compute_pass_cached(&w.input, w.now, &mut cache);
    assert_eq!(r, compute_pass(&w.input, w.now));
    assert_eq!(only_command(&r).node_names(), ["light"]);

    // The spare node changes team: the pod has nowhere to go, whatever the cache remembers.
    let spare = w.input.cluster.nodes.iter_mut().find(|n| n.name == "spare");
    spare
        .expect("spare")
        .labels
        .insert("team".into(), "green".into());
    let r = compute_pass_cached(&w.input, w.now, &mut cache);
    assert_eq!(r, compute_pass(&w.input, w.now));
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
}

#[test]
fn consolidation_takes_the_single_replacement_the_greedy_simulation_finds() {
    // As Karpenter: the greedy packs the four pods (4.4 cores) on one large node ($0.40)
    // instead of the xlarge and small ($0.90). The optimiser would pack them on two cheaper
    // nodes, which a consolidation (one replacement at most) cannot launch.
    let mut w = Cluster::new();
    w.node("n0", "xlarge");
    for (name, cpu) in [("a", 1500), ("b", 700), ("c", 700)] {
        w.pod("n0", name, cpu);
    }
    w.node("n1", "small");
    w.pod("n1", "d", 1500);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(cmd.node_names(), ["n0", "n1"]);
    assert_eq!(&*cmd.replacements[0].instance_type_options[0].name, "large");
    assert!((cmd.savings - 0.5).abs() < 1e-9);
}

#[test]
fn a_move_needing_two_new_nodes_is_refused() {
    // Two pods that prefer not to share a node: the greedy simulation gives each its own new
    // node, and re-packing cannot join them (a hostname preference pins them). Karpenter's
    // methods alone: re-pack consolidation would replace the node with those two.
    let mut w = Cluster::new();
    w.input.options.repack = None;
    w.node("xl", "xlarge");
    for (name, cpu) in [("a", 5000), ("b", 3000)] {
        let p = w.pod("xl", name, cpu);
        p.labels.insert("app".into(), "web".into());
        p.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
            weight: 100,
            term: PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![],
                }),
                topology_key: HOSTNAME.into(),
                ..PodAffinityTerm::default()
            },
        }];
    }
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(holds(&r, "xl"), [Hold::NeedsMultipleNodes { count: 2 }]);
}

#[test]
fn single_node_replace_with_strictly_cheaper_node() {
    let mut w = Cluster::new();
    w.node("xl", "xlarge");
    w.pod("xl", "a", 1000);
    w.pod("xl", "b", 500);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(cmd.replacements.len(), 1);
    let rep = &cmd.replacements[0];
    assert_eq!(&*rep.instance_type_options[0].name, "small");
    assert!(rep.instance_type_options.iter().all(|o| o.price < 0.8));
    assert!((cmd.savings - 0.7).abs() < 1e-9);
    assert_eq!(rep.pods.len(), 2);
}

#[test]
fn no_consolidation_when_not_cheaper_or_pods_cannot_move() {
    let mut w = Cluster::new();
    w.node("pinned-type", "large");
    w.pod("pinned-type", "needs-large", 500)
        .node_selector
        .insert(INSTANCE_TYPE.into(), "large".into());
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(holds(&r, "pinned-type"), [Hold::NotCheaper]);

    let mut w = Cluster::new();
    w.node("pinned-host", "large");
    w.pod("pinned-host", "local", 500)
        .node_selector
        .insert(HOSTNAME.into(), "pinned-host".into());
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert!(matches!(
        holds(&r, "pinned-host")[0],
        Hold::WouldNotFit { .. }
    ));
}

#[test]
fn when_empty_policy_leaves_underutilized_nodes() {
    let mut w = Cluster::new();
    w.settings(POOL).consolidation_policy = ConsolidationPolicy::WhenEmpty;
    w.node("xl", "xlarge");
    w.pod("xl", "a", 1000);
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty());
    assert_eq!(holds(&r, "xl"), [Hold::WhenEmptyPolicy]);
    assert_eq!(r.eligible[&Reason::UNDERUTILIZED], 0);
}

#[test]
fn multi_node_consolidation_merges_and_goes_beyond_prefix_search() {
    let mut w = Cluster::new();
    // Host with spare room, excluded from disruption.
    w.node("host", "xlarge")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    // Savings-ratio order a, b (1 pod), c (2 pods), d (3 pods). c has a pod that cannot
    // move, so the prefix search stops at [a, b]; d still folds in.
    for (n, pods) in [("a", 1), ("b", 1), ("c", 2), ("d", 3)] {
        w.node(n, "large");
        for i in 0..pods {
            w.pod(n, &format!("{n}-{i}"), 300);
        }
    }
    w.input
        .cluster
        .bound_pods
        .iter_mut()
        .find(|p| &*p.name == "c-0")
        .unwrap()
        .node_selector
        .insert(HOSTNAME.into(), "c".into());
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.node_names(), ["a", "b", "d"]);
    assert!((cmd.savings - 1.2).abs() < 1e-9);
    assert_eq!(cmd.consolidation_type(), "multi");

    // Karpenter's own search (no extension) stops at the prefix.
    w.input.options.extend_multi_node = false;
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.node_names(), ["a", "b"]);
    assert!(cmd.savings < 1.2);
}

#[test]
fn multi_node_replace_filters_out_candidates_own_types() {
    let mut w = Cluster::new();
    // Together they fit one large ($0.40 < $0.50), but a large is one of the candidates'
    // own types at that price: upstream's filter refuses, because deleting the small alone
    // (its pod fits on the large) disrupts less for the same saving.
    w.node("l", "large");
    w.pod("l", "p1", 5000);
    w.node("s", "small");
    w.pod("s", "p2", 1000);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.node_names(), ["s"]);
    assert_eq!(holds(&r, "l"), [Hold::NotCheaper]);
}

#[test]
fn drift_by_hash_requirements_or_provider_replaces_first() {
    // (setup, expected drift in the explanation)
    type Setup = fn(&mut Cluster);
    let cases: [(Setup, &str); 3] = [
        (
            |w| {
                w.settings(POOL).template_hash = Some("new".into());
                w.settings(POOL).hash_version = Some("v3".into());
                w.info("n").template_hash = Some("old".into());
                w.info("n").hash_version = Some("v3".into());
            },
            "NodePoolDrifted",
        ),
        (
            |w| {
                // The pool no longer allows the node's instance type.
                w.input.cluster.node_pools[0].requirements.add(
                    karpenter_scheduling::Requirement::new(
                        INSTANCE_TYPE,
                        karpenter_scheduling::Operator::NotIn,
                        ["large"],
                    )
                    .unwrap(),
                );
            },
            "RequirementsDrifted",
        ),
        (
            |w| w.info("n").provider_drift = Some("AMIDrift".into()),
            "AMIDrift",
        ),
    ];
    for (setup, why) in cases {
        let mut w = Cluster::new();
        w.node("n", "large");
        w.pod("n", "app", 6000);
        w.settings(POOL).consolidate_after = None;
        setup(&mut w);
        // The claim's Drifted condition carries the same reason.
        let claim = w.info("n").node_claim.clone();
        let drifted = karpenter_disruption::candidate::drifted(&w.input);
        assert_eq!(drifted.get(&claim).map(String::as_str), Some(why));
        let r = compute_pass(&w.input, w.now);
        let cmd = only_command(&r);
        assert_eq!(cmd.reason, Reason::DRIFTED, "{why}");
        assert_eq!(cmd.decision, Decision::Replace, "{why}");
        assert_eq!(cmd.replacements.len(), 1);
        assert!(cmd.explanation.contains(why), "{}", cmd.explanation);
        if why == "RequirementsDrifted" {
            assert_eq!(
                &*cmd.replacements[0].instance_type_options[0].name,
                "xlarge"
            );
        }
    }
    // Hash versions that differ are not drift.
    let mut w = Cluster::new();
    w.node("n", "large");
    w.pod("n", "app", 6000);
    w.settings(POOL).template_hash = Some("new".into());
    w.settings(POOL).hash_version = Some("v3".into());
    w.info("n").template_hash = Some("old".into());
    w.info("n").hash_version = Some("v2".into());
    w.settings(POOL).consolidate_after = None;
    assert!(compute_commands(&w.input, w.now).is_empty());
    assert!(karpenter_disruption::candidate::drifted(&w.input).is_empty());
    // A node that may not be disrupted now is still reported drifted.
    w.info("n").hash_version = Some("v3".into());
    w.info("n").nominated = true;
    assert!(compute_commands(&w.input, w.now).is_empty());
    assert_eq!(karpenter_disruption::candidate::drifted(&w.input).len(), 1);
}

#[test]
fn drift_that_cannot_reschedule_is_explained() {
    let mut w = Cluster::new();
    w.node("n", "large");
    w.pod("n", "app", 500);
    w.input.cluster.node_pools[0].requirements.add(
        karpenter_scheduling::Requirement::new(
            ZONE,
            karpenter_scheduling::Operator::In,
            ["zone-b"],
        )
        .unwrap(),
    );
    w.settings(POOL).consolidate_after = None;
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert!(matches!(holds(&r, "n")[0], Hold::WouldNotFit { .. }));
}

#[test]
fn drift_with_termination_grace_period_ignores_pod_blocks() {
    let mut w = Cluster::new();
    w.node("n", "large");
    w.pod("n", "app", 500)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    w.info("n").provider_drift = Some("AMIDrift".into());
    w.settings(POOL).consolidate_after = None;
    assert!(compute_commands(&w.input, w.now).is_empty());
    w.info("n").termination_grace_period = Some(HOUR);
    let cmds = compute_commands(&w.input, w.now);
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].reason, Reason::DRIFTED);
}

#[test]
fn methods_run_in_karpenter_order() {
    let mut w = Cluster::new();
    w.node("drifted", "large");
    w.pod("drifted", "app", 500);
    w.info("drifted").provider_drift = Some("AMIDrift".into());
    w.node("empty", "small");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(only_command(&r).reason, Reason::EMPTY);
    assert_eq!(
        holds(&r, "drifted"),
        [Hold::PreemptedByEarlierMethod {
            reason: Reason::EMPTY
        }]
    );
    w.input.cluster.nodes.retain(|n| n.name != "empty");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(only_command(&r).reason, Reason::DRIFTED);
}

#[test]
fn expiry_and_interruption_are_forceful() {
    let mut w = Cluster::new();
    w.settings(POOL).budgets = vec![Budget::nodes("0")];
    w.node("old", "large")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    w.pod("old", "app", 500);
    w.info("old").expire_after = Some(HOUR);
    w.node("spot", "large");
    w.info("spot").interruption = Some(InterruptionKind::SpotInterruption);
    w.node("rebalance", "large");
    w.pod("rebalance", "x", 500);
    w.info("rebalance").interruption = Some(InterruptionKind::RebalanceRecommendation);
    w.node("young", "large");
    w.pod("young", "y", 500);
    w.info("young").expire_after = Some(100 * HOUR);
    let r = compute_pass(&w.input, w.now);
    let reasons: Vec<(Reason, Vec<&str>)> = r
        .commands
        .iter()
        .map(|c| (c.reason, c.node_names()))
        .collect();
    assert_eq!(
        reasons,
        [
            (Reason::Expired, vec!["old"]),
            (Reason::Interrupted, vec!["spot"])
        ]
    );
    assert!(
        r.commands
            .iter()
            .all(|c| c.forceful && c.decision == Decision::Delete)
    );
    assert!(
        !r.explanations
            .iter()
            .any(|e| e.node == "old" || e.node == "spot")
    );
    // The forcefully removed nodes count against the other nodes' budgets.
    assert_eq!(
        holds(&r, "young"),
        [Hold::Budget {
            reason: Reason::UNDERUTILIZED
        }]
    );
}

/// A queued command keeps an expired node, but not an interrupted one: its instance goes.
#[test]
fn interruption_takes_a_node_a_command_holds() {
    let mut w = Cluster::new();
    w.node("held-spot", "large");
    w.info("held-spot").interruption = Some(InterruptionKind::SpotInterruption);
    w.node("held-old", "large");
    w.info("held-old").expire_after = Some(HOUR);
    w.input.disrupting.insert("held-spot".into());
    w.input.disrupting.insert("held-old".into());
    let r = compute_pass(&w.input, w.now);
    let forceful: Vec<(Reason, Vec<&str>)> = r
        .commands
        .iter()
        .filter(|c| c.forceful)
        .map(|c| (c.reason, c.node_names()))
        .collect();
    assert_eq!(forceful, [(Reason::Interrupted, vec!["held-spot"])]);
}

#[test]
fn spot_to_spot_rules() {
    let build = |types: usize, enabled: bool| {
        let mut w = Cluster::new();
        w.input.cluster.node_pools.clear();
        w.input.node_pools.clear();
        w.add_pool("spot", spot_catalogue(types, ZONE_A), "spot");
        w.input.options.spot_to_spot_consolidation = enabled;
        let last = format!("spot-{:02}", types - 1);
        w.node_in("spot", "big", &last, "spot");
        w.pod("big", "app", 500);
        w
    };
    let w = build(20, false);
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(holds(&r, "big"), [Hold::SpotToSpotDisabled]);

    let w = build(10, true);
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty());
    assert_eq!(
        holds(&r, "big"),
        [Hold::SpotToSpotTooFewOptions { options: 9 }]
    );

    let w = build(20, true);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Replace);
    let opts = &cmd.replacements[0].instance_type_options;
    assert_eq!(opts.len(), 15);
    assert!(opts.iter().all(|o| &*o.capacity_type == "spot"));
    assert_eq!(&*opts[0].name, "spot-00");
}

#[test]
fn non_candidates_are_explained() {
    let mut w = Cluster::new();
    w.node("uninit", "small");
    w.info("uninit").initialized = false;
    w.node("deleting", "small");
    w.info("deleting").deleting = true;
    w.node("nominated", "small");
    w.info("nominated").nominated = true;
    w.node("queued", "small");
    w.input.disrupting.insert("queued".into());
    w.node("static", "small");
    w.input.cluster.nodes.last_mut().unwrap().node_pool = Some("gone".into());
    w.input.cluster.nodes.push(karpenter_scheduling::Node {
        name: "unmanaged".into(),
        ..Default::default()
    });
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(holds(&r, "uninit"), [Hold::NotInitialized]);
    assert_eq!(holds(&r, "deleting"), [Hold::Deleting]);
    assert_eq!(holds(&r, "nominated"), [Hold::Nominated]);
    assert_eq!(holds(&r, "queued"), [Hold::AlreadyDisrupting]);
    assert_eq!(
        holds(&r, "static"),
        [Hold::NodePoolNotFound {
            node_pool: "gone".into()
        }]
    );
    assert_eq!(holds(&r, "unmanaged"), [Hold::NotManaged]);
}

#[test]
fn validation_after_the_delay_rechecks_everything() {
    let mut w = Cluster::new();
    w.node("e", "small");
    let cmds = compute_commands(&w.input, w.now);
    let cmd = &cmds[0];
    assert!(matches!(
        validate(cmd, &w.input, w.now + 1_000),
        Err(ValidationFailure::TooEarly {
            remaining_ms: 14_000
        })
    ));
    let later = w.now + 15_000;
    assert_eq!(validate(cmd, &w.input, later), Ok(()));
    // Drift has no validation delay (upstream's drift method has no validator).
    let mut drift = cmd.clone();
    drift.reason = Reason::DRIFTED;
    assert!(!matches!(
        validate(&drift, &w.input, w.now + 1_000),
        Err(ValidationFailure::TooEarly { .. })
    ));
    // A pod arrived: no longer empty.
    let mut fresh = w.input.clone();
    fresh.cluster.bound_pods.push(karpenter_scheduling::Pod {
        namespace: "default".into(),
        name: "new".into(),
        node_name: Some("e".into()),
        ..Default::default()
    });
    assert!(matches!(
        validate(cmd, &fresh, later),
        Err(ValidationFailure::NotCandidate { .. })
    ));
    // The budget closed.
    let mut fresh = w.input.clone();
    fresh.node_pools.get_mut(POOL).unwrap().budgets = vec![Budget::nodes("0")];
    assert!(matches!(
        validate(cmd, &fresh, later),
        Err(ValidationFailure::Budget { .. })
    ));
    // Node gone.
    let mut fresh = w.input.clone();
    fresh.cluster.nodes.clear();
    assert!(matches!(
        validate(cmd, &fresh, later),
        Err(ValidationFailure::NodeGone { .. })
    ));
}

#[test]
fn validation_of_a_replacement_checks_it_is_still_needed_and_cheaper() {
    let mut w = Cluster::new();
    w.node("xl", "xlarge");
    w.pod("xl", "a", 1000);
    let cmd = compute_commands(&w.input, w.now).remove(0);
    assert_eq!(cmd.decision, Decision::Replace);
    let later = w.now + 15_000;
    assert_eq!(validate(&cmd, &w.input, later), Ok(()));
    // Capacity appeared: a delete is now possible, so the replacement is stale.
    let mut fresh = w.input.clone();
    let mut extra = Cluster::new();
    extra
        .node("spare", "large")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    fresh.cluster.nodes.extend(extra.input.cluster.nodes);
    fresh.nodes.extend(extra.input.nodes);
    assert!(matches!(
        validate(&cmd, &fresh, later),
        Err(ValidationFailure::Scheduling { .. })
    ));
    // The pod grew: the planned small no longer fits.
    let mut fresh = w.input.clone();
    fresh.cluster.bound_pods[0].requests.cpu_millis = 3000;
    assert!(validate(&cmd, &fresh, later).is_err());
}

#[test]
fn work_budget_limits_simulations_and_explains_the_rest() {
    let mut w = Cluster::new();
    for i in 0..4 {
        let n = format!("x{i}");
        w.node(&n, "xlarge");
        w.pod(&n, &format!("p{i}"), 1_000)
            .node_selector
            .insert(HOSTNAME.into(), n.clone());
    }
    w.input.options.max_simulations = 2;
    // Karpenter's methods alone (re-packing has an allowance of its own).
    w.input.options.repack = None;
    let r = compute_pass(&w.input, w.now);
    assert!(r.simulations <= 2);
    assert!(
        !r.consolidation_timeouts.is_empty(),
        "a method stopped on the budget: {:?}",
        r.consolidation_timeouts
    );
    assert!(
        r.explanations
            .iter()
            .any(|e| e.holds.contains(&Hold::NotEvaluated)),
        "{r:#?}"
    );
}

#[test]
fn a_pass_within_its_budget_reports_no_timeout() {
    let mut w = Cluster::new();
    w.node("full", "large");
    w.pod("full", "big", 7800);
    w.node("light", "large");
    w.pod("light", "tiny", 500);
    let r = compute_pass(&w.input, w.now);
    assert!(
        r.consolidation_timeouts.is_empty(),
        "{:?}",
        r.consolidation_timeouts
    );
}

#[test]
fn passes_are_deterministic() {
    let mut w = Cluster::new();
    for i in 0..6 {
        let n = format!("n{i}");
        w.node(&n, if i % 2 == 0 { "large" } else { "medium" });
        w.pod(&n, &format!("p{i}"), 300 * (i + 1));
    }
    let a = compute_pass(&w.input, w.now);
    let b = compute_pass(&w.input, w.now);
    assert_eq!(a, b);
    // Input order does not matter.
    let mut shuffled = w.input.clone();
    shuffled.cluster.nodes.reverse();
    shuffled.cluster.bound_pods.reverse();
    assert_eq!(compute_pass(&shuffled, w.now).commands, a.commands);
}

/// Two nodes of the cheapest type, no cheaper replacement: the only move is to delete `n1`
/// and put its pod on `n0`, which Karpenter v1.14 blocks while `n0` is inside its
/// consolidateAfter window (upstream: "should not consolidate pods onto a destination node
/// that is under its consolidateAfter window").
fn two_cheapest_nodes_one_recently_busy() -> Cluster {
    let mut w = Cluster::new();
    w.settings(POOL).consolidate_after = Some(60_000);
    w.node("n0", "small");
    w.pod("n0", "a", 300);
    w.pod("n0", "b", 300);
    // n0 took a pod 30 s ago; n1's window passed long ago, so only n1 is a candidate.
    w.info("n0").last_pod_event_at = Some(w.now - 30_000);
    w.node("n1", "small");
    w.pod("n1", "c", 300);
    w.info("n1").last_pod_event_at = Some(w.now - 10 * 60_000);
    w
}

#[test]
fn moved_pods_do_not_land_on_a_destination_under_consolidate_after() {
    let w = two_cheapest_nodes_one_recently_busy();
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(
        holds(&r, "n0"),
        [Hold::ConsolidateAfter {
            remaining_ms: 30_000
        }]
    );
    // c would need a new node as dear as n1.
    assert_eq!(holds(&r, "n1"), [Hold::NotCheaper]);

    // Once n0's window has passed, n1 is deleted and c moves onto n0.
    let later = w.now + 30_000;
    let r = compute_pass(&w.input, later);
    let cmd = only_command(&r);
    assert_eq!(cmd.reason, Reason::UNDERUTILIZED);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.node_names(), ["n1"]);
}

#[test]
fn validation_re_simulates_with_destinations_under_consolidate_after() {
    let w = two_cheapest_nodes_one_recently_busy();
    let at = w.now + 30_000;
    let cmd = compute_commands(&w.input, at).remove(0);
    assert_eq!(cmd.node_names(), ["n1"]);
    let later = at + 15_000;
    assert_eq!(validate(&cmd, &w.input, later), Ok(()));
    // n0 took a pod meanwhile: its window runs again and c can no longer go there.
    let mut fresh = w.input.clone();
    fresh.nodes.get_mut("n0").unwrap().last_pod_event_at = Some(later - 1_000);
    assert!(
        matches!(
            validate(&cmd, &fresh, later),
            Err(ValidationFailure::Scheduling { .. })
        ),
        "{:?}",
        validate(&cmd, &fresh, later)
    );
}

#[test]
fn drift_still_moves_pods_onto_a_destination_under_consolidate_after() {
    // Upstream enforces the destination window in consolidation simulations only.
    let mut w = two_cheapest_nodes_one_recently_busy();
    w.info("n1").provider_drift = Some("Test".into());
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.reason, Reason::DRIFTED);
    assert_eq!(cmd.node_names(), ["n1"]);
    // c fits on n0: no replacement.
    assert!(cmd.replacements.is_empty(), "{:#?}", cmd.replacements);
}

#[test]
fn a_destination_whose_consolidate_after_is_never_still_receives_moved_pods() {
    // Upstream: "should consolidate pods onto a destination node with consolidateAfter set
    // to Never". `Never` keeps the node from being a candidate, not from being a destination.
    let mut w = Cluster::new();
    w.add_pool("keep", on_demand_catalogue(ZONE_A), "on-demand");
    w.settings("keep").consolidate_after = None;
    w.node_in("keep", "dest", "small", "on-demand");
    // It just took a pod: were Never a window, it would be inside it.
    w.info("dest").last_pod_event_at = Some(w.now);
    w.node("src", "small");
    w.pod("src", "a", 300);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Delete);
    assert_eq!(cmd.node_names(), ["src"]);
    assert_eq!(holds(&r, "dest"), [Hold::ConsolidationDisabled]);
}

#[test]
fn a_timed_pass_reports_each_method_it_ran_until_one_decides() {
    use std::cell::Cell;
    let runs = |w: &Cluster| {
        // A clock that advances one second per read: each method's time is the reads it spans.
        let tick = Cell::new(0.0);
        let clock = || {
            tick.set(tick.get() + 1.0);
            tick.get()
        };
        let r = karpenter_disruption::compute_pass_timed(
            &w.input,
            w.now,
            &mut SolveCache::new(),
            &clock,
        );
        r.evaluations
            .iter()
            .map(|e| (e.reason, e.consolidation_type.clone(), e.seconds))
            .collect::<Vec<_>>()
    };
    let mut empty = Cluster::new();
    empty.node("empty", "large");
    assert_eq!(runs(&empty), [(Reason::EMPTY, "empty".into(), 1.0)]);

    let mut w = Cluster::new();
    w.node("full", "large");
    w.pod("full", "big", 7800);
    w.node("light", "large");
    w.pod("light", "tiny", 500);
    let got = runs(&w);
    let labels: Vec<_> = got.iter().map(|(r, t, _)| (*r, t.as_str())).collect();
    assert_eq!(
        labels,
        [
            (Reason::EMPTY, "empty"),
            (Reason::DRIFTED, ""),
            (Reason::DRIFTED, ""),
            (Reason::UNDERUTILIZED, "multi"),
            (Reason::UNDERUTILIZED, "single"),
        ],
        "static drift and drift are both drift methods, as upstream labels them"
    );
    assert!(got.iter().all(|(_, _, s)| *s == 1.0), "{got:?}");
    assert!(
        compute_pass(&w.input, w.now)
            .evaluations
            .iter()
            .all(|e| e.seconds == 0.0),
        "without a clock nothing is timed"
    );
}

/// Upstream's `HasBufferPods`: a node whose spare capacity the provisioner gave a
/// CapacityBuffer is not empty, and no replacement is cheaper than what the buffer needs.
#[test]
fn a_node_holding_a_buffers_room_is_not_empty() {
    let mut w = Cluster::new();
    w.node("spare", "large");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(only_command(&r).reason, Reason::EMPTY);

    w.buffer_pod("headroom", 1, 6000, Some("spare"));
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    let h = holds(&r, "spare");
    assert_eq!(h[0], Hold::BufferPods { count: 1 });
    assert_eq!(
        h[0].event(),
        Some((
            "Unconsolidatable",
            "node has buffer pods (1 CapacityBuffer virtual pod(s))".to_owned()
        ))
    );
    assert!(h.contains(&Hold::NotCheaper), "{h:?}");

    // A buffer whose room is on another node leaves this one empty.
    let mut w = Cluster::new();
    w.node("spare", "large");
    w.node("other", "large");
    w.buffer_pod("headroom", 1, 6000, Some("other"));
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(
        (cmd.reason, cmd.node_names()),
        (Reason::EMPTY, vec!["spare"])
    );
}

/// Consolidation's simulation places the buffers' virtual pods too: a node is not replaced by
/// one too small to keep the buffer's room (upstream's "undersized replacements").
#[test]
fn consolidation_keeps_room_for_capacity_buffers() {
    let mut w = Cluster::new();
    w.node("a", "large");
    w.pod("a", "app", 1000);
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(
        cmd.replacements[0].instance_type_options[0].name.as_ref(),
        "small"
    );

    w.buffer_pod("headroom", 1, 6000, Some("a"));
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);

    // A smaller buffer fits the cheaper replacement alongside the pod, and goes with it.
    let mut w = Cluster::new();
    w.node("a", "large");
    w.pod("a", "app", 1000);
    w.buffer_pod("headroom", 1, 2000, Some("a"));
    let r = compute_pass(&w.input, w.now);
    let cmd = only_command(&r);
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(
        cmd.replacements[0].instance_type_options[0].name.as_ref(),
        "medium"
    );
    // A buffer that fits nowhere (no instance type holds it) does not block the move.
    let mut w = Cluster::new();
    w.node("a", "large");
    w.pod("a", "app", 1000);
    w.buffer_pod("huge", 1, 64_000, None);
    let r = compute_pass(&w.input, w.now);
    assert_eq!(only_command(&r).decision, Decision::Replace);
}

/// An emptiness command is abandoned at validation when the node has since become a
/// buffer's room.
#[test]
fn emptiness_validation_sees_new_buffer_room() {
    let mut w = Cluster::new();
    w.node("spare", "large");
    let cmd = compute_pass(&w.input, w.now).commands.remove(0);
    let due = cmd.validation_due(w.input.options.validation_delay_ms);
    assert_eq!(validate(&cmd, &w.input, due), Ok(()));
    w.buffer_pod("headroom", 1, 6000, Some("spare"));
    assert_eq!(
        validate(&cmd, &w.input, due),
        Err(ValidationFailure::NotCandidate {
            node: "spare".into(),
            hold: Hold::BufferPods { count: 1 },
        })
    );
}
