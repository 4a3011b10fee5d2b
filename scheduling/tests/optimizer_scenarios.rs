//! Scenario tests for the packing optimiser: it beats Karpenter's greedy where the greedy
//! mis-sizes nodes, matches brute force on tiny batches, leaves per-node constrained pods
//! alone, never makes a plan worse, and honours its budget and the caller's deadline.

mod common;

use common::*;
use karpenter_scheduling::labels::HOSTNAME;
use karpenter_scheduling::model::{InstanceType, NodePool};
use karpenter_scheduling::solver::{OptimizerOptions, solve_with_deadline};
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use std::sync::Arc;

fn greedy_options() -> SolveOptions {
    SolveOptions {
        optimizer: OptimizerOptions {
            enabled: false,
            ..OptimizerOptions::default()
        },
        ..SolveOptions::default()
    }
}

/// A 16-cpu type that costs more per cpu than a 4-cpu one: the greedy's first claim grows
/// onto the big type, the optimiser uses the small ones.
fn lumpy_pool() -> NodePool {
    let mut p = pool("default");
    p.instance_types = vec![
        instance_type("big", 16, 64, 1.00, false, &[]),
        instance_type("mid", 4, 16, 0.20, false, &[]),
    ];
    p
}

fn claims_of(plan: &Plan) -> Vec<(String, Vec<String>)> {
    plan.new_node_claims
        .iter()
        .map(|c| {
            (
                c.instance_type_options[0].name.clone(),
                c.pods.iter().map(|k| k.name.clone()).collect(),
            )
        })
        .collect()
}

#[test]
fn beats_the_greedy_on_a_mis_sized_node() {
    let pods = (0..9).map(|i| pod(&format!("p{i}"), 1900, GI)).collect();
    let s = snapshot(pods, vec![lumpy_pool()]);
    let greedy = solve(&s, &greedy_options());
    assert!((greedy.total_price - 1.20).abs() < 1e-9, "{greedy:?}");
    let plan = solve(&s, &SolveOptions::default());
    assert!(
        (plan.total_price - 1.00).abs() < 1e-9,
        "{:?}",
        claims_of(&plan)
    );
    assert_eq!(plan.greedy_price, Some(greedy.total_price));
    assert_eq!(plan.new_node_claims.len(), 5);
    assert!(plan.new_node_claims.iter().all(|c| c.price == 0.20));
    let stats = plan.optimizer.as_ref().unwrap();
    assert_eq!(stats.groups_improved, 1);
    assert_eq!(stats.groups_proven_optimal, 1);
    assert_eq!(stats.pods_repacked, 9);
    let bound = plan.lower_bound.unwrap();
    assert!(bound <= plan.total_price + 1e-9 && bound > 0.85, "{bound}");
}

#[test]
fn claims_list_every_type_that_fits_cheapest_first() {
    let mut p = lumpy_pool();
    p.instance_types
        .push(instance_type("mid-alt", 4, 16, 0.25, false, &[]));
    let pods = (0..9).map(|i| pod(&format!("p{i}"), 1900, GI)).collect();
    let plan = solve(&snapshot(pods, vec![p]), &SolveOptions::default());
    for c in &plan.new_node_claims {
        let names: Vec<&str> = c
            .instance_type_options
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, ["mid", "mid-alt", "big"]);
    }
}

#[test]
fn leaves_a_plan_the_greedy_already_got_right() {
    // Linear prices: one node per 4 pods of 2 cpu, nothing to gain.
    let pods = (0..8).map(|i| pod(&format!("p{i}"), 2000, GI)).collect();
    let s = snapshot(pods, vec![pool("default")]);
    let greedy = solve(&s, &greedy_options());
    let plan = solve(&s, &SolveOptions::default());
    assert_eq!(claims_of(&plan), claims_of(&greedy));
    assert_eq!(plan.total_price, greedy.total_price);
    assert_eq!(plan.optimizer.as_ref().unwrap().groups_improved, 0);
}

#[test]
fn hostname_anti_affinity_pods_stay_where_the_greedy_put_them() {
    let pods: Vec<_> = (0..9)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 1900, GI), &[("app", "web")]);
            if i == 0 {
                p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
            }
            p
        })
        .collect();
    let mut all = pods.clone();
    // A pod whose anti-affinity selects "web" pods makes every web pod's node matter.
    let mut db = labeled(pod("db", 100, GI), &[("app", "db")]);
    db.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "web")])];
    all.push(db);
    let s = snapshot(all, vec![lumpy_pool()]);
    let greedy = solve(&s, &greedy_options());
    let plan = solve(&s, &SolveOptions::default());
    assert_eq!(claims_of(&plan), claims_of(&greedy));
    let stats = plan.optimizer.unwrap();
    assert_eq!(stats.pods_fixed, 10);
    assert_eq!(stats.groups, 0);
}

