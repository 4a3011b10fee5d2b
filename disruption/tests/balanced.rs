//! The `Balanced` consolidation policy end to end through `compute_pass`: which moves a
//! Balanced pool approves or rejects, the pre-filter, moves across pools, and what the pass
//! reports for the operator's metrics and events. Pools of other policies are the control.

use karpenter_cloudprovider::v1::ConsolidationPolicy;
use karpenter_disruption::balanced::{pool_totals, score_move};
use karpenter_disruption::candidate::evaluate;
use karpenter_disruption::{
    ConsolidationMethod, Decision, Hold, PassResult, Reason, ScoredMove, compute_pass,
};
use karpenter_scheduling::labels::DO_NOT_DISRUPT;
use karpenter_testing::disruption::*;
use karpenter_testing::instance_types::on_demand_catalogue;
use std::collections::BTreeSet;

const EPS: f64 = 1e-9;

fn balanced(c: &mut Cluster, pool: &str) {
    c.settings(pool).consolidation_policy = ConsolidationPolicy::Balanced;
}

/// Fills `node` with `n` pods that together request all of its allocatable cpu, so nothing
/// else fits on it and its own pods fit nowhere cheaper.
fn fill(c: &mut Cluster, node: &str, n: i64) {
    let cpu = c
        .input
        .cluster
        .nodes
        .iter()
        .find(|x| x.name == node)
        .expect("node")
        .allocatable
        .cpu_millis;
    for i in 0..n {
        let share = cpu / n + i64::from(i == n - 1) * (cpu % n);
        c.pod(node, &format!("{node}-fill-{i}"), share);
    }
}

/// `a`: a large node ($0.40/h) with two 1.5-core pods, replaceable by a medium ($0.20/h);
/// `b`: an xlarge ($0.80/h) filled by `b_pods` pods. Pool totals: cost 1.2, disruption
/// 3 + (1 + `b_pods`).
fn replace_case(b_pods: i64) -> Cluster {
    let mut c = Cluster::new();
    c.node("a", "large");
    c.pod("a", "a-0", 1500);
    c.pod("a", "a-1", 1500);
    c.node("b", "xlarge");
    fill(&mut c, "b", b_pods);
    c
}

fn single_command(r: &PassResult) -> &karpenter_disruption::Command {
    assert_eq!(r.commands.len(), 1, "{:#?}", r.commands);
    &r.commands[0]
}

fn moves_of(r: &PassResult, method: ConsolidationMethod) -> Vec<&ScoredMove> {
    r.scored_moves
        .iter()
        .filter(|m| m.method == method)
        .collect()
}

