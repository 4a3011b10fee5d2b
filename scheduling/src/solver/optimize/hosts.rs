//! Pinned claims as hosts: the greedy claims some of whose pods cannot move (hostname
//! anti-affinity or affinity owners, host ports) keep those pods (their anchors) and their
//! hostname, and the room left beside them is filled with the group's movable pods before
//! anything else is packed.
//!
//! On workloads where every node must hold an anti-affinity pod, those nodes exist in every
//! plan, so what they waste is paid in every plan: filling their room with pods that would
//! otherwise need new nodes is the cheapest capacity there is. Each host is priced at the
//! cheapest type that holds its anchors; pods then join it first fit decreasing while that
//! type still holds them (so its price does not change) and while the hostname-keyed
//! constraints of the pods on it allow ([`crate::solver::topology::HostCap`]).
//!
//! Owners of hostname spreads that nothing else keeps (see `Topology::spread_owner_only`)
//! are re-paired across nodes: they join hosts like movable pods, but only where their own
//! spreads still hold on the node's content (the hostname's minimum count is 0, so a spread
//! is a bound on the selected pods beside its owner), and they bring their caps with them.
//! An owner no host takes opens a new host of its own. Owners never go to the packers' new
//! nodes, which therefore still hold no owner.
//!
//! A host then grows to a larger type when the pods that the extra room absorbs are worth
//! more, at the resource prices of the fluid LP over the pods still left for new nodes,
//! than the extra price: those prices are what new capacity costs at best.
//! What does not fit on a host is packed onto new nodes with the rest of the group.

use super::bound::{self, BoundClass, BoundColumn};
use super::budget::Budget;
use super::pack::BinType;
use super::{
    Candidate, Dims, Group, claim_options, claim_price, new_claim, pod_requests, price_epsilon,
};
use crate::resources::Resources;
use crate::solver::Scheduler;
use crate::solver::arith;
use crate::solver::limits::Remaining;
use crate::solver::nodeclaim::Claim;
use crate::solver::topology::HostCap;

/// How many larger types a host tries when it may grow: the cheapest few of those that
/// are more efficient than its own at the fluid prices.
const GROW_TRIES: usize = 4;

/// The least share of its price by which a host's type must be less efficient than the
/// best, at the fluid prices, before it tries to grow.
const GROW_MIN_WASTE: f64 = 0.05;

/// A partial claim while movable pods join it.
struct Host {
    /// Index of the greedy claim, or `None` for a host opened by a spread owner no other
    /// host took.
    claim: Option<usize>,
    /// Its anchors, then the pods that joined, in order.
    pods: Vec<usize>,
    /// Their summed requests.
    load: Resources,
    /// Their summed requests over the group's dimensions.
    vector: Vec<i64>,
    /// Capacity left on the type it is priced at, per dimension of the group.
    room: Vec<i64>,
    /// The price of that type.
    price: f64,
    /// The hostname-keyed limits its pods put on pods joining it.
    caps: Vec<HostCap>,
    /// Options no larger than its largest before, when its pool has limits.
    most: Option<Vec<i64>>,
    /// Its anchors' requests and the options that hold them.
    base_load: Resources,
    base_options: Vec<u32>,
}

impl Host {
    /// Prices the host at type `t`: its room is what `t` holds beyond its load.
    fn retype(&mut self, t: &BinType) {
        self.room = t.cap.iter().zip(&self.vector).map(|(c, l)| c - l).collect();
        self.price = t.price;
    }
}

/// What [`fill_hosts`] changed.
pub(super) struct Filled {
    /// The partial claims that changed (pods or price), by claim index, with their new
    /// content and options.
    pub shrunk: Vec<(usize, Claim)>,
    /// New hosts opened by spread owners no kept claim took, with what joined them.
    pub added: Vec<Claim>,
    /// What the changes save against the greedy price of the partial claims, less the
    /// price of the new hosts (may be negative).
    pub saving: f64,
}

