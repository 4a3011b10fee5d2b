//! Properties over random small clusters: commands never strand a pod, never exceed a
//! budget or a PDB, never touch `do-not-disrupt`, replacements are strictly cheaper, and
//! passes are deterministic.

use karpenter_cloudprovider::v1::{Budget, ConsolidationPolicy, DisruptionReason};
use karpenter_disruption::budget::allowed_disruptions;
use karpenter_disruption::candidate::{do_not_disrupt_active, is_reschedulable};
use karpenter_disruption::{
    Command, ConsolidationMethod, Decision, PassResult, Reason, compute_pass, validate,
};
use karpenter_scheduling::labels::DO_NOT_DISRUPT;
use karpenter_scheduling::{SolveOptions, solve};
use karpenter_testing::disruption::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn cluster(nodes: &[NodeSpec], budget: &str, pdb_allowed: i32) -> Cluster {
    let mut w = Cluster::new();
    w.settings(POOL).budgets = vec![Budget::nodes(budget)];
    w.pdb("web", "web", pdb_allowed);
    for (i, spec) in nodes.iter().enumerate() {
        w.add_node(&format!("n{i}"), spec);
    }
    w
}

/// Re-solves the cluster with the command applied (candidates gone, their pods pending) and
/// checks every moving pod has a place, on existing nodes only for a delete and on at most
/// the planned number of new nodes for a replace. Consolidation decides, as Karpenter does,
/// on the greedy scheduling simulation (the replacement then holds what the greedy put on
/// it), so its commands are checked against the greedy plan; the optimiser may pack the same
/// pods on more, cheaper nodes, which a single replacement cannot launch.
fn check_reschedulable(w: &Cluster, cmd: &Command) -> Result<(), TestCaseError> {
    let gone: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.node.as_str()).collect();
    let mut snap = w.input.cluster.clone();
    let queued: BTreeSet<&str> = w.input.disrupting.iter().map(String::as_str).collect();
    snap.nodes
        .retain(|n| !gone.contains(n.name.as_str()) && !queued.contains(n.name.as_str()));
    let (moving, stay): (Vec<_>, Vec<_>) = snap.bound_pods.into_iter().partition(|p| {
        p.node_name
            .as_deref()
            .is_some_and(|n| gone.contains(n) || queued.contains(n))
    });
    snap.bound_pods = stay;
    let moving: Vec<_> = moving
        .into_iter()
        .filter(is_reschedulable)
        .filter(|p| !do_not_disrupt_active(p, w.now))
        .map(|mut p| {
            p.node_name = None;
            p
        })
        .collect();
    let keys: BTreeSet<_> = moving.iter().map(|p| p.key()).collect();
    snap.pending_pods.extend(moving);
    let mut options = SolveOptions::default();
    options.optimizer.enabled = cmd.reason != Reason::UNDERUTILIZED;
    let plan = solve(&snap, &options);
    prop_assert!(
        plan.unschedulable.iter().all(|u| !keys.contains(&u.pod)),
        "stranded pods: {:?} for {}",
        plan.unschedulable,
        cmd.explanation
    );
    let new_claims = plan
        .new_node_claims
        .iter()
        .filter(|c| c.pods.iter().any(|k| keys.contains(k)))
        .count();
    // A re-pack's replacements are the optimiser's packing, which the greedy may not match.
    if cmd.reason == Reason::UNDERUTILIZED && cmd.consolidation != Some(ConsolidationMethod::Repack)
    {
        prop_assert!(new_claims <= cmd.replacements.len(), "{}", cmd.explanation);
    }
    Ok(())
}

