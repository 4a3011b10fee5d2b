//! LP rounding for large batches: the packing read off the configuration LP.
//!
//! For many small pods the configuration LP (fractional counts of node patterns, a pattern
//! being one node type plus the multiset of pods it holds) is nearly integral: rounding its
//! optimum down and packing what is left loses about one node per pattern it uses. This
//! module:
//!
//! 1. drops dominated node types (another type holds at least as much of everything for no
//!    more money), so pricing runs over ~170 types of a 1,300-type catalogue;
//! 2. runs Gilmore–Gomory column generation: the master LP's dual gives each pod class a
//!    value, a bounded branch and bound per type finds the most valuable pattern, and
//!    patterns worth more than their type's price join the master;
//! 3. solves the final master as a primal LP, instantiates `⌊x_p⌋` copies of every pattern
//!    (never more pods than remain), packs the residual pods with [`pack::heuristic`], then
//!    moves every node to the cheapest type its load fits and re-packs the worst-used ones.
//!
//! Every step is integer-checked by the same `fits` the heuristic uses, so the result is a
//! valid packing whatever the LP solver returns; the caller keeps it only when cheaper.

use super::bound::{self, BoundItem};
use super::budget::Budget;
use super::master;
use super::pack::{self, Bin, Class, Instance, Packing, PriceOrder};

/// Column-generation rounds at most.
const ROUNDS: usize = 30;
/// Violated patterns added to the master per round.
const ADD_PER_ROUND: usize = 24;
/// Search nodes of one pricing knapsack (its first leaf is the greedy fill by density).
const PRICING_NODES: u64 = 300;
/// Homogeneous seed patterns per pod class.
const SEED_PER_CLASS: usize = 3;

/// A node's worth of pods: a type (index into the instance's types) and pods per class.
#[derive(Debug, Clone, PartialEq)]
struct Pattern {
    ty: usize,
    counts: Vec<(usize, u32)>,
}

/// Indices of the types no other type dominates (at least the capacity in every dimension
/// for at most the price), cheapest first; ties keep the lower index.
pub(crate) fn undominated(inst: &Instance<'_>, budget: &mut Budget<'_>) -> Option<Vec<usize>> {
    let types = inst.types;
    let mut order: Vec<usize> = (0..types.len()).collect();
    order.sort_by(|&a, &b| types[a].price.total_cmp(&types[b].price).then(a.cmp(&b)));
    let mut kept: Vec<usize> = Vec::new();
    for t in order {
        if !budget.spend((kept.len() * inst.weights.len()) as u64 / 4 + 1) {
            return None;
        }
        let dominated = kept
            .iter()
            .any(|&k| types[k].price <= types[t].price && pack::fits(&types[t].cap, &types[k].cap));
        if !dominated {
            kept.push(t);
        }
    }
    Some(kept)
}

