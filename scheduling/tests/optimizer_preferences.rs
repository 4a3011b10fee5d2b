//! Preferences and the optimiser: once the greedy pass relaxed a pod's preferences
//! (`--preference-policy respect`), the pod is re-packed like any other, within the
//! constraints still in force; preferences the greedy kept stay kept.

use karpenter_scheduling::labels::ZONE;
use karpenter_scheduling::model::{
    NodePool, Pod, PreferredSchedulingTerm, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::solver::PreferencePolicy;
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use karpenter_testing::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const RACK: &str = "example.com/rack";

fn with_policy(policy: PreferencePolicy) -> SolveOptions {
    SolveOptions {
        preference_policy: policy,
        ..SolveOptions::default()
    }
}

/// A 16-cpu type dearer per cpu than a 4-cpu one: the greedy pass's claims grow onto it,
/// a re-packing uses the small ones.
fn lumpy_pool() -> NodePool {
    let mut p = pool("default");
    p.instance_types = on_demand_types(&[
        ("small", 2, 8, 0.12),
        ("mid", 4, 16, 0.20),
        ("big", 16, 64, 1.00),
    ]);
    p
}

fn prefer_zone(p: &mut Pod, zone: &str) {
    p.affinity.node_affinity.preferred = vec![PreferredSchedulingTerm {
        weight: 50,
        preference: affinity_terms(&[nsr(ZONE, Operator::In, &[zone])]),
    }];
}

/// Preferences no node can meet: a zone the pool does not have, affinity to pods that do
/// not run, a spread over a label no node carries.
fn unreachable_preferences(mut p: Pod) -> Pod {
    p = labeled(p, &[("app", "web")]);
    prefer_zone(&mut p, "zone-x");
    p.affinity.pod_affinity.preferred = vec![WeightedPodAffinityTerm {
        weight: 10,
        term: term(ZONE, &[("app", "db")]),
    }];
    p.topology_spread_constraints = vec![spread(
        RACK,
        1,
        &[("app", "web")],
        WhenUnsatisfiable::ScheduleAnyway,
    )];
    p
}

/// Every preference relaxes: the greedy pass places each pod as if it had none, and the
/// optimiser re-packs them exactly as it does with the preferences ignored.
#[test]
fn pods_whose_preferences_all_relax_are_repacked() {
    let pods = (0..24)
        .map(|i| unreachable_preferences(pod(&format!("web{i}"), 900, GI)))
        .collect();
    let s = snapshot(pods, vec![lumpy_pool()]);
    let respect = solve(&s, &with_policy(PreferencePolicy::Respect));
    let ignore = solve(&s, &with_policy(PreferencePolicy::Ignore));
    assert!(respect.unschedulable.is_empty());
    assert!(
        respect.total_price < respect.greedy_price.unwrap() - 1e-9,
        "not re-packed: {} = greedy",
        respect.total_price
    );
    assert!((respect.total_price - ignore.total_price).abs() < 1e-9);
    assert_eq!(claims_of(&respect), claims_of(&ignore));
}

/// A preference that holds is kept: pods preferring zone-b stay there while the pods
/// around them, whose preferences relaxed, are re-packed across zones.
#[test]
fn kept_preferences_stay_kept() {
    let mut pods: Vec<Pod> = (0..12)
        .map(|i| unreachable_preferences(pod(&format!("web{i}"), 900, GI)))
        .collect();
    for i in 0..8 {
        let mut p = pod(&format!("b{i}"), 900, GI);
        prefer_zone(&mut p, ZONES[1]);
        pods.push(p);
    }
    let s = snapshot(pods, vec![lumpy_pool()]);
    let plan = solve(&s, &with_policy(PreferencePolicy::Respect));
    assert!(plan.total_price < plan.greedy_price.unwrap() - 1e-9);
    for c in &plan.new_node_claims {
        if c.pods.iter().any(|k| k.name.starts_with('b')) {
            let zones: Vec<&str> = c.requirements.get(ZONE).unwrap().values().collect();
            assert_eq!(zones, [ZONES[1]], "{:?}", c.pods);
        }
    }
}

/// Many replicas that prefer a zone to themselves: the first takes a node whose zone is
/// not yet known, so every other finds its preference unmet and relaxes it. They were
/// placed after the pod that keeps the preference, which chose its node without them, so
/// they are re-packed; the one that keeps it stays where it was.
#[test]
fn pods_placed_after_an_owner_of_a_preference_are_repacked() {
    let pods: Vec<Pod> = (0..24)
        .map(|i| {
            let mut p = labeled(pod(&format!("web{i:02}"), 900, GI), &[("app", "web")]);
            p.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
                weight: 10,
                term: term(ZONE, &[("app", "web")]),
            }];
            p
        })
        .collect();
    let s = snapshot(pods, vec![lumpy_pool()]);
    let greedy = solve_greedy(&s);
    let plan = solve(&s, &with_policy(PreferencePolicy::Respect));
    assert!(
        plan.total_price < greedy.total_price - 1e-9,
        "{} against greedy {}",
        plan.total_price,
        greedy.total_price
    );
    let stats = plan.optimizer.unwrap();
    assert_eq!(stats.pods_fixed, 1, "{stats:?}");
}

