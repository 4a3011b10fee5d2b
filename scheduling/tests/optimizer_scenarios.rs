//! Scenario tests for the packing optimiser: it beats Karpenter's greedy where the greedy
//! mis-sizes nodes, matches brute force on tiny batches, keeps the owners of per-node
//! constraints on their nodes, never makes a plan worse, and honours its budget and the caller's deadline.

use karpenter_scheduling::labels::HOSTNAME;
use karpenter_scheduling::model::NodePool;
use karpenter_scheduling::solver::{OptimizerOptions, solve_with_deadline};
use karpenter_scheduling::{BoundGap, Plan, Snapshot, SolveOptions, solve};
use karpenter_testing::*;

/// The optimiser with owners kept on their greedy nodes (only the pods around them move).
fn owners_kept() -> SolveOptions {
    let mut o = SolveOptions::default();
    o.optimizer.repack_owners = false;
    o
}

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
    p.instance_types = on_demand_types(&[("big", 16, 64, 1.00), ("mid", 4, 16, 0.20)]);
    p
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
    let Some(BoundGap::Relative(gap)) = plan.bound_gap() else {
        panic!(
            "no pod is pinned, so the gap is meaningful: {:?}",
            plan.bound_gap()
        );
    };
    assert!((gap - (1.0 - bound) / bound).abs() < 1e-9);
}

#[test]
fn claims_list_every_type_that_fits_cheapest_first() {
    let mut p = lumpy_pool();
    p.instance_types
        .extend(on_demand_types(&[("mid-alt", 4, 16, 0.25)]));
    let pods = (0..9).map(|i| pod(&format!("p{i}"), 1900, GI)).collect();
    let plan = solve(&snapshot(pods, vec![p]), &SolveOptions::default());
    for c in &plan.new_node_claims {
        let names: Vec<&str> = c
            .instance_type_options
            .iter()
            .map(|o| o.name.as_ref())
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
fn pods_selected_by_a_hostname_anti_affinity_move_but_never_join_its_owner() {
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
    // A pod whose anti-affinity selects "web" pods: they may move (leaving its node, or
    // arriving on a node without it, breaks nothing) but never onto its node.
    let mut db = labeled(pod("db", 100, GI), &[("app", "db")]);
    db.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "web")])];
    all.push(db);
    let s = snapshot(all, vec![lumpy_pool()]);
    let greedy = solve(&s, &greedy_options());
    let plan = solve(&s, &owners_kept());
    for c in &plan.new_node_claims {
        let names: Vec<&str> = c.pods.iter().map(|k| k.name.as_str()).collect();
        if names.contains(&"db") {
            assert_eq!(names, ["db"], "a web pod joined db");
        }
    }
    assert_eq!(plan.placed_pods(), 10);
    assert!(
        plan.total_price < greedy.total_price - 1e-9,
        "{:?} vs {:?}",
        claims_of(&plan),
        claims_of(&greedy)
    );
    // With owners kept, only the two owners of hostname-keyed anti-affinities stay where
    // the greedy put them.
    let stats = plan.optimizer.unwrap();
    assert_eq!(stats.pods_fixed, 2);
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

#[test]
fn tiny_batches_match_brute_force_and_the_bound_stays_below() {
    let mut catalogue = catalogue();
    catalogue.truncate(4);
    catalogue.extend(on_demand_types(&[
        ("odd", 6, 8, 0.21),
        ("memory", 2, 24, 0.13),
    ]));
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
        let best = brute_force(&in_bytes, &catalogue, None);
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
                .map(|o| if &*o.name == "big" { 16_000 } else { 4_000 })
                .max()
                .unwrap()
        })
        .sum();
    assert!(used <= 19_000, "{used}");
}

/// A catalogue with one huge type beside small ones: each claim that may launch as the huge
/// type counts 192 cpu against a limit (Karpenter's `subtractMax`).
fn pool_with_a_huge_type(limit_cpu: Option<&str>) -> NodePool {
    let mut p = pool("default");
    p.instance_types = on_demand_types(&[
        ("huge", 192, 384, 12.0),
        ("mid", 4, 16, 0.20),
        ("small", 2, 8, 0.11),
    ]);
    if let Some(cpu) = limit_cpu {
        p.limits = [(
            "cpu".to_string(),
            karpenter_scheduling::Quantity::parse(cpu).unwrap(),
        )]
        .into();
    }
    p
}

