//! The LP lower bound on the price of new capacity, solved as its dual with microlp (pure
//! Rust).
//!
//! Primal (a relaxation of every feasible plan): buy a fractional number `x_j` of each
//! column `j` (a NodePool's instance type, priced at the cheapest offering any pod that may
//! use it could run on), and let every class `k` of pods spread each resource of its total
//! demand `D_k` freely over the columns it may use:
//!
//! ```text
//! min Σ_j c_j x_j   s.t.  Σ_{j∈S_k} y_kjd ≥ D_kd,   Σ_k y_kjd ≤ cap_jd x_j,   x, y ≥ 0
//! ```
//!
//! Dual: resource prices `u_kd ≥ 0` per class, `v_jd ≥ u_kd` for every `j ∈ S_k`, and
//! `Σ_d cap_jd v_jd ≤ c_j`; the bound is `Σ D_kd u_kd`. By weak duality ANY dual-feasible
//! point is a valid bound, so the solver's answer is repaired to exact feasibility (negative
//! values clamped, `v` recomputed as the maximum of its classes' `u`, everything scaled down
//! until every column constraint holds) before it is reported: the bound never depends on
//! the LP solver being exact. A column used by a single class needs no `v` (it equals that
//! class's `u`), so the common one-class case is an LP with one variable per resource.
//!
//! Pods that must each have a node of their own (required hostname anti-affinity among
//! themselves) add node counts: `Σ_{j∈N_a} x_j ≥ n_a` for each such set `a` of `n_a` pods,
//! `N_a` the columns any of them fits on. In the dual each count is a price `w_a ≥ 0` per
//! node, charged on every column of `N_a` beside its resources' values
//! (`Σ_d cap_jd v_jd + Σ_{a: j∈N_a} w_a ≤ c_j`), and the bound gains `Σ n_a w_a`.

use super::budget::Budget;
use super::lp::{Lp, Var};
use super::master;

/// A class of pods: its total demand per dimension and the columns it may use.
#[derive(Debug, Clone)]
pub(crate) struct BoundClass {
    /// Total requests per dimension.
    pub demand: Vec<f64>,
    /// Indices of the columns its pods may run on.
    pub columns: Vec<usize>,
}

/// At least `nodes` nodes among `columns`: the nodes a set of pods that may not share a
/// node forces, each of which is a column one of them fits on.
#[derive(Debug, Clone)]
pub(crate) struct BoundCount {
    /// How many distinct nodes every plan has among `columns`.
    pub nodes: f64,
    /// Indices of the columns such a node may be (sorted).
    pub columns: Vec<usize>,
}

/// A node type as the bound sees it.
#[derive(Debug, Clone)]
pub(crate) struct BoundColumn {
    /// Capacity left for pods per dimension (never negative).
    pub cap: Vec<f64>,
    /// The lowest price a node of this type could have.
    pub price: f64,
}

impl BoundColumn {
    /// The columns of `types`, negative capacity counted as none.
    pub(crate) fn of_types(types: &[super::pack::BinType]) -> Vec<Self> {
        types
            .iter()
            .map(|t| Self {
                cap: t.cap.iter().map(|&c| c.max(0) as f64).collect(),
                price: t.price,
            })
            .collect()
    }
}

/// A valid lower bound and the resource prices behind it.
#[derive(Debug, Clone)]
pub(crate) struct LpBound {
    /// The bound, in price per hour.
    pub value: f64,
    /// Price per unit of each dimension, per class (feasible dual values).
    pub prices: Vec<Vec<f64>>,
}

/// The LP size past which a model is not built (rows × columns of the dual).
pub(crate) const MAX_LP_CELLS: usize = 400_000;

/// The LP's size in cells, for callers that merge classes to stay small.
pub(crate) fn lp_cells(dims: usize, classes: &[BoundClass], columns: usize) -> usize {
    let users = users_of(classes, columns);
    let shared = users.iter().filter(|u| u.len() > 1).count();
    let vars = dims * (classes.len() + shared);
    let links: usize = users
        .iter()
        .filter(|u| u.len() > 1)
        .map(|u| u.len() * dims)
        .sum();
    vars * (columns + links)
}

fn users_of(classes: &[BoundClass], columns: usize) -> Vec<Vec<usize>> {
    let mut users = vec![Vec::new(); columns];
    for (k, c) in classes.iter().enumerate() {
        for &j in &c.columns {
            if users[j].last() != Some(&k) {
                users[j].push(k);
            }
        }
    }
    users
}