/// The group's pods (`pods`: the whole claims' pods and free pods, to which the partial
/// claims' pods that may leave are added first) as candidates for the room of its
/// partial claims. Owners of hostname spreads among them (`g.movers`) only ever go to
/// hosts: a kept claim whose content keeps their spreads, or a new host of their own.
/// `pods` is left holding the pods still to pack onto new nodes, none of them an owner.
///
/// A host is priced at the cheapest candidate type that holds its anchors (under NodePool
/// limits, among types no larger than its largest option before, so the pool's count
/// never grows), which never costs more than the greedy claim did, and may grow to a
/// larger type when that is cheaper than new capacity for what the extra room absorbs. A
/// host whose final content breaks minValues gives back the pods that joined it, unless
/// an owner is among them: then the whole group keeps its greedy claims (`None`).
#[allow(clippy::too_many_arguments)]
pub(super) fn fill_hosts(
    s: &Scheduler<'_>,
    g: &Group,
    candidates: &[Candidate],
    types: &[BinType],
    dims: &Dims,
    price_of: &[f64],
    pods: &mut Vec<usize>,
    next_host: &mut u32,
    may_grow: bool,
    budget: &mut Budget<'_>,
) -> Option<Filled> {
    let t = &s.templates[g.template];
    let limits = Remaining::new(t.pool);
    let mut candidate_of = vec![usize::MAX; t.its.len()];
    for (k, c) in candidates.iter().enumerate() {
        candidate_of[c.it as usize] = k;
    }
    let mut hosts: Vec<Host> = Vec::new();
    for (c, leaving) in &g.partial {
        let claim = &s.claims[*c];
        let stays: Vec<usize> = claim
            .pods
            .iter()
            .copied()
            .filter(|p| !leaving.contains(p))
            .collect();
        let most = limits
            .is_limited()
            .then(|| largest_charge(&limits, t, claim));
        let Some(host) = open_host(
            s,
            g,
            candidates,
            types,
            dims,
            price_of,
            &candidate_of,
            Some(*c),
            stays,
            most,
        ) else {
            // Its pods stay where the greedy put them, as before; its owners too.
            if leaving.iter().any(|p| g.movers.binary_search(p).is_ok()) {
                return None;
            }
            continue;
        };
        pods.extend(leaving.iter().copied());
        hosts.push(host);
    }
    let has_movers = pods.iter().any(|p| g.movers.binary_search(p).is_ok());
    if hosts.is_empty() && !has_movers {
        return Some(Filled {
            shrunk: Vec::new(),
            added: Vec::new(),
            saving: 0.0,
        });
    }

    // Host by host, the largest pods that still fit join it (first fit decreasing per host),
    // sizes measured as shares of the group's total demand so that no dimension's unit
    // dominates. Identical requests form a class, so a host looks at each class once
    // rather than at every pod: the work is hosts × classes plus the pods placed, not
    // hosts × pods, which matters with thousands of anti-affinity pods. Within a class,
    // spread owners come first: they have nowhere else to go but hosts.
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
    let mover: Vec<bool> = pods
        .iter()
        .map(|p| g.movers.binary_search(p).is_ok())
        .collect();
    let mut class_of: std::collections::HashMap<&[i64], usize> = std::collections::HashMap::new();
    let mut classes: Vec<(&[i64], Vec<usize>)> = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let k = *class_of.entry(v.as_slice()).or_insert_with(|| {
            classes.push((v.as_slice(), Vec::new()));
            classes.len() - 1
        });
        classes[k].1.push(i);
    }
    for (_, members) in &mut classes {
        members.sort_by_key(|&i| !mover[i]);
    }
    classes.sort_by(|a, b| size(b.0).total_cmp(&size(a.0)).then(a.0.cmp(b.0)));
    let mut state = Pool {
        pods: pods.as_slice(),
        classes: &classes,
        mover: &mover,
        placed: vec![false; pods.len()],
        first_free: vec![0usize; classes.len()],
        log: Vec::new(),
    };
    let anchored: Vec<usize> = hosts.iter().map(|h| h.pods.len()).collect();
    let mut by_price: Vec<usize> = (0..types.len()).collect();
    by_price.sort_by(|&a, &b| types[a].price.total_cmp(&types[b].price).then(a.cmp(&b)));
    // Owners first, largest first, each to the host with the most room left that keeps
    // every hostname-keyed count: spreading them leaves every host room for the others.
    let mut order: Vec<usize> = (0..hosts.len()).collect();
    let key = |h: &Host| -size(&h.room);
    order.sort_by(|&a, &b| key(&hosts[a]).total_cmp(&key(&hosts[b])).then(a.cmp(&b)));
    for (k, (v, members)) in classes.iter().enumerate() {
        for &i in members.iter().filter(|&&i| mover[i]) {
            let mut chosen: Option<(usize, Vec<HostCap>)> = None;
            for &h in &order {
                let host = &hosts[h];
                if !host.room.iter().zip(v.iter()).all(|(r, x)| x <= r) {
                    continue;
                }
                if let Some(own) = state.admits(s, host, i, budget) {
                    chosen = Some((h, own));
                    break;
                }
            }
            if chosen.is_none() {
                // No host has room: grow the one whose next type holding it costs least
                // more, when that is less than a host of its own would cost.
                let alone = cheapest_holding(types, &by_price, v, None, budget);
                let mut grown: Option<(usize, usize, f64)> = None;
                for &h in &order {
                    let host = &hosts[h];
                    if state.admits(s, host, i, budget).is_none() {
                        continue;
                    }
                    let load: Vec<i64> = host
                        .vector
                        .iter()
                        .zip(v.iter())
                        .map(|(a, b)| a + b)
                        .collect();
                    let most = host.most.as_deref().map(|m| (m, &limits, t, candidates));
                    let Some(k) = cheapest_holding(types, &by_price, &load, most, budget) else {
                        continue;
                    };
                    let extra = types[k].price - host.price;
                    if grown.as_ref().is_none_or(|(_, _, e)| extra < *e) {
                        grown = Some((h, k, extra));
                    }
                }
                if let Some((h, k, extra)) = grown
                    && alone.is_none_or(|a| extra < types[a].price - price_epsilon(extra))
                {
                    let host = &mut hosts[h];
                    host.retype(&types[k]);
                    chosen = state.admits(s, host, i, budget).map(|own| (h, own));
                }
            }
            if budget.exhausted() {
                return None;
            }
            if let Some((h, own)) = chosen {
                state.join(s, &mut hosts[h], i, v, own);
                // Back into place among the hosts by room.
                if let Some(at) = order.iter().position(|&x| x == h) {
                    order.remove(at);
                }
                let kh = key(&hosts[h]);
                let at = order.partition_point(|&x| {
                    let kx = key(&hosts[x]);
                    kx < kh || (kx == kh && x < h)
                });
                order.insert(at, h);
            }
        }
        while state.first_free[k] < members.len() && state.placed[members[state.first_free[k]]] {
            state.first_free[k] += 1;
        }
    }
    for host in hosts.iter_mut() {
        if !state.fill(s, host, budget) {
            return None;
        }
    }
    // Each owner no host took opens one, largest first, which the other pods then fill.
    let mut opened = 0usize;
    for (_, members) in &classes {
        for &i in members {
            if state.placed[i] || !mover[i] {
                continue;
            }
            let mut host = open_host(
                s,
                g,
                candidates,
                types,
                dims,
                price_of,
                &candidate_of,
                None,
                vec![pods[i]],
                None,
            )?;
            state.placed[i] = true;
            if !state.fill(s, &mut host, budget) {
                return None;
            }
            hosts.push(host);
            opened += 1;
        }
    }

    if may_grow {
        grow(
            s, g, candidates, types, dims, &mut hosts, &mut state, budget,
        );
    }

    let mut shrunk = Vec::new();
    let mut added = Vec::new();
    let mut saving = 0.0;
    let mut rest: Vec<usize> = Vec::new();
    let anchored = anchored.into_iter().chain(std::iter::repeat_n(1, opened));
    for (host, anchors) in hosts.into_iter().zip(anchored) {
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
                // minValues no longer holds with what joined: that goes back to the rest,
                // which may not take an owner.
                let back = &host.pods[anchors..];
                if host.claim.is_none() || back.iter().any(|p| g.movers.binary_search(p).is_ok()) {
                    return None;
                }
                rest.extend_from_slice(back);
                let mut stays = host.pods;
                stays.truncate(anchors);
                (stays, host.base_load, host.base_options)
            }
        };
        let after = options
            .iter()
            .map(|&i| price_of[i as usize])
            .fold(f64::INFINITY, f64::min);
        let Some(c) = host.claim else {
            saving -= after;
            added.push(new_claim(g, t, next_host, options, content, load));
            continue;
        };
        let claim = &s.claims[c];
        let before = claim_price(t, &claim.options, &g.reqs);
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
        shrunk.push((c, claim.shrunk(t, content, load, options)));
    }
    let mut remaining: Vec<usize> = pods
        .iter()
        .zip(&state.placed)
        .filter(|(_, p)| !**p)
        .map(|(&p, _)| p)
        .collect();
    remaining.extend(rest);
    *pods = remaining;
    Some(Filled {
        shrunk,
        added,
        saving,
    })
}

