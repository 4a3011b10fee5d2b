//! The consolidation benchmark's cluster: Karpenter's scheduling-benchmark workload packed
//! onto the nodes `solve` chooses, then half of its pods deleted.

use crate::{DEFAULT_SEED, benchmark_snapshot};
use karpenter_disruption::{DisruptionInput, NodeInfo, PoolDisruption};
use karpenter_scheduling::labels::{CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE};
use karpenter_scheduling::model::{Node, NodeState, Pod, PodKey};
use karpenter_scheduling::{SolveOptions, solve};
use std::collections::BTreeMap;

/// A cluster of the nodes `solve` launches for `pods` pods of Karpenter's benchmark workload
/// (5,000 pods give 1,000 nodes), with every pod bound, then every other pod of each node
/// deleted (its first pod kept), so about half the pods are gone and no node is empty:
/// the pass has to consolidate, not just delete empty nodes. Nodes are initialized, owned by
/// the `default` pool with its default disruption settings (WhenEmptyOrUnderutilized,
/// consolidateAfter 0s, budget 10 %).
pub fn half_deleted_cluster(pods: usize) -> DisruptionInput {
    packed_cluster(pods, 2)
}

/// The worst case for a disruption pass: every pod of [`half_deleted_cluster`]'s workload
/// bound where `solve` put it, so no node's pods fit elsewhere and no replacement of a node
/// or a batch of them is cheaper: Karpenter's methods spend their simulations (64 and the
/// multi-node search's) and find nothing. Re-pack consolidation then runs with a threshold
/// of 0, so that it takes the most wasteful nodes the 10 % budget allows and simulates them
/// in full.
pub fn full_cluster(pods: usize) -> DisruptionInput {
    let mut input = packed_cluster(pods, 1);
    if let Some(r) = input.options.repack.as_mut() {
        r.price_improvement_threshold = 0.0;
    }
    input
}

/// The nodes `solve` launches for `pods` pods of the benchmark workload, with every
/// `keep_every`-th pod of each node bound to it (its first pod kept).
fn packed_cluster(pods: usize, keep_every: usize) -> DisruptionInput {
    let snapshot = benchmark_snapshot(pods, DEFAULT_SEED);
    let plan = solve(&snapshot, &SolveOptions::default());
    let pool = &snapshot.node_pools[0];
    let by_key: BTreeMap<PodKey, &Pod> =
        snapshot.pending_pods.iter().map(|p| (p.key(), p)).collect();

    let mut input = DisruptionInput::default();
    let mut bound = Vec::with_capacity(pods / 2 + plan.new_node_claims.len());
    for (i, claim) in plan.new_node_claims.iter().enumerate() {
        let name = format!("node-{i:05}");
        let option = &claim.instance_type_options[0];
        let it = pool
            .instance_types
            .iter()
            .find(|t| *t.name == *option.name)
            .expect("plan options come from the pool");
        let mut labels = it.requirements.single_valued_labels();
        labels.extend(claim.requirements.single_valued_labels());
        for (k, v) in [
            (INSTANCE_TYPE, option.name.as_ref()),
            (ZONE, option.zone.as_ref()),
            (CAPACITY_TYPE, option.capacity_type.as_ref()),
            (NODEPOOL, pool.name.as_str()),
            (HOSTNAME, name.as_str()),
        ] {
            labels.insert(k.to_string(), v.to_string());
        }
        input.cluster.nodes.push(Node {
            name: name.clone(),
            node_pool: Some(pool.name.clone()),
            labels,
            allocatable: it.allocatable(),
            capacity: it.capacity.clone(),
            state: NodeState::Ready,
            price: option.price,
            ..Node::default()
        });
        input.nodes.insert(
            name.clone(),
            NodeInfo {
                node_claim: format!("{name}-claim"),
                initialized: true,
                ready: true,
                ..NodeInfo::default()
            },
        );
        for key in claim.pods.iter().step_by(keep_every) {
            let mut pod = by_key[key].clone();
            pod.node_name = Some(name.clone());
            bound.push(pod);
        }
    }
    input.cluster.bound_pods = bound;
    input.cluster.node_pools = snapshot.node_pools.clone();
    input.cluster.namespaces = snapshot.namespaces.clone();
    input
        .node_pools
        .insert(pool.name.clone(), PoolDisruption::default());
    input
}

/// Cost per hour of the nodes a pass's commands remove, minus their replacements.
pub fn savings(commands: &[karpenter_disruption::Command]) -> f64 {
    commands.iter().map(|c| c.savings).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_has_the_solved_nodes_and_half_the_pods() {
        let input = half_deleted_cluster(50);
        let plan = solve(
            &benchmark_snapshot(50, DEFAULT_SEED),
            &SolveOptions::default(),
        );
        assert_eq!(input.cluster.nodes.len(), plan.new_node_claims.len());
        // Each node keeps its 1st, 3rd, 5th … pod: n pods on a node leave ⌈n/2⌉.
        let kept: usize = plan
            .new_node_claims
            .iter()
            .map(|c| c.pods.len().div_ceil(2))
            .sum();
        assert_eq!(input.cluster.bound_pods.len(), kept);
        for node in &input.cluster.nodes {
            let on_node = |p: &Pod| p.node_name.as_deref() == Some(node.name.as_str());
            assert!(
                input.cluster.bound_pods.iter().any(on_node),
                "{} is empty",
                node.name
            );
        }
        assert!(input.cluster.pending_pods.is_empty());
        assert_eq!(input, half_deleted_cluster(50), "deterministic");
    }
}