/// A pod placed before the owner of a preference that counts it stays put: the owner chose
/// its zone knowing where that pod was. `early` (the largest pod, placed first) shares a
/// zone-a claim with a pod pinned there; `late` prefers a zone without `app=web` pods, so
/// it avoids zone-a. With a second NodePool the optimiser regroups free pods by pool, so
/// `early` would be free to leave zone-a, and could join `late`, were it not for the order.
#[test]
fn a_pod_an_owner_saw_stays_where_it_saw_it() {
    let mut pinned = pod("pinned", 3000, GI);
    pinned.node_selector.insert(ZONE.into(), ZONES[0].into());
    let early = labeled(pod("early", 2500, GI), &[("app", "web")]);
    let mut late = labeled(pod("late", 500, GI), &[("app", "web")]);
    late.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
        weight: 10,
        term: term(ZONE, &[("app", "web")]),
    }];
    let mut first = lumpy_pool();
    first.weight = 10;
    let mut other = lumpy_pool();
    other.name = "other".into();
    let s = snapshot(vec![pinned, early, late], vec![first, other]);
    let greedy = solve_greedy(&s);
    let zone_of = |plan: &Plan, name: &str| -> Vec<String> {
        let c = plan
            .new_node_claims
            .iter()
            .find(|c| c.pods.iter().any(|k| k.name == name))
            .unwrap();
        c.requirements
            .get(ZONE)
            .map(|r| r.values().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    assert_eq!(zone_of(&greedy, "early"), [ZONES[0]]);
    assert!(!zone_of(&greedy, "late").contains(&ZONES[0].to_string()));
    let plan = solve(&s, &with_policy(PreferencePolicy::Respect));
    let late_zones = zone_of(&plan, "late");
    let early_zones = zone_of(&plan, "early");
    assert!(
        early_zones.len() == 1 && !late_zones.contains(&early_zones[0]),
        "early in {early_zones:?}, late in {late_zones:?}"
    );
}

/// What one generated pod prefers.
#[derive(Debug, Clone)]
struct Spec {
    cpu_millis: i64,
    memory_gib: i64,
    /// A preferred zone: one of [`ZONES`], or `zone-x`, which no type offers.
    zone: Option<usize>,
    /// A preferred zone anti-affinity to every `app=web` pod, itself included.
    apart: bool,
    /// A ScheduleAnyway spread over the zones (or, when false, over a rack label no node
    /// carries).
    spread: Option<bool>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![100i64..1200, 1200i64..3500],
        1i64..5,
        prop::option::of(0..=ZONES.len()),
        prop::bool::weighted(0.2),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(cpu_millis, memory_gib, zone, apart, spread)| Spec {
            cpu_millis,
            memory_gib,
            zone,
            apart,
            spread,
        })
}

fn pod_of(i: usize, s: &Spec) -> Pod {
    let mut p = labeled(
        pod(&format!("p{i}"), s.cpu_millis, s.memory_gib * GI),
        &[("app", "web")],
    );
    if let Some(z) = s.zone {
        prefer_zone(&mut p, ZONES.get(z).copied().unwrap_or("zone-x"));
    }
    if s.apart {
        p.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
            weight: 10,
            term: term(ZONE, &[("app", "web")]),
        }];
    }
    if let Some(zones) = s.spread {
        let key = if zones { ZONE } else { RACK };
        p.topology_spread_constraints = vec![spread(
            key,
            1,
            &[("app", "web")],
            WhenUnsatisfiable::ScheduleAnyway,
        )];
    }
    p
}

