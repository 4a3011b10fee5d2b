//! The optimiser against brute force on tiny batches, NodePool limits included: a plan never
//! costs less than the true optimum (it would break a constraint), keeps Karpenter's limit
//! guarantee (every option of every claim launchable), never exceeds the greedy price, and a
//! plan whose groups are all reported proven optimal costs exactly the optimum.

use karpenter_scheduling::Quantity;
use karpenter_scheduling::model::{InstanceType, NodePool};
use karpenter_scheduling::solver::OptimizerOptions;
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use karpenter_testing::*;
use proptest::prelude::*;
use std::sync::Arc;

/// Five types, three of them also spot.
fn types() -> Vec<Arc<InstanceType>> {
    [
        ("a", 2, 4, 0.10, true),
        ("b", 4, 8, 0.17, true),
        ("odd", 6, 8, 0.21, false),
        ("c", 8, 16, 0.40, true),
        ("d", 16, 64, 0.70, false),
    ]
    .into_iter()
    .map(|(name, cores, gib, price, spot)| {
        let it = InstanceTypeBuilder::new(name, cores, gib).on_demand(price);
        if spot { it.spot_at(SPOT_FRACTION) } else { it }.build()
    })
    .collect()
}

/// A pool of [`types`] with a cpu limit of `limit` cores, if any.
fn limited_pool(types: &[Arc<InstanceType>], limit: Option<i64>) -> NodePool {
    let mut p = pool("default");
    p.instance_types = types.to_vec();
    if let Some(cpu) = limit {
        p.limits = [(
            "cpu".to_string(),
            Quantity::parse(&cpu.to_string()).unwrap(),
        )]
        .into();
    }
    p
}

/// The plan of Karpenter's greedy pass alone.
fn greedy_only(s: &Snapshot) -> Plan {
    solve(
        s,
        &SolveOptions {
            optimizer: OptimizerOptions {
                enabled: false,
                ..OptimizerOptions::default()
            },
            ..SolveOptions::default()
        },
    )
}

fn launchable_cpu(plan: &Plan, types: &[Arc<InstanceType>]) -> i64 {
    plan.new_node_claims
        .iter()
        .map(|c| {
            c.instance_type_options
                .iter()
                .map(|o| {
                    let it = types.iter().find(|it| *it.name == *o.name).unwrap();
                    it.capacity.cpu_millis
                })
                .max()
                .unwrap()
        })
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn tiny_batches_under_limits_against_brute_force(
        requests in prop::collection::vec((100i64..7000, 1i64..12), 1..6),
        limit in prop::option::of(2i64..48),
    ) {
        let types = types();
        let p = limited_pool(&types, limit);
        let pods = requests
            .iter()
            .enumerate()
            .map(|(i, &(cpu, mem_gi))| pod(&format!("p{i}"), cpu, mem_gi * GI))
            .collect();
        let s = snapshot(pods, vec![p]);
        let greedy = greedy_only(&s);
        // Only batches the greedy places whole: the optimiser re-packs placed pods.
        prop_assume!(greedy.unschedulable.is_empty());
        let plan = solve(&s, &SolveOptions::default());
        prop_assert!(plan.unschedulable.is_empty());
        let in_bytes: Vec<(i64, i64)> = requests.iter().map(|&(c, m)| (c, m * GI)).collect();
        let best = brute_force(&in_bytes, &types, limit.map(|l| l * 1000));
        let stats = plan.optimizer.clone().expect("optimiser ran");
        prop_assert!(plan.total_price >= best - 1e-9, "plan {} below optimum {}", plan.total_price, best);
        prop_assert!(plan.total_price <= greedy.total_price + 1e-9);
        if let Some(cpu) = limit {
            prop_assert!(launchable_cpu(&plan, &types) <= cpu * 1000);
        }
        if stats.groups > 0 && stats.groups_proven_optimal == stats.groups {
            prop_assert!(
                (plan.total_price - best).abs() < 1e-9,
                "reported optimal at {} but the optimum is {}", plan.total_price, best
            );
        }
        if limit.is_none() {
            // Within the exact packer's reach every group is proven optimal.
            prop_assert_eq!(stats.groups_proven_optimal, stats.groups);
        }
        prop_assert!(plan.lower_bound.unwrap() <= best + 1e-9);
    }
}

/// `pod` labelled `app=db` with a required hostname anti-affinity to every `app=db` pod.
fn db_pod(name: &str, cpu: i64, mem: i64) -> karpenter_scheduling::model::Pod {
    let mut p = labeled(pod(name, cpu, mem), &[("app", "db")]);
    p.affinity.pod_anti_affinity.required = vec![term(
        karpenter_scheduling::labels::HOSTNAME,
        &[("app", "db")],
    )];
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Some pods of each batch must each have a node of their own: plans keep them apart,
    /// the lower bound stays below the optimum, and it counts a node for each of them.
    #[test]
    fn tiny_batches_with_pods_kept_apart_against_brute_force(
        requests in prop::collection::vec((100i64..7000, 1i64..12, any::<bool>()), 1..6),
        limit in prop::option::of(8i64..64),
    ) {
        let types = types();
        let p = limited_pool(&types, limit);
        let pods = requests
            .iter()
            .enumerate()
            .map(|(i, &(cpu, mem_gi, apart))| {
                let name = format!("p{i}");
                if apart { db_pod(&name, cpu, mem_gi * GI) } else { pod(&name, cpu, mem_gi * GI) }
            })
            .collect();
        let s = snapshot(pods, vec![p]);
        let greedy = greedy_only(&s);
        prop_assume!(greedy.unschedulable.is_empty());
        let plan = solve(&s, &SolveOptions::default());
        prop_assert!(plan.unschedulable.is_empty());
        let in_bytes: Vec<(i64, i64)> = requests.iter().map(|&(c, m, _)| (c, m * GI)).collect();
        let apart: Vec<bool> = requests.iter().map(|r| r.2).collect();
        let best = brute_force_apart(&in_bytes, &apart, &types, limit.map(|l| l * 1000));
        prop_assert!(plan.total_price >= best - 1e-9, "plan {} below optimum {}", plan.total_price, best);
        prop_assert!(plan.total_price <= greedy.total_price + 1e-9);
        for claim in &plan.new_node_claims {
            let together = claim.pods.iter().filter(|k| apart[k.name[1..].parse::<usize>().unwrap()]).count();
            prop_assert!(together <= 1, "{} pods kept apart share a node", together);
        }
        let bound = plan.lower_bound.expect("bound computed");
        prop_assert!(bound <= best + 1e-9, "bound {} above the optimum {}", bound, best);
        // Every plan has a node per pod kept apart, each at least the cheapest type one of
        // them fits on.
        let kept: Vec<(i64, i64)> = in_bytes.iter().zip(&apart).filter(|p| *p.1).map(|p| *p.0).collect();
        if kept.len() > 1 {
            let cheapest = types
                .iter()
                .filter(|it| {
                    let a = it.allocatable();
                    kept.iter().any(|&(c, m)| c <= a.cpu_millis && m <= a.memory)
                })
                .map(|it| min_price(it))
                .fold(f64::INFINITY, f64::min);
            prop_assert!(
                bound >= kept.len() as f64 * cheapest * (1.0 - 1e-6),
                "bound {} below {} nodes at {}", bound, kept.len(), cheapest
            );
        }
    }
}