/// The most cpu the plan's claims of `pool` could launch: each claim's largest option.
fn launchable_cpu(plan: &Plan, pool: &NodePool) -> i64 {
    plan.new_node_claims
        .iter()
        .filter(|c| c.node_pool == pool.name)
        .map(|c| {
            c.instance_type_options
                .iter()
                .map(|o| {
                    let it = pool.instance_types.iter().find(|it| *it.name == *o.name);
                    it.unwrap().capacity.cpu_millis
                })
                .max()
                .unwrap()
        })
        .sum()
}

#[test]
fn a_limit_far_from_binding_gives_the_plan_without_limits() {
    let pods: Vec<_> = (0..60)
        .map(|i| pod(&format!("p{i}"), 900 + (i % 3) * 50, GI))
        .collect();
    let free = solve(
        &snapshot(pods.clone(), vec![pool_with_a_huge_type(None)]),
        &SolveOptions::default(),
    );
    let limited_pool = pool_with_a_huge_type(Some("1000"));
    let limited = solve(
        &snapshot(pods, vec![limited_pool.clone()]),
        &SolveOptions::default(),
    );
    assert!(limited.unschedulable.is_empty());
    assert_eq!(claims_of(&limited), claims_of(&free));
    assert!((limited.total_price - free.total_price).abs() < 1e-9);
    assert!(limited.total_price < limited.greedy_price.unwrap() - 1e-9);
    // Karpenter's guarantee: every claim may launch as any of its options.
    assert!(launchable_cpu(&limited, &limited_pool) <= 1_000_000);
    // Far from the limit the first claims keep the huge type as a fallback option.
    assert!(
        limited.new_node_claims[0]
            .instance_type_options
            .iter()
            .any(|o| &*o.name == "huge")
    );
}

#[test]
fn a_binding_limit_narrows_options_to_the_type_each_claim_is_priced_at() {
    // The greedy fills one huge node (12/h). Fifteen mid nodes cost 3/h and use 60 cpu, but
    // with the huge type among every claim's options they would count 15 × 192 cpu against
    // a 250-cpu limit: only the first claim may keep the huge fallback.
    let pods: Vec<_> = (0..60).map(|i| pod(&format!("p{i}"), 900, GI)).collect();
    let p = pool_with_a_huge_type(Some("250"));
    let s = snapshot(pods, vec![p.clone()]);
    let plan = solve(&s, &SolveOptions::default());
    let greedy = solve(&s, &greedy_options());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(launchable_cpu(&plan, &p) <= 250_000);
    assert!(launchable_cpu(&greedy, &p) <= 250_000);
    assert!(
        plan.total_price < greedy.total_price / 2.0,
        "{}",
        plan.total_price
    );
    let with_huge = plan
        .new_node_claims
        .iter()
        .filter(|c| c.instance_type_options.iter().any(|o| &*o.name == "huge"))
        .count();
    assert!(with_huge <= 1, "{with_huge}");
}

/// Two pods that repel each other per hostname and six big unconstrained pods: the greedy
/// puts the big pods and one of the small ones on a 16-cpu node. The big pods may move (no
/// constraint counts them) while the small one is pinned, so the optimiser leaves the small
/// pod alone on that claim, now a 1-cpu type, and packs the big pods onto 4-cpu nodes
/// when owners are kept; re-packing owners jointly does better still.
#[test]
fn unconstrained_pods_leave_a_node_pinned_by_anti_affinity() {
    let mut p = pool("default");
    p.instance_types = on_demand_types(&[
        ("big", 16, 64, 1.00),
        ("mid", 4, 16, 0.20),
        ("tiny", 1, 4, 0.03),
    ]);
    let mut pods: Vec<_> = (0..6)
        .map(|i| labeled(pod(&format!("big{i}"), 1900, GI), &[("app", "batch")]))
        .collect();
    for i in 0..2 {
        let mut web = labeled(pod(&format!("web{i}"), 200, GI / 4), &[("app", "web")]);
        web.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "web")])];
        pods.push(web);
    }
    let s = snapshot(pods, vec![p]);
    let greedy = solve(&s, &greedy_options());
    assert!(
        (greedy.total_price - 1.03).abs() < 1e-9,
        "{:?}",
        claims_of(&greedy)
    );
    let plan = solve(&s, &owners_kept());
    assert!(
        (plan.total_price - 0.66).abs() < 1e-9,
        "{:?}",
        claims_of(&plan)
    );
    // Each web pod is still alone among web pods, on the claim the greedy gave it.
    let web_claims: Vec<_> = plan
        .new_node_claims
        .iter()
        .filter(|c| c.pods.iter().any(|k| k.name.starts_with("web")))
        .collect();
    assert_eq!(web_claims.len(), 2);
    for c in &web_claims {
        assert_eq!(c.pods.len(), 1, "{:?}", claims_of(&plan));
        assert_eq!(&*c.instance_type_options[0].name, "tiny");
    }
    let stats = plan.optimizer.unwrap();
    assert_eq!(stats.pods_fixed, 2);
    assert_eq!(stats.pods_repacked, 6);
    assert_eq!(stats.groups_proven_optimal, 0);
    // Re-packed jointly, the web pods may leave their greedy claims too: three 4-cpu nodes
    // (0.60 against 0.66), each web pod still without the other beside it.
    let joint = solve(&s, &SolveOptions::default());
    assert!(
        (joint.total_price - 0.60).abs() < 1e-9,
        "{:?}",
        claims_of(&joint)
    );
    for c in &joint.new_node_claims {
        let webs = c.pods.iter().filter(|k| k.name.starts_with("web")).count();
        assert!(webs <= 1, "{:?}", claims_of(&joint));
    }
    assert_eq!(joint.placed_pods(), 8);
}

