//! Owners re-packed jointly: a group whose claims hold pods that only hostname-keyed
//! spreads and anti-affinities keep on their node (see `Topology::kept_on_hostname_only`)
//! is packed whole, owners and movable pods together, onto new nodes.
//!
//! On a new node such a constraint depends only on the node's final content (the
//! hostname's minimum count is always 0 and the hostname is the node's own), so it becomes
//! one more per-node capacity of the packing (`Topology::apart_dims`): at most maxSkew
//! (a spread) or 1 (an anti-affinity) of the pods that own the group or that it selects
//! on one node. Every materialised node is checked again with `Topology::host_caps`, and
//! any failure keeps the greedy claims. [`super::repack`] keeps the cheaper of this and
//! the group with its owners pinned ([`pinned`]).

use super::budget::Budget;
use super::pack::BinType;
use super::{
    Group, Repacked, candidate_types, claim_options, classes_of, greedy_cost, group_types,
    new_claim, pack_classes, pod_requests, price_epsilon, take_copy,
};
use crate::model::Pod;
use crate::resources::Resources;
use crate::solver::Scheduler;

/// The group with its owners kept where the greedy pass put them: each whole claim that
/// holds an owner and other pods becomes a host (a partial claim) whose other pods may
/// move; a claim of owners alone is left out, exactly as with `repack_owners` off, so this
/// packing is the one the group gets without joint re-packing.
pub(super) fn pinned(s: &Scheduler<'_>, g: &Group) -> Group {
    let mut claims = Vec::new();
    let mut partial = Vec::new();
    for &c in &g.claims {
        let pods = &s.claims[c].pods;
        if pods.iter().any(|p| g.owners.binary_search(p).is_ok()) {
            let movable: Vec<usize> = pods
                .iter()
                .copied()
                .filter(|p| g.owners.binary_search(p).is_err())
                .collect();
            if !movable.is_empty() {
                partial.push((c, movable));
            }
        } else {
            claims.push(c);
        }
    }
    partial.extend(g.partial.iter().cloned());
    Group {
        template: g.template,
        reqs: g.reqs.clone(),
        free: g.free.clone(),
        greedy_nodes: claims.len(),
        claims,
        partial,
        movers: Vec::new(),
        owners: Vec::new(),
    }
}

/// Packs every pod of the group's whole claims (and its free pods) onto new nodes, each
/// keeping the hostname-keyed constraints of every pod on it; `claims` is `Some` only when
/// strictly cheaper than `target` (or the whole claims' greedy price) and every node was
/// checked. A group with partial claims is not re-packed this way.
pub(super) fn repack(
    s: &Scheduler<'_>,
    g: &Group,
    target: Option<f64>,
    budget: &mut Budget<'_>,
    next_host: &mut u32,
) -> Repacked {
    let none = Repacked {
        claims: None,
        shrunk: Vec::new(),
        proven_optimal: false,
    };
    if !g.partial.is_empty() {
        return none;
    }
    let t = &s.templates[g.template];
    let pods: Vec<usize> = g
        .claims
        .iter()
        .flat_map(|&c| s.claims[c].pods.iter().copied())
        .chain(g.free.iter().copied())
        .collect();
    if pods.is_empty() {
        return none;
    }
    let Some(candidates) = candidate_types(t, &g.reqs, budget) else {
        return none;
    };
    let requests: Vec<Resources> = pods.iter().map(|&p| pod_requests(&s.pods[p])).collect();
    let (dims, types, price_of) = group_types(t, &candidates, &requests);
    let present: Vec<(usize, &Pod)> = pods.iter().map(|&p| (p, &s.pods[p])).collect();
    let (caps, uses) = s.topology.apart_dims(&present);
    // The packing sees each apart group as one more dimension of every type.
    let extended: Vec<BinType> = types
        .iter()
        .map(|ty| BinType {
            cap: ty.cap.iter().copied().chain(caps.iter().copied()).collect(),
            price: ty.price,
        })
        .collect();
    let width = dims.len() + caps.len();
    let (classes, members) = classes_of(requests.iter().enumerate().map(|(n, r)| {
        let mut v = dims.vector(r);
        v.resize(width, 0);
        for &d in &uses[n] {
            v[dims.len() + d] = 1;
        }
        v
    }));
    if !budget.spend((pods.len() * width) as u64) {
        return none;
    }
    let greedy = target.unwrap_or_else(|| greedy_cost(s, g));
    let (packing, _) = pack_classes(
        width,
        &classes,
        &extended,
        pods.len(),
        g.greedy_nodes,
        greedy,
        budget,
    );
    let Some(packing) = packing else {
        return none;
    };
    if packing.cost >= greedy - price_epsilon(greedy) {
        return none;
    }

    // Materialise, re-check every claim against every candidate and every node's content
    // against the hostname-keyed constraints of the pods on it.
    let mut next_member = vec![0usize; classes.len()];
    let mut claims = Vec::new();
    let mut total = 0.0;
    for bin in &packing.bins {
        for _ in 0..bin.copies {
            let mut content = Vec::new();
            let sum = take_copy(
                &bin.items,
                &members,
                &mut next_member,
                &requests,
                &pods,
                &mut content,
            );
            let on_node: Vec<(usize, &Pod)> = content.iter().map(|&p| (p, &s.pods[p])).collect();
            if s.topology.host_caps(&on_node).iter().any(|c| c.room < 0) {
                return none;
            }
            let load = dims.vector(&sum);
            let Some(options) = claim_options(s, t, &candidates, &types, &g.reqs, &load) else {
                return none;
            };
            total += options
                .iter()
                .map(|&i| price_of[i as usize])
                .fold(f64::INFINITY, f64::min);
            claims.push(new_claim(g, t, next_host, options, content, sum));
        }
    }
    let placed: usize = claims.iter().map(|c| c.pods.len()).sum();
    if placed != pods.len() || total >= greedy - price_epsilon(greedy) {
        return none;
    }
    Repacked {
        claims: Some(claims),
        shrunk: Vec::new(),
        // The packing's proof would hold for the extended problem only.
        proven_optimal: false,
    }
}