/// Solves the dual LP; `None` when the model is too big for the budget, a class has demand
/// no column can serve, or the solver fails. `counts` are node counts every plan meets
/// (see the module's documentation); with none this is the resource bound alone.
pub(crate) fn lower_bound(
    dims: usize,
    classes: &[BoundClass],
    counts: &[BoundCount],
    columns: &[BoundColumn],
    budget: &mut Budget<'_>,
) -> Option<LpBound> {
    if classes.is_empty() && counts.is_empty() {
        return Some(LpBound {
            value: 0.0,
            prices: Vec::new(),
        });
    }
    let count_cells: usize = counts.iter().map(|a| a.columns.len()).sum();
    let cells = lp_cells(dims, classes, columns.len()) + count_cells;
    if cells > MAX_LP_CELLS || !budget.spend(cells as u64) {
        return None;
    }
    if counts.iter().any(|a| a.nodes > 0.0 && a.columns.is_empty()) {
        return None;
    }
    // Normalise each dimension by its total demand so cpu millis, bytes and pod counts have
    // comparable magnitudes in the simplex.
    let mut norm = vec![0.0f64; dims];
    for c in classes {
        for (n, &d) in norm.iter_mut().zip(&c.demand) {
            *n += d;
        }
    }
    let active: Vec<bool> = norm.iter().map(|&n| n > 0.0).collect();
    for n in norm.iter_mut() {
        if *n <= 0.0 {
            *n = 1.0;
        }
    }
    for c in classes {
        for d in 0..dims {
            if c.demand[d] > 0.0 && !c.columns.iter().any(|&j| columns[j].cap[d] > 0.0) {
                return None;
            }
        }
    }
    let mut users = users_of(classes, columns.len());
    // The counts charging each column, in order.
    let mut charged: Vec<Vec<usize>> = vec![Vec::new(); columns.len()];
    for (a, count) in counts.iter().enumerate() {
        for &j in &count.columns {
            charged[j].push(a);
        }
    }
    // A dominated column's row is implied by its dominator's (see [`dominates`]), so the
    // LP has the same optimum without it, and microlp's time grows with its rows: on real
    // catalogues ~170 of ~1,300 columns are left. The repair below still checks them all.
    // A count charges a column like a class using it, so a column stays unless a
    // dominator is charged by every count that charges it too.
    let all_users = users.clone();
    #[cfg(test)]
    let prune = !tests::KEEP_DOMINATED.get();
    #[cfg(not(test))]
    let prune = true;
    // Without counts the classes alone decide, and the re-packing's weights call this
    // with none on every group, so they skip building a member list per column.
    if prune && counts.is_empty() {
        drop_dominated(columns, &mut users, |_| true);
    } else if prune {
        let mut members: Vec<Vec<usize>> = users
            .iter()
            .zip(&charged)
            .map(|(us, cs)| {
                us.iter()
                    .copied()
                    .chain(cs.iter().map(|&a| classes.len() + a))
                    .collect()
            })
            .collect();
        drop_dominated(columns, &mut members, |_| true);
        for (us, m) in users.iter_mut().zip(&members) {
            if m.is_empty() {
                us.clear();
            }
        }
        for (cs, m) in charged.iter_mut().zip(&members) {
            if m.is_empty() {
                cs.clear();
            }
        }
    }

    // The objective's coefficients are known when the variables are made: each class's
    // values (u) first, then each shared column's (v), as the rows below expect.
    let mut lp = Lp::maximise();
    let u: Vec<Vec<Option<Var>>> = classes
        .iter()
        .map(|c| {
            (0..dims)
                .map(|d| (active[d] && c.demand[d] > 0.0).then(|| lp.var(c.demand[d] / norm[d])))
                .collect()
        })
        .collect();
    // Each count's node price, scaled by its count as `u` is by demand: `W_a = n_a w_a`.
    let w: Vec<Option<Var>> = counts
        .iter()
        .map(|a| (a.nodes > 0.0).then(|| lp.var(1.0)))
        .collect();
    let v: Vec<Option<Vec<Option<Var>>>> = users
        .iter()
        .map(|us| {
            (us.len() > 1).then(|| {
                (0..dims)
                    .map(|d| us.iter().any(|&k| u[k][d].is_some()).then(|| lp.var(0.0)))
                    .collect()
            })
        })
        .collect();
    for (j, col) in columns.iter().enumerate() {
        if users[j].is_empty() && charged[j].is_empty() {
            continue;
        }
        let lhs: Vec<(Var, f64)> = (0..dims)
            .filter_map(|d| {
                let x = match &v[j] {
                    Some(vs) => vs[d],
                    None => users[j].first().and_then(|&k| u[k][d]),
                };
                x.filter(|_| col.cap[d] > 0.0)
                    .map(|x| (x, col.cap[d] / norm[d]))
            })
            .chain(
                charged[j]
                    .iter()
                    .filter_map(|&a| w[a].map(|x| (x, 1.0 / counts[a].nodes))),
            )
            .collect();
        if !lhs.is_empty() {
            lp.at_most(lhs, col.price);
        }
        if let Some(vs) = &v[j] {
            for &k in &users[j] {
                for d in 0..dims {
                    if let (Some(uk), Some(vj)) = (u[k][d], vs[d]) {
                        lp.at_most([(uk, 1.0), (vj, -1.0)], 0.0);
                    }
                }
            }
        }
    }
    let solution = lp.solve()?;

    // Repair to exact dual feasibility, in raw units.
    let mut prices: Vec<Vec<f64>> = u
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(d, x)| x.map_or(0.0, |x| master::clean(solution[x] / norm[d])))
                .collect()
        })
        .collect();
    let node_prices: Vec<f64> = counts
        .iter()
        .zip(&w)
        .map(|(a, x)| x.map_or(0.0, |x| master::clean(solution[x] / a.nodes)))
        .collect();
    let mut all_charged: Vec<f64> = vec![0.0; columns.len()];
    for (a, count) in counts.iter().enumerate() {
        for &j in &count.columns {
            all_charged[j] += node_prices[a];
        }
    }
    let mut scale = 1.0f64;
    for (j, col) in columns.iter().enumerate() {
        if all_users[j].is_empty() && all_charged[j] == 0.0 {
            continue;
        }
        let used: f64 = (0..dims)
            .map(|d| {
                let v = all_users[j]
                    .iter()
                    .map(|&k| prices[k][d])
                    .fold(0.0f64, f64::max);
                col.cap[d].max(0.0) * v
            })
            .sum::<f64>()
            + all_charged[j];
        if used > col.price {
            scale = scale.min(if used > 0.0 { col.price / used } else { 0.0 });
        }
    }
    // A hair below, so rounding in the sums above cannot push the bound past the optimum.
    let scale = (scale * (1.0 - 1e-9)).max(0.0);
    for row in prices.iter_mut() {
        for p in row.iter_mut() {
            *p *= scale;
        }
    }
    let value: f64 = classes
        .iter()
        .zip(&prices)
        .map(|(c, ps)| c.demand.iter().zip(ps).map(|(d, p)| d * p).sum::<f64>())
        .sum::<f64>()
        + counts
            .iter()
            .zip(&node_prices)
            .map(|(a, &w)| a.nodes * w * scale)
            .sum::<f64>();
    Some(LpBound {
        value: value.max(0.0),
        prices,
    })
}

/// A class of identical pods for the coupled bound.
#[derive(Debug, Clone)]
pub(crate) struct BoundItem {
    /// Requests of one pod per dimension.
    pub req: Vec<f64>,
    /// How many.
    pub count: f64,
    /// Columns one of these pods fits on by itself and may use.
    pub columns: Vec<usize>,
    /// The set of pods kept apart these belong to, if any: no node holds two pods of one
    /// set, whichever item classes they are in.
    pub apart: Option<usize>,
}

impl BoundItem {
    /// The most pods of this class one node can hold for lack of room alone: all of them,
    /// or one when they are kept apart.
    pub(crate) fn per_node(&self) -> f64 {
        if self.apart.is_some() {
            self.count.min(1.0)
        } else {
            self.count
        }
    }
}

/// Homogeneous patterns per item class that seed the master LP, violated patterns added
/// per round, and rounds.
const SEED_PER_ITEM: usize = 3;
const ADD_PER_ROUND: usize = 12;
const ROUNDS: usize = 8;
/// Search nodes of one integer knapsack before its fractional bound is used instead.
const KNAPSACK_NODES: u64 = 1_500;
/// With [`Effort::Proven`]: patterns added per round, and rounds at most (a guard: the
/// diverse mix's 1,000 pods converge in about 70).
const PROVEN_ADD_PER_ROUND: usize = 40;
const PROVEN_ROUNDS: usize = 1_000;
/// With [`Effort::Proven`], search nodes of a knapsack until a round finds no violated
/// pattern; the searches are then exhaustive.
const PROVEN_FIRST_NODES: u64 = 20_000;

/// How far [`coupled_bound`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effort {
    /// A few rounds within the budget: whatever bound they certify.
    Budgeted,
    /// Column generation to the configuration LP's optimum, every pricing knapsack solved
    /// exactly (priced with its LP relaxation) and no budget: the bound is the LP's value.
    /// Minutes on a thousand pods with hostname anti-affinity; for analysis.
    Proven,
}
/// Item classes past which the coupled bound is not attempted.
pub(crate) const MAX_ITEMS: usize = 64;

/// A node's worth of pods: a column and how many of each item class it holds.
#[derive(Debug, Clone, PartialEq)]
struct Pattern {
    column: usize,
    counts: Vec<(usize, u32)>,
}

