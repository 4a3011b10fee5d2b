//! Pinned claims as hosts: the greedy claims some of whose pods cannot move (hostname
//! anti-affinity or spread, host ports) keep those pods and their hostname, and the room
//! left beside them is filled with the group's movable pods before anything else is packed.
//!
//! On workloads where every node must hold an anti-affinity pod, those nodes exist in every
//! plan, so what they waste is paid in every plan: filling their room with pods that would
//! otherwise need new nodes is the cheapest capacity there is. Each host is priced at the
//! cheapest type that holds its pinned pods; pods then join it best-fit decreasing while
//! that type still holds them (so its price does not change) and while the hostname-keyed
//! constraints its pinned pods own allow ([`crate::solver::topology::HostCap`]). What does
//! not fit on a host is packed onto new nodes with the rest of the group.

use super::budget::Budget;
use super::pack::BinType;
use super::{Candidate, Dims, Group, claim_options, claim_price, pod_requests, price_epsilon};
use crate::resources::Resources;
use crate::solver::Scheduler;
use crate::solver::arith;
use crate::solver::limits::Remaining;
use crate::solver::nodeclaim::Claim;
use crate::solver::topology::HostCap;

/// A partial claim while movable pods join it.
struct Host {
    /// Index of the greedy claim.
    claim: usize,
    /// Its pinned pods, then the pods that joined, in order.
    pods: Vec<usize>,
    /// Their summed requests.
    load: Resources,
    /// Capacity left on the type it is priced at, per dimension of the group.
    room: Vec<i64>,
    /// The hostname-keyed limits its pinned pods put on pods joining it.
    caps: Vec<HostCap>,
    /// Options no larger than its largest before, when its pool has limits.
    most: Option<Vec<i64>>,
    /// Its pinned pods' requests and the options that hold them.
    base_load: Resources,
    base_options: Vec<u32>,
}

