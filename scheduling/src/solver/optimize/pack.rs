//! Variable-size vector bin packing over classes of identical pods: choose node types and
//! an assignment of pods to nodes that minimises the total price.
//!
//! Everything here is integer arithmetic on resource vectors (a load fits a type when it is
//! at most the type's capacity in every dimension), so a packing found here fits exactly as
//! the greedy's `fits` check would say. Prices are only compared, never used to decide fit.
//!
//! Two methods:
//! - [`heuristic`]: repeatedly opens the node whose first-fit filling buys pod "value" at the
//!   lowest price per value, where value weighs each resource by its LP dual price (so a
//!   cpu-heavy mix is steered to compute-optimised types and a memory-heavy one to memory
//!   types), replicating a chosen pattern while the pods last, then prices every node at the
//!   cheapest type its load fits and re-packs the worst-used nodes exactly. Linear in pods
//!   for a fixed number of pod classes.
//! - [`exact`]: depth-first branch and bound over pod-to-node assignments (identical pods in
//!   canonical order, nodes unordered), for small batches; proves optimality when it finishes
//!   within its budget.

use super::budget::Budget;
use std::collections::HashMap;

/// A node type: capacity left for pods (allocatable minus DaemonSet overhead) and price.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BinType {
    /// Capacity per dimension.
    pub cap: Vec<i64>,
    /// Price per hour.
    pub price: f64,
}

/// `count` identical pods.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Class {
    /// Requests per dimension.
    pub req: Vec<i64>,
    /// How many.
    pub count: u32,
}

/// `copies` nodes of type `ty`, each holding `items` (class, count).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bin {
    /// Index into the types.
    pub ty: usize,
    /// Pods per class on each copy.
    pub items: Vec<(usize, u32)>,
    /// Number of identical nodes.
    pub copies: u32,
}

/// A complete packing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Packing {
    /// The nodes.
    pub bins: Vec<Bin>,
    /// Their total price.
    pub cost: f64,
    /// Whether the search proved no cheaper packing exists.
    pub optimal: bool,
}

/// A packing instance.
pub(crate) struct Instance<'a> {
    /// Node types.
    pub types: &'a [BinType],
    /// Pod classes.
    pub classes: &'a [Class],
    /// Value per unit of each dimension (LP dual prices), used to rank types.
    pub weights: &'a [f64],
    /// Value of one pod of each class (LP dual values, kept strictly positive by the
    /// caller), used to compare fillings.
    pub values: &'a [f64],
}

/// Types cheapest first (ties by index), for "cheapest type this load fits" queries.
pub(crate) struct PriceOrder<'a> {
    types: &'a [BinType],
    order: Vec<usize>,
}

impl<'a> PriceOrder<'a> {
    pub(crate) fn new(types: &'a [BinType]) -> Self {
        Self::among(types, (0..types.len()).collect())
    }

    /// Only the types `subset` (indices into `types`), cheapest first. Dropping dominated
    /// types changes no answer's price: a dominating type fits whatever they fit, for no
    /// more.
    pub(crate) fn among(types: &'a [BinType], subset: Vec<usize>) -> Self {
        let mut order = subset;
        order.sort_by(|&a, &b| types[a].price.total_cmp(&types[b].price).then(a.cmp(&b)));
        PriceOrder { types, order }
    }

    /// The cheapest type `load` fits, with the work spent looking.
    fn cheapest(&self, load: &[i64]) -> (Option<usize>, u64) {
        let mut work = 0u64;
        for &t in &self.order {
            work += 1;
            if fits(load, &self.types[t].cap) {
                return (Some(t), work);
            }
        }
        (None, work)
    }
}

impl PriceOrder<'_> {
    /// The cheapest type `load` fits among those priced at most `limit`, with the work
    /// spent looking (the scan stops at the first type dearer than `limit`).
    fn cheapest_within(&self, load: &[i64], limit: f64) -> (Option<usize>, u64) {
        let mut work = 0u64;
        for &t in &self.order {
            if self.types[t].price > limit {
                break;
            }
            work += 1;
            if fits(load, &self.types[t].cap) {
                return (Some(t), work);
            }
        }
        (None, work)
    }
}