/// The configuration-LP bound (Gilmore–Gomory column generation), where each pod sits
/// whole on one node, unlike [`lower_bound`], which lets cpu come from one type and memory
/// from another.
///
/// The master LP is solved as its dual: a value `π_i ≥ 0` per pod class with
/// `Σ_i a_ip π_i ≤ c_p` for every pattern `p` found so far, maximising `Σ n_i π_i`. Pricing
/// solves, for every column, the integer knapsack "most valuable set of pods that fits"
/// (exactly by branch and bound when the fractional bound says it might beat the price,
/// otherwise that fractional bound stands in). Whatever the patterns, the answer is valid
/// by Farley's argument: with `θ = max(1, max_j U_j / c_j)` over upper bounds `U_j` of
/// every column's best pattern value, `π / θ` is feasible for the full dual, so
/// `n·π / θ` bounds every plan. Violated patterns join the master for the next round.
///
/// Items of a set kept apart ([`BoundItem::apart`]) put one pod of the set on a node at
/// most, in the knapsack as in every node a plan has. With [`Effort::Proven`] each
/// column's knapsack is first bounded by its LP relaxation ([`lagrangian_ub`]), whose
/// prices also prune the search, and the rounds go on until an exhaustive pricing finds no
/// violated pattern: θ is then 1 and the bound is the configuration LP's optimum.
///
/// Returns the bound and each item class's value (price per pod, scaled to be feasible).
pub(crate) fn coupled_bound(
    dims: usize,
    items: &[BoundItem],
    columns: &[BoundColumn],
    effort: Effort,
    budget: &mut Budget<'_>,
) -> Option<(f64, Vec<f64>)> {
    let proven = effort == Effort::Proven;
    let mut unlimited = Budget::new(u64::MAX, None);
    let budget = if proven { &mut unlimited } else { budget };
    let (rounds, add_per_round) = if proven {
        (PROVEN_ROUNDS, PROVEN_ADD_PER_ROUND)
    } else {
        (ROUNDS, ADD_PER_ROUND)
    };
    // In a proven run: whether the searches are exhaustive yet.
    let mut exhaustive = false;
    if items.is_empty() {
        return Some((0.0, Vec::new()));
    }
    if items.len() > MAX_ITEMS || items.iter().any(|i| i.columns.is_empty()) {
        return None;
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); columns.len()];
    for (i, it) in items.iter().enumerate() {
        for &j in &it.columns {
            users[j].push(i);
        }
    }
    // A column with no more capacity, no cheaper and serving no item another kept column
    // does not serve adds nothing: every pattern on it is a pattern on that column, at a
    // price no lower, so its ratio in Farley's θ is no higher. Dropping it from pricing
    // keeps the bound valid and, on real catalogues, prices ~170 columns instead of ~1,300.
    if !drop_dominated(columns, &mut users, |kept| {
        budget.spend((kept * dims) as u64 / 4 + 1)
    }) {
        return None;
    }
    let fit_alone = |i: usize, j: usize| -> u32 {
        let mut k = items[i].per_node();
        for d in 0..dims {
            if items[i].req[d] > 0.0 {
                k = k.min((columns[j].cap[d] / items[i].req[d]).floor());
            }
        }
        k.max(0.0) as u32
    };

    // Seed: for each class, the nodes that hold its pods most cheaply on their own.
    let mut patterns: Vec<Pattern> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let mut ranked: Vec<(f64, usize, u32)> = it
            .columns
            .iter()
            .map(|&j| {
                let k = fit_alone(i, j).max(1);
                (columns[j].price / f64::from(k), j, k)
            })
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, j, k) in ranked.iter().take(SEED_PER_ITEM) {
            patterns.push(Pattern {
                column: j,
                counts: vec![(i, k)],
            });
        }
    }

    let mut best: Option<(f64, Vec<f64>)> = None;
    for _round in 0..rounds {
        let cells = items.len() * patterns.len();
        if !budget.spend(cells as u64 * 8) {
            break;
        }
        let demand: Vec<f64> = items.iter().map(|it| it.count).collect();
        let master_columns: Vec<master::Column<'_>> = patterns
            .iter()
            .map(|p| master::Column {
                counts: &p.counts,
                price: columns[p.column].price,
            })
            .collect();
        let Some(master::Solved { values, .. }) = master::values(&demand, &master_columns) else {
            break;
        };

        // Pricing, and Farley's θ.
        let mut theta = 1.0f64;
        let mut violated: Vec<(f64, Pattern)> = Vec::new();
        for (j, col) in columns.iter().enumerate() {
            if users[j].is_empty() {
                continue;
            }
            if !budget.spend((users[j].len() * dims) as u64 + 1) {
                return best;
            }
            let frac = (0..dims)
                .map(|d| knapsack_1d(&users[j], items, &values, d, col.cap[d]))
                .fold(f64::INFINITY, f64::min);
            let mut ub = frac;
            if frac > col.price * (1.0 + 1e-9) {
                // The knapsack's LP relaxation is far tighter than one dimension at a time
                // once a node holds many pods: it often shows the column holds nothing
                // worth its price without a search, and its prices prune the search.
                let mut lambda = None;
                if proven {
                    budget.spend(lagrangian_cost(users[j].len(), dims));
                    if let Some((l, prices)) =
                        lagrangian_ub(&users[j], items, &values, dims, &col.cap)
                    {
                        ub = ub.min(l);
                        lambda = Some(prices);
                    }
                }
                if ub > col.price * (1.0 + 1e-9) {
                    let nodes = match (proven, exhaustive) {
                        (false, _) => KNAPSACK_NODES,
                        (true, false) => PROVEN_FIRST_NODES,
                        (true, true) => u64::MAX,
                    };
                    let (exact, found) = knapsack(
                        &users[j],
                        items,
                        &values,
                        dims,
                        &col.cap,
                        nodes,
                        lambda.as_deref(),
                        budget,
                    );
                    ub = ub.min(exact);
                    if let Some((value, counts)) = found
                        && value > col.price * (1.0 + 1e-7)
                    {
                        violated.push((value / col.price, Pattern { column: j, counts }));
                    }
                }
            }
            let ratio = if col.price > 0.0 {
                ub / col.price
            } else if ub > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            theta = theta.max(ratio);
        }
        let total: f64 = items.iter().zip(&values).map(|(it, v)| it.count * v).sum();
        if theta.is_finite() {
            let scale = (1.0 - 1e-9) / theta;
            let bound = total * scale;
            if best.as_ref().is_none_or(|(b, _)| bound > *b) {
                best = Some((bound, values.iter().map(|v| v * scale).collect()));
            }
        }
        if violated.is_empty() {
            // Searches that gave up may have missed a violated pattern: a proven run looks
            // again, exhaustively, before it stops.
            if proven && !exhaustive {
                exhaustive = true;
                continue;
            }
            break;
        }
        violated.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.column.cmp(&b.1.column)));
        for (_, p) in violated.into_iter().take(add_per_round) {
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
    }
    best
}

/// Work units charged for one [`lagrangian_ub`] with `users` item classes: about its LP's
/// cells.
fn lagrangian_cost(users: usize, dims: usize) -> u64 {
    (users * (users + dims + 1)) as u64 + 1
}