/// The cheapest of `types` (`by_price` orders them) that holds `load`, under limits only
/// one whose charge is within `most`.
fn cheapest_holding(
    types: &[BinType],
    by_price: &[usize],
    load: &[i64],
    most: Option<(
        &[i64],
        &Remaining,
        &crate::solver::nodeclaim::Template<'_>,
        &[Candidate],
    )>,
    budget: &mut Budget<'_>,
) -> Option<usize> {
    for &k in by_price {
        if !budget.spend(load.len() as u64) {
            return None;
        }
        if !load.iter().zip(&types[k].cap).all(|(l, c)| l <= c) {
            continue;
        }
        if let Some((most, limits, t, candidates)) = most {
            let charge = limits.charge(t.its[candidates[k].it as usize]);
            if !charge.iter().zip(most).all(|(c, m)| c <= m) {
                continue;
            }
        }
        return Some(k);
    }
    None
}

/// A host holding `anchors` (on greedy claim `claim`, or a new one), priced at the
/// cheapest candidate that holds them (no larger than `most` under limits), with the caps
/// its anchors own; `None` when no candidate holds them.
#[allow(clippy::too_many_arguments)]
fn open_host(
    s: &Scheduler<'_>,
    g: &Group,
    candidates: &[Candidate],
    types: &[BinType],
    dims: &Dims,
    price_of: &[f64],
    candidate_of: &[usize],
    claim: Option<usize>,
    anchors: Vec<usize>,
    most: Option<Vec<i64>>,
) -> Option<Host> {
    let mut load = Resources::default();
    for &p in &anchors {
        arith::add_into(&mut load, &pod_requests(&s.pods[p]));
    }
    let options = host_options(s, g, candidates, types, dims, &load, most.as_deref())?;
    let cheapest = *options
        .iter()
        .min_by(|&&a, &&b| price_of[a as usize].total_cmp(&price_of[b as usize]))?;
    let cap = &types[candidate_of[cheapest as usize]].cap;
    let vector = dims.vector(&load);
    let room = cap.iter().zip(&vector).map(|(c, l)| c - l).collect();
    let present: Vec<(usize, &crate::model::Pod)> =
        anchors.iter().map(|&p| (p, &s.pods[p])).collect();
    let caps = s.topology.host_caps(&present);
    Some(Host {
        claim,
        pods: anchors,
        load: load.clone(),
        vector,
        room,
        price: price_of[cheapest as usize],
        caps,
        most,
        base_load: load,
        base_options: options,
    })
}

