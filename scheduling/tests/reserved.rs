//! Reserved capacity in the scheduler (upstream's reservation manager and
//! `NodeClaim.offeringsToReserve`): claims hold reservations, never more than a reservation
//! has room for, and launch as reserved; the rest fall back as the mode and the NodePool
//! allow.

use karpenter_scheduling::labels::{
    AWS_CAPACITY_RESERVATION_ID, AWS_CAPACITY_RESERVATION_TYPE, CAPACITY_TYPE,
    CAPACITY_TYPE_RESERVED, HOSTNAME, ZONE,
};
use karpenter_scheduling::model::{InstanceType, NodePool, Offering, Reservation};
use karpenter_scheduling::requirements::{Operator, Requirement, Requirements};
use karpenter_scheduling::{NewNodeClaim, Plan, ReservedOfferingMode, SolveOptions, solve};
use karpenter_testing::{GI, InstanceTypeBuilder, labeled, pod, snapshot, term};
use std::sync::Arc;

/// On-demand price divided as Karpenter's AWS provider prices reserved offerings.
const RESERVED_DIVISOR: f64 = 10_000_000.0;

/// `small` (2 cores, 0.10 on demand, 0.04 spot) and `medium` (4 cores, 0.20, 0.08) in
/// zone-a and zone-b, `small` with a reserved offering in zone-a for each
/// `(id, capacity, available)`.
fn types(reservations: &[(&str, u32, bool)]) -> Vec<Arc<InstanceType>> {
    let build = |name: &str, cores: i64, price: f64| {
        InstanceTypeBuilder::new(name, cores, 2 * cores)
            .zones(&["zone-a", "zone-b"])
            .on_demand(price)
            .spot_at(0.4)
            .build()
    };
    let mut small = InstanceType::clone(&build("small", 2, 0.10));
    for &(id, capacity, available) in reservations {
        small.offerings.push(Offering {
            zone: "zone-a".into(),
            capacity_type: CAPACITY_TYPE_RESERVED.into(),
            price: 0.10 / RESERVED_DIVISOR,
            available,
            reservation: Some(Reservation {
                id: id.into(),
                id_label: AWS_CAPACITY_RESERVATION_ID.into(),
                capacity,
                labels: [(
                    AWS_CAPACITY_RESERVATION_TYPE.to_string(),
                    "default".to_string(),
                )]
                .into(),
            }),
        });
    }
    if !reservations.is_empty() {
        small.requirements.remove(CAPACITY_TYPE);
        small.requirements.add(
            Requirement::new(
                CAPACITY_TYPE,
                Operator::In,
                ["on-demand", "reserved", "spot"],
            )
            .unwrap(),
        );
    }
    vec![Arc::new(small), build("medium", 4, 0.20)]
}

fn pool_over(types: Vec<Arc<InstanceType>>, capacity_types: &[&str]) -> NodePool {
    let mut requirements = Requirements::new();
    if !capacity_types.is_empty() {
        requirements.add(
            Requirement::new(CAPACITY_TYPE, Operator::In, capacity_types.iter().copied()).unwrap(),
        );
    }
    NodePool {
        name: "default".into(),
        requirements,
        instance_types: types,
        ..NodePool::default()
    }
}

/// `n` pods of 1.5 cores: one per `small`.
fn whole_node_pods(n: usize) -> Vec<karpenter_scheduling::Pod> {
    (0..n).map(|i| pod(&format!("p{i}"), 1500, GI)).collect()
}

fn options(mode: ReservedOfferingMode, optimizer: bool) -> SolveOptions {
    let mut o = SolveOptions {
        reserved_offering_mode: mode,
        ..SolveOptions::default()
    };
    o.optimizer.enabled = optimizer;
    o
}

/// The reservation ids a claim's requirements pin it to.
fn held(c: &NewNodeClaim) -> Vec<String> {
    c.requirements
        .get(AWS_CAPACITY_RESERVATION_ID)
        .map(|r| r.values().map(str::to_string).collect())
        .unwrap_or_default()
}

fn reserved_claims(plan: &Plan) -> Vec<&NewNodeClaim> {
    plan.new_node_claims
        .iter()
        .filter(|c| !held(c).is_empty())
        .collect()
}

fn allows_reserved(c: &NewNodeClaim) -> bool {
    c.requirements
        .get(CAPACITY_TYPE)
        .is_none_or(|r| r.has(CAPACITY_TYPE_RESERVED))
}

/// The claim cannot launch as reserved, and every option it ranks is `capacity_type`.
fn assert_fell_back(c: &NewNodeClaim, capacity_type: &str) {
    assert!(!allows_reserved(c), "{:?}", c.requirements);
    assert!(
        c.instance_type_options
            .iter()
            .all(|o| &*o.capacity_type == capacity_type)
    );
}