/// The zones each pod's claim may be in.
fn zones(plan: &Plan) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for c in &plan.new_node_claims {
        let z: Vec<String> = c
            .requirements
            .get(ZONE)
            .map(|r| r.values().map(str::to_owned).collect())
            .unwrap_or_default();
        for k in &c.pods {
            out.insert(k.name.clone(), z.clone());
        }
    }
    out
}

fn valid(s: &Snapshot, plan: &Plan) -> Result<(), TestCaseError> {
    let by_name: BTreeMap<&str, &Pod> = s
        .pending_pods
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let pool = &s.node_pools[0];
    let mut total = 0.0;
    for c in &plan.new_node_claims {
        let mut load = c.daemon_overhead.clone();
        for k in &c.pods {
            load.add_assign(&by_name[k.name.as_str()].requests);
            load.pods += 1;
        }
        prop_assert_eq!(&c.requests, &load);
        for o in c.instance_type_options.iter() {
            let it = pool
                .instance_types
                .iter()
                .find(|it| *it.name == *o.name)
                .unwrap();
            prop_assert!(load.fits(&it.allocatable()), "over {}", o.name);
            prop_assert!(c.requirements.get(ZONE).is_none_or(|r| r.has(&o.zone)));
        }
        total += c.price;
    }
    prop_assert!((plan.total_price - total).abs() < 1e-9);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Pods with preferences that hold and preferences that relax: the plan is valid and
    /// never dearer than the greedy one; a pod preferring a zone that exists (which the
    /// greedy always meets unless a spread of the pod is to be relaxed, which comes after)
    /// ends in it; a pod whose only preference is a zone spread (which always holds) keeps
    /// the zone the greedy chose.
    #[test]
    fn relaxed_pods_are_repacked_only_within_their_relaxed_constraints(
        specs in prop::collection::vec(spec(), 1..30),
    ) {
        let pods = specs.iter().enumerate().map(|(i, s)| pod_of(i, s)).collect();
        let s = snapshot(pods, vec![lumpy_pool()]);
        let greedy = solve_greedy(&s);
        let plan = solve(&s, &with_policy(PreferencePolicy::Respect));
        valid(&s, &plan)?;
        prop_assert_eq!(plan.placed_pods(), greedy.placed_pods());
        prop_assert!(plan.total_price <= greedy.total_price + 1e-9);
        let before = zones(&greedy);
        let after = zones(&plan);
        for (i, spec) in specs.iter().enumerate() {
            let name = format!("p{i}");
            // Relaxed before spreads, a zone preference holds only on a pod without one.
            if let Some(z) = spec.zone.and_then(|z| ZONES.get(z)).filter(|_| spec.spread.is_none()) {
                prop_assert_eq!(&before[&name], &vec![z.to_string()]);
                prop_assert_eq!(&after[&name], &vec![z.to_string()], "{} left its preferred zone", name);
            }
            if spec.spread == Some(true) && spec.zone.is_none() && !spec.apart {
                prop_assert_eq!(before[&name].len(), 1);
                prop_assert_eq!(&after[&name], &before[&name], "{} left its spread's zone", name);
            }
        }
    }

    /// When no preference of any pod can be met, respecting them costs nothing: the plan
    /// is the one that ignores them.
    #[test]
    fn unreachable_preferences_cost_nothing(
        requests in prop::collection::vec((100i64..3500, 1i64..5), 1..30),
    ) {
        let pods = requests
            .iter()
            .enumerate()
            .map(|(i, &(cpu, gib))| unreachable_preferences(pod(&format!("p{i}"), cpu, gib * GI)))
            .collect();
        let s = snapshot(pods, vec![lumpy_pool()]);
        let respect = solve(&s, &with_policy(PreferencePolicy::Respect));
        let ignore = solve(&s, &with_policy(PreferencePolicy::Ignore));
        valid(&s, &respect)?;
        prop_assert_eq!(claims_of(&respect), claims_of(&ignore));
        prop_assert!((respect.total_price - ignore.total_price).abs() < 1e-9);
    }
}
