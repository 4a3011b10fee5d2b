//! The master LP of Gilmore–Gomory column generation, shared by the LP rounding
//! ([`super::lpround`]) and the configuration-LP bound ([`super::bound::coupled_bound`]).
//!
//! Primal: buy fractional copies `x_p ≥ 0` of node patterns so that every pod class `c` is
//! covered, `Σ_p a_cp x_p ≥ n_c`, at least price `Σ_p c_p x_p`. Dual: a value `π_c ≥ 0` per
//! class with `Σ_c a_cp π_c ≤ c_p` for every pattern, maximising `Σ_c n_c π_c`.
//!
//! Pricing needs the dual. microlp solves an LP whose rows are the patterns (hundreds) about
//! five times slower than one whose rows are the classes (tens), and it reports no dual
//! values, so [`values`] solves the primal first and then the dual restricted to the
//! patterns the primal buys: by complementary slackness those are the rows an optimal dual
//! meets with equality, so the restricted dual has the same optimum. Rows of other patterns
//! that its answer violates join it and it is solved again, so the answer is feasible for
//! every pattern, as the full dual's would be.

use super::lp::{Lp, Var};

/// One column of the master: a pattern's pods per class and its price.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column<'a> {
    /// `(class, pods of it)`, each class at most once.
    pub counts: &'a [(usize, u32)],
    /// What one copy of the pattern costs.
    pub price: f64,
}

/// Restricted-dual solves before the full dual is solved instead.
const RESTRICTED_ROUNDS: usize = 8;
/// A pattern bought in at least this many copies is taken to be in the primal's basis.
const BOUGHT: f64 = 1e-9;