/// `app=db` pods that must each have a node of their own.
fn db_replica(i: usize) -> karpenter_scheduling::model::Pod {
    let mut p = labeled(pod(&format!("db-{i}"), 1500, GI), &[("app", "db")]);
    p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
    p
}

#[test]
fn pods_kept_apart_among_themselves_are_in_the_bound_others_make_it_loose() {
    let web: Vec<_> = (0..6).map(|i| pod(&format!("web-{i}"), 1500, GI)).collect();
    let mut pods: Vec<_> = (0..4).map(db_replica).collect();
    pods.extend(web.iter().cloned());
    let plan = solve(&snapshot(pods, vec![lumpy_pool()]), &owners_kept());
    let stats = plan.optimizer.clone().unwrap();
    assert_eq!((stats.pods_fixed, stats.pods_fixed_apart), (4, 4));
    assert!(matches!(plan.bound_gap(), Some(BoundGap::Relative(_))));
    // Four nodes at least, each a "mid" at 0.20 at best.
    assert!(plan.lower_bound.unwrap() >= 4.0 * 0.20 - 1e-6);

    // A pod labelled app=db without the term: the replicas' terms keep it off their nodes
    // too, which the node count does not model.
    let mut pods: Vec<_> = (0..4).map(db_replica).collect();
    pods.push(labeled(pod("db-sidecar", 100, GI), &[("app", "db")]));
    let plan = solve(&snapshot(pods, vec![lumpy_pool()]), &owners_kept());
    let stats = plan.optimizer.clone().unwrap();
    assert_eq!(stats.pods_fixed_apart, 0);
    assert_eq!(
        plan.bound_gap(),
        Some(BoundGap::Loose {
            pods: stats.pods_fixed
        })
    );
}

#[test]
fn a_group_never_gets_the_work_another_left_over() {
    // Two pools, so two groups of 150 pods: identical pods on a single type (packed at
    // once, far under its share) and pods of assorted sizes on 400 types (which would
    // spend any work it is given). The second group is given its pods' share of the
    // whole, not what the first left.
    let mut easy = pool("easy");
    easy.labels = [("team".to_owned(), "easy".to_owned())].into();
    easy.instance_types = on_demand_types(&[("only", 8, 32, 0.40)]);
    let mut hard = pool("hard");
    hard.weight = 10;
    hard.instance_types = benchmark_instance_types();
    let mut pods: Vec<_> = (0..150)
        .map(|i| {
            let mut p = pod(&format!("easy-{i}"), 1900, 7 * GI);
            p.node_selector = [("team".to_owned(), "easy".to_owned())].into();
            p
        })
        .collect();
    pods.extend((0..150).map(|i| {
        pod(
            &format!("hard-{i}"),
            [100, 250, 500, 1000, 1500][i % 5],
            [256, 512, 1024, 2048, 4096, 300][i % 6] * MI,
        )
    }));
    let plan = solve(&snapshot(pods, vec![easy, hard]), &SolveOptions::default());
    let work = plan.optimizer.unwrap().group_work;
    assert_eq!(work.len(), 2, "{work:?}");
    let (first, second) = (work[0], work[1]);
    // The first group is given its share and leaves most of it.
    assert!(
        first.allowed > 0 && first.spent < first.allowed / 2,
        "{work:?}"
    );
    // Its leftover does not raise the second group's allowance past its own share.
    let share = first.allowed as f64 * second.pods as f64 / first.pods as f64;
    assert!(second.allowed as f64 <= share + 1.0, "{work:?}");
    // It spends it all; the request a budget refuses is counted too, so a little more.
    assert!(second.spent >= second.allowed, "{work:?}");
    assert!(
        second.spent <= second.allowed + second.allowed / 100,
        "{work:?}"
    );
}