/// The LP-rounding packing (see the module docs); `None` when the budget ran out, a pod fits
/// no type, or the LP solver failed.
pub(crate) fn lp_round(inst: &Instance<'_>, budget: &mut Budget<'_>) -> Option<Packing> {
    let types = inst.types;
    let classes = inst.classes;
    let dims = inst.weights.len();
    if classes.iter().all(|c| c.count == 0) {
        return Some(Packing {
            bins: Vec::new(),
            cost: 0.0,
            optimal: true,
        });
    }
    let kept = undominated(inst, budget)?;
    let caps: Vec<Vec<f64>> = kept
        .iter()
        .map(|&t| types[t].cap.iter().map(|&c| c.max(0) as f64).collect())
        .collect();
    let units = pack::unit_dims(types, dims);
    let items: Vec<BoundItem> = classes
        .iter()
        .map(|c| BoundItem {
            req: c.req.iter().map(|&r| r as f64).collect(),
            count: f64::from(c.count),
            columns: (0..kept.len())
                .filter(|&j| pack::fits(&c.req, &types[kept[j]].cap))
                .collect(),
            apart: units.iter().copied().find(|&d| c.req[d] == 1),
        })
        .collect();
    if items
        .iter()
        .zip(classes)
        .any(|(it, c)| c.count > 0 && it.columns.is_empty())
    {
        return None;
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); kept.len()];
    for (i, it) in items.iter().enumerate() {
        if classes[i].count == 0 {
            continue;
        }
        for &j in &it.columns {
            users[j].push(i);
        }
    }

    let mut patterns = seeds(inst, &kept, &items);
    if !budget.spend((patterns.len() * classes.len()) as u64) {
        return None;
    }
    // The primal of the last master solved, with how many patterns it had: patterns are
    // only ever appended, so while the count is unchanged it is the final master's primal.
    let mut last: Option<(usize, Vec<f64>)> = None;
    for _round in 0..ROUNDS {
        let master::Solved { values, copies } = master_dual(classes, types, &patterns, budget)?;
        last = Some((patterns.len(), copies));
        let mut violated: Vec<(f64, Pattern)> = Vec::new();
        for (j, &t) in kept.iter().enumerate() {
            if users[j].is_empty() {
                continue;
            }
            if !budget.spend((users[j].len() * dims) as u64 + 1) {
                return None;
            }
            let price = types[t].price;
            let frac = (0..dims)
                .map(|d| bound::knapsack_1d(&users[j], &items, &values, d, caps[j][d]))
                .fold(f64::INFINITY, f64::min);
            if frac <= price * (1.0 + 1e-9) {
                continue;
            }
            let (_, found) = bound::knapsack(
                &users[j],
                &items,
                &values,
                dims,
                &caps[j],
                PRICING_NODES,
                None,
                budget,
            );
            if let Some((value, counts)) = found
                && value > price * (1.0 + 1e-7)
            {
                violated.push((value / price.max(1e-300), Pattern { ty: t, counts }));
            }
        }
        if violated.is_empty() {
            break;
        }
        violated.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.ty.cmp(&b.1.ty)));
        let before = patterns.len();
        for (_, p) in violated.into_iter().take(ADD_PER_ROUND) {
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
        if patterns.len() == before {
            break;
        }
    }
    let x = match last {
        Some((n, copies)) if n == patterns.len() => {
            master_primal_cost(classes, patterns.len(), budget)?;
            copies
        }
        _ => master_primal(classes, types, &patterns, budget)?,
    };

    // Whole copies of every pattern the LP buys, most-bought first.
    let mut order: Vec<usize> = (0..patterns.len()).collect();
    order.sort_by(|&a, &b| x[b].total_cmp(&x[a]).then(a.cmp(&b)));
    let mut remaining: Vec<u32> = classes.iter().map(|c| c.count).collect();
    let mut bins: Vec<Bin> = Vec::new();
    for p in order {
        let whole = (x[p] + 1e-7).floor();
        if whole < 1.0 {
            continue;
        }
        let mut copies = whole.min(f64::from(u32::MAX)) as u32;
        for &(c, k) in &patterns[p].counts {
            copies = copies.min(remaining[c] / k.max(1));
        }
        if copies == 0 {
            continue;
        }
        for &(c, k) in &patterns[p].counts {
            remaining[c] -= k * copies;
        }
        bins.push(Bin {
            ty: patterns[p].ty,
            items: patterns[p].counts.clone(),
            copies,
        });
    }

    // The residual, packed by the efficiency heuristic.
    if remaining.iter().any(|&n| n > 0) {
        let residual: Vec<Class> = classes
            .iter()
            .zip(&remaining)
            .map(|(c, &n)| Class {
                req: c.req.clone(),
                count: n,
            })
            .collect();
        let sub = Instance {
            types,
            classes: &residual,
            weights: inst.weights,
            values: inst.values,
        };
        let rest = pack::heuristic(&sub, budget)?;
        bins.extend(rest.bins);
    }
    let prices = PriceOrder::new(types);
    pack::downsize(classes, &prices, dims, &mut bins, budget)?;
    pack::improve_tail(inst, &prices, &mut bins, budget);
    let cost = pack::cost_of(types, &bins);
    Some(Packing {
        bins,
        cost,
        optimal: false,
    })
}