#[test]
fn a_pool_that_allows_reserved_uses_the_reservation_first_and_pins_the_claim_to_it() {
    let s = snapshot(
        whole_node_pods(2),
        vec![pool_over(types(&[("cr-1", 2, true)]), &[])],
    );
    let plan = solve(&s, &SolveOptions::default());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.new_node_claims.len(), 2);
    for c in &plan.new_node_claims {
        // As upstream's FinalizeScheduling writes it.
        let ct = c.requirements.get(CAPACITY_TYPE).unwrap();
        assert_eq!(ct.operator(), Operator::In);
        assert_eq!(ct.values().collect::<Vec<_>>(), ["reserved"]);
        assert_eq!(held(c), ["cr-1"]);
        // Only the reserved offering remains, at the reservation's price.
        assert!(
            c.instance_type_options
                .iter()
                .all(|o| &*o.capacity_type == "reserved" && &*o.zone == "zone-a")
        );
        assert_eq!(&*c.instance_type_options[0].name, "small");
        assert!(c.price < 0.10 / 1000.0);
        assert!(c.requirements.get(ZONE).is_none_or(|z| z.has("zone-a")));
    }
}

#[test]
fn strict_mode_promises_no_more_than_the_capacity_and_defers_the_rest() {
    let s = snapshot(
        whole_node_pods(4),
        vec![pool_over(types(&[("cr-1", 2, true)]), &[])],
    );
    let plan = solve(&s, &options(ReservedOfferingMode::Strict, false));
    assert_eq!(reserved_claims(&plan).len(), 2);
    assert_eq!(plan.new_node_claims.len(), 2);
    assert_eq!(plan.unschedulable.len(), 2);
    for u in &plan.unschedulable {
        assert!(u.reason.contains("could not be reserved"), "{}", u.reason);
        assert!(u.deferred);
    }
}

#[test]
fn fallback_mode_launches_the_rest_as_another_capacity_type() {
    // One pod per node (hostname anti-affinity), so no claim outgrows `small`.
    let pods = whole_node_pods(4)
        .into_iter()
        .map(|p| {
            let mut p = labeled(p, &[("app", "x")]);
            p.affinity
                .pod_anti_affinity
                .required
                .push(term(HOSTNAME, &[("app", "x")]));
            p
        })
        .collect();
    let s = snapshot(pods, vec![pool_over(types(&[("cr-1", 2, true)]), &[])]);
    let plan = solve(&s, &options(ReservedOfferingMode::Fallback, false));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.new_node_claims.len(), 4);
    assert_eq!(reserved_claims(&plan).len(), 2);
    for c in plan.new_node_claims.iter().filter(|c| held(c).is_empty()) {
        assert_fell_back(c, "spot");
    }
}

#[test]
fn a_reservation_reported_used_up_falls_back_to_the_pools_other_capacity_types() {
    // The provider marks a reservation without room unavailable (upstream's AWS provider,
    // and ours after a launch fails): the next round launches on demand, as the pool says.
    let s = snapshot(
        whole_node_pods(2),
        vec![pool_over(
            types(&[("cr-1", 0, false)]),
            &["on-demand", "reserved"],
        )],
    );
    let plan = solve(&s, &SolveOptions::default());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(reserved_claims(&plan).is_empty());
    for c in &plan.new_node_claims {
        assert_fell_back(c, "on-demand");
    }
}

#[test]
fn a_reserved_only_pool_takes_what_the_reservation_holds_and_nothing_more() {
    let s = snapshot(
        whole_node_pods(3),
        vec![pool_over(types(&[("cr-1", 1, true)]), &["reserved"])],
    );
    let strict = solve(&s, &options(ReservedOfferingMode::Strict, true));
    assert_eq!(reserved_claims(&strict).len(), 1);
    assert_eq!(strict.new_node_claims.len(), 1);
    assert_eq!(strict.unschedulable.len(), 2);
    let fallback = solve(&s, &options(ReservedOfferingMode::Fallback, true));
    assert!(strict.unschedulable.iter().all(|u| u.deferred));
    assert_eq!(fallback.new_node_claims.len(), 1);
    assert_eq!(fallback.unschedulable.len(), 2);
    // Fallback found nothing to fall back to: that is unschedulable, not deferred.
    assert!(fallback.unschedulable.iter().all(|u| !u.deferred));
    assert!(
        fallback.unschedulable[0]
            .reason
            .contains("already promised"),
        "{}",
        fallback.unschedulable[0].reason
    );
}