#[test]
fn a_proven_bound_keeps_each_pod_whole_and_the_pods_kept_apart_on_nodes_of_their_own() {
    // Two small replicas kept apart and a 1.8-cpu pod; a 1-cpu node at 1.0 and a 2-cpu node
    // at 1.5 (about 0.94 and 1.93 cpu allocatable). The big pod and one replica fill the
    // 2-cpu node, the other replica needs a node of its own: 2.5 at least. The default bound
    // spreads the demand fractionally over the two nodes every plan has (about 2.06); the
    // proven one knows each node's pods.
    let mut p = pool("default");
    p.instance_types = on_demand_types(&[("small", 1, 4, 1.0), ("large", 2, 8, 1.5)]);
    let replica = |i: usize| {
        let mut r = labeled(pod(&format!("db-{i}"), 100, GI / 4), &[("app", "db")]);
        r.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
        r
    };
    let pods = vec![replica(0), replica(1), pod("batch", 1800, GI)];
    let snap = snapshot(pods, vec![p]);
    let default = solve(&snap, &SolveOptions::default());
    let mut options = SolveOptions::default();
    options.optimizer.prove_bound = true;
    let proven = solve(&snap, &options);
    assert_eq!(proven.new_node_claims.len(), default.new_node_claims.len());
    let (low, high) = (default.lower_bound.unwrap(), proven.lower_bound.unwrap());
    assert!(low < 2.2, "default bound {low}");
    assert!(high > 2.5 - 1e-6, "proven bound {high}");
    let price: f64 = proven.new_node_claims.iter().map(|c| c.price).sum();
    assert!(
        high <= price + 1e-9,
        "bound {high} above the plan's {price}"
    );
}

#[test]
fn re_packing_owners_jointly_takes_no_work_from_the_other_groups() {
    // Replicas kept apart by hostname anti-affinity, web pods beside them and a second
    // pool's pods: the groups without owners (and the owners' group, counted without its
    // owners) are given exactly the work they get with the owners kept in place; the joint
    // packing of the owners draws on a budget of its own.
    let mut team = pool("team");
    team.labels = [("team".to_owned(), "a".to_owned())].into();
    team.instance_types = benchmark_instance_types();
    let mut default = pool("default");
    default.instance_types = benchmark_instance_types();
    let mut pods: Vec<_> = (0..6)
        .map(|i| {
            let mut p = labeled(pod(&format!("db-{i}"), 3000, 6 * GI), &[("app", "db")]);
            p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
            p
        })
        .collect();
    pods.extend((0..60).map(|i| {
        pod(
            &format!("web-{i}"),
            [100, 250, 500, 1000][i % 4],
            [256, 512, 1024, 2048, 300][i % 5] * MI,
        )
    }));
    pods.extend((0..40).map(|i| {
        let mut p = pod(
            &format!("team-{i}"),
            [200, 700, 1500][i % 3],
            [1, 3, 5][i % 3] * GI,
        );
        p.node_selector = [("team".to_owned(), "a".to_owned())].into();
        p
    }));
    let s = snapshot(pods, vec![default, team]);
    let shares = |plan: &Plan| -> Vec<(usize, u64)> {
        let stats = plan.optimizer.as_ref().unwrap();
        stats
            .group_work
            .iter()
            .filter(|w| w.pods > 0)
            .map(|w| (w.pods, w.allowed))
            .collect()
    };
    let joint = solve(&s, &SolveOptions::default());
    let kept = solve(&s, &owners_kept());
    assert!(shares(&kept).len() >= 2, "{:?}", shares(&kept));
    assert_eq!(shares(&joint), shares(&kept));
    assert!(joint.total_price <= kept.total_price + 1e-9);
}