#[test]
fn a_replace_saving_too_little_for_its_disruption_is_rejected_only_when_balanced() {
    // Control: the default policy replaces `a` by a medium, saving $0.20/h.
    let c = replace_case(1);
    let r = compute_pass(&c.input, c.now);
    let cmd = single_command(&r);
    assert_eq!(
        (cmd.reason, cmd.decision, cmd.node_names()),
        (Reason::UNDERUTILIZED, Decision::Replace, vec!["a"])
    );
    assert!((cmd.savings - 0.2).abs() < EPS);
    let [mv] = moves_of(&r, ConsolidationMethod::SingleNode)[..] else {
        panic!("{:#?}", r.scored_moves)
    };
    // Not scored, but reported: upstream counts every single-node move.
    assert!(mv.approved);
    assert_eq!(mv.pools.len(), 1);
    assert_eq!(
        mv.pools[0].policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(mv.pools[0].score, None);

    // Balanced: savings fraction 0.2 / 1.2 = 1/6, disruption fraction 3 / (3 + 2) = 0.6,
    // score 0.278 < 0.5. Deleting `a` outright would score (0.4 / 1.2) / 0.6 = 0.556, so the
    // pre-filter lets it through to the simulation and the move itself is rejected.
    let mut c = replace_case(1);
    balanced(&mut c, POOL);
    let r = compute_pass(&c.input, c.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(
        r.holds("a"),
        Some(
            &[Hold::BalancedRejected {
                node_pool: POOL.into()
            }][..]
        )
    );
    let [mv] = moves_of(&r, ConsolidationMethod::SingleNode)[..] else {
        panic!("{:#?}", r.scored_moves)
    };
    assert!(!mv.approved);
    assert_eq!(mv.decision, Decision::Replace);
    assert_eq!(mv.candidates[0].node, "a");
    let pool = &mv.pools[0];
    assert!((pool.totals.total_cost - 1.2).abs() < EPS);
    assert!((pool.totals.total_disruption_cost - 5.0).abs() < EPS);
    let s = pool.score.expect("Balanced pools are scored");
    assert!((s.savings_fraction - 1.0 / 6.0).abs() < EPS);
    assert!((s.disruption_fraction - 0.6).abs() < EPS);
    assert!((s.score() - 0.2777777777777778).abs() < EPS);
    assert_eq!((s.threshold(), s.approved()), (0.5, false));
}

#[test]
fn a_replace_approved_when_the_rest_of_the_pool_carries_the_disruption() {
    // The same move, but `b` runs ten pods: disruption fraction 3 / 14, score 0.778.
    let mut c = replace_case(10);
    balanced(&mut c, POOL);
    let r = compute_pass(&c.input, c.now);
    let cmd = single_command(&r);
    assert_eq!(
        (cmd.decision, cmd.node_names()),
        (Decision::Replace, vec!["a"])
    );
    let approved: Vec<_> = r.scored_moves.iter().filter(|m| m.approved).collect();
    let [mv] = approved[..] else {
        panic!("{:#?}", r.scored_moves)
    };
    assert_eq!(mv.method, ConsolidationMethod::SingleNode);
    let s = mv.pools[0].score.expect("scored");
    assert!((s.score() - 14.0 / 18.0).abs() < EPS);
    assert!(s.approved());
}

#[test]
fn candidates_whose_delete_cannot_pass_are_not_simulated() {
    // `a` runs six pods (disruption 7 of the pool's 9): even deleting it scores
    // (0.4 / 1.2) / (7 / 9) = 0.43.
    let build = |policy| {
        let mut c = Cluster::new();
        c.settings(POOL).consolidation_policy = policy;
        // Upstream's single-node rule alone: re-packing, which scores sets, would simulate.
        c.input.options.repack = None;
        c.node("a", "large");
        for i in 0..6 {
            c.pod("a", &format!("a-{i}"), 500);
        }
        c.node("b", "xlarge");
        fill(&mut c, "b", 1);
        c
    };
    let c = build(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    let control = compute_pass(&c.input, c.now);
    assert_eq!(single_command(&control).node_names(), ["a"]);

    let c = build(ConsolidationPolicy::Balanced);
    let r = compute_pass(&c.input, c.now);
    assert!(r.commands.is_empty(), "{:#?}", r.commands);
    assert_eq!(
        r.holds("a"),
        Some(
            &[Hold::BalancedCannotPass {
                node_pool: POOL.into()
            }][..]
        )
    );
    // No move was computed for `a`, so none is reported, and it cost no simulation.
    assert!(r.scored_moves.iter().all(|m| m.candidates[0].node != "a"));
    assert!(r.simulations < control.simulations);
    // The same numbers through the public scoring function.
    let eval = evaluate(&c.input, c.now, &BTreeSet::new());
    let totals = pool_totals(&c.input, &eval.candidates)[POOL];
    assert!((totals.total_cost - 1.2).abs() < EPS);
    assert!((totals.total_disruption_cost - 9.0).abs() < EPS);
    let best = score_move(0.4, 7.0, totals, 2);
    assert!((best.score() - 3.0 / 7.0).abs() < EPS);
    assert!(!best.approved());
}

/// `p1` (medium, pool `default`) and `q1` (small, pool `other`), one 500m pod each, both
/// fitting on `host`, an xlarge of `other` that may not be disrupted.
fn two_pools(other_policy: ConsolidationPolicy) -> Cluster {
    let mut c = Cluster::new();
    c.add_pool("other", on_demand_catalogue(ZONE_A), "on-demand");
    balanced(&mut c, POOL);
    c.settings("other").consolidation_policy = other_policy;
    c.node("p1", "medium");
    c.pod("p1", "p1-0", 500);
    c.node_in("other", "q1", "small", "on-demand");
    c.pod("q1", "q1-0", 500);
    c.node_in("other", "host", "xlarge", "on-demand")
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    c.pod("host", "host-0", 500);
    c
}

#[test]
fn a_move_across_pools_splits_savings_by_price_and_needs_every_balanced_pool() {
    // `other` is not Balanced: the multi-node delete of both goes through, `default`'s
    // share of the $0.30/h saved is 0.2 / 0.3 of it and scores (0.2 / 0.2) / (2 / 2) = 1.
    let c = two_pools(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    let r = compute_pass(&c.input, c.now);
    let cmd = single_command(&r);
    assert_eq!(
        (cmd.decision, cmd.node_names()),
        (Decision::Delete, vec!["p1", "q1"])
    );
    let [mv] = moves_of(&r, ConsolidationMethod::MultiNode)[..] else {
        panic!("{:#?}", r.scored_moves)
    };
    assert!(mv.approved);
    let names: Vec<&str> = mv.pools.iter().map(|p| p.node_pool.as_str()).collect();
    assert_eq!(names, [POOL, "other"]);
    let (p, q) = (&mv.pools[0], &mv.pools[1]);
    assert!((p.savings - 0.2).abs() < EPS && (q.savings - 0.1).abs() < EPS);
    assert!((p.score.expect("Balanced").score() - 1.0).abs() < EPS);
    assert_eq!(q.score, None);
    // `host` cannot be disrupted but still counts in `other`'s totals.
    assert!((q.totals.total_cost - 0.9).abs() < EPS);
    assert!((q.totals.total_disruption_cost - 4.0).abs() < EPS);

    // Both Balanced: `other`'s share scores (0.1 / 0.9) / (2 / 4) = 0.22 and vetoes the
    // move; single-node consolidation then deletes `p1` alone.
    let c = two_pools(ConsolidationPolicy::Balanced);
    let r = compute_pass(&c.input, c.now);
    let cmd = single_command(&r);
    assert_eq!(
        (cmd.decision, cmd.node_names()),
        (Decision::Delete, vec!["p1"])
    );
    let [rejected] = moves_of(&r, ConsolidationMethod::MultiNode)[..] else {
        panic!("{:#?}", r.scored_moves)
    };
    assert!(!rejected.approved);
    let scores: Vec<(bool, f64)> = rejected
        .pools
        .iter()
        .map(|p| {
            let s = p.score.expect("both Balanced");
            (s.approved(), s.score())
        })
        .collect();
    assert!(scores[0].0 && (scores[0].1 - 1.0).abs() < EPS);
    assert!(!scores[1].0 && (scores[1].1 - 2.0 / 9.0).abs() < EPS);
    let single = moves_of(&r, ConsolidationMethod::SingleNode);
    assert_eq!(single.len(), 1);
    assert!(single[0].approved);
    assert_eq!(single[0].candidates[0].node, "p1");
}

#[test]
fn empty_nodes_of_balanced_pools_are_deleted_without_scoring() {
    let mut c = replace_case(1);
    balanced(&mut c, POOL);
    c.node("idle", "small");
    c.daemon("idle", "agent");
    let r = compute_pass(&c.input, c.now);
    let cmd = single_command(&r);
    assert_eq!(
        (cmd.reason, cmd.node_names()),
        (Reason::EMPTY, vec!["idle"])
    );
    assert!(r.scored_moves.is_empty());
}

#[test]
fn upstream_ten_node_pool_delete_scores_one() {
    // Upstream's "approve a delete command for a single Balanced NodePool": ten equal nodes
    // with one pod each; removing one is 10 % of the cost for 10 % of the disruption.
    let mut c = Cluster::new();
    balanced(&mut c, POOL);
    for i in 0..10 {
        let n = format!("n{i}");
        c.node(&n, "small");
        c.pod(&n, &format!("{n}-pod"), 500);
    }
    let eval = evaluate(&c.input, c.now, &BTreeSet::new());
    let totals = pool_totals(&c.input, &eval.candidates)[POOL];
    assert!((totals.total_cost - 1.0).abs() < EPS);
    assert!((totals.total_disruption_cost - 20.0).abs() < EPS);
    let r = score_move(0.1, 2.0, totals, 2);
    assert!((r.savings_fraction - 0.1).abs() < EPS);
    assert!((r.disruption_fraction - 0.1).abs() < EPS);
    assert!((r.score() - 1.0).abs() < EPS && r.approved());
}