#[test]
fn with_the_reserved_capacity_gate_off_no_claim_launches_as_reserved() {
    let s = snapshot(
        whole_node_pods(2),
        vec![pool_over(types(&[("cr-1", 5, true)]), &[])],
    );
    let plan = solve(
        &s,
        &SolveOptions {
            reserved_capacity: false,
            ..SolveOptions::default()
        },
    );
    assert!(plan.unschedulable.is_empty());
    assert!(reserved_claims(&plan).is_empty());
    for c in &plan.new_node_claims {
        assert!(!allows_reserved(c));
        assert!(
            c.instance_type_options
                .iter()
                .all(|o| &*o.capacity_type != "reserved")
        );
    }
    // A reserved-only pool then has nothing to launch.
    let only = snapshot(
        whole_node_pods(1),
        vec![pool_over(types(&[("cr-1", 5, true)]), &["reserved"])],
    );
    let plan = solve(
        &only,
        &SolveOptions {
            reserved_capacity: false,
            ..SolveOptions::default()
        },
    );
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(plan.unschedulable[0].reason.contains("ReservedCapacity"));
}

#[test]
fn a_reservation_two_pools_share_is_counted_once_at_its_smallest_capacity() {
    let mut a = pool_over(types(&[("cr-1", 3, true)]), &[]);
    a.name = "a".into();
    let mut b = pool_over(types(&[("cr-1", 1, true)]), &[]);
    b.name = "b".into();
    let mut pods = whole_node_pods(2);
    pods[1]
        .node_selector
        .insert(karpenter_scheduling::labels::NODEPOOL.into(), "b".into());
    pods[0]
        .node_selector
        .insert(karpenter_scheduling::labels::NODEPOOL.into(), "a".into());
    let plan = solve(
        &snapshot(pods, vec![a, b]),
        &options(ReservedOfferingMode::Fallback, false),
    );
    assert_eq!(plan.new_node_claims.len(), 2);
    assert_eq!(reserved_claims(&plan).len(), 1);
}

