//! Property tests for `solve`: capacity, constraint satisfaction and determinism on random
//! pods and pools.

use karpenter_scheduling::labels::ZONE;
use karpenter_scheduling::model::Pod;
use karpenter_scheduling::{Plan, Snapshot};
use karpenter_testing::strategies::{SnapshotMix, snapshot_spec};
use karpenter_testing::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn check(s: &Snapshot, plan: &Plan) {
    let by_name: BTreeMap<&str, &Pod> = s
        .pending_pods
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    assert_eq!(
        plan.placed_pods() + plan.unschedulable.len(),
        s.pending_pods.len()
    );
    let mut spread_counts: BTreeMap<String, i64> =
        ZONES.iter().map(|z| (z.to_string(), 0)).collect();
    let mut total = 0.0;
    for c in &plan.new_node_claims {
        assert!(!c.instance_type_options.is_empty());
        total += c.price;
        let pool = s.node_pools.iter().find(|p| p.name == c.node_pool).unwrap();
        for o in c.instance_type_options.iter() {
            let it = pool
                .instance_types
                .iter()
                .find(|it| *it.name == *o.name)
                .unwrap();
            let alloc = it.allocatable();
            assert!(
                c.requests.fits(&alloc),
                "claim over allocatable of {}",
                o.name
            );
            assert!(c.requirements.get(ZONE).is_none_or(|r| r.has(&o.zone)));
        }
        let pods: Vec<&Pod> = c.pods.iter().map(|k| by_name[k.name.as_str()]).collect();
        for p in &pods {
            if let Some(z) = p.node_selector.get(ZONE) {
                assert!(
                    c.instance_type_options.iter().all(|o| *o.zone == **z),
                    "zone selector violated"
                );
            }
            if !pool.taints.is_empty() {
                assert!(!p.tolerations.is_empty(), "untolerated taint");
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
    let max = spread_counts.values().max().unwrap();
    let min = spread_counts.values().min().unwrap();
    assert!(
        max - min <= 1,
        "zone spread skew exceeded: {spread_counts:?}"
    );
    assert!((plan.total_price - total).abs() < 1e-9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn plans_respect_capacity_and_constraints(spec in snapshot_spec(&SnapshotMix::default())) {
        let s = spec.snapshot();
        let plan = solve_default(&s);
        check(&s, &plan);
        prop_assert_eq!(plan, solve_default(&s));
    }
}