/// An upper bound on the value of any set of pods that fits `cap`, from the knapsack's LP
/// relaxation: for resource prices `λ ≥ 0`, every such set is worth at most
///
/// ```text
/// L(λ) = λ·cap + Σ_i n_i max(0, v_i − λ·r_i) + Σ_a max(0, max_{i∈a} (v_i − λ·r_i))
/// ```
///
/// where the first sum is over the classes not kept apart (`n_i` of them fit by themselves)
/// and the second over the sets kept apart, of which a node holds one pod at most. The LP
/// solver only proposes `λ` (the LP dual's optimum, which makes `L` the relaxation's
/// value); `L` is then evaluated exactly as written, so the bound is valid whatever the
/// solver returns. `None` when the solver fails.
pub(crate) fn lagrangian_ub(
    users: &[usize],
    items: &[BoundItem],
    values: &[f64],
    dims: usize,
    cap: &[f64],
) -> Option<(f64, Vec<f64>)> {
    let lambda = lagrangian_prices(users, items, values, dims, cap)?;
    let value = lagrangian_value(users, items, values, dims, cap, &lambda);
    Some((value, lambda))
}

/// The most pods of `item`'s class that fit `cap` by themselves.
fn fit_in(item: &BoundItem, dims: usize, cap: &[f64]) -> f64 {
    let n = item
        .req
        .iter()
        .zip(cap)
        .take(dims)
        .filter(|(r, _)| **r > 0.0)
        .map(|(r, c)| (c.max(0.0) / r).floor())
        .fold(item.per_node(), f64::min);
    n.max(0.0)
}

/// The resource prices `λ ≥ 0` that minimise [`lagrangian_ub`]'s `L`, as well as the LP
/// solver finds them; `None` when it fails.
fn lagrangian_prices(
    users: &[usize],
    items: &[BoundItem],
    values: &[f64],
    dims: usize,
    cap: &[f64],
) -> Option<Vec<f64>> {
    let worth: Vec<usize> = users.iter().copied().filter(|&i| values[i] > 0.0).collect();
    if worth.is_empty() {
        return Some(vec![0.0; dims]);
    }
    let fit = |i: usize| fit_in(&items[i], dims, cap);
    // The LP's variables are each dimension's price times its capacity (its share of the
    // node's worth): requests differ by ten orders of magnitude between cpu and bytes, and
    // shares keep every coefficient within [0, 1] for the solver. A dimension without
    // capacity gets no price (its pods fit no node and have no users here).
    let scale: Vec<f64> = (0..dims)
        .map(|d| if cap[d] > 0.0 { cap[d] } else { 0.0 })
        .collect();
    let mut lp = Lp::minimise();
    let lambda: Vec<Var> = (0..dims).map(|_| lp.var(1.0)).collect();
    let mut set_var: Vec<(usize, Var)> = Vec::new();
    for &i in &worth {
        let slack = match items[i].apart {
            None => lp.var(fit(i)),
            Some(a) => match set_var.iter().find(|(s, _)| *s == a) {
                Some(&(_, v)) => v,
                None => {
                    let v = lp.var(1.0);
                    set_var.push((a, v));
                    v
                }
            },
        };
        let terms = std::iter::once((slack, 1.0)).chain(
            (0..dims)
                .filter(|&d| items[i].req[d] != 0.0 && scale[d] > 0.0)
                .map(|d| (lambda[d], items[i].req[d] / scale[d])),
        );
        lp.at_least(terms, values[i]);
    }
    let x = lp.solve()?;
    let lambda: Vec<f64> = lambda
        .iter()
        .zip(&scale)
        .map(|(&v, &sc)| {
            if x[v].is_finite() && sc > 0.0 {
                x[v].max(0.0) / sc
            } else {
                0.0
            }
        })
        .collect();
    Some(lambda)
}

/// `L(λ)` of [`lagrangian_ub`], evaluated exactly as written there.
fn lagrangian_value(
    users: &[usize],
    items: &[BoundItem],
    values: &[f64],
    dims: usize,
    cap: &[f64],
    lambda: &[f64],
) -> f64 {
    let mut total: f64 = (0..dims).map(|d| lambda[d] * cap[d].max(0.0)).sum();
    let mut best_of_set: Vec<(usize, f64)> = Vec::new();
    for &i in users.iter().filter(|&&i| values[i] > 0.0) {
        let gain = values[i] - (0..dims).map(|d| lambda[d] * items[i].req[d]).sum::<f64>();
        if gain <= 0.0 {
            continue;
        }
        match items[i].apart {
            None => total += fit_in(&items[i], dims, cap) * gain,
            Some(a) => match best_of_set.iter_mut().find(|(s, _)| *s == a) {
                Some((_, g)) => *g = g.max(gain),
                None => best_of_set.push((a, gain)),
            },
        }
    }
    total += best_of_set.iter().map(|(_, g)| g).sum::<f64>();
    total
}

/// Whether column `k` makes column `j` redundant: no dearer, at least as much capacity in
/// every dimension, and usable by every class that may use `j`. Then every set of pods `j`
/// holds fits `k` for no more money, and in [`lower_bound`]'s dual `j`'s row is implied by
/// `k`'s (its values are at most `k`'s, weighed by no more capacity, against a price no
/// lower).
fn dominates(columns: &[BoundColumn], users: &[Vec<usize>], k: usize, j: usize) -> bool {
    columns[k].price <= columns[j].price
        && columns[k]
            .cap
            .iter()
            .zip(&columns[j].cap)
            .all(|(a, b)| a >= b)
        && is_subset(&users[j], &users[k])
}

/// Clears the users of every column another one dominates (see [`dominates`]), checking
/// them cheapest first so that of two identical columns the lower index stays. Before each
/// column, `spend` is told how many are kept so far; `false` when it refuses, which stops
/// the pruning part-way.
fn drop_dominated(
    columns: &[BoundColumn],
    users: &mut [Vec<usize>],
    mut spend: impl FnMut(usize) -> bool,
) -> bool {
    let mut by_price: Vec<usize> = (0..columns.len())
        .filter(|&j| !users[j].is_empty())
        .collect();
    by_price.sort_by(|&a, &b| {
        columns[a]
            .price
            .total_cmp(&columns[b].price)
            .then(a.cmp(&b))
    });
    let mut kept: Vec<usize> = Vec::new();
    for j in by_price {
        if !spend(kept.len()) {
            return false;
        }
        if kept.iter().any(|&k| dominates(columns, users, k, j)) {
            users[j].clear();
        } else {
            kept.push(j);
        }
    }
    true
}

/// Whether sorted `a` is a subset of sorted `b`.
fn is_subset(a: &[usize], b: &[usize]) -> bool {
    let mut rest = b.iter();
    a.iter().all(|x| rest.any(|y| y == x))
}

/// A pattern's value and its pods per item class.
pub(crate) type Found = (f64, Vec<(usize, u32)>);