fn check_pass(w: &Cluster, r: &PassResult) -> Result<(), TestCaseError> {
    let input = &w.input;
    let node_of: BTreeMap<&str, &karpenter_scheduling::Node> = input
        .cluster
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let managed_initialized = input.cluster.nodes.len() as u64;
    let disrupting = input.disrupting.len() as u64;
    for cmd in &r.commands {
        prop_assert!(!cmd.forceful);
        // do-not-disrupt and queued nodes are never touched.
        for c in &cmd.candidates {
            let node = node_of[c.node.as_str()];
            prop_assert!(!node.annotations.contains_key(DO_NOT_DISRUPT));
            prop_assert!(!input.disrupting.contains(&c.node));
            for p in input
                .cluster
                .bound_pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(c.node.as_str()))
            {
                prop_assert!(!do_not_disrupt_active(p, w.now), "{}", p.name);
            }
        }
        // Budgets.
        let reason: DisruptionReason = cmd.reason.budget_reason().expect("graceful");
        let allowed = allowed_disruptions(
            &input.node_pools[POOL].budgets,
            managed_initialized,
            reason,
            w.now,
        )
        .saturating_sub(disrupting);
        prop_assert!(
            cmd.candidates.len() as u64 <= allowed,
            "{}",
            cmd.explanation
        );
        // PDBs: together within the budget, or a single node using it.
        prop_assert_eq!(exceeded_pdb(input, w.now, cmd), None, "{}", cmd.explanation);
        // Replacements strictly cheaper for consolidation.
        if cmd.reason == Reason::UNDERUTILIZED {
            prop_assert!(cmd.savings > 0.0);
            if cmd.decision == Decision::Replace {
                // Karpenter's methods launch one node; a re-pack may launch several (its own
                // properties are in repack_properties.rs).
                if cmd.consolidation != Some(ConsolidationMethod::Repack) {
                    prop_assert_eq!(cmd.replacements.len(), 1);
                }
                let dearest = dearest_replacement_price(cmd);
                prop_assert!(dearest < cmd.source_price(), "{}", cmd.explanation);
            }
        }
        if cmd.reason == Reason::EMPTY {
            prop_assert!(cmd.candidates.iter().all(|c| c.pods.is_empty()));
        }
        check_reschedulable(w, cmd)?;
    }
    // Every node is either in a command or explained.
    let mut seen: BTreeSet<&str> = r.explanations.iter().map(|e| e.node.as_str()).collect();
    for cmd in &r.commands {
        seen.extend(cmd.candidates.iter().map(|c| c.node.as_str()));
    }
    prop_assert_eq!(seen.len(), input.cluster.nodes.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn commands_are_safe_and_deterministic(
        nodes in prop::collection::vec(node_spec(), 1..7),
        budget in prop::sample::select(vec!["0", "1", "2", "50%", "100%"]),
        pdb_allowed in 0..3i32,
    ) {
        let w = cluster(&nodes, budget, pdb_allowed);
        let a = compute_pass(&w.input, w.now);
        let b = compute_pass(&w.input, w.now);
        prop_assert_eq!(&a, &b);
        check_pass(&w, &a)?;
    }

    #[test]
    fn balanced_pools_only_take_moves_that_pass_the_threshold(
        nodes in prop::collection::vec(node_spec(), 1..7),
        pdb_allowed in 0..3i32,
    ) {
        let mut w = cluster(&nodes, "100%", pdb_allowed);
        // The default policy scores nothing and approves every move it reports.
        let control = compute_pass(&w.input, w.now);
        for m in &control.scored_moves {
            prop_assert!(m.approved && m.pools.iter().all(|p| p.score.is_none()));
        }
        w.settings(POOL).consolidation_policy = ConsolidationPolicy::Balanced;
        let a = compute_pass(&w.input, w.now);
        prop_assert_eq!(&a, &compute_pass(&w.input, w.now));
        check_pass(&w, &a)?;
        for m in &a.scored_moves {
            let scores: Vec<_> = m.pools.iter().map(|p| p.score).collect();
            prop_assert!(scores.iter().all(Option::is_some));
            prop_assert_eq!(m.approved, scores.iter().flatten().all(|s| s.score() >= 0.5));
        }
        // Every consolidation command is a move the pool approved.
        for cmd in a.commands.iter().filter(|c| c.reason == Reason::UNDERUTILIZED) {
            let names = cmd.node_names();
            prop_assert!(a.scored_moves.iter().any(|m| m.approved
                && m.candidates.iter().map(|c| c.node.as_str()).eq(names.iter().copied())));
        }
    }

    #[test]
    fn commands_validate_against_unchanged_state(
        nodes in prop::collection::vec(node_spec(), 1..7),
        budget in prop::sample::select(vec!["1", "2", "100%"]),
        pdb_allowed in 0..3i32,
    ) {
        let w = cluster(&nodes, budget, pdb_allowed);
        let later = w.now + w.input.options.validation_delay_ms;
        for cmd in compute_pass(&w.input, w.now).commands {
            prop_assert_eq!(validate(&cmd, &w.input, later), Ok(()), "{}", cmd.explanation);
        }
    }
}