/// Merges nodes two at a time while one node of some type holds both loads for no more than
/// the two cost together, smallest nodes first; then gathers identical nodes into copies.
/// The price never rises and the plan needs fewer nodes: where prices are proportional to
/// size, as in most EC2 families, two half-full nodes cost what one full one does, and the
/// packers above would otherwise leave them apart. When the budget runs out the merges
/// made so far stand.
pub(crate) fn merge(
    classes: &[Class],
    prices: &PriceOrder<'_>,
    dims: usize,
    bins: &[Bin],
    budget: &mut Budget<'_>,
) -> Vec<Bin> {
    let types = prices.types;
    let mut biggest = vec![i64::MIN; dims];
    for t in types {
        for (b, &c) in biggest.iter_mut().zip(&t.cap) {
            *b = (*b).max(c);
        }
    }
    struct Node {
        ty: usize,
        items: Vec<(usize, u32)>,
        load: Vec<i64>,
    }
    let mut nodes: Vec<Node> = Vec::new();
    for b in bins {
        let load = load_of(classes, &b.items, dims);
        for _ in 0..b.copies {
            nodes.push(Node {
                ty: b.ty,
                items: b.items.clone(),
                load: load.clone(),
            });
        }
    }
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        types[nodes[a].ty]
            .price
            .total_cmp(&types[nodes[b].ty].price)
            .then(a.cmp(&b))
    });
    let mut alive = vec![true; nodes.len()];
    let mut sum = vec![0i64; dims];
    'outer: for (n, &a) in order.iter().enumerate() {
        if !alive[a] {
            continue;
        }
        for &b in &order[n + 1..] {
            if !alive[b] {
                continue;
            }
            if !budget.spend(dims as u64 + 1) {
                break 'outer;
            }
            for ((s, &x), &y) in sum.iter_mut().zip(&nodes[a].load).zip(&nodes[b].load) {
                *s = x.saturating_add(y);
            }
            if !fits(&sum, &biggest) {
                continue;
            }
            let limit = types[nodes[a].ty].price + types[nodes[b].ty].price;
            let (t, work) = prices.cheapest_within(&sum, limit * (1.0 + 1e-12));
            if !budget.spend(work * dims as u64) {
                break 'outer;
            }
            let Some(t) = t else { continue };
            alive[b] = false;
            let taken = std::mem::take(&mut nodes[b].items);
            let node = &mut nodes[a];
            node.ty = t;
            node.load.clone_from(&sum);
            for (c, k) in taken {
                match node.items.iter_mut().find(|(cc, _)| *cc == c) {
                    Some((_, have)) => *have += k,
                    None => node.items.push((c, k)),
                }
            }
            node.items.sort_unstable();
        }
    }
    let mut merged: Vec<Bin> = Vec::new();
    for (node, _) in nodes.into_iter().zip(&alive).filter(|(_, a)| **a) {
        match merged
            .iter_mut()
            .find(|b| b.ty == node.ty && b.items == node.items)
        {
            Some(b) => b.copies += 1,
            None => merged.push(Bin {
                ty: node.ty,
                items: node.items,
                copies: 1,
            }),
        }
    }
    merged
}

/// The dimensions in which every type holds exactly one unit: pods asking one unit of such
/// a dimension are kept apart (no node holds two of them), which the pricing knapsacks
/// search as one choice per dimension ([`super::bound::BoundItem::apart`]) rather than
/// one level per request class.
pub(crate) fn unit_dims(types: &[BinType], dims: usize) -> Vec<usize> {
    (0..dims)
        .filter(|&d| !types.is_empty() && types.iter().all(|t| t.cap[d] == 1))
        .collect()
}

pub(crate) fn fits(load: &[i64], cap: &[i64]) -> bool {
    load.iter().zip(cap).all(|(l, c)| l <= c)
}

/// The summed requests of `items` (class, count) over `dims` dimensions, saturating.
pub(crate) fn load_of(classes: &[Class], items: &[(usize, u32)], dims: usize) -> Vec<i64> {
    let mut load = vec![0i64; dims];
    for &(c, k) in items {
        for (l, r) in load.iter_mut().zip(&classes[c].req) {
            *l = l.saturating_add(r.saturating_mul(i64::from(k)));
        }
    }
    load
}

