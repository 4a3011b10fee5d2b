//! The integer covering lower bound: whole nodes covering the total demand.
//!
//! [`capacity_lower_bound`](crate::capacity_lower_bound) lets nodes be fractional, so when a
//! plan needs only a handful of nodes it undercounts by up to a whole node's price. Here the
//! node counts are integers: minimise `Σ price_t · x_t` over `x_t ∈ ℕ` subject to
//! `Σ alloc_td · x_t ≥ demand_d` for cpu, memory and pod slots. Every plan that places all
//! pending pods on new nodes buys such a multiset of nodes (bin-packing fragmentation,
//! placement constraints, DaemonSet overhead and limits only make it dearer), so the
//! optimum is a valid lower bound.
//!
//! One piece of fragmentation is cheap to add and keeps the bound valid: a pod can only run
//! on a type whose allocatable cpu and memory hold it (and that has a pod slot). For each
//! distinct request the types that hold it form a set `U`; every pod that fits only types in
//! `U` must land on nodes of `U`, so those nodes alone must cover those pods' demand. These
//! rows stop the bound from covering 4 GiB pods with 2-vCPU/4 GiB nodes whose allocatable
//! memory is below 4 GiB.

use crate::{CoverType, covering_problem, pending_pod_classes};
use good_lp::{Expression, ProblemVariables, Solution, SolverModel, Variable, microlp, variable};
use karpenter_scheduling::model::Snapshot;
use std::collections::BTreeMap;

/// The integer covering problem is only solved when the cheapest single-type cover needs at
/// most this many nodes: beyond that the LP relaxation is within a small fraction of a
/// node's price of it (at 5,000 AWS pods the integer bound is 0.04 % above the LP), while
/// the branch and bound's work grows with the node count.
pub const INTEGER_BOUND_MAX_NODES: u64 = 12;

/// The integer covering problem is only solved over at most this many undominated types.
/// microlp's branch and bound has no node limit, and on a catalogue of near-proportional
/// prices (the `karpenter-400` one: 400 types, none dominated) it does not finish in hours;
/// the real AWS catalogue leaves fewer than 100.
pub const INTEGER_BOUND_MAX_TYPES: usize = 150;

/// The relative slack subtracted from the solver's optimum, so that its pruning tolerance
/// (a node is dropped when it is within `1e-9` relative of the incumbent) can never make
/// the reported value exceed the true integer optimum.
const SOLVER_SLACK: f64 = 1e-6;

/// An optimal multiset of whole nodes covering a snapshot's total demand.
#[derive(Debug, Clone, PartialEq)]
pub struct CoveringSolution {
    /// A lower bound on the hourly price of any plan placing every pending pod on new nodes:
    /// the optimum of the integer covering problem, less a `1e-6` relative slack for the
    /// solver's floating-point tolerances.
    pub bound: f64,
    /// Hourly price of [`Self::nodes`] (the optimum itself, before the slack).
    pub price: f64,
    /// Instance type name and node count of an optimal cover, by name; every count is
    /// positive. The covering is checked in integer arithmetic before it is returned.
    pub nodes: Vec<(String, u32)>,
}

/// The integer covering bound of `snapshot`, with a cover attaining it; `None` when there
/// is nothing to place, no instance type can be bought or cover the demand, the problem is
/// larger than [`INTEGER_BOUND_MAX_NODES`] nodes of the best single type or
/// [`INTEGER_BOUND_MAX_TYPES`] undominated types, or the solver fails (callers then fall
/// back to the LP relaxation).
///
/// Each type is priced at its cheapest offering the NodePool allows and offers its
/// allocatable resources, exactly as in [`capacity_lower_bound`](crate::capacity_lower_bound);
/// types another type dominates (at least as much of every demanded resource for no more
/// money) are dropped first, which cannot change the optimum.
///
/// Beyond the total-demand rows, for every distinct pod request the types able to hold it
/// must cover the demand of all pods that fit nowhere else (see the module documentation);
/// `None` too when some pod fits no type.
pub fn integer_covering_bound(snapshot: &Snapshot) -> Option<CoveringSolution> {
    let (_, types) = covering_problem(snapshot)?;
    let classes: Vec<([i64; 2], i64)> = pending_pod_classes(snapshot).into_iter().collect();
    solve_covering(&classes, types)
}

/// Whether one pod requesting `req` (cpu, memory) fits an empty node of `t`.
fn holds(t: &CoverType, req: [i64; 2]) -> bool {
    t.alloc[0] >= req[0] && t.alloc[1] >= req[1] && t.alloc[2] >= 1
}