/// Seed patterns: for every class, the types that hold it most cheaply on their own, and
/// for every undominated type, a fill in proportion to the whole batch (the shape the LP
/// optimum tends to use), topped up greedily.
fn seeds(inst: &Instance<'_>, kept: &[usize], items: &[BoundItem]) -> Vec<Pattern> {
    let types = inst.types;
    let classes = inst.classes;
    let dims = inst.weights.len();
    let mut patterns: Vec<Pattern> = Vec::new();
    let most_alone = |c: usize, t: usize| -> u32 {
        let mut k = i64::from(classes[c].count);
        for (&r, &cap) in classes[c].req.iter().zip(&types[t].cap) {
            if r > 0 {
                k = k.min(cap / r);
            }
        }
        k.max(0) as u32
    };
    for (c, it) in items.iter().enumerate() {
        if classes[c].count == 0 {
            continue;
        }
        let mut ranked: Vec<(f64, usize, u32)> = it
            .columns
            .iter()
            .map(|&j| {
                let t = kept[j];
                let k = most_alone(c, t).max(1);
                (types[t].price / f64::from(k), t, k)
            })
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, t, k) in ranked.iter().take(SEED_PER_CLASS) {
            patterns.push(Pattern {
                ty: t,
                counts: vec![(c, k)],
            });
        }
    }
    let mut demand = vec![0f64; dims];
    for c in classes {
        for (d, &r) in demand.iter_mut().zip(&c.req) {
            *d += r as f64 * f64::from(c.count);
        }
    }
    for &t in kept {
        let cap = &types[t].cap;
        let share = (0..dims)
            .filter(|&d| demand[d] > 0.0)
            .map(|d| cap[d].max(0) as f64 / demand[d])
            .fold(f64::INFINITY, f64::min)
            .min(1.0);
        let mut left: Vec<i64> = cap.clone();
        let mut counts: Vec<u32> = vec![0; classes.len()];
        for (c, class) in classes.iter().enumerate() {
            let k = (share * f64::from(class.count)).floor() as i64;
            if k > 0 {
                counts[c] = k as u32;
                for (l, &r) in left.iter_mut().zip(&class.req) {
                    *l -= r * k;
                }
            }
        }
        for (c, class) in classes.iter().enumerate() {
            let mut k = i64::from(class.count - counts[c]);
            for (&l, &r) in left.iter().zip(&class.req) {
                if r > 0 {
                    k = k.min(l / r);
                }
            }
            if k > 0 {
                counts[c] += k as u32;
                for (l, &r) in left.iter_mut().zip(&class.req) {
                    *l -= r * k;
                }
            }
        }
        let counts: Vec<(usize, u32)> = counts
            .into_iter()
            .enumerate()
            .filter(|&(_, k)| k > 0)
            .collect();
        if !counts.is_empty() && left.iter().all(|&l| l >= 0) {
            let p = Pattern { ty: t, counts };
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
    }
    patterns
}

/// The master's columns: each pattern with its type's price.
fn master_columns<'a>(types: &[pack::BinType], patterns: &'a [Pattern]) -> Vec<master::Column<'a>> {
    patterns
        .iter()
        .map(|p| master::Column {
            counts: &p.counts,
            price: types[p.ty].price,
        })
        .collect()
}

/// Each class's demand, as the master LP takes it.
fn demand(classes: &[Class]) -> Vec<f64> {
    classes.iter().map(|c| f64::from(c.count)).collect()
}