/// The integer knapsack "most valuable pods that fit `cap`" by depth-first branch and
/// bound: an upper bound on its optimum (exact when the search finished) and the best set
/// found. With resource prices `lambda` (see [`lagrangian_ub`]) it also prunes with the
/// Lagrangian bound: at every search node, the pods still to decide are worth at most
/// `λ·left` plus what each gains over its resources' price. One dimension at a time, a
/// node holding many small pods prunes almost nothing; with prices, it does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn knapsack(
    users: &[usize],
    items: &[BoundItem],
    values: &[f64],
    dims: usize,
    cap: &[f64],
    max_nodes: u64,
    lambda: Option<&[f64]>,
    budget: &mut Budget<'_>,
) -> (f64, Option<Found>) {
    // Densest first: value per share of the node it takes.
    let mut order: Vec<(f64, usize)> = users
        .iter()
        .filter(|&&i| values[i] > 0.0)
        .map(|&i| {
            let share: f64 = (0..dims)
                .filter(|&d| cap[d] > 0.0)
                .map(|d| items[i].req[d] / cap[d])
                .fold(0.0, f64::max);
            (values[i] / share.max(1e-12), i)
        })
        .collect();
    // Pods kept apart come first, one block per set: the search decides which member of
    // each set (if any) the node holds, and the rest is an ordinary knapsack.
    order.sort_by(|a, b| {
        let set = |i: usize| (items[i].apart.is_none(), items[i].apart);
        set(a.1)
            .cmp(&set(b.1))
            .then(b.0.total_cmp(&a.0))
            .then(a.1.cmp(&b.1))
    });
    let order: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    // Where the block of the set kept apart at each position ends.
    let mut block_end = vec![order.len(); order.len()];
    for k in (0..order.len().saturating_sub(1)).rev() {
        let (here, next) = (items[order[k]].apart, items[order[k + 1]].apart);
        block_end[k] = if here.is_some() && here == next {
            block_end[k + 1]
        } else {
            k + 1
        };
    }
    // Per position: the most the pods from there on gain over their resources' prices.
    let gains: Option<(&[f64], Vec<f64>)> = lambda.map(|lambda| {
        let gain = |i: usize| {
            (values[i] - (0..dims).map(|d| lambda[d] * items[i].req[d]).sum::<f64>()).max(0.0)
        };
        let mut g = vec![0.0; order.len() + 1];
        for k in (0..order.len()).rev() {
            let i = order[k];
            g[k] = if items[i].apart.is_some() {
                let end = block_end[k];
                g[end] + (k..end).map(|m| gain(order[m])).fold(0.0, f64::max)
            } else {
                g[k + 1] + items[i].per_node() * gain(i)
            };
        }
        (lambda, g)
    });
    let mut root = (0..dims)
        .map(|d| knapsack_1d(&order, items, values, d, cap[d]))
        .fold(f64::INFINITY, f64::min);
    if let Some((lambda, g)) = &gains {
        let priced: f64 = (0..dims).map(|d| lambda[d] * cap[d].max(0.0)).sum::<f64>() + g[0];
        root = root.min(priced);
    }

    let suffix = SuffixBound::new(&order, items, values, dims);

    struct Dfs<'a> {
        order: &'a [usize],
        items: &'a [BoundItem],
        values: &'a [f64],
        dims: usize,
        suffix: &'a SuffixBound,
        /// Resource prices and, per position, the most the rest gains over them.
        gains: Option<(&'a [f64], &'a [f64])>,
        left: Vec<f64>,
        chosen: Vec<u32>,
        /// Per position in `order`: the end of its block of pods kept apart.
        block_end: &'a [usize],
        best: f64,
        best_set: Vec<u32>,
        nodes: u64,
        max_nodes: u64,
        aborted: bool,
        /// The dimension that last pruned, tried first at the next node.
        last_pruning: usize,
    }
    impl Dfs<'_> {
        /// Whether nothing below position `k` can beat the best found: `value` plus the
        /// smallest per-dimension bound is within the threshold. Rounding is monotone, so
        /// that holds exactly when `value` plus some dimension's bound is, and the search
        /// stops at the first such dimension instead of computing every one; starting with
        /// the one that pruned last usually makes that the first.
        fn pruned(&mut self, k: usize, value: f64) -> bool {
            let threshold = self.best * (1.0 + 1e-12);
            #[cfg(test)]
            if tests::REFERENCE_PRUNING.get() {
                // The test of this function: every dimension's bound from the pods
                // themselves, and their smallest added once, as the search was first written.
                let bound = (0..self.dims)
                    .map(|d| {
                        knapsack_1d(&self.order[k..], self.items, self.values, d, self.left[d])
                    })
                    .fold(f64::INFINITY, f64::min);
                return value + bound <= threshold;
            }
            if let Some((lambda, g)) = self.gains {
                let priced: f64 = (0..self.dims)
                    .map(|d| lambda[d] * self.left[d].max(0.0))
                    .sum::<f64>()
                    + g[k];
                if value + priced <= threshold {
                    return true;
                }
            }
            let first = self.last_pruning;
            let dims = (first < self.dims)
                .then_some(first)
                .into_iter()
                .chain((0..self.dims).filter(|&d| d != first));
            for d in dims {
                let b = self.suffix.bound_1d(k, d, self.left[d]);
                if value + b <= threshold {
                    self.last_pruning = d;
                    return true;
                }
            }
            false
        }
        fn go(&mut self, k: usize, value: f64) {
            if value > self.best {
                self.best = value;
                self.best_set.clone_from(&self.chosen);
            }
            if k == self.order.len() || self.aborted {
                return;
            }
            self.nodes += 1;
            if self.nodes > self.max_nodes {
                self.aborted = true;
                return;
            }
            if self.pruned(k, value) {
                return;
            }
            let i = self.order[k];
            if self.items[i].apart.is_some() {
                return self.choose_one(k, value);
            }
            let mut most = self.items[i].per_node();
            for d in 0..self.dims {
                if self.items[i].req[d] > 0.0 {
                    most = most.min((self.left[d] / self.items[i].req[d]).floor());
                }
            }
            let most = most.max(0.0) as u32;
            for a in (0..=most).rev() {
                for d in 0..self.dims {
                    self.left[d] -= f64::from(a) * self.items[i].req[d];
                }
                self.chosen[k] = a;
                self.go(k + 1, value + f64::from(a) * self.values[i]);
                self.chosen[k] = 0;
                for d in 0..self.dims {
                    self.left[d] += f64::from(a) * self.items[i].req[d];
                }
                if self.aborted {
                    return;
                }
            }
        }
    }
    impl Dfs<'_> {
        /// The block of a set kept apart starting at `k`: each member that fits, then none
        /// of them, each followed by the rest of the order.
        fn choose_one(&mut self, k: usize, value: f64) {
            let end = self.block_end[k];
            for m in k..end {
                let i = self.order[m];
                if (0..self.dims).any(|d| self.items[i].req[d] > self.left[d]) {
                    continue;
                }
                for d in 0..self.dims {
                    self.left[d] -= self.items[i].req[d];
                }
                self.chosen[m] = 1;
                self.go(end, value + self.values[i]);
                self.chosen[m] = 0;
                for d in 0..self.dims {
                    self.left[d] += self.items[i].req[d];
                }
                if self.aborted {
                    return;
                }
            }
            self.go(end, value);
        }
    }
    let mut s = Dfs {
        order: &order,
        items,
        values,
        dims,
        suffix: &suffix,
        gains: gains.as_ref().map(|(l, g)| (*l, g.as_slice())),
        left: cap.iter().map(|c| c.max(0.0)).collect(),
        chosen: vec![0; order.len()],
        block_end: &block_end,
        best: 0.0,
        best_set: vec![0; order.len()],
        nodes: 0,
        max_nodes,
        aborted: false,
        last_pruning: 0,
    };
    s.go(0, 0.0);
    budget.spend(s.nodes * (order.len() * dims) as u64 + 1);
    let counts: Vec<(usize, u32)> = order
        .iter()
        .zip(&s.best_set)
        .filter(|(_, a)| **a > 0)
        .map(|(&i, &a)| (i, a))
        .collect();
    let ub = if s.aborted { root } else { s.best.min(root) };
    let found = (!counts.is_empty()).then_some((s.best, counts));
    (ub, found)
}

