//! Properties of re-pack consolidation over random fragmented clusters: it never breaks a
//! budget, a PodDisruptionBudget or `do-not-disrupt`, never raises the price whatever its
//! replacements launch as, never strands a pod (the replacements, whichever of their
//! options launches, hold every moved pod when a scheduler places them first-fit), acts only
//! when Karpenter's methods find nothing, and its commands validate against unchanged state.

use karpenter_cloudprovider::v1::{Budget, DisruptionReason};
use karpenter_disruption::budget::allowed_disruptions;
use karpenter_disruption::candidate::{do_not_disrupt_active, is_reschedulable};
use karpenter_disruption::{
    Command, ConsolidationMethod, DisruptionInput, RepackOptions, compute_pass, validate,
};
use karpenter_scheduling::labels::{
    CAPACITY_TYPE, DO_NOT_DISRUPT, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE,
};
use karpenter_scheduling::model::{InstanceType, Node};
use karpenter_scheduling::plan::InstanceTypeOption;
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::{SolveOptions, solve};
use karpenter_testing::disruption::*;
use karpenter_testing::{InstanceTypeBuilder, nsr, reqs};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Three shapes, the larger dearer per core, so re-packing onto smaller ones pays.
fn shapes() -> Vec<Arc<InstanceType>> {
    [
        ("big", 8, 0.40, 0.16),
        ("mid", 4, 0.15, 0.07),
        ("half", 2, 0.07, 0.03),
    ]
    .into_iter()
    .map(|(name, cores, od, spot)| {
        InstanceTypeBuilder::new(name, cores, cores * 4)
            .zones(&[ZONE_A])
            .on_demand(od)
            .spot(spot)
            .build()
    })
    .collect()
}

#[derive(Debug, Clone)]
struct Spec {
    shape: usize,
    pods: Vec<(i64, bool, bool)>,
    do_not_disrupt: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..3usize,
        prop::collection::vec(
            (
                prop::sample::select(vec![300i64, 700, 1500, 2500, 3500]),
                prop::bool::weighted(0.08),
                prop::bool::weighted(0.3),
            ),
            1..5,
        ),
        prop::bool::weighted(0.08),
    )
        .prop_map(|(shape, pods, do_not_disrupt)| Spec {
            shape,
            pods,
            do_not_disrupt,
        })
}

struct World {
    w: Cluster,
    threshold: f64,
}

fn world(
    specs: &[Spec],
    spot: bool,
    gate: bool,
    budget: &str,
    pdb_allowed: i32,
    threshold: f64,
) -> World {
    let mut w = Cluster {
        input: DisruptionInput::default(),
        now: 10 * HOUR,
    };
    w.add_pool(POOL, shapes(), "on-demand");
    if spot {
        w.input.cluster.node_pools[0].requirements =
            reqs(&[nsr(CAPACITY_TYPE, Operator::In, &["spot", "on-demand"])]);
    }
    w.settings(POOL).budgets = vec![Budget::nodes(budget)];
    w.input.options.spot_to_spot_consolidation = gate;
    w.input.options.repack = Some(RepackOptions {
        price_improvement_threshold: threshold,
        ..RepackOptions::default()
    });
    w.pdb("web", "web", pdb_allowed);
    let names = ["big", "mid", "half"];
    let cores = [8000, 4000, 2000];
    for (i, s) in specs.iter().enumerate() {
        let node = format!("n{i}");
        let capacity_type = if spot { "spot" } else { "on-demand" };
        let n = w.node_in(POOL, &node, names[s.shape], capacity_type);
        if s.do_not_disrupt {
            n.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
        }
        let mut used = 0;
        for (j, &(cpu, dnd, web)) in s.pods.iter().enumerate() {
            if used + cpu > cores[s.shape] {
                continue;
            }
            used += cpu;
            let p = w.pod(&node, &format!("{node}-p{j}"), cpu);
            if dnd {
                p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
            }
            if web {
                p.labels.insert("app".into(), "web".into());
            }
        }
    }
    World { w, threshold }
}