/// The group's partial claims after their movable pods were taken off and the group's
/// movable pods (`pods`, the whole claims' pods, to which the partial claims' movable pods
/// are added first) joined them where they fit. Returns the partial claims that changed
/// (pods or price), each with its new content and options, and what they save against
/// their greedy price; `pods` is left holding the pods still to pack onto new nodes.
///
/// A host is priced at the cheapest candidate type that holds its pinned pods (under
/// NodePool limits, among types no larger than its largest option before, so the pool's
/// count never grows), which never costs more than the greedy claim did. A host whose
/// final content breaks minValues gives back the pods that joined it.
#[allow(clippy::too_many_arguments)]
pub(super) fn fill_hosts(
    s: &Scheduler<'_>,
    g: &Group,
    candidates: &[Candidate],
    types: &[BinType],
    dims: &Dims,
    price_of: &[f64],
    pods: &mut Vec<usize>,
    budget: &mut Budget<'_>,
) -> (Vec<(usize, Claim)>, f64) {
    let t = &s.templates[g.template];
    let limits = Remaining::new(t.pool);
    let mut candidate_of = vec![usize::MAX; t.its.len()];
    for (k, c) in candidates.iter().enumerate() {
        candidate_of[c.it as usize] = k;
    }
    let mut hosts: Vec<Host> = Vec::new();
    for (c, movable) in &g.partial {
        let claim = &s.claims[*c];
        let stays: Vec<usize> = claim
            .pods
            .iter()
            .copied()
            .filter(|p| !movable.contains(p))
            .collect();
        let mut load = Resources::default();
        for &p in &stays {
            arith::add_into(&mut load, &pod_requests(&s.pods[p]));
        }
        let most = limits
            .is_limited()
            .then(|| largest_charge(&limits, t, claim));
        let Some(options) = host_options(s, g, candidates, types, dims, &load, most.as_deref())
        else {
            // Its pods stay where the greedy put them, as before.
            continue;
        };
        let Some(&cheapest) = options
            .iter()
            .min_by(|&&a, &&b| price_of[a as usize].total_cmp(&price_of[b as usize]))
        else {
            continue;
        };
        let cap = &types[candidate_of[cheapest as usize]].cap;
        let room = cap
            .iter()
            .zip(dims.vector(&load))
            .map(|(c, l)| c - l)
            .collect();
        let present: Vec<(usize, &crate::model::Pod)> =
            stays.iter().map(|&p| (p, &s.pods[p])).collect();
        let caps = s.topology.host_caps(&present);
        pods.extend(movable.iter().copied());
        hosts.push(Host {
            claim: *c,
            pods: stays,
            load: load.clone(),
            room,
            caps,
            most,
            base_load: load,
            base_options: options,
        });
    }
    if hosts.is_empty() {
        return (Vec::new(), 0.0);
    }
    let pinned: Vec<usize> = hosts.iter().map(|h| h.pods.len()).collect();

    // Host by host, the largest pods that still fit join it (first fit decreasing per host),
    // sizes measured as shares of the group's total demand so that no dimension's unit
    // dominates. Identical requests form a class, so a host looks at each class once
    // rather than at every pod: the work is hosts × classes plus the pods placed, not
    // hosts × pods, which matters with thousands of anti-affinity pods.
    let vectors: Vec<Vec<i64>> = pods
        .iter()
        .map(|&p| dims.vector(&pod_requests(&s.pods[p])))
        .collect();
    let mut total = vec![0f64; dims.len()];
    for v in &vectors {
        for (t, &x) in total.iter_mut().zip(v) {
            *t += x.max(0) as f64;
        }
    }
    let size = |v: &[i64]| -> f64 {
        v.iter()
            .zip(&total)
            .filter(|(_, t)| **t > 0.0)
            .map(|(&x, t)| x as f64 / t)
            .sum()
    };
    let mut class_of: std::collections::HashMap<&[i64], usize> = std::collections::HashMap::new();
    let mut classes: Vec<(&[i64], Vec<usize>)> = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let k = *class_of.entry(v.as_slice()).or_insert_with(|| {
            classes.push((v.as_slice(), Vec::new()));
            classes.len() - 1
        });
        classes[k].1.push(i);
    }
    classes.sort_by(|a, b| size(b.0).total_cmp(&size(a.0)).then(a.0.cmp(b.0)));
    let mut placed = vec![false; pods.len()];
    // Per class, how many of its leading members are placed (they are skipped for good).
    let mut first_free = vec![0usize; classes.len()];
    'hosts: for host in hosts.iter_mut() {
        for (k, (v, members)) in classes.iter().enumerate() {
            if !budget.spend(v.len() as u64 + 1) {
                break 'hosts;
            }
            let mut n = first_free[k];
            while n < members.len() && host.room.iter().zip(v.iter()).all(|(r, x)| x <= r) {
                let i = members[n];
                n += 1;
                if placed[i] {
                    continue;
                }
                let pod = &s.pods[pods[i]];
                if !budget.spend(host.caps.len() as u64 + 1) {
                    break 'hosts;
                }
                if host
                    .caps
                    .iter()
                    .any(|c| c.room <= 0 && s.topology.cap_selects(c, pod))
                {
                    continue;
                }
                for (r, x) in host.room.iter_mut().zip(v.iter()) {
                    *r -= x;
                }
                for c in host.caps.iter_mut() {
                    if s.topology.cap_selects(c, pod) {
                        c.room -= 1;
                    }
                }
                host.pods.push(pods[i]);
                arith::add_into(&mut host.load, &pod_requests(pod));
                placed[i] = true;
            }
            while first_free[k] < members.len() && placed[members[first_free[k]]] {
                first_free[k] += 1;
            }
        }
    }

    let mut changed = Vec::new();
    let mut saving = 0.0;
    let mut rest: Vec<usize> = Vec::new();
    for (host, pinned) in hosts.into_iter().zip(pinned) {
        let claim = &s.claims[host.claim];
        let filled = host_options(
            s,
            g,
            candidates,
            types,
            dims,
            &host.load,
            host.most.as_deref(),
        );
        let (content, load, options) = match filled {
            Some(o) => (host.pods, host.load, o),
            None => {
                // minValues no longer holds with what joined: that goes back to the rest.
                rest.extend_from_slice(&host.pods[pinned..]);
                let mut stays = host.pods;
                stays.truncate(pinned);
                (stays, host.base_load, host.base_options)
            }
        };
        let before = claim_price(t, &claim.options, &g.reqs);
        let after = options
            .iter()
            .map(|&i| price_of[i as usize])
            .fold(f64::INFINITY, f64::min);
        let mut same = content.clone();
        same.sort_unstable();
        let mut original = claim.pods.clone();
        original.sort_unstable();
        if same == original && after >= before - price_epsilon(before) {
            // Nothing gained: the claim stays as the greedy planned it (with its own pods,
            // which all came back to it).
            continue;
        }
        saving += before - after;
        changed.push((host.claim, claim.shrunk(t, content, load, options)));
    }
    let mut remaining: Vec<usize> = pods
        .iter()
        .zip(&placed)
        .filter(|(_, p)| !**p)
        .map(|(&p, _)| p)
        .collect();
    remaining.extend(rest);
    *pods = remaining;
    (changed, saving)
}

/// The largest capacity, per limited resource, among a claim's options.
fn largest_charge(
    limits: &Remaining,
    t: &crate::solver::nodeclaim::Template<'_>,
    claim: &Claim,
) -> Vec<i64> {
    claim
        .options
        .iter()
        .map(|&i| limits.charge(t.its[i as usize]))
        .reduce(|a, b| a.iter().zip(&b).map(|(x, y)| *x.max(y)).collect())
        .unwrap_or_default()
}

/// The candidates that hold `load` on a claim of group `g` (see [`claim_options`]), only
/// those no larger than `most` when the pool has limits.
fn host_options(
    s: &Scheduler<'_>,
    g: &Group,
    candidates: &[Candidate],
    types: &[BinType],
    dims: &Dims,
    load: &Resources,
    most: Option<&[i64]>,
) -> Option<Vec<u32>> {
    let t = &s.templates[g.template];
    let mut options = claim_options(s, t, candidates, types, &g.reqs, &dims.vector(load))?;
    if let Some(most) = most {
        let limits = Remaining::new(t.pool);
        options.retain(|&i| {
            limits
                .charge(t.its[i as usize])
                .iter()
                .zip(most)
                .all(|(c, m)| c <= m)
        });
    }
    (!options.is_empty()).then_some(options)
}