#[test]
fn no_plan_promises_a_reservation_more_instances_than_it_has() {
    // Pods of several sizes (several to a node, or one), both modes, optimiser on and off:
    // every reservation is named by at most as many claims as its capacity, and a claim
    // that names none cannot launch as reserved.
    for capacity in 0..4u32 {
        for n in 1..10usize {
            for mode in [ReservedOfferingMode::Strict, ReservedOfferingMode::Fallback] {
                for optimizer in [false, true] {
                    let pods: Vec<_> = (0..n)
                        .map(|i| pod(&format!("p{i}"), 300 + 400 * (i as i64 % 4), GI / 2))
                        .collect();
                    let pool = pool_over(
                        types(&[("cr-1", capacity, capacity > 0), ("cr-2", 1, true)]),
                        &[],
                    );
                    let s = snapshot(pods, vec![pool]);
                    let plan = solve(&s, &options(mode, optimizer));
                    for (id, cap) in [("cr-1", capacity), ("cr-2", 1)] {
                        let holding = plan
                            .new_node_claims
                            .iter()
                            .filter(|c| held(c).iter().any(|h| h == id))
                            .count();
                        assert!(
                            holding as u32 <= cap,
                            "{id}: {holding} claims > {cap} ({mode:?}, optimizer {optimizer}, {n} pods)"
                        );
                    }
                    for c in &plan.new_node_claims {
                        if held(c).is_empty() {
                            assert!(!allows_reserved(c));
                        }
                    }
                    if mode == ReservedOfferingMode::Fallback {
                        assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
                    }
                    if let Some(greedy) = plan.greedy_price {
                        // The optimiser keeps the greedy pass's reservations: never dearer,
                        // and every reservation the greedy plan used is still used.
                        assert!(plan.total_price <= greedy + 1e-9, "{plan:?}");
                        let mut without = options(mode, false);
                        without.optimizer.enabled = false;
                        let greedy_plan = solve(&s, &without);
                        assert_eq!(
                            reserved_claims(&plan).len(),
                            reserved_claims(&greedy_plan).len(),
                            "{mode:?}, {n} pods, capacity {capacity}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_pod_that_selects_a_reservation_goes_only_there() {
    let selecting = |key: &str, value: &str| {
        let mut p = pod("picky", 1500, GI);
        p.node_selector.insert(key.into(), value.into());
        p
    };
    let pool = || pool_over(types(&[("cr-1", 1, true), ("cr-2", 1, true)]), &[]);
    let plan = solve(
        &snapshot(
            vec![selecting(AWS_CAPACITY_RESERVATION_ID, "cr-2")],
            vec![pool()],
        ),
        &SolveOptions::default(),
    );
    assert_eq!(plan.new_node_claims.len(), 1);
    assert_eq!(held(&plan.new_node_claims[0]), ["cr-2"]);
    // Used up (as the provider reports it), there is nowhere else for it: the on-demand and
    // spot offerings carry no reservation id.
    let full = pool_over(types(&[("cr-2", 0, false)]), &[]);
    let plan = solve(
        &snapshot(
            vec![selecting(AWS_CAPACITY_RESERVATION_ID, "cr-2")],
            vec![full],
        ),
        &options(ReservedOfferingMode::Fallback, true),
    );
    assert!(plan.new_node_claims.is_empty(), "{plan:?}");
    assert_eq!(plan.unschedulable.len(), 1);
    // A pod that selects the reservation type needs a reserved node too.
    let plan = solve(
        &snapshot(
            vec![selecting(AWS_CAPACITY_RESERVATION_TYPE, "default")],
            vec![pool()],
        ),
        &SolveOptions::default(),
    );
    assert_eq!(reserved_claims(&plan).len(), 1);
}

/// Reserved offerings on `small` and `medium` in zone-a and zone-b (one reservation each,
/// same id in every pool, `capacities[k]` instances), as a provider publishes them.
fn with_reservations(pool: &mut NodePool, capacities: &[u32; 4]) {
    let mut k = 0;
    for it in &mut pool.instance_types {
        if it.name != "small" && it.name != "medium" {
            continue;
        }
        let mut copy = InstanceType::clone(it);
        let on_demand = copy
            .offering_price(Some("zone-a"), "on-demand")
            .expect("on-demand price");
        for zone in ["zone-a", "zone-b"] {
            copy.offerings.push(Offering {
                zone: zone.into(),
                capacity_type: CAPACITY_TYPE_RESERVED.into(),
                price: on_demand / RESERVED_DIVISOR,
                available: capacities[k] > 0,
                reservation: Some(Reservation {
                    id: format!("cr-{}-{zone}", copy.name),
                    id_label: AWS_CAPACITY_RESERVATION_ID.into(),
                    capacity: capacities[k],
                    labels: Default::default(),
                }),
            });
            k += 1;
        }
        let mut types: Vec<String> = copy
            .requirements
            .get(CAPACITY_TYPE)
            .unwrap()
            .values()
            .map(str::to_string)
            .collect();
        types.push("reserved".into());
        copy.requirements.remove(CAPACITY_TYPE);
        copy.requirements
            .add(Requirement::new(CAPACITY_TYPE, Operator::In, types).unwrap());
        *it = Arc::new(copy);
    }
}

fn property_mix() -> karpenter_testing::strategies::SnapshotMix {
    karpenter_testing::strategies::SnapshotMix::constrained(1..30)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Random pods (anti-affinity, zone spread, host ports, GPUs), two pools, DaemonSets
    /// and limits, with reservations of random sizes: in both modes and with the optimiser
    /// on or off, no reservation is named by more claims than it holds, a claim naming none
    /// cannot launch as reserved, one naming some offers only their reserved offerings, the
    /// optimiser is never dearer than greedy, and the plan is deterministic.
    #[test]
    fn reservations_are_never_over_promised(
        spec in karpenter_testing::strategies::snapshot_spec(&property_mix()),
        capacities in proptest::array::uniform4(0u32..4),
        fallback in proptest::bool::ANY,
        optimizer in proptest::bool::ANY,
    ) {
        let mut s = spec.snapshot();
        for pool in &mut s.node_pools {
            with_reservations(pool, &capacities);
        }
        let mode = if fallback { ReservedOfferingMode::Fallback } else { ReservedOfferingMode::Strict };
        let plan = solve(&s, &options(mode, optimizer));
        let mut named: std::collections::BTreeMap<String, u32> = Default::default();
        for c in &plan.new_node_claims {
            let ids = held(c);
            if ids.is_empty() {
                proptest::prop_assert!(!allows_reserved(c), "{:?}", c.requirements);
                proptest::prop_assert!(c.instance_type_options.iter().all(|o| &*o.capacity_type != "reserved"));
            } else {
                proptest::prop_assert!(c.instance_type_options.iter().all(|o| &*o.capacity_type == "reserved"));
                proptest::prop_assert!(!c.instance_type_options.is_empty());
            }
            for id in ids {
                *named.entry(id).or_default() += 1;
            }
        }
        for (id, n) in &named {
            let k = ["cr-small-zone-a", "cr-small-zone-b", "cr-medium-zone-a", "cr-medium-zone-b"]
                .iter()
                .position(|x| x == id)
                .expect("known reservation");
            proptest::prop_assert!(*n <= capacities[k], "{} named by {} claims, holds {}", id, n, capacities[k]);
        }
        if let Some(greedy) = plan.greedy_price {
            proptest::prop_assert!(plan.total_price <= greedy + 1e-9);
        }
        proptest::prop_assert!(plan.unschedulable.iter().all(|u| !u.deferred || mode == ReservedOfferingMode::Strict));
        proptest::prop_assert_eq!(&plan, &solve(&s, &options(mode, optimizer)));
    }
}