/// The cluster after `cmd`: its nodes gone, each replacement a ready node of the option
/// `pick` chooses named `{prefix}{i}` (which places it among the other nodes in first fit's
/// order), the moved pods pending; a scheduler's first fit (the solver with no pool to
/// launch from) must place every one of them.
fn check_holds_every_moved_pod(
    input: &DisruptionInput,
    now: i64,
    cmd: &Command,
    pick: fn(&[InstanceTypeOption]) -> &InstanceTypeOption,
    prefix: &str,
) -> Result<(), TestCaseError> {
    let gone: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.node.as_str()).collect();
    let mut snap = input.cluster.clone();
    let types = snap.node_pools[0].instance_types.clone();
    snap.node_pools.clear();
    snap.nodes.retain(|n| !gone.contains(n.name.as_str()));
    for (i, r) in cmd.replacements.iter().enumerate() {
        let option = pick(&r.instance_type_options);
        let it = types
            .iter()
            .find(|t| *t.name == *option.name)
            .expect("options come from the pool");
        let name = format!("{prefix}{i}");
        let labels = [
            (INSTANCE_TYPE, option.name.as_ref()),
            (ZONE, option.zone.as_ref()),
            (CAPACITY_TYPE, option.capacity_type.as_ref()),
            (NODEPOOL, POOL),
            (HOSTNAME, name.as_str()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        snap.nodes.push(Node {
            name: name.clone(),
            node_pool: Some(POOL.into()),
            labels,
            allocatable: it.allocatable(),
            capacity: it.capacity.clone(),
            price: option.price,
            ..Node::default()
        });
    }
    let (moving, stay): (Vec<_>, Vec<_>) = snap
        .bound_pods
        .into_iter()
        .partition(|p| p.node_name.as_deref().is_some_and(|n| gone.contains(n)));
    snap.bound_pods = stay;
    let moving: Vec<_> = moving
        .into_iter()
        .filter(is_reschedulable)
        .map(|mut p| {
            prop_assert!(!do_not_disrupt_active(&p, now), "{}", p.name);
            p.node_name = None;
            Ok(p)
        })
        .collect::<Result<_, TestCaseError>>()?;
    snap.pending_pods.extend(moving);
    let mut options = SolveOptions::default();
    options.optimizer.enabled = false;
    let plan = solve(&snap, &options);
    prop_assert!(
        plan.unschedulable.is_empty(),
        "stranded: {:?} after {}",
        plan.unschedulable,
        cmd.explanation
    );
    Ok(())
}

/// Checks the pass over `world`, and the pass where Karpenter's simulating methods have no
/// budget (so that re-packing runs on most clusters, whatever they would have found).
fn check(world: &World) -> Result<(), TestCaseError> {
    let w = &world.w;
    let r = compute_pass(&w.input, w.now);
    prop_assert_eq!(&r, &compute_pass(&w.input, w.now));
    // Karpenter's methods first: re-packing only acts when they find nothing.
    let mut karpenter = w.input.clone();
    karpenter.options.repack = None;
    let k = compute_pass(&karpenter, w.now);
    if !k.commands.is_empty() {
        prop_assert_eq!(&k.commands, &r.commands);
    } else {
        check_repacks(world, &w.input, &r.commands)?;
    }
    let mut repack_only = w.input.clone();
    repack_only.options.max_simulations = 0;
    let r = compute_pass(&repack_only, w.now);
    let repacks: Vec<Command> = r
        .commands
        .into_iter()
        .filter(|c| c.consolidation == Some(ConsolidationMethod::Repack))
        .collect();
    check_repacks(world, &repack_only, &repacks)
}

fn check_repacks(
    world: &World,
    input: &DisruptionInput,
    commands: &[Command],
) -> Result<(), TestCaseError> {
    let w = &world.w;
    for cmd in commands {
        prop_assert_eq!(cmd.consolidation, Some(ConsolidationMethod::Repack));
        // do-not-disrupt nodes and pods are never touched.
        for c in &cmd.candidates {
            let node = input
                .cluster
                .nodes
                .iter()
                .find(|n| n.name == c.node)
                .expect("a node of the cluster");
            prop_assert!(!node.annotations.contains_key(DO_NOT_DISRUPT));
        }
        // The Underutilized budget.
        let allowed = allowed_disruptions(
            &input.node_pools[POOL].budgets,
            input.cluster.nodes.len() as u64,
            DisruptionReason::Underutilized,
            w.now,
        );
        prop_assert!(
            cmd.candidates.len() as u64 <= allowed,
            "{}",
            cmd.explanation
        );
        // PDBs: together within the budget, or a single node using it.
        prop_assert_eq!(exceeded_pdb(input, w.now, cmd), None, "{}", cmd.explanation);
        // Never dearer, whatever the replacements launch as, and past the threshold.
        let source = cmd.source_price();
        let worst = dearest_replacement_price(cmd);
        prop_assert!(cmd.savings > 0.0);
        prop_assert!(worst < source, "{} >= {}", worst, source);
        prop_assert!(
            worst <= source * (1.0 - world.threshold) + 1e-9,
            "{} above {} of {}",
            worst,
            1.0 - world.threshold,
            source
        );
        // Without the gate, spot nodes get no spot replacement.
        let any_spot = cmd.candidates.iter().any(|c| {
            input
                .cluster
                .nodes
                .iter()
                .any(|n| n.name == c.node && n.capacity_type() == Some("spot"))
        });
        if any_spot && !input.options.spot_to_spot_consolidation {
            for rep in &cmd.replacements {
                prop_assert!(
                    rep.instance_type_options
                        .iter()
                        .all(|o| &*o.capacity_type == "on-demand")
                );
            }
        }
        // Every moved pod fits the replacements, cheapest or dearest option each, with the
        // replacements after or before the other nodes (`n0` …).
        for prefix in ["replacement-", "a-replacement-"] {
            check_holds_every_moved_pod(input, w.now, cmd, |o| &o[0], prefix)?;
            check_holds_every_moved_pod(input, w.now, cmd, |o| &o[o.len() - 1], prefix)?;
        }
        // Unchanged state validates.
        let later = w.now + input.options.validation_delay_ms;
        prop_assert_eq!(validate(cmd, input, later), Ok(()), "{}", cmd.explanation);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn repack_commands_are_safe(
        specs in prop::collection::vec(spec(), 1..9),
        spot in prop::bool::weighted(0.3),
        gate in prop::bool::ANY,
        budget in prop::sample::select(vec!["1", "2", "3", "50%", "100%"]),
        pdb_allowed in 0..3i32,
        threshold in prop::sample::select(vec![0.0, 0.1, 0.2, 0.35]),
    ) {
        check(&world(&specs, spot, gate, budget, pdb_allowed, threshold))?;
    }
}

/// The strategy above does produce re-packs: a fixed fragmented cluster of it does.
#[test]
fn the_generated_clusters_include_repacks() {
    let mid_full = Spec {
        shape: 0,
        pods: vec![(3500, false, false), (3500, false, false)],
        do_not_disrupt: false,
    };
    let world = world(&[mid_full.clone(), mid_full], false, false, "100%", 1, 0.2);
    let r = compute_pass(&world.w.input, world.w.now);
    assert_eq!(r.commands.len(), 1, "{r:#?}");
    assert_eq!(
        r.commands[0].consolidation,
        Some(ConsolidationMethod::Repack)
    );
    check(&world).unwrap();
}