/// The master LP's dual: a value per class, maximising `Σ n_i π_i` with every pattern's
/// pods worth at most its price (and the primal it was found from).
fn master_dual(
    classes: &[Class],
    types: &[pack::BinType],
    patterns: &[Pattern],
    budget: &mut Budget<'_>,
) -> Option<master::Solved> {
    if !budget.spend((classes.len() * patterns.len()) as u64 * 8) {
        return None;
    }
    master::values(&demand(classes), &master_columns(types, patterns))
}

/// The master LP: fractional copies of each pattern covering every class at least price.
fn master_primal(
    classes: &[Class],
    types: &[pack::BinType],
    patterns: &[Pattern],
    budget: &mut Budget<'_>,
) -> Option<Vec<f64>> {
    master_primal_cost(classes, patterns.len(), budget)?;
    master::copies(&demand(classes), &master_columns(types, patterns))
}

/// Charges what solving the master's primal costs, whether it is solved or its answer is
/// reused: a plan must not depend on which, and the budget decides how far a plan gets.
fn master_primal_cost(classes: &[Class], patterns: usize, budget: &mut Budget<'_>) -> Option<()> {
    budget
        .spend((classes.len() * patterns) as u64 * 8)
        .then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::optimize::pack::BinType;

    fn ty(cpu: i64, mem: i64, pods: i64, price: f64) -> BinType {
        BinType {
            cap: vec![cpu, mem, pods],
            price,
        }
    }

    fn class(cpu: i64, mem: i64, count: u32) -> Class {
        Class {
            req: vec![cpu, mem, 1],
            count,
        }
    }

    /// Complementary pods: cpu-heavy and memory-heavy ones only fill a node together. Any
    /// single-type, single-class fill wastes half a node; the LP pairs them.
    #[test]
    fn pairs_complementary_pods_optimally() {
        let types = [
            ty(4000, 4096, 110, 1.00),
            ty(4000, 1024, 110, 0.70),
            ty(1000, 4096, 110, 0.70),
        ];
        let classes = [class(3000, 512, 60), class(1000, 3584, 60)];
        let weights = [0.7 / 4000.0, 0.7 / 4096.0, 0.0];
        let values: Vec<f64> = classes
            .iter()
            .map(|c| c.req.iter().zip(&weights).map(|(&r, w)| r as f64 * w).sum())
            .collect();
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &weights,
            values: &values,
        };
        let mut b = Budget::new(u64::MAX, None);
        let rounded = lp_round(&inst, &mut b).expect("packing");
        pack::check_packing(&inst, &rounded);
        // Optimum: 60 general nodes, one pod of each kind per node.
        assert!((rounded.cost - 60.0).abs() < 1e-9, "{rounded:?}");
        let heuristic = pack::heuristic(&inst, &mut b).expect("packing");
        pack::check_packing(&inst, &heuristic);
        assert!(rounded.cost <= heuristic.cost + 1e-9, "{heuristic:?}");
    }

    #[test]
    fn drops_dominated_types() {
        let types = [
            ty(4000, 4096, 110, 1.00),
            ty(2000, 2048, 110, 1.00), // dominated by 0
            ty(8000, 8192, 110, 3.00),
            ty(4000, 4096, 110, 1.00), // identical to 0: the lower index stays
        ];
        let classes = [class(1000, 1024, 1)];
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &[1.0, 0.0, 0.0],
            values: &[1.0],
        };
        let mut b = Budget::new(u64::MAX, None);
        assert_eq!(undominated(&inst, &mut b), Some(vec![0, 2]));
    }

    #[test]
    fn out_of_budget_gives_nothing() {
        let types = [ty(4000, 4096, 110, 1.00)];
        let classes = [class(1000, 1024, 100)];
        let inst = Instance {
            types: &types,
            classes: &classes,
            weights: &[1.0, 0.0, 0.0],
            values: &[1.0],
        };
        let mut b = Budget::new(5, None);
        assert!(lp_round(&inst, &mut b).is_none());
    }
}