/// Total price of `bins`.
pub(crate) fn cost_of(types: &[BinType], bins: &[Bin]) -> f64 {
    bins.iter()
        .map(|b| types[b.ty].price * f64::from(b.copies))
        .sum()
}

fn value_of(inst: &Instance<'_>, c: usize) -> f64 {
    inst.values[c]
}

/// How many candidate types the heuristic fills per step (the best by LP efficiency);
/// every other type is still used when a node is priced at the cheapest type it fits.
const CANDIDATES: usize = 48;
/// Largest batch the exact search takes on.
pub(crate) const EXACT_MAX_PODS: usize = 14;

/// The efficiency heuristic (see the module docs). `None` when the budget ran out or some
/// pod fits no type.
pub(crate) fn heuristic(inst: &Instance<'_>, budget: &mut Budget<'_>) -> Option<Packing> {
    let types = inst.types;
    let classes = inst.classes;
    let dims = inst.weights.len();
    if types.is_empty() {
        return classes.iter().all(|c| c.count == 0).then(|| Packing {
            bins: Vec::new(),
            cost: 0.0,
            optimal: true,
        });
    }
    let values: Vec<f64> = (0..classes.len()).map(|c| value_of(inst, c)).collect();
    let mut order: Vec<usize> = (0..classes.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    let mut min_req = vec![i64::MAX; dims];
    for c in classes {
        for (m, &r) in min_req.iter_mut().zip(&c.req) {
            *m = (*m).min(r);
        }
    }

    // Candidates: the types whose whole capacity is worth the most per price.
    let mut ranked: Vec<(f64, usize)> = types
        .iter()
        .enumerate()
        .map(|(t, ty)| {
            let worth: f64 = ty
                .cap
                .iter()
                .zip(inst.weights)
                .map(|(&c, &w)| c as f64 * w)
                .sum();
            (worth / ty.price.max(1e-12), t)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let candidates: Vec<usize> = ranked.iter().take(CANDIDATES).map(|&(_, t)| t).collect();
    let all: Vec<usize> = (0..types.len()).collect();

    let mut remaining: Vec<u32> = classes.iter().map(|c| c.count).collect();
    let mut left: u64 = remaining.iter().map(|&n| u64::from(n)).sum();
    let mut bins: Vec<Bin> = Vec::new();
    let mut fill = Vec::new();
    let mut best_fill = Vec::new();
    let mut residual = vec![0i64; dims];
    while left > 0 {
        let mut best: Option<(f64, usize)> = None;
        for pool in [&candidates, &all] {
            for &t in pool.iter() {
                if !budget.spend((classes.len() * dims) as u64 / 4 + 1) {
                    return None;
                }
                residual.copy_from_slice(&types[t].cap);
                fill.clear();
                let mut value = 0.0;
                for &c in &order {
                    if remaining[c] == 0 {
                        continue;
                    }
                    let mut k = i64::from(remaining[c]);
                    for (&r, &have) in classes[c].req.iter().zip(&residual) {
                        if r > 0 {
                            k = k.min(have / r);
                        }
                    }
                    if k <= 0 {
                        continue;
                    }
                    for (have, &r) in residual.iter_mut().zip(&classes[c].req) {
                        *have -= r * k;
                    }
                    fill.push((c, k as u32));
                    value += values[c] * k as f64;
                    if residual.iter().zip(&min_req).any(|(h, m)| h < m) {
                        break;
                    }
                }
                if fill.is_empty() {
                    continue;
                }
                let eff = types[t].price / value.max(1e-300);
                let better = match best {
                    None => true,
                    Some((e, bt)) => {
                        eff < e * (1.0 - 1e-12)
                            || (eff <= e * (1.0 + 1e-12)
                                && (types[t].price, t) < (types[bt].price, bt))
                    }
                };
                if better {
                    best = Some((eff, t));
                    std::mem::swap(&mut best_fill, &mut fill);
                }
            }
            if best.is_some() {
                break;
            }
        }
        let (_, t) = best?;
        let copies = best_fill
            .iter()
            .map(|&(c, k)| remaining[c] / k)
            .min()
            .unwrap_or(1)
            .max(1);
        for &(c, k) in &best_fill {
            remaining[c] -= k * copies;
            left -= u64::from(k) * u64::from(copies);
        }
        bins.push(Bin {
            ty: t,
            items: best_fill.clone(),
            copies,
        });
    }
    let prices = PriceOrder::new(types);
    downsize(classes, &prices, dims, &mut bins, budget)?;
    improve_tail(inst, &prices, &mut bins, budget);
    let cost = cost_of(types, &bins);
    Some(Packing {
        bins,
        cost,
        optimal: false,
    })
}

/// Moves every node to the cheapest type its load fits.
pub(crate) fn downsize(
    classes: &[Class],
    prices: &PriceOrder<'_>,
    dims: usize,
    bins: &mut [Bin],
    budget: &mut Budget<'_>,
) -> Option<()> {
    for b in bins.iter_mut() {
        let load = load_of(classes, &b.items, dims);
        let (t, work) = prices.cheapest(&load);
        if !budget.spend(work * dims as u64) {
            return None;
        }
        if let Some(t) = t
            && prices.types[t].price <= prices.types[b.ty].price
        {
            b.ty = t;
        }
    }
    Some(())
}

/// Re-packs the worst-used single nodes together with the exact search, when that is
/// cheaper. Worst-used: highest price per unit of pod value.
pub(crate) fn improve_tail(
    inst: &Instance<'_>,
    prices: &PriceOrder<'_>,
    bins: &mut Vec<Bin>,
    budget: &mut Budget<'_>,
) {
    let value = |b: &Bin| -> f64 {
        b.items
            .iter()
            .map(|&(c, k)| value_of(inst, c) * f64::from(k))
            .sum::<f64>()
    };
    // Split one copy off every multi-copy bin so a single node can be re-packed.
    let mut singles: Vec<(f64, usize)> = bins
        .iter()
        .enumerate()
        .map(|(i, b)| (inst.types[b.ty].price / value(b).max(1e-300), i))
        .collect();
    singles.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut chosen: Vec<usize> = Vec::new();
    let mut pods = 0usize;
    for &(_, i) in &singles {
        let n: usize = bins[i].items.iter().map(|&(_, k)| k as usize).sum();
        if pods + n > EXACT_MAX_PODS {
            continue;
        }
        pods += n;
        chosen.push(i);
        if chosen.len() >= 6 {
            break;
        }
    }
    if chosen.len() < 2 {
        return;
    }
    let mut counts: HashMap<usize, u32> = HashMap::new();
    for &i in &chosen {
        for &(c, k) in &bins[i].items {
            *counts.entry(c).or_insert(0) += k;
        }
    }
    let mut sub_classes: Vec<(usize, u32)> = counts.into_iter().collect();
    sub_classes.sort_unstable();
    let classes: Vec<Class> = sub_classes
        .iter()
        .map(|&(c, k)| Class {
            req: inst.classes[c].req.clone(),
            count: k,
        })
        .collect();
    let current: f64 = chosen.iter().map(|&i| inst.types[bins[i].ty].price).sum();
    let values: Vec<f64> = sub_classes.iter().map(|&(c, _)| inst.values[c]).collect();
    let sub = Instance {
        types: inst.types,
        classes: &classes,
        weights: inst.weights,
        values: &values,
    };
    let Some(better) = exact_with(&sub, prices, current, budget).packing else {
        return;
    };
    if better.cost >= current - 1e-9 {
        return;
    }
    for &i in &chosen {
        bins[i].copies -= 1;
    }
    bins.retain(|b| b.copies > 0);
    for b in better.bins {
        bins.push(Bin {
            ty: b.ty,
            items: b
                .items
                .iter()
                .map(|&(c, k)| (sub_classes[c].0, k))
                .collect(),
            copies: b.copies,
        });
    }
}

/// Exact branch and bound for at most [`EXACT_MAX_PODS`] pods: a packing cheaper than
/// `incumbent`, or `None` when there is none (or the budget ran out before finding one).
/// `optimal` says the search finished.
pub(crate) fn exact(inst: &Instance<'_>, incumbent: f64, budget: &mut Budget<'_>) -> Exact {
    let prices = PriceOrder::new(inst.types);
    exact_with(inst, &prices, incumbent, budget)
}

/// The exact search's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exact {
    /// The cheapest packing below the incumbent, if any was found.
    pub packing: Option<Packing>,
    /// Whether the search ran to completion: then `packing` is optimal, or `None` proves
    /// the incumbent optimal.
    pub finished: bool,
}

struct Search<'a, 'b, 'd> {
    inst: &'a Instance<'a>,
    prices: &'a PriceOrder<'a>,
    items: Vec<usize>,
    loads: Vec<Vec<i64>>,
    bin_type: Vec<usize>,
    bin_of: Vec<usize>,
    best_cost: f64,
    best: Option<(Vec<usize>, Vec<usize>)>,
    budget: &'b mut Budget<'d>,
    aborted: bool,
}

impl Search<'_, '_, '_> {
    fn dfs(&mut self, i: usize, cost: f64) {
        if self.aborted || cost >= self.best_cost - 1e-9 {
            return;
        }
        if i == self.items.len() {
            self.best_cost = cost;
            self.best = Some((self.bin_of.clone(), self.bin_type.clone()));
            return;
        }
        let c = self.items[i];
        let req = &self.inst.classes[c].req;
        // Identical pods go to nodes in non-decreasing order: the others are permutations.
        let start = if i > 0 && self.items[i - 1] == c {
            self.bin_of[i - 1]
        } else {
            0
        };
        for b in start..=self.loads.len() {
            let opening = b == self.loads.len();
            let mut load = if opening {
                vec![0; req.len()]
            } else {
                self.loads[b].clone()
            };
            for (l, r) in load.iter_mut().zip(req) {
                *l = l.saturating_add(*r);
            }
            let (t, work) = self.prices.cheapest(&load);
            if !self.budget.spend(work * req.len() as u64 + 1) {
                self.aborted = true;
                return;
            }
            let Some(t) = t else { continue };
            let old = if opening {
                0.0
            } else {
                self.inst.types[self.bin_type[b]].price
            };
            let next = cost - old + self.inst.types[t].price;
            if next >= self.best_cost - 1e-9 {
                continue;
            }
            self.bin_of[i] = b;
            if opening {
                self.loads.push(load);
                self.bin_type.push(t);
                self.dfs(i + 1, next);
                self.loads.pop();
                self.bin_type.pop();
            } else {
                let saved = std::mem::replace(&mut self.loads[b], load);
                let saved_t = std::mem::replace(&mut self.bin_type[b], t);
                self.dfs(i + 1, next);
                self.loads[b] = saved;
                self.bin_type[b] = saved_t;
            }
            if self.aborted {
                return;
            }
        }
    }
}