/// The primal: copies of each column (`x_p`, clamped to finite non-negative values), or
/// `None` when the LP solver fails (a class with demand that no column covers, say).
pub(crate) fn copies(demand: &[f64], columns: &[Column<'_>]) -> Option<Vec<f64>> {
    let mut lp = Lp::minimise();
    let x: Vec<Var> = columns.iter().map(|col| lp.var(col.price)).collect();
    let mut rows: Vec<Vec<(Var, f64)>> = vec![Vec::new(); demand.len()];
    for (p, col) in columns.iter().enumerate() {
        for &(c, k) in col.counts {
            rows[c].push((x[p], f64::from(k)));
        }
    }
    for (c, row) in rows.into_iter().enumerate() {
        if demand[c] > 0.0 {
            lp.at_least(row, demand[c]);
        }
    }
    Some(lp.solve()?.into_iter().map(clean).collect())
}

/// Both sides of the master, solved once.
pub(crate) struct Solved {
    /// An optimal dual: a finite value `π_c ≥ 0` per class.
    pub values: Vec<f64>,
    /// The optimal primal found on the way, as [`copies`] gives it.
    pub copies: Vec<f64>,
}

/// An optimal dual of the master (see the module docs), with the primal it was found from.
/// `None` when the LP solver fails.
pub(crate) fn values(demand: &[f64], columns: &[Column<'_>]) -> Option<Solved> {
    let x = copies(demand, columns)?;
    let mut rows: Vec<usize> = (0..columns.len()).filter(|&p| x[p] > BOUGHT).collect();
    for _ in 0..RESTRICTED_ROUNDS {
        let pi = dual(demand, columns, &rows)?;
        let violated: Vec<usize> = (0..columns.len())
            .filter(|&p| worth(columns[p].counts, &pi) > columns[p].price * (1.0 + 1e-9) + 1e-12)
            .filter(|p| rows.binary_search(p).is_err())
            .collect();
        if violated.is_empty() {
            return Some(Solved {
                values: pi,
                copies: x,
            });
        }
        rows.extend(violated);
        rows.sort_unstable();
    }
    let all: Vec<usize> = (0..columns.len()).collect();
    let values = dual(demand, columns, &all)?;
    Some(Solved { values, copies: x })
}

/// What a pattern's pods are worth at the values `pi`.
fn worth(counts: &[(usize, u32)], pi: &[f64]) -> f64 {
    counts.iter().map(|&(c, k)| f64::from(k) * pi[c]).sum()
}

/// The dual with only the given columns' rows.
fn dual(demand: &[f64], columns: &[Column<'_>], rows: &[usize]) -> Option<Vec<f64>> {
    let mut lp = Lp::maximise();
    let pi: Vec<Var> = demand.iter().map(|&n| lp.var(n)).collect();
    for &p in rows {
        let row = columns[p]
            .counts
            .iter()
            .map(|&(c, k)| (pi[c], f64::from(k)));
        lp.at_most(row, columns[p].price);
    }
    Some(lp.solve()?.into_iter().map(clean).collect())
}

/// A solver value as a finite non-negative number.
pub(crate) fn clean(v: f64) -> f64 {
    let v = v.max(0.0);
    if v.is_finite() { v } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The full dual, solved directly: the reference for [`values`].
    fn full_dual(demand: &[f64], columns: &[Column<'_>]) -> Vec<f64> {
        let all: Vec<usize> = (0..columns.len()).collect();
        dual(demand, columns, &all).expect("dual")
    }

    fn objective(demand: &[f64], pi: &[f64]) -> f64 {
        demand.iter().zip(pi).map(|(n, v)| n * v).sum()
    }

    #[test]
    fn complementary_pods_are_valued_by_the_pair() {
        // Two classes that fill a node only together: each is worth half the node.
        let both = [(0, 1), (1, 1)];
        let alone0 = [(0, 1)];
        let alone1 = [(1, 1)];
        let columns = [
            Column {
                counts: &alone0,
                price: 0.7,
            },
            Column {
                counts: &alone1,
                price: 0.7,
            },
            Column {
                counts: &both,
                price: 1.0,
            },
        ];
        let demand = [60.0, 60.0];
        let x = copies(&demand, &columns).expect("primal");
        assert!((x[2] - 60.0).abs() < 1e-6, "{x:?}");
        let pi = values(&demand, &columns).expect("dual").values;
        assert!((objective(&demand, &pi) - 60.0).abs() < 1e-6, "{pi:?}");
        for col in &columns {
            assert!(worth(col.counts, &pi) <= col.price + 1e-9, "{pi:?}");
        }
    }

    proptest! {
        /// The restricted dual answers with the full dual's optimum, feasible for every
        /// pattern, and equal to the primal's optimum (strong duality).
        #[test]
        fn the_restricted_dual_is_optimal(
            demand in prop::collection::vec(0u32..40, 1..6),
            raw in prop::collection::vec(
                (prop::collection::vec(0u32..5, 6), 1u32..100),
                1..30,
            ),
        ) {
            let classes = demand.len();
            let demand: Vec<f64> = demand.into_iter().map(f64::from).collect();
            let mut counts: Vec<Vec<(usize, u32)>> = raw
                .iter()
                .map(|(ks, _)| {
                    ks.iter()
                        .take(classes)
                        .enumerate()
                        .filter(|&(_, &k)| k > 0)
                        .map(|(c, &k)| (c, k))
                        .collect()
                })
                .collect();
            // Every class alone on some pattern, so the primal is feasible.
            for c in 0..classes {
                counts.push(vec![(c, 1)]);
            }
            let prices: Vec<f64> = raw
                .iter()
                .map(|&(_, p)| f64::from(p) / 10.0)
                .chain((0..classes).map(|c| 10.0 + c as f64))
                .collect();
            let columns: Vec<Column<'_>> = counts
                .iter()
                .zip(&prices)
                .map(|(c, &price)| Column { counts: c, price })
                .collect();
            let solved = values(&demand, &columns).expect("dual");
            prop_assert_eq!(&solved.copies, &copies(&demand, &columns).expect("primal"));
            let pi = solved.values;
            for col in &columns {
                prop_assert!(worth(col.counts, &pi) <= col.price * (1.0 + 1e-6) + 1e-9);
            }
            let x = copies(&demand, &columns).expect("primal");
            let primal: f64 = x.iter().zip(&columns).map(|(x, c)| x * c.price).sum();
            let reference = objective(&demand, &full_dual(&demand, &columns));
            let got = objective(&demand, &pi);
            prop_assert!((got - reference).abs() <= 1e-6 * (1.0 + reference), "{got} vs {reference}");
            prop_assert!((got - primal).abs() <= 1e-6 * (1.0 + primal), "{got} vs {primal}");
        }
    }
}