/// Nodes of `t` alone needed to cover `demand`, `None` when `t` lacks a demanded resource.
fn single_type_nodes(t: &CoverType, demand: [i64; 3]) -> Option<u64> {
    let mut nodes = 0u64;
    for (&want, &alloc) in demand.iter().zip(&t.alloc) {
        if want == 0 {
            continue;
        }
        if alloc <= 0 {
            return None;
        }
        let need = u64::try_from(want)
            .ok()?
            .div_ceil(u64::try_from(alloc).ok()?);
        nodes = nodes.max(need);
    }
    Some(nodes)
}

/// Drops every type another kept type dominates on the demanded dimensions; cheapest first,
/// ties broken by name so that the result does not depend on catalogue order.
fn undominated(mut types: Vec<CoverType>, demand: [i64; 3]) -> Vec<CoverType> {
    types.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| b.alloc.cmp(&a.alloc))
    });
    let mut kept: Vec<CoverType> = Vec::new();
    for t in types {
        let dominated = kept.iter().any(|k| {
            k.price <= t.price && (0..3).all(|d| demand[d] == 0 || k.alloc[d] >= t.alloc[d])
        });
        if !dominated {
            kept.push(t);
        }
    }
    kept
}

/// Solves the covering of the pods `classes` (request, count) by whole nodes of `types`
/// exactly (see [`integer_covering_bound`]).
pub(crate) fn solve_covering(
    classes: &[([i64; 2], i64)],
    types: Vec<CoverType>,
) -> Option<CoveringSolution> {
    let mut demand = [0i64; 3];
    for &(req, count) in classes {
        for (d, r) in demand.iter_mut().zip([req[0], req[1], 1]) {
            *d = d.saturating_add(r.saturating_mul(count));
        }
    }
    if demand[2] == 0 {
        return None;
    }
    let types = undominated(types, demand);
    if types.len() > INTEGER_BOUND_MAX_TYPES {
        return None;
    }
    // Rows: the types able to hold each request, and the demand of every pod that fits only
    // those types; identical type sets are one row. The full type set carries the total.
    let fits: Vec<Vec<bool>> = classes
        .iter()
        .map(|&(req, _)| types.iter().map(|t| holds(t, req)).collect())
        .collect();
    if fits.iter().any(|f| !f.contains(&true)) {
        return None;
    }
    let mut rows: BTreeMap<Vec<bool>, [i64; 3]> = BTreeMap::new();
    rows.insert(vec![true; types.len()], demand);
    for set in &fits {
        let mut row = [0i64; 3];
        for (&(req, count), other) in classes.iter().zip(&fits) {
            if other.iter().zip(set).all(|(o, s)| !o || *s) {
                for (d, r) in row.iter_mut().zip([req[0], req[1], 1]) {
                    *d = d.saturating_add(r.saturating_mul(count));
                }
            }
        }
        rows.insert(set.clone(), row);
    }
    // A type that holds every pod and covers the total alone is a feasible solution: the
    // cheapest such sizes the problem and caps every count (no optimal cover spends more
    // than it on one type). More copies of a type than cover the total alone are never
    // needed either, whatever rows it is in.
    let singles: Vec<Option<u64>> = types.iter().map(|t| single_type_nodes(t, demand)).collect();
    let holds_all: Vec<bool> = (0..types.len())
        .map(|i| fits.iter().all(|f| f[i]))
        .collect();
    let incumbent = types
        .iter()
        .zip(&singles)
        .zip(&holds_all)
        .filter(|(_, all)| **all)
        .filter_map(|((t, n), _)| n.map(|n| n as f64 * t.price))
        .fold(f64::INFINITY, f64::min);
    let smallest = singles.iter().flatten().copied().min().unwrap_or(u64::MAX);
    if smallest > INTEGER_BOUND_MAX_NODES {
        return None;
    }
    let mut vars = ProblemVariables::new();
    let mut chosen: Vec<(usize, Variable)> = Vec::new();
    for (i, t) in types.iter().enumerate() {
        // An infinite incumbent (no single type holds every pod) leaves only the need cap.
        let by_price = (incumbent / t.price * (1.0 + 1e-9)).floor();
        // A type useless on its own still helps in a mix: it needs enough copies to cover
        // the dimensions it does offer, bounded by the price cap.
        let by_need = singles[i].map_or(f64::INFINITY, |n| n as f64);
        let cap = by_price.min(by_need).min(f64::from(i32::MAX));
        if cap < 1.0 {
            continue;
        }
        chosen.push((i, vars.add(variable().integer().clamp(0.0, cap))));
    }
    let mut objective = Expression::default();
    for &(i, x) in &chosen {
        objective.add_mul(types[i].price, x);
    }
    let mut model = vars.minimise(objective).using(microlp);
    for (set, row_demand) in &rows {
        for (d, &want) in row_demand.iter().enumerate() {
            if want == 0 {
                continue;
            }
            // Rows scaled by their demand: memory in bytes would otherwise dwarf the
            // solver's absolute tolerances.
            let mut row = Expression::default();
            for &(i, x) in &chosen {
                if set[i] {
                    row.add_mul(types[i].alloc[d] as f64 / want as f64, x);
                }
            }
            model = model.with(row.geq(1.0));
        }
    }
    let solution = model.solve().ok()?;
    let mut counts = vec![0i64; types.len()];
    for &(i, x) in &chosen {
        let value = solution.value(x).round();
        if !(0.0..=f64::from(i32::MAX)).contains(&value) {
            return None;
        }
        counts[i] = value as i64;
    }
    // The solver works in floating point: trust its answer only if every row really holds.
    for (set, row_demand) in &rows {
        for (d, &want) in row_demand.iter().enumerate() {
            let covered = (0..types.len()).filter(|&i| set[i]).fold(0i64, |acc, i| {
                acc.saturating_add(types[i].alloc[d].saturating_mul(counts[i]))
            });
            if covered < want {
                return None;
            }
        }
    }
    let mut nodes: Vec<(String, u32)> = Vec::new();
    let mut price = 0.0;
    for (t, &count) in types.iter().zip(&counts) {
        if count > 0 {
            price += t.price * count as f64;
            nodes.push((t.name.clone(), u32::try_from(count).ok()?));
        }
    }
    nodes.sort();
    Some(CoveringSolution {
        bound: price * (1.0 - SOLVER_SLACK),
        price,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(name: &str, cpu: i64, mem: i64, pods: i64, price: f64) -> CoverType {
        CoverType {
            name: name.to_owned(),
            alloc: [cpu, mem, pods],
            price,
        }
    }

    /// Cheapest cover by exhaustive enumeration, for checking the solver.
    fn brute_force(demand: [i64; 3], types: &[CoverType], max: u32) -> f64 {
        fn go(demand: [i64; 3], types: &[CoverType], max: u32, have: [i64; 3], cost: f64) -> f64 {
            if (0..3).all(|d| have[d] >= demand[d]) {
                return cost;
            }
            let Some((t, rest)) = types.split_first() else {
                return f64::INFINITY;
            };
            let mut best = f64::INFINITY;
            for k in 0..=max {
                let mut h = have;
                for (h, a) in h.iter_mut().zip(t.alloc) {
                    *h += a * i64::from(k);
                }
                best = best.min(go(demand, rest, max, h, cost + t.price * f64::from(k)));
            }
            best
        }
        go(demand, types, max, [0; 3], 0.0)
    }

    /// Two types, one cpu-rich and one memory-rich: the LP mixes them fractionally, whole
    /// nodes cannot.
    fn tiny_catalogue() -> Vec<CoverType> {
        vec![
            ty("cpu-rich", 4000, 2 << 30, 110, 1.0),
            ty("mem-rich", 1000, 8 << 30, 110, 1.0),
            // Dominated by cpu-rich (less of everything, dearer): must not matter.
            ty("worse", 3000, 1 << 30, 50, 1.5),
        ]
    }

    #[test]
    fn integer_bound_beats_the_lp_on_a_tiny_catalogue() {
        // 5500m and 9 GiB: the LP takes 7/6 cpu-rich + 5/6 mem-rich nodes for 2.0, but no
        // two whole nodes cover both cpu and memory, so the integer optimum is 3.0.
        let demand = [5500, 9 << 30, 10];
        let types = tiny_catalogue();
        let lp = lp_value(demand, &types);
        // Ten 550m / 0.9 GiB pods: they fit every type, so only the totals matter.
        let pods = [([550, (9 << 30) / 10], 10)];
        let solution = solve_covering(&pods, types.clone()).expect("small problem");
        let exact = brute_force(demand, &types, 6);
        assert!(
            (solution.price - exact).abs() < 1e-9,
            "{solution:?} {exact}"
        );
        assert!((exact - 3.0).abs() < 1e-9, "{exact}");
        assert!((lp - 2.0).abs() < 1e-6, "{lp}");
        assert!(solution.bound > lp + 0.5, "{} {lp}", solution.bound);
        assert!(solution.bound <= exact);
        assert!(solution.nodes.iter().all(|(name, _)| name != "worse"));
        let total: u32 = solution.nodes.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 3);
    }

    /// The LP relaxation of the same covering, by enumerating pairs of types (a 2-row LP has
    /// an optimal basis of at most two columns).
    fn lp_value(demand: [i64; 3], types: &[CoverType]) -> f64 {
        let dem = [demand[0] as f64, demand[1] as f64];
        let mut best = f64::INFINITY;
        for a in types {
            let n = (0..2)
                .map(|d| dem[d] / a.alloc[d] as f64)
                .fold(0.0, f64::max);
            best = best.min(n * a.price);
            for b in types {
                let (a0, a1, b0, b1) = (
                    a.alloc[0] as f64,
                    a.alloc[1] as f64,
                    b.alloc[0] as f64,
                    b.alloc[1] as f64,
                );
                let det = a0 * b1 - a1 * b0;
                if det.abs() < 1e-12 {
                    continue;
                }
                let xa = (dem[0] * b1 - dem[1] * b0) / det;
                let xb = (a0 * dem[1] - a1 * dem[0]) / det;
                if xa >= 0.0 && xb >= 0.0 {
                    best = best.min(xa * a.price + xb * b.price);
                }
            }
        }
        best
    }

    #[test]
    fn matches_brute_force_on_assorted_demands() {
        let types = vec![
            ty("a", 2000, 4 << 30, 29, 0.096),
            ty("b", 2000, 16 << 30, 29, 0.126),
            ty("c", 4000, 8 << 30, 58, 0.17),
            ty("d", 8000, 32 << 30, 58, 0.384),
            ty("e", 16000, 32 << 30, 234, 0.68),
        ];
        // Small pods fitting every type, so that only the totals matter.
        for pods in [
            vec![([100, 1 << 20], 1)],
            vec![([175, 512 << 20], 40)],
            vec![([150, 700 << 20], 100)],
            vec![([100, 100 << 20], 290), ([100, 10 << 20], 10)],
        ] {
            let demand = pods.iter().fold([0, 0, 0], |acc, &(req, n)| {
                [acc[0] + req[0] * n, acc[1] + req[1] * n, acc[2] + n]
            });
            let solution = solve_covering(&pods, types.clone()).expect("small");
            let exact = brute_force(demand, &types, 6);
            assert!(
                (solution.price - exact).abs() < 1e-9,
                "{pods:?}: {solution:?} vs {exact}"
            );
        }
    }

    #[test]
    fn pods_only_big_types_hold_must_be_covered_by_big_types() {
        let types = vec![
            ty("small", 2000, 4 << 30, 29, 0.1),
            ty("big", 8000, 32 << 30, 110, 0.5),
        ];
        // 7000m in total: four small nodes would cover the totals for 0.4, but the 6000m
        // pod fits only a big node, which then has room for everything else.
        let pods = [([6000, 1 << 30], 1), ([100, 100 << 20], 10)];
        let solution = solve_covering(&pods, types).expect("small");
        assert!((solution.price - 0.5).abs() < 1e-9, "{solution:?}");
        assert_eq!(solution.nodes, vec![("big".to_owned(), 1)]);
        // A pod no type holds makes the problem infeasible, not cheaper.
        assert_eq!(
            solve_covering(&[([9000, 1], 1)], vec![ty("big", 8000, 32 << 30, 110, 0.5)]),
            None
        );
    }

    #[test]
    fn large_or_uncoverable_problems_fall_back() {
        let types = tiny_catalogue();
        // One cpu-rich node more than the size limit, in 1000m pods.
        let pods = 4 * (INTEGER_BOUND_MAX_NODES as i64 + 1);
        assert!(solve_covering(&[([1000, 1], pods - 4)], vec![types[0].clone()]).is_some());
        assert_eq!(
            solve_covering(&[([1000, 1], pods)], vec![types[0].clone()]),
            None
        );
        // No type offers pod slots.
        assert_eq!(
            solve_covering(&[([1, 1], 1)], vec![ty("nopods", 1000, 1 << 30, 0, 1.0)]),
            None
        );
        assert_eq!(solve_covering(&[([1, 1], 1)], Vec::new()), None);
        assert_eq!(solve_covering(&[], types), None);
    }

    #[test]
    fn too_many_undominated_types_fall_back() {
        // Each type a little bigger and dearer than the last: none dominates another.
        let many: Vec<CoverType> = (1..=INTEGER_BOUND_MAX_TYPES as i64 + 1)
            .map(|i| ty(&format!("t{i}"), 1000 * i, i << 30, 110, 0.1 * i as f64))
            .collect();
        let few = many[..INTEGER_BOUND_MAX_TYPES].to_vec();
        assert!(solve_covering(&[([500, 1 << 29], 2)], few).is_some());
        assert_eq!(solve_covering(&[([500, 1 << 29], 2)], many), None);
    }
}