fn exact_with(
    inst: &Instance<'_>,
    prices: &PriceOrder<'_>,
    incumbent: f64,
    budget: &mut Budget<'_>,
) -> Exact {
    let total: usize = inst.classes.iter().map(|c| c.count as usize).sum();
    if total > EXACT_MAX_PODS {
        return Exact {
            packing: None,
            finished: false,
        };
    }
    let values: Vec<f64> = (0..inst.classes.len()).map(|c| value_of(inst, c)).collect();
    let mut order: Vec<usize> = (0..inst.classes.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    let items: Vec<usize> = order
        .iter()
        .flat_map(|&c| std::iter::repeat_n(c, inst.classes[c].count as usize))
        .collect();
    let n = items.len();
    let mut s = Search {
        inst,
        prices,
        items,
        loads: Vec::new(),
        bin_type: Vec::new(),
        bin_of: vec![0; n],
        best_cost: incumbent,
        best: None,
        budget,
        aborted: false,
    };
    s.dfs(0, 0.0);
    let finished = !s.aborted;
    let Some((bin_of, bin_type)) = s.best else {
        return Exact {
            packing: None,
            finished,
        };
    };
    let mut bins: Vec<Bin> = bin_type
        .iter()
        .map(|&ty| Bin {
            ty,
            items: Vec::new(),
            copies: 1,
        })
        .collect();
    for (i, &b) in bin_of.iter().enumerate() {
        let c = s.items[i];
        match bins[b].items.iter_mut().find(|(cc, _)| *cc == c) {
            Some((_, k)) => *k += 1,
            None => bins[b].items.push((c, 1)),
        }
    }
    let cost = cost_of(inst.types, &bins);
    Exact {
        packing: Some(Packing {
            bins,
            cost,
            optimal: finished,
        }),
        finished,
    }
}

/// Test support: asserts that `p` places every pod of `inst` exactly once, that no node is
/// over its type's capacity, and that `p.cost` is the nodes' price.
#[cfg(test)]
pub(crate) fn check_packing(inst: &Instance<'_>, p: &Packing) {
    let dims = inst.weights.len();
    let mut placed = vec![0u32; inst.classes.len()];
    for b in &p.bins {
        let load = load_of(inst.classes, &b.items, dims);
        assert!(fits(&load, &inst.types[b.ty].cap), "{b:?} over capacity");
        for &(c, k) in &b.items {
            placed[c] += k * b.copies;
        }
    }
    let want: Vec<u32> = inst.classes.iter().map(|c| c.count).collect();
    assert_eq!(placed, want);
    assert!((p.cost - cost_of(inst.types, &p.bins)).abs() < 1e-9);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(cpu: i64, mem: i64, price: f64) -> BinType {
        BinType {
            cap: vec![cpu, mem, 110],
            price,
        }
    }

    fn class(cpu: i64, mem: i64, count: u32) -> Class {
        Class {
            req: vec![cpu, mem, 1],
            count,
        }
    }

    fn by_weight(classes: &[Class], weights: &[f64]) -> Vec<f64> {
        classes
            .iter()
            .map(|c| c.req.iter().zip(weights).map(|(&r, w)| r as f64 * w).sum())
            .collect()
    }

    /// Every assignment of `n` pods to at most `n` nodes, each node priced at its cheapest
    /// fitting type.
    fn brute_force(inst: &Instance<'_>) -> f64 {
        let items: Vec<usize> = (0..inst.classes.len())
            .flat_map(|c| std::iter::repeat_n(c, inst.classes[c].count as usize))
            .collect();
        let prices = PriceOrder::new(inst.types);
        let dims = inst.weights.len();
        let n = items.len();
        let mut best = f64::INFINITY;
        let mut assign = vec![0usize; n];
        loop {
            let mut loads = vec![vec![0i64; dims]; n];
            for (i, &b) in assign.iter().enumerate() {
                for (l, r) in loads[b].iter_mut().zip(&inst.classes[items[i]].req) {
                    *l += r;
                }
            }
            let mut cost = 0.0;
            let mut ok = true;
            for load in loads.iter().filter(|l| l.iter().any(|&v| v > 0)) {
                match prices.cheapest(load).0 {
                    Some(t) => cost += inst.types[t].price,
                    None => ok = false,
                }
            }
            if ok {
                best = best.min(cost);
            }
            let mut i = 0;
            loop {
                if i == n {
                    return best;
                }
                assign[i] += 1;
                if assign[i] < n {
                    break;
                }
                assign[i] = 0;
                i += 1;
            }
        }
    }

    #[test]
    fn exact_matches_brute_force_on_tiny_cases() {
        let types = [
            ty(2000, 4, 0.10),
            ty(4000, 8, 0.17),
            ty(8000, 16, 0.40),
            ty(2000, 16, 0.15),
        ];
        let cases = [
            vec![class(1500, 3, 2), class(700, 1, 3)],
            vec![class(3000, 2, 1), class(900, 6, 2), class(300, 1, 1)],
            vec![class(1900, 1, 3), class(100, 7, 2)],
        ];
        for classes in &cases {
            let values = by_weight(classes, &[1e-4, 0.01, 0.0]);
            let inst = Instance {
                types: &types,
                classes,
                weights: &[1e-4, 0.01, 0.0],
                values: &values,
            };
            let mut b = Budget::new(u64::MAX, None);
            let p = exact(&inst, f64::INFINITY, &mut b).packing.unwrap();
            assert!(p.optimal);
            check_packing(&inst, &p);
            let brute = brute_force(&inst);
            assert!((p.cost - brute).abs() < 1e-9, "{} vs {brute}", p.cost);
        }
    }

    #[test]
    fn heuristic_packs_everything_and_beats_one_size() {
        // 4-cpu pods: the large type (8 cpu for 0.40) wastes nothing, the mid one (4 cpu
        // for 0.17) is cheaper per cpu.
        let types = [ty(8000, 64, 0.40), ty(4000, 64, 0.17)];
        let classes = [class(4000, 1, 9)];
        let values = by_weight(&classes, &[0.17 / 4000.0, 1e-6, 1e-6]);
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &[0.17 / 4000.0, 1e-6, 1e-6],
            values: &values,
        };
        let mut b = Budget::new(u64::MAX, None);
        let p = heuristic(&inst, &mut b).unwrap();
        check_packing(&inst, &p);
        assert!((p.cost - 9.0 * 0.17).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn heuristic_sizes_the_last_node() {
        let types = [ty(16000, 64, 0.80), ty(4000, 16, 0.20), ty(2000, 8, 0.10)];
        // 33 cpu: two big nodes and a small one, not three big ones.
        let classes = [class(1000, 1, 33)];
        let values = by_weight(&classes, &[0.05 / 1000.0, 1e-6, 1e-6]);
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &[0.05 / 1000.0, 1e-6, 1e-6],
            values: &values,
        };
        let mut b = Budget::new(u64::MAX, None);
        let p = heuristic(&inst, &mut b).unwrap();
        check_packing(&inst, &p);
        assert!((p.cost - 1.70).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn merges_nodes_one_node_holds_for_the_same_price() {
        // Proportional prices: two half-full 4-cpu nodes cost what one 8-cpu node does.
        let types = [ty(4000, 16, 0.2), ty(8000, 32, 0.4), ty(16000, 64, 1.0)];
        let classes = [class(1500, 4, 4), class(3000, 2, 1)];
        let weights = [1.0, 1.0, 1.0];
        let values = by_weight(&classes, &weights);
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &weights,
            values: &values,
        };
        let bins = vec![
            Bin {
                ty: 0,
                items: vec![(0, 2)],
                copies: 2,
            },
            Bin {
                ty: 0,
                items: vec![(1, 1)],
                copies: 1,
            },
        ];
        let before = Packing {
            cost: cost_of(&types, &bins),
            bins: bins.clone(),
            optimal: false,
        };
        check_packing(&inst, &before);
        let prices = PriceOrder::new(&types);
        let mut b = Budget::new(u64::MAX, None);
        let merged = merge(&classes, &prices, 3, &bins, &mut b);
        let after = Packing {
            cost: cost_of(&types, &merged),
            bins: merged.clone(),
            optimal: false,
        };
        check_packing(&inst, &after);
        // The two 2-pod nodes become one 8-cpu node (6 cpu); the 3-cpu pod would need a
        // 16-cpu node (1.0) to join it, dearer than the 0.6 they cost apart.
        assert!((after.cost - before.cost).abs() < 1e-12, "{after:?}");
        let nodes: u32 = merged.iter().map(|b| b.copies).sum();
        assert_eq!(nodes, 2, "{merged:?}");

        // Out of budget: whatever was merged stands, and the packing stays whole.
        let mut b = Budget::new(1, None);
        let partial = merge(&classes, &prices, 3, &bins, &mut b);
        check_packing(
            &inst,
            &Packing {
                cost: cost_of(&types, &partial),
                bins: partial,
                optimal: false,
            },
        );
    }

    #[test]
    fn out_of_budget_gives_nothing() {
        let types = [ty(8000, 64, 0.40)];
        let classes = [class(1000, 1, 100)];
        let values = by_weight(&classes, &[1.0, 0.0, 0.0]);
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &[1.0, 0.0, 0.0],
            values: &values,
        };
        let mut b = Budget::new(3, None);
        assert!(heuristic(&inst, &mut b).is_none());
        assert!(b.exhausted());
    }
}
