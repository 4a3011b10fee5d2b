//! Property tests for the packing optimiser: on random pods, pools, DaemonSets and limits,
//! the optimised plan satisfies every constraint the greedy checks, costs no more than the
//! greedy plan, sits above its own lower bound, and is deterministic.

use karpenter_scheduling::labels::ZONE;
use karpenter_scheduling::model::Pod;
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::solver::OptimizerOptions;
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use karpenter_testing::strategies::{PodMix, SnapshotMix, snapshot_spec};
use karpenter_testing::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Up to 44 pods, skewed towards small cpu requests, some with host ports or a GPU; half
/// of the snapshots with a DaemonSet, half with a cpu limit on the pool `default`.
fn mix() -> SnapshotMix {
    SnapshotMix {
        pods: PodMix {
            cpu_millis: vec![100..1000, 1000..7000],
            memory_mib: 64..12_000,
            anti_affinity: 0.15,
            zone_spread: 0.15,
            host_port: 0.1,
            gpu: 0.05,
        },
        pod_count: 1..45,
        daemon_cpu_millis: Some(50..600),
        cpu_limit_cores: Some(8..80),
    }
}

fn greedy(s: &Snapshot) -> Plan {
    let options = SolveOptions {
        optimizer: OptimizerOptions {
            enabled: false,
            ..OptimizerOptions::default()
        },
        ..SolveOptions::default()
    };
    solve(s, &options)
}

fn pod_requests(p: &Pod) -> Resources {
    let mut r = p.requests.clone();
    r.pods = 1;
    r
}

/// Every constraint the greedy enforces, checked on the plan's output alone.
fn check(s: &Snapshot, plan: &Plan) {
    let by_name: BTreeMap<&str, &Pod> = s
        .pending_pods
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let mut seen = BTreeSet::new();
    for k in plan
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter())
        .chain(plan.existing.iter().flat_map(|n| n.pods.iter()))
        .chain(plan.unschedulable.iter().map(|u| &u.pod))
    {
        assert!(seen.insert(k.name.clone()), "{} accounted twice", k.name);
    }
    assert_eq!(seen.len(), s.pending_pods.len(), "every pod accounted for");

    let mut spread_counts: BTreeMap<String, i64> =
        ZONES.iter().map(|z| (z.to_string(), 0)).collect();
    let mut total = 0.0;
    let mut pool_cpu: BTreeMap<&str, i64> = BTreeMap::new();
    for c in &plan.new_node_claims {
        assert!(!c.instance_type_options.is_empty());
        assert_eq!(c.price, c.instance_type_options[0].price);
        assert!(
            c.instance_type_options
                .windows(2)
                .all(|w| w[0].price <= w[1].price)
        );
        total += c.price;
        let pool = s.node_pools.iter().find(|p| p.name == c.node_pool).unwrap();
        let pods: Vec<&Pod> = c.pods.iter().map(|k| by_name[k.name.as_str()]).collect();
        let mut want = c.daemon_overhead.clone();
        for p in &pods {
            want.add_assign(&pod_requests(p));
        }
        assert_eq!(c.requests, want, "requests = pods + daemon overhead");
        // The DaemonSet tolerates nothing: it runs on every untainted node.
        if let Some(cpu) = s.daemon_sets.first().map(|d| d.pod.requests.cpu_millis)
            && pool.taints.is_empty()
        {
            assert_eq!(
                c.daemon_overhead.cpu_millis, cpu,
                "daemon counted per claim"
            );
        }
        let mut max_cpu = 0;
        for o in c.instance_type_options.iter() {
            let it = pool
                .instance_types
                .iter()
                .find(|it| *it.name == *o.name)
                .unwrap();
            assert!(
                c.requests.fits(&it.allocatable()),
                "claim over allocatable of {}",
                o.name
            );
            assert!(it.requirements.intersects(&c.requirements).is_ok());
            assert!(c.requirements.get(ZONE).is_none_or(|r| r.has(&o.zone)));
            max_cpu = max_cpu.max(it.capacity.cpu_millis);
        }
        *pool_cpu.entry(pool.name.as_str()).or_default() += max_cpu;
        let mut ports = BTreeSet::new();
        for p in &pods {
            if let Some(z) = p.node_selector.get(ZONE) {
                let r = c.requirements.get(ZONE).expect("zone pinned");
                assert!(r.has(z) && r.len() == 1, "zone selector violated");
            }
            if !pool.taints.is_empty() {
                assert!(!p.tolerations.is_empty(), "untolerated taint");
            }
            for hp in &p.host_ports {
                assert!(ports.insert(hp.port), "host port clash on one claim");
            }
            if !p.affinity.pod_anti_affinity.required.is_empty() {
                let app = &p.labels["app"];
                let same = pods.iter().filter(|q| &q.labels["app"] == app).count();
                assert_eq!(same, 1, "anti-affinity violated");
            }
            if p.labels["app"] == "spread" {
                let zones: Vec<&str> = c.requirements.get(ZONE).unwrap().values().collect();
                assert_eq!(zones.len(), 1, "spread pods go to a pinned zone");
                *spread_counts.get_mut(zones[0]).unwrap() += 1;
            }
        }
    }
    for p in &s.node_pools {
        if let Some(limit) = p.limits.get("cpu") {
            let used = pool_cpu.get(p.name.as_str()).copied().unwrap_or(0);
            assert!(
                used <= limit.milli_value(),
                "NodePool {} over its cpu limit",
                p.name
            );
        }
    }
    let max = spread_counts.values().max().unwrap();
    let min = spread_counts.values().min().unwrap();
    assert!(
        max - min <= 1,
        "zone spread skew exceeded: {spread_counts:?}"
    );
    assert!((plan.total_price - total).abs() < 1e-9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn optimised_plans_are_valid_cheaper_and_deterministic(spec in snapshot_spec(&mix())) {
        let s = spec.snapshot();
        let g = greedy(&s);
        let plan = solve(&s, &SolveOptions::default());
        check(&s, &g);
        check(&s, &plan);
        prop_assert_eq!(plan.placed_pods(), g.placed_pods());
        prop_assert_eq!(&plan.unschedulable, &g.unschedulable);
        prop_assert_eq!(&plan.existing, &g.existing);
        let greedy_price = plan.greedy_price.expect("greedy price reported");
        prop_assert!((greedy_price - g.total_price).abs() < 1e-9);
        prop_assert!(plan.total_price <= g.total_price + 1e-9);
        let bound = plan.lower_bound.expect("bound computed");
        prop_assert!(bound <= plan.total_price + 1e-9, "bound {} above price {}", bound, plan.total_price);
        prop_assert_eq!(&plan, &solve(&s, &SolveOptions::default()));
    }
}