/// [`knapsack_1d`] over the suffixes `order[k..]` of one fixed order of pods with positive
/// values, as the branch and bound asks at every search node, without sorting each time.
///
/// Per dimension it keeps the pods that take some of it densest first, in exactly the order
/// `knapsack_1d` sorts them (density, then item): restricting that order to a suffix gives
/// the suffix's sorted order, so walking it adds the same terms in the same order and returns
/// the same number, bit for bit.
pub(crate) struct SuffixBound {
    /// Per dimension: (density, the item's whole demand of it, position in the order),
    /// densest first (ties by item).
    sorted: Vec<Vec<(f64, f64, usize)>>,
    /// Per dimension: the pods of the order that request none of it, as (position in the
    /// order, their whole value), in order: a suffix's free value is summed from these in the
    /// order `knapsack_1d` sums it, without walking the pods that do request it.
    free: Vec<Vec<(usize, f64)>>,
}

impl SuffixBound {
    /// The sorted lists for `order` (every value of its items must be positive, as the
    /// knapsack's order guarantees).
    pub(crate) fn new(order: &[usize], items: &[BoundItem], values: &[f64], dims: usize) -> Self {
        let sorted = (0..dims)
            .map(|d| {
                let mut v: Vec<(f64, usize, usize)> = order
                    .iter()
                    .enumerate()
                    // `knapsack_1d`'s "sized" pods: every request not `<= 0` (NaN included).
                    .filter(|&(_, &i)| items[i].req[d] > 0.0 || items[i].req[d].is_nan())
                    .map(|(pos, &i)| (values[i] / items[i].req[d], i, pos))
                    .collect();
                v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                v.into_iter()
                    .map(|(density, i, pos)| (density, items[i].per_node() * items[i].req[d], pos))
                    .collect()
            })
            .collect();
        let free = (0..dims)
            .map(|d| {
                order
                    .iter()
                    .enumerate()
                    .filter(|&(_, &i)| items[i].req[d] <= 0.0)
                    .map(|(pos, &i)| (pos, items[i].per_node() * values[i]))
                    .collect()
            })
            .collect();
        SuffixBound { sorted, free }
    }

    /// `knapsack_1d(&order[k..], items, values, d, cap)`, for the `order` this was built
    /// from.
    pub(crate) fn bound_1d(&self, k: usize, d: usize, cap: f64) -> f64 {
        let free_pods = &self.free[d];
        let mut free = 0.0;
        for &(_, value) in &free_pods[free_pods.partition_point(|&(pos, _)| pos < k)..] {
            free += value;
        }
        let mut left = cap.max(0.0);
        let mut total = free;
        for &(density, amount, pos) in &self.sorted[d] {
            if left <= 0.0 {
                break;
            }
            if pos < k {
                continue;
            }
            let take = amount.min(left);
            total += take * density;
            left -= take;
        }
        total
    }
}