/// The pods hosts may take, by request class (largest first, owners first within a class).
struct Pool<'a> {
    pods: &'a [usize],
    classes: &'a [(&'a [i64], Vec<usize>)],
    mover: &'a [bool],
    placed: Vec<bool>,
    /// Per class, how many of its leading members are placed (skipped for good).
    first_free: Vec<usize>,
    /// The pods placed, in order (so a trial can be undone).
    log: Vec<usize>,
}

impl Pool<'_> {
    /// Whether pod `i` may join `host` as far as hostname-keyed constraints go: no cap of
    /// the host that selects it is full and, for an owner, its own spreads hold on the
    /// host's content. Returns the owner's caps to add when it joins.
    fn admits(
        &self,
        s: &Scheduler<'_>,
        host: &Host,
        i: usize,
        budget: &mut Budget<'_>,
    ) -> Option<Vec<HostCap>> {
        let q = self.pods[i];
        let pod = &s.pods[q];
        if !budget.spend(host.caps.len() as u64 + 1) {
            return None;
        }
        if host
            .caps
            .iter()
            .any(|c| c.room <= 0 && s.topology.cap_selects(c, pod))
        {
            return None;
        }
        if !self.mover[i] {
            return Some(Vec::new());
        }
        if !budget.spend(host.pods.len() as u64 + 1) {
            return None;
        }
        let present: Vec<(usize, &crate::model::Pod)> =
            host.pods.iter().map(|&p| (p, &s.pods[p])).collect();
        let own = s.topology.owner_caps(q, pod, &present);
        own.iter().all(|c| c.room >= 0).then_some(own)
    }

    /// Pod `i` (of requests `v` over the group's dimensions) joins `host` with the caps
    /// it owns.
    fn join(&mut self, s: &Scheduler<'_>, host: &mut Host, i: usize, v: &[i64], own: Vec<HostCap>) {
        for ((r, l), x) in host.room.iter_mut().zip(host.vector.iter_mut()).zip(v) {
            *r -= x;
            *l += x;
        }
        let pod = &s.pods[self.pods[i]];
        for c in host.caps.iter_mut() {
            if s.topology.cap_selects(c, pod) {
                c.room -= 1;
            }
        }
        host.caps.extend(own);
        host.pods.push(self.pods[i]);
        arith::add_into(&mut host.load, &pod_requests(pod));
        self.placed[i] = true;
        self.log.push(i);
    }

    /// First fit decreasing into `host`'s room; false when the budget ran out.
    fn fill(&mut self, s: &Scheduler<'_>, host: &mut Host, budget: &mut Budget<'_>) -> bool {
        for k in 0..self.classes.len() {
            let (v, members) = &self.classes[k];
            if !budget.spend(v.len() as u64 + 1) {
                return false;
            }
            let mut n = self.first_free[k];
            while n < members.len() && host.room.iter().zip(v.iter()).all(|(r, x)| x <= r) {
                let i = members[n];
                n += 1;
                if self.placed[i] {
                    continue;
                }
                if budget.exhausted() {
                    return false;
                }
                let Some(own) = self.admits(s, host, i, budget) else {
                    continue;
                };
                self.join(s, host, i, v, own);
            }
            while self.first_free[k] < members.len() && self.placed[members[self.first_free[k]]] {
                self.first_free[k] += 1;
            }
        }
        !budget.exhausted()
    }
}