#[test]
fn no_budget_or_an_expired_deadline_keeps_the_greedy_plan() {
    let pods: Vec<_> = (0..40).map(|i| pod(&format!("p{i}"), 1900, GI)).collect();
    let s = snapshot(pods, vec![lumpy_pool()]);
    let greedy = solve(&s, &greedy_options());
    let starved = SolveOptions {
        optimizer: OptimizerOptions {
            max_work: 10,
            ..OptimizerOptions::default()
        },
        ..SolveOptions::default()
    };
    let plan = solve(&s, &starved);
    assert_eq!(claims_of(&plan), claims_of(&greedy));
    assert!(plan.optimizer.unwrap().budget_exhausted);

    // The callback is polled once enough work has piled up; answering "stop" from then on
    // keeps whatever was improved before.
    let stop = || true;
    let plan = solve_with_deadline(&s, &SolveOptions::default(), Some(&stop));
    assert!(plan.total_price <= greedy.total_price + 1e-9);
    let never = || false;
    let free = solve_with_deadline(&s, &SolveOptions::default(), Some(&never));
    assert_eq!(free, solve(&s, &SolveOptions::default()));
    assert!(free.total_price < greedy.total_price);
}

/// The cheapest on-demand or spot price of a type.
fn min_price(it: &InstanceType) -> f64 {
    it.offerings
        .iter()
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// The optimum over every partition of the pods into nodes, each priced at the cheapest
/// type that holds it.
fn brute_force(requests: &[(i64, i64)], types: &[Arc<InstanceType>]) -> f64 {
    fn go(
        i: usize,
        requests: &[(i64, i64)],
        blocks: &mut Vec<(i64, i64, i64)>,
        types: &[Arc<InstanceType>],
        best: &mut f64,
    ) {
        if i == requests.len() {
            let mut cost = 0.0;
            for &(cpu, mem, n) in blocks.iter() {
                let price = types
                    .iter()
                    .filter(|it| {
                        let a = it.allocatable();
                        cpu <= a.cpu_millis && mem <= a.memory && n <= a.pods
                    })
                    .map(|it| min_price(it))
                    .fold(f64::INFINITY, f64::min);
                cost += price;
            }
            *best = best.min(cost);
            return;
        }
        let (cpu, mem) = requests[i];
        for b in 0..blocks.len() {
            blocks[b].0 += cpu;
            blocks[b].1 += mem;
            blocks[b].2 += 1;
            go(i + 1, requests, blocks, types, best);
            blocks[b].0 -= cpu;
            blocks[b].1 -= mem;
            blocks[b].2 -= 1;
        }
        blocks.push((cpu, mem, 1));
        go(i + 1, requests, blocks, types, best);
        blocks.pop();
    }
    let mut best = f64::INFINITY;
    go(0, requests, &mut Vec::new(), types, &mut best);
    best
}

#[test]
fn tiny_batches_match_brute_force_and_the_bound_stays_below() {
    let mut catalogue = catalogue();
    catalogue.truncate(4);
    catalogue.push(instance_type("odd", 6, 8, 0.21, false, &[]));
    catalogue.push(instance_type("memory", 2, 24, 0.13, false, &[]));
    let cases: [&[(i64, i64)]; 6] = [
        &[(1900, 1), (1900, 1), (1900, 1)],
        &[(3000, 2), (3000, 2), (1000, 20), (500, 1)],
        &[(5000, 4), (1500, 1), (1500, 6), (700, 9), (300, 1)],
        &[(7000, 1), (7000, 1), (900, 3)],
        &[
            (1200, 12),
            (1200, 12),
            (1200, 3),
            (2500, 2),
            (2500, 2),
            (600, 1),
        ],
        &[(15_000, 1), (900, 1)],
    ];
    for (n, case) in cases.iter().enumerate() {
        let pods = case
            .iter()
            .enumerate()
            .map(|(i, &(cpu, mem_gi))| pod(&format!("c{n}p{i}"), cpu, mem_gi * GI))
            .collect();
        let mut p = pool("default");
        p.instance_types = catalogue.clone();
        let s: Snapshot = snapshot(pods, vec![p]);
        let plan = solve(&s, &SolveOptions::default());
        assert!(plan.unschedulable.is_empty());
        let in_bytes: Vec<(i64, i64)> = case.iter().map(|&(c, m)| (c, m * GI)).collect();
        let best = brute_force(&in_bytes, &catalogue);
        let bound = plan.lower_bound.unwrap();
        assert!(
            (plan.total_price - best).abs() < 1e-9,
            "case {n}: plan {} vs optimum {best}",
            plan.total_price
        );
        assert!(
            bound <= best + 1e-9,
            "case {n}: bound {bound} above optimum {best}"
        );
        assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);
    }
}

#[test]
fn pool_limits_are_respected_by_the_optimised_claims() {
    // Five 4-cpu nodes would fit the pods but not a 19-cpu limit (each claim counts the
    // largest capacity among its options): the optimiser must not go over it.
    let mut p = lumpy_pool();
    p.limits = [(
        "cpu".to_string(),
        karpenter_scheduling::Quantity::parse("19").unwrap(),
    )]
    .into();
    let pods = (0..9).map(|i| pod(&format!("p{i}"), 1900, GI)).collect();
    let s = snapshot(pods, vec![p]);
    let plan = solve(&s, &SolveOptions::default());
    let greedy = solve(&s, &greedy_options());
    assert!(plan.total_price <= greedy.total_price + 1e-9);
    let used: i64 = plan
        .new_node_claims
        .iter()
        .map(|c| {
            c.instance_type_options
                .iter()
                .map(|o| if o.name == "big" { 16_000 } else { 4_000 })
                .max()
                .unwrap()
        })
        .sum();
    assert!(used <= 19_000, "{used}");
}