/// The fractional knapsack over one dimension: an upper bound on the value of any set of
/// pods that fits `cap` (the other dimensions are ignored, which only raises it).
pub(crate) fn knapsack_1d(
    users: &[usize],
    items: &[BoundItem],
    values: &[f64],
    d: usize,
    cap: f64,
) -> f64 {
    let mut free = 0.0;
    let mut sized: Vec<(f64, usize)> = Vec::new();
    for &i in users {
        if values[i] <= 0.0 {
            continue;
        }
        let r = items[i].req[d];
        if r <= 0.0 {
            free += items[i].per_node() * values[i];
        } else {
            sized.push((values[i] / r, i));
        }
    }
    sized.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut left = cap.max(0.0);
    let mut total = free;
    for (density, i) in sized {
        if left <= 0.0 {
            break;
        }
        let take = (items[i].per_node() * items[i].req[d]).min(left);
        total += take * density;
        left -= take;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Whether [`knapsack`] prunes as first written (see its test).
        pub(super) static REFERENCE_PRUNING: Cell<bool> = const { Cell::new(false) };
        /// Whether [`lower_bound`] keeps every column's row (see its test).
        pub(super) static KEEP_DOMINATED: Cell<bool> = const { Cell::new(false) };
    }

    /// A seeded xorshift: each call draws a number below its argument.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        }
    }

    fn col(cap: &[f64], price: f64) -> BoundColumn {
        BoundColumn {
            cap: cap.to_vec(),
            price,
        }
    }

    fn solve(classes: &[BoundClass], columns: &[BoundColumn]) -> LpBound {
        let mut b = Budget::new(u64::MAX, None);
        lower_bound(2, classes, &[], columns, &mut b).expect("bound")
    }

    #[test]
    fn suffix_bound_equals_knapsack_1d_on_every_suffix() {
        // Ties in density (items 0 and 3), a pod free in one dimension (item 2), a NaN-free
        // mix of sizes; values all positive, as the knapsack's order has them.
        let item = |req: [f64; 2], count: f64| BoundItem {
            req: req.to_vec(),
            count,
            columns: vec![0],
            apart: None,
        };
        let items = [
            item([1.0, 2.0], 3.0),
            item([4.0, 1.0], 1.0),
            item([2.0, 0.0], 5.0),
            item([2.0, 4.0], 2.0),
            item([0.5, 3.0], 4.0),
        ];
        let values = [1.0, 3.5, 0.7, 2.0, 0.9];
        let order = [4, 1, 0, 3, 2];
        let suffix = SuffixBound::new(&order, &items, &values, 2);
        for k in 0..=order.len() {
            for d in 0..2 {
                for cap in [0.0, 0.75, 3.0, 7.5, 100.0] {
                    let want = knapsack_1d(&order[k..], &items, &values, d, cap);
                    let got = suffix.bound_1d(k, d, cap);
                    assert_eq!(got.to_bits(), want.to_bits(), "k {k}, d {d}, cap {cap}");
                }
            }
        }
    }

    #[test]
    fn node_counts_charge_their_columns() {
        // 3 cpu of demand; a 1-cpu node at 1.0, a 4-cpu node at 2.0. Resources alone buy
        // three quarters of the big node (1.5); three pods that may not share a node need
        // three nodes, cheapest as three small ones (3.0); two of them only fitting the big
        // type need two big nodes (4.0), which hold the demand as well.
        let columns = [col(&[1.0, 1.0], 1.0), col(&[4.0, 4.0], 2.0)];
        let classes = [BoundClass {
            demand: vec![3.0, 0.0],
            columns: vec![0, 1],
        }];
        let with = |counts: &[BoundCount]| {
            let mut b = Budget::new(u64::MAX, None);
            lower_bound(2, &classes, counts, &columns, &mut b)
                .expect("bound")
                .value
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(with(&[]), 1.5), "{}", with(&[]));
        let three = BoundCount {
            nodes: 3.0,
            columns: vec![0, 1],
        };
        assert!(close(with(std::slice::from_ref(&three)), 3.0));
        let two_big = BoundCount {
            nodes: 2.0,
            columns: vec![1],
        };
        assert!(close(with(std::slice::from_ref(&two_big)), 4.0));
        // Both: two big nodes and one more of either, the small one.
        assert!(close(with(&[three, two_big]), 5.0));
        // A count with nowhere to go has no bound.
        let mut b = Budget::new(u64::MAX, None);
        let nowhere = BoundCount {
            nodes: 1.0,
            columns: Vec::new(),
        };
        assert!(lower_bound(2, &classes, &[nowhere], &columns, &mut b).is_none());
    }

    #[test]
    fn one_class_is_the_fluid_optimum() {
        // 10 cpu, 10 GiB: the compute type gives cpu at 0.1 per unit, the memory type memory
        // at 0.05 per unit; buying 2.5 compute (4 cpu, 1 mem) + 3.75 memory (0, 2)… the
        // optimum mixes both: x_c = 2.5, x_m = 3.75 → 0.4·2.5 + 0.1·3.75 = 1.375.
        let columns = [col(&[4.0, 1.0], 0.4), col(&[0.0, 2.0], 0.1)];
        let classes = [BoundClass {
            demand: vec![10.0, 10.0],
            columns: vec![0, 1],
        }];
        let b = solve(&classes, &columns);
        assert!((b.value - 1.375).abs() < 1e-6, "{}", b.value);
    }

    #[test]
    fn classes_with_disjoint_columns_add_up() {
        let columns = [col(&[4.0, 4.0], 1.0), col(&[4.0, 4.0], 2.0)];
        let classes = [
            BoundClass {
                demand: vec![8.0, 1.0],
                columns: vec![0],
            },
            BoundClass {
                demand: vec![4.0, 1.0],
                columns: vec![1],
            },
        ];
        let b = solve(&classes, &columns);
        assert!((b.value - 4.0).abs() < 1e-6, "{}", b.value);
    }

    #[test]
    fn shared_columns_are_not_double_counted() {
        // Both classes may use the cheap column: one node's worth each, 2 × 1.0.
        let columns = [col(&[4.0, 4.0], 1.0), col(&[4.0, 4.0], 5.0)];
        let classes = [
            BoundClass {
                demand: vec![4.0, 0.0],
                columns: vec![0, 1],
            },
            BoundClass {
                demand: vec![0.0, 4.0],
                columns: vec![0],
            },
        ];
        let b = solve(&classes, &columns);
        // One cheap node holds both: the bound must not exceed 1.0.
        assert!(b.value <= 1.0 + 1e-9 && b.value > 0.99, "{}", b.value);
    }

    #[test]
    fn unservable_demand_has_no_bound() {
        let columns = [col(&[4.0, 0.0], 1.0)];
        let classes = [BoundClass {
            demand: vec![1.0, 1.0],
            columns: vec![0],
        }];
        let mut b = Budget::new(u64::MAX, None);
        assert!(lower_bound(2, &classes, &[], &columns, &mut b).is_none());
    }

    #[test]
    fn coupled_bound_keeps_each_pod_whole() {
        // A pod needs 1 cpu and 4 memory. Cpu is cheap on the compute type and memory on the
        // memory type, but a pod cannot split: the fluid bound mixes them, the coupled bound
        // knows every pod needs a whole general node (0.5 each) or a mix that holds it.
        let columns = [
            col(&[4.0, 1.0], 0.4),  // compute: no pod fits
            col(&[1.0, 16.0], 0.4), // memory: one pod (cpu-bound)
            col(&[2.0, 8.0], 1.0),  // general: two pods
        ];
        let item = BoundItem {
            req: vec![1.0, 4.0],
            count: 4.0,
            columns: vec![1, 2],
            apart: None,
        };
        let mut b = Budget::new(u64::MAX, None);
        let fluid = lower_bound(
            2,
            &[BoundClass {
                demand: vec![4.0, 16.0],
                columns: vec![0, 1, 2],
            }],
            &[],
            &columns,
            &mut b,
        )
        .unwrap();
        let (coupled, values) =
            coupled_bound(2, &[item], &columns, Effort::Budgeted, &mut b).unwrap();
        // Optimum: four memory nodes, 1.6.
        assert!(coupled <= 1.6 + 1e-9, "{coupled}");
        assert!(coupled > 1.6 - 1e-6, "{coupled}");
        assert!(fluid.value < coupled - 0.5, "{}", fluid.value);
        assert!((values[0] - 0.4).abs() < 1e-6);
    }

    /// The most valuable set of pods that fits `cap` with at most one pod per set kept
    /// apart, by trying every count of every item class.
    fn brute_knapsack(items: &[BoundItem], values: &[f64], cap: &[f64]) -> f64 {
        fn go(
            items: &[BoundItem],
            values: &[f64],
            left: &mut [f64],
            taken: &mut Vec<usize>,
        ) -> f64 {
            let Some((it, rest)) = items.split_first() else {
                return 0.0;
            };
            let (v, vs) = values.split_first().expect("a value per item");
            let mut best = go(rest, vs, left, taken);
            if it.apart.is_some_and(|a| taken.contains(&a)) {
                return best;
            }
            let most = it.per_node() as u32;
            for a in 1..=most {
                if it
                    .req
                    .iter()
                    .zip(left.iter())
                    .any(|(r, l)| f64::from(a) * r > *l)
                {
                    break;
                }
                for (l, r) in left.iter_mut().zip(&it.req) {
                    *l -= f64::from(a) * r;
                }
                taken.extend(it.apart);
                best = best.max(f64::from(a) * v + go(rest, vs, left, taken));
                if it.apart.is_some() {
                    taken.pop();
                }
                for (l, r) in left.iter_mut().zip(&it.req) {
                    *l += f64::from(a) * r;
                }
            }
            best
        }
        go(items, values, &mut cap.to_vec(), &mut Vec::new())
    }

    #[test]
    fn knapsack_keeps_one_pod_per_set_apart() {
        // Seeded instances mixing free item classes with members of two sets kept apart:
        // the exhaustive search (with and without resource prices) finds the brute-force
        // optimum and never puts two pods of one set on the node, and the Lagrangian bound
        // is never below that optimum.
        let mut next = xorshift(0x51_7cc1_b727_220a);
        let mut tighter = 0;
        for case in 0..300 {
            let dims = 1 + next(2) as usize;
            let n = 1 + next(7) as usize;
            let items: Vec<BoundItem> = (0..n)
                .map(|_| BoundItem {
                    req: (0..dims).map(|_| (1 + next(6)) as f64 * 0.5).collect(),
                    count: (1 + next(4)) as f64,
                    columns: vec![0],
                    apart: match next(3) {
                        0 => None,
                        k => Some(k as usize - 1),
                    },
                })
                .collect();
            let values: Vec<f64> = (0..n).map(|_| (1 + next(10)) as f64 * 0.25).collect();
            let cap: Vec<f64> = (0..dims).map(|_| (1 + next(12)) as f64).collect();
            let users: Vec<usize> = (0..n).collect();
            let want = brute_knapsack(&items, &values, &cap);
            let (l, prices) =
                lagrangian_ub(&users, &items, &values, dims, &cap).expect("an LP this small");
            assert!(l >= want - 1e-9, "case {case}: Lagrangian {l} below {want}");
            let frac = (0..dims)
                .map(|d| knapsack_1d(&users, &items, &values, d, cap[d]))
                .fold(f64::INFINITY, f64::min);
            tighter += usize::from(l < frac - 1e-9);
            for lambda in [None, Some(prices.as_slice())] {
                let mut b = Budget::new(u64::MAX, None);
                let (ub, found) = knapsack(
                    &users,
                    &items,
                    &values,
                    dims,
                    &cap,
                    u64::MAX,
                    lambda,
                    &mut b,
                );
                let got = found.as_ref().map_or(0.0, |f| f.0);
                assert!(
                    (got - want).abs() < 1e-9,
                    "case {case}: found {got}, optimum {want}"
                );
                assert!(
                    (ub - want).abs() < 1e-9,
                    "case {case}: bound {ub}, optimum {want}"
                );
                let counts = found.map(|f| f.1).unwrap_or_default();
                for set in [0, 1] {
                    let held: u32 = counts
                        .iter()
                        .filter(|(i, _)| items[*i].apart == Some(set))
                        .map(|(_, k)| k)
                        .sum();
                    assert!(
                        held <= 1,
                        "case {case}: {held} pods of set {set} on one node"
                    );
                }
            }
        }
        assert!(
            tighter > 0,
            "the Lagrangian bound beats one dimension at a time somewhere"
        );
    }

    #[test]
    fn coupled_bound_counts_a_node_per_pod_kept_apart() {
        // Three 1-cpu pods; a 1-cpu node at 1.0 and a 4-cpu node at 2.5. Together they fit
        // one big node (2.5; a pattern holds no more pods than there are). Kept apart, each
        // needs a node of its own: three small ones (3.0).
        let columns = [col(&[1.0, 1.0], 1.0), col(&[4.0, 4.0], 2.5)];
        let item = |apart| BoundItem {
            req: vec![1.0, 1.0],
            count: 3.0,
            columns: vec![0, 1],
            apart,
        };
        let mut b = Budget::new(u64::MAX, None);
        for (apart, want) in [(None, 2.5), (Some(0), 3.0)] {
            for effort in [Effort::Budgeted, Effort::Proven] {
                let (bound, _) =
                    coupled_bound(2, &[item(apart)], &columns, effort, &mut b).expect("a bound");
                assert!(
                    bound <= want + 1e-9 && bound > want - 1e-6,
                    "{apart:?} {effort:?}: {bound}, want {want}"
                );
            }
        }
    }

    #[test]
    fn knapsack_search_decides_every_node_as_the_reference() {
        // A few hundred seeded instances with zero requests (free dimensions), equal
        // densities, and node limits that abort some searches.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for case in 0..400 {
            let dims = 1 + next(4) as usize;
            let n = 1 + next(12) as usize;
            let items: Vec<BoundItem> = (0..n)
                .map(|_| BoundItem {
                    req: (0..dims)
                        .map(|_| {
                            if next(4) == 0 {
                                0.0
                            } else {
                                (1 + next(8)) as f64 * 0.5
                            }
                        })
                        .collect(),
                    count: (1 + next(6)) as f64,
                    columns: vec![0],
                    apart: None,
                })
                .collect();
            let values: Vec<f64> = (0..n).map(|_| (1 + next(10)) as f64 * 0.25).collect();
            let cap: Vec<f64> = (0..dims).map(|_| (2 + next(30)) as f64).collect();
            let max_nodes = if case % 3 == 0 { 1 + next(40) } else { 100_000 };
            let users: Vec<usize> = (0..n).collect();
            let mut budget = Budget::new(u64::MAX, None);
            let (ub, found) = knapsack(
                &users,
                &items,
                &values,
                dims,
                &cap,
                max_nodes,
                None,
                &mut budget,
            );

            let mut reference = Budget::new(u64::MAX, None);
            REFERENCE_PRUNING.set(true);
            let want = knapsack(
                &users,
                &items,
                &values,
                dims,
                &cap,
                max_nodes,
                None,
                &mut reference,
            );
            REFERENCE_PRUNING.set(false);
            assert_eq!(ub.to_bits(), want.0.to_bits(), "case {case}");
            assert_eq!(found, want.1, "case {case}");
            assert_eq!(
                budget.spent(),
                reference.spent(),
                "case {case}: the same nodes are searched"
            );
        }
    }

    #[test]
    fn dropping_dominated_columns_keeps_the_bound() {
        // Seeded instances with many near-duplicate columns (scaled copies, some dominated,
        // some not) and classes sharing some of them: the bound with every row and the
        // bound without the dominated ones agree.
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut dropped_any = false;
        for case in 0..200 {
            let dims = 1 + next(3) as usize;
            let n_cols = 2 + next(25) as usize;
            let columns: Vec<BoundColumn> = (0..n_cols)
                .map(|_| BoundColumn {
                    cap: (0..dims).map(|_| (1 + next(16)) as f64).collect(),
                    price: (1 + next(40)) as f64 * 0.1,
                })
                .collect();
            let n_classes = 1 + next(4) as usize;
            let classes: Vec<BoundClass> = (0..n_classes)
                .map(|_| {
                    let mut cols: Vec<usize> = (0..n_cols).filter(|_| next(3) > 0).collect();
                    if cols.is_empty() {
                        cols.push(next(n_cols as u64) as usize);
                    }
                    BoundClass {
                        demand: (0..dims).map(|_| next(50) as f64).collect(),
                        columns: cols,
                    }
                })
                .collect();
            // Node counts on random column sets, so that pruning must keep a column a
            // count charges when no dominator is charged by it too.
            let counts: Vec<BoundCount> = (0..next(3))
                .map(|_| BoundCount {
                    nodes: next(6) as f64,
                    columns: (0..n_cols).filter(|_| next(2) > 0).collect(),
                })
                .collect();
            let mut users = users_of(&classes, n_cols);
            let before = users.iter().filter(|u| !u.is_empty()).count();
            drop_dominated(&columns, &mut users, |_| true);
            dropped_any |= users.iter().filter(|u| !u.is_empty()).count() < before;

            let mut b = Budget::new(u64::MAX, None);
            let pruned = lower_bound(dims, &classes, &counts, &columns, &mut b).map(|l| l.value);
            KEEP_DOMINATED.set(true);
            let mut b = Budget::new(u64::MAX, None);
            let full = lower_bound(dims, &classes, &counts, &columns, &mut b).map(|l| l.value);
            KEEP_DOMINATED.set(false);
            match (pruned, full) {
                (Some(p), Some(f)) => {
                    assert!((p - f).abs() <= 1e-6 * (1.0 + f), "case {case}: {p} vs {f}")
                }
                (p, f) => assert_eq!(p.is_some(), f.is_some(), "case {case}"),
            }
        }
        assert!(dropped_any, "the instances exercise the pruning");
    }
}
