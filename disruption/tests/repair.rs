//! Node repair as a disruption method (Karpenter v1.15): ordered before every other method,
//! paced by the `Unhealthy` budget, one node per pass by repair score, its replacement
//! launched first, and the exceptions upstream makes for it.

use karpenter_cloudprovider::v1::{Budget, DisruptionReason};
use karpenter_disruption::{Decision, Hold, PassResult, Reason, RepairNeed, compute_pass};
use karpenter_scheduling::labels::DO_NOT_DISRUPT;
use karpenter_testing::disruption::*;

fn holds<'a>(r: &'a PassResult, node: &str) -> &'a [Hold] {
    r.explanations
        .iter()
        .find(|e| e.node == node)
        .map(|e| e.holds.as_slice())
        .unwrap_or_else(|| panic!("no explanation for {node}: {r:#?}"))
}

/// A cluster with node repair on, an empty node `idle` (emptiness would take it) and the
/// busy nodes `sick` (unhealthy, score `score`) and `well`.
fn cluster(score: f64) -> Cluster {
    let mut w = Cluster::new();
    w.input.options.node_repair = true;
    w.node("idle", "large");
    for name in ["sick", "well"] {
        w.node(name, "large");
        w.pod(name, &format!("{name}-app"), 1500);
        w.info(name).unhealthy = name == "sick";
    }
    w.info("sick").repair = Some(need(score, Some(600_000)));
    w
}

fn need(score: f64, bound: Option<i64>) -> RepairNeed {
    RepairNeed {
        condition: "Ready".into(),
        reason: "KubeletNotReady".into(),
        score,
        termination_grace_period: bound,
    }
}

#[test]
fn repair_comes_before_emptiness_and_launches_a_replacement_first() {
    let w = cluster(0.0);
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    let cmd = &r.commands[0];
    assert_eq!(cmd.reason, Reason::UNHEALTHY);
    assert_eq!(cmd.node_names(), ["sick"]);
    // Its pod fits on `idle`: nothing to launch.
    assert_eq!(cmd.decision, Decision::Delete);
    let repair = cmd.repair.as_ref().unwrap();
    assert_eq!(repair.condition, "Ready");
    // The policy's 10 minutes, the claim having no bound of its own.
    assert_eq!(repair.drain_bound_ms, Some(600_000));
    assert_eq!(
        holds(&r, "idle"),
        [Hold::PreemptedByEarlierMethod {
            reason: Reason::UNHEALTHY
        }]
    );
    assert_eq!(r.eligible[&Reason::UNHEALTHY], 1);
    // Where the pod fits nowhere else, its replacement is launched first.
    let mut full = cluster(0.0);
    full.pod("idle", "hog", 7000);
    full.pod("well", "hog-2", 6000);
    let r = compute_pass(&full.input, full.now);
    let cmd = &r.commands[0];
    assert_eq!(
        (cmd.reason, cmd.decision),
        (Reason::UNHEALTHY, Decision::Replace)
    );
    assert_eq!(cmd.replacements.len(), 1);
    // Without the method, emptiness acts as before.
    let mut off = cluster(0.0);
    off.input.options.node_repair = false;
    assert_eq!(
        compute_pass(&off.input, off.now).commands[0].reason,
        Reason::EMPTY
    );
}

#[test]
fn the_unhealthy_budget_paces_repair() {
    let mut w = cluster(0.0);
    let mut only_drift = Budget::nodes("0");
    only_drift.reasons = vec![DisruptionReason::Unhealthy];
    w.settings("default").budgets = vec![only_drift];
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.iter().all(|c| c.reason != Reason::UNHEALTHY));
    assert!(holds(&r, "sick").contains(&Hold::Budget {
        reason: Reason::UNHEALTHY
    }));
    assert!(
        r.budgets
            .iter()
            .any(|b| b.reason == DisruptionReason::Unhealthy && b.allowed == 0)
    );
}

#[test]
fn the_highest_score_repairs_first_and_the_claims_bound_can_be_shorter() {
    let mut w = cluster(1.0);
    w.info("well").repair = Some(need(2.5, None));
    w.info("well").unhealthy = true;
    w.info("well").termination_grace_period = Some(60_000);
    // 2 of 3 unhealthy is over 20 %: give the pool more healthy nodes.
    for i in 0..8 {
        w.node(&format!("extra-{i}"), "large");
        w.pod(&format!("extra-{i}"), &format!("extra-{i}-app"), 1500);
    }
    let r = compute_pass(&w.input, w.now);
    let cmd = r
        .commands
        .iter()
        .find(|c| c.reason == Reason::UNHEALTHY)
        .unwrap();
    assert_eq!(cmd.node_names(), ["well"]);
    // No policy bound: the claim's own stands, nothing is stamped.
    assert_eq!(cmd.repair.as_ref().unwrap().drain_bound_ms, None);
}

#[test]
fn repair_stops_where_more_than_a_fifth_of_the_pool_is_unhealthy() {
    let mut w = cluster(0.0);
    w.info("well").unhealthy = true;
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.iter().all(|c| c.reason != Reason::UNHEALTHY));
    let h = holds(&r, "sick");
    assert!(h.contains(&Hold::RepairBreaker {
        node_pool: "default".into()
    }));
    assert_eq!(h[0].event().unwrap().0, "NodeRepairBlocked");
}

#[test]
fn do_not_disrupt_does_not_stop_repair_but_do_not_repair_does() {
    let mut w = cluster(0.0);
    w.input
        .cluster
        .nodes
        .iter_mut()
        .find(|n| n.name == "sick")
        .unwrap()
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["sick"]);
    w.info("sick").do_not_repair = true;
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.iter().all(|c| c.reason != Reason::UNHEALTHY));
    assert!(holds(&r, "sick").contains(&Hold::DoNotRepair));
}

#[test]
fn blocking_pods_need_a_drain_bound() {
    let mut w = cluster(0.0);
    w.pod("sick", "pinned", 100)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    // The policy bounds the drain: repaired despite the pod.
    let r = compute_pass(&w.input, w.now);
    assert_eq!(r.commands[0].node_names(), ["sick"]);
    // Neither the policy nor the claim does: blocked, and told.
    w.info("sick").repair = Some(need(0.0, None));
    let r = compute_pass(&w.input, w.now);
    assert!(r.commands.iter().all(|c| c.reason != Reason::UNHEALTHY));
    let h = holds(&r, "sick");
    assert!(h.contains(&Hold::RepairNeedsDrainBound));
    assert_eq!(
        Hold::RepairNeedsDrainBound.event().unwrap().1,
        "Cannot disrupt Node: repair requires a termination grace period to bypass blocking pods"
    );
}

#[test]
fn a_node_that_never_initialized_is_repaired_without_budget() {
    let mut w = cluster(0.0);
    w.info("sick").initialized = false;
    let mut none = Budget::nodes("0");
    none.reasons = vec![DisruptionReason::Unhealthy];
    w.settings("default").budgets = vec![none];
    let r = compute_pass(&w.input, w.now);
    let cmd = r
        .commands
        .iter()
        .find(|c| c.reason == Reason::UNHEALTHY)
        .unwrap();
    assert_eq!(cmd.node_names(), ["sick"]);
}