/// Hosts grow to a larger type where the extra room absorbs pods still left for new nodes
/// that are worth more than the extra price, at the resource prices of the fluid LP over
/// those pods (the least any new capacity could charge for them). A host tries the
/// cheapest few types that hold its content and are more efficient than its own at those
/// prices (and, under limits, no larger than its largest option before), and takes the
/// one that gains most.
#[allow(clippy::too_many_arguments)]
fn grow(
    s: &Scheduler<'_>,
    g: &Group,
    candidates: &[Candidate],
    types: &[BinType],
    dims: &Dims,
    hosts: &mut [Host],
    pool: &mut Pool<'_>,
    budget: &mut Budget<'_>,
) {
    let n = dims.len();
    let mut demand = vec![0.0f64; n];
    let mut left = 0usize;
    for (k, (v, members)) in pool.classes.iter().enumerate() {
        let free = members[pool.first_free[k]..]
            .iter()
            .filter(|&&i| !pool.placed[i])
            .count();
        for (d, &x) in demand.iter_mut().zip(v.iter()) {
            *d += x.max(0) as f64 * free as f64;
        }
        left += free;
    }
    if left == 0 || hosts.is_empty() {
        return;
    }
    let columns = BoundColumn::of_types(types);
    let class = BoundClass {
        demand,
        columns: (0..columns.len()).collect(),
    };
    let Some(lp) = bound::lower_bound(n, &[class], &[], &columns, budget) else {
        return;
    };
    let Some(prices) = lp.prices.first() else {
        return;
    };
    let worth = |v: &[i64]| -> f64 {
        v.iter()
            .zip(prices)
            .map(|(&x, p)| x.max(0) as f64 * p)
            .sum()
    };
    let t = &s.templates[g.template];
    let limits = Remaining::new(t.pool);
    let reduced: Vec<f64> = types.iter().map(|ty| ty.price - worth(&ty.cap)).collect();
    let mut order: Vec<usize> = (0..types.len()).collect();
    order.sort_by(|&a, &b| types[a].price.total_cmp(&types[b].price).then(a.cmp(&b)));
    for host in hosts.iter_mut() {
        if !budget.spend(types.len() as u64 + 1) {
            return;
        }
        let cap: Vec<i64> = host
            .vector
            .iter()
            .zip(&host.room)
            .map(|(l, r)| l + r)
            .collect();
        let own = host.price - worth(&cap);
        // A host whose type is nearly as efficient as any stays: growing it would only
        // trade its room for the packers' (on proportionally priced types this changes
        // nothing but which heuristic packs what).
        if own <= GROW_MIN_WASTE * host.price {
            continue;
        }
        let tries: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&k| {
                let ty = &types[k];
                ty.price > host.price
                    && reduced[k] < own - price_epsilon(own)
                    && host.vector.iter().zip(&ty.cap).all(|(l, c)| l <= c)
                    && host.most.as_deref().is_none_or(|most| {
                        limits
                            .charge(t.its[candidates[k].it as usize])
                            .iter()
                            .zip(most)
                            .all(|(c, m)| c <= m)
                    })
            })
            .take(GROW_TRIES)
            .collect();
        let mut best: Option<(usize, f64)> = None;
        for k in tries {
            let mut trial = Host {
                claim: host.claim,
                pods: host.pods.clone(),
                load: host.load.clone(),
                vector: host.vector.clone(),
                room: types[k]
                    .cap
                    .iter()
                    .zip(&host.vector)
                    .map(|(c, l)| c - l)
                    .collect(),
                price: types[k].price,
                caps: host.caps.clone(),
                most: None,
                base_load: Resources::default(),
                base_options: Vec::new(),
            };
            let first_free = pool.first_free.clone();
            pool.log.clear();
            let finished = pool.fill(s, &mut trial, budget);
            for &i in &pool.log {
                pool.placed[i] = false;
            }
            pool.first_free = first_free;
            if !finished {
                return;
            }
            let absorbed: Vec<i64> = trial
                .vector
                .iter()
                .zip(&host.vector)
                .map(|(a, b)| a - b)
                .collect();
            let gain = worth(&absorbed) - (types[k].price - host.price);
            if gain > price_epsilon(host.price) && best.is_none_or(|(_, b)| gain > b) {
                best = Some((k, gain));
            }
        }
        if let Some((k, _)) = best {
            host.retype(&types[k]);
            if !pool.fill(s, host, budget) {
                return;
            }
        }
    }
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
