//! Static NodePools in a disruption pass (upstream's `StaticDrift` and its exclusion of static
//! pools from emptiness and consolidation): drifted nodes are replaced one for one by a
//! NodeClaim from the template, within the Drifted budget and `limits.nodes`, not while the
//! pool scales down, without a scheduling simulation.

use karpenter_cloudprovider::v1::Budget;
use karpenter_disruption::static_pool::{ClaimCounts, StaticPool};
use karpenter_disruption::{Decision, Hold, Reason, validate};
use karpenter_disruption::{compute_commands, compute_pass};
use karpenter_scheduling::labels::{ARCH, DO_NOT_DISRUPT};
use karpenter_scheduling::requirements::Operator;
use karpenter_testing::disruption::*;
use karpenter_testing::requirements::{nsr, reqs};

/// The default pool made static with `replicas`, `limit` and `active` claims; nodes `a`, `b`
/// and `c` each run a pod, `a` and `b` drifted; `idle` is empty.
fn cluster(replicas: i64, limit: Option<i64>, active: i64, budget: &str) -> Cluster {
    let mut w = Cluster::new();
    let s = w.settings(POOL);
    s.is_static = true;
    s.budgets = vec![Budget::nodes(budget)];
    s.static_capacity = Some(StaticPool {
        replicas,
        node_limit: limit,
        claims: ClaimCounts {
            active,
            ..ClaimCounts::default()
        },
        requirements: Default::default(),
    });
    for (n, drifted) in [("a", true), ("b", true), ("c", false)] {
        w.node(n, "large");
        w.pod(n, &format!("{n}-app"), 1_500);
        if drifted {
            w.info(n).provider_drift = Some("AMIDrift".into());
        }
    }
    w.node("idle", "small");
    w
}

#[test]
fn drifted_static_nodes_are_replaced_from_the_template_and_empty_ones_kept() {
    let w = cluster(4, None, 4, "100%");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands.len(), 2, "{:#?}", r.commands);
    for (cmd, node) in r.commands.iter().zip(["a", "b"]) {
        assert_eq!(
            (cmd.reason, cmd.decision),
            (Reason::DRIFTED, Decision::Replace)
        );
        assert_eq!(cmd.node_names(), [node]);
        let [replacement] = cmd.replacements.as_slice() else {
            panic!("one replacement: {cmd:#?}")
        };
        assert_eq!(replacement.node_pool, POOL);
        assert!(replacement.instance_type_options.is_empty());
        assert!(replacement.pods.is_empty());
        // Drift has no validation delay; static drift needs no simulation to validate.
        assert_eq!(validate(cmd, &w.input, w.now), Ok(()));
    }
    // Empty, but a static pool is never consolidated.
    assert_eq!(r.holds("idle").unwrap(), [Hold::StaticNodePool]);
}

#[test]
fn the_drifted_budget_paces_static_drift() {
    let w = cluster(4, None, 4, "1");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    assert_eq!(r.commands[0].node_names(), ["a"]);
    assert_eq!(
        r.holds("b").unwrap(),
        [Hold::Budget {
            reason: Reason::DRIFTED
        }]
    );
}

#[test]
fn limits_nodes_leaves_room_for_some_or_no_replacement() {
    let w = cluster(4, Some(5), 4, "100%");
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    assert_eq!(r.holds("b").unwrap(), [Hold::StaticNodeLimit]);

    let w = cluster(4, Some(4), 4, "100%");
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    // Then consolidation looked at it too, and a static pool is not consolidated.
    assert_eq!(
        r.holds("a").unwrap(),
        [Hold::StaticNodeLimit, Hold::StaticNodePool]
    );
}

#[test]
fn a_static_pool_over_its_replicas_scales_down_before_drift() {
    let w = cluster(3, None, 4, "100%");
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(
        r.holds("a").unwrap(),
        [Hold::StaticScalingDown, Hold::StaticNodePool]
    );
}

#[test]
fn do_not_disrupt_holds_static_drift_unless_a_termination_grace_period_is_set() {
    let mut w = cluster(4, None, 4, "100%");
    w.pod("a", "guarded", 100)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    assert_eq!(
        r.commands
            .iter()
            .map(|c| c.node_names())
            .collect::<Vec<_>>(),
        [["b"]]
    );
    assert!(matches!(
        r.holds("a").unwrap(),
        [Hold::DoNotDisruptPod { .. }]
    ));
    w.info("a").termination_grace_period = Some(60_000);
    assert_eq!(compute_commands(&w.input, w.now).len(), 2);
}

#[test]
fn a_dynamic_pool_is_not_affected() {
    let mut w = cluster(4, None, 4, "100%");
    let s = w.settings(POOL);
    s.is_static = false;
    s.static_capacity = None;
    let r = compute_pass(&w.input, w.now);
    // Emptiness first, as for any dynamic pool.
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    assert_eq!(r.commands[0].reason, Reason::EMPTY);
}

#[test]
fn a_static_node_outside_the_template_requirements_drifts() {
    let mut w = cluster(4, None, 4, "100%");
    for n in ["a", "b"] {
        w.info(n).provider_drift = None;
    }
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    // The template now asks for arm64; every node here is amd64.
    let sp = w.settings(POOL).static_capacity.as_mut().unwrap();
    sp.requirements = reqs(&[nsr(ARCH, Operator::In, &["arm64"])]);
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands.len(), 4, "{:#?}", r.commands);
    assert!(
        r.commands[0]
            .explanation
            .ends_with("drift: RequirementsDrifted"),
        "{}",
        r.commands[0].explanation
    );
}
